//! The trace scenarios. Each test names the issue-5 case it covers.

use std::time::Duration;

use proptest::prelude::*;
use srm::{
    Action, Admit, Bounds, BufferSettings, LagBudget, Mode, Observation, Protocol, SizeClass,
    SrmConfig, SrmError, Value, WritePattern,
};

use super::{admit, config, healthy_peer, millis, sample, secs, Run, PEER};

/// A peer whose link has `rtt` of delay (acks take the RTT plus 0.2 ms of disk).
fn delayed_peer(rtt: Duration) -> srm::PeerObservation {
    let mut peer = healthy_peer();
    peer.rtt = Some(rtt);
    peer.ack_latency_mean = Some(rtt + Duration::from_micros(200));
    peer.ack_latency_p99 = Some(rtt + millis(1));
    peer
}

/// Latency step 0 → 20 ms → 0 (issue 5: "goes async within a few intervals, returns to the
/// configured protocol after recovery").
#[test]
fn latency_step_goes_async_within_a_few_intervals_and_returns_after_recovery() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..200 {
        let delayed = (30..90).contains(&t);
        let rtt = if delayed {
            millis(20)
        } else {
            Duration::from_micros(300)
        };
        let mut peer = delayed_peer(rtt);
        if run.protocol() == Protocol::A {
            // What 20 ms of 40 MiB/s leaves unacknowledged.
            peer.unreplicated_bytes = if delayed { 800 << 10 } else { 12 << 10 };
            peer.oldest_unreplicated_age = rtt;
        }
        run.step(t, &sample(t, peer));
    }
    assert_eq!(run.switches(), vec![(32, Protocol::A), (94, Protocol::C)]);
    assert_eq!(
        run.times(|action| *action == Action::MarkPossiblyStale),
        vec![32]
    );
    assert_eq!(
        run.times(|action| *action == Action::ClearPossiblyStale),
        vec![95]
    );
    let status = run.manager.peer_status(PEER);
    assert_eq!(
        status.map(|status| (status.protocol, status.possibly_stale)),
        Some((Protocol::C, false))
    );
}

/// Send queue limit of the simulated link (socket buffer plus queue).
const SEND_QUEUE_BYTES: u64 = 8 << 20;
/// Size of each simulated write.
const WRITE_BYTES: u64 = 64 << 10;

/// A simulated link and the unreplicated backlog behind it.
#[derive(Default)]
struct Link {
    backlog_bytes: u64,
    backlog_max_bytes: u64,
    /// Longest time the backlog took to drain at the link's capacity (its oldest byte's age).
    drain_max: Duration,
    closed_gates: u32,
    /// The driver measures the fastest ack (as the daemon does): a full queue then shows
    /// as queueing, not as round trip.
    fastest_ack_measured: bool,
}

/// One second of the simulated link: the driver observes, applies the outcome, then in ten
/// 100 ms ticks the driver admits writes (while async) through a [`LagBudget`] and the peer
/// acknowledges up to a tenth of `capacity`. Checks the lag bound at every peak.
fn simulate_second(
    run: &mut Run,
    link: &mut Link,
    t: u64,
    (demand, capacity, rtt): (u64, u64, Duration),
) {
    let bound = run.manager.config().max_lag_bytes;
    let async_now = run.protocol() == Protocol::A;
    let queue_delay =
        Duration::from_millis(link.backlog_bytes.saturating_mul(1000) / capacity.max(1));
    let mut peer = delayed_peer(rtt);
    peer.goodput_bytes_per_s = demand.min(capacity);
    peer.unreplicated_bytes = link.backlog_bytes;
    peer.oldest_unreplicated_age = queue_delay;
    peer.send_queue_fill_permille = if async_now {
        u32::try_from((link.backlog_bytes * 1000 / SEND_QUEUE_BYTES).min(1000)).unwrap_or(1000)
    } else if demand >= capacity {
        peer.ack_latency_mean = Some(rtt + millis(50));
        if link.fastest_ack_measured {
            peer.ack_latency_min = Some(rtt + Duration::from_micros(200));
        }
        1000
    } else {
        u32::try_from(demand * 1000 / capacity.max(1)).unwrap_or(1000)
    };
    let outcome = run.step(t, &sample(t, peer));
    let gate = admit(&outcome).unwrap_or(Admit::Unlimited);
    if gate == Admit::Closed {
        link.closed_gates += 1;
    }
    let mut budget = LagBudget::new(gate);
    let async_now = run.protocol() == Protocol::A;
    for _ in 0..10 {
        let mut wanted = demand / 10;
        while async_now && wanted >= WRITE_BYTES && budget.try_admit(WRITE_BYTES) {
            link.backlog_bytes += WRITE_BYTES;
            wanted -= WRITE_BYTES;
        }
        link.backlog_max_bytes = link.backlog_max_bytes.max(link.backlog_bytes);
        let drain =
            Duration::from_millis(link.backlog_bytes.saturating_mul(1000) / capacity.max(1));
        link.drain_max = link.drain_max.max(drain);
        assert!(
            link.backlog_bytes <= bound,
            "t={t}: backlog {} over the bound {bound}",
            link.backlog_bytes
        );
        let acked = link.backlog_bytes.min(capacity / 10);
        link.backlog_bytes -= acked;
        budget.acknowledged(acked);
    }
}

