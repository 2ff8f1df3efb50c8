//! The activity log on a Secondary (DRBD 9 does the same for peer writes): a Secondary that
//! has more than one peer writes a replicated write only once its 4 MiB extents are durably
//! hot, and keeps them hot until a peer ack says every peer has the write.
//!
//! Why: after a Primary is lost, two Secondaries on one generation may differ in the writes
//! no peer ack covered (`reconcile.rs`). In memory each keeps a record of them; a power loss
//! of the whole cluster erases that record, and a returning Secondary knew nothing. With
//! this, what the record held is within the hot extents of the activity log on disk, and an
//! unclean restart in any role marks those extents for every peer (the driver's part, like
//! a crashed Primary's), so the bitmap rules resync them.
//!
//! - **Pins.** Per peer and volume, an extent is pinned (one activity-log reservation) by
//!   the first unsettled write received from that peer that touches it, and remembers the
//!   newest epoch touching it. A peer ack for an epoch unpins the extents it covers; the end
//!   of the connection unpins all, after `reconcile_after_loss` marked the writes as bits
//!   (an extent the log later evicts takes its bitmap pages to disk first).
//! - **Deferred receive.** A write whose extents are not yet durably hot waits, with every
//!   message of its peer's ordered stream after it (writes, barriers, resync replies), in
//!   arrival order: so nothing overtakes it and no barrier is acknowledged before it is
//!   written. Acks, pings, peer acks and handshakes pass.
//! - **No waiting for ever.** A Primary announces its settled epoch before each
//!   activity-log transaction it writes, so a Secondary with a log as large as the
//!   Primary's finds room (its pins are the Primary's unsettled extents). One whose log is
//!   full of pins for longer than [`PIN_BUSY_LIMIT`] drops the connection to that peer,
//!   which unpins and resyncs.
//!
//! Invariants:
//! - A replicated write is handed to the receiver (and so to the disk) only once each of its
//!   extents is pinned by a durable transaction (checked in `pinned_and_hot`).
//! - Each pin is exactly one reservation, ended exactly once (unpin, or the failure of the
//!   transaction activating it).
//! - Deferred messages hold their payload, so the driver's receive budget bounds them; the
//!   queue is also capped at [`DEFERRED_MAX`] messages (more is a protocol error).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use meta::ExtentRange;

use crate::engine::activity_log::{AlWait, Begun};
use crate::engine::{disk_op_length, Engine};
use crate::state::{ConnState, DiskState, Role};
use crate::types::{Action, PeerMessage, Time};
use crate::PeerViolation;

/// A Secondary whose activity log stays full of pins this long drops the peer.
pub const PIN_BUSY_LIMIT: Duration = Duration::from_secs(5);

/// Most messages deferred behind a write waiting for the activity log, per peer.
pub const DEFERRED_MAX: usize = 1 << 16;

/// An extent held hot for unsettled writes from one peer.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pin {
    /// The newest epoch of a write to it.
    epoch: u64,
    /// The transaction activating it, until written.
    activating: Option<u64>,
}

/// What this node keeps per peer for its activity log as a Secondary.
#[derive(Debug)]
pub(super) struct PeerLog<P> {
    /// Per volume slot: pinned extents.
    pins: Vec<BTreeMap<u32, Pin>>,
    /// The ordered messages waiting behind a write (front) that waits for the log.
    deferred: VecDeque<PeerMessage<P>>,
    /// Since when the front write finds the log full.
    busy_since: Option<Time>,
}

impl<P> PeerLog<P> {
    pub(super) fn new(volumes: usize) -> PeerLog<P> {
        PeerLog {
            pins: vec![BTreeMap::new(); volumes],
            deferred: VecDeque::new(),
            busy_since: None,
        }
    }

    /// Replicated writes received and waiting for the log (they count as pending).
    pub(super) fn deferred_writes(&self) -> u64 {
        let writes = self
            .deferred
            .iter()
            .filter(|m| matches!(m, PeerMessage::Data { .. }))
            .count();
        u64::try_from(writes).unwrap_or(u64::MAX)
    }
}

