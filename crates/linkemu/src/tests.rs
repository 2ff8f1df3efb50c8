//! Unit tests of the pure parts: parsers (tables and properties), release times (order and
//! bounds), the token bucket (rate bound), link checks and control requests.

use std::time::Duration;

use proptest::prelude::*;

use crate::control::{apply, parse_request, Amount, ControlRequest, Directions};
use crate::link::{Direction, Link, OnPartition, Partition, Shape, DELAY_LIMIT, QUEUE_LIMIT_BYTES};
use crate::pace::{burst_bytes, nanos, Bucket, Schedule};
use crate::{parse, LinkError};

#[test]
fn durations() {
    let table: &[(&str, Option<u64>)] = &[
        ("20ms", Some(20_000_000)),
        ("1.5ms", Some(1_500_000)),
        ("500us", Some(500_000)),
        ("500µs", Some(500_000)),
        ("2s", Some(2_000_000_000)),
        ("7ns", Some(7)),
        (" 3 ms ", Some(3_000_000)),
        ("0", Some(0)),
        ("0.0", Some(0)),
        ("5", None),
        ("ms", None),
        ("-5ms", None),
        ("1.2.3ms", None),
        ("5parsecs", None),
        ("", None),
        ("99999999999999999999s", None),
    ];
    for &(input, expected) in table {
        let got = parse::duration(input).ok().map(nanos);
        assert_eq!(got, expected, "input {input:?}");
    }
}

#[test]
fn sizes() {
    let table: &[(&str, Option<u64>)] = &[
        ("65536", Some(65536)),
        ("64MiB", Some(64 << 20)),
        ("12MB", Some(12_000_000)),
        ("12M", Some(12_000_000)),
        ("1.5KiB", Some(1536)),
        ("1G", Some(1_000_000_000)),
        ("4TiB", Some(4 << 40)),
        ("10B", Some(10)),
        ("64mib", None),
        ("MiB", None),
        ("1Q", None),
        ("99999999999TiB", None),
    ];
    for &(input, expected) in table {
        assert_eq!(parse::size_bytes(input).ok(), expected, "input {input:?}");
    }
}

#[test]
fn rates() {
    let table: &[(&str, Option<Option<u64>>)] = &[
        ("100mbit", Some(Some(12_500_000))),
        ("1gbit", Some(Some(125_000_000))),
        ("1Gbit", Some(Some(125_000_000))),
        ("800kbit", Some(Some(100_000))),
        ("8bit", Some(Some(1))),
        ("12MB", Some(Some(12_000_000))),
        ("12MiB/s", Some(Some(12 << 20))),
        ("1000", Some(Some(1000))),
        ("unlimited", Some(None)),
        ("None", Some(None)),
        ("4bit", None),
        ("0", None),
        ("fast", None),
        ("10mbps", None),
    ];
    for &(input, expected) in table {
        assert_eq!(
            parse::rate_bytes_per_s(input).ok(),
            expected,
            "input {input:?}"
        );
    }
}

#[test]
fn parse_errors_name_the_input() {
    match parse::duration("5parsecs") {
        Err(LinkError::Parse {
            kind: "duration",
            input,
            ..
        }) => assert_eq!(input, "5parsecs"),
        other => panic!("unexpected {other:?}"),
    }
}

proptest! {
    #[test]
    fn parsers_never_panic(text in "\\PC{0,24}") {
        let _ = parse::duration(&text);
        let _ = parse::size_bytes(&text);
        let _ = parse::rate_bytes_per_s(&text);
    }

    #[test]
    fn durations_round_trip(micros in 0u64..10_000_000_000) {
        prop_assert_eq!(
            parse::duration(&format!("{micros}us")).ok(),
            Some(Duration::from_micros(micros))
        );
        let text = format!("{}.{:06}s", micros / 1_000_000, micros % 1_000_000);
        prop_assert_eq!(parse::duration(&text).ok(), Some(Duration::from_micros(micros)));
    }

    #[test]
    fn sizes_round_trip(kibibytes in 0u64..(1 << 40)) {
        prop_assert_eq!(parse::size_bytes(&format!("{kibibytes}KiB")).ok(), Some(kibibytes << 10));
    }
}

fn shape(delay_ms: u64, jitter_ms: u64) -> Shape {
    Shape {
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::from_millis(jitter_ms),
        ..Shape::default()
    }
}