/// Bandwidth collapse: 100 MiB/s → 5 MiB/s → 100 MiB/s under 40 MiB/s of writes, with
/// only the mean ack measured, so queueing cannot be told from the round trip and the model
/// predicts a gain (the lag gate's case). The manager goes async, the backlog stays under
/// both lag bounds (the time bound closes the gate: 5 MiB/s drains 64 MiB in 13 s, far
/// over 2 s), and it returns after recovery. With the fastest ack measured, see
/// `a_full_send_queue_on_a_fast_link_stays_synchronous`.
#[test]
fn bandwidth_collapse_goes_async_within_the_lag_bounds_and_returns() {
    let mut run = Run::new(config(Mode::On));
    let mut link = Link::default();
    for t in 0..150 {
        let capacity = if (20..80).contains(&t) {
            5 << 20
        } else {
            100 << 20
        };
        simulate_second(
            &mut run,
            &mut link,
            t,
            (40 << 20, capacity, Duration::from_micros(300)),
        );
    }
    let switches = run.switches();
    assert_eq!(switches.first(), Some(&(22, Protocol::A)), "{switches:?}");
    assert_eq!(switches.len(), 2, "{switches:?}");
    assert!(
        matches!(switches.get(1), Some((t, Protocol::C)) if (84..=95).contains(t)),
        "{switches:?}"
    );
    assert!(link.closed_gates > 0, "the time bound closed the gate");
    // 2 s at 5 MiB/s, plus one interval of acknowledgements admitted again.
    assert!(
        link.backlog_max_bytes <= 16 << 20,
        "{}",
        link.backlog_max_bytes
    );
    assert!(link.drain_max <= secs(3), "{:?}", link.drain_max);
    assert_eq!(
        run.manager
            .peer_status(PEER)
            .map(|status| status.possibly_stale),
        Some(false)
    );
}

/// Issue 29: the same collapse with the fastest ack measured (the daemon's case). The send
/// queue is full and acks queue for 50 ms, but an unqueued write still takes 0.5 ms: the
/// link limits throughput, not completion time, and async would only fill the lag bound.
/// The peer stays synchronous (never marked possibly-stale) and nothing is left behind.
#[test]
fn a_full_send_queue_on_a_fast_link_stays_synchronous() {
    let mut run = Run::new(config(Mode::On));
    let mut link = Link {
        fastest_ack_measured: true,
        ..Link::default()
    };
    for t in 0..150 {
        let capacity = if (20..80).contains(&t) {
            5 << 20
        } else {
            100 << 20
        };
        simulate_second(
            &mut run,
            &mut link,
            t,
            (40 << 20, capacity, Duration::from_micros(300)),
        );
    }
    assert_eq!(run.switches(), vec![]);
    assert_eq!(
        run.times(|action| *action == Action::MarkPossiblyStale),
        vec![]
    );
    assert_eq!(link.backlog_max_bytes, 0);
}

