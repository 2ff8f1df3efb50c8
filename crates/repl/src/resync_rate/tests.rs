//! Tests of the resync rate controller (drbd-semantics.md §1, `resync-rate` and `c-*`) on
//! synthetic traces: a simulated link with a fixed propagation delay and an optional
//! bandwidth limit answers the requests the controller allows.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

const MIB: u64 = 1 << 20;

fn controller(config: ResyncRateConfig) -> ResyncRateController {
    match ResyncRateController::new(config) {
        Ok(controller) => controller,
        Err(error) => panic!("test config {config:?}: {error}"),
    }
}

fn at_tick(index: u64) -> Time {
    Time(index * 100_000_000)
}

fn fixed(rate_kib_per_s: u32) -> ResyncRateConfig {
    ResyncRateConfig {
        resync_rate_kib_per_s: rate_kib_per_s,
        c_plan_ahead: Duration::ZERO,
        ..ResyncRateConfig::default()
    }
}

fn dynamic(fill_target_sectors: u32, plan_ahead: Duration) -> ResyncRateConfig {
    ResyncRateConfig {
        c_plan_ahead: plan_ahead,
        c_fill_target_sectors: fill_target_sectors,
        ..ResyncRateConfig::default()
    }
}

/// A tick with nothing in flight, plenty of work, and no application I/O.
fn idle(now: Time) -> ResyncTick {
    ResyncTick {
        now,
        in_flight_bytes: 0,
        answered_bytes: 0,
        round_trip: None,
        application_active: false,
        pending_bytes: u64::MAX,
    }
}

/// A link that serves `bandwidth` bytes per tick in order and answers each byte
/// `delay_ticks` after it was served.
struct Link {
    delay_ticks: u64,
    bandwidth: u64,
    /// Requested, not yet served: (tick issued, bytes).
    queue: VecDeque<(u64, u64)>,
    /// Served, not yet answered: (tick answered, tick issued, bytes).
    transit: VecDeque<(u64, u64, u64)>,
    in_flight: u64,
}

/// What one tick of [`run`] saw.
#[derive(Debug, Clone, Copy)]
struct Sample {
    budget: u64,
    /// In flight once the tick's budget was issued.
    in_flight: u64,
    round_trip: Option<Duration>,
}

impl Link {
    fn new(delay_ticks: u64, bandwidth: u64) -> Link {
        Link {
            delay_ticks,
            bandwidth,
            queue: VecDeque::new(),
            transit: VecDeque::new(),
            in_flight: 0,
        }
    }

    /// Answers due at `tick`: (bytes, round trip of the last answer).
    fn answers(&mut self, tick: u64) -> (u64, Option<Duration>) {
        let mut answered = 0;
        let mut round_trip = None;
        while let Some(&(due, issued, bytes)) = self.transit.front() {
            if due > tick {
                break;
            }
            self.transit.pop_front();
            answered += bytes;
            round_trip = Some(PLAN_STEP * u32::try_from(tick - issued).unwrap_or(u32::MAX));
        }
        self.in_flight -= answered;
        (answered, round_trip)
    }

    fn issue(&mut self, tick: u64, bytes: u64) {
        self.in_flight += bytes;
        self.queue.push_back((tick, bytes));
        let mut capacity = self.bandwidth;
        while let Some((issued, bytes)) = self.queue.front_mut() {
            let served = (*bytes).min(capacity);
            if served == 0 {
                break;
            }
            capacity -= served;
            *bytes -= served;
            self.transit.push_back((tick + self.delay_ticks, *issued, served));
            if *bytes == 0 {
                self.queue.pop_front();
            }
        }
    }
}

