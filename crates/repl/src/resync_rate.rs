//! The resync rate controller: how many bytes of resync requests a sync target may issue on
//! each tick (drbd-semantics.md §1, `resync-rate` and the `c-*` options).
//!
//! Sans-I/O: the engine calls [`ResyncRateController::tick`] about every 100 ms with what it
//! observed since the previous tick, and issues at most the returned number of bytes of new
//! resync requests.
//!
//! # Algorithm
//! - **Fixed** (`c-plan-ahead 0`): the budget is `resync-rate` times the time since the last
//!   tick. The fraction of a byte left over is carried to the next tick, so over any span the
//!   total is exact to within one byte; a budget not used is not saved up.
//! - **Dynamic**: the controller aims at an amount of data in flight (requested, not yet
//!   answered). With `c-fill-target` set, that amount is the fill target. Otherwise it is
//!   what keeps the round trip at `c-delay-target`: by Little's law, in-flight = throughput ×
//!   delay, so the aim is what was in flight over the last tick (still in flight plus
//!   answered) scaled by target delay / observed delay (or, without a delay sample, the
//!   throughput of the last tick times the target delay; at the very start, `resync-rate`
//!   times the target delay). The tick's budget is what was answered since the last tick (to
//!   replace it) plus a correction. The correction comes from a plan: each tick, the gap
//!   between the aim and what will be in flight once the answered bytes are replaced (in
//!   flight plus answered), minus corrections already planned, is spread evenly over the next
//!   `c-plan-ahead` ticks (one plan slot per 100 ms tick), and this tick takes the first
//!   slot. So the data in flight after each tick moves towards the aim by a fraction of the
//!   gap per tick, independent of the round trip: no oscillation however long the link's
//!   delay. (Counting only what is still in flight would make the correction refill the
//!   answered bytes a second time, which oscillates at the round-trip period.)
//! - **Bounds** (dynamic only, in this order): while application I/O is active and
//!   `c-min-rate` is not 0, the budget is at most `c-min-rate` (the rest of the bandwidth is
//!   the application's); while resync work remains, it is at least `c-min-rate`; it is at
//!   most `c-max-rate` (0 = unlimited), which wins over `c-min-rate` if they conflict. In
//!   fixed mode only the application bound applies. The budget never exceeds the bytes still
//!   to request.
//!
//! # Invariants
//! - No overflow for any configuration or input: arithmetic is in `u128`/`i128` on values
//!   bounded by `u64`, saturating, and results saturate into `u64`.
//! - The plan holds exactly `steps` slots, `1..=PLAN_STEPS_MAX`, and `planned_total` is their
//!   sum.

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
    /// Resync bytes answered since the previous tick.
    pub answered_bytes: u64,
    /// The latest observed round trip of a resync request, if any.
    pub round_trip: Option<Duration>,
    /// Whether application I/O was active since the previous tick.
    pub application_active: bool,
    /// Resync bytes not yet requested (the work left).
    pub pending_bytes: u64,
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
}

impl ResyncRateController {
    /// A controller for `config`, refusing settings it cannot run.
    pub fn new(config: ResyncRateConfig) -> Result<ResyncRateController, SyncError> {
        let mode = initial_mode(&config)?;
        Ok(ResyncRateController { config, mode, last_tick: None })
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
    }

    /// The number of bytes of new resync requests the engine may issue now.
    pub fn tick(&mut self, tick: &ResyncTick) -> u64 {
        let elapsed = match self.last_tick {
            Some(last) => tick.now.since(last),
            None => PLAN_STEP,
        };
        self.last_tick = Some(tick.now);
        let min_budget = rate_budget(self.config.c_min_rate_kib_per_s, elapsed);
        let throttled = tick.application_active && self.config.c_min_rate_kib_per_s != 0;
        let budget = match &mut self.mode {
            Mode::Fixed { carry } => {
                let fixed = fixed_budget(carry, self.config.resync_rate_kib_per_s, elapsed);
                if throttled {
                    fixed.min(min_budget)
                } else {
                    fixed
                }
            }
            Mode::Dynamic { plan, planned_total } => {
                let want = target_in_flight(&self.config, tick, elapsed);
                let wanted = plan_step(plan, planned_total, want, tick);
                let max_budget = match self.config.c_max_rate_kib_per_s {
                    0 => u64::MAX,
                    rate => rate_budget(rate, elapsed),
                };
                let bounds = Bounds { throttled, min_budget, max_budget, work: tick.pending_bytes };
                bounds.apply(wanted)
            }
        };
        budget.min(tick.pending_bytes)
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
    Ok(Mode::Dynamic { plan: VecDeque::from(vec![0; steps]), planned_total: 0 })
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
    let byte_nanos = rate.saturating_mul(elapsed.as_nanos()).saturating_add(*carry);
    *carry = byte_nanos % NANOS_PER_S;
    saturate(byte_nanos / NANOS_PER_S)
}

/// The amount of data the dynamic controller wants in flight, in bytes.
fn target_in_flight(config: &ResyncRateConfig, tick: &ResyncTick, elapsed: Duration) -> i128 {
    if config.c_fill_target_sectors != 0 {
        return i128::from(u64::from(config.c_fill_target_sectors) * SECTOR_BYTES);
    }
    let target = config.c_delay_target.as_nanos();
    let in_flight = u128::from(tick.in_flight_bytes) + u128::from(tick.answered_bytes);
    let want = match tick.round_trip {
        // Little's law on the latest sample: scale what was in flight to the target delay.
        Some(round_trip) if !round_trip.is_zero() && in_flight != 0 => {
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
/// unbounded budget (answered bytes plus this tick's correction, at least 0).
fn plan_step(
    plan: &mut VecDeque<i128>,
    planned_total: &mut i128,
    want: i128,
    tick: &ResyncTick,
) -> u64 {
    // The inputs are bounded by u64, so in practice these sums stay far from i128's range;
    // saturating arithmetic keeps even adversarial input sequences from overflowing.
    // After this tick the answered bytes are replaced, so in flight will be at least
    // in_flight + answered: that, not in_flight alone, is what the plan must correct.
    let outstanding = i128::from(tick.in_flight_bytes) + i128::from(tick.answered_bytes);
    let gap = want.saturating_sub(outstanding);
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
    saturate_signed(i128::from(tick.answered_bytes).saturating_add(now))
}

/// The limits applied to the dynamic controller's budget.
struct Bounds {
    /// Application I/O is active and `c-min-rate` is set.
    throttled: bool,
    /// `c-min-rate` over this tick.
    min_budget: u64,
    /// `c-max-rate` over this tick (`u64::MAX` when unlimited).
    max_budget: u64,
    /// Bytes still to request.
    work: u64,
}

impl Bounds {
    fn apply(&self, wanted: u64) -> u64 {
        let yielded = if self.throttled { wanted.min(self.min_budget) } else { wanted };
        let floor = if self.work != 0 { self.min_budget } else { 0 };
        yielded.max(floor).min(self.max_budget)
    }
}

#[cfg(test)]
mod tests;
