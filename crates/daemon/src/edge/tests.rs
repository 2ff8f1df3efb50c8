//! The listener's books (issue 27, item 6): source filter, handshake slots, refusal log.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use super::*;

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

/// DRBD accepts a peer connection only from a configured peer address; the port does not
/// count, and a dual-stack listener's mapped form of an IPv4 peer is that peer.
#[test]
fn the_source_filter_admits_configured_peers_only() {
    let filter = SourceFilter::new([v4(2), v4(3), v4(2)]);
    let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 3).to_ipv6_mapped());
    let cases = [
        (v4(2), true, "a peer"),
        (v4(3), true, "the other peer"),
        (mapped, true, "a peer seen by a dual-stack listener"),
        (v4(4), false, "a neighbour on the same network"),
        (
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            false,
            "loopback when no peer is there",
        ),
        (IpAddr::V6(Ipv6Addr::LOCALHOST), false, "IPv6 loopback"),
    ];
    for (source, allowed, what) in cases {
        assert_eq!(filter.allows(source), allowed, "{what}: {source}");
    }
    assert!(
        !SourceFilter::new([]).allows(v4(2)),
        "a resource without peers admits nobody"
    );
    assert!(same_host(mapped, v4(3)) && !same_host(v4(2), v4(3)));
}

/// Capacity holds whatever arrives, and the evicted one is the oldest of the least advanced:
/// idle connections make room for each other and never for themselves at the expense of a
/// handshake that got further.
#[test]
fn handshake_slots_evict_the_oldest_of_the_least_advanced() {
    let mut slots = HandshakeSlots::new(3);
    let first = slots.admit("idle-1");
    let real = slots.admit("real");
    let _ = slots.admit("idle-2");
    assert!(first.evicted.is_none() && real.evicted.is_none());
    slots.advance(real.ticket, Stage::Introduced);
    assert_eq!(
        slots.admit("idle-3").evicted,
        Some("idle-1"),
        "the oldest idle one goes first"
    );
    for n in 4..100 {
        let admitted = slots.admit("idle-n");
        assert!(
            admitted.evicted.is_some_and(|h| h != "real"),
            "idle connection {n} never evicts the introduced one"
        );
        assert_eq!(slots.len(), 3, "at capacity, never over");
    }
    assert_eq!(
        slots.release(real.ticket),
        Some("real"),
        "the real handshake still holds its slot"
    );
    assert_eq!(slots.len(), 2);
}

/// When every slot is past its `Hello` (a staller that knows the names), a new connection
/// still gets in: the oldest goes, since a real handshake takes only a few round trips.
#[test]
fn handshake_slots_admit_a_newcomer_when_every_slot_advanced() {
    let mut slots = HandshakeSlots::new(2);
    let a = slots.admit('a');
    let b = slots.admit('b');
    slots.advance(a.ticket, Stage::Introduced);
    slots.advance(b.ticket, Stage::Introduced);
    let c = slots.admit('c');
    assert_eq!(c.evicted, Some('a'));
    assert_eq!(slots.release(a.ticket), None, "an evicted slot is gone");
    slots.advance(a.ticket, Stage::Introduced);
    assert_eq!(slots.len(), 2, "advancing a gone ticket changes nothing");
    assert_eq!(slots.release(c.ticket), Some('c'));
    assert_eq!(slots.release(b.ticket), Some('b'));
    assert_eq!(slots.len(), 0);
}

const INTERVAL: Duration = Duration::from_secs(60);

/// One line per address and interval; the refusals held back are summarized when the window
/// ends, and a steady flood keeps to one summary per interval.
#[test]
fn refusals_are_logged_once_per_address_and_interval() {
    let start = Instant::now();
    let at = |seconds: u64| start + Duration::from_secs(seconds);
    let mut log = RefusalLog::new(INTERVAL, 4);
    assert_eq!(
        log.note(v4(9), "not a peer", at(0)),
        Refusal::Log {
            suppressed_before: 0
        }
    );
    assert_eq!(
        log.note(v4(8), "not a peer", at(1)),
        Refusal::Log {
            suppressed_before: 0
        },
        "another address is its own window"
    );
    for second in 1..30 {
        assert_eq!(log.note(v4(9), "not a peer", at(second)), Refusal::Suppress);
    }
    assert!(log.expire(at(59)).is_empty(), "no window has ended");
    let summaries = log.expire(at(60));
    assert_eq!(
        summaries,
        vec![Summary {
            source: Some(v4(9)),
            suppressed: 29,
            last_reason: "not a peer".into()
        }]
    );
    assert_eq!(
        log.len(),
        2,
        "the flooding address keeps its window, the quiet one's is still open"
    );
    assert_eq!(
        log.note(v4(9), "not a peer", at(61)),
        Refusal::Suppress,
        "a steady flood stays summarized"
    );
    assert_eq!(log.expire(at(61)), vec![], "v4(8) ended quietly");
    assert_eq!(log.len(), 1, "a quiet address is forgotten");
    assert_eq!(log.expire(at(120)).len(), 1);
    assert!(log.expire(at(180)).is_empty());
    assert_eq!(log.len(), 0, "everything forgotten once quiet");
}

/// Without `expire` in between, the first refusal of the next window carries the count.
#[test]
fn a_late_refusal_carries_the_count_of_the_window_before() {
    let start = Instant::now();
    let mut log = RefusalLog::new(INTERVAL, 4);
    let _ = log.note(v4(1), "x", start);
    let _ = log.note(v4(1), "x", start);
    assert_eq!(
        log.note(v4(1), "x", start + INTERVAL),
        Refusal::Log {
            suppressed_before: 1
        }
    );
}

/// Bounded memory: beyond the table's capacity every address shares one window, and reasons
/// are cut (at a character boundary).
#[test]
fn the_refusal_log_is_bounded() {
    let start = Instant::now();
    let mut log = RefusalLog::new(INTERVAL, 2);
    let long = "é".repeat(REFUSAL_REASON_BYTES_MAX);
    let mut logged = 0;
    for last in 0..=255u8 {
        for _ in 0..3 {
            if matches!(log.note(v4(last), &long, start), Refusal::Log { .. }) {
                logged += 1;
            }
        }
    }
    assert_eq!(logged, 3, "two addresses and the bucket of all others");
    assert_eq!(log.len(), 2);
    let summaries = log.expire(start + INTERVAL);
    assert_eq!(summaries.len(), 3);
    let others = summaries
        .iter()
        .find(|s| s.source.is_none())
        .expect("a summary of the other addresses");
    assert_eq!(others.suppressed, 254 * 3 - 1);
    assert!(
        summaries
            .iter()
            .all(|s| s.last_reason.len() <= REFUSAL_REASON_BYTES_MAX
                && s.last_reason.starts_with('é'))
    );
}