/// Runs `ticks` ticks of `config` against `link`; `active(tick)` says whether application
/// I/O runs.
fn run(
    config: ResyncRateConfig,
    link: &mut Link,
    ticks: u64,
    active: fn(u64) -> bool,
) -> Vec<Sample> {
    let mut controller = controller(config);
    let mut samples = Vec::new();
    let mut last_round_trip = None;
    for tick in 0..ticks {
        let (answered_bytes, round_trip) = link.answers(tick);
        last_round_trip = round_trip.or(last_round_trip);
        let budget = controller.tick(&ResyncTick {
            now: at_tick(tick),
            in_flight_bytes: link.in_flight,
            answered_bytes,
            round_trip: last_round_trip,
            application_active: active(tick),
            pending_bytes: u64::MAX,
        });
        link.issue(tick, budget);
        samples.push(Sample { budget, in_flight: link.in_flight, round_trip: last_round_trip });
    }
    samples
}

fn never(_: u64) -> bool {
    false
}

fn always(_: u64) -> bool {
    true
}

/// Fixed mode: over 10 s of 100 ms ticks, the total is the rate times 10 s (within one tick's
/// worth; in fact within a byte), for any rate in DRBD's range, with regular or uneven ticks.
#[test]
fn fixed_rate_is_respected_over_ten_seconds() {
    let uneven = [50u64, 150, 100, 30, 170];
    for rate in [1u32, 250, 4096, 102_400, 8_388_608] {
        let expected = u64::from(rate) * 1024 * 10;
        let one_tick = u64::from(rate) * 1024 / 10;
        for pattern in [&[100u64][..], &uneven[..]] {
            let mut controller = controller(fixed(rate));
            // The first tick counts as one PLAN_STEP; the rest as the time between ticks.
            let mut now_ms = 0;
            let mut total = controller.tick(&idle(Time(0)));
            let mut step = pattern.iter().cycle();
            while now_ms < 9_900 {
                now_ms += step.next().copied().unwrap_or(100);
                total += controller.tick(&idle(Time(now_ms.min(9_900) * 1_000_000)));
                now_ms = now_ms.min(9_900);
            }
            assert!(total.abs_diff(expected) <= one_tick, "rate {rate}: {total} vs {expected}");
            assert!(total.abs_diff(expected) <= 1, "rate {rate}: carry loses bytes");
        }
    }
}

/// Fixed mode yields to application I/O down to c-min-rate, unless c-min-rate is 0.
#[test]
fn fixed_rate_yields_to_application() {
    let rows: &[(&str, u32, u32, bool, u64)] = &[
        ("idle", 10_240, 250, false, 1_048_576),
        ("application active", 10_240, 250, true, 25_600),
        ("c-min-rate 0 never throttles", 10_240, 0, true, 1_048_576),
        ("c-min-rate above the rate", 100, 250, true, 10_240),
    ];
    for &(name, rate, min_rate, application_active, expected) in rows {
        let mut config = fixed(rate);
        config.c_min_rate_kib_per_s = min_rate;
        let mut controller = controller(config);
        let budget = controller.tick(&ResyncTick { application_active, ..idle(Time(0)) });
        assert_eq!(budget, expected, "{name}");
    }
}

/// Dynamic mode, fill target: with a constant-delay link, the data in flight settles at the
/// fill target, whatever the round trip and plan-ahead.
#[test]
fn fill_target_converges_on_a_constant_delay_link() {
    let fill_sectors = 2048; // 1 MiB
    let fill = u64::from(fill_sectors) * SECTOR_BYTES;
    for delay_ticks in [1u64, 3, 10, 25] {
        for plan_ahead in [Duration::from_secs(2), Duration::from_secs(5)] {
            let mut link = Link::new(delay_ticks, u64::MAX);
            let samples = run(dynamic(fill_sectors, plan_ahead), &mut link, 300, never);
            for sample in &samples[250..] {
                let error = sample.in_flight.abs_diff(fill);
                assert!(
                    error <= fill / 50,
                    "delay {delay_ticks} plan {plan_ahead:?}: in flight {} vs {fill}",
                    sample.in_flight
                );
            }
        }
    }
}