proptest! {
    /// Random traces: whatever the link does, the unreplicated bytes never exceed the bound
    /// (checked by `simulate_second` after every tick).
    #[test]
    fn lag_gate_never_admits_beyond_the_bound(
        lag_mib in 1u64..128,
        lag_secs in 1u64..5,
        seconds in proptest::collection::vec((0u64..200, 0u64..200, 0u64..40), 30..120),
    ) {
        let mut config = config(Mode::On);
        config.max_lag_bytes = lag_mib << 20;
        config.max_lag_time = secs(lag_secs);
        config.min_dwell = secs(2);
        let mut run = Run::new(config);
        let mut link = Link::default();
        for (t, (demand_mib, capacity_mib, rtt_ms)) in (0u64..).zip(seconds) {
            let shape = (demand_mib << 20, capacity_mib << 20, millis(rtt_ms));
            simulate_second(&mut run, &mut link, t, shape);
        }
        prop_assert!(link.backlog_max_bytes <= lag_mib << 20);
    }

    /// A signal flapping at random never makes the protocol flap: switches are at least
    /// `min_dwell` apart and alternate A, C, A, ...
    #[test]
    fn random_flapping_never_flaps(levels in proptest::collection::vec(0usize..3, 100..400)) {
        let mut run = Run::new(config(Mode::On));
        let rtts = [Duration::from_micros(300), millis(3), millis(20)];
        for (t, level) in (0u64..).zip(levels) {
            run.step(t, &sample(t, delayed_peer(rtts[level])));
        }
        let switches = run.switches();
        for pair in switches.windows(2) {
            prop_assert!(pair[1].0 - pair[0].0 >= 10, "{switches:?}");
            prop_assert!(pair[0].1 != pair[1].1, "{switches:?}");
        }
    }
}

/// Flapping signals (issue 5: "no flapping decisions: count switches"): a signal that
/// alternates faster than the enter streak never switches; one that stays high long
/// enough to switch but never low long enough to return switches once.
#[test]
fn flapping_signals_do_not_flap() {
    let table: &[(&str, u64, u64, usize)] = &[
        ("1 s high, 1 s low", 1, 1, 0),
        ("2 s high, 2 s low", 2, 2, 0),
        ("4 s high, 4 s low", 4, 4, 1),
        ("20 s high, 3 s low", 20, 3, 1),
        ("30 s high, 30 s low", 30, 30, 20),
    ];
    for (name, high, low, expected) in table {
        let mut run = Run::new(config(Mode::On));
        for t in 0..600 {
            let rtt = if t % (high + low) < *high {
                millis(20)
            } else {
                Duration::from_micros(300)
            };
            run.step(t, &sample(t, delayed_peer(rtt)));
        }
        assert_eq!(
            run.switches().len(),
            *expected,
            "{name}: {:?}",
            run.switches()
        );
    }
}

/// CPU saturation: latency that comes from this host's saturated (or stolen) CPU does not
/// send the peer async; the same latency with an idle CPU does.
#[test]
fn cpu_saturation_does_not_go_async() {
    // (case, CPU busy and steal for the first 60 s, the switches expected)
    type Case = (&'static str, u32, u32, Vec<(u64, Protocol)>);
    let table: &[Case] = &[
        ("busy 99% for 60 s", 990, 0, vec![(62, Protocol::A)]),
        ("steal 30% for 60 s", 500, 300, vec![(62, Protocol::A)]),
        ("busy 90%", 900, 0, vec![(2, Protocol::A)]),
    ];
    for (name, busy, steal, expected) in table {
        let mut run = Run::new(config(Mode::On));
        for t in 0..80 {
            let mut observation = sample(t, delayed_peer(millis(8)));
            if t < 60 {
                observation.system.cpu_busy_permille = *busy;
                observation.system.cpu_steal_permille = *steal;
            }
            run.step(t, &observation);
        }
        assert_eq!(run.switches(), *expected, "{name}");
    }
}

/// A long link stays a long link on a busy host: 25 ms of network latency (over twice the
/// 5 ms threshold) sends the peer async even with the CPU saturated.
#[test]
fn a_long_link_goes_async_even_on_a_saturated_host() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..10 {
        let mut observation = sample(t, delayed_peer(millis(25)));
        observation.system.cpu_busy_permille = 1000;
        run.step(t, &observation);
    }
    assert_eq!(run.switches(), vec![(2, Protocol::A)]);
}

/// A slow local disk is not a network problem: acks slowed by disks that are as slow as
/// ours do not send the peer async; acks slowed beyond what the peer's disk explains do,
/// unless our own disk is slower still (completion waits for it under protocol A too).
#[test]
fn slow_disk_is_not_a_network_problem() {
    // (case, local write latency, peer's reported write latency, ack latency, async?)
    let table: &[(&str, u64, Option<u64>, u64, bool)] = &[
        ("slow local disk, peers alike", 50, None, 51, false),
        (
            "slow local disk, peer reports as slow",
            50,
            Some(49),
            51,
            false,
        ),
        (
            "fast local disk, slow peer disk reported",
            1,
            Some(40),
            41,
            false,
        ),
        (
            "network delay under a slower local disk: nothing to gain",
            50,
            Some(1),
            30,
            false,
        ),
        ("fast disks, slow acks", 1, None, 30, true),
    ];
    for (name, local, reported, ack, expected) in table {
        let mut run = Run::new(config(Mode::On));
        for t in 0..30 {
            let mut peer = healthy_peer();
            peer.ack_latency_mean = Some(millis(*ack));
            peer.peer_write_latency = reported.map(millis);
            let mut observation = sample(t, peer);
            observation.system.local_write_latency = millis(*local);
            run.step(t, &observation);
        }
        assert_eq!(
            !run.switches().is_empty(),
            *expected,
            "{name}: {:?}",
            run.switches()
        );
    }
}

