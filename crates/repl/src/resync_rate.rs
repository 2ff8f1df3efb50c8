//! The resync rate controller: how many bytes of resync requests a sync target may issue, at
//! each tick and between ticks (drbd-semantics.md §1, `resync-rate` and the `c-*` options).
//!
//! Sans-I/O. Call protocol: the engine calls [`ResyncRateController::tick`] about every 100 ms
//! with what it observed since the previous tick; that opens an *interval* (until the next
//! tick). Whenever it could issue a request (at the tick, and each time a reply's write
//! finishes and frees window space) it asks [`ResyncRateController::allowance`] and reports
//! each request it issues with [`ResyncRateController::issued`].
//!
//! # Algorithm
//! - **Fixed** (`c-plan-ahead 0`): the budget is `resync-rate` times the time since the last
//!   tick. The fraction of a byte left over is carried to the next tick, so over any span the
//!   total is exact to within one byte; a budget not used is not saved up. Nothing is issued
//!   beyond the budget.
//! - **Dynamic**: the controller aims at an amount of data in flight (requested, not yet
//!   written): the *aim*, exposed as [`ResyncRateController::window_bytes`]. With
//!   `c-fill-target` set, the aim is the fill target. Otherwise it is what keeps the round
//!   trip at `c-delay-target`: by Little's law, in-flight = throughput × delay, so the aim is
//!   the data in flight over the last tick scaled by target delay / observed delay (or, without
//!   a delay sample, the throughput of the last tick times the target delay; at the very
//!   start, `resync-rate` times the target delay). "In flight over the last tick" is the
//!   *level* (see below) when nothing was refilled. With refills the window was topped up
//!   between ticks and many round trips may fit in one tick, so it is Little's average
//!   instead, answered bytes × round trip / tick length: the aim becomes the throughput
//!   times the target delay, which settles where the round trip is the target on a
//!   bandwidth-limited link, and grows while the link is not the limit.
//! - **The tick's budget (dynamic)** is what was answered since the last tick and not yet
//!   replaced, plus a correction from a plan. Accounting, with F the bytes in flight now, A
//!   the bytes answered since the last tick and R the bytes already issued on arrivals since
//!   then (refills, which replaced answered bytes at once): the *level*, what was in flight
//!   right after the previous tick's budget, is F + A − R, and the bytes still to replace are
//!   A − R. So the budget is A − R + correction and the level after this tick is the previous
//!   level plus the correction: a refilled byte is never replaced a second time by the tick.
//!   The plan: each tick, the gap between the aim and the level, minus corrections already
//!   planned, is spread evenly over the next `c-plan-ahead` ticks (one plan slot per 100 ms
//!   tick), and this tick takes the first slot. So the level moves towards the aim by a
//!   fraction of the gap per tick, independent of the round trip: no oscillation however
//!   long the link's delay. (Counting only what is still in flight would make the correction
//!   replace the answered bytes a second time, which oscillates at the round-trip period.)
//!   Without refills (R = 0) this is exactly the classic per-tick controller.
//! - **Refills (dynamic)**: `c-fill-target` / `c-delay-target` define data *in flight*, so
//!   once the tick's budget is spent the window is refilled as replies come back, instead of
//!   waiting for the next tick: more may be issued while in flight is below the aim and the
//!   bytes issued in this interval stay within its cap. A refill request must fit whole
//!   (whole blocks), so it never passes the window or the cap.
//! - **Bounds on the tick's budget** (dynamic only, in this order): while application I/O is
//!   active and `c-min-rate` is not 0, the budget is at most `c-min-rate` (the rest of the
//!   bandwidth is the application's); while resync work remains, it is at least `c-min-rate`
//!   less the refills of the interval just ended (so each tick's budget and the refills
//!   before it move at least `c-min-rate`'s worth, and a floor never tops up a window the
//!   refills keep full); it is at most `c-max-rate` (0 = unlimited), which wins over
//!   `c-min-rate` if they conflict. In fixed mode only the application bound applies. The
//!   budget never exceeds the bytes still to request.
//! - **The interval's cap (dynamic)**: everything issued in one interval (budget and refills)
//!   stays within `c-max-rate` × tick length, and, while application I/O is active (seen at
//!   the tick or since) and `c-min-rate` is not 0, within `c-min-rate` × tick length. The
//!   tick length is the one that opened the interval (ticks are regular). The tick's budget
//!   may overdraw by less than one block (a request is rounded up to a block); that overdraft
//!   is repaid from the next tick's budget, and what an interval issued beyond its cap is
//!   counted against the next interval's cap, so over any span the bytes issued stay within
//!   the caps' sum plus one block.
//!
//! # Invariants
//! - No overflow for any configuration or input: arithmetic is in `u128`/`i128` on values
//!   bounded by `u64`, saturating, and results saturate into `u64`.
//! - The plan holds exactly `steps` slots, `1..=PLAN_STEPS_MAX`, and `planned_total` is their
//!   sum.
//! - Refills only in dynamic mode, only once the tick's budget is spent, and never past the
//!   window or the interval's cap.

