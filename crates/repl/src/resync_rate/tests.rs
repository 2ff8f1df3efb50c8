//! Tests of the resync rate controller (drbd-semantics.md §1, `resync-rate` and `c-*`) on
//! synthetic traces: a simulated link with a fixed propagation delay and an optional
//! bandwidth limit answers the requests the controller allows, either once per tick (the
//! tick's budget alone) or on a finer clock where the window is refilled between ticks.

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

/// A link that serves `bandwidth` bytes per step in order and answers each byte
/// `delay_ticks` steps after it was served (a step is a tick unless made finer).
struct Link {
    delay_ticks: u64,
    bandwidth: u64,
    /// The length of one step.
    step: Duration,
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
            step: PLAN_STEP,
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
            round_trip = Some(self.step * u32::try_from(tick - issued).unwrap_or(u32::MAX));
        }
        self.in_flight -= answered;
        (answered, round_trip)
    }

    /// Queues `bytes` and serves the step's bandwidth (once per step).
    fn issue(&mut self, tick: u64, bytes: u64) {
        self.enqueue(tick, bytes);
        self.serve(tick);
    }

    fn enqueue(&mut self, tick: u64, bytes: u64) {
        self.in_flight += bytes;
        self.queue.push_back((tick, bytes));
    }

    /// Serves up to one step's bandwidth from the queue, in order.
    fn serve(&mut self, tick: u64) {
        let mut capacity = self.bandwidth;
        while let Some((issued, bytes)) = self.queue.front_mut() {
            let served = (*bytes).min(capacity);
            if served == 0 {
                break;
            }
            capacity -= served;
            *bytes -= served;
            self.transit
                .push_back((tick + self.delay_ticks, *issued, served));
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
        samples.push(Sample {
            budget,
            in_flight: link.in_flight,
            round_trip: last_round_trip,
        });
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
            assert!(
                total.abs_diff(expected) <= one_tick,
                "rate {rate}: {total} vs {expected}"
            );
            assert!(
                total.abs_diff(expected) <= 1,
                "rate {rate}: carry loses bytes"
            );
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
        let budget = controller.tick(&ResyncTick {
            application_active,
            ..idle(Time(0))
        });
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
        assert!(
            sample.in_flight >= bandwidth,
            "link starved: {} in flight",
            sample.in_flight
        );
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
    assert!(
        samples[20..].iter().all(|sample| sample.budget == 104_857),
        "cap reached"
    );
}

/// While application I/O runs the dynamic controller yields down to c-min-rate, and it never
/// goes below c-min-rate while there is work, even with a stalled link.
#[test]
fn dynamic_min_rate_is_floor_and_throttle() {
    let min_budget = 25_600; // 250 KiB/s over 100 ms
    let mut link = Link::new(3, u64::MAX);
    let samples = run(
        dynamic(1 << 16, Duration::from_secs(2)),
        &mut link,
        100,
        always,
    );
    assert!(
        samples.iter().all(|sample| sample.budget == min_budget),
        "throttled to the floor"
    );

    let mut stalled = Link::new(u64::MAX / 2, u64::MAX);
    let samples = run(
        dynamic(100, Duration::from_secs(2)),
        &mut stalled,
        100,
        never,
    );
    assert!(
        samples.iter().all(|sample| sample.budget >= min_budget),
        "floor holds"
    );
}

/// The budget never exceeds the work left, and is 0 without work even with a floor.
#[test]
fn budget_is_bounded_by_work_left() {
    let rows: &[(&str, ResyncRateConfig, u64, u64)] = &[
        ("fixed, little work", fixed(10_240), 4096, 4096),
        ("fixed, no work", fixed(10_240), 0, 0),
        (
            "dynamic, little work",
            dynamic(100, Duration::from_secs(2)),
            4096,
            4096,
        ),
        (
            "dynamic, no work",
            dynamic(100, Duration::from_secs(2)),
            0,
            0,
        ),
    ];
    for &(name, config, pending_bytes, expected) in rows {
        let mut controller = controller(config);
        let budget = controller.tick(&ResyncTick {
            pending_bytes,
            ..idle(Time(0))
        });
        assert_eq!(budget, expected, "{name}");
    }
}

#[test]
fn restart_forgets_the_plan() {
    let config = dynamic(2048, Duration::from_secs(2));
    let mut fresh = controller(config);
    let mut used = controller(config);
    for tick in 0..5 {
        used.tick(&ResyncTick {
            in_flight_bytes: 7 * MIB,
            ..idle(at_tick(tick))
        });
    }
    used.restart();
    assert_eq!(used, fresh);
    assert_eq!(used.tick(&idle(at_tick(50))), fresh.tick(&idle(at_tick(0))));
}

#[test]
fn bad_configs_are_refused() {
    let too_long = dynamic(100, PLAN_AHEAD_MAX + Duration::from_millis(1));
    let no_delay = ResyncRateConfig {
        c_delay_target: Duration::ZERO,
        ..dynamic(0, PLAN_STEP)
    };
    let rows: &[(&str, ResyncRateConfig, Option<SyncError>)] = &[
        ("defaults", ResyncRateConfig::default(), None),
        ("longest plan", dynamic(100, PLAN_AHEAD_MAX), None),
        (
            "plan too long",
            too_long,
            Some(SyncError::PlanAheadTooLong {
                plan_ahead_ms: 30_001,
                max_ms: 30_000,
            }),
        ),
        ("fixed rate zero", fixed(0), Some(SyncError::ZeroResyncRate)),
        (
            "no delay target in delay mode",
            no_delay,
            Some(SyncError::ZeroDelayTarget),
        ),
        (
            "no delay target in fill mode",
            ResyncRateConfig {
                c_delay_target: Duration::ZERO,
                ..dynamic(1, PLAN_STEP)
            },
            None,
        ),
        (
            "resync-rate unused in dynamic mode",
            ResyncRateConfig {
                resync_rate_kib_per_s: 0,
                ..dynamic(1, PLAN_STEP)
            },
            None,
        ),
    ];
    for (name, config, expected) in rows {
        let result = ResyncRateController::new(*config).err();
        assert_eq!(result, *expected, "{name}");
    }
}

/// Steps per tick on the fine clock of [`run_refilling`].
const STEPS_PER_TICK: u64 = 10;
/// The engine's block (bitmap granularity) and largest request, as in `engine/resync.rs`.
const BLOCK: u64 = 4096;
const REQUEST_BYTES_MAX: u64 = 128 * 1024;

/// What one interval (tick to tick) of [`run_refilling`] saw.
#[derive(Debug, Clone, Copy, Default)]
struct Interval {
    /// The window set at the tick.
    window: Option<u64>,
    /// In flight once the tick's step issued everything it could (budget and refills).
    in_flight_after_tick: u64,
    /// Bytes issued in the interval, and answered in it.
    issued: u64,
    answered: u64,
    round_trip: Option<Duration>,
    /// Application I/O was active at the tick (the yield rule for the whole interval).
    throttled: bool,
}

/// The engine's issuing loop: requests of whole blocks, at most [`REQUEST_BYTES_MAX`], while
/// the controller allows; a budget request is rounded up to a block, a refill must fit.
/// Checks that a refill never passes the window.
fn drain(controller: &mut ResyncRateController, link: &mut Link, step: u64, active: bool) -> u64 {
    let mut issued = 0;
    loop {
        let load = ResyncLoad {
            in_flight_bytes: link.in_flight,
            application_active: active,
        };
        let bytes = match controller.allowance(&load) {
            Allowance::Wait => break,
            Allowance::Budget { bytes } => bytes.next_multiple_of(BLOCK).min(REQUEST_BYTES_MAX),
            Allowance::Refill { bytes } if bytes >= BLOCK => {
                let window = controller.window_bytes().unwrap_or(0);
                let bytes = (bytes / BLOCK * BLOCK).min(REQUEST_BYTES_MAX);
                assert!(link.in_flight + bytes <= window, "a refill past the window");
                bytes
            }
            Allowance::Refill { .. } => break,
        };
        controller.issued(bytes);
        link.enqueue(step, bytes);
        issued += bytes;
    }
    issued
}

/// Runs `ticks` ticks of `config` against `link` on a clock of [`STEPS_PER_TICK`] steps per
/// tick: the tick's budget at each tick, refills at every step; `active(step)` says whether
/// application I/O arrived in that step.
fn run_refilling(
    config: ResyncRateConfig,
    link: &mut Link,
    ticks: u64,
    active: fn(u64) -> bool,
) -> Vec<Interval> {
    let step_length = PLAN_STEP / u32::try_from(STEPS_PER_TICK).unwrap_or(1);
    link.step = step_length;
    let mut controller = controller(config);
    let mut intervals: Vec<Interval> = Vec::new();
    let (mut answered, mut active_since_tick, mut last_round_trip) = (0, false, None);
    for step in 0..ticks * STEPS_PER_TICK {
        let (bytes, round_trip) = link.answers(step);
        answered += bytes;
        if let Some(last) = intervals.last_mut() {
            last.answered += bytes;
        }
        last_round_trip = round_trip.or(last_round_trip);
        if step % STEPS_PER_TICK == 0 {
            let tick = ResyncTick {
                now: Time(step * u64::try_from(step_length.as_nanos()).unwrap_or(0)),
                in_flight_bytes: link.in_flight,
                answered_bytes: std::mem::take(&mut answered),
                round_trip: last_round_trip,
                application_active: std::mem::take(&mut active_since_tick),
                pending_bytes: u64::MAX,
            };
            controller.tick(&tick);
            let throttled = tick.application_active && config.c_min_rate_kib_per_s != 0;
            let issued = drain(&mut controller, link, step, false);
            intervals.push(Interval {
                window: controller.window_bytes(),
                in_flight_after_tick: link.in_flight,
                issued,
                round_trip: last_round_trip,
                throttled,
                ..Interval::default()
            });
        }
        active_since_tick |= active(step);
        let issued = drain(&mut controller, link, step, active_since_tick);
        if let Some(last) = intervals.last_mut() {
            last.issued += issued;
        }
        link.serve(step);
    }
    intervals
}

fn never_step(_: u64) -> bool {
    false
}

/// The accounting of the tick's budget with refills (module docs): the window is kept full
/// between ticks, so throughput is window / round trip, and the tick's budget does not
/// replace the refilled bytes a second time. With double counting, right after each tick in
/// flight would exceed the window by everything refilled in the interval (window × tick /
/// round trip: at least a quarter of the window here). Without it, once settled, in flight
/// after a tick stays within the window plus one block (a budget of a few bytes is rounded
/// up to a block); early on, a round trip longer than a tick lets the c-min-rate floor
/// (issued while no reply has come back) and the plan's ramp overshoot by up to a tenth,
/// which decays.
#[test]
fn refills_keep_the_fill_target_in_flight_without_double_counting() {
    let fill_sectors = 2048; // 1 MiB
    let window = u64::from(fill_sectors) * SECTOR_BYTES;
    for delay_steps in [1u64, 3, 7, 15, 40] {
        let config = ResyncRateConfig {
            c_max_rate_kib_per_s: 0,
            ..dynamic(fill_sectors, Duration::from_secs(2))
        };
        let mut link = Link::new(delay_steps, u64::MAX);
        let intervals = run_refilling(config, &mut link, 200, never_step);
        for (tick, interval) in intervals.iter().enumerate() {
            assert_eq!(interval.window, Some(window));
            let after = interval.in_flight_after_tick;
            let slack = if tick < 100 { window / 8 } else { BLOCK };
            assert!(
                after <= window + slack,
                "delay {delay_steps} tick {tick}: {after} in flight"
            );
        }
        let answered: u64 = intervals[100..200]
            .iter()
            .map(|interval| interval.answered)
            .sum();
        let expected = window * 100 * STEPS_PER_TICK / delay_steps;
        assert!(
            answered.abs_diff(expected) <= expected / 20,
            "delay {delay_steps}: {answered} answered in 10 s, window/round trip is {expected}"
        );
    }
}

/// Delay target with refills: on a link with limited bandwidth the window grows until the
/// round trip reaches c-delay-target (the refills do not inflate the aim), and the link
/// stays busy.
#[test]
fn delay_target_with_refills_converges_on_a_bandwidth_limited_link() {
    let bandwidth_per_step = MIB / STEPS_PER_TICK; // 10 MiB/s
    let mut config = dynamic(0, Duration::from_secs(2));
    config.c_delay_target = Duration::from_millis(1000);
    config.c_max_rate_kib_per_s = 0;
    let mut link = Link::new(1, bandwidth_per_step);
    let intervals = run_refilling(config, &mut link, 600, never_step);
    for interval in &intervals[500..] {
        let ms = interval.round_trip.unwrap_or_default().as_millis();
        assert!((700..=1300).contains(&ms), "round trip {ms} ms");
        assert!(
            interval.answered >= bandwidth_per_step * STEPS_PER_TICK * 9 / 10,
            "link starved"
        );
    }
}

/// Everything issued in an interval (budget and refills) stays within c-max-rate × tick
/// length, cumulatively within a block, and within c-min-rate × tick length while
/// application I/O is active; the caps are reached, so the resync runs at the cap.
#[test]
fn refills_stay_within_the_interval_caps() {
    fn first_half(step: u64) -> bool {
        step < 100 * STEPS_PER_TICK
    }
    let max_cap = 1_048_576; // 10 MiB/s over 100 ms
    let min_cap = 104_857; // 1 MiB/s over 100 ms
    let config = ResyncRateConfig {
        c_max_rate_kib_per_s: 10 * 1024,
        c_min_rate_kib_per_s: 1024,
        ..dynamic(1 << 17, Duration::from_secs(2)) // 64 MiB window
    };
    let mut link = Link::new(1, u64::MAX);
    let intervals = run_refilling(config, &mut link, 200, first_half);
    let mut issued_total = 0;
    for (tick, interval) in (0u64..).zip(&intervals) {
        issued_total += interval.issued;
        assert!(
            issued_total <= max_cap * (tick + 1) + BLOCK,
            "tick {tick}: {issued_total} issued in all"
        );
        if interval.throttled {
            assert!(
                interval.issued < min_cap + BLOCK,
                "tick {tick}: {} while yielding",
                interval.issued
            );
        }
        if (5..100).contains(&tick) {
            assert!(
                interval.issued + BLOCK > min_cap,
                "tick {tick}: c-min-rate not reached"
            );
        }
        if tick > 105 {
            assert!(
                interval.issued + BLOCK > max_cap,
                "tick {tick}: c-max-rate not reached"
            );
        }
    }
}

/// The allowance step by step (module docs, "Refills"): nothing before the first tick, the
/// budget first, then refills up to the window and the cap; none in fixed mode.
#[test]
fn allowance_hands_out_the_budget_then_refills() {
    let idle_load = ResyncLoad {
        in_flight_bytes: 0,
        application_active: false,
    };
    let mut fixed_mode = controller(fixed(1024));
    assert_eq!(
        fixed_mode.allowance(&idle_load),
        Allowance::Wait,
        "before the first tick"
    );
    let budget = fixed_mode.tick(&idle(Time(0)));
    assert_eq!(
        fixed_mode.allowance(&idle_load),
        Allowance::Budget { bytes: budget }
    );
    fixed_mode.issued(budget);
    assert_eq!(
        fixed_mode.allowance(&idle_load),
        Allowance::Wait,
        "no refills in fixed mode"
    );
    assert_eq!(fixed_mode.window_bytes(), None);

    // A 512 KiB window; c-max-rate 4 MiB/s is 419430 bytes per 100 ms tick, c-min-rate
    // 1 MiB/s 104857 (the first budget: the plan's first step is below that floor).
    let config = ResyncRateConfig {
        c_max_rate_kib_per_s: 4 * 1024,
        c_min_rate_kib_per_s: 1024,
        ..dynamic(1024, Duration::from_secs(2))
    };
    let mut dynamic_mode = controller(config);
    assert_eq!(
        dynamic_mode.allowance(&idle_load),
        Allowance::Wait,
        "before the first tick"
    );
    let budget = dynamic_mode.tick(&idle(Time(0)));
    assert_eq!(budget, 104_857, "the c-min-rate floor");
    let window = 1024 * SECTOR_BYTES;
    assert_eq!(dynamic_mode.window_bytes(), Some(window));
    assert_eq!(
        dynamic_mode.allowance(&idle_load),
        Allowance::Budget { bytes: budget }
    );
    dynamic_mode.issued(budget + 1_191); // a budget request rounded up to a block
    let cap_left = 419_430 - 106_048;
    let load = |in_flight_bytes, application_active| ResyncLoad {
        in_flight_bytes,
        application_active,
    };
    let rows: &[(&str, ResyncLoad, Allowance)] = &[
        (
            "window free, c-max-rate binds",
            load(0, false),
            Allowance::Refill { bytes: cap_left },
        ),
        (
            "window partly used",
            load(window - 4096, false),
            Allowance::Refill { bytes: 4096 },
        ),
        ("window full", load(window, false), Allowance::Wait),
        (
            "beyond the window",
            load(window + 1, false),
            Allowance::Wait,
        ),
        (
            "application active: the budget used c-min-rate",
            load(0, true),
            Allowance::Wait,
        ),
    ];
    for (name, load, expected) in rows {
        assert_eq!(dynamic_mode.allowance(load), *expected, "{name}");
    }
    dynamic_mode.issued(cap_left - 4096);
    assert_eq!(
        dynamic_mode.allowance(&load(0, false)),
        Allowance::Refill { bytes: 4096 }
    );
    dynamic_mode.issued(4096);
    assert_eq!(
        dynamic_mode.allowance(&load(0, false)),
        Allowance::Wait,
        "c-max-rate used up"
    );
    dynamic_mode.restart();
    assert_eq!(
        dynamic_mode.allowance(&idle_load),
        Allowance::Wait,
        "restart closes the interval"
    );
}

fn arbitrary_config() -> impl Strategy<Value = ResyncRateConfig> {
    let rate = prop_oneof![Just(0u32), Just(1), Just(250), Just(u32::MAX), any::<u32>()];
    let millis = prop_oneof![Just(0u64), 1u64..40_000, Just(u64::MAX / 1_000_000)];
    (
        rate.clone(),
        millis.clone(),
        millis,
        rate.clone(),
        rate.clone(),
        rate,
    )
        .prop_map(|(resync, plan, delay, fill, max, min)| ResyncRateConfig {
            resync_rate_kib_per_s: resync,
            c_plan_ahead: Duration::from_millis(plan.min(40_000)),
            c_delay_target: Duration::from_millis(delay),
            c_fill_target_sectors: fill,
            c_max_rate_kib_per_s: max,
            c_min_rate_kib_per_s: min,
        })
}

fn arbitrary_tick() -> impl Strategy<Value = (u64, ResyncTick)> {
    let bytes = prop_oneof![Just(0u64), 0u64..(64 * MIB), Just(u64::MAX), any::<u64>()];
    let step = prop_oneof![Just(0u64), Just(100_000_000), any::<u64>()];
    let round_trip = prop::option::of(prop_oneof![Just(0u64), 1u64..10_000_000_000, any::<u64>()]);
    (
        step,
        bytes.clone(),
        bytes.clone(),
        round_trip,
        any::<bool>(),
        bytes,
    )
        .prop_map(
            |(
                step,
                in_flight_bytes,
                answered_bytes,
                round_trip,
                application_active,
                pending_bytes,
            )| {
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

/// One input to the controller in [`refills_hold_the_window_and_caps`].
#[derive(Debug, Clone)]
enum Input {
    /// A tick after `step_nanos`, with the latest round trip.
    Tick {
        step_nanos: u64,
        round_trip_nanos: Option<u64>,
        application_active: bool,
    },
    /// Replies to this many thousandths of what is in flight.
    Answer { per_mille: u64 },
    /// The engine issues what the allowance permits (a few requests).
    Drain { application_active: bool },
}

fn arbitrary_input() -> impl Strategy<Value = Input> {
    let step = prop_oneof![Just(0u64), Just(100_000_000), 1u64..1_000_000_000];
    prop_oneof![
        (step, prop::option::of(1u64..5_000_000_000), any::<bool>()).prop_map(
            |(step_nanos, round_trip_nanos, application_active)| Input::Tick {
                step_nanos,
                round_trip_nanos,
                application_active,
            }
        ),
        (0u64..=1000).prop_map(|per_mille| Input::Answer { per_mille }),
        any::<bool>().prop_map(|application_active| Input::Drain { application_active }),
    ]
}

/// The model engine of [`refills_hold_the_window_and_caps`]: what it has in flight and has
/// issued, and the sum of the intervals' c-max-rate caps.
#[derive(Default)]
struct Model {
    in_flight: u64,
    answered: u64,
    issued_total: u64,
    caps_total: u64,
    active_since_tick: bool,
}

impl Model {
    /// Issues what the allowance permits, a few requests at most; checks refills.
    fn drain(
        &mut self,
        controller: &mut ResyncRateController,
        dynamic: bool,
    ) -> Result<(), TestCaseError> {
        for _ in 0..4 {
            let load = ResyncLoad {
                in_flight_bytes: self.in_flight,
                application_active: self.active_since_tick,
            };
            let bytes = match controller.allowance(&load) {
                Allowance::Wait => break,
                Allowance::Budget { bytes } => bytes.saturating_add(BLOCK - 1) / BLOCK * BLOCK,
                Allowance::Refill { bytes } => {
                    prop_assert!(dynamic, "a refill in fixed mode");
                    let bytes = bytes / BLOCK * BLOCK;
                    let window = controller.window_bytes().unwrap_or(0);
                    prop_assert!(
                        self.in_flight.saturating_add(bytes) <= window,
                        "past the window"
                    );
                    if bytes == 0 {
                        break;
                    }
                    bytes
                }
            };
            controller.issued(bytes);
            self.in_flight = self.in_flight.saturating_add(bytes);
            self.issued_total = self.issued_total.saturating_add(bytes);
        }
        Ok(())
    }
}

fn check_refills(config: ResyncRateConfig, inputs: Vec<Input>) -> Result<(), TestCaseError> {
    let Ok(mut controller) = ResyncRateController::new(config) else {
        return Ok(());
    };
    let dynamic = !config.c_plan_ahead.is_zero();
    let (mut now, mut previous) = (Time(0), None::<Time>);
    let mut model = Model::default();
    for input in inputs {
        match input {
            Input::Tick {
                step_nanos,
                round_trip_nanos,
                application_active,
            } => {
                now = Time(now.0.saturating_add(step_nanos));
                let elapsed = previous.map_or(PLAN_STEP, |last| now.since(last));
                previous = Some(now);
                let active = std::mem::take(&mut model.active_since_tick) || application_active;
                controller.tick(&ResyncTick {
                    now,
                    in_flight_bytes: model.in_flight,
                    answered_bytes: std::mem::take(&mut model.answered),
                    round_trip: round_trip_nanos.map(Duration::from_nanos),
                    application_active: active,
                    pending_bytes: u64::MAX,
                });
                let cap = rate_budget(config.c_max_rate_kib_per_s, elapsed);
                model.caps_total = model.caps_total.saturating_add(cap);
                prop_assert_eq!(controller.window_bytes().is_some(), dynamic);
            }
            Input::Answer { per_mille } => {
                let bytes = model.in_flight / 1000 * per_mille;
                model.in_flight -= bytes;
                model.answered = model.answered.saturating_add(bytes);
            }
            Input::Drain { application_active } => {
                model.active_since_tick |= application_active;
                model.drain(&mut controller, dynamic)?;
            }
        }
        if dynamic && config.c_max_rate_kib_per_s != 0 {
            let (issued, caps) = (model.issued_total, model.caps_total);
            prop_assert!(
                issued <= caps.saturating_add(BLOCK),
                "{} > caps {}",
                issued,
                caps
            );
        }
    }
    Ok(())
}

proptest! {
    /// Any configuration and any interleaving of ticks, replies and issuing: a refill never
    /// takes in flight past the window, fixed mode never refills, and in dynamic mode the
    /// bytes issued in all stay within the sum of the intervals' c-max-rate caps plus one
    /// block.
    #[test]
    fn refills_hold_the_window_and_caps(
        config in arbitrary_config(),
        inputs in prop::collection::vec(arbitrary_input(), 1..80),
    ) {
        check_refills(config, inputs)?;
    }
}
