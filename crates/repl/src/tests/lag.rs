//! Asynchronous replication within bounds (`engine/lag.rs`): the peer is durably marked
//! possibly stale before protocol A takes effect, refuses promotion while marked, is cleared
//! once it confirmed everything, and the lag bound holds writes back instead of letting the
//! unconfirmed data grow past it.

use super::*;

const KIB4: usize = 4096;

impl Pair {
    fn set_protocol(&mut self, protocol: Protocol) {
        let mut out = Vec::new();
        self.nodes[A]
            .set_protocol(self.now, 1, protocol, &mut out)
            .expect("set_protocol");
        self.route(A, out);
    }

    fn set_bound(&mut self, bytes_max: u64, time_max: Duration) {
        let mut out = Vec::new();
        self.nodes[A]
            .set_lag_bound(
                self.now,
                1,
                Some(LagBound {
                    bytes_max,
                    time_max,
                    throttle: None,
                }),
                &mut out,
            )
            .expect("bound");
        self.route(A, out);
    }

    fn lag(&self) -> LagStatus {
        self.nodes[A].status().peers[0].lag
    }

    fn b_possibly_stale(&self) -> bool {
        self.nodes[B].status().volumes[0].possibly_stale
    }

    /// Runs A's local I/O only: the peer neither receives nor answers.
    fn run_a_locally(&mut self) {
        while self.run_local(A) {}
    }

    /// A Pair under protocol C switched to A, the mark confirmed.
    fn asynchronous() -> Pair {
        let mut pair = Pair::new(Protocol::C);
        pair.set_protocol(Protocol::A);
        pair.deliver_all();
        assert_eq!(pair.lag().effective_protocol, Some(Protocol::A));
        pair
    }
}

#[test]
fn protocol_a_takes_effect_only_once_the_peer_durably_marked_itself() {
    let mut pair = Pair::new(Protocol::C);
    pair.set_protocol(Protocol::A);
    // The mark is on its way: a write now still waits for the peer (protocol C).
    pair.write(1, 0, 7, KIB4);
    pair.run_a_locally();
    assert!(!pair.is_complete(1), "completed before the peer was marked");
    assert_eq!(pair.lag().effective_protocol, Some(Protocol::C));
    // B receives the mark and the write, persists the mark, answers.
    pair.deliver_all();
    assert!(pair.is_complete(1));
    assert!(pair.b_possibly_stale());
    assert!(
        pair.persisted[B].as_ref().is_some_and(|m| m.possibly_stale),
        "the mark is durable on B"
    );
    assert_eq!(pair.lag().effective_protocol, Some(Protocol::A));
    assert!(pair.lag().peer_possibly_stale);
    // Now a write completes once it is in the socket, before B saw it.
    pair.write(2, 8192, 9, KIB4);
    pair.run_a_locally();
    assert!(pair.is_complete(2), "protocol A completes when sent");
    assert_eq!(
        pair.lag().unreplicated_bytes,
        2 * KIB4 as u64,
        "write 1 is not yet durable on B either"
    );
    pair.confirm_all();
    assert_eq!(
        pair.lag().unreplicated_bytes,
        0,
        "B's barrier acks (after its flushes) confirm both"
    );
}

#[test]
fn a_possibly_stale_node_refuses_promotion_until_cleared_or_forced() {
    let mut pair = Pair::asynchronous();
    pair.write(1, 0, 1, KIB4);
    pair.deliver_all();
    pair.demote(A);
    let mut out = Vec::new();
    // Demoting A went back to protocol C and, everything being confirmed, cleared the mark.
    assert!(
        !pair.b_possibly_stale(),
        "a drained demotion clears the mark"
    );
    // Mark again and cut the link before anything can clear it.
    pair.promote(A, Promotion::Normal);
    pair.set_protocol(Protocol::A);
    pair.deliver_all();
    assert!(pair.b_possibly_stale());
    pair.disconnect();
    pair.demote(A);
    assert_eq!(
        pair.nodes[B].promote(Promotion::Normal, &mut out),
        Err(StateError::PossiblyStale)
    );
    pair.nodes[B]
        .promote(Promotion::Forced, &mut out)
        .expect("--force");
    assert!(
        !pair.b_possibly_stale(),
        "--force accepts the data as it is"
    );
}

