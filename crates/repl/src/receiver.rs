//! The receiving side of one peer connection: applies replicated writes epoch by epoch, and
//! resync writes (a sync target's replies from its source), each in arrival order with the
//! writes it overlaps.
//!
//! Writes of one epoch are issued to the local disk concurrently as they arrive; writes of a
//! later epoch are held until the earlier epoch is closed by its barrier and every one of its
//! writes has finished (and, for a flushing barrier, the flush too). So this disk only ever
//! shows a state the primary's disk went through.
//!
//! Invariants:
//! - **Arrival order for overlapping writes:** a write (replicated or resync) is issued only
//!   when no write that arrived before it and overlaps it is still pending. Issuing is
//!   incremental: an arrival can only start itself (checked against every pending write), a
//!   finished write only the writes it overlapped (then everything is rescanned), a retired
//!   epoch the next one; debug builds check after each step that no runnable write was left.
//!   So two overlapping writes never run concurrently, and the one that arrived later lands
//!   last. Together with the source's rule (a resync read never runs while a write
//!   to the same blocks is unconfirmed, and a write waits while a read or its reply is
//!   unconfirmed) this means older resync data never overwrites a newer write.
//! - Only writes of the front epoch (and resync writes) are issued; later epochs only hold.
//! - Epoch keys `(session, epoch)` strictly increase from front to back.
//! - Acknowledgements are sent only for the current session while connected: a write received
//!   on an old connection is still applied (protocol B promised the primary it would be), but
//!   its ack would name a sequence number of a connection that no longer exists.
//! - Every write held here was admitted by the driver's receive budget (`max-buffers`), so
//!   the map is bounded by it.
//! - **Durable barrier acks** (`disk-flushes yes`, DRBD's default): an epoch's `BarrierAck`
//!   is sent only once a flush that started after all its writes finished has completed, so
//!   the Primary keeps every write this node may still lose to a power failure in its
//!   transfer log (and marks it out of sync if the connection drops). Flushes are shared: one
//!   runs at a time and covers every epoch finished before it started (group commit); acks
//!   go out in epoch order. With `disk-flushes no` an epoch is acknowledged once written.

use std::collections::{BTreeMap, VecDeque};

use crate::extent::Extent;
use crate::state::{ConnState, Protocol};
use crate::types::{Action, DiskOp, IoError, IoId, PeerMessage};
use crate::PeerViolation;

type EpochKey = (u64, u64);

#[derive(Debug)]
struct RxEpoch {
    key: EpochKey,
    /// Writes of this epoch received and not finished.
    pending: u32,
    /// Some(flush) once the barrier arrived.
    closed: Option<bool>,
    flush: FlushStage,
}

/// A flush shared by the epochs written before it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupFlush {
    /// Its tag (in [`IoId::PeerGroupFlush`]).
    tag: u64,
    /// How many of the first `unflushed` epochs it covers.
    covers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushStage {
    NotStarted,
    Running,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A replicated write of epoch `key`.
    Replicated { seq: u64, key: EpochKey },
    /// A resync reply for our request `id`.
    Resync { id: u64 },
}

/// Whether a write of `origin` may run while `front` is the front epoch: a replicated write
/// only in the front epoch, a resync write always.
fn eligible(origin: Origin, front: Option<EpochKey>) -> bool {
    match origin {
        Origin::Replicated { key, .. } => Some(key) == front,
        Origin::Resync { .. } => true,
    }
}

/// The local I/O that writes a write of `origin` received from `peer`.
fn io_of(peer: u8, origin: Origin) -> IoId {
    match origin {
        Origin::Replicated { seq, .. } => IoId::PeerWrite { peer, seq },
        Origin::Resync { id } => IoId::ResyncWrite { peer, id },
    }
}

#[derive(Debug)]
struct RxWrite<P> {
    volume: u16,
    extent: Extent,
    origin: Origin,
    /// Some until the write is issued.
    op: Option<DiskOp<P>>,
}

/// Applies one peer's writes. See the module documentation.
#[derive(Debug)]
pub(crate) struct Receiver<P> {
    peer: u8,
    session: u64,
    connected: bool,
    epochs: VecDeque<RxEpoch>,
    /// Every write received and not finished, by arrival number.
    writes: BTreeMap<u64, RxWrite<P>>,
    next_arrival: u64,
    /// Acknowledge barriers only once durable (`disk-flushes yes`).
    durable_acks: bool,
    /// Epochs of this session written and waiting for a flush before their ack, in order.
    unflushed: VecDeque<u64>,
    /// The group flush running, if any.
    group_flush: Option<GroupFlush>,
    /// Tag of the next group flush.
    next_group_flush: u64,
}

