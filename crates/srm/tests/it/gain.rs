//! Issue 29: switches to protocol A must earn their risk. The gain model's prediction, the
//! verdict after the switch (kept or undone), the back-off after undone switches, and the
//! lag throttle's curve.

use std::time::Duration;

use proptest::prelude::*;
use srm::{
    backlog_share_permille, Action, Measurement, Mode, Protocol, SrmConfig, SwitchVerdict,
    ThrottleCurve, Value, THROTTLE_STEPS,
};

use super::{config, healthy_peer, millis, sample, secs, Run, PEER};

/// A link with `rtt` of delay whose fastest ack is the round trip plus 0.2 ms of disk and
/// whose mean ack adds `queued` of queueing.
fn link(rtt: Duration, queued: Duration) -> srm::PeerObservation {
    let mut peer = healthy_peer();
    peer.rtt = Some(rtt);
    peer.ack_latency_min = Some(rtt + Duration::from_micros(200));
    peer.ack_latency_mean = Some(rtt + Duration::from_micros(200) + queued);
    peer
}

fn measurement(measurements: &[Measurement], name: &str) -> Option<Value> {
    measurements
        .iter()
        .find(|measurement| measurement.name == name)
        .map(|measurement| measurement.value)
}

/// (case, rtt ms, queueing ms, measured completion ms, local disk µs, switches to A?).
type Case = (&'static str, u64, u64, Option<u64>, u64, bool);

/// Going async only where it pays: completion time bounded by the round trip goes async;
/// bounded by queueing, by the local disk or by the client does not, whatever the send
/// queue's fill (every case runs with the queue full).
#[test]
fn async_only_where_the_round_trip_bounds_completion() {
    let table: &[Case] = &[
        (
            "fast link, full queue (1 MiB QD8 at 0 ms)",
            0,
            9,
            Some(10),
            1000,
            false,
        ),
        ("fast link, 4 KiB QD32 at 0 ms", 0, 1, Some(1), 50, false),
        (
            "metro link, queue full, completion mostly queueing",
            6,
            60,
            Some(70),
            100,
            false,
        ),
        ("20 ms link, 4 KiB QD32", 20, 1, Some(21), 50, true),
        (
            "20 ms link, nothing but acks measured",
            20,
            1,
            None,
            50,
            true,
        ),
        (
            "20 ms link, disk slower than the link",
            20,
            0,
            Some(41),
            40_000,
            false,
        ),
    ];
    for (name, rtt, queued, completion, local, expected) in table {
        let mut run = Run::new(config(Mode::On));
        for t in 0..20 {
            let mut peer = link(millis(*rtt), millis(*queued));
            peer.send_queue_fill_permille = 1000;
            let mut observation = sample(t, peer);
            observation.system.local_write_latency = Duration::from_micros(*local);
            observation.writes.completion_latency_mean = completion.map(millis);
            run.step(t, &observation);
        }
        let went_async = run.switches().first() == Some(&(2, Protocol::A));
        assert_eq!(went_async, *expected, "{name}: {:?}", run.switches());
    }
}

/// A long round trip: the switch records its predicted gain in the decision and the status,
/// the observed gain is measured from the second interval after the switch over
/// `verify_intervals` intervals, and the switch is kept with a `GainObserved` report.
#[test]
fn a_long_round_trip_goes_async_with_its_predicted_gain_and_keeps_it() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..10 {
        // 4 KiB QD32 through a 20 ms link: 21 ms synchronously, 1 ms asynchronously (the
        // client's own queueing stays), at a fixed queue depth so IOPS follow.
        let mut observation = sample(t, link(millis(20), millis(1)));
        let (completion, writes) = match run.protocol() {
            Protocol::A => (millis(1), 32_000),
            Protocol::B | Protocol::C => (millis(21), 1_500),
        };
        observation.writes.completion_latency_mean = Some(completion);
        observation.writes.writes_per_s = writes;
        observation.writes.bytes_per_s = writes * 4096;
        run.step(t, &observation);
    }
    assert_eq!(run.switches(), vec![(2, Protocol::A)]);
    let switch = run
        .log
        .iter()
        .find(|(_, decision)| decision.action == Action::SetProtocol(Protocol::A))
        .map(|(_, decision)| decision.clone());
    let predicted = switch
        .as_ref()
        .and_then(|decision| measurement(&decision.measurements, "predicted-gain"));
    // Completion 21 ms, 20.2 ms saved per write (fastest ack 20.2 ms, disk 0.1 ms).
    assert_eq!(predicted, Some(Value::Ratio(21_000 * 1000 / 900)));
    assert_eq!(
        run.times(|action| matches!(action, Action::GainObserved { .. })),
        vec![6],
        "observations 4, 5 and 6 after the switch at 2 (3 is skipped)"
    );
    let status = run.manager.peer_status(PEER);
    let record = status.and_then(|status| status.last_switch);
    assert_eq!(
        record.map(|record| record.verdict),
        Some(SwitchVerdict::Kept)
    );
    assert_eq!(
        record.and_then(|record| record.observed_gain_permille),
        Some(21_333),
        "throughput 32000 / 1500 IOPS beats completion 21 / 1 ms"
    );
    assert_eq!(
        record.map(|record| record.predicted_gain_permille),
        Some(23_333)
    );
    assert_eq!(run.protocol(), Protocol::A);
}