#[test]
fn returning_to_protocol_c_clears_the_mark_after_the_last_async_write_is_confirmed() {
    let mut pair = Pair::asynchronous();
    pair.write(1, 0, 1, KIB4);
    pair.run_a_locally();
    assert!(pair.is_complete(1));
    pair.set_protocol(Protocol::C);
    assert_eq!(pair.lag().effective_protocol, Some(Protocol::C));
    assert!(
        pair.lag().peer_possibly_stale,
        "write 1 is not confirmed yet"
    );
    pair.confirm_all();
    assert!(!pair.lag().peer_possibly_stale);
    assert!(!pair.b_possibly_stale());
    assert!(pair.persisted[B]
        .as_ref()
        .is_some_and(|m| !m.possibly_stale));
}

#[test]
fn the_byte_bound_holds_writes_until_the_peer_confirms() {
    let mut pair = Pair::asynchronous();
    pair.set_bound(4 * KIB4 as u64, Duration::from_secs(60));
    for request in 1..=6 {
        pair.write(request, request * 2 * KIB4 as u64, request as u8, KIB4);
    }
    pair.run_a_locally();
    let done: Vec<RequestId> = (1..=6).filter(|&r| pair.is_complete(r)).collect();
    assert_eq!(
        done,
        vec![1, 2, 3, 4],
        "four 4 KiB writes fit the 16 KiB bound"
    );
    assert_eq!(pair.lag().unreplicated_bytes, 4 * KIB4 as u64);
    assert_eq!(pair.lag().waiting_writes, 2);
    pair.confirm_all();
    assert!(
        pair.is_complete(5) && pair.is_complete(6),
        "confirmations let the held writes in"
    );
    assert_eq!(pair.lag().unreplicated_bytes, 0);
    assert_eq!(pair.disks[A], pair.disks[B]);
}

/// Issue 29: with the manager's throttle, writes past the throttle's start wait for credit
/// that confirmations earn, short of the hard bound; an empty backlog is never throttled.
#[test]
fn the_throttle_holds_writes_short_of_the_bound_until_confirmations_earn_credit() {
    let mut pair = Pair::asynchronous();
    let mut admit_per_ack_permille = [0; LAG_THROTTLE_STEPS];
    for (step, admit) in admit_per_ack_permille.iter_mut().enumerate() {
        *admit = 2000 * (LAG_THROTTLE_STEPS - 1 - step) as u32 / LAG_THROTTLE_STEPS as u32;
    }
    let throttle = LagThrottle {
        start_permille: 500,
        admit_per_ack_permille,
    };
    let bound = LagBound {
        bytes_max: 16 * KIB4 as u64,
        time_max: Duration::from_secs(60),
        throttle: Some(throttle),
    };
    let mut out = Vec::new();
    pair.nodes[A]
        .set_lag_bound(pair.now, 1, Some(bound), &mut out)
        .expect("bound");
    pair.route(A, out);
    for request in 1..=10 {
        pair.write(request, request * 2 * KIB4 as u64, request as u8, KIB4);
    }
    pair.run_a_locally();
    let done: Vec<RequestId> = (1..=10).filter(|&r| pair.is_complete(r)).collect();
    assert_eq!(
        done,
        (1..=8).collect::<Vec<_>>(),
        "half the 64 KiB bound, then the throttle holds (the bound alone would admit 16)"
    );
    assert_eq!(pair.lag().waiting_writes, 2);
    pair.confirm_all();
    assert!(
        pair.is_complete(9) && pair.is_complete(10),
        "confirmations let the held writes in"
    );
    pair.confirm_all();
    assert_eq!(pair.lag().unreplicated_bytes, 0);
    assert_eq!(pair.disks[A], pair.disks[B]);
}

#[test]
fn a_single_write_larger_than_the_bound_still_runs_alone() {
    let mut pair = Pair::asynchronous();
    pair.set_bound(KIB4 as u64, Duration::from_secs(60));
    pair.write(1, 0, 1, 4 * KIB4);
    pair.write(2, 8 * KIB4 as u64, 2, KIB4);
    pair.run_a_locally();
    assert!(pair.is_complete(1));
    assert!(
        !pair.is_complete(2),
        "the second waits for the first to be confirmed"
    );
    pair.confirm_all();
    assert!(pair.is_complete(2));
}

#[test]
fn the_time_bound_holds_writes_while_the_oldest_is_too_old() {
    let mut pair = Pair::asynchronous();
    pair.set_bound(1 << 30, Duration::from_millis(500));
    pair.write(1, 0, 1, KIB4);
    pair.run_a_locally();
    assert!(pair.is_complete(1));
    pair.tick(A, Duration::from_millis(600));
    pair.write(2, 2 * KIB4 as u64, 2, KIB4);
    pair.run_a_locally();
    assert!(
        !pair.is_complete(2),
        "the oldest unconfirmed write is 600 ms old"
    );
    assert!(pair.lag().oldest_age_ms >= 600);
    pair.confirm_all();
    assert!(pair.is_complete(2));
}

