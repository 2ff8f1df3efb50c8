//! The lag gate: how many more bytes an async peer may fall behind by before the next
//! observation, so that its unreplicated data never exceeds `srm-max-lag-bytes` and does
//! not grow older than `srm-max-lag-time`.
//!
//! The byte bound is hard: the budget plus the observed unreplicated bytes is at most
//! `max_lag_bytes`, and acknowledgements only shrink the backlog, so a driver that admits
//! no more than the budget (plus what was acknowledged since, see
//! [`crate::LagBudget::acknowledged`]) keeps the backlog under the bound.
//!
//! The time bound is kept by prediction: the backlog may hold at most what the link drains
//! in `max_lag_time` at the measured goodput (but at least [`DRAIN_FLOOR_BYTES`], so an
//! idle link does not stall the first writes after a pause), and once the oldest
//! unreplicated write would pass the bound before the next observation the gate closes
//! until then. So it holds to within one interval while the link moves at all, and a link
//! that stops entirely admits nothing more after the bound.
//!
//! The throttle ([`ThrottleCurve`]) keeps the backlog from reaching the bound at all while
//! the link drains: past `throttle_start_permille` of the bound (bytes or time, whichever
//! share is larger), admission is clocked by the peer's confirmations, each confirmed byte
//! letting fewer new bytes in the nearer the backlog is to the bound — twice as many just
//! past the start, none in the last step. Admission then matches the drain rate between the
//! start and where the curve crosses one (three quarters of the bound with the default
//! start; with large writes confirmed in big batches the backlog hovers at the start),
//! instead of running at full speed into the bound and stopping there, and the time bound's gate
//! does not close and reopen. The bound itself stays the hard limit.

use std::time::Duration;

use super::{Context, PeerState};
use crate::config::Protocol;
use crate::decision::{Admit, Gate};

/// Least backlog the time bound allows, whatever the measured goodput (4 MiB: a few
/// round trips of writes on a slow link after an idle interval).
pub const DRAIN_FLOOR_BYTES: u64 = 4 << 20;

/// Steps of a [`ThrottleCurve`] between its start and the bound.
pub const THROTTLE_STEPS: usize = 16;

/// Bytes admitted per byte confirmed just past the throttle's start, per mille (2×: the
/// backlog still grows there, at most as fast as it drains).
pub const THROTTLE_ADMIT_PER_ACK_PERMILLE_MAX: u32 = 2000;

/// How admission slows as an async peer's backlog nears its lag bound: while the backlog's
/// share of the bound is under `start_permille` nothing is throttled; from there the range
/// up to the bound is cut into [`THROTTLE_STEPS`] equal steps and, in step `i`, each byte
/// the peer confirms lets `admit_per_ack_permille[i] / 1000` new bytes in. The values fall
/// linearly from [`THROTTLE_ADMIT_PER_ACK_PERMILLE_MAX`] to 0 (each step takes the curve's
/// value at its upper end, the stricter one).
///
/// Invariants: the values never rise from one step to the next, and the last is 0, so
/// ack-clocked admission alone never takes the backlog into the last step's range. The
/// driver never throttles an empty backlog (no confirmation would ever earn credit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottleCurve {
    /// Share of the bound (per mille) where throttling starts.
    pub start_permille: u32,
    /// Bytes admitted per byte confirmed, per mille, in each step.
    pub admit_per_ack_permille: [u32; THROTTLE_STEPS],
}

impl ThrottleCurve {
    /// The curve starting at `start_permille` (clamped under 1000).
    pub fn new(start_permille: u32) -> Self {
        let steps = u32::try_from(THROTTLE_STEPS).unwrap_or(u32::MAX);
        let mut admit_per_ack_permille = [0; THROTTLE_STEPS];
        for (step, admit) in (1..=steps).rev().zip(admit_per_ack_permille.iter_mut()) {
            // Step `i` holds `steps - 1 - i` of `steps` of the way left to the bound.
            *admit = THROTTLE_ADMIT_PER_ACK_PERMILLE_MAX * (step - 1) / steps;
        }
        let curve = Self {
            start_permille: start_permille.min(999),
            admit_per_ack_permille,
        };
        assert!(curve
            .admit_per_ack_permille
            .windows(2)
            .all(|pair| pair[0] >= pair[1]));
        assert_eq!(curve.admit_per_ack_permille.last(), Some(&0));
        curve
    }

    /// The curve of `config`.
    pub fn of(config: &crate::config::SrmConfig) -> Self {
        Self::new(config.throttle_start_permille)
    }

    /// Bytes admitted per byte confirmed (per mille) at a backlog of `share_permille` of the
    /// bound; `None` under the start (not throttled). At or past the bound: 0.
    pub fn admit_per_ack(&self, share_permille: u32) -> Option<u32> {
        if share_permille < self.start_permille {
            return None;
        }
        let span = u64::from(1000 - self.start_permille);
        let into = u64::from(share_permille - self.start_permille);
        let steps = u64::try_from(THROTTLE_STEPS).unwrap_or(u64::MAX);
        let step = usize::try_from(into * steps / span).unwrap_or(usize::MAX);
        Some(self.admit_per_ack_permille.get(step).copied().unwrap_or(0))
    }
}

/// The backlog's share of the lag bound, per mille: the larger of its bytes over
/// `max_lag_bytes` and its oldest write's age over `max_lag_time` (may exceed 1000).
pub fn backlog_share_permille(
    unreplicated_bytes: u64,
    bytes_max: u64,
    oldest_age: Duration,
    time_max: Duration,
) -> u32 {
    let share = |part: u128, whole: u128| {
        let scaled = part
            .saturating_mul(1000)
            .checked_div(whole)
            .unwrap_or(u128::MAX);
        u32::try_from(scaled).unwrap_or(u32::MAX)
    };
    let bytes = share(u128::from(unreplicated_bytes), u128::from(bytes_max));
    let time = share(oldest_age.as_nanos(), time_max.as_nanos());
    bytes.max(time)
}

/// The gate of one connected peer for the coming interval.
pub(super) fn gate(state: &PeerState, context: &Context<'_>) -> Gate {
    let config = context.config;
    let peer = context.peer;
    let admit = if state.protocol(config) != Protocol::A || state.ahead() {
        Admit::Unlimited
    } else {
        let time_left = config
            .max_lag_time
            .saturating_sub(peer.oldest_unreplicated_age);
        if peer.unreplicated_bytes > 0 && time_left <= config.interval {
            Admit::Closed
        } else {
            Admit::Bytes(room(context))
        }
    };
    Gate {
        peer: peer.peer,
        admit,
        advisory: false,
    }
}

/// Bytes that may still be admitted under both bounds.
fn room(context: &Context<'_>) -> u64 {
    let config = context.config;
    let peer = context.peer;
    let lag_millis = u64::try_from(config.max_lag_time.as_millis()).unwrap_or(u64::MAX);
    let drained = u128::from(peer.goodput_bytes_per_s) * u128::from(lag_millis) / 1000;
    let drained = u64::try_from(drained).unwrap_or(u64::MAX);
    let allowed = drained.max(DRAIN_FLOOR_BYTES).min(config.max_lag_bytes);
    let room = allowed.saturating_sub(peer.unreplicated_bytes);
    assert!(room == 0 || room + peer.unreplicated_bytes <= config.max_lag_bytes);
    room
}
