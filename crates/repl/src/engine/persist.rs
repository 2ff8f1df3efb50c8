//! The engine's metadata: generation identifiers, disk state and primary indicator of each
//! volume, and how changes to them reach the disk.
//!
//! Invariants:
//! - Every change that must survive a crash bumps the volume's `MetaIo::version` and is
//!   written by an [`Action::PersistMeta`] carrying the whole [`VolumeMeta`]; at most one is
//!   in flight per volume, and a change made meanwhile is written by the next one, so the
//!   superblock is never overwritten by an older image.
//! - Nothing that relies on a change happens before `persisted >= version`: a client write
//!   that needed a new generation is not completed, a resync does not start.
//! - The Primary creates a new current generation before a write leaves a peer behind: on the
//!   first write while a peer with no bitmap identifier is absent, and at once when a peer is
//!   lost with writes it never confirmed (drbd-semantics.md §2).

use crate::engine::{replicates_to, BitmapPages, Engine, PeerStage};
use crate::state::{ConnState, DiskState, Role};
use crate::sync::SyncState;
use crate::types::{Action, IoError, IoId, StateError, Time, UuidsPurpose, VolumeMeta};
use crate::uuid::{NewCurrent, NodeSet};

/// Persistence bookkeeping of one volume's metadata.
#[derive(Debug, Default)]
pub(super) struct MetaIo {
    /// Bumped by every change.
    version: u64,
    /// The newest version known durable.
    persisted: u64,
    /// The `PersistMeta` in flight: its sequence number and the version it carries.
    in_flight: Option<(u64, u64)>,
    /// A metadata write failed: the metadata can no longer be trusted.
    pub(super) failed: bool,
    /// The departed peers ([`VolumeMeta::departed`]) in the newest `PersistMeta` issued.
    pub(super) departed_issued: NodeSet,
    /// ... in the one in flight.
    departed_in_flight: NodeSet,
    /// ... in the newest one durable (or as loaded).
    pub(super) departed_durable: NodeSet,
}

impl MetaIo {
    /// The bookkeeping of metadata as loaded, recording `departed`.
    pub(super) fn loaded(departed: NodeSet) -> MetaIo {
        MetaIo {
            departed_issued: departed,
            departed_durable: departed,
            ..MetaIo::default()
        }
    }
}