use std::collections::VecDeque;
use std::time::Duration;

use crate::types::Time;
use crate::uuid::SyncError;

/// The engine's tick, and the length of one plan slot.
pub const PLAN_STEP: Duration = Duration::from_millis(100);
/// The longest `c-plan-ahead` (DRBD's maximum, 300 tenths of a second).
pub const PLAN_AHEAD_MAX: Duration = Duration::from_secs(30);
/// The most plan slots: [`PLAN_AHEAD_MAX`] in [`PLAN_STEP`]s.
pub const PLAN_STEPS_MAX: usize = 300;
/// Bytes in a sector (`c-fill-target` unit).
const SECTOR_BYTES: u64 = 512;
/// Bytes in a KiB (rate unit).
const KIB_BYTES: u128 = 1024;
/// Nanoseconds in a second.
const NANOS_PER_S: u128 = 1_000_000_000;

const _: () = assert!(PLAN_STEP.as_nanos() == crate::TICK_INTERVAL.as_nanos());
const _: () = assert!(PLAN_AHEAD_MAX.as_nanos() == PLAN_STEP.as_nanos() * PLAN_STEPS_MAX as u128);

/// The resync options of one peer device, with DRBD's meaning and units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResyncRateConfig {
    /// `resync-rate`: the fixed rate, used when `c_plan_ahead` is zero.
    pub resync_rate_kib_per_s: u32,
    /// `c-plan-ahead`: zero selects the fixed rate; otherwise the span over which the dynamic
    /// controller spreads its corrections (at most 30 s).
    pub c_plan_ahead: Duration,
    /// `c-delay-target`: the round trip the controller aims at when `c_fill_target_sectors`
    /// is zero.
    pub c_delay_target: Duration,
    /// `c-fill-target`: the data in flight the controller aims at; zero selects the delay
    /// target.
    pub c_fill_target_sectors: u32,
    /// `c-max-rate`: the dynamic controller's cap; zero is unlimited.
    pub c_max_rate_kib_per_s: u32,
    /// `c-min-rate`: the dynamic controller's floor, and the budget while application I/O is
    /// active; zero turns both off.
    pub c_min_rate_kib_per_s: u32,
}

impl Default for ResyncRateConfig {
    /// DRBD's defaults.
    fn default() -> Self {
        ResyncRateConfig {
            resync_rate_kib_per_s: 250,
            c_plan_ahead: Duration::from_secs(2),
            c_delay_target: Duration::from_secs(1),
            c_fill_target_sectors: 100,
            c_max_rate_kib_per_s: 102_400,
            c_min_rate_kib_per_s: 250,
        }
    }
}

