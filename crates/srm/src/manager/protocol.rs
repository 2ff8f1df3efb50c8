//! The protocol rule: the configured protocol while the network keeps up, protocol A when
//! the network's share of write latency or the send-queue fill stays over its enter
//! threshold, back when both stay under their return thresholds; and the possibly-stale
//! mark that protects a failover while a peer may miss acknowledged writes.
//!
//! Invariants: a switch needs `enter_intervals` (or `return_intervals`) consecutive
//! intervals on the far side of the thresholds and `min_dwell` since the previous switch,
//! so a signal oscillating faster than that cannot make the protocol flap; a switch to A
//! is always preceded by the mark in the same outcome; while the host's CPU is saturated no
//! switch to A is made on latency under [`SATURATED_LATENCY_FACTOR`] times the enter
//! threshold (smaller delays may be this host's own), while switching back is always
//! allowed (it is the safe direction).

use std::time::Duration;

use super::{measure, Context, Decision, PeerState, Replication};
use crate::config::Protocol;
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

fn level(context: &Context<'_>) -> Level {
    let config = context.config;
    let fill = context.peer.send_queue_fill_permille;
    let latency = network_latency(context);
    let latency_high = latency.is_some_and(|latency| latency >= config.latency_enter);
    if latency_high || fill >= config.fill_enter_permille {
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
    let limit = context.config.latency_enter.saturating_mul(SATURATED_LATENCY_FACTOR);
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
    // Latency measured on a saturated host is the host's own: it does not count towards
    // going async (recovery still counts, returning is the safe direction).
    let level = match level(context) {
        Level::High if cpu_saturated(context) && !clearly_network(context) => Level::Between,
        level => level,
    };
    match level {
        Level::High => {
            state.above_intervals = state.above_intervals.saturating_add(1);
            state.below_intervals = 0;
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
    match state.replication {
        Replication::Configured { since } => {
            let ready = state.above_intervals >= config.enter_intervals;
            if ready && context.dwelt(since, config.min_dwell) {
                go_async(state, context, out);
            }
        }
        Replication::Async { since } => {
            // Ahead needs protocol A; the congestion rule leaves Ahead first.
            let ready = state.below_intervals >= config.return_intervals && !state.ahead();
            if ready && context.dwelt(Some(since), config.min_dwell) {
                state.replication = Replication::Configured {
                    since: Some(context.now),
                };
                state.below_intervals = 0;
                let reason = format!(
                    "the network kept up for {} intervals (latency <= {} ms, send queue <= {} per mille): back to the configured protocol",
                    config.return_intervals,
                    config.latency_return.as_millis(),
                    config.fill_return_permille
                );
                let action = Action::SetProtocol(config.protocol);
                out.push(context.decision(action, reason, link_measurements(context)));
            }
        }
    }
}

fn go_async(state: &mut PeerState, context: &Context<'_>, out: &mut Vec<Decision>) {
    let config = context.config;
    mark(
        state,
        context,
        out,
        "it may miss acknowledged writes once it replicates asynchronously",
    );
    state.replication = Replication::Async { since: context.now };
    state.above_intervals = 0;
    let reason = format!(
        "the network lagged for {} intervals (latency >= {} ms or send queue >= {} per mille): asynchronous within srm-max-lag-bytes {} and srm-max-lag-time {} ms",
        config.enter_intervals,
        config.latency_enter.as_millis(),
        config.fill_enter_permille,
        config.max_lag_bytes,
        config.max_lag_time.as_millis()
    );
    out.push(context.decision(
        Action::SetProtocol(Protocol::A),
        reason,
        link_measurements(context),
    ));
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
