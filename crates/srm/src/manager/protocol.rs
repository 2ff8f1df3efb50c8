//! The protocol rule: the configured protocol while the network keeps up; protocol A when
//! the network's share of write latency stays over its enter threshold *and* the gain model
//! (`gain.rs`) keeps predicting at least `gain_enter_permille`; a switch kept only if its
//! gain shows within `verify_intervals` intervals with writes, else undone with an
//! exponential, bounded back-off; back when latency and fill stay under their return
//! thresholds; and the possibly-stale mark that protects a failover while a peer may miss
//! acknowledged writes. A full send queue is never by itself a reason to go async: it means
//! the link or the peer limits throughput, which async replication cannot raise for longer
//! than the lag bound lets a backlog grow.
//!
//! Invariants: a switch needs `enter_intervals` (or `return_intervals`) consecutive
//! intervals on the far side of the thresholds and `min_dwell` since the previous switch,
//! so a signal oscillating faster than that cannot make the protocol flap; a switch to A
//! is always preceded by the mark in the same outcome; while the host's CPU is saturated no
//! switch to A is made on latency under [`SATURATED_LATENCY_FACTOR`] times the enter
//! threshold (smaller delays may be this host's own), while switching back is always
//! allowed (it is the safe direction); after `n` undone switches in a row no switch to A
//! is made for `max(min_dwell, interval) × 2^min(n, ASYNC_BACKOFF_MAX)`.

use std::time::Duration;

use super::gain::{self, Prediction};
use super::{
    measure, Context, Decision, PeerState, Replication, SwitchRecord, SwitchVerdict, Verifying,
};
use crate::config::{Mode, Protocol};
use crate::decision::{Action, Measurement, Value};

/// Where the link's signals stand against the thresholds in one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    /// Latency or fill at or over its enter threshold.
    High,
    /// Latency and fill at or under their return thresholds.
    Low,
    /// Neither (or nothing measured): streaks stop.
    Between,
}

/// The network's share of write latency: the ping RTT (else the kernel's smoothed RTT of
/// the data socket), or the ack latency minus the disk's share (the peer's reported write
/// latency, else ours, as peers usually have alike disks), whichever is larger. The ack
/// latency is the interval's fastest ack when the driver measured it, else the mean: at high
/// queue depths the mean is mostly writes queueing at the peer — a throughput limit the
/// send-queue fill measures — so a busy peer at 0 ms would never look recovered, while the
/// fastest ack still sees the link. A slow disk raises neither.
fn network_latency(context: &Context<'_>) -> Option<Duration> {
    let peer = context.peer;
    let disk = peer
        .peer_write_latency
        .unwrap_or(context.system.local_write_latency);
    let ack = peer
        .ack_latency_min
        .or(peer.ack_latency_mean)
        .map(|ack| ack.saturating_sub(disk));
    let rtt = peer.rtt.or(peer.tcp.map(|tcp| tcp.rtt));
    match (rtt, ack) {
        (None, None) => None,
        (rtt, ack) => Some(rtt.unwrap_or_default().max(ack.unwrap_or_default())),
    }
}

/// Where the interval stands: high only when the network's share of latency is at or over
/// the enter threshold *and* the gain model predicts at least `gain_enter_permille` (a full
/// send queue alone is no reason: see `gain.rs`); low when latency and fill are at or
/// under their return thresholds.
fn level(context: &Context<'_>, prediction: Option<&Prediction>) -> Level {
    let config = context.config;
    let fill = context.peer.send_queue_fill_permille;
    let latency = network_latency(context);
    let latency_high = latency.is_some_and(|latency| latency >= config.latency_enter);
    let gain_high =
        prediction.is_some_and(|prediction| prediction.gain_permille >= config.gain_enter_permille);
    if latency_high && gain_high {
        return Level::High;
    }
    let latency_low = latency.is_some_and(|latency| latency <= config.latency_return);
    if latency_low && fill <= config.fill_return_permille {
        return Level::Low;
    }
    Level::Between
}

/// On a saturated host, network latency counts towards async only at this many times the
/// enter threshold: a host busy enough to add a few milliseconds of its own rarely adds
/// tens, and a long link (seed 002's +20 ms) must not stay synchronous just because the
/// writes keep the CPU busy.
pub(super) const SATURATED_LATENCY_FACTOR: u32 = 2;

/// Whether the network's latency alone is far enough over the enter threshold to count on a
/// saturated host.
fn clearly_network(context: &Context<'_>) -> bool {
    let limit = context
        .config
        .latency_enter
        .saturating_mul(SATURATED_LATENCY_FACTOR);
    network_latency(context).is_some_and(|latency| latency >= limit)
}