/// Advise mode produces exactly the decisions of `on`, all advisory, except the verdict on
/// a switch's gain (advice is not applied, so there is no gain to observe); `off` produces
/// none.
#[test]
fn advise_mode_changes_nothing_and_off_says_nothing() {
    let trace = |t: u64| {
        let rtt = if (10..50).contains(&t) {
            millis(20)
        } else {
            Duration::from_micros(300)
        };
        sample(t, delayed_peer(rtt))
    };
    let mut on = Run::new(config(Mode::On));
    let mut advise = Run::new(config(Mode::Advise));
    let mut off = Run::new(config(Mode::Off));
    for t in 0..120 {
        let observation = trace(t);
        on.step(t, &observation);
        let advised = advise.step(t, &observation);
        assert!(advised.gates.iter().all(|gate| gate.advisory));
        let silent = off.step(t, &observation);
        assert!(
            silent.decisions.is_empty() && silent.gates.is_empty(),
            "t={t}"
        );
    }
    assert!(!on.log.is_empty());
    assert!(advise.log.iter().all(|(_, decision)| decision.advisory));
    let strip = |run: &Run| {
        run.log
            .iter()
            .filter(|(_, decision)| !matches!(decision.action, Action::GainObserved { .. }))
            .map(|(t, decision)| (*t, decision.action, decision.reason.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        on.times(|action| matches!(action, Action::GainObserved { .. })),
        vec![16]
    );
    assert_eq!(strip(&advise), strip(&on));
    assert!(on.log.iter().all(|(_, decision)| !decision.advisory));
}

/// A disconnected peer gets no decisions and no gate.
#[test]
fn disconnected_peer_is_left_alone() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..30 {
        let mut peer = delayed_peer(millis(20));
        peer.connected = false;
        let outcome = run.step(t, &sample(t, peer));
        assert!(outcome.decisions.is_empty() && outcome.gates.is_empty());
    }
}

/// The pull-ahead loop guard (LINBIT/drbd issue 46). Worst case: congestion comes back
/// every time Ahead is left while the catch-up resync is unfinished. Without a guard that
/// is one Ahead/resync cycle every two intervals; with it, each hold doubles (10, 20, 40 …
/// 320 s). Once the congestion stops and a quiet minute passes, the back-off resets.
#[test]
fn pull_ahead_loop_backs_off() {
    let mut config = config(Mode::On);
    config.protocol = Protocol::A;
    config.congestion_fill_bytes = Some(8 << 20);
    let mut run = Run::new(config);
    let mut out_of_sync: u64 = 0;
    for t in 0..1600u64 {
        let ahead = run
            .manager
            .peer_status(PEER)
            .is_some_and(|status| status.ahead);
        let looping = t < 1000;
        let mut peer = healthy_peer();
        peer.out_of_sync_bytes = out_of_sync;
        peer.unreplicated_bytes = match (ahead, t) {
            (true, _) => 0,
            (false, 0) | (false, 1400) => 16 << 20,
            (false, _) if looping && out_of_sync > 0 => 16 << 20,
            (false, _) => 1 << 20,
        };
        run.step(t, &sample(t, peer));
        let ahead = run
            .manager
            .peer_status(PEER)
            .is_some_and(|status| status.ahead);
        out_of_sync = match (ahead, looping) {
            (true, _) => out_of_sync + (10 << 20),
            (false, true) => out_of_sync,
            (false, false) => 0,
        };
    }
    let entries = run.times(|action| *action == Action::EnterAhead);
    let leaves = run.times(|action| *action == Action::LeaveAhead);
    assert_eq!(
        entries,
        vec![0, 11, 32, 73, 154, 315, 636, 957, 1400],
        "{leaves:?}"
    );
    let holds: Vec<u64> = leaves
        .iter()
        .zip(&entries)
        .map(|(leave, enter)| leave - enter)
        .collect();
    assert_eq!(holds, vec![10, 20, 40, 80, 160, 320, 320, 320, 10]);
    assert_eq!(
        run.times(|action| *action == Action::MarkPossiblyStale),
        vec![0]
    );
}

/// Resync bandwidth: share × capacity, never below c-min-rate, never above c-max-rate; with
/// no known capacity the measured peak is used and a capped resync does not talk it down.
#[test]
fn resync_share_of_capacity_with_floor_and_ceiling() {
    const MIB: u64 = 1 << 20;
    // (case, known capacity, application goodput, share %, expected first cap)
    let table: &[(&str, Option<u64>, u64, u32, u64)] = &[
        (
            "half of a known 100 MiB/s",
            Some(100 * MIB),
            10 * MIB,
            50,
            50 * MIB,
        ),
        ("a quarter", Some(100 * MIB), 10 * MIB, 25, 25 * MIB),
        (
            "slow link: c-min-rate floor",
            Some(100 << 10),
            0,
            50,
            250 << 10,
        ),
        (
            "fast link: c-max-rate ceiling",
            Some(1024 * MIB),
            0,
            50,
            100 * MIB,
        ),
        (
            "unknown: measured peak 80 MiB/s",
            None,
            80 * MIB,
            50,
            40 * MIB,
        ),
    ];
    for (name, capacity, goodput, share, expected) in table {
        let mut config = config(Mode::On);
        config.resync_share_percent = *share;
        let mut run = Run::new(config);
        let mut cap = None;
        for t in 0..100 {
            let mut peer = healthy_peer();
            peer.link_capacity_bytes_per_s = *capacity;
            peer.goodput_bytes_per_s = if t < 10 { *goodput } else { 0 };
            let rate = cap.unwrap_or(0);
            peer.resync = (t >= 10).then_some(srm::ResyncObservation {
                rate_bytes_per_s: rate,
                bytes_left: 1 << 40,
            });
            run.step(t, &sample(t, peer));
            cap = run
                .manager
                .peer_status(PEER)
                .and_then(|status| status.resync_cap_bytes_per_s);
        }
        let caps: Vec<u64> = run
            .log
            .iter()
            .filter_map(|(_, decision)| match decision.action {
                Action::SetResyncRate { bytes_per_s } => Some(bytes_per_s),
                _ => None,
            })
            .collect();
        assert_eq!(
            caps,
            vec![*expected],
            "{name}: one decision, and the cap holds"
        );
    }
}

/// A write pattern of `writes` per second of `size` bytes, `sequential` per mille.
fn pattern(size: u64, writes: u64, sequential: u32) -> WritePattern {
    let mut pattern = WritePattern {
        bytes_per_s: size * writes,
        writes_per_s: writes,
        sequential_permille: sequential,
        ..WritePattern::default()
    };
    pattern.size_histogram[srm::size_class(size)] = SizeClass {
        writes,
        bytes: size * writes,
    };
    pattern
}

/// Buffers follow the write pattern within their bounds: streaming → maxima after the
/// enter streak, small random writes → minima after the dwell, short memory → minima at once.
#[test]
fn buffers_follow_the_write_pattern_within_bounds() {
    let mut config = config(Mode::On);
    config.buffer_bounds.max_buffers_pages = Bounds {
        min: 1024,
        max: 8000,
    };
    config.buffer_bounds.sndbuf_bytes = Bounds {
        min: 64 << 10,
        max: 2 << 20,
    };
    let maxima = BufferSettings {
        max_buffers_pages: 8000,
        max_epoch_size: 8192,
        sndbuf_bytes: 2 << 20,
    };
    let minima = BufferSettings {
        max_buffers_pages: 1024,
        max_epoch_size: 2048,
        sndbuf_bytes: 64 << 10,
    };
    let mut run = Run::new(config);
    for t in 0..80 {
        let mut observation = sample(t, healthy_peer());
        observation.writes = match t {
            0..20 => pattern(1 << 20, 100, 950),
            20..40 => pattern(4096, 10_000, 10),
            40..60 => pattern(1 << 20, 100, 950),
            _ => pattern(1 << 20, 100, 950),
        };
        if t >= 60 {
            observation.system.memory_available_permille = 30;
        }
        run.step(t, &observation);
    }
    let changes: Vec<(u64, BufferSettings)> = run
        .log
        .iter()
        .filter_map(|(t, decision)| match decision.action {
            Action::SetBuffers(settings) => Some((*t, settings)),
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        vec![(2, maxima), (22, minima), (42, maxima), (60, minima)]
    );
}

/// MTU advice: once, always advisory, only below jumbo size and for large-write patterns.
#[test]
fn mtu_advice_is_advisory_and_given_once() {
    let table: &[(&str, u32, u64, usize)] = &[
        ("1 MiB writes, MTU 1500", 1500, 1 << 20, 1),
        ("1 MiB writes, MTU 9000", 9000, 1 << 20, 0),
        ("4 KiB writes, MTU 1500", 1500, 4096, 0),
    ];
    for (name, mtu, size, expected) in table {
        let mut run = Run::new(config(Mode::On));
        for t in 0..60 {
            let mut peer = healthy_peer();
            peer.interface_mtu_bytes = Some(*mtu);
            let mut observation = sample(t, peer);
            observation.writes = pattern(*size, 100, 900);
            run.step(t, &observation);
        }
        let advice: Vec<_> = run
            .log
            .iter()
            .filter(|(_, decision)| matches!(decision.action, Action::AdviseMtu { .. }))
            .collect();
        assert_eq!(advice.len(), *expected, "{name}");
        assert!(
            advice.iter().all(|(_, decision)| decision.advisory),
            "{name}"
        );
    }
}

/// Contradictory settings are typed errors (issue 5: "min > max, lag bounds of zero with
/// srm on").
#[test]
fn contradictory_settings_are_rejected() {
    let on = || config(Mode::On);
    let table: Vec<(&str, SrmConfig, &str)> = vec![
        ("defaults", on(), "ok"),
        (
            "zero lag bytes, srm off",
            SrmConfig {
                max_lag_bytes: 0,
                ..SrmConfig::default()
            },
            "ok",
        ),
        (
            "zero lag bytes",
            SrmConfig {
                max_lag_bytes: 0,
                ..on()
            },
            "srm-max-lag-bytes is 0 with srm on: asynchronous replication would have no room",
        ),
        (
            "zero lag time",
            SrmConfig {
                max_lag_time: Duration::ZERO,
                mode: Mode::Advise,
                ..on()
            },
            "srm-max-lag-time is 0 with srm advise: asynchronous replication would have no room",
        ),
        (
            "lag time under the interval",
            SrmConfig {
                max_lag_time: millis(500),
                ..on()
            },
            "srm-interval / srm-max-lag-time: the minimum 1000 is larger than the maximum 500",
        ),
        (
            "latency thresholds equal",
            SrmConfig {
                latency_return: millis(5),
                ..on()
            },
            "srm-latency-high / srm-latency-low: the return threshold 5 must be below the enter \
             threshold 5",
        ),
        (
            "fill thresholds inverted",
            SrmConfig {
                fill_return_permille: 900,
                ..on()
            },
            "srm-fill-high / srm-fill-low: the return threshold 900 must be below the enter \
             threshold 800",
        ),
    ];
    check_settings(table);
    let error = SrmConfig {
        max_lag_bytes: 0,
        ..on()
    }
    .validate();
    assert_eq!(
        error,
        Err(SrmError::ZeroLagBound {
            name: "srm-max-lag-bytes",
            mode: Mode::On
        })
    );
}

/// Rates, shares and buffer bounds out of range or inverted are typed errors too.
#[test]
fn contradictory_rates_and_bounds_are_rejected() {
    let on = || config(Mode::On);
    let mut table: Vec<(&str, SrmConfig, &str)> = vec![
        (
            "share 0",
            SrmConfig {
                resync_share_percent: 0,
                ..on()
            },
            "srm-resync-share 0 is out of range 1..=100",
        ),
        (
            "share over 1",
            SrmConfig {
                resync_share_percent: 101,
                ..on()
            },
            "srm-resync-share 101 is out of range 1..=100",
        ),
        (
            "interval 0",
            SrmConfig {
                interval: Duration::ZERO,
                ..on()
            },
            "srm-interval 0 is out of range 100..=60000",
        ),
        (
            "c-min over c-max",
            SrmConfig {
                c_min_rate_bytes_per_s: 200 << 20,
                ..on()
            },
            "c-min-rate / c-max-rate: the minimum 209715200 is larger than the maximum 104857600",
        ),
        (
            "c-max 0 is no limit",
            SrmConfig {
                c_min_rate_bytes_per_s: 200 << 20,
                c_max_rate_bytes_per_s: 0,
                ..on()
            },
            "ok",
        ),
        (
            "congestion-fill 0",
            SrmConfig {
                congestion_fill_bytes: Some(0),
                ..on()
            },
            "congestion-fill 0 is out of range 1..=18446744073709551615",
        ),
    ];
    let mut buffers = on();
    buffers.buffer_bounds.max_buffers_pages = Bounds {
        min: 9000,
        max: 8000,
    };
    let mut sndbuf = on();
    sndbuf.buffer_bounds.sndbuf_bytes = Bounds { min: 0, max: 8000 };
    table.extend([
        (
            "max-buffers min > max",
            buffers,
            "srm-max-buffers-min / -max: the minimum 9000 is larger than the maximum 8000",
        ),
        (
            "sndbuf min 0",
            sndbuf,
            "srm-sndbuf-size-min 0 is out of range 1..=18446744073709551615",
        ),
    ]);
    check_settings(table);
}

/// Each configuration makes a manager ("ok") or fails with the expected message.
fn check_settings(table: Vec<(&str, SrmConfig, &str)>) {
    for (name, config, expected) in table {
        let actual = match srm::Manager::new(config) {
            Ok(_) => "ok".to_string(),
            Err(error) => error.to_string(),
        };
        assert_eq!(actual, expected, "{name}");
    }
}

/// The event-log line of a decision carries the reason and the measurements.
#[test]
fn decisions_print_with_reason_and_measurements() {
    let mut run = Run::new(config(Mode::Advise));
    for t in 0..3 {
        run.step(t, &sample(t, delayed_peer(millis(20))));
    }
    let lines: Vec<String> = run
        .log
        .iter()
        .map(|(_, decision)| decision.to_string())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0]
            .starts_with("peer 1: mark possibly-stale (advisory): mark the peer possibly-stale"),
        "{}",
        lines[0]
    );
    let expected = "peer 1: protocol A (advisory): the round trip bounded completion time for 3 \
        intervals (network latency >= 5 ms, predicted gain 100.00x >= 1.50x): \
        asynchronous within srm-max-lag-bytes 67108864 and srm-max-lag-time 2000 ms \
        [predicted-gain=100.00x sync-completion=20.2ms async-completion=0.1ms \
        saved-per-write=20.1ms network-latency=20.1ms rtt=20.0ms ack-latency-mean=20.2ms \
        ack-latency-p99=21.0ms send-queue-fill=5.0% \
        goodput=40.0MiB/s unreplicated=0B local-write-latency=0.1ms cpu-busy=30.0%]";
    assert_eq!(lines[1], expected);
    let values = [
        (Value::Bytes(64 << 20), "64.0MiB"),
        (Value::Bytes(1536), "1.5KiB"),
        (Value::Bytes(1023), "1023B"),
        (Value::BytesPerSecond(3 << 30), "3.0GiB/s"),
        (Value::Permille(999), "99.9%"),
        (Value::Duration(Duration::from_micros(1250)), "1.2ms"),
        (Value::Count(7), "7"),
        (Value::Ratio(1500), "1.50x"),
        (Value::Ratio(12_345), "12.34x"),
    ];
    for (value, text) in values {
        assert_eq!(value.to_string(), text);
    }
}

