//! The resync bandwidth rule: while a resync runs, cap it at `srm-resync-share` percent of
//! the link's capacity so application replication and other services keep the rest, but
//! never below `c-min-rate` (a resync that never finishes leaves the peer stale) and never
//! above `c-max-rate`.
//!
//! Capacity is the known link capacity if the driver has one, else the highest goodput plus
//! resync rate seen on the link. That peak decays by 1/[`PEAK_DECAY_DIVISOR`] per interval,
//! but only while no resync runs: during a capped resync the observed rate is the cap
//! itself, and letting the estimate decay towards it would talk the cap down to c-min-rate.
//!
//! Invariant: every cap decided lies in `c_min..=max(c_min, c_max)` (c_max 0 = no upper
//! limit); a new cap is emitted only when it differs by at least
//! 1/[`CAP_CHANGE_DIVISOR`] from the last one, so small wobbles make no events.

use super::{measure, Context, Decision, PeerState};
use crate::decision::{Action, Value};

/// The capacity peak loses 1/this of itself per interval without resync.
pub const PEAK_DECAY_DIVISOR: u64 = 64;
/// A cap is re-decided only when it moved by at least 1/this (10%).
pub const CAP_CHANGE_DIVISOR: u64 = 10;

/// Runs the resync rule for one peer.
pub(super) fn step(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let config = context.config;
    let peer = context.peer;
    let resync = peer.resync.filter(|resync| resync.bytes_left > 0);
    let seen = peer
        .goodput_bytes_per_s
        .saturating_add(resync.map_or(0, |resync| resync.rate_bytes_per_s));
    let peak = state.capacity_peak_bytes_per_s;
    let decayed = if resync.is_some() {
        peak
    } else {
        peak - peak / PEAK_DECAY_DIVISOR
    };
    state.capacity_peak_bytes_per_s = decayed.max(seen);
    let Some(resync) = resync else {
        state.resync_cap_bytes_per_s = None;
        return;
    };
    let capacity = peer
        .link_capacity_bytes_per_s
        .unwrap_or(state.capacity_peak_bytes_per_s);
    if capacity == 0 {
        return;
    }
    let share = capacity / 100 * u64::from(config.resync_share_percent)
        + capacity % 100 * u64::from(config.resync_share_percent) / 100;
    let capped = match config.c_max_rate_bytes_per_s {
        0 => share,
        c_max => share.min(c_max),
    };
    let cap = capped.max(config.c_min_rate_bytes_per_s);
    let moved = state
        .resync_cap_bytes_per_s
        .is_none_or(|last| cap.abs_diff(last) >= last / CAP_CHANGE_DIVISOR);
    if !moved {
        return;
    }
    state.resync_cap_bytes_per_s = Some(cap);
    let reason = format!(
        "keep resync to {}% of the link ({} capacity{}), not below c-min-rate",
        config.resync_share_percent,
        Value::BytesPerSecond(capacity),
        if peer.link_capacity_bytes_per_s.is_some() {
            ", known"
        } else {
            ", measured"
        }
    );
    let measurements = vec![
        measure("link-capacity", Value::BytesPerSecond(capacity)),
        measure("goodput", Value::BytesPerSecond(peer.goodput_bytes_per_s)),
        measure(
            "resync-rate",
            Value::BytesPerSecond(resync.rate_bytes_per_s),
        ),
        measure("resync-left", Value::Bytes(resync.bytes_left)),
        measure(
            "c-min-rate",
            Value::BytesPerSecond(config.c_min_rate_bytes_per_s),
        ),
    ];
    out.push(context.decision(
        Action::SetResyncRate { bytes_per_s: cap },
        reason,
        measurements,
    ));
}