/// True if this host's CPU is saturated or stolen from, so latency is not the network's.
pub(super) fn cpu_saturated(context: &Context<'_>) -> bool {
    let system = context.system;
    system.cpu_busy_permille >= context.config.cpu_busy_saturated_permille
        || system.cpu_steal_permille >= context.config.cpu_steal_saturated_permille
}

/// The measurements behind a protocol decision.
pub(super) fn link_measurements(context: &Context<'_>) -> Vec<Measurement> {
    let peer = context.peer;
    let mut measurements = Vec::new();
    if let Some(latency) = network_latency(context) {
        measurements.push(measure("network-latency", Value::Duration(latency)));
    }
    if let Some(rtt) = peer.rtt {
        measurements.push(measure("rtt", Value::Duration(rtt)));
    }
    if let Some(ack) = peer.ack_latency_mean {
        measurements.push(measure("ack-latency-mean", Value::Duration(ack)));
    }
    if let Some(ack) = peer.ack_latency_p99 {
        measurements.push(measure("ack-latency-p99", Value::Duration(ack)));
    }
    if let Some(tcp) = peer.tcp {
        measurements.extend([
            measure("tcp-rtt", Value::Duration(tcp.rtt)),
            measure("tcp-rtt-variance", Value::Duration(tcp.rtt_variance)),
            measure("tcp-retransmits", Value::Count(tcp.retransmits_total)),
            measure(
                "tcp-congestion-window",
                Value::Count(u64::from(tcp.congestion_window_segments)),
            ),
            measure("tcp-not-sent", Value::Bytes(tcp.not_sent_bytes)),
        ]);
    }
    measurements.extend([
        measure(
            "send-queue-fill",
            Value::Permille(peer.send_queue_fill_permille),
        ),
        measure("goodput", Value::BytesPerSecond(peer.goodput_bytes_per_s)),
        measure("unreplicated", Value::Bytes(peer.unreplicated_bytes)),
        measure(
            "local-write-latency",
            Value::Duration(context.system.local_write_latency),
        ),
        measure(
            "cpu-busy",
            Value::Permille(context.system.cpu_busy_permille),
        ),
    ]);
    measurements
}

/// Runs the protocol rule for one peer.
pub(super) fn step(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let config = context.config;
    if config.protocol == Protocol::A {
        return;
    }
    let prediction = gain::predict(context);
    // Latency measured on a saturated host is the host's own: it does not count towards
    // going async (recovery still counts, returning is the safe direction).
    let level = match level(context, prediction.as_ref()) {
        Level::High if cpu_saturated(context) && !clearly_network(context) => Level::Between,
        level => level,
    };
    count_streaks(state, context, level, prediction.as_ref());
    match state.replication {
        Replication::Configured { since } => {
            let ready = state.above_intervals >= config.enter_intervals;
            let backed_off = state
                .async_not_before
                .is_some_and(|not_before| context.now < not_before);
            if ready && !backed_off && context.dwelt(since, config.min_dwell) {
                go_async(state, context, out, prediction.as_ref());
            }
        }
        Replication::Async { since, verifying } => {
            if let Some(verifying) = verifying {
                if verify(state, context, verifying, out) {
                    return;
                }
            }
            // Ahead needs protocol A; the congestion rule leaves Ahead first.
            let ready = state.below_intervals >= config.return_intervals && !state.ahead();
            if ready && context.dwelt(Some(since), config.min_dwell) {
                state.below_intervals = 0;
                let reason = format!(
                    "the network kept up for {} intervals (latency <= {} ms, send queue <= {} per \
                     mille): back to the configured protocol",
                    config.return_intervals,
                    config.latency_return.as_millis(),
                    config.fill_return_permille
                );
                switch_back(state, context, reason, out);
            }
        }
    }
}

/// Updates the consecutive-interval counters and, while high, the enter streak's writes and
/// least predicted gain.
fn count_streaks(
    state: &mut PeerState,
    context: &Context<'_>,
    level: Level,
    prediction: Option<&Prediction>,
) {
    match level {
        Level::High => {
            if state.above_intervals == 0 {
                state.streak = gain::Window::default();
                state.streak_gain_permille = u32::MAX;
            }
            state.above_intervals = state.above_intervals.saturating_add(1);
            state.below_intervals = 0;
            state.streak.add(context.writes);
            let predicted = prediction.map_or(0, |prediction| prediction.gain_permille);
            state.streak_gain_permille = state.streak_gain_permille.min(predicted);
        }
        Level::Low => {
            state.below_intervals = state.below_intervals.saturating_add(1);
            state.above_intervals = 0;
        }
        Level::Between => {
            state.above_intervals = 0;
            state.below_intervals = 0;
        }
    }
}