/// A switch whose gain does not show (the client is bounded elsewhere: same throughput,
/// same completion time) is undone once measured, and further switches back off: the hold
/// doubles with every undone switch up to 32 × `max(min_dwell, interval)`.
#[test]
fn no_observed_gain_is_undone_and_backed_off() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..2000 {
        let mut observation = sample(t, link(millis(20), millis(1)));
        observation.writes.completion_latency_mean = Some(millis(21));
        run.step(t, &observation);
        assert!(
            run.protocol() == Protocol::C
                || run.switches().last().is_some_and(|(at, _)| t - at < 5),
            "t={t}: an unearned switch is undone within the verification window"
        );
    }
    let to_async = run.times(|action| *action == Action::SetProtocol(Protocol::A));
    let undone: Vec<u64> = to_async.iter().map(|t| t + 4).collect();
    assert_eq!(
        run.times(|action| *action == Action::SetProtocol(Protocol::C)),
        undone,
        "each switch undone at the fourth observation after it"
    );
    // min_dwell 10 s: holds of 20, 40, 80, 160, 320, 320, ... s after each undo.
    let gaps: Vec<u64> = to_async.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert_eq!(
        &gaps[..6],
        &[4 + 20, 4 + 40, 4 + 80, 4 + 160, 4 + 320, 4 + 320]
    );
    assert!(gaps.iter().all(|gap| *gap <= 4 + 320), "{gaps:?}");
    let status = run.manager.peer_status(PEER);
    let record = status.and_then(|status| status.last_switch);
    assert_eq!(
        record.map(|record| record.verdict),
        Some(SwitchVerdict::Undone)
    );
    assert_eq!(
        record.and_then(|record| record.observed_gain_permille),
        Some(1000)
    );
    assert!(status.is_some_and(|status| status.undone_switches >= 6));
    let undo = run
        .log
        .iter()
        .rev()
        .find(|(_, decision)| decision.action == Action::SetProtocol(Protocol::C))
        .map(|(_, decision)| decision.to_string())
        .unwrap_or_default();
    assert!(
        undo.contains("did not earn its risk") && undo.contains("observed-gain=1.00x"),
        "{undo}"
    );
}

/// A kept switch resets the back-off; intervals without writes do not count towards the
/// verdict (an idle client shows nothing either way).
#[test]
fn idle_intervals_do_not_judge_and_a_kept_switch_resets_the_back_off() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..3 {
        let mut observation = sample(t, link(millis(20), millis(1)));
        observation.writes.completion_latency_mean = Some(millis(21));
        run.step(t, &observation);
    }
    assert_eq!(run.switches(), vec![(2, Protocol::A)]);
    for t in 3..20 {
        let mut observation = sample(t, link(millis(20), millis(1)));
        observation.writes = srm::WritePattern::default();
        run.step(t, &observation);
    }
    let pending = run
        .manager
        .peer_status(PEER)
        .and_then(|status| status.last_switch);
    assert_eq!(
        pending.map(|record| record.verdict),
        Some(SwitchVerdict::Pending)
    );
    for t in 20..23 {
        let mut observation = sample(t, link(millis(20), millis(1)));
        observation.writes.completion_latency_mean = Some(millis(1));
        run.step(t, &observation);
    }
    let status = run.manager.peer_status(PEER);
    assert_eq!(
        status
            .and_then(|status| status.last_switch)
            .map(|record| record.verdict),
        Some(SwitchVerdict::Kept)
    );
    assert_eq!(status.map(|status| status.undone_switches), Some(0));
}