/// Issue 29 (srm-live's bandwidth drop): the time bound counts the backlog's drain time at
/// the rate the peer confirms it, so a slow link holds writes before the oldest is too old.
/// Before, the backlog a fast link had let in took 3.5 s to drain at 10 MiB/s against a 2 s
/// bound, and writes stopped only once the oldest was 2 s old.
#[test]
fn the_time_bound_holds_writes_the_measured_drain_rate_would_keep_too_long() {
    let mut pair = Pair::asynchronous();
    pair.set_bound(1 << 30, Duration::from_secs(1));
    pair.write(1, 0, 1, KIB4);
    pair.run_a_locally();
    pair.tick(A, Duration::from_millis(100));
    pair.write(2, 2 * KIB4 as u64, 2, KIB4);
    pair.run_a_locally();
    // Epoch 1 is confirmed with write 2 still unconfirmed: the meter's window opens.
    pair.deliver_all();
    assert_eq!(pair.lag().unreplicated_bytes, KIB4 as u64);
    pair.tick(A, Duration::from_millis(500));
    pair.write(3, 4 * KIB4 as u64, 3, KIB4);
    pair.run_a_locally();
    // Write 2 took 500 ms to confirm: 8 KiB/s, and write 3 is still in the backlog.
    pair.deliver_all();
    assert!(pair.is_complete(3));
    assert_eq!(pair.lag().unreplicated_bytes, KIB4 as u64);
    pair.write(4, 6 * KIB4 as u64, 4, KIB4);
    pair.run_a_locally();
    assert!(
        !pair.is_complete(4),
        "8 KiB would take the measured link 1 s to drain"
    );
    assert!(pair.lag().oldest_age_ms < 1000, "not by the oldest's age");
    pair.confirm_all();
    assert!(pair.is_complete(4));
    pair.confirm_all();
    assert_eq!(pair.disks[A], pair.disks[B]);
}

#[test]
fn the_bound_applies_only_under_protocol_a() {
    let mut pair = Pair::new(Protocol::C);
    pair.set_bound(KIB4 as u64, Duration::from_millis(1));
    for request in 1..=4 {
        pair.write(request, request * 2 * KIB4 as u64, 1, KIB4);
    }
    pair.deliver_all();
    assert!((1..=4).all(|r| pair.is_complete(r)));
}

#[test]
fn a_reconnect_marks_again_when_async_is_still_wanted_and_clears_otherwise() {
    let mut pair = Pair::asynchronous();
    pair.disconnect();
    pair.connect();
    assert_eq!(
        pair.lag().effective_protocol,
        Some(Protocol::A),
        "re-marked after the reconnect"
    );
    assert!(pair.b_possibly_stale());
    pair.set_protocol(Protocol::C);
    pair.disconnect();
    pair.connect();
    pair.deliver_all();
    assert!(
        !pair.b_possibly_stale(),
        "the Primary clears a mark left from before"
    );
}

#[test]
fn only_the_primary_may_mark_and_a_stranger_may_not_clear() {
    // A Secondary asked for protocol A marks nobody until it is promoted.
    let mut pair = Pair::new(Protocol::C);
    pair.demote(A);
    pair.set_protocol(Protocol::A);
    pair.deliver_all();
    assert!(!pair.b_possibly_stale());
    pair.promote(A, Promotion::Normal);
    pair.deliver_all();
    assert!(pair.b_possibly_stale(), "the promotion started the marking");
    // B (Secondary) sending a clear to A's peer side is ignored: only A may clear B.
    let mut out = Vec::new();
    pair.nodes[A].peer_message(
        pair.now,
        1,
        PeerMessage::StaleMark { stale: false },
        &mut out,
    );
    assert!(out.iter().any(|a| matches!(
        a,
        Action::SendControl {
            message: PeerMessage::StaleMarkAck { stale: false },
            ..
        }
    )));
    assert!(pair.nodes[A].status().peers[0].connection == ConnState::Connected);
}

#[test]
fn a_mark_sent_to_a_primary_is_a_protocol_error() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A].peer_message(
        pair.now,
        1,
        PeerMessage::StaleMark { stale: true },
        &mut out,
    );
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Disconnect {
            state: ConnState::ProtocolError,
            reason: DisconnectReason::Violation(PeerViolation::StaleMarkToPrimary),
            ..
        }
    )));
}

