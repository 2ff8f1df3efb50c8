//! Failure detection for one connected peer: `ping-int`, `ping-timeout`, `timeout`, `ko-count`.
//!
//! Rules (drbd-semantics.md §1):
//! - after `ping-int` without hearing from the peer, send a ping;
//! - a ping unanswered for `ping-timeout` means the network failed;
//! - a write the peer has not answered for `ko-count × timeout` means the peer is dead
//!   (`ko-count 0` disables this rule).
//!
//! Besides, the manager may ask for a round-trip probe ([`Liveness::start_probe`]): a ping sent
//! while no liveness ping is outstanding, whose answer only measures the round trip and never
//! fails the connection (the control socket answers in order, so the first `PingAck` after a
//! probe is the probe's).

use crate::engine::PeerConfig;
use crate::state::ConnState;
use crate::types::Time;

/// Liveness bookkeeping of one connection.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Liveness {
    last_heard: Time,
    ping_sent: Option<Time>,
    probe_sent: Option<Time>,
}

impl Liveness {
    pub(crate) fn connected(now: Time) -> Liveness {
        Liveness { last_heard: now, ping_sent: None, probe_sent: None }
    }

    pub(crate) fn heard_from(&mut self, now: Time) {
        self.last_heard = now;
    }

    /// A `PingAck` arrived; returns the round trip if it answered a probe.
    pub(crate) fn ping_answered(&mut self, now: Time) -> Option<std::time::Duration> {
        if let Some(sent) = self.probe_sent.take() {
            return Some(now.since(sent));
        }
        self.ping_sent = None;
        None
    }

    /// Whether to send a round-trip probe now (none is outstanding, nor a liveness ping).
    pub(crate) fn start_probe(&mut self, now: Time) -> bool {
        if self.probe_sent.is_some() || self.ping_sent.is_some() {
            return false;
        }
        self.probe_sent = Some(now);
        true
    }

    /// Ok(true): send a ping now. Err: drop the connection with this state and reason.
    pub(crate) fn check(&mut self, now: Time, config: &PeerConfig, oldest_unacked: Option<Time>) -> Result<bool, (ConnState, String)> {
        if let Some(sent) = self.ping_sent {
            if now.since(sent) > config.ping_timeout {
                let reason = format!("no PingAck within ping-timeout ({:?})", config.ping_timeout);
                return Err((ConnState::NetworkFailure, reason));
            }
        }
        if let (Some(since), true) = (oldest_unacked, config.ko_count > 0) {
            let limit = config.timeout.saturating_mul(config.ko_count);
            if now.since(since) > limit {
                let reason = format!(
                    "a write was not answered within ko-count {} x timeout {:?}",
                    config.ko_count, config.timeout
                );
                return Err((ConnState::Timeout, reason));
            }
        }
        if self.ping_sent.is_none() && now.since(self.last_heard) >= config.ping_interval {
            self.ping_sent = Some(now);
            return Ok(true);
        }
        Ok(false)
    }
}
