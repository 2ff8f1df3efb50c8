//! Asynchronous replication within stated bounds: the mechanisms the Selective Replication
//! Manager drives (issue 5). The manager decides; the engine makes each decision safe.
//!
//! - **Effective protocol.** Each peer has its configured protocol and the protocol in effect
//!   ([`Engine::set_protocol`]). Completion follows the protocol in effect.
//! - **Possibly stale.** Before the first write that a peer may miss is acknowledged — that
//!   is, before protocol A takes effect for it — the peer durably marks itself possibly stale
//!   (`StaleMark`, persisted, then `StaleMarkAck`); until the ack arrives writes keep the
//!   stronger protocol. A possibly-stale node refuses promotion without `--force`. The mark
//!   is cleared only when a Primary tells it to (`StaleMark { stale: false }`): back on a
//!   stronger protocol, once the peer confirmed every write sent under A and every volume's
//!   handshake and resync with it are done (also after a reconnect, by whichever Primary the
//!   node then follows) — or by `primary --force` on the node itself.
//! - **Lag bound.** With a [`LagBound`], a write is not admitted while a peer under protocol
//!   A has unconfirmed writes and the write would take them over `bytes_max`, or while the
//!   oldest of them is older than `time_max`: it waits (backpressure) until confirmations
//!   arrive, so the data a failover may lose stays under the bound.
//! - **Lag throttle.** With a [`LagThrottle`] on the bound (the manager's curve, issue 29),
//!   the bound is approached smoothly instead of hit: while the backlog's share of the bound
//!   (bytes or age, whichever is larger) is at or past the throttle's start, a write is
//!   admitted only against credit, which each confirmed byte earns at the curve's rate for
//!   the share after the confirmation (2× just past the start, down to 0 near the bound).
//!   Admission so follows the drain rate, and the backlog settles short of the bound.
//! - **Drain time.** The time bound is about the age a write reaches before the peer
//!   confirms it, not only the age of the oldest one now: the engine measures the rate at
//!   which the peer confirms its backlog ([`DrainMeter`], over windows in which the backlog
//!   never emptied, so it is the link's and the peer's rate, not the client's) and counts
//!   the backlog's drain time at that rate as an age. A write is not admitted while the
//!   backlog with it would take `time_max` or more to drain, and the throttle works on the
//!   drain time's share of `time_max` too. So when the link slows (a bandwidth drop), the
//!   backlog shrinks to what the link drains in the bound instead of the bytes the faster
//!   link had let in; only the backlog admitted before the drop was measured can outlive
//!   the bound (by the time the slower link needs for it).
//!
//! Invariants:
//! - A write completes under protocol A for a peer only while that peer's possibly-stale
//!   mark is durable on the peer (the effective protocol is A only between `StaleMarkAck`
//!   and the next switch or disconnect).
//! - `unreplicated_bytes` of a peer is the sum of its transfer log (writes sent and not yet
//!   confirmed written by a write ack or a barrier ack); admission never takes it beyond
//!   `bytes_max` unless it was zero (a single write larger than the bound still runs).
//! - A secondary acknowledges every write it wrote (`WriteAck`) whatever the protocol, so the
//!   Primary may switch protocols at any time without waiting for acks that never come.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::*;

/// How much unconfirmed data asynchronous replication may leave a peer behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagBound {
    /// Bytes written and acknowledged to clients but not yet confirmed by the peer.
    pub bytes_max: u64,
    /// Age of the oldest such write.
    pub time_max: Duration,
    /// Ack-clocked admission short of the bound (`None`: writes run until the bound).
    #[serde(default)]
    pub throttle: Option<LagThrottle>,
}

/// Steps of a [`LagThrottle`] curve.
pub const LAG_THROTTLE_STEPS: usize = 16;

/// How admission slows as a backlog nears its bound: from `start_permille` of the bound on,
/// the range to the bound is cut into [`LAG_THROTTLE_STEPS`] equal steps, and in step `i`
/// each byte the peer confirms lets `admit_per_ack_permille[i] / 1000` new bytes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagThrottle {
    /// Share of the bound (per mille) where throttling starts (under 1000).
    pub start_permille: u32,
    /// Bytes admitted per byte confirmed, per mille, in each step.
    pub admit_per_ack_permille: [u32; LAG_THROTTLE_STEPS],
}

