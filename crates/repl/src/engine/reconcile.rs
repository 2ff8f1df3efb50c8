//! Reconciliation after a lost Primary: the Secondaries it fed resync among themselves the
//! writes that may have reached some of them and not others (DRBD 9 does the same after a
//! Primary is lost, and learns what to resync from its peer acks; docs/LINEAGE.md).
//!
//! A Primary sends each write to every Secondary at once; when it dies, each Secondary holds
//! some prefix of its epochs plus part of the last ones, and two Secondaries on the same
//! generation may differ in exactly the writes of those unsettled epochs. No generation tells
//! them apart (the Primary never rotated), so without this they would both stay UpToDate and
//! differ for ever.
//!
//! - **Peer acks.** A Primary tells its peers which epochs every peer it replicates to has
//!   barrier-acknowledged ([`PeerMessage::PeerAck`]): every [`PEER_ACK_EVERY_EPOCHS`]
//!   epochs, and at each tick once writes pause. A peer that connects counts as having
//!   acknowledged every epoch closed before (it got none of their writes; the Primary's bitmap
//!   for it holds them). The ack names the nodes that hold those writes (the Primary and the
//!   peers it replicated them to), and the receiver marks them for each of its other peers
//!   not named: a third node cut off from the Primary alone, or still in its handshake with
//!   the receiver, lacks them, and once the Primary is gone no other record says so.
//! - **Unsettled writes.** A Secondary with another peer records the range of every
//!   replicated write it receives, by its Primary's epoch, until a peer ack covers that epoch.
//!   The record is bounded ([`UNSETTLED_EXTENTS_MAX`] ranges per peer and volume); past the
//!   bound it says "everything" instead.
//! - **Loss.** When the connection to the peer whose writes are recorded ends, the recorded
//!   ranges are marked in this node's bitmaps of every other peer, and each other connected
//!   Secondary that is UpToDate, as this node is, is asked for a new handshake (or,
//!   mid-handshake or mid-resync, the connection is dropped and retried; a side that is not
//!   UpToDate is resynced anyway, and the bits join that resync), so the bitmap rules resync
//!   them: with equal generations the side
//!   with bits is the source (both: the lower node id). Each Secondary marks the writes it
//!   applied; the resync moves the union.
//! - **Waiting for the other side.** A Secondary that still follows the Primary (its handshake
//!   says `primary_peer`) facing one that lost it and holds bits for it: the two stay
//!   connected (they lend each other quorum) without a resync and keep their bits, and the
//!   one that still follows owes the other a new handshake once it follows no Primary either
//!   (`reconcile_owed`), which resyncs them. Forgetting the bits, as two Secondaries fed by a
//!   Primary do, would lose them when that Primary was in fact dead; dropping the link until
//!   then cost both their quorum for a `connect-int`.
//!
//! Invariant: two Secondaries fed by one Primary on one generation differ only in writes of
//! epochs that some peer ack has not covered, and each of them records every such write it
//! received until its Primary's connection ends, when the records become bitmap bits.
//! So no pair of them is UpToDate and Established with different data once the Primary is
//! gone: the handshake that follows the marking decides a resync first.
//!
//! Limitations:
//! - Peer acks are per epoch, not per write as DRBD's, and serve only this reconciliation: a
//!   Secondary whose generation a new one left behind is resynced in full when it returns.
//! - A reconciliation waits while one side still follows the lost Primary (until its
//!   `ping-timeout` notices the loss), and `promote` is refused meanwhile: a failover is delayed
//!   by that much.

use std::collections::BTreeMap;

use crate::engine::{mark, replicates_to, Engine};
use crate::extent::Extent;
use crate::state::{ConnState, DiskState, Role};
use crate::sync::SyncState;
use crate::types::{Action, Followed, PeerMessage, Time};

/// A Primary announces its settled epoch at least every this many epochs while writing.
pub const PEER_ACK_EVERY_EPOCHS: u64 = 32;

/// Most recorded ranges per peer and volume; past it the record means every block.
pub const UNSETTLED_EXTENTS_MAX: usize = 1 << 16;

/// The replicated writes received from one peer for one volume that no peer ack covers yet.
#[derive(Debug, Default)]
pub(super) struct Unsettled {
    by_epoch: BTreeMap<u64, Vec<Extent>>,
    ranges: usize,
    /// More than [`UNSETTLED_EXTENTS_MAX`] ranges were recorded: every block counts.
    overflowed: bool,
}

