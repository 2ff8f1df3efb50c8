//! Undoing what an `on` period applied, once the manager is turned to `advise` or `off`:
//! an async peer returns to the configured protocol and an Ahead peer leaves Ahead at
//! once, tuned buffers return to the configured values, and the possibly-stale mark is
//! cleared by the usual rule (the peer caught up after the switch back). A peer with nothing
//! left to undo is forgotten.
//!
//! Invariant: these decisions are never advisory (the driver really runs the state they
//! undo), and the mark outlives every switch it protects.

use std::collections::BTreeMap;

use super::protocol::{clear_mark, link_measurements};
use super::{peers_in_order, Congestion, Context, PeerState, Replication};
use crate::config::SrmConfig;
use crate::decision::{Action, Decision};
use crate::observation::{Observation, PeerId};

/// Undoes, for every observed peer, what the manager applied; forgets peers with nothing
/// left to undo.
pub(super) fn run(
    config: &SrmConfig,
    states: &mut BTreeMap<PeerId, PeerState>,
    observation: &Observation,
    out: &mut Vec<Decision>,
) {
    for peer in peers_in_order(observation) {
        let Some(state) = states.get_mut(&peer.peer) else {
            continue;
        };
        let context = Context {
            config,
            now: observation.now,
            system: &observation.system,
            writes: &observation.writes,
            peer,
        };
        undo(state, &context, out);
        if peer.connected {
            clear_mark(state, &context, out);
        }
    }
    states.retain(|_, state| state.applied_anything());
}

fn undo(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let config = context.config;
    let reason = format!("srm is {}: undo what the manager applied", config.mode);
    if let Congestion::Ahead { reentries, .. } = state.congestion {
        state.congestion = Congestion::Shipping {
            left: Some(context.now),
            reentries,
        };
        out.push(context.decision(
            Action::LeaveAhead,
            reason.clone(),
            link_measurements(context),
        ));
    }
    if let Replication::Async { .. } = state.replication {
        state.replication = Replication::Configured {
            since: Some(context.now),
        };
        let action = Action::SetProtocol(config.protocol);
        out.push(context.decision(action, reason.clone(), link_measurements(context)));
    }
    if state.buffers_changed_at.is_some() {
        state.buffers = config.buffers;
        state.buffers_changed_at = None;
        out.push(context.decision(Action::SetBuffers(config.buffers), reason, Vec::new()));
    }
}

impl PeerState {
    /// True while the driver runs something the manager decided.
    fn applied_anything(&self) -> bool {
        self.possibly_stale
            || matches!(self.replication, Replication::Async { .. })
            || matches!(self.congestion, Congestion::Ahead { .. })
            || self.buffers_changed_at.is_some()
    }
}