#[test]
fn release_without_jitter_is_read_time_plus_delay() {
    let mut schedule = Schedule::new(1);
    let link = shape(20, 0);
    for read_ms in [0u64, 1, 5, 100] {
        assert_eq!(
            schedule.release_ns(read_ms * 1_000_000, &link),
            (read_ms + 20) * 1_000_000
        );
    }
}

#[test]
fn lowering_the_delay_never_reorders() {
    let mut schedule = Schedule::new(1);
    let early = schedule.release_ns(0, &shape(50, 0));
    let late = schedule.release_ns(1_000_000, &shape(0, 0));
    assert_eq!(early, 50_000_000);
    assert_eq!(
        late, early,
        "a chunk read later waits for the one before it"
    );
}

#[test]
fn same_seed_same_jitter() {
    let draws = |seed| {
        let mut schedule = Schedule::new(seed);
        (0..50u64)
            .map(|i| schedule.release_ns(i * 10_000_000, &shape(5, 4)))
            .collect::<Vec<_>>()
    };
    assert_eq!(draws(7), draws(7));
    assert_ne!(draws(7), draws(8));
}

proptest! {
    #[test]
    fn releases_are_ordered_and_within_jitter(
        seed in any::<u64>(),
        gaps in prop::collection::vec(0u64..5_000_000, 1..200),
        delay_ms in 0u64..50,
        jitter_ms in 0u64..50,
    ) {
        let link = shape(delay_ms, jitter_ms);
        let (delay, jitter) = (delay_ms * 1_000_000, jitter_ms * 1_000_000);
        let mut schedule = Schedule::new(seed);
        let (mut read, mut last) = (0u64, 0u64);
        for gap in gaps {
            read += gap;
            let release = schedule.release_ns(read, &link);
            prop_assert!(release >= last, "reordered");
            prop_assert!(release >= read, "released before read");
            prop_assert!(release >= (read + delay).saturating_sub(jitter));
            prop_assert!(release <= (read + delay + jitter).max(last));
            last = release;
        }
    }

    #[test]
    fn bucket_never_exceeds_rate_plus_burst(
        rate in 1_000u64..100_000_000,
        requests in prop::collection::vec((0u64..2_000_000, 1u64..200_000), 1..100),
    ) {
        let mut bucket = Bucket::default();
        let mut now = 0u64;
        let mut sent: Vec<(u64, u64)> = Vec::new();
        for (gap, bytes) in requests {
            now += gap;
            // A sender waits for its reservation before the next one, like the relay's writer.
            let at = bucket.reserve(now, bytes, Some(rate));
            prop_assert!(at >= now);
            sent.push((at, bytes));
            now = at;
        }
        // Bytes that left in [first, t] are at most burst + rate × (t - first) + one chunk
        // lent ahead.
        let start = sent[0].0;
        let mut total = 0u128;
        let largest = sent.iter().map(|&(_, b)| b).max().unwrap_or(0);
        for &(at, bytes) in &sent {
            total += u128::from(bytes);
            let allowed = u128::from(burst_bytes(rate)) + u128::from(largest)
                + u128::from(rate) * u128::from(at - start) / 1_000_000_000 + 1;
            prop_assert!(total <= allowed, "{} bytes by {} ns, allowed \
                {}", total, at - start, allowed);
        }
    }
}

#[test]
fn unlimited_bucket_never_waits() {
    let mut bucket = Bucket::default();
    for now in [0u64, 1, 1] {
        assert_eq!(bucket.reserve(now, 1 << 30, None), now);
    }
}

#[test]
fn bucket_waits_for_debt() {
    let mut bucket = Bucket::default();
    // 1000 bytes/s, burst 10 bytes: the burst leaves at once, the next 1000 bytes after a
    // second, and a byte reserved at the same time queues behind them.
    assert_eq!(bucket.reserve(0, 10, Some(1000)), 0);
    assert_eq!(bucket.reserve(0, 1000, Some(1000)), 1_000_000_000);
    assert_eq!(bucket.reserve(0, 1, Some(1000)), 1_001_000_000);
    // A new rate starts with a full bucket.
    assert_eq!(bucket.reserve(5, 20, Some(2000)), 5);
}