impl Unsettled {
    fn note(&mut self, epoch: u64, extent: Extent) {
        if self.overflowed {
            return;
        }
        if self.ranges >= UNSETTLED_EXTENTS_MAX {
            self.by_epoch.clear();
            self.ranges = 0;
            self.overflowed = true;
            return;
        }
        self.by_epoch.entry(epoch).or_default().push(extent);
        self.ranges += 1;
    }

    /// Forgets the writes of `epoch` and every earlier one, and returns them. An overflowed
    /// record stays one until the connection ends: which of its writes were settled is not
    /// known.
    fn settle(&mut self, epoch: u64) -> BTreeMap<u64, Vec<Extent>> {
        let later = self.by_epoch.split_off(&epoch.saturating_add(1));
        let settled = std::mem::replace(&mut self.by_epoch, later);
        self.ranges -= settled.values().map(Vec::len).sum::<usize>();
        settled
    }

    fn is_empty(&self) -> bool {
        !self.overflowed && self.ranges == 0
    }

    /// The record, emptied.
    fn take(&mut self) -> Unsettled {
        std::mem::take(self)
    }
}

impl<P: Clone> Engine<P> {
    /// Secondary: a replicated write of `epoch` from the peer in `slot`. Recorded only when
    /// there is another peer to reconcile with.
    pub(super) fn note_unsettled(&mut self, slot: usize, vslot: usize, epoch: u64, extent: Extent) {
        if self.peers.len() > 1 {
            self.peers[slot].unsettled[vslot].note(epoch, extent);
        }
    }

    /// What a handshake to the peer in `slot` says this node followed: the Primary that feeds
    /// it now (another peer), or else the one it lost last.
    pub(super) fn followed(&self, slot: usize) -> Option<Followed> {
        let feeding = self.peers.iter().enumerate().find(|(other, p)| {
            *other != slot && p.connection == ConnState::Connected && p.role == Role::Primary
        });
        match feeding {
            Some((_, p)) => Some(Followed {
                node: p.config.node_id,
                seq: p.last_seq,
            }),
            None => self.lost_primary,
        }
    }

    /// Secondary: the peer in `slot` says the epochs up to `epoch` are on the nodes in
    /// `nodes` (bit `n` for node id `n`). Their writes are marked for every other peer not
    /// among them: it was away from that Primary (or still in its handshake with us), and
    /// nothing else records that it lacks them once the Primary is gone.
    /// A node promoted meanwhile may still get one from the peer it followed.
    pub(super) fn receive_peer_ack(
        &mut self,
        now: Time,
        slot: usize,
        epoch: u64,
        nodes: u32,
        out: &mut Vec<Action<P>>,
    ) {
        for vslot in 0..self.volumes.len() {
            let settled = self.peers[slot].unsettled[vslot].settle(epoch);
            if settled.is_empty() || self.volumes[vslot].disk == DiskState::Diskless {
                continue;
            }
            let mut marked = false;
            for (other, p) in self.peers.iter_mut().enumerate() {
                let holds = nodes
                    .checked_shr(u32::from(p.config.node_id))
                    .is_some_and(|bits| bits & 1 == 1);
                if other == slot || holds || p.bitmap_free[vslot] {
                    continue;
                }
                settled
                    .values()
                    .flatten()
                    .for_each(|&extent| mark(&mut p.bitmaps[vslot], extent));
                marked = true;
            }
            if marked {
                self.meta_changed(vslot, out);
            }
        }
        self.unpin(now, slot, Some(epoch), out);
    }

    /// Primary: the peer in `slot` acknowledged the barrier of `epoch`.
    pub(super) fn note_barrier_ack(&mut self, slot: usize, epoch: u64, out: &mut Vec<Action<P>>) {
        let p = &mut self.peers[slot];
        p.acked_epoch = p.acked_epoch.max(epoch);
        self.announce_settled(false, out);
    }

    /// A peer connected: it counts as having acknowledged every epoch closed so far, and
    /// nothing it sent earlier is recorded any more (that was dealt with at the loss).
    pub(super) fn reset_settled_on_connect(&mut self, slot: usize) {
        let closed = self.epoch.saturating_sub(1);
        let p = &mut self.peers[slot];
        p.acked_epoch = closed;
        p.unsettled
            .iter_mut()
            .for_each(|u| *u = Unsettled::default());
        p.reconcile_owed.fill(false);
    }