/// Gain settings are validated: a keep threshold above the enter one, or gains under 1×,
/// are contradictions.
#[test]
fn gain_settings_are_validated() {
    let on = || config(Mode::On);
    let table: &[(&str, SrmConfig, bool)] = &[
        ("defaults", on(), true),
        (
            "keep above enter",
            SrmConfig {
                gain_keep_permille: 2000,
                ..on()
            },
            false,
        ),
        (
            "enter under 1x",
            SrmConfig {
                gain_enter_permille: 900,
                gain_keep_permille: 900,
                ..on()
            },
            false,
        ),
        (
            "no verify intervals",
            SrmConfig {
                verify_intervals: 0,
                ..on()
            },
            false,
        ),
        (
            "throttle from the bound",
            SrmConfig {
                throttle_start_permille: 1000,
                ..on()
            },
            false,
        ),
    ];
    for (name, config, valid) in table {
        assert_eq!(config.validate().is_ok(), *valid, "{name}");
    }
}

/// The throttle curve: nothing under its start, non-increasing in the backlog's share, 2×
/// just past the start, 0 in the last step and at or past the bound.
#[test]
fn throttle_curve_is_monotone_and_closes_before_the_bound() {
    for start in [0, 250, 500, 900, 999] {
        let curve = ThrottleCurve::new(start);
        assert_eq!(
            curve.admit_per_ack(start.saturating_sub(1)),
            if start == 0 { Some(1875) } else { None }
        );
        assert_eq!(curve.admit_per_ack(start), Some(1875), "start {start}");
        let mut previous = u32::MAX;
        for share in start..=1200 {
            let admit = curve.admit_per_ack(share).unwrap_or(u32::MAX);
            assert!(admit <= previous, "start {start} share {share}");
            previous = admit;
        }
        assert_eq!(curve.admit_per_ack(1000), Some(0));
        if 1000 - start >= 16 {
            let last_step = start + (1000 - start) * 15 / 16 + 1;
            assert_eq!(curve.admit_per_ack(last_step), Some(0), "start {start}");
        }
        assert_eq!(curve.admit_per_ack_permille.len(), THROTTLE_STEPS);
    }
    assert_eq!(
        backlog_share_permille(32 << 20, 64 << 20, millis(100), secs(2)),
        500
    );
    assert_eq!(
        backlog_share_permille(1 << 20, 64 << 20, millis(1500), secs(2)),
        750
    );
}

/// Drives ack-clocked admission through the curve as the engine does: every tick the link confirms
/// `drain` bytes of the backlog and each confirmed byte earns `admit_per_ack` credit; a client that
/// always has writes ready spends it (unthrottled under the start). Returns the largest
/// backlog and the bytes admitted in the last `ticks / 2` ticks.
fn throttled(bound: u64, drain: u64, start: u32, ticks: u32) -> (u64, u64) {
    const WRITE_BYTES: u64 = 64 << 10;
    let curve = ThrottleCurve::new(start);
    let (mut backlog, mut credit, mut largest, mut late) = (0u64, 0u64, 0u64, 0u64);
    for tick in 0..ticks {
        let confirmed = backlog.min(drain);
        backlog -= confirmed;
        let share = backlog_share_permille(backlog, bound, Duration::ZERO, secs(2));
        if let Some(admit) = curve.admit_per_ack(share) {
            credit = (credit + confirmed * u64::from(admit) / 1000).min(bound / 16);
        }
        loop {
            let share = backlog_share_permille(backlog, bound, Duration::ZERO, secs(2));
            // An empty backlog is never throttled (no confirmation would ever earn credit).
            let throttled = backlog > 0 && curve.admit_per_ack(share).is_some();
            if backlog + WRITE_BYTES > bound || (throttled && credit < WRITE_BYTES) {
                break;
            }
            if throttled {
                credit -= WRITE_BYTES;
            }
            backlog += WRITE_BYTES;
            if tick >= ticks / 2 {
                late += WRITE_BYTES;
            }
        }
        largest = largest.max(backlog);
    }
    (largest, late)
}

/// The throttled backlog settles under the bound and admission keeps pace with the drain
/// (no collapse at the bound).
#[test]
fn throttled_admission_settles_under_the_bound_at_the_drain_rate() {
    let bound = 64 << 20;
    let drain = 1 << 20;
    let (largest, late) = throttled(bound, drain, 500, 400);
    assert!(largest < bound * 7 / 8, "backlog {largest} of {bound}");
    let drained = u64::from(400u32 / 2) * drain;
    assert!(
        late * 10 >= drained * 9,
        "admitted {late} while the link drained {drained}"
    );
}

proptest! {
    /// Whatever the drain rate and start, throttled admission never passes the bound and
    /// never stalls for good.
    #[test]
    fn throttled_admission_holds_the_bound(
        drain_kib in 64u64..=65536,
        start in 0u32..1000,
    ) {
        let bound = 64 << 20;
        let (largest, late) = throttled(bound, drain_kib << 10, start, 300);
        prop_assert!(largest <= bound);
        prop_assert!(late > 0);
    }
}