/// Observations with several peers get decisions and gates per peer, in peer order.
#[test]
fn peers_are_decided_independently_in_order() {
    let mut run = Run::new(config(Mode::On));
    let mut last = srm::Outcome::default();
    for t in 0..5 {
        let mut far = delayed_peer(millis(20));
        far.peer = 7;
        let near = healthy_peer();
        let observation = Observation {
            peers: vec![far, near],
            ..sample(t, healthy_peer())
        };
        last = run.step(t, &observation);
        if t == 2 {
            assert!(
                last.decisions.iter().all(|decision| decision.peer == 7),
                "{:?}",
                last.decisions
            );
            assert_eq!(last.decisions.len(), 2);
        }
    }
    let gates: Vec<(u8, Admit)> = last
        .gates
        .iter()
        .map(|gate| (gate.peer, gate.admit))
        .collect();
    assert_eq!(
        gates,
        vec![(PEER, Admit::Unlimited), (7, Admit::Bytes(64 << 20))]
    );
}

/// Turning the manager off (or to advise) after it sent a peer async undoes that with
/// non-advisory decisions: back to the configured protocol at once, the mark cleared once
/// the peer caught up, then silence. A contradictory new configuration is refused and the
/// old one stays.
#[test]
fn turning_srm_off_undoes_what_it_applied() {
    for mode in [Mode::Off, Mode::Advise] {
        let mut run = Run::new(config(Mode::On));
        for t in 0..5 {
            run.step(t, &sample(t, delayed_peer(millis(20))));
        }
        assert_eq!(run.protocol(), Protocol::A);
        let refused = run.manager.reconfigure(SrmConfig {
            latency_return: millis(9),
            ..config(mode)
        });
        assert!(refused.is_err());
        assert_eq!(run.manager.config().mode, Mode::On);
        assert_eq!(run.manager.reconfigure(config(mode)), Ok(()));
        let mut backlog = healthy_peer();
        backlog.unreplicated_bytes = 1 << 20;
        let undo = run.step(5, &sample(5, backlog));
        let real: Vec<Action> = undo
            .decisions
            .iter()
            .filter(|decision| !decision.advisory)
            .map(|decision| decision.action)
            .collect();
        assert_eq!(real, vec![Action::SetProtocol(Protocol::C)], "{mode}");
        let status = run.manager.peer_status(PEER);
        assert_eq!(
            status.map(|status| (status.protocol, status.possibly_stale)),
            Some((Protocol::C, true))
        );
        let caught_up = run.step(6, &sample(6, healthy_peer()));
        let real: Vec<Action> = caught_up
            .decisions
            .iter()
            .filter(|decision| !decision.advisory)
            .map(|decision| decision.action)
            .collect();
        assert_eq!(real, vec![Action::ClearPossiblyStale], "{mode}");
        assert_eq!(
            run.manager.peer_status(PEER),
            None,
            "{mode}: nothing left to undo"
        );
        for t in 7..40 {
            let outcome = run.step(t, &sample(t, healthy_peer()));
            assert!(
                outcome.decisions.iter().all(|decision| decision.advisory),
                "{mode}"
            );
        }
    }
}