/// Returns to the configured protocol (the mark is cleared later, once caught up).
fn switch_back(
    state: &mut PeerState,
    context: &Context<'_>,
    reason: String,
    out: &mut Vec<Decision>,
) {
    state.replication = Replication::Configured {
        since: Some(context.now),
    };
    let action = Action::SetProtocol(context.config.protocol);
    out.push(context.decision(action, reason, link_measurements(context)));
}

/// Measures a switch still being verified; once `verify_intervals` intervals with writes
/// are in, keeps it or undoes it (and backs off). Returns true if it undid the switch.
fn verify(
    state: &mut PeerState,
    context: &Context<'_>,
    mut verifying: Verifying,
    out: &mut Vec<Decision>,
) -> bool {
    let config = context.config;
    verifying.observations = verifying.observations.saturating_add(1);
    // The first interval after the switch still holds synchronous completions (and the
    // mark's round trip); intervals without writes show nothing.
    if verifying.observations >= 2 && context.writes.bytes_per_s > 0 {
        verifying.after.add(context.writes);
    }
    let set_verifying = |state: &mut PeerState, verifying: Option<Verifying>| {
        if let Replication::Async { since, .. } = state.replication {
            state.replication = Replication::Async { since, verifying };
        }
    };
    // In `advise` mode the switch was never applied: there is no gain to observe, so the
    // advice stays "measuring" (and `advise` gives `on`'s decisions up to the verdicts).
    if verifying.after.intervals < config.verify_intervals || config.mode != Mode::On {
        set_verifying(state, Some(verifying));
        return false;
    }
    let observed = gain::observed_gain_permille(&verifying.baseline, &verifying.after);
    let kept = observed.is_some_and(|observed| observed >= config.gain_keep_permille);
    if !kept && state.ahead() {
        // Ahead needs protocol A: judge again once the congestion rule left it.
        set_verifying(state, Some(verifying));
        return false;
    }
    set_verifying(state, None);
    let predicted = state
        .last_switch
        .map_or(0, |record| record.predicted_gain_permille);
    let verdict = if kept {
        SwitchVerdict::Kept
    } else {
        SwitchVerdict::Undone
    };
    if let Some(record) = state.last_switch.as_mut() {
        record.observed_gain_permille = observed;
        record.verdict = verdict;
    }
    let mut measurements = gain_measurements(predicted, observed);
    measurements.extend(link_measurements(context));
    match observed.filter(|_| kept) {
        Some(observed) => {
            keep(state, context, (predicted, observed), measurements, out);
            false
        }
        None => {
            undo(state, context, (predicted, observed), measurements, out);
            true
        }
    }
}

/// A switch showed its gain: it stays, and the back-off starts afresh.
fn keep(
    state: &mut PeerState,
    context: &Context<'_>,
    (predicted, observed): (u32, u32),
    measurements: Vec<Measurement>,
    out: &mut Vec<Decision>,
) {
    state.undone_switches = 0;
    state.async_not_before = None;
    let reason = format!(
        "protocol A earned its risk: observed gain {} against {} predicted (>= {} needed)",
        ratio(observed),
        ratio(predicted),
        ratio(context.config.gain_keep_permille)
    );
    let action = Action::GainObserved {
        predicted_permille: predicted,
        observed_permille: observed,
    };
    out.push(context.decision(action, reason, measurements));
}

/// A switch did not show its gain: back to the configured protocol at once (the safe
/// direction, whatever the dwell), and no switch to A for the doubled back-off.
fn undo(
    state: &mut PeerState,
    context: &Context<'_>,
    (predicted, observed): (u32, Option<u32>),
    measurements: Vec<Measurement>,
    out: &mut Vec<Decision>,
) {
    let config = context.config;
    state.undone_switches = state.undone_switches.saturating_add(1);
    let hold = backoff(config, state.undone_switches);
    state.async_not_before = Some(context.now.saturating_add(hold));
    let reason = format!(
        "protocol A did not earn its risk: observed gain {} against {} predicted (< {} needed): \
         undone, no switch to A for {} ms",
        observed.map_or_else(|| "unmeasured".to_string(), ratio),
        ratio(predicted),
        ratio(config.gain_keep_permille),
        hold.as_millis()
    );
    state.replication = Replication::Configured {
        since: Some(context.now),
    };
    state.above_intervals = 0;
    state.below_intervals = 0;
    let action = Action::SetProtocol(config.protocol);
    out.push(context.decision(action, reason, measurements));
}