/// Whether `message` belongs to a peer's ordered stream, which a deferred write holds back.
fn is_ordered<P>(message: &PeerMessage<P>) -> bool {
    matches!(
        message,
        PeerMessage::Data { .. }
            | PeerMessage::Barrier { .. }
            | PeerMessage::ResyncReply { .. }
            | PeerMessage::ResyncNegReply { .. }
            | PeerMessage::ResyncInSync { .. }
            | PeerMessage::ResyncDone { .. }
    )
}

/// The extents a write touches, one by one.
fn extents_of(offset: u64, length: u64) -> Option<std::ops::Range<u32>> {
    let range = ExtentRange::covering(offset, length).ok()?;
    Some(u32::try_from(range.first).ok()?..u32::try_from(range.end).ok()?)
}

fn single(extent: u32) -> ExtentRange {
    ExtentRange {
        first: u64::from(extent),
        end: u64::from(extent) + 1,
    }
}

/// Whether the front write may go on.
enum Pinning {
    Ready,
    Wait,
}

impl<P: Clone> Engine<P> {
    /// Routes a message from the peer in `slot`: an ordered one waits behind a deferred
    /// write, or is itself deferred until its extents are hot; the rest is dispatched.
    pub(super) fn receive_in_order(
        &mut self,
        now: Time,
        slot: usize,
        message: PeerMessage<P>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if !is_ordered(&message) {
            return self.dispatch(now, slot, message, out);
        }
        let log = &mut self.peers[slot].log;
        if !log.deferred.is_empty() {
            if log.deferred.len() >= DEFERRED_MAX {
                return Err(PeerViolation::DeferredOverflow {
                    limit: DEFERRED_MAX,
                });
            }
            log.deferred.push_back(message);
            return Ok(());
        }
        match self.pin(now, slot, &message, out) {
            Pinning::Ready => self.dispatch(now, slot, message, out),
            Pinning::Wait => {
                self.peers[slot].log.deferred.push_back(message);
                Ok(())
            }
        }
    }

    /// Pins the extents of a replicated write (other messages are ready at once).
    fn pin(
        &mut self,
        now: Time,
        slot: usize,
        message: &PeerMessage<P>,
        out: &mut Vec<Action<P>>,
    ) -> Pinning {
        let PeerMessage::Data {
            epoch,
            volume,
            offset,
            op,
            ..
        } = message
        else {
            return Pinning::Ready;
        };
        let epoch = *epoch;
        let Some(vslot) = self.volume_slot(*volume) else {
            return Pinning::Ready;
        };
        let v = &self.volumes[vslot];
        let logged = v.log.is_some()
            && v.disk != DiskState::Diskless
            && self.role != Role::Primary
            && self.peers.len() > 1;
        // A write beyond the volume is refused by `receive_data`.
        let length = disk_op_length(op);
        let in_volume = offset
            .checked_add(length)
            .is_some_and(|end| end <= v.size_bytes);
        let (true, true, Some(extents)) = (logged, in_volume, extents_of(*offset, length)) else {
            return Pinning::Ready;
        };
        for extent in extents.clone() {
            if let Some(pin) = self.peers[slot].log.pins[vslot].get_mut(&extent) {
                pin.epoch = pin.epoch.max(epoch);
                continue;
            }
            let activating = match self.al_begin(vslot, single(extent), out) {
                Begun::Start => None,
                Begun::Hold(AlWait::Transaction { seq }) => Some(seq),
                Begun::Hold(AlWait::Busy) => {
                    let log = &mut self.peers[slot].log;
                    log.busy_since.get_or_insert(now);
                    return Pinning::Wait;
                }
                // One extent always fits a transaction.
                Begun::Refuse => return Pinning::Ready,
            };
            self.peers[slot].log.pins[vslot].insert(extent, Pin { epoch, activating });
        }
        let log = &mut self.peers[slot].log;
        log.busy_since = None;
        let hot = extents.into_iter().all(|e| {
            log.pins[vslot]
                .get(&e)
                .is_some_and(|p| p.activating.is_none())
        });
        if hot {
            Pinning::Ready
        } else {
            Pinning::Wait
        }
    }