#[test]
fn link_checks() {
    let good = Link::default();
    let cases: Vec<(Link, bool)> = vec![
        (good, true),
        (
            Link::symmetric(Shape {
                delay: DELAY_LIMIT,
                ..Shape::default()
            }),
            true,
        ),
        (
            Link::symmetric(Shape {
                delay: DELAY_LIMIT + Duration::from_nanos(1),
                ..Shape::default()
            }),
            false,
        ),
        (
            Link::symmetric(Shape {
                jitter: Duration::from_secs(61),
                ..Shape::default()
            }),
            false,
        ),
        (
            Link {
                reverse: Shape {
                    rate_bytes_per_s: Some(0),
                    ..Shape::default()
                },
                ..good
            },
            false,
        ),
        (
            Link {
                forward: Shape {
                    queue_bytes_max: 0,
                    ..Shape::default()
                },
                ..good
            },
            false,
        ),
        (
            Link {
                forward: Shape {
                    queue_bytes_max: QUEUE_LIMIT_BYTES + 1,
                    ..Shape::default()
                },
                ..good
            },
            false,
        ),
        (
            Link {
                forward: Shape {
                    queue_bytes_max: 1,
                    ..Shape::default()
                },
                ..good
            },
            true,
        ),
    ];
    for (index, (link, ok)) in cases.into_iter().enumerate() {
        assert_eq!(link.check().is_ok(), ok, "case {index}: {link:?}");
    }
}

#[test]
fn partitions_cut_the_right_directions() {
    let table = [
        (Partition::None, [false, false]),
        (Partition::Both, [true, true]),
        (Partition::Forward, [true, false]),
        (Partition::Reverse, [false, true]),
    ];
    for (partition, cuts) in table {
        for direction in Direction::ALL {
            assert_eq!(
                partition.cuts(direction),
                cuts[direction.index()],
                "{partition:?} {direction:?}"
            );
        }
        let resetting = Link {
            partition,
            on_partition: OnPartition::Reset,
            ..Link::default()
        };
        assert_eq!(resetting.refuses(), partition != Partition::None);
        let holding = Link {
            partition,
            ..Link::default()
        };
        assert!(!holding.refuses());
    }
}

#[test]
fn control_requests_parse() {
    let request =
        parse_request(r#"{"delay_ms":5,"direction":"forward","rate":"100mbit","queue":4096}"#);
    let expected = ControlRequest {
        delay_ms: Some(5.0),
        direction: Directions::Forward,
        rate: Some(Amount::Text("100mbit".into())),
        queue: Some(Amount::Number(4096)),
        ..ControlRequest::default()
    };
    assert_eq!(request.ok(), Some(expected));
    let rejected = [
        r#"{"delay":5}"#,
        r#"{"partition":"sideways"}"#,
        "not json",
        r#"{"delay_ms":"5"}"#,
        "",
    ];
    for line in rejected {
        assert!(
            matches!(parse_request(line), Err(LinkError::Request(_))),
            "{line:?} accepted"
        );
    }
}

#[test]
fn control_requests_apply() {
    let base = Link::default();
    let apply_line = |line: &str| parse_request(line).and_then(|request| apply(base, &request));
    let five = apply_line(r#"{"delay_ms":5}"#).ok();
    assert_eq!(
        five.map(|l| (l.forward.delay, l.reverse.delay)),
        Some((Duration::from_millis(5), Duration::from_millis(5)))
    );
    let one_way = apply_line(r#"{"delay_ms":2.5,"direction":"reverse"}"#).ok();
    assert_eq!(
        one_way.map(|l| (l.forward.delay, l.reverse.delay)),
        Some((Duration::ZERO, Duration::from_micros(2500)))
    );
    let cut = apply_line(r#"{"partition":"both","on_partition":"reset"}"#).ok();
    assert_eq!(cut.map(|l| l.refuses()), Some(true));
    let limited = apply_line(r#"{"rate":"8mbit","queue":"1MiB"}"#).ok();
    assert_eq!(
        limited.map(|l| (l.forward.rate_bytes_per_s, l.reverse.queue_bytes_max)),
        Some((Some(1_000_000), 1 << 20))
    );
    let unlimited = apply_line(r#"{"rate":"unlimited"}"#).ok();
    assert_eq!(unlimited.map(|l| l.forward.rate_bytes_per_s), Some(None));
    for bad in [
        r#"{"delay_ms":-1}"#,
        r#"{"delay_ms":1e12}"#,
        r#"{"queue":0}"#,
        r#"{"rate":0}"#,
        r#"{"rate":"fast"}"#,
    ] {
        assert!(apply_line(bad).is_err(), "{bad} applied");
    }
    assert_eq!(apply_line(r#"{"stats":true}"#).ok(), Some(base));
}
