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
//! fails the connection; and a promotion pings the peers it counts
//! ([`Liveness::ping_to_confirm`]) and counts only those that answered.
//!
//! Pings are numbered per connection: the control socket answers in order, so the n-th
//! `PingAck` answers the n-th ping, whatever sent it.

use crate::engine::PeerConfig;
use crate::state::ConnState;
use crate::types::Time;

/// Liveness bookkeeping of one connection.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Liveness {
    last_heard: Time,
    /// Pings sent and answered on this connection.
    pings_sent: u64,
    pings_answered: u64,
    /// The outstanding liveness ping: when it was sent, and its number.
    ping_sent: Option<(Time, u64)>,
    /// The outstanding probe: when it was sent, and its number.
    probe_sent: Option<(Time, u64)>,
    /// The number of the ping a promotion sent to confirm this peer.
    confirm: Option<u64>,
}

impl Liveness {
    pub(crate) fn connected(now: Time) -> Liveness {
        Liveness {
            last_heard: now,
            ..Liveness::default()
        }
    }

    pub(crate) fn heard_from(&mut self, now: Time) {
        self.last_heard = now;
    }

    /// Numbers a ping about to be sent.
    fn next_ping(&mut self) -> u64 {
        self.pings_sent += 1;
        self.pings_sent
    }

    /// A `PingAck` arrived; returns the round trip if it answered a probe.
    pub(crate) fn ping_answered(&mut self, now: Time) -> Option<std::time::Duration> {
        self.pings_answered = (self.pings_answered + 1).min(self.pings_sent);
        let answered = self.pings_answered;
        if self.ping_sent.is_some_and(|(_, number)| number <= answered) {
            self.ping_sent = None;
        }
        match self.probe_sent {
            Some((sent, number)) if number <= answered => {
                self.probe_sent = None;
                (number == answered).then(|| now.since(sent))
            }
            _ => None,
        }
    }

    /// Whether to send a round-trip probe now (none is outstanding, nor a liveness ping).
    pub(crate) fn start_probe(&mut self, now: Time) -> bool {
        if self.probe_sent.is_some() || self.ping_sent.is_some() {
            return false;
        }
        self.probe_sent = Some((now, self.next_ping()));
        true
    }

    /// A promotion is about to ping this peer (the caller sends the ping): it is confirmed
    /// once that ping is answered ([`Liveness::confirmed`]).
    pub(crate) fn ping_to_confirm(&mut self) {
        self.confirm = Some(self.next_ping());
    }

    /// Whether the peer answered the ping of the latest [`Liveness::ping_to_confirm`].
    pub(crate) fn confirmed(&self) -> bool {
        self.confirm
            .is_some_and(|number| self.pings_answered >= number)
    }

    /// Ok(true): send a ping now. Err: drop the connection with this state and reason.
    pub(crate) fn check(
        &mut self,
        now: Time,
        config: &PeerConfig,
        oldest_unacked: Option<Time>,
    ) -> Result<bool, (ConnState, String)> {
        if let Some((sent, _)) = self.ping_sent {
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
            self.ping_sent = Some((now, self.next_ping()));
            return Ok(true);
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers come in the order the pings went out, whoever sent them: a probe's round trip
    /// is measured from its own answer, and a promotion's confirmation waits for its own.
    #[test]
    fn each_answer_goes_to_the_ping_it_answers() {
        let at = |ms: u64| Time(ms * 1_000_000);
        let mut liveness = Liveness::connected(at(0));
        liveness.ping_to_confirm();
        assert!(liveness.start_probe(at(10)), "no liveness ping outstanding");
        assert!(!liveness.confirmed());
        // The first answer is the confirmation's: no round trip for the probe yet.
        assert_eq!(liveness.ping_answered(at(12)), None);
        assert!(liveness.confirmed());
        assert_eq!(
            liveness.ping_answered(at(15)),
            Some(std::time::Duration::from_millis(5))
        );
        // A new confirmation needs a new answer; an answer nobody asked for is ignored.
        liveness.ping_to_confirm();
        assert!(!liveness.confirmed());
        liveness.ping_answered(at(20));
        assert!(liveness.confirmed());
        liveness.ping_answered(at(21));
        liveness.ping_to_confirm();
        assert!(
            !liveness.confirmed(),
            "an unsolicited answer does not count for a later ping"
        );
    }
}
