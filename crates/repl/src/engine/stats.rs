//! Measurements the Selective Replication Manager needs from the write path: each peer's ack
//! latency and confirmed bytes, and the local disk's write latency. The driver takes (and
//! thereby resets) them once per observation interval.
//!
//! Invariant: bookkeeping only; nothing here changes what the engine does.

use serde::{Deserialize, Serialize};

use super::*;

/// A peer's confirmations since the last [`Engine::take_peer_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStats {
    /// Writes the peer confirmed written (write ack).
    pub acks: u64,
    /// Their bytes.
    pub acked_bytes: u64,
    /// Sum of the times from handing each to the peer's queue to its write ack.
    pub ack_latency_sum: Duration,
    /// The longest of those times.
    pub ack_latency_max: Duration,
    /// The shortest (zero when there were none).
    pub ack_latency_min: Duration,
    /// The shortest round trip a probe ([`Engine::probe_rtt`]) measured, if any answered.
    pub ping_rtt: Option<Duration>,
}

/// Local disk writes since the last [`Engine::take_local_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalStats {
    /// Client writes whose local write finished.
    pub writes: u64,
    /// Sum of their local write times.
    pub latency_sum: Duration,
}

impl<P: Clone> Engine<P> {
    /// The peer's confirmations since the previous call (zero for an unknown peer).
    pub fn take_peer_stats(&mut self, peer: u8) -> PeerStats {
        self.peer_slot(peer)
            .map(|slot| std::mem::take(&mut self.peers[slot].stats))
            .unwrap_or_default()
    }

    /// Sends a round-trip probe to `peer` (a ping on the control socket) unless one is still
    /// outstanding; its answer lands in [`PeerStats::ping_rtt`]. A probe never fails the
    /// connection.
    pub fn probe_rtt(&mut self, now: Time, peer: u8, out: &mut Vec<Action<P>>) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let p = &mut self.peers[slot];
        if p.connection == ConnState::Connected && p.liveness.start_probe(now) {
            out.push(Action::SendControl {
                peer,
                message: PeerMessage::Ping,
            });
        }
    }

    pub(super) fn note_rtt(&mut self, slot: usize, rtt: Duration) {
        let stats = &mut self.peers[slot].stats;
        stats.ping_rtt = Some(stats.ping_rtt.map_or(rtt, |old| old.min(rtt)));
    }

    /// The local write times since the previous call.
    pub fn take_local_stats(&mut self) -> LocalStats {
        std::mem::take(&mut self.local_stats)
    }

    /// Records a write ack for the transfer-log entry `sent` of the peer in `slot`.
    pub(super) fn note_ack(&mut self, now: Time, slot: usize, since: Time, bytes: u64) {
        let latency = Duration::from_nanos(now.0.saturating_sub(since.0));
        let stats = &mut self.peers[slot].stats;
        stats.acks += 1;
        stats.acked_bytes += bytes;
        stats.ack_latency_sum = stats.ack_latency_sum.saturating_add(latency);
        stats.ack_latency_max = stats.ack_latency_max.max(latency);
        stats.ack_latency_min = if stats.acks == 1 {
            latency
        } else {
            stats.ack_latency_min.min(latency)
        };
    }

    /// Records a finished local write that started at `started`.
    pub(super) fn note_local_write(&mut self, now: Time, started: Time) {
        self.local_stats.writes += 1;
        let latency = Duration::from_nanos(now.0.saturating_sub(started.0));
        self.local_stats.latency_sum = self.local_stats.latency_sum.saturating_add(latency);
    }
}
