//! The congestion rule (`on-congestion pull-ahead`): when an async peer's in-flight data
//! reaches `congestion-fill`, stop shipping data to it and mark the blocks out of sync
//! (Ahead/Behind); when the queue has drained, leave Ahead and let the resync catch up.
//!
//! The loop guard (LINBIT/drbd issue 46: Ahead → resync → the resync's own traffic congests
//! the link → Ahead again, forever): Ahead is held at least `min_dwell` (and at least one
//! interval), and every re-entry
//! that comes while the previous catch-up resync is unfinished, or within
//! [`AHEAD_REENTRY_WINDOW`] of leaving, doubles the hold (up to 2^[`AHEAD_BACKOFF_MAX`]
//! times `min_dwell`), so the resync gets ever longer quiet periods to finish in; the
//! resync itself is capped at `srm-resync-share` of the link by the resync rule. The
//! exponent resets once a resync finished and the window passed without re-entry.
//!
//! Invariant: Ahead is entered only with the peer marked possibly-stale first (data it
//! will miss is acknowledged to the client).

use std::time::Duration;

use super::protocol::{link_measurements, mark};
use super::{measure, Congestion, Context, Decision, PeerState};
use crate::config::Protocol;
use crate::decision::{Action, Value};

/// A re-entry into Ahead this soon after leaving it counts as a loop.
pub const AHEAD_REENTRY_WINDOW: Duration = Duration::from_secs(60);
/// Largest back-off exponent: the hold never exceeds `min_dwell × 2^AHEAD_BACKOFF_MAX`.
pub const AHEAD_BACKOFF_MAX: u32 = 5;

/// Runs the congestion rule for one peer.
pub(super) fn step(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let Some(fill_bytes) = context.config.congestion_fill_bytes else {
        return;
    };
    let peer = context.peer;
    match state.congestion {
        Congestion::Shipping { .. } if state.protocol(context.config) != Protocol::A => {}
        Congestion::Shipping { left, reentries } => {
            if peer.unreplicated_bytes < fill_bytes {
                let quiet = left
                    .is_none_or(|left| context.now.saturating_sub(left) >= AHEAD_REENTRY_WINDOW);
                if quiet && peer.out_of_sync_bytes == 0 {
                    state.congestion = Congestion::Shipping { left, reentries: 0 };
                }
                return;
            }
            enter(state, context, out, (left, reentries));
        }
        Congestion::Ahead {
            since,
            hold,
            reentries,
        } => {
            let held = context.now.saturating_sub(since) >= hold;
            let drained = peer.unreplicated_bytes <= fill_bytes / 2
                && peer.send_queue_fill_permille <= context.config.fill_return_permille;
            if held && drained {
                state.congestion = Congestion::Shipping {
                    left: Some(context.now),
                    reentries,
                };
                let reason = format!(
                    "the send queue drained after {} s Ahead: resync what was marked out of sync",
                    context.now.saturating_sub(since).as_secs()
                );
                out.push(context.decision(Action::LeaveAhead, reason, link_measurements(context)));
            }
        }
    }
}

fn enter(
    state: &mut PeerState,
    context: &Context<'_>,
    out: &mut Vec<Decision>,
    (left, reentries): (Option<Duration>, u32),
) {
    let peer = context.peer;
    let recent = left.is_some_and(|left| context.now.saturating_sub(left) < AHEAD_REENTRY_WINDOW);
    let looping = left.is_some() && (recent || peer.out_of_sync_bytes > 0);
    let reentries = if looping {
        reentries.saturating_add(1).min(AHEAD_BACKOFF_MAX)
    } else {
        0
    };
    // The hold starts at the dwell, but at least one interval, so a zero dwell cannot
    // disable the back-off.
    let base = context.config.min_dwell.max(context.config.interval);
    let hold = base.saturating_mul(1 << reentries);
    mark(
        state,
        context,
        out,
        "data will be marked out of sync instead of shipped",
    );
    state.congestion = Congestion::Ahead {
        since: context.now,
        hold,
        reentries,
    };
    let reason = format!(
        "{} in flight reached congestion-fill: pull ahead for at least {} s (back-off {})",
        Value::Bytes(peer.unreplicated_bytes),
        hold.as_secs(),
        reentries
    );
    let mut measurements = link_measurements(context);
    measurements.push(measure("out-of-sync", Value::Bytes(peer.out_of_sync_bytes)));
    measurements.push(measure("back-off", Value::Count(u64::from(reentries))));
    out.push(context.decision(Action::EnterAhead, reason, measurements));
}