impl LagThrottle {
    /// Bytes admitted per confirmed byte (per mille) at `share_permille` of the bound;
    /// `None` under the start.
    fn admit_per_ack(&self, share_permille: u32) -> Option<u32> {
        let start = self.start_permille.min(999);
        let into = u64::from(share_permille.checked_sub(start)?);
        let step = into * LAG_CREDIT_DIVISOR / u64::from(1000 - start);
        Some(
            usize::try_from(step)
                .ok()
                .and_then(|step| self.admit_per_ack_permille.get(step).copied())
                .unwrap_or(0),
        )
    }
}

/// [`LAG_THROTTLE_STEPS`] as a u64; also the most credit a throttled peer may bank, as a
/// share of `bytes_max` (1/16: one step's worth).
const LAG_CREDIT_DIVISOR: u64 = 16;
const _: () = assert!(LAG_CREDIT_DIVISOR == LAG_THROTTLE_STEPS as u64);

/// Shortest window over which a [`DrainMeter`] measures a rate.
pub const DRAIN_WINDOW: Duration = Duration::from_millis(200);

/// The rate at which a peer confirms its backlog (barrier acks), measured over windows of
/// at least [`DRAIN_WINDOW`] in which the backlog never emptied; each window's rate is
/// averaged with the previous estimate (half each), so a slower link shows within a few
/// hundred milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DrainMeter {
    /// Start of the current window and the bytes confirmed in it.
    window: Option<(Time, u64)>,
    bytes_per_s: Option<u64>,
}

impl DrainMeter {
    /// `confirmed` bytes were confirmed at `now`, leaving `backlog_left`.
    fn confirmed(&mut self, now: Time, confirmed: u64, backlog_left: u64) {
        let Some((start, bytes)) = self.window else {
            if backlog_left > 0 {
                self.window = Some((now, 0));
            }
            return;
        };
        let bytes = bytes.saturating_add(confirmed);
        let elapsed = now.0.saturating_sub(start.0);
        if u128::from(elapsed) < DRAIN_WINDOW.as_nanos() {
            // A backlog that emptied early measured the client's rate, not the link's.
            self.window = (backlog_left > 0).then_some((start, bytes));
            return;
        }
        let rate = u128::from(bytes) * 1_000_000_000 / u128::from(elapsed.max(1));
        let rate = u64::try_from(rate).unwrap_or(u64::MAX);
        self.bytes_per_s = Some(match self.bytes_per_s {
            Some(old) => old / 2 + rate / 2,
            None => rate,
        });
        self.window = (backlog_left > 0).then_some((now, 0));
    }

    /// The time `bytes` take to drain at the measured rate (`None`: nothing measured yet).
    fn drain_time(&self, bytes: u64) -> Option<Duration> {
        let rate = self.bytes_per_s?;
        let nanos = u128::from(bytes) * 1_000_000_000 / u128::from(rate.max(1));
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }
}

/// The backlog's effective age for the time bound: its oldest write's age, or the time the
/// backlog (plus `extra` bytes) takes to drain at the measured rate, whichever is longer.
fn effective_age<P>(peer: &Peer<P>, now: Time, extra: u64) -> Duration {
    let age = peer.transfer_log.front().map_or(Duration::ZERO, |s| {
        Duration::from_nanos(now.0.saturating_sub(s.since.0))
    });
    let backlog = unreplicated_bytes(peer).saturating_add(extra);
    peer.drain
        .drain_time(backlog)
        .map_or(age, |drain| drain.max(age))
}

/// The backlog's share of `bound` in per mille: bytes or age, whichever is larger.
fn share_permille(bound: &LagBound, bytes: u64, age: Duration) -> u32 {
    let share = |part: u128, whole: u128| {
        u32::try_from(
            part.saturating_mul(1000)
                .checked_div(whole)
                .unwrap_or(u128::MAX),
        )
        .unwrap_or(u32::MAX)
    };
    share(u128::from(bytes), u128::from(bound.bytes_max))
        .max(share(age.as_nanos(), bound.time_max.as_nanos()))
}

/// Where a peer stands on the way to and from asynchronous replication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum AsyncState {
    /// The effective protocol is the one asked for; the peer is not marked.
    #[default]
    Sync,
    /// Protocol A was asked for: waiting for the peer's `StaleMarkAck` (writes keep the
    /// previous protocol meanwhile).
    Marking,
    /// Protocol A is in effect; the peer is marked possibly stale.
    Async,
    /// Back on a stronger protocol; the mark is cleared once every write sent up to `seq`
    /// (the last one sent under A) is confirmed.
    Draining { seq: u64 },
}