/// Largest back-off exponent after undone switches: the hold never exceeds
/// `max(min_dwell, interval) × 2^ASYNC_BACKOFF_MAX`.
pub const ASYNC_BACKOFF_MAX: u32 = 5;

/// How long no switch to A is made after `undone` switches were undone in a row:
/// `max(min_dwell, interval) × 2^undone`, at most 2^[`ASYNC_BACKOFF_MAX`] times that.
pub(super) fn backoff(config: &crate::config::SrmConfig, undone: u32) -> Duration {
    let base = config.min_dwell.max(config.interval);
    base.saturating_mul(1 << undone.min(ASYNC_BACKOFF_MAX))
}

/// `1.50x` for 1500 per mille.
fn ratio(permille: u32) -> String {
    Value::Ratio(permille).to_string()
}

fn gain_measurements(predicted: u32, observed: Option<u32>) -> Vec<Measurement> {
    let mut measurements = vec![measure("predicted-gain", Value::Ratio(predicted))];
    if let Some(observed) = observed {
        measurements.push(measure("observed-gain", Value::Ratio(observed)));
    }
    measurements
}

fn go_async(
    state: &mut PeerState,
    context: &Context<'_>,
    out: &mut Vec<Decision>,
    prediction: Option<&Prediction>,
) {
    let config = context.config;
    mark(
        state,
        context,
        out,
        "it may miss acknowledged writes once it replicates asynchronously",
    );
    let predicted = state.streak_gain_permille;
    state.replication = Replication::Async {
        since: context.now,
        verifying: Some(Verifying {
            baseline: state.streak,
            after: gain::Window::default(),
            observations: 0,
        }),
    };
    state.last_switch = Some(SwitchRecord {
        at: context.now,
        predicted_gain_permille: predicted,
        observed_gain_permille: None,
        verdict: SwitchVerdict::Pending,
    });
    state.above_intervals = 0;
    let reason = format!(
        "the round trip bounded completion time for {} intervals (network latency >= {} ms, \
         predicted gain {} >= {}): asynchronous within srm-max-lag-bytes {} and srm-max-lag-time \
         {} ms",
        config.enter_intervals,
        config.latency_enter.as_millis(),
        ratio(predicted),
        ratio(config.gain_enter_permille),
        config.max_lag_bytes,
        config.max_lag_time.as_millis()
    );
    let mut measurements = gain_measurements(predicted, None);
    if let Some(prediction) = prediction {
        measurements.extend([
            measure(
                "sync-completion",
                Value::Duration(prediction.sync_completion),
            ),
            measure(
                "async-completion",
                Value::Duration(prediction.async_completion),
            ),
            measure("saved-per-write", Value::Duration(prediction.saved)),
        ]);
    }
    measurements.extend(link_measurements(context));
    out.push(context.decision(Action::SetProtocol(Protocol::A), reason, measurements));
}

/// Emits the possibly-stale mark unless the peer already carries it.
pub(super) fn mark(
    state: &mut PeerState,
    context: &Context<'_>,
    out: &mut Vec<Decision>,
    why: &str,
) {
    if state.possibly_stale {
        return;
    }
    state.possibly_stale = true;
    let reason = format!("mark the peer possibly-stale before it may fall behind: {why}");
    out.push(context.decision(
        Action::MarkPossiblyStale,
        reason,
        link_measurements(context),
    ));
}

/// Clears the mark once the peer has every acknowledged write again.
pub(super) fn clear_mark(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let peer = context.peer;
    // The switch back must precede the observation that proves the peer caught up: writes
    // acknowledged asynchronously between this sample and the switch are not in it.
    let configured = matches!(
        state.replication,
        Replication::Configured { since } if since.is_none_or(|since| since < context.now)
    );
    let caught_up = peer.unreplicated_bytes == 0 && peer.out_of_sync_bytes == 0;
    if !state.possibly_stale || !configured || state.ahead() || !caught_up {
        return;
    }
    state.possibly_stale = false;
    let reason = "the peer acknowledged every write and has nothing out of sync".to_string();
    let measurements = vec![
        measure("unreplicated", Value::Bytes(peer.unreplicated_bytes)),
        measure("out-of-sync", Value::Bytes(peer.out_of_sync_bytes)),
    ];
    out.push(context.decision(Action::ClearPossiblyStale, reason, measurements));
}