/// What the engine observed since the previous tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResyncTick {
    /// The time now (monotonic). The time since the previous tick is derived from it; the
    /// first tick after [`ResyncRateController::new`] or `restart` counts as one
    /// [`PLAN_STEP`].
    pub now: Time,
    /// Resync bytes requested and not yet answered.
    pub in_flight_bytes: u64,
    /// Resync bytes answered since the previous tick (refilled requests included).
    pub answered_bytes: u64,
    /// The latest observed round trip of a resync request, if any.
    pub round_trip: Option<Duration>,
    /// Whether application I/O was active since the previous tick.
    pub application_active: bool,
    /// Resync bytes not yet requested (the work left).
    pub pending_bytes: u64,
}

/// What the engine may issue now; see [`ResyncRateController::allowance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// Nothing until the next tick, or until more of the window is free.
    Wait,
    /// Up to `bytes` of the tick's budget. A request may be rounded up to a block and
    /// overdraw it by less than one block: that is repaid from the next tick's budget.
    Budget {
        /// The budget left.
        bytes: u64,
    },
    /// Up to `bytes` beyond the tick's budget, refilling the window (dynamic mode). A request
    /// must fit whole: never rounded up.
    Refill {
        /// The room left in both the window and the interval's cap.
        bytes: u64,
    },
}

/// What the engine sees when it asks for an [`Allowance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResyncLoad {
    /// Resync bytes requested and not yet written (the same measure as the tick's).
    pub in_flight_bytes: u64,
    /// Whether application I/O was seen since the last tick.
    pub application_active: bool,
}

/// One interval, from a tick to the next: what may be issued in it, and what was.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    /// The tick's budget not yet issued; negative: overdrawn by the last request (by less
    /// than a block), repaid from the next tick's budget.
    credit: i128,
    /// The length of the tick that opened the interval: the caps scale with it.
    elapsed: Duration,
    /// Application I/O was active at the tick and `c-min-rate` is set.
    throttled: bool,
    /// Bytes issued in this interval, plus what the previous interval issued beyond its cap.
    issued_bytes: u64,
    /// Bytes issued in this interval beyond the tick's budget (refills).
    refilled_bytes: u64,
    /// The aim set at the tick: the window for refills (dynamic mode only).
    window_bytes: Option<u64>,
}

impl Interval {
    /// Before the first tick: nothing may be issued.
    fn closed() -> Interval {
        Interval {
            credit: 0,
            elapsed: PLAN_STEP,
            throttled: false,
            issued_bytes: 0,
            refilled_bytes: 0,
            window_bytes: None,
        }
    }
}

/// The controller's state: which algorithm, and its memory.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// `c-plan-ahead 0`.
    Fixed {
        /// The budget's fraction of a byte, in byte-nanoseconds (`< NANOS_PER_S`).
        carry: u128,
    },
    /// The plan-ahead controller.
    Dynamic {
        /// Corrections for the coming ticks, next first; `steps` slots.
        plan: VecDeque<i128>,
        /// The sum of `plan`.
        planned_total: i128,
    },
}

/// Decides each tick's resync budget; see the module documentation for the algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResyncRateController {
    config: ResyncRateConfig,
    mode: Mode,
    last_tick: Option<Time>,
    interval: Interval,
}