/// The lag of one peer, for status and the manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagStatus {
    /// Protocol in effect (it differs from the configured one while the manager changed it).
    pub effective_protocol: Option<Protocol>,
    /// Bytes sent and not yet confirmed written by the peer.
    pub unreplicated_bytes: u64,
    /// Age of the oldest of them, in milliseconds.
    pub oldest_age_ms: u64,
    /// The peer is marked possibly stale (protocol A in effect or being drained).
    pub peer_possibly_stale: bool,
    /// Client writes waiting to start (for an overlapping write, or for the lag bound).
    pub waiting_writes: u64,
}

impl<P: Clone> Engine<P> {
    /// Sets the protocol in effect for `peer`. Switching to A first has the peer durably mark
    /// itself possibly stale; switching away from A takes effect at once and clears the mark
    /// once every write sent under A is confirmed.
    pub fn set_protocol(
        &mut self,
        now: Time,
        peer: u8,
        protocol: Protocol,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        self.apply_protocol(slot, protocol, out);
        self.start_waiting(now, out);
        out.push(Action::StateChanged);
        Ok(())
    }

    /// [`Engine::set_protocol`] without admitting waiting writes.
    fn apply_protocol(&mut self, slot: usize, protocol: Protocol, out: &mut Vec<Action<P>>) {
        let p = &mut self.peers[slot];
        let peer = p.config.node_id;
        p.wanted_protocol = protocol;
        let needs_mark = protocol == Protocol::A && p.config.protocol != Protocol::A;
        let primary = self.role == Role::Primary;
        match (needs_mark, p.async_state) {
            (true, AsyncState::Sync | AsyncState::Draining { .. }) => {
                // A Secondary replicates nothing: marking waits for a promotion.
                if primary && p.connection == ConnState::Connected {
                    p.async_state = AsyncState::Marking;
                    out.push(Action::SendControl {
                        peer,
                        message: PeerMessage::StaleMark { stale: true },
                    });
                }
            }
            (true, AsyncState::Marking | AsyncState::Async) => {}
            (false, state) => {
                p.protocol = protocol;
                if state != AsyncState::Sync {
                    // The peer is (or may soon be) marked: clear it once every write sent so
                    // far is confirmed.
                    let seq = p.transfer_log.back().map_or(0, |s| s.seq);
                    p.async_state = AsyncState::Draining { seq };
                }
                self.drain_check(slot, out);
            }
        }
    }

    /// `adjust`: new settings for a peer's connection, applied without dropping it. The
    /// node id and name must stay; a running resync takes the new rate at once; a lower
    /// `max-buffers` is honoured as requests drain; a new protocol becomes the configured
    /// one and the one in effect (through [`Engine::set_protocol`]'s rules).
    pub fn reconfigure_peer(
        &mut self,
        now: Time,
        config: PeerConfig,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self
            .peer_slot(config.node_id)
            .ok_or(StateError::NoSuchPeer(config.node_id))?;
        if config.max_buffers_pages == 0 {
            return Err(StateError::InvalidSetting(
                "max-buffers must be at least 1".into(),
            ));
        }
        let rate = ResyncRateController::new(config.resync)
            .map_err(|e| StateError::InvalidSetting(e.to_string()))?;
        let p = &mut self.peers[slot];
        let protocol = config.protocol;
        let protocol_changed = protocol != p.config.protocol;
        p.receiver.set_durable_acks(config.durable_acks);
        p.config = PeerConfig {
            name: p.config.name.clone(),
            ..config
        };
        for sync in &mut p.syncs {
            if let SyncState::Target(target) = sync {
                target.controller = rate.clone();
            }
        }
        p.rate = rate;
        if protocol_changed {
            self.apply_protocol(slot, protocol, out);
        }
        for vslot in 0..self.volumes.len() {
            self.issue_requests(now, slot, vslot, out);
        }
        self.start_waiting(now, out);
        out.push(Action::StateChanged);
        Ok(())
    }

    /// The protocol in effect towards `peer` (what completion follows now).
    pub fn protocol_in_effect(&self, peer: u8) -> Option<Protocol> {
        self.peer_slot(peer).map(|slot| self.peers[slot].protocol)
    }

    /// The settings `peer`'s connection runs with (as configured or last adjusted).
    pub fn peer_config(&self, peer: u8) -> Option<PeerConfig> {
        self.peer_slot(peer)
            .map(|slot| self.peers[slot].config.clone())
    }

    /// Sets (or removes) the lag bound of `peer`.
    pub fn set_lag_bound(
        &mut self,
        now: Time,
        peer: u8,
        bound: Option<LagBound>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        self.peers[slot].lag_bound = bound;
        self.start_waiting(now, out);
        Ok(())
    }