/// splitmix64: a full-period sequence of well-mixed values from a seed.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<P: Clone> Engine<P> {
    pub(super) fn next_random(&mut self) -> u64 {
        splitmix64(&mut self.random)
    }

    /// Records a change of volume `vslot`'s metadata and makes sure a write of it follows;
    /// returns the version that holds the change.
    pub(super) fn meta_changed(&mut self, vslot: usize, out: &mut Vec<Action<P>>) -> u64 {
        if self.volumes[vslot].disk == DiskState::Diskless {
            // No metadata to write: nothing waits for it (version 0 is always durable).
            out.push(Action::StateChanged);
            return 0;
        }
        let meta = &mut self.volumes[vslot].meta;
        meta.version += 1;
        let version = meta.version;
        if meta.in_flight.is_none() {
            self.issue_persist(vslot, out);
        }
        out.push(Action::StateChanged);
        version
    }

    fn issue_persist(&mut self, vslot: usize, out: &mut Vec<Action<P>>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let version = self.volumes[vslot].meta.version;
        self.volumes[vslot].meta.in_flight = Some((seq, version));
        let volume = self.volumes[vslot].number;
        let meta = self.volume_meta(vslot);
        let io = &mut self.volumes[vslot].meta;
        io.departed_issued = meta.departed;
        io.departed_in_flight = meta.departed;
        out.push(Action::PersistMeta {
            io: IoId::Meta { seq },
            volume,
            meta: Box::new(meta),
        });
    }

    /// Whether `version` of volume `vslot`'s metadata is durable (0 always is).
    pub(super) fn is_persisted(&self, vslot: usize, version: u64) -> bool {
        self.volumes
            .get(vslot)
            .is_none_or(|v| v.meta.persisted >= version)
    }

    /// The latest version of volume `vslot` not yet durable, or 0.
    fn unpersisted_version(&self, vslot: usize) -> u64 {
        let meta = &self.volumes[vslot].meta;
        if meta.version > meta.persisted {
            meta.version
        } else {
            0
        }
    }

    /// A `PersistMeta` finished.
    pub(super) fn persist_done(
        &mut self,
        now: Time,
        seq: u64,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(vslot) = self
            .volumes
            .iter()
            .position(|v| v.meta.in_flight.is_some_and(|(s, _)| s == seq))
        else {
            return;
        };
        let volume = &mut self.volumes[vslot];
        let Some((_, version)) = volume.meta.in_flight.take() else {
            return;
        };
        // A failed metadata write still releases what waited for it (writes complete with an
        // error), so nothing hangs; the disk is Failed from here on.
        volume.meta.persisted = version;
        volume.meta.departed_durable = volume.meta.departed_in_flight;
        // A detached volume's metadata is out of use until an attach writes it anew: the
        // failure of its last write (the record of a failed replicated write, `detach.rs`)
        // leaves it Diskless.
        if result.is_err() && volume.disk != DiskState::Diskless {
            volume.meta.failed = true;
            volume.disk = DiskState::Failed;
            out.push(Action::StateChanged);
        }
        if volume.meta.version > version {
            self.issue_persist(vslot, out);
        }
        let number = self.volumes[vslot].number;
        let waiting: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, w)| w.volume == number)
            .map(|(&s, _)| s)
            .collect();
        for seq in waiting {
            self.try_complete_write(now, seq, out);
        }
        for slot in 0..self.peers.len() {
            self.advance_starting(now, slot, vslot, out);
            self.send_stale_ack_if_durable(slot, out);
        }
        self.finish_leaving(now, out);
        self.send_held_handshakes(now, vslot, out);
    }

    fn volume_meta(&self, vslot: usize) -> VolumeMeta {
        let volume = &self.volumes[vslot];
        VolumeMeta {
            ids: volume.ids.clone(),
            disk: volume.disk,
            primary: self.role == Role::Primary,
            possibly_stale: volume.possibly_stale,
            departed: self.departed(vslot),
            followed: self.lost_primary,
        }
    }

    /// What the metadata of `volume` says now (what the last `PersistMeta` wrote, or will).
    pub fn meta(&self, volume: u16) -> Option<VolumeMeta> {
        Some(self.volume_meta(self.volume_slot(volume)?))
    }

    /// Takes the bitmap pages of `volume` for `peer` changed since they were last taken, and
    /// whether a bit was cleared in one of them ([`BitmapPages`]).
    ///
    /// The driver writes them (at the bitmap's offset in the metadata area) before every
    /// `PersistMeta`, on disconnect and on demotion (`StateChanged`), on clean shutdown, and
    /// periodically (every few seconds) while writes run with a peer away. Bits set by client
    /// writes and not yet written when the node crashes are covered by the activity log (their
    /// extents are hot until [`crate::Action::WriteActivityLog`] carries their pages) or,
    /// without one, by `crashed_primary` (a Primary resyncs everything after a crash).
    ///
    /// Pages must reach the disk in the order they are handed out (here and in
    /// `WriteActivityLog`): a page handed out earlier must be durable before a later
    /// activity-log block is written, and must never overwrite a later image of itself. With
    /// `clears`, the data disk's completed writes must be durable before the pages are written.
    pub fn take_dirty_bitmap_pages(&mut self, volume: u16, peer: u8) -> BitmapPages {
        let (Some(vslot), Some(slot)) = (self.volume_slot(volume), self.peer_slot(peer)) else {
            return BitmapPages::default();
        };
        let bitmap = &mut self.peers[slot].bitmaps[vslot];
        let clears = bitmap.has_cleared_pages();
        let pages: Vec<(u64, Vec<u8>)> = bitmap
            .take_dirty_pages()
            .map(|(page, image)| (page, image.to_vec()))
            .collect();
        let count = u64::try_from(pages.len()).unwrap_or(u64::MAX);
        let volume = &mut self.volumes[vslot];
        volume.bm_writes = volume.bm_writes.saturating_add(count);
        BitmapPages { pages, clears }
    }

    /// Peers a write would leave behind now.
    fn absent_peers(&self) -> NodeSet {
        self.peers
            .iter()
            .filter(|p| !replicates_to(p))
            .fold(NodeSet::EMPTY, |set, p| set.with(p.node))
    }

    /// Before a write as Primary: a new generation if an absent peer has no bitmap identifier
    /// yet. Returns the metadata version the write must wait for (0: none).
    pub(super) fn new_generation_if_needed(
        &mut self,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) -> u64 {
        let absent = self.absent_peers();
        let volume = &self.volumes[vslot];
        if absent
            .iter()
            .any(|peer| volume.ids.bitmap_uuid(peer) == 0 || volume.shared_with.contains(peer))
        {
            if self.defer_rotation(vslot) {
                return self.unpersisted_version(vslot);
            }
            self.new_generation(vslot, absent, out);
            self.announce_rotation(vslot, out);
        }
        self.unpersisted_version(vslot)
    }

    fn new_generation(
        &mut self,
        vslot: usize,
        absent_peers: NodeSet,
        out: &mut Vec<Action<P>>,
    ) -> u64 {
        let random = self.next_random();
        let change = NewCurrent {
            random,
            role: self.role,
            absent_peers,
        };
        let volume = &mut self.volumes[vslot];
        if self.role == Role::Primary && volume.unused_generation.is_none() {
            volume.unused_generation = Some(Box::new(volume.ids.clone()));
        }
        let left = volume.ids.current;
        self.volumes[vslot].ids.new_current(change);
        self.note_rotated_from(vslot, left);
        self.volumes[vslot].shared_with = self.present_peers();
        self.meta_changed(vslot, out)
    }

    /// Peers a write would reach now.
    fn present_peers(&self) -> NodeSet {
        self.peers
            .iter()
            .filter(|p| replicates_to(p))
            .fold(NodeSet::EMPTY, |set, p| set.with(p.node))
    }

    /// The peer in `slot` was lost while writes to it were unconfirmed (`drained` per volume).
    /// As Primary, a write still in flight that the peer had not settled now completes without
    /// it: that is a write made after the peer was cut off, so a new generation starts now
    /// (the bits carry a bitmap identifier) and those writes wait until it is durable, and
    /// until every other peer answered the rotation (`rotate.rs`).
    ///
    /// Writes the peer had settled and only its barrier ack was missing do not start one:
    /// their bits are kept, and with equal current identifiers the next handshake resyncs
    /// them (a bitmap resync). Rotating for them would turn a plain failover by link cut,
    /// with nothing written after it, into a split brain when this node returns; the next
    /// write rotates anyway (`new_generation_if_needed`), as DRBD does.
    pub(super) fn generation_after_loss(
        &mut self,
        slot: usize,
        drained: &[bool],
        out: &mut Vec<Action<P>>,
    ) {
        if self.role != Role::Primary {
            return;
        }
        let peer = self.peers[slot].node;
        for (vslot, _) in drained.iter().enumerate().filter(|(_, d)| **d) {
            let volume = &self.volumes[vslot];
            if volume.ids.bitmap_uuid(peer) != 0 && !volume.shared_with.contains(peer) {
                continue;
            }
            let number = volume.number;
            let unsettled = self.in_flight.values().any(|w| {
                w.volume == number
                    && !matches!(w.peers[slot], PeerStage::Skipped | PeerStage::Settled)
            });
            if !unsettled || self.defer_rotation(vslot) {
                continue;
            }
            let absent = self.absent_peers();
            let version = self.new_generation(vslot, absent, out);
            self.announce_rotation(vslot, out);
            // The writes the lost peer may lack also wait until every peer that has them
            // took the new generation (`rotate.rs`).
            let answers = self.rotation_answers_due();
            for write in self.in_flight.values_mut().filter(|w| w.volume == number) {
                write.meta_version = write.meta_version.max(version);
                if !matches!(write.peers[slot], PeerStage::Skipped | PeerStage::Settled) {
                    write.rotation_answers.clone_from(&answers);
                }
            }
        }
    }

    /// Whether the new generation a write or a loss calls for waits for quorum instead: a
    /// Primary under a quorum rule without quorum completes nothing, so no write is made
    /// without the lost peers until quorum returns, and the generation starts then
    /// ([`Engine::rotate_when_quorum_returns`]). Its local writes meanwhile are marked for the
    /// absent peers like any other. If it is demoted first (`secondary --force`, as a cluster
    /// manager does to a Primary cut off in a minority), none of them completed and its
    /// generation never moved: when it returns, the Primary that took over has counted
    /// changes for it from that very generation, so it is that Primary's bitmap target (its
    /// own bits OR-ed in), not a split brain. Rotating at the loss made every partition of a
    /// Primary with writes in flight a split brain (issue 24's torture trials).
    fn defer_rotation(&mut self, vslot: usize) -> bool {
        let deferred = self.quorum.rule != crate::QuorumRule::Off && !self.quorum_held;
        self.volumes[vslot].rotation_owed |= deferred;
        deferred
    }

    /// On demotion: a generation this Primary started that no write completed on and no peer
    /// took (it answered no Rotate, and no handshake carried it since) is taken back, so a
    /// Primary cut off in a minority with writes in flight (its first detected loss rotates
    /// while it still counts the other, unreachable Secondary; the second leaves it without
    /// quorum, and `secondary --force` fails every held write) returns on the generation the
    /// new Primary counted changes for it from: that Primary's bitmap target, its own
    /// unacknowledged blocks (marked for every absent peer) overwritten, not a split brain.
    /// Invariant: a generation is taken back only if no write completed on it and no peer
    /// answered its rotation or shook hands since, so no acknowledged write depends on it.
    /// A peer that took it without the answer arriving keeps the old generation in its
    /// history, so this node meets it as the target of a full resync, never as a split brain
    /// and never as a source.
    pub(super) fn revert_unused_generations(&mut self, out: &mut Vec<Action<P>>) {
        for vslot in 0..self.volumes.len() {
            let Some(before) = self.volumes[vslot].unused_generation.take() else {
                continue;
            };
            let volume = &mut self.volumes[vslot];
            volume.ids.current = before.current;
            volume.ids.bitmap = before.bitmap;
            volume.ids.history = before.history;
            volume.shared_with = NodeSet::ALL;
            self.meta_changed(vslot, out);
        }
    }

    /// A peer saw this node's generation (a Rotate answered, or a handshake): it is used.
    pub(super) fn generation_seen(&mut self, vslot: usize) {
        self.volumes[vslot].unused_generation = None;
    }

    /// Quorum returned to a Primary that owes a new generation: it starts now, and every write
    /// in flight on the volume waits until it is durable and every peer it reaches answered
    /// the rotation, as at a loss (`generation_after_loss`).
    pub(super) fn rotate_when_quorum_returns(&mut self, out: &mut Vec<Action<P>>) {
        for vslot in 0..self.volumes.len() {
            if !std::mem::take(&mut self.volumes[vslot].rotation_owed) || self.role != Role::Primary
            {
                continue;
            }
            let absent = self.absent_peers();
            let version = self.new_generation(vslot, absent, out);
            self.announce_rotation(vslot, out);
            let answers = self.rotation_answers_due();
            let number = self.volumes[vslot].number;
            for write in self.in_flight.values_mut().filter(|w| w.volume == number) {
                write.meta_version = write.meta_version.max(version);
                write.rotation_answers.clone_from(&answers);
            }
        }
    }

    /// On promotion: any peer may hold the current generation now, whatever this node saw.
    ///
    /// Invariant: `shared_with` names every node that may hold data of the current
    /// generation. It grows only with what this node sees (its own handshakes and resyncs),
    /// but a generation also spreads between other nodes: a Secondary that shares it may
    /// resync it to a third node, which is allowed while no Primary is near, and a Secondary
    /// is no Primary. So the record a Secondary kept does not bind the Primary it becomes:
    /// its first write with a peer away starts a new generation, and a Secondary that took
    /// the old one from a third node and is no longer reached by this Primary is left behind
    /// (`rotate.rs`) instead of staying UpToDate on this Primary's generation without its
    /// writes (sim seed 3427: node 2, a sync target of node 1, then resynced node 0; node 1
    /// was promoted while apart from node 0 and wrote on the generation node 0 now held,
    /// since its bitmap identifier for node 0 was older; node 0 was promoted after node 1
    /// crashed, without node 1's writes).
    pub(super) fn distrust_shared_with(&mut self, vslot: usize) {
        self.volumes[vslot].shared_with = NodeSet::ALL;
    }

    /// On promotion: mark the current generation as made by a Primary, but only if no peer is
    /// away (otherwise the first write's new generation carries the mark).
    pub(super) fn mark_role_if_all_present(&mut self, vslot: usize) {
        if self.absent_peers() == NodeSet::EMPTY {
            self.volumes[vslot].ids.mark_role(Role::Primary);
        }
    }

    /// `primary --force` on a disk that is not UpToDate: it becomes UpToDate with a new
    /// generation, and connected peers get a new handshake (which makes us their source).
    pub(super) fn force_up_to_date(&mut self, vslot: usize, out: &mut Vec<Action<P>>) {
        self.volumes[vslot].disk = DiskState::UpToDate;
        let absent = self.absent_peers();
        self.new_generation(vslot, absent, out);
        self.rehandshake(vslot, out);
    }

    /// Sends a new handshake for `vslot` to every connected peer that is Established.
    pub(super) fn rehandshake(&mut self, vslot: usize, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            let p = &self.peers[slot];
            if p.connection == ConnState::Connected
                && matches!(p.syncs[vslot], SyncState::Established)
            {
                self.send_handshake(slot, vslot, out);
            }
        }
    }

    /// `new-current-uuid [--clear-bitmap]` (drbd-semantics.md §3): a new current generation
    /// on every volume. With `clear_bitmap` (the initial sync of empty disks skipped), the
    /// bitmaps of connected peers are cleared, the disk becomes UpToDate, and connected peers
    /// adopt the identifiers and become UpToDate too. Without it, connected peers get a new
    /// handshake (a full resync from here). Refused while a handshake or resync runs.
    pub fn new_current_uuid(
        &mut self,
        clear_bitmap: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        self.refuse_if_syncing()?;
        self.refuse_if_diskless()?;
        for vslot in 0..self.volumes.len() {
            let absent = self.absent_peers();
            if !clear_bitmap {
                self.new_generation(vslot, absent, out);
                self.rehandshake(vslot, out);
                continue;
            }
            let random = self.next_random();
            self.volumes[vslot].ids.new_current(NewCurrent {
                random,
                role: self.role,
                absent_peers: absent,
            });
            self.volumes[vslot].disk = DiskState::UpToDate;
            for slot in 0..self.peers.len() {
                let diskless = self.peers[slot].disks[vslot] == DiskState::Diskless;
                if self.peers[slot].connection == ConnState::Connected && !diskless {
                    self.peers[slot].bitmaps[vslot].clear_all();
                    self.peers[slot].disks[vslot] = DiskState::UpToDate;
                    self.send_uuids(slot, vslot, UuidsPurpose::Adopt, out);
                }
            }
            self.meta_changed(vslot, out);
        }
        Ok(())
    }

    /// `invalidate`: this node's data is discarded and fully resynced from a connected peer
    /// with UpToDate data. The disk becomes Inconsistent at once and the current identifier
    /// becomes "just created", so the next handshake (sent now) makes this node the target of
    /// a full sync. Refused on a Primary, while a handshake or resync runs, and without a
    /// connected UpToDate peer (there would be nothing to resync from).
    pub fn invalidate(&mut self, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        if self.role == Role::Primary {
            return Err(StateError::IsPrimary);
        }
        self.refuse_if_syncing()?;
        self.refuse_if_diskless()?;
        for vslot in 0..self.volumes.len() {
            let source = self.peers.iter().any(|p| {
                p.connection == ConnState::Connected && p.disks[vslot] == DiskState::UpToDate
            });
            if !source {
                return Err(StateError::NoSyncSource);
            }
        }
        for vslot in 0..self.volumes.len() {
            let volume = &mut self.volumes[vslot];
            volume.disk = DiskState::Inconsistent;
            volume.ids.current = crate::uuid::UUID_JUST_CREATED;
            self.meta_changed(vslot, out);
            self.rehandshake(vslot, out);
        }
        Ok(())
    }

    /// `invalidate-remote`: `peer`'s data is discarded and fully resynced from this node.
    /// Every block is marked out of sync for it (made durable with the next metadata write,
    /// before the resync starts), and a new handshake makes this node its sync source. Refused
    /// unless this disk is UpToDate and the peer is connected and not Primary, and while a
    /// handshake or resync runs.
    pub fn invalidate_remote(
        &mut self,
        peer: u8,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        if let Some(disk) = self
            .volumes
            .iter()
            .map(|v| v.disk)
            .find(|d| *d != DiskState::UpToDate)
        {
            return Err(StateError::NotUpToDate(disk));
        }
        let p = &self.peers[slot];
        if p.connection != ConnState::Connected {
            return Err(StateError::PeerNotConnected {
                peer: p.config.name.clone(),
            });
        }
        if p.role == Role::Primary {
            return Err(StateError::PeerIsPrimary {
                peer: p.config.name.clone(),
            });
        }
        self.refuse_if_syncing()?;
        for vslot in 0..self.volumes.len() {
            self.peers[slot].bitmaps[vslot].set_all();
            self.meta_changed(vslot, out);
            self.send_handshake(slot, vslot, out);
        }
        Ok(())
    }

    /// Refuses an administrative change while a handshake or resync runs with any peer.
    pub(super) fn refuse_if_syncing(&self) -> Result<(), StateError> {
        let busy = self.peers.iter().find(|p| {
            p.connection == ConnState::Connected
                && p.syncs.iter().any(|s| !matches!(s, SyncState::Established))
        });
        match busy {
            Some(peer) => Err(StateError::SyncInProgress {
                peer: peer.config.name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// `connect --discard-my-data`: this node loses the next split-brain resolution with
    /// `peer` (the flag is sent with the next handshake, then cleared).
    pub fn set_discard_my_data(&mut self, peer: u8) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        self.peers[slot].discard_my_data = true;
        Ok(())
    }
}