    /// Hands on the deferred messages of every peer whose front write may go on now.
    pub(super) fn resume_deferred(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            while self.peers[slot].connection == ConnState::Connected {
                let Some(message) = self.peers[slot].log.deferred.pop_front() else {
                    break;
                };
                if let Pinning::Wait = self.pin(now, slot, &message, out) {
                    self.peers[slot].log.deferred.push_front(message);
                    break;
                }
                if let Err(reason) = self.dispatch(now, slot, message, out) {
                    let peer = self.peers[slot].config.node_id;
                    out.push(Action::Disconnect {
                        peer,
                        state: ConnState::ProtocolError,
                        reason: reason.clone().into(),
                    });
                    self.peer_disconnected(now, peer, ConnState::ProtocolError, reason, out);
                    break;
                }
            }
        }
    }

    /// Ends the pins of the peer in `slot` up to `epoch` (all of them for `None`); then
    /// retries what waited for room in the log.
    pub(super) fn unpin(
        &mut self,
        now: Time,
        slot: usize,
        epoch: Option<u64>,
        out: &mut Vec<Action<P>>,
    ) {
        let mut released = Vec::new();
        for vslot in 0..self.volumes.len() {
            let pins = &mut self.peers[slot].log.pins[vslot];
            let ended: Vec<u32> = pins
                .iter()
                .filter(|(_, pin)| epoch.is_none_or(|e| pin.epoch <= e && pin.activating.is_none()))
                .map(|(&e, _)| e)
                .collect();
            if ended.is_empty() {
                continue;
            }
            ended.iter().for_each(|e| {
                pins.remove(e);
            });
            if let Some(log) = self.volumes[vslot].log.as_mut() {
                ended.iter().for_each(|&e| log.end(single(e)));
            }
            released.push(vslot);
        }
        if epoch.is_none() {
            let log = &mut self.peers[slot].log;
            log.deferred.clear();
            log.busy_since = None;
        }
        for vslot in released {
            self.retry_busy(now, vslot, out);
        }
        self.resume_deferred(now, out);
    }

    /// Transaction `seq` of volume `vslot` was written (`ok`) or failed: the pins it was
    /// activating are hot, or end (and their peers are dropped: the write they hold back
    /// cannot be protected).
    pub(super) fn pins_activated(&mut self, vslot: usize, seq: u64, ok: bool) -> Vec<usize> {
        let mut failed = Vec::new();
        for slot in 0..self.peers.len() {
            let pins = &mut self.peers[slot].log.pins[vslot];
            let activated: Vec<u32> = pins
                .iter()
                .filter(|(_, p)| p.activating == Some(seq))
                .map(|(&e, _)| e)
                .collect();
            if activated.is_empty() {
                continue;
            }
            for extent in activated {
                if ok {
                    if let Some(pin) = pins.get_mut(&extent) {
                        pin.activating = None;
                    }
                } else {
                    pins.remove(&extent);
                    if let Some(log) = self.volumes[vslot].log.as_mut() {
                        log.end(single(extent));
                    }
                }
            }
            if !ok {
                failed.push(slot);
            }
        }
        failed
    }

    /// At a tick: a peer whose front write found the log full for [`PIN_BUSY_LIMIT`] is
    /// dropped (the loss unpins and marks, the reconnect resyncs).
    pub(super) fn pins_tick(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        self.resume_deferred(now, out);
        for slot in 0..self.peers.len() {
            let Some(since) = self.peers[slot].log.busy_since else {
                continue;
            };
            if self.peers[slot].connection != ConnState::Connected
                || now.since(since) < PIN_BUSY_LIMIT
            {
                continue;
            }
            let reason = format!(
                "the activity log stayed full of unsettled writes for {PIN_BUSY_LIMIT:?}: \
                 al-extents here is smaller than the Primary's?"
            );
            self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
        }
    }
}