    /// The lag of `peer` now.
    pub(super) fn lag_status(&self, now: Time, slot: usize) -> LagStatus {
        let p = &self.peers[slot];
        let oldest = p
            .transfer_log
            .front()
            .map_or(0, |s| now.0.saturating_sub(s.since.0) / 1_000_000);
        LagStatus {
            effective_protocol: Some(p.protocol),
            unreplicated_bytes: unreplicated_bytes(p),
            oldest_age_ms: oldest,
            peer_possibly_stale: matches!(
                p.async_state,
                AsyncState::Async | AsyncState::Draining { .. }
            ),
            waiting_writes: u64::try_from(self.waiting.len()).unwrap_or(u64::MAX),
        }
    }

    /// Whether a write of `length` bytes must wait for the lag bound of some peer.
    pub(super) fn lag_blocks(&self, now: Time, length: u64) -> bool {
        self.peers.iter().any(|p| {
            let Some(bound) = p.lag_bound else {
                return false;
            };
            if p.protocol != Protocol::A || !replicates_to(p) {
                return false;
            }
            if p.transfer_log.is_empty() {
                return false;
            }
            let age = effective_age(p, now, 0);
            let backlog = unreplicated_bytes(p);
            let throttled = bound
                .throttle
                .and_then(|t| t.admit_per_ack(share_permille(&bound, backlog, age)))
                .is_some();
            backlog.saturating_add(length) > bound.bytes_max
                || effective_age(p, now, length) >= bound.time_max
                || (throttled && p.lag_credit < length)
        })
    }

    /// A write of `length` bytes was admitted: it spends throttle credit of every peer.
    pub(super) fn spend_lag_credit(&mut self, length: u64) {
        self.peers
            .iter_mut()
            .for_each(|p| p.lag_credit = p.lag_credit.saturating_sub(length));
    }

    /// The peer of `slot` confirmed `confirmed` bytes of its backlog: they earn throttle
    /// credit at the curve's rate for the backlog left (none under the throttle's start),
    /// banked up to a step's worth of the bound.
    pub(super) fn earn_lag_credit(&mut self, now: Time, slot: usize, confirmed: u64) {
        let p = &mut self.peers[slot];
        let backlog_left = unreplicated_bytes(p);
        p.drain.confirmed(now, confirmed, backlog_left);
        let Some(bound) = p.lag_bound else { return };
        let Some(throttle) = bound.throttle else {
            return;
        };
        let age = effective_age(p, now, 0);
        let Some(admit) =
            throttle.admit_per_ack(share_permille(&bound, unreplicated_bytes(p), age))
        else {
            return;
        };
        let earned =
            u64::try_from(u128::from(confirmed) * u128::from(admit) / 1000).unwrap_or(u64::MAX);
        p.lag_credit = p
            .lag_credit
            .saturating_add(earned)
            .min(bound.bytes_max / LAG_CREDIT_DIVISOR);
    }

