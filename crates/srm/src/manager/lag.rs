//! The lag gate: how many more bytes an async peer may fall behind by before the next
//! observation, so that its unreplicated data never exceeds `srm-max-lag-bytes` and no write
//! is admitted once the oldest unreplicated write is about to pass `srm-max-lag-time`.
//!
//! Invariant: for a peer replicating with protocol A (and not Ahead), the budget plus the
//! observed unreplicated bytes is at most `max_lag_bytes`. Acknowledgements only shrink the
//! backlog, so a driver that admits no more than the budget (plus what was acknowledged
//! since, see [`crate::LagBudget::acknowledged`]) keeps the backlog under the bound.

use super::{Context, PeerState};
use crate::config::Protocol;
use crate::decision::{Admit, Gate};

/// The gate of one connected peer for the coming interval.
pub(super) fn gate(state: &PeerState, context: &Context<'_>) -> Gate {
    let config = context.config;
    let peer = context.peer;
    let admit = if state.protocol(config) != Protocol::A || state.ahead() {
        Admit::Unlimited
    } else {
        let room = config.max_lag_bytes.saturating_sub(peer.unreplicated_bytes);
        let time_left = config
            .max_lag_time
            .saturating_sub(peer.oldest_unreplicated_age);
        if peer.unreplicated_bytes > 0 && time_left <= config.interval {
            Admit::Closed
        } else {
            Admit::Bytes(room)
        }
    };
    if let Admit::Bytes(room) = admit {
        let promised = room.saturating_add(peer.unreplicated_bytes);
        assert!(room == 0 || promised <= config.max_lag_bytes);
    }
    Gate {
        peer: peer.peer,
        admit,
        advisory: false,
    }
}