/// Dynamic mode, delay target: on a link with limited bandwidth the queue grows until the
/// round trip reaches c-delay-target, and the link stays busy.
#[test]
fn delay_target_converges_on_a_bandwidth_limited_link() {
    let bandwidth = MIB; // 10 MiB/s
    let mut config = dynamic(0, Duration::from_secs(2));
    config.c_delay_target = Duration::from_millis(1000);
    let mut link = Link::new(1, bandwidth);
    let samples = run(config, &mut link, 600, never);
    for sample in &samples[500..] {
        let round_trip = sample.round_trip.unwrap_or_default();
        let ms = round_trip.as_millis();
        assert!((700..=1300).contains(&ms), "round trip {ms} ms");
        assert!(sample.in_flight >= bandwidth, "link starved: {} in flight", sample.in_flight);
    }
}

/// Dynamic mode never exceeds c-max-rate, even when the link could take more.
#[test]
fn dynamic_never_exceeds_max_rate() {
    let mut config = dynamic(1 << 20, Duration::from_secs(1)); // 512 MiB fill target
    config.c_max_rate_kib_per_s = 1024; // 1 MiB/s: 104857 bytes per tick
    let mut link = Link::new(2, u64::MAX);
    let samples = run(config, &mut link, 200, never);
    assert!(samples.iter().all(|sample| sample.budget <= 104_857));
    assert!(samples[20..].iter().all(|sample| sample.budget == 104_857), "cap reached");
}

/// While application I/O runs the dynamic controller yields down to c-min-rate, and it never
/// goes below c-min-rate while there is work, even with a stalled link.
#[test]
fn dynamic_min_rate_is_floor_and_throttle() {
    let min_budget = 25_600; // 250 KiB/s over 100 ms
    let mut link = Link::new(3, u64::MAX);
    let samples = run(dynamic(1 << 16, Duration::from_secs(2)), &mut link, 100, always);
    assert!(samples.iter().all(|sample| sample.budget == min_budget), "throttled to the floor");

    let mut stalled = Link::new(u64::MAX / 2, u64::MAX);
    let samples = run(dynamic(100, Duration::from_secs(2)), &mut stalled, 100, never);
    assert!(samples.iter().all(|sample| sample.budget >= min_budget), "floor holds");
}

/// The budget never exceeds the work left, and is 0 without work even with a floor.
#[test]
fn budget_is_bounded_by_work_left() {
    let rows: &[(&str, ResyncRateConfig, u64, u64)] = &[
        ("fixed, little work", fixed(10_240), 4096, 4096),
        ("fixed, no work", fixed(10_240), 0, 0),
        ("dynamic, little work", dynamic(100, Duration::from_secs(2)), 4096, 4096),
        ("dynamic, no work", dynamic(100, Duration::from_secs(2)), 0, 0),
    ];
    for &(name, config, pending_bytes, expected) in rows {
        let mut controller = controller(config);
        let budget = controller.tick(&ResyncTick { pending_bytes, ..idle(Time(0)) });
        assert_eq!(budget, expected, "{name}");
    }
}

#[test]
fn restart_forgets_the_plan() {
    let config = dynamic(2048, Duration::from_secs(2));
    let mut fresh = controller(config);
    let mut used = controller(config);
    for tick in 0..5 {
        used.tick(&ResyncTick { in_flight_bytes: 7 * MIB, ..idle(at_tick(tick)) });
    }
    used.restart();
    assert_eq!(used, fresh);
    assert_eq!(used.tick(&idle(at_tick(50))), fresh.tick(&idle(at_tick(0))));
}

#[test]
fn bad_configs_are_refused() {
    let too_long = dynamic(100, PLAN_AHEAD_MAX + Duration::from_millis(1));
    let no_delay = ResyncRateConfig { c_delay_target: Duration::ZERO, ..dynamic(0, PLAN_STEP) };
    let rows: &[(&str, ResyncRateConfig, Option<SyncError>)] = &[
        ("defaults", ResyncRateConfig::default(), None),
        ("longest plan", dynamic(100, PLAN_AHEAD_MAX), None),
        (
            "plan too long",
            too_long,
            Some(SyncError::PlanAheadTooLong { plan_ahead_ms: 30_001, max_ms: 30_000 }),
        ),
        ("fixed rate zero", fixed(0), Some(SyncError::ZeroResyncRate)),
        ("no delay target in delay mode", no_delay, Some(SyncError::ZeroDelayTarget)),
        (
            "no delay target in fill mode",
            ResyncRateConfig { c_delay_target: Duration::ZERO, ..dynamic(1, PLAN_STEP) },
            None,
        ),
        (
            "resync-rate unused in dynamic mode",
            ResyncRateConfig { resync_rate_kib_per_s: 0, ..dynamic(1, PLAN_STEP) },
            None,
        ),
    ];
    for (name, config, expected) in rows {
        let result = ResyncRateController::new(*config).err();
        assert_eq!(result, *expected, "{name}");
    }
}

