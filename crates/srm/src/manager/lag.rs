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

use super::{Context, PeerState};
use crate::config::Protocol;
use crate::decision::{Admit, Gate};

/// Least backlog the time bound allows, whatever the measured goodput (4 MiB: a few
/// round trips of writes on a slow link after an idle interval).
pub const DRAIN_FLOOR_BYTES: u64 = 4 << 20;

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