/// Without pings or acks (an idle link), the kernel's smoothed RTT of the data socket
/// stands in; with nothing measured at all, nothing counts either way.
#[test]
fn tcp_rtt_stands_in_for_missing_pings() {
    let table: &[(&str, Option<u64>, usize)] = &[
        ("TCP RTT 20 ms", Some(20), 1),
        ("TCP RTT 1 ms", Some(1), 0),
        ("nothing measured", None, 0),
    ];
    for (name, tcp_rtt, expected) in table {
        let mut run = Run::new(config(Mode::On));
        for t in 0..10 {
            let mut peer = healthy_peer();
            peer.rtt = None;
            peer.ack_latency_mean = None;
            peer.tcp = tcp_rtt.map(|rtt| srm::TcpInfo {
                rtt: millis(rtt),
                congestion_window_segments: 10,
                ..srm::TcpInfo::default()
            });
            run.step(t, &sample(t, peer));
        }
        assert_eq!(run.switches().len(), *expected, "{name}");
        if *expected > 0 {
            let text = run
                .log
                .last()
                .map(|(_, decision)| decision.to_string())
                .unwrap_or_default();
            assert!(
                text.contains("tcp-rtt=20.0ms") && text.contains("tcp-congestion-window=10"),
                "{text}"
            );
        }
    }
}