fn arbitrary_config() -> impl Strategy<Value = ResyncRateConfig> {
    let rate = prop_oneof![Just(0u32), Just(1), Just(250), Just(u32::MAX), any::<u32>()];
    let millis = prop_oneof![Just(0u64), 1u64..40_000, Just(u64::MAX / 1_000_000)];
    (rate.clone(), millis.clone(), millis, rate.clone(), rate.clone(), rate).prop_map(
        |(resync, plan, delay, fill, max, min)| ResyncRateConfig {
            resync_rate_kib_per_s: resync,
            c_plan_ahead: Duration::from_millis(plan.min(40_000)),
            c_delay_target: Duration::from_millis(delay),
            c_fill_target_sectors: fill,
            c_max_rate_kib_per_s: max,
            c_min_rate_kib_per_s: min,
        },
    )
}

fn arbitrary_tick() -> impl Strategy<Value = (u64, ResyncTick)> {
    let bytes = prop_oneof![Just(0u64), 0u64..(64 * MIB), Just(u64::MAX), any::<u64>()];
    let step = prop_oneof![Just(0u64), Just(100_000_000), any::<u64>()];
    let round_trip = prop::option::of(prop_oneof![Just(0u64), 1u64..10_000_000_000, any::<u64>()]);
    (step, bytes.clone(), bytes.clone(), round_trip, any::<bool>(), bytes).prop_map(
        |(step, in_flight_bytes, answered_bytes, round_trip, application_active, pending_bytes)| {
            let tick = ResyncTick {
                now: Time(0),
                in_flight_bytes,
                answered_bytes,
                round_trip: round_trip.map(Duration::from_nanos),
                application_active,
                pending_bytes,
            };
            (step, tick)
        },
    )
}

proptest! {
    /// Any configuration and any inputs: no panic, no overflow, and the budget respects the
    /// work left, c-max-rate, and (while there is work) c-min-rate.
    #[test]
    fn bounds_hold_for_extreme_inputs(
        config in arbitrary_config(),
        ticks in prop::collection::vec(arbitrary_tick(), 1..40),
    ) {
        let Ok(mut controller) = ResyncRateController::new(config) else { return Ok(()) };
        let mut now = Time(0);
        let mut previous: Option<Time> = None;
        for (step, mut tick) in ticks {
            now = Time(now.0.saturating_add(step));
            tick.now = now;
            let elapsed = previous.map_or(PLAN_STEP, |last| now.since(last));
            previous = Some(now);
            let budget = controller.tick(&tick);
            prop_assert!(budget <= tick.pending_bytes);
            if config.c_plan_ahead.is_zero() {
                let rate = rate_budget(config.resync_rate_kib_per_s, elapsed);
                prop_assert!(budget <= rate.saturating_add(1));
                continue;
            }
            let max = rate_budget(config.c_max_rate_kib_per_s, elapsed);
            let min = rate_budget(config.c_min_rate_kib_per_s, elapsed);
            if config.c_max_rate_kib_per_s != 0 {
                prop_assert!(budget <= max, "{} > max {}", budget, max);
            }
            if config.c_max_rate_kib_per_s == 0 || min <= max {
                prop_assert!(budget >= min.min(tick.pending_bytes), "{} < min {}", budget, min);
            }
            if tick.application_active && config.c_min_rate_kib_per_s != 0 {
                prop_assert!(budget <= min, "{} > min {} under application I/O", budget, min);
            }
        }
    }
}