    /// Primary: tells the connected peers the newest epoch all of them acknowledged, when it
    /// moved by [`PEER_ACK_EVERY_EPOCHS`], or at all when `idle` (a tick).
    /// A node that demoted goes on until its last epoch is settled (`peer_ack_owed`).
    pub(super) fn announce_settled(&mut self, idle: bool, out: &mut Vec<Action<P>>) {
        if self.role != Role::Primary && !self.peer_ack_owed {
            return;
        }
        let connected = || {
            self.peers
                .iter()
                .filter(|p| p.connection == ConnState::Connected)
        };
        let Some(settled) = connected().map(|p| p.acked_epoch).min() else {
            return;
        };
        // The peers that got every write since they connected (a peer Ahead, or Diskless,
        // was skipped and is left out; one that connected since got none of the earlier
        // epochs, which this node's bitmap holds for it, and is resynced from here).
        let nodes = connected()
            .filter(|p| replicates_to(p))
            .fold(node_bit(self.node_id), |mask, p| {
                mask | node_bit(p.config.node_id)
            });
        let sent = self.peer_ack_sent;
        let due = if idle {
            settled > sent
        } else {
            settled >= sent.saturating_add(PEER_ACK_EVERY_EPOCHS)
        };
        if !due {
            return;
        }
        for p in connected() {
            out.push(Action::SendControl {
                peer: p.config.node_id,
                message: PeerMessage::PeerAck {
                    epoch: settled,
                    nodes,
                },
            });
        }
        self.peer_ack_sent = settled;
        if self.role != Role::Primary && settled >= self.epoch.saturating_sub(1) {
            self.peer_ack_owed = false;
        }
    }

    /// The connection to the peer in `slot` ended: the writes received from it that no peer
    /// ack covered are marked for every other peer, and each other connected Secondary gets a
    /// new handshake so that they resync them (see the module documentation).
    pub(super) fn reconcile_after_loss(
        &mut self,
        now: Time,
        slot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let mut marked = Vec::new();
        for vslot in 0..self.volumes.len() {
            let record = self.peers[slot].unsettled[vslot].take();
            if record.is_empty() || self.volumes[vslot].disk == DiskState::Diskless {
                continue;
            }
            for (other, p) in self.peers.iter_mut().enumerate() {
                if other == slot || p.bitmap_free[vslot] {
                    continue;
                }
                let bitmap = &mut p.bitmaps[vslot];
                if record.overflowed {
                    bitmap.set_all();
                } else {
                    record
                        .by_epoch
                        .values()
                        .flatten()
                        .for_each(|&extent| mark(bitmap, extent));
                }
            }
            self.meta_changed(vslot, out);
            marked.push(vslot);
        }
        self.peers[slot].reconcile_owed.fill(false);
        let lost = self.peers[slot].config.name.clone();
        for other in 0..self.peers.len() {
            let p = &self.peers[other];
            if other == slot || p.connection != ConnState::Connected || p.role == Role::Primary {
                continue;
            }
            // Only two UpToDate copies can be taken for each other; a side that is not is
            // resynced anyway, and the bits join that resync at its handshake. A peer that
            // lost the Primary first and holds bits for this node is owed a new handshake
            // once this node follows no Primary either.
            let up_to_date = |vslot: usize| {
                self.volumes[vslot].disk == DiskState::UpToDate
                    && p.disks[vslot] == DiskState::UpToDate
            };
            let owed = |vslot: usize| p.reconcile_owed[vslot] && !self.fed_by_primary(other, vslot);
            let volumes: Vec<usize> = (0..self.volumes.len())
                .filter(|&vslot| owed(vslot) || (marked.contains(&vslot) && up_to_date(vslot)))
                .collect();
            if volumes.is_empty() {
                continue;
            }
            volumes
                .iter()
                .for_each(|&vslot| self.peers[other].reconcile_owed[vslot] = false);
            let p = &self.peers[other];
            let established = volumes
                .iter()
                .all(|&vslot| matches!(p.syncs[vslot], SyncState::Established));
            if established {
                volumes
                    .iter()
                    .for_each(|&vslot| self.send_handshake(other, vslot, out));
            } else {
                let reason =
                    format!("reconciling the writes of {lost}, which is gone, by a new handshake");
                self.drop_peer(now, other, ConnState::Unconnected, reason, out);
            }
        }
    }
}

/// Bit `n` of a peer ack's node set, for node id `n` (node ids are at most 31).
fn node_bit(node: u8) -> u32 {
    1_u32.checked_shl(u32::from(node)).unwrap_or(0)
}