/// A zero dwell does not disable the pull-ahead back-off: holds start at one interval and
/// still double.
#[test]
fn pull_ahead_back_off_survives_a_zero_dwell() {
    let mut config = config(Mode::On);
    config.protocol = Protocol::A;
    config.congestion_fill_bytes = Some(8 << 20);
    config.min_dwell = Duration::ZERO;
    let mut run = Run::new(config);
    let mut out_of_sync = 0;
    for t in 0..40u64 {
        let ahead = run
            .manager
            .peer_status(PEER)
            .is_some_and(|status| status.ahead);
        let mut peer = healthy_peer();
        peer.out_of_sync_bytes = out_of_sync;
        peer.unreplicated_bytes = if ahead { 0 } else { 16 << 20 };
        run.step(t, &sample(t, peer));
        out_of_sync += 1 << 20;
    }
    let entries = run.times(|action| *action == Action::EnterAhead);
    assert_eq!(entries, vec![0, 2, 5, 10, 19, 36]);
}

/// At high queue depths the mean ack latency is mostly queueing at the peer. With the
/// interval's fastest ack near the link's round trip, a recovered link brings the peer back
/// although the mean stays over the return threshold.
#[test]
fn the_fastest_ack_shows_a_recovered_link_under_queueing() {
    let mut run = Run::new(config(Mode::On));
    for t in 0..40 {
        let slow = t < 10;
        let mut peer = delayed_peer(millis(20));
        peer.rtt = None;
        peer.ack_latency_mean = Some(if slow { millis(25) } else { millis(5) });
        peer.ack_latency_min = Some(if slow {
            millis(20)
        } else {
            Duration::from_micros(400)
        });
        run.step(t, &sample(t, peer));
    }
    let protocols: Vec<Protocol> = run
        .switches()
        .into_iter()
        .map(|(_, protocol)| protocol)
        .collect();
    assert_eq!(protocols, vec![Protocol::A, Protocol::C]);
}