    /// The secondary side: mark or clear this node possibly stale, durably, then answer.
    pub(super) fn receive_stale_mark(
        &mut self,
        slot: usize,
        stale: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if stale && self.role == Role::Primary {
            return Err(PeerViolation::StaleMarkToPrimary);
        }
        let sender = self.peers[slot].config.node_id;
        let entitled =
            self.peers[slot].role == Role::Primary || (!stale && self.marked_by == Some(sender));
        if !entitled {
            // Only the Primary that replicates to us (or, to clear it, the node that marked
            // us and has since demoted) knows what we may lack: a mark from anyone else is
            // ignored (and answered, so a sender does not wait).
            let peer = self.peers[slot].config.node_id;
            out.push(Action::SendControl {
                peer,
                message: PeerMessage::StaleMarkAck { stale },
            });
            return Ok(());
        }
        self.marked_by = stale.then_some(sender);
        let mut version = 0;
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].possibly_stale != stale {
                self.volumes[vslot].possibly_stale = stale;
                version = version.max(self.meta_changed(vslot, out));
            }
        }
        self.peers[slot].stale_ack = Some((stale, version));
        self.send_stale_ack_if_durable(slot, out);
        Ok(())
    }

    /// Sends the pending `StaleMarkAck` of `slot` once the metadata holding it is durable.
    pub(super) fn send_stale_ack_if_durable(&mut self, slot: usize, out: &mut Vec<Action<P>>) {
        let Some((stale, version)) = self.peers[slot].stale_ack else {
            return;
        };
        if !(0..self.volumes.len()).all(|vslot| self.is_persisted(vslot, version)) {
            return;
        }
        self.peers[slot].stale_ack = None;
        let peer = self.peers[slot].config.node_id;
        out.push(Action::SendControl {
            peer,
            message: PeerMessage::StaleMarkAck { stale },
        });
    }

    /// The primary side: the peer's mark is durable (or cleared); the mark is not yet durable
    /// while the stronger protocol still applies, so nothing completes early.
    pub(super) fn receive_stale_ack(
        &mut self,
        now: Time,
        slot: usize,
        stale: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if stale && self.ahead_mark_acked(now, slot, out) {
            return Ok(());
        }
        let p = &mut self.peers[slot];
        if stale && p.async_state == AsyncState::Marking && p.wanted_protocol == Protocol::A {
            p.async_state = AsyncState::Async;
            p.protocol = Protocol::A;
            // Writes waiting for their peer ack may now complete under A.
            let waiting: Vec<u64> = self.in_flight.keys().copied().collect();
            for seq in waiting {
                self.try_complete_write(now, seq, out);
            }
            out.push(Action::StateChanged);
        } else if stale {
            // Marked after the switch was called off: clear it again once drained.
            let seq = p.transfer_log.back().map_or(0, |s| s.seq);
            p.async_state = AsyncState::Draining { seq };
            self.drain_check(slot, out);
        }
        Ok(())
    }

    /// Clears the peer's mark once every write sent under A is confirmed.
    pub(super) fn drain_check(&mut self, slot: usize, out: &mut Vec<Action<P>>) {
        let p = &mut self.peers[slot];
        let AsyncState::Draining { seq } = p.async_state else {
            return;
        };
        if !p.ahead.is_calm() {
            // Bits an episode skipped are still unresolved.
            return;
        }
        let settled = !p
            .syncs
            .iter()
            .any(|sync| !matches!(sync, SyncState::Established));
        if p.transfer_log.front().is_some_and(|s| s.seq <= seq)
            || p.connection != ConnState::Connected
            || !settled
        {
            return;
        }
        p.async_state = AsyncState::Sync;
        let peer = p.config.node_id;
        out.push(Action::SendControl {
            peer,
            message: PeerMessage::StaleMark { stale: false },
        });
        out.push(Action::StateChanged);
    }

    /// After a promotion: start the marking a `set_protocol(A)` on the Secondary asked for.
    pub(super) fn resume_async_on_promote(&mut self, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            if self.peers[slot].wanted_protocol == Protocol::A {
                self.apply_protocol(slot, Protocol::A, out);
            }
        }
    }

    /// After a (re)connect: a disconnect forgets where marking stood, so the peer may still
    /// be marked (also after this node restarted). The effective protocol falls back to the
    /// configured one; the mark is cleared once the handshake and any resync are done and
    /// nothing is unconfirmed, or renewed at once if protocol A is still wanted.
    pub(super) fn reset_async_on_connect(&mut self, slot: usize, out: &mut Vec<Action<P>>) {
        let primary = self.role == Role::Primary;
        let p = &mut self.peers[slot];
        p.stale_ack = None;
        p.protocol = p.config.protocol;
        if !primary {
            p.async_state = AsyncState::Sync;
            return;
        }
        if p.config.protocol == Protocol::A {
            // Only pull-ahead marks a peer of a protocol A connection: clear a mark left by
            // an episode the disconnect cut short, once caught up.
            p.async_state = if p.config.congestion.is_some() {
                AsyncState::Draining { seq: 0 }
            } else {
                AsyncState::Sync
            };
            return;
        }
        p.async_state = AsyncState::Draining { seq: 0 };
        if p.wanted_protocol == Protocol::A {
            p.async_state = AsyncState::Marking;
            let peer = p.config.node_id;
            out.push(Action::SendControl {
                peer,
                message: PeerMessage::StaleMark { stale: true },
            });
        }
    }

    /// A Secondary replicates nothing: go back to the configured protocol and clear the
    /// peers' marks once they confirmed everything (this node marked them, so it may).
    pub(super) fn leave_async_on_demote(&mut self, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            let configured = self.peers[slot].config.protocol;
            if self.peers[slot].wanted_protocol != configured {
                self.apply_protocol(slot, configured, out);
            }
        }
    }
}

pub(super) fn unreplicated_bytes<P>(peer: &Peer<P>) -> u64 {
    peer.transfer_log.iter().map(|s| s.extent.length).sum()
}
