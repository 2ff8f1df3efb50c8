//! The gain model: whether protocol A would let writes complete faster than the configured
//! protocol, by how much (the prediction a switch is made on), and whether it did (the
//! verdict that keeps or undoes a switch).
//!
//! # Prediction
//! Under protocol C a write completes once the local write *and* the peer's ack are done;
//! they run in parallel, so its completion time is `T_sync = Q + max(L, R)`, where `L` is
//! the local disk's write latency, `R` the round trip of an unqueued write to the peer and
//! back (the link's RTT, the transfer and the peer's disk: the interval's fastest ack), and
//! `Q` everything else (the client's own queueing, the NBD path, queueing behind a full send
//! queue). Under protocol A the write completes after the local write, so at most
//! `S = R - L` (when positive) is saved per write: `T_async = max(T_sync - S, L)`. The
//! predicted gain is `T_sync / T_async`.
//!
//! `T_sync` is the measured mean completion time of client writes when the driver measures
//! it, else the mean ack latency or the local write latency, whichever is larger (a
//! completion waits for both). Queueing — behind a full send queue, at a busy peer, in the
//! client — is in `T_sync` but not in `S`, since async replication does not remove it: once
//! the backlog reaches the lag bound, writes are admitted only as fast as the link drains,
//! which is the throughput the synchronous writes already had. So:
//! - a fast link with a full send queue (fastest ack ≈ RTT ≪ completion time) predicts a
//!   gain near 1 and stays synchronous, whatever the fill;
//! - a long round trip that dominates completion time (20 ms RTT, 0.1 ms disk, 20.3 ms
//!   completion) predicts a large gain;
//! - a slow local disk (L ≥ R) predicts none.
//!
//! # Verdict
//! The switch records the predicted gain (the least of its enter streak) and a baseline:
//! the mean write throughput and completion time of the streak. From the second interval
//! after the switch (the first still holds writes completed synchronously), the intervals
//! with writes are measured until there are `verify_intervals` of them; the observed gain
//! is the larger of the throughput ratio (after / before: a closed-loop client, such as
//! fio at a fixed queue depth, turns shorter completions into throughput) and the
//! completion-time ratio (before / after: an open-loop client keeps its rate and sees
//! shorter completions), each where both sides were measured. Intervals without writes
//! are not evidence either way and do not count.
//!
//! Invariant: gains are per mille, at least 1000 (a prediction never says async is slower)
//! and at most [`GAIN_PERMILLE_MAX`].

use std::time::Duration;

use super::Context;
use crate::config::GAIN_PERMILLE_MAX;
use crate::observation::WritePattern;

/// Shortest completion time the model divides by (a disk faster than this is taken as this).
const COMPLETION_FLOOR: Duration = Duration::from_micros(10);

/// What the model predicts for one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Prediction {
    /// `T_sync / T_async`, per mille.
    pub gain_permille: u32,
    /// The completion time the prediction starts from.
    pub sync_completion: Duration,
    /// The completion time predicted under protocol A.
    pub async_completion: Duration,
    /// The per-write time async replication saves (`R - L`).
    pub saved: Duration,
}

/// The prediction for the current interval; `None` when neither an ack nor a round trip
/// was measured. Without acks (an idle link) the round trip is the network's latency (ping,
/// else TCP's RTT) plus the peer's disk (as reported, else ours).
pub(super) fn predict(context: &Context<'_>) -> Option<Prediction> {
    let peer = context.peer;
    let local = context.system.local_write_latency;
    let round_trip = match peer.ack_latency_min.or(peer.ack_latency_mean) {
        Some(ack) => ack,
        None => {
            let rtt = peer.rtt.or(peer.tcp.map(|tcp| tcp.rtt))?;
            rtt.saturating_add(peer.peer_write_latency.unwrap_or(local))
        }
    };
    let acked = peer.ack_latency_mean.unwrap_or(round_trip);
    let sync_completion = context
        .writes
        .completion_latency_mean
        .unwrap_or_else(|| acked.max(local));
    let saved = round_trip.saturating_sub(local);
    let async_completion = sync_completion
        .saturating_sub(saved)
        .max(local)
        .max(COMPLETION_FLOOR);
    let sync_completion = sync_completion.max(async_completion);
    Some(Prediction {
        gain_permille: ratio_permille(sync_completion.as_nanos(), async_completion.as_nanos()),
        sync_completion,
        async_completion,
        saved,
    })
}

/// `numerator / denominator` per mille, within 1000..=[`GAIN_PERMILLE_MAX`] (1000 when the
/// denominator is zero).
fn ratio_permille(numerator: u128, denominator: u128) -> u32 {
    let ratio = numerator
        .saturating_mul(1000)
        .checked_div(denominator)
        .unwrap_or(1000);
    u32::try_from(ratio)
        .unwrap_or(u32::MAX)
        .clamp(1000, GAIN_PERMILLE_MAX)
}

/// Write throughput and completion time summed over some intervals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Window {
    /// Intervals added.
    pub intervals: u32,
    bytes_per_s_sum: u128,
    completion_nanos_sum: u128,
    completion_intervals: u32,
}

impl Window {
    /// Adds one interval's writes.
    pub fn add(&mut self, writes: &WritePattern) {
        self.intervals = self.intervals.saturating_add(1);
        self.bytes_per_s_sum += u128::from(writes.bytes_per_s);
        if let Some(completion) = writes.completion_latency_mean {
            self.completion_nanos_sum += completion.as_nanos();
            self.completion_intervals = self.completion_intervals.saturating_add(1);
        }
    }

    fn throughput(&self) -> Option<u128> {
        self.bytes_per_s_sum
            .checked_div(u128::from(self.intervals))
            .filter(|rate| *rate > 0)
    }

    fn completion_nanos(&self) -> Option<u128> {
        self.completion_nanos_sum
            .checked_div(u128::from(self.completion_intervals))
            .filter(|nanos| *nanos > 0)
    }
}

/// The gain `after` shows over `baseline`, per mille: the larger of the throughput ratio and
/// the completion-time ratio, where both windows measured it; `None` when neither was.
/// Unlike [`ratio_permille`] it may be under 1000 (async made things worse).
pub(super) fn observed_gain_permille(baseline: &Window, after: &Window) -> Option<u32> {
    let scaled = |numerator: u128, denominator: u128| {
        let ratio = numerator.saturating_mul(1000) / denominator;
        u32::try_from(ratio)
            .unwrap_or(u32::MAX)
            .min(GAIN_PERMILLE_MAX)
    };
    let throughput = baseline
        .throughput()
        .zip(after.throughput())
        .map(|(before, now)| scaled(now, before));
    let completion = baseline
        .completion_nanos()
        .zip(after.completion_nanos())
        .map(|(before, now)| scaled(before, now));
    match (throughput, completion) {
        (Some(throughput), Some(completion)) => Some(throughput.max(completion)),
        (gain, None) | (None, gain) => gain,
    }
}