#[test]
fn reconfigure_applies_a_new_configured_protocol_without_marking() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    let config = PeerConfig {
        protocol: Protocol::A,
        ..peer_config(1, Protocol::C)
    };
    pair.nodes[A]
        .reconfigure_peer(pair.now, config, &mut out)
        .expect("adjust");
    pair.route(A, out);
    pair.write(1, 0, 1, KIB4);
    pair.run_a_locally();
    assert!(
        pair.is_complete(1),
        "configured protocol A completes when sent"
    );
    pair.deliver_all();
    assert!(
        !pair.b_possibly_stale(),
        "a configured protocol A is DRBD's, not the manager's: no mark"
    );
    let mut out = Vec::new();
    let bad = PeerConfig {
        max_buffers_pages: 0,
        ..peer_config(1, Protocol::C)
    };
    assert!(matches!(
        pair.nodes[A].reconfigure_peer(pair.now, bad, &mut out),
        Err(StateError::InvalidSetting(_))
    ));
    let unknown = peer_config(7, Protocol::C);
    assert_eq!(
        pair.nodes[A].reconfigure_peer(pair.now, unknown, &mut out),
        Err(StateError::NoSuchPeer(7))
    );
}

#[test]
fn lowering_max_buffers_during_a_resync_drains_and_finishes() {
    let mut pair = Pair::split(400);
    for block in 0..64u64 {
        pair.write_alone(A, block + 1, block * 8192, 3, 4096);
    }
    pair.connect();
    assert_eq!(
        pair.replication(B),
        ReplState::SyncTarget,
        "the resync is under way"
    );
    // B is the sync target: shrink its window to one page while requests are out.
    let mut out = Vec::new();
    let small = PeerConfig {
        max_buffers_pages: 1,
        ..peer_config(0, Protocol::C)
    };
    pair.nodes[B]
        .reconfigure_peer(pair.now, small, &mut out)
        .expect("adjust");
    pair.route(B, out);
    pair.sync_until_quiet(500);
    pair.assert_in_sync();
}

#[test]
fn peer_and_local_stats_count_confirmations_and_reset_when_taken() {
    let mut pair = Pair::new(Protocol::C);
    for request in 1..=3 {
        pair.write(request, request * 2 * KIB4 as u64, 1, KIB4);
    }
    pair.tick(A, Duration::from_millis(5));
    pair.deliver_all();
    let stats = pair.nodes[A].take_peer_stats(1);
    assert_eq!((stats.acks, stats.acked_bytes), (3, 3 * KIB4 as u64));
    assert!(
        stats.ack_latency_max >= Duration::from_millis(5),
        "the acks came after the tick"
    );
    assert_eq!(
        pair.nodes[A].take_peer_stats(1),
        PeerStats::default(),
        "taking resets"
    );
    assert_eq!(pair.nodes[A].take_local_stats().writes, 3);
    assert_eq!(pair.nodes[A].take_local_stats().writes, 0);
}

#[test]
fn a_round_trip_probe_measures_the_link_and_never_fails_it() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A].probe_rtt(pair.now, 1, &mut out);
    assert!(
        out.iter().any(|a| matches!(
            a,
            Action::SendControl {
                message: PeerMessage::Ping,
                ..
            }
        )),
        "a probe is a ping"
    );
    pair.route(A, out);
    // A second probe while the first is outstanding sends nothing.
    let mut out = Vec::new();
    pair.nodes[A].probe_rtt(pair.now, 1, &mut out);
    assert!(out.is_empty(), "one probe at a time");
    // Unanswered far beyond ping-timeout, the probe does not drop the connection.
    let links = std::mem::take(&mut pair.links);
    pair.tick(A, Duration::from_secs(2));
    assert!(pair.disconnects.is_empty(), "a probe never fails the link");
    pair.links = links;
    pair.now = pair.now.after(Duration::from_millis(3));
    pair.deliver_all();
    let stats = pair.nodes[A].take_peer_stats(1);
    let rtt = stats.ping_rtt.expect("the answer measured a round trip");
    assert!(
        rtt >= Duration::from_secs(2),
        "measured from the probe's send: {rtt:?}"
    );
    assert_eq!(
        pair.nodes[A].take_peer_stats(1).ping_rtt,
        None,
        "taking the stats resets them"
    );
}