impl<P: Clone> Receiver<P> {
    pub(crate) fn new(peer: u8, durable_acks: bool) -> Receiver<P> {
        Receiver {
            peer,
            session: 0,
            connected: false,
            epochs: VecDeque::new(),
            writes: BTreeMap::new(),
            next_arrival: 0,
            durable_acks,
            unflushed: VecDeque::new(),
            group_flush: None,
            next_group_flush: 1,
        }
    }

    /// A new connection starts: its epochs come after everything still queued.
    pub(crate) fn new_session(&mut self) {
        self.session += 1;
        self.connected = true;
        // Acks for the old session's epochs are never sent; a group flush still running
        // covers none of the new session's.
        self.unflushed.clear();
        if let Some(group) = &mut self.group_flush {
            group.covers = 0;
        }
    }

    /// `disk-flushes` changed (adjust).
    pub(crate) fn set_durable_acks(&mut self, durable_acks: bool) {
        self.durable_acks = durable_acks;
    }

    /// Writes received and not yet written.
    pub(crate) fn pending(&self) -> u64 {
        u64::try_from(self.writes.len()).unwrap_or(u64::MAX)
    }

    /// The ranges of `volume` received and not yet written, in arrival order (online verify
    /// does not judge blocks these may still change).
    pub(crate) fn pending_extents(&self, volume: u16) -> impl Iterator<Item = Extent> + '_ {
        self.writes
            .values()
            .filter(move |w| w.volume == volume)
            .map(|w| w.extent)
    }

    fn acks_allowed(&self, key: EpochKey) -> bool {
        self.connected && key.0 == self.session
    }

    /// A replicated write of `extent` (already checked against the volume).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn data(
        &mut self,
        seq: u64,
        epoch: u64,
        volume: u16,
        extent: Extent,
        op: DiskOp<P>,
        protocol: Protocol,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let key = (self.session, epoch);
        match self.epochs.back_mut() {
            Some(back) if key < back.key => {
                return Err(PeerViolation::WriteAfterLaterEpoch { epoch })
            }
            Some(back) if key == back.key && back.closed.is_some() => {
                return Err(PeerViolation::WriteAfterBarrier { epoch });
            }
            Some(back) if key == back.key => back.pending += 1,
            _ => self.epochs.push_back(RxEpoch {
                key,
                pending: 1,
                closed: None,
                flush: FlushStage::NotStarted,
            }),
        }
        if protocol == Protocol::B {
            out.push(Action::SendControl {
                peer: self.peer,
                message: PeerMessage::RecvAck { seq },
            });
        }
        self.admit(volume, extent, Origin::Replicated { seq, key }, op, out);
        Ok(())
    }

    /// A resync reply for our request `id`, to be written at `extent`.
    pub(crate) fn resync(
        &mut self,
        id: u64,
        volume: u16,
        extent: Extent,
        op: DiskOp<P>,
        out: &mut Vec<Action<P>>,
    ) {
        self.admit(volume, extent, Origin::Resync { id }, op, out);
    }

    fn admit(
        &mut self,
        volume: u16,
        extent: Extent,
        origin: Origin,
        op: DiskOp<P>,
        out: &mut Vec<Action<P>>,
    ) {
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        // An arrival unblocks nothing that was held: only the new write may run now, if its
        // epoch is the front one (or it is a resync write) and it overlaps no pending write
        // (every pending write arrived before it).
        let front = self.epochs.front().map(|e| e.key);
        let runs = eligible(origin, front) && !self.overlaps_pending(volume, &extent);
        let op = if runs {
            out.push(Action::LocalWrite {
                io: io_of(self.peer, origin),
                volume,
                op,
            });
            None
        } else {
            Some(op)
        };
        self.writes.insert(
            arrival,
            RxWrite {
                volume,
                extent,
                origin,
                op,
            },
        );
        self.debug_assert_nothing_to_issue();
    }

    /// Whether a pending write (issued or not) overlaps `extent` of `volume`.
    fn overlaps_pending(&self, volume: u16, extent: &Extent) -> bool {
        self.writes
            .values()
            .any(|w| w.volume == volume && w.extent.overlaps(extent))
    }

    /// Debug builds: the incremental issuing in `admit`, `write_done` and `resync_done` left
    /// nothing that the full scan ([`Receiver::issue`]) would issue.
    fn debug_assert_nothing_to_issue(&self) {
        if cfg!(debug_assertions) {
            let mut scratch = Vec::new();
            let mut earlier: Vec<(u16, Extent)> = Vec::new();
            let front = self.epochs.front().map(|e| e.key);
            for w in self.writes.values() {
                let blocked = earlier
                    .iter()
                    .any(|(v, e)| *v == w.volume && e.overlaps(&w.extent));
                if w.op.is_some() && eligible(w.origin, front) && !blocked {
                    scratch.push(w.origin);
                }
                earlier.push((w.volume, w.extent));
            }
            debug_assert!(scratch.is_empty(), "writes left unissued: {scratch:?}");
        }
    }

    pub(crate) fn barrier(
        &mut self,
        epoch: u64,
        flush: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let key = (self.session, epoch);
        match self.epochs.back_mut() {
            Some(back) if key < back.key => {
                return Err(PeerViolation::BarrierAfterLaterEpoch { epoch })
            }
            Some(back) if key == back.key => {
                if back.closed.is_some() {
                    return Err(PeerViolation::SecondBarrier { epoch });
                }
                back.closed = Some(flush);
            }
            _ => self.epochs.push_back(RxEpoch {
                key,
                pending: 0,
                closed: Some(flush),
                flush: FlushStage::NotStarted,
            }),
        }
        self.advance(out);
        Ok(())
    }

    /// Issues every write that may run now: its epoch is the front one (or it is a resync
    /// write), and no earlier write overlapping it is pending.
    ///
    /// Writes arrive in epoch order, so once a replicated write of a later epoch is reached,
    /// every replicated write after it is of a later epoch too: unless a resync write is
    /// waiting, the scan stops there. (A long backlog of held writes behind a busy front
    /// epoch would otherwise be rescanned, quadratically, on every completion.)
    fn issue(&mut self, out: &mut Vec<Action<P>>) {
        let front = self.epochs.front().map(|e| e.key);
        let resync_waiting = self
            .writes
            .values()
            .any(|w| w.op.is_some() && matches!(w.origin, Origin::Resync { .. }));
        let mut earlier: Vec<(u16, Extent)> = Vec::new();
        let peer = self.peer;
        for write in self.writes.values_mut() {
            let later_epoch =
                matches!(write.origin, Origin::Replicated { key, .. } if Some(key) != front);
            if later_epoch && !resync_waiting {
                break;
            }
            let blocked = earlier
                .iter()
                .any(|(v, e)| *v == write.volume && e.overlaps(&write.extent));
            // Not blocked: no earlier write overlapping it is pending, issued or not.
            if write.op.is_some() && eligible(write.origin, front) && !blocked {
                if let Some(op) = write.op.take() {
                    out.push(Action::LocalWrite {
                        io: io_of(peer, write.origin),
                        volume: write.volume,
                        op,
                    });
                }
            }
            earlier.push((write.volume, write.extent));
        }
    }

    /// Removes the issued write with this origin; returns it.
    fn finish(&mut self, matches: impl Fn(Origin) -> bool) -> Option<RxWrite<P>> {
        let arrival = self
            .writes
            .iter()
            .find(|(_, w)| w.op.is_none() && matches(w.origin))
            .map(|(&a, _)| a)?;
        self.writes.remove(&arrival)
    }

    /// The volume and extent of the replicated write issued for `seq` and not yet finished.
    /// A write that failed stays pending here (holding its epoch and every overlapping
    /// write) until the engine recorded the failure and calls [`Receiver::write_done`].
    pub(crate) fn issued_write(&self, seq: u64) -> Option<(u16, Extent)> {
        self.writes
            .values()
            .find(|w| {
                w.op.is_none() && matches!(w.origin, Origin::Replicated { seq: s, .. } if s == seq)
            })
            .map(|w| (w.volume, w.extent))
    }

    /// A replicated write issued for `seq` finished; returns its volume and extent.
    pub(crate) fn write_done(
        &mut self,
        seq: u64,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) -> (u16, Extent) {
        let finished =
            self.finish(|origin| matches!(origin, Origin::Replicated { seq: s, .. } if s == seq));
        let Some(RxWrite {
            origin: Origin::Replicated { key, .. },
            volume,
            extent,
            ..
        }) = finished
        else {
            panic!("a peer write completed that was never issued");
        };
        if let Some(epoch) = self.epochs.iter_mut().find(|e| e.key == key) {
            epoch.pending -= 1;
        }
        if self.acks_allowed(key) {
            let message = match result {
                Err(_) => Some(PeerMessage::NegAck { seq }),
                // Under every protocol: the Primary may switch protocols at any time, and
                // counts what a peer has not confirmed (`engine/lag.rs`).
                Ok(()) => Some(PeerMessage::WriteAck { seq }),
            };
            if let Some(message) = message {
                out.push(Action::SendControl {
                    peer: self.peer,
                    message,
                });
            }
        }
        // Writes of a later epoch are issued by `advance` when this one retires the front
        // epoch; a held write of the front epoch waits only for an overlapping earlier one.
        self.advance(out);
        if self.overlaps_pending(volume, &extent) {
            self.issue(out);
        }
        self.debug_assert_nothing_to_issue();
        (volume, extent)
    }

    /// A resync write issued for request `id` finished; returns its volume and range.
    pub(crate) fn resync_done(
        &mut self,
        id: u64,
        out: &mut Vec<Action<P>>,
    ) -> Option<(u16, Extent)> {
        let finished = self.finish(|origin| origin == Origin::Resync { id })?;
        if self.overlaps_pending(finished.volume, &finished.extent) {
            self.issue(out);
        }
        self.debug_assert_nothing_to_issue();
        Some((finished.volume, finished.extent))
    }

    /// The flush that ends the front epoch finished.
    pub(crate) fn flush_done(
        &mut self,
        epoch: u64,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(front) = self.epochs.front_mut() else {
            return;
        };
        assert_eq!(front.key.1, epoch, "flush completion for the front epoch");
        front.flush = FlushStage::Done;
        let key = front.key;
        if result.is_err() && self.acks_allowed(key) {
            // Never acknowledge an epoch that is not durable: drop the connection instead, so
            // the primary marks everything unacknowledged out of sync.
            let reason = format!("local flush for epoch {epoch} failed");
            out.push(Action::Disconnect {
                peer: self.peer,
                state: ConnState::NetworkFailure,
                reason: reason.into(),
            });
            self.connected = false;
        }
        self.advance(out);
    }

    /// The connection ended: everything received is still applied in order, unacknowledged.
    pub(crate) fn connection_lost(&mut self, out: &mut Vec<Action<P>>) {
        self.connected = false;
        for epoch in &mut self.epochs {
            epoch.closed.get_or_insert(false);
        }
        self.advance(out);
    }

    /// Retire finished epochs from the front and start the next one's writes.
    fn advance(&mut self, out: &mut Vec<Action<P>>) {
        loop {
            let Some(front) = self.epochs.front_mut() else {
                return;
            };
            let Some(flush) = front.closed else { return };
            if front.pending > 0 {
                return;
            }
            if flush && front.flush != FlushStage::Done {
                if front.flush == FlushStage::NotStarted {
                    front.flush = FlushStage::Running;
                    out.push(Action::LocalFlush {
                        io: IoId::PeerFlush {
                            peer: self.peer,
                            epoch: front.key.1,
                        },
                    });
                }
                return;
            }
            let key = front.key;
            self.epochs.pop_front();
            if self.acks_allowed(key) {
                if flush || !self.durable_acks {
                    // Flushed (or not asked to be): every epoch written before is durable
                    // too; acks go out in order.
                    self.ack_unflushed(usize::MAX, out);
                    out.push(Action::SendControl {
                        peer: self.peer,
                        message: PeerMessage::BarrierAck { epoch: key.1 },
                    });
                } else {
                    self.unflushed.push_back(key.1);
                    self.start_group_flush(out);
                }
            }
            self.issue(out);
        }
    }

    /// Sends the acks of the first `count` unflushed epochs.
    fn ack_unflushed(&mut self, count: usize, out: &mut Vec<Action<P>>) {
        let count = count.min(self.unflushed.len());
        for epoch in self.unflushed.drain(..count) {
            out.push(Action::SendControl {
                peer: self.peer,
                message: PeerMessage::BarrierAck { epoch },
            });
        }
        if let Some(group) = &mut self.group_flush {
            group.covers = group.covers.saturating_sub(count);
        }
    }

    /// Starts a flush for the epochs waiting, unless one runs (the next covers the rest).
    fn start_group_flush(&mut self, out: &mut Vec<Action<P>>) {
        if self.group_flush.is_some() || self.unflushed.is_empty() {
            return;
        }
        let tag = self.next_group_flush;
        self.next_group_flush += 1;
        self.group_flush = Some(GroupFlush {
            tag,
            covers: self.unflushed.len(),
        });
        out.push(Action::LocalFlush {
            io: IoId::PeerGroupFlush {
                peer: self.peer,
                tag,
            },
        });
    }

    /// A group flush finished: ack what it covered (or drop the connection if it failed),
    /// then start the next one for epochs written meanwhile.
    pub(crate) fn group_flush_done(
        &mut self,
        tag: u64,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(group) = self.group_flush.filter(|group| group.tag == tag) else {
            return;
        };
        self.group_flush = None;
        if result.is_err() {
            if self.connected {
                out.push(Action::Disconnect {
                    peer: self.peer,
                    state: ConnState::NetworkFailure,
                    reason: "local flush failed: the written epochs are not durable".into(),
                });
                self.connected = false;
            }
            self.unflushed.clear();
            return;
        }
        self.ack_unflushed(group.covers, out);
        self.start_group_flush(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: u8 = 1;

    fn op(offset: u64, length: u64) -> DiskOp<()> {
        DiskOp::Write {
            offset,
            length,
            data: (),
            fua: false,
        }
    }

    fn peer_write(seq: u64) -> IoId {
        IoId::PeerWrite { peer: PEER, seq }
    }

    fn resync_write(id: u64) -> IoId {
        IoId::ResyncWrite { peer: PEER, id }
    }

    fn extent(offset: u64, length: u64) -> Extent {
        Extent::new(offset, length).expect("extent")
    }

    /// The local writes among `out`, drained.
    fn issued(out: &mut Vec<Action<()>>) -> Vec<IoId> {
        let ios = out
            .iter()
            .filter_map(|a| match a {
                Action::LocalWrite { io, .. } => Some(*io),
                _ => None,
            })
            .collect();
        out.clear();
        ios
    }

    fn connected() -> Receiver<()> {
        let mut rx = Receiver::new(PEER, false);
        rx.new_session();
        rx
    }

    fn data(rx: &mut Receiver<()>, seq: u64, epoch: u64, at: u64, out: &mut Vec<Action<()>>) {
        rx.data(
            seq,
            epoch,
            0,
            extent(at, 4096),
            op(at, 4096),
            Protocol::C,
            out,
        )
        .expect("in order");
    }

    #[test]
    fn writes_of_the_front_epoch_start_as_they_arrive() {
        let mut rx = connected();
        let mut out = Vec::new();
        data(&mut rx, 1, 1, 0, &mut out);
        data(&mut rx, 2, 1, 8192, &mut out);
        assert_eq!(issued(&mut out), vec![peer_write(1), peer_write(2)]);
    }

    #[test]
    fn a_later_epoch_waits_for_the_barrier_and_the_front_writes() {
        let mut rx = connected();
        let mut out = Vec::new();
        data(&mut rx, 1, 1, 0, &mut out);
        rx.barrier(1, false, &mut out).expect("in order");
        data(&mut rx, 2, 2, 8192, &mut out);
        assert_eq!(issued(&mut out), vec![peer_write(1)]);
        rx.write_done(1, Ok(()), &mut out);
        assert_eq!(issued(&mut out), vec![peer_write(2)]);
    }

    #[test]
    fn an_overlapping_write_waits_for_the_earlier_one_in_either_order() {
        // A resync reply first, then a replicated write over the same blocks.
        let mut rx = connected();
        let mut out = Vec::new();
        rx.resync(7, 0, extent(0, 8192), op(0, 8192), &mut out);
        data(&mut rx, 1, 1, 4096, &mut out);
        data(&mut rx, 2, 1, 65536, &mut out);
        assert_eq!(
            issued(&mut out),
            vec![resync_write(7), peer_write(2)],
            "the overlapping write is held, the other one is not"
        );
        rx.write_done(2, Ok(()), &mut out);
        assert_eq!(
            issued(&mut out),
            vec![],
            "an unrelated completion starts nothing"
        );
        assert_eq!(rx.resync_done(7, &mut out), Some((0, extent(0, 8192))));
        assert_eq!(issued(&mut out), vec![peer_write(1)]);

        // A replicated write first, then a resync reply over it.
        let mut rx = connected();
        data(&mut rx, 1, 1, 0, &mut out);
        rx.resync(8, 0, extent(0, 4096), op(0, 4096), &mut out);
        assert_eq!(issued(&mut out), vec![peer_write(1)]);
        rx.write_done(1, Ok(()), &mut out);
        assert_eq!(issued(&mut out), vec![resync_write(8)]);
    }
}
