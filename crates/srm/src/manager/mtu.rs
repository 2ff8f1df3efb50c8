//! The MTU rule (advice only; host network settings are never changed): when large writes
//! carry at least [`LARGE_BYTES_PERMILLE_MIN`] of the bytes for `enter_intervals` intervals
//! and the replication interface's MTU is below [`JUMBO_MTU_BYTES`], advise jumbo frames once;
//! advise again only after the pattern went away (large share under
//! [`LARGE_BYTES_PERMILLE_RESET`]) and came back.
//!
//! Invariant: an MTU decision is always advisory, in every mode.

use super::{measure, Context, Decision, PeerState};
use crate::decision::{Action, Value};

/// The MTU suggested: the common jumbo-frame size.
pub const JUMBO_MTU_BYTES: u32 = 9000;
/// Share of bytes in large writes from which jumbo frames are advised.
pub const LARGE_BYTES_PERMILLE_MIN: u32 = 700;
/// Share under which the advice may be given again later.
pub const LARGE_BYTES_PERMILLE_RESET: u32 = 300;

/// Runs the MTU rule for one peer.
pub(super) fn step(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let Some(mtu) = context.peer.interface_mtu_bytes else {
        return;
    };
    let Some(large) = context.writes.large_bytes_permille() else {
        return;
    };
    if large < LARGE_BYTES_PERMILLE_RESET {
        state.mtu_advised = false;
    }
    if large < LARGE_BYTES_PERMILLE_MIN {
        state.large_intervals = 0;
        return;
    }
    state.large_intervals = state.large_intervals.saturating_add(1);
    if state.mtu_advised
        || mtu >= JUMBO_MTU_BYTES
        || state.large_intervals < context.config.enter_intervals
    {
        return;
    }
    state.mtu_advised = true;
    let reason = format!(
        "large writes carry {} of the bytes: jumbo frames would cut per-packet cost (change it on \
         both hosts and the switches yourself)",
        Value::Permille(large)
    );
    let measurements = vec![
        measure("large-write-bytes", Value::Permille(large)),
        measure("mtu", Value::Count(u64::from(mtu))),
    ];
    let mut decision = context.decision(
        Action::AdviseMtu {
            current_bytes: mtu,
            suggested_bytes: JUMBO_MTU_BYTES,
        },
        reason,
        measurements,
    );
    decision.advisory = true;
    out.push(decision);
}