impl ResyncRateController {
    /// A controller for `config`, refusing settings it cannot run.
    pub fn new(config: ResyncRateConfig) -> Result<ResyncRateController, SyncError> {
        let mode = initial_mode(&config)?;
        Ok(ResyncRateController {
            config,
            mode,
            last_tick: None,
            interval: Interval::closed(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ResyncRateConfig {
        &self.config
    }

    /// Forgets the plan, for a new resync.
    pub fn restart(&mut self) {
        // The configuration was accepted by `new`, so this cannot fail; keep the old mode if
        // it somehow did rather than panic.
        if let Ok(mode) = initial_mode(&self.config) {
            self.mode = mode;
        }
        self.last_tick = None;
        self.interval = Interval::closed();
    }

    /// The window refills aim at: the in-flight aim computed at the last tick (dynamic mode
    /// only; `None` in fixed mode and before the first tick).
    pub fn window_bytes(&self) -> Option<u64> {
        self.interval.window_bytes
    }

    /// What may be issued now: the tick's budget while some is left, then (dynamic mode) a
    /// refill up to the window and the interval's cap.
    pub fn allowance(&self, load: &ResyncLoad) -> Allowance {
        let interval = &self.interval;
        if interval.credit > 0 {
            return Allowance::Budget {
                bytes: saturate_signed(interval.credit),
            };
        }
        let Some(window) = interval.window_bytes else {
            return Allowance::Wait;
        };
        let cap = self.interval_cap(interval.throttled || load.application_active);
        let room = window
            .saturating_sub(load.in_flight_bytes)
            .min(cap.saturating_sub(interval.issued_bytes));
        match room {
            0 => Allowance::Wait,
            bytes => Allowance::Refill { bytes },
        }
    }

    /// Records a request of `bytes` issued under the last [`Allowance`]: from the budget
    /// while some was left, otherwise as a refill.
    pub fn issued(&mut self, bytes: u64) {
        let interval = &mut self.interval;
        if interval.credit > 0 {
            interval.credit = interval.credit.saturating_sub(i128::from(bytes));
        } else {
            assert!(interval.window_bytes.is_some(), "a refill in fixed mode");
            interval.refilled_bytes = interval.refilled_bytes.saturating_add(bytes);
        }
        interval.issued_bytes = interval.issued_bytes.saturating_add(bytes);
    }

    /// The most the current interval may issue: `c-max-rate` and, when `yielding` to
    /// application I/O, `c-min-rate`, over the interval's tick length.
    fn interval_cap(&self, yielding: bool) -> u64 {
        let elapsed = self.interval.elapsed;
        let max_cap = match self.config.c_max_rate_kib_per_s {
            0 => u64::MAX,
            rate => rate_budget(rate, elapsed),
        };
        match self.config.c_min_rate_kib_per_s {
            rate if yielding && rate != 0 => max_cap.min(rate_budget(rate, elapsed)),
            _ => max_cap,
        }
    }

    /// Opens a new interval and returns the tick's budget: the bytes of new resync requests
    /// the engine may issue now, which [`Self::allowance`] then hands out.
    pub fn tick(&mut self, tick: &ResyncTick) -> u64 {
        let elapsed = match self.last_tick {
            Some(last) => tick.now.since(last),
            None => PLAN_STEP,
        };
        self.last_tick = Some(tick.now);
        // What the closing interval issued beyond its cap counts against the new one.
        let closing_cap = self.interval_cap(self.interval.throttled || tick.application_active);
        let overrun_bytes = self.interval.issued_bytes.saturating_sub(closing_cap);
        let flow = Flow {
            in_flight: i128::from(tick.in_flight_bytes),
            answered: i128::from(tick.answered_bytes),
            refilled: i128::from(self.interval.refilled_bytes),
        };
        let min_budget = rate_budget(self.config.c_min_rate_kib_per_s, elapsed);
        let throttled = tick.application_active && self.config.c_min_rate_kib_per_s != 0;
        let (budget, window_bytes) = match &mut self.mode {
            Mode::Fixed { carry } => {
                let fixed = fixed_budget(carry, self.config.resync_rate_kib_per_s, elapsed);
                (
                    if throttled {
                        fixed.min(min_budget)
                    } else {
                        fixed
                    },
                    None,
                )
            }
            Mode::Dynamic {
                plan,
                planned_total,
            } => {
                let want = target_in_flight(&self.config, tick, elapsed, &flow);
                let wanted = plan_step(plan, planned_total, want, &flow);
                let max_budget = match self.config.c_max_rate_kib_per_s {
                    0 => u64::MAX,
                    rate => rate_budget(rate, elapsed),
                };
                let bounds = Bounds {
                    throttled,
                    min_budget,
                    floor: min_budget.saturating_sub(self.interval.refilled_bytes),
                    max_budget,
                    work: tick.pending_bytes,
                };
                (bounds.apply(wanted), Some(saturate_signed(want)))
            }
        };
        let budget = budget.min(tick.pending_bytes);
        // A budget not used in its interval is not saved up; an overdraft is repaid.
        let credit = self
            .interval
            .credit
            .min(0)
            .saturating_add(i128::from(budget));
        self.interval = Interval {
            credit,
            elapsed,
            throttled,
            issued_bytes: overrun_bytes,
            refilled_bytes: 0,
            window_bytes,
        };
        budget
    }
}

/// What moved since the previous tick, as the dynamic controller reads it (see the module
/// documentation's accounting).
struct Flow {
    /// F: in flight now.
    in_flight: i128,
    /// A: answered since the previous tick.
    answered: i128,
    /// R: issued on arrivals since the previous tick, replacing answered bytes at once.
    refilled: i128,
}

impl Flow {
    /// In flight right after the previous tick's budget was issued: F + A − R.
    fn level(&self) -> i128 {
        self.in_flight
            .saturating_add(self.answered)
            .saturating_sub(self.refilled)
            .max(0)
    }

    /// Answered bytes the refills did not replace yet: A − R (negative when the refills went
    /// past them, topping the window up above the level).
    fn unreplaced(&self) -> i128 {
        self.answered.saturating_sub(self.refilled)
    }

    /// The data in flight over the last tick: the level; with refills (which topped the
    /// window up between ticks) Little's average, answered × round trip / tick length.
    fn over_tick(&self, round_trip: Duration, elapsed: Duration) -> u128 {
        let level = u128::try_from(self.level()).unwrap_or(0);
        if self.refilled == 0 || elapsed.is_zero() {
            return level;
        }
        let answered = u128::try_from(self.answered).unwrap_or(0);
        match answered.saturating_mul(round_trip.as_nanos()) / elapsed.as_nanos() {
            0 => level,
            average => average,
        }
    }
}

fn initial_mode(config: &ResyncRateConfig) -> Result<Mode, SyncError> {
    if config.c_plan_ahead.is_zero() {
        if config.resync_rate_kib_per_s == 0 {
            return Err(SyncError::ZeroResyncRate);
        }
        return Ok(Mode::Fixed { carry: 0 });
    }
    let steps = plan_steps(config.c_plan_ahead)?;
    if config.c_fill_target_sectors == 0 && config.c_delay_target.is_zero() {
        return Err(SyncError::ZeroDelayTarget);
    }
    Ok(Mode::Dynamic {
        plan: VecDeque::from(vec![0; steps]),
        planned_total: 0,
    })
}

/// The number of plan slots for `plan_ahead`: whole ticks, rounded up.
fn plan_steps(plan_ahead: Duration) -> Result<usize, SyncError> {
    let step = PLAN_STEP.as_nanos();
    let steps = plan_ahead.as_nanos().div_ceil(step);
    match usize::try_from(steps) {
        Ok(steps) if (1..=PLAN_STEPS_MAX).contains(&steps) => Ok(steps),
        _ => Err(SyncError::PlanAheadTooLong {
            plan_ahead_ms: saturate(plan_ahead.as_millis()),
            max_ms: saturate(PLAN_AHEAD_MAX.as_millis()),
        }),
    }
}

fn saturate(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

fn saturate_signed(value: i128) -> u64 {
    u64::try_from(value.max(0)).unwrap_or(u64::MAX)
}

/// Bytes that `rate` KiB/s moves in `elapsed` (rounded down).
fn rate_budget(rate_kib_per_s: u32, elapsed: Duration) -> u64 {
    let byte_nanos = u128::from(rate_kib_per_s) * KIB_BYTES * elapsed.as_nanos();
    saturate(byte_nanos / NANOS_PER_S)
}

/// Like [`rate_budget`], carrying the fraction of a byte to the next call.
fn fixed_budget(carry: &mut u128, rate_kib_per_s: u32, elapsed: Duration) -> u64 {
    let rate = u128::from(rate_kib_per_s) * KIB_BYTES;
    let byte_nanos = rate
        .saturating_mul(elapsed.as_nanos())
        .saturating_add(*carry);
    *carry = byte_nanos % NANOS_PER_S;
    saturate(byte_nanos / NANOS_PER_S)
}

/// The amount of data the dynamic controller wants in flight, in bytes.
fn target_in_flight(
    config: &ResyncRateConfig,
    tick: &ResyncTick,
    elapsed: Duration,
    flow: &Flow,
) -> i128 {
    if config.c_fill_target_sectors != 0 {
        return i128::from(u64::from(config.c_fill_target_sectors) * SECTOR_BYTES);
    }
    let target = config.c_delay_target.as_nanos();
    let round_trip = tick.round_trip.filter(|round_trip| !round_trip.is_zero());
    let in_flight = round_trip.map_or(0, |round_trip| flow.over_tick(round_trip, elapsed));
    let want = match round_trip {
        // Little's law on the latest sample: scale what was in flight to the target delay.
        Some(round_trip) if in_flight != 0 => {
            in_flight.saturating_mul(target) / round_trip.as_nanos()
        }
        // No usable delay: the last tick's throughput times the target delay.
        _ if tick.answered_bytes != 0 && !elapsed.is_zero() => {
            u128::from(tick.answered_bytes).saturating_mul(target) / elapsed.as_nanos()
        }
        // The very start: what resync-rate would keep in flight at the target delay.
        _ => {
            let rate = u128::from(config.resync_rate_kib_per_s) * KIB_BYTES;
            rate.saturating_mul(target) / NANOS_PER_S
        }
    };
    i128::from(saturate(want))
}

/// Spreads the new correction over the plan and takes this tick's share; returns the
/// unbounded budget (answered bytes not yet replaced plus this tick's correction, at least 0).
fn plan_step(plan: &mut VecDeque<i128>, planned_total: &mut i128, want: i128, flow: &Flow) -> u64 {
    // The inputs are bounded by u64, so in practice these sums stay far from i128's range;
    // saturating arithmetic keeps even adversarial input sequences from overflowing.
    // After this tick the answered bytes are replaced (by the refills or by this budget), so
    // in flight will be back at the level: that, not in_flight alone, is what the plan must
    // correct.
    let gap = want.saturating_sub(flow.level());
    let correction = gap.saturating_sub(*planned_total);
    let steps = i128::try_from(plan.len()).unwrap_or(1).max(1);
    let share = correction / steps;
    for slot in plan.iter_mut() {
        *slot = slot.saturating_add(share);
    }
    if let Some(first) = plan.front_mut() {
        // The remainder of the division goes to this tick, so nothing is lost.
        *first = first.saturating_add(correction - share * steps);
    }
    *planned_total = planned_total.saturating_add(correction);
    let now = plan.pop_front().unwrap_or(0);
    plan.push_back(0);
    *planned_total = planned_total.saturating_sub(now);
    saturate_signed(flow.unreplaced().saturating_add(now))
}

/// The limits applied to the dynamic controller's budget.
struct Bounds {
    /// Application I/O is active and `c-min-rate` is set.
    throttled: bool,
    /// `c-min-rate` over this tick.
    min_budget: u64,
    /// The floor while work remains: `c-min-rate` over this tick less the refills of the
    /// interval just ended (they already moved that much since the last tick's budget).
    floor: u64,
    /// `c-max-rate` over this tick (`u64::MAX` when unlimited).
    max_budget: u64,
    /// Bytes still to request.
    work: u64,
}

impl Bounds {
    fn apply(&self, wanted: u64) -> u64 {
        let yielded = if self.throttled {
            wanted.min(self.min_budget)
        } else {
            wanted
        };
        let floor = if self.work != 0 { self.floor } else { 0 };
        yielded.max(floor).min(self.max_budget)
    }
}

#[cfg(test)]
mod tests;
