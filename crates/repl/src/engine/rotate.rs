//! Generations with more than one Secondary (drbd-semantics.md §2): the Primary's new
//! generations reach the Secondaries it replicates to, and each Secondary keeps bitmaps for
//! its own absent peers, so two Secondaries never resync between themselves over writes a
//! Primary is feeding to both.
//!
//! - **Rotation.** A Primary that starts a new generation (a peer went away) sends its new
//!   identifiers ([`UuidsPurpose::Rotate`]) to every peer it replicates to, on the data socket,
//!   before any write of the new generation. A Secondary Established with it and UpToDate makes
//!   the new current its own ([`crate::GenerationIds::adopt_current`]): its old current goes to
//!   the bitmap slots of its own absent peers. A sync target of that Primary takes the new
//!   identifiers as the ones it adopts when the resync is done, and records the generation
//!   the Primary left as an ancestor of its data (history). An Outdated or Consistent
//!   Secondary Established with it starts a new handshake with it, so that it is resynced
//!   (it may lack writes of an earlier Primary that nobody counted for it). Anyone else
//!   ignores it.
//! - **Bits on a Secondary.** A replicated or resync write applied on a Secondary is marked in its
//!   bitmap of every peer not connected to it, as a Primary marks its absent peers: if that
//!   peer later meets this node first, the bitmap rules move exactly those blocks.
//! - **Fed by a Primary.** A handshake says whether its sender is Established with a
//!   connected Primary (a third node; [`crate::GenerationFlags::primary_peer`]). Two
//!   Secondaries with equal generations of which either is fed by a Primary connect without a
//!   resync and clear their bits for each other: the Primary's writes reach both (or its own
//!   bitmap keeps what one misses), and a resync between them would race those writes, since
//!   the ordering rules of `resync.rs` hold only when the source is the writer.
//!
//! - **Answered rotations.** Every Rotate from a Primary is answered ([`UuidsPurpose::RotateSeen`],
//!   on the data socket, after the receiver processed it). When a Primary rotates because a
//!   peer was lost with writes in flight, those writes complete only once every other peer
//!   they reached answered (or was lost too). Without that, a Primary that crashed right
//!   after completing them could leave two Secondaries with equal generations, one holding
//!   the writes and one (the peer it lost) without them, and neither would know: DRBD's
//!   peer acks carry this knowledge; here the new generation does (the holder's is newer).
//!
//! - **Left behind.** A Secondary that reaches no Primary while a connected peer's identifiers
//!   descend from its current (the Primary went on without it) outdates itself durably and
//!   reconnects to be resynced (`outdate_if_left_behind`). A sync target tells its other
//!   Secondaries its identifiers when its resync starts and when its source rotates, so one
//!   left on a generation the source has left finds out.
//! - **Stranded.** A sync target cut off from its source while Established with an UpToDate
//!   Primary (which keeps no bits for it) drops that link, and the Primary's handshake
//!   resyncs it (`resync_stranded_from_primary`).
//!
//! Invariant: a Secondary changes its current identifier only by a handshake's resync
//! (sync start, adoption at the end) or by a Rotate from the Primary it is Established with.

use crate::engine::{mark, Engine, InFlight};
use crate::extent::Extent;
use crate::state::{ConnState, DiskState, Role};
use crate::sync::SyncState;
use crate::types::{Action, Time, UuidsMessage, UuidsPurpose};
use crate::uuid::NodeSet;

/// Rotations sent to one peer, and its answers, in the current connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct RotationCount {
    sent: u64,
    answered: u64,
}

impl<P: Clone> Engine<P> {
    /// After a new generation as Primary: the peers it replicates to get the new identifiers.
    pub(super) fn announce_rotation(&mut self, vslot: usize, out: &mut Vec<Action<P>>) {
        if self.role != Role::Primary {
            return;
        }
        for slot in 0..self.peers.len() {
            if super::replicates_to(&self.peers[slot]) {
                self.send_uuids(slot, vslot, UuidsPurpose::Rotate, out);
                self.peers[slot].rotations.sent += 1;
            }
        }
    }

    /// A new generation as Primary left `left`: each peer it replicates to that answered
    /// every earlier rotation is on `left` until it answers the next one.
    pub(super) fn note_rotated_from(&mut self, vslot: usize, left: u64) {
        for p in self.peers.iter_mut().filter(|p| super::replicates_to(p)) {
            if p.rotations.answered == p.rotations.sent && p.rotated_from[vslot] == 0 {
                p.rotated_from[vslot] = left;
            }
        }
    }

    /// The peer in `slot` is lost owing an answer to a rotation: it may still be on the
    /// generation this node left, which a bitmap identifier then names (sim seed 18318: a
    /// Secondary cut off before a Rotate reached it came back on the old current, which this
    /// node's identifiers no longer named, and the two found their data unrelated). The
    /// writes it had not confirmed are bits already (`peer_disconnected`).
    pub(super) fn keep_unanswered_generation(&mut self, slot: usize, out: &mut Vec<Action<P>>) {
        let peer = self.peers[slot].node;
        let unanswered = self.peers[slot].rotations.answered < self.peers[slot].rotations.sent;
        for vslot in 0..self.volumes.len() {
            let left = std::mem::take(&mut self.peers[slot].rotated_from[vslot]);
            if !unanswered || left == 0 || self.volumes[vslot].ids.bitmap_uuid(peer) != 0 {
                continue;
            }
            self.volumes[vslot].ids.keep_bitmap_uuid(peer, left);
            self.meta_changed(vslot, out);
        }
    }

    /// What a write must wait for so that every peer it reaches has answered the rotations
    /// sent so far: (peer slot, rotations sent) for each peer owing an answer.
    pub(super) fn rotation_answers_due(&self) -> Vec<(usize, u64)> {
        (0..self.peers.len())
            .filter(|&slot| super::replicates_to(&self.peers[slot]))
            .map(|slot| (slot, self.peers[slot].rotations.sent))
            .filter(|&(slot, sent)| self.peers[slot].rotations.answered < sent)
            .collect()
    }

    /// Whether every peer `write` waits on has answered the rotations it must.
    pub(super) fn rotations_answered(&self, write: &InFlight) -> bool {
        write
            .rotation_answers
            .iter()
            .all(|&(slot, due)| self.peers[slot].rotations.answered >= due)
    }

    /// A peer that owed answers is gone: writes stop waiting for them (they wait for quorum
    /// as any write does).
    pub(super) fn stop_waiting_for_rotation_answers(
        &mut self,
        now: Time,
        slot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        self.peers[slot].rotations = RotationCount::default();
        let mut ready = Vec::new();
        for (&seq, write) in &mut self.in_flight {
            let before = write.rotation_answers.len();
            write
                .rotation_answers
                .retain(|&(waits_on, _)| waits_on != slot);
            if write.rotation_answers.len() != before {
                ready.push(seq);
            }
        }
        for seq in ready {
            self.try_complete_write(now, seq, out);
        }
    }

    /// A peer answered a rotation: writes that waited for it may complete.
    pub(super) fn rotation_answered(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        let count = &mut self.peers[slot].rotations;
        if count.answered >= count.sent {
            // Not one we asked for (an old connection's, or a confused peer's): ignored.
            return;
        }
        count.answered += 1;
        let answered = count.answered;
        if answered == count.sent {
            self.peers[slot].rotated_from.fill(0);
        }
        let ready: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, w)| {
                w.rotation_answers
                    .iter()
                    .any(|&(waits_on, due)| waits_on == slot && due == answered)
            })
            .map(|(&seq, _)| seq)
            .collect();
        for seq in ready {
            self.try_complete_write(now, seq, out);
        }
    }

    /// A Rotate from the peer in `slot` (see the module comment).
    pub(super) fn receive_rotation(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        message: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        if message.role != Role::Primary {
            // A Secondary peer's notice that it took its Primary's new generation.
            self.outdate_if_left_behind(now, out);
            return;
        }
        // Answered whatever becomes of it, after it took effect (the answer follows on the
        // same socket as anything it sends meanwhile).
        self.receive_primary_rotation(slot, vslot, message, out);
        self.send_uuids(slot, vslot, UuidsPurpose::RotateSeen, out);
    }

    fn receive_primary_rotation(
        &mut self,
        slot: usize,
        vslot: usize,
        message: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        if self.role == Role::Primary {
            return;
        }
        let target = match &mut self.peers[slot].syncs[vslot] {
            SyncState::Target(target) => {
                *target.source_ids = message.ids.clone();
                true
            }
            SyncState::StartingTarget(starting) => match &mut starting.source_ids {
                Some(ids) => {
                    **ids = message.ids.clone();
                    true
                }
                None => return,
            },
            SyncState::Established => false,
            _ => return,
        };
        if target {
            self.learn_source_ancestors(vslot, message, out);
            // Our identifiers now descend from the generation the source left: a Secondary
            // connected to us that is still on it is left behind once it reaches no Primary.
            self.tell_secondaries_of_new_generation(slot, vslot, out);
            return;
        }
        if matches!(
            self.volumes[vslot].disk,
            DiskState::Outdated | DiskState::Consistent
        ) {
            // Behind this Primary by more than its writes: see `resync_outdated_from_primary`.
            self.send_handshake(slot, vslot, out);
            return;
        }
        if self.volumes[vslot].disk != DiskState::UpToDate {
            return;
        }
        let absent = self
            .peers
            .iter()
            .filter(|p| p.connection != ConnState::Connected)
            .fold(NodeSet::EMPTY, |set, p| set.with(p.node));
        let before = self.volumes[vslot].ids.clone();
        let volume = &mut self.volumes[vslot];
        volume.ids.adopt_current(message.ids.current, absent);
        // Anyone may hold the new generation now: as a later Primary, rotate before writing
        // while any peer is away.
        volume.shared_with = NodeSet::ALL;
        // An absent peer that gets a bitmap identifier now left during the old generation,
        // maybe before this node noticed: our bits for it may miss writes from that window.
        self.bits_for_adopted_bitmap_uuids(slot, vslot, &before);
        self.meta_changed(vslot, out);
        // The other Secondaries hear it: one that no longer reaches this Primary is behind.
        self.tell_secondaries_of_new_generation(slot, vslot, out);
    }

    /// This Secondary's generation moved on through the peer in `from` (its Primary's
    /// rotation, or the end of a resync from it): the other connected Secondaries hear it
    /// (a Secondary-role Rotate), so that one left behind outdates itself.
    pub(super) fn tell_secondaries_of_new_generation(
        &mut self,
        from: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        for other in 0..self.peers.len() {
            let p = &self.peers[other];
            if other != from
                && p.connection == ConnState::Connected
                && p.role != Role::Primary
                && matches!(p.syncs[vslot], SyncState::Established)
            {
                self.send_uuids(other, vslot, UuidsPurpose::Rotate, out);
            }
        }
    }

    /// Left behind (DRBD 9 outdates such a node too): a Secondary with an UpToDate disk that
    /// is connected to no Primary, while a connected peer's generation descends from ours (a
    /// Primary went on with that peer without us: our generation is among the peer's
    /// ancestors, and our disk lacks the writes since). Without this, two Secondaries that
    /// stayed connected while the Primary lost one of them never compare generations again,
    /// and the one left behind could be promoted with quorum without the Primary's later
    /// writes. The disk becomes Outdated (durably), and the link to that peer is dropped so
    /// that the reconnect's handshake resyncs it (or the Primary does, if one is near).
    pub(super) fn outdate_if_left_behind(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        if self.role != Role::Secondary
            || self
                .peers
                .iter()
                .any(|p| p.connection == ConnState::Connected && p.role == Role::Primary)
        {
            return;
        }
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk != DiskState::UpToDate {
                continue;
            }
            let ours = self.volumes[vslot].ids.current;
            // Established: a handshake that already decided a resync from that peer is left
            // to run.
            let ahead = self.peers.iter().position(|p| {
                p.connection == ConnState::Connected
                    && matches!(p.syncs[vslot], SyncState::Established)
                    && p.known_ids[vslot]
                        .as_ref()
                        .is_some_and(|theirs| theirs.descends_from(ours))
            });
            let Some(slot) = ahead else { continue };
            self.volumes[vslot].disk = DiskState::Outdated;
            self.meta_changed(vslot, out);
            self.announce_disks(out);
            self.update_quorum(now, out);
            out.push(Action::StateChanged);
            let name = self.peers[slot].config.name.clone();
            let reason = format!(
                "{name} went on to a newer generation without this node, which is Outdated now: \
                 reconnecting to resync"
            );
            self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
        }
    }

    /// A sync target's source moved to a new generation: the one it left is an ancestor of
    /// the data this node receives ([`crate::GenerationIds::learn_source_ancestors`]).
    fn learn_source_ancestors(
        &mut self,
        vslot: usize,
        message: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        let before = self.volumes[vslot].ids.history;
        self.volumes[vslot].ids.learn_source_ancestors(&message.ids);
        if self.volumes[vslot].ids.history != before {
            self.meta_changed(vslot, out);
        }
    }

    /// Stranded: an Inconsistent Secondary (its resync as target was cut off) that is
    /// Established with an UpToDate Primary is resynced by nobody: the Primary keeps no bits
    /// for it (they were Established already), and a resync between Secondaries waits while
    /// a Primary is near. It drops the link to that Primary, whose handshake then makes it
    /// the target (a full resync when nothing else relates them).
    pub(super) fn resync_stranded_from_primary(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        if self.role != Role::Secondary {
            return;
        }
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk != DiskState::Inconsistent {
                continue;
            }
            let resyncing = self
                .peers
                .iter()
                .any(|p| !matches!(p.syncs[vslot], SyncState::Off | SyncState::Established));
            if resyncing {
                continue;
            }
            let primary = self.peers.iter().position(|p| {
                p.connection == ConnState::Connected
                    && p.role == Role::Primary
                    && p.disks[vslot] == DiskState::UpToDate
                    && matches!(p.syncs[vslot], SyncState::Established)
            });
            let Some(slot) = primary else { continue };
            let reason = "this node's disk is Inconsistent and no resync brings it back: \
                reconnecting to the Primary to resync"
                .to_string();
            self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
        }
    }

    /// An Outdated (or Consistent) Secondary Established with an UpToDate Primary, which
    /// just announced its role, starts a new handshake with it. Such a node may lack writes
    /// nobody counted for it (it left an earlier Primary, or lost quorum, and stayed
    /// connected to the node promoted since): nothing adopts a generation for it and no
    /// bitmap covers the difference, so without a handshake nothing would ever resync it
    /// while the link stays up. The handshake decides what to move (in full by the history
    /// rule when no bitmap covers it; nothing when the generations are still equal).
    pub(super) fn resync_outdated_from_primary(
        &mut self,
        primary: usize,
        out: &mut Vec<Action<P>>,
    ) {
        if self.role != Role::Secondary {
            return;
        }
        for vslot in 0..self.volumes.len() {
            let p = &self.peers[primary];
            let behind = matches!(
                self.volumes[vslot].disk,
                DiskState::Outdated | DiskState::Consistent
            );
            if behind
                && p.disks.get(vslot) == Some(&DiskState::UpToDate)
                && matches!(p.syncs[vslot], SyncState::Established)
            {
                self.send_handshake(primary, vslot, out);
            }
        }
    }

    /// A peer turned out to be Primary while this Secondary resyncs with another Secondary
    /// (as source or target): that resync stops (the link is dropped and retried), as it
    /// would not have started with a Primary near (`secondary_resync_must_wait`): its
    /// ordering rules hold only when the source is the one writer, and the Primary's writes
    /// reach the target outside it. The Primary then brings the lagging side up to date.
    pub(super) fn stop_secondary_resyncs(
        &mut self,
        now: Time,
        primary: usize,
        out: &mut Vec<Action<P>>,
    ) {
        if self.role != Role::Secondary {
            return;
        }
        for slot in 0..self.peers.len() {
            let p = &self.peers[slot];
            let resyncing = p.syncs.iter().any(|sync| {
                !matches!(
                    sync,
                    SyncState::Off | SyncState::Established | SyncState::WaitUuids { .. }
                )
            });
            if slot == primary
                || p.connection != ConnState::Connected
                || p.role == Role::Primary
                || !resyncing
            {
                continue;
            }
            let reason = format!(
                "{} became Primary during a resync between Secondaries: it stops, and the Primary \
                 brings the lagging side up to date",
                self.peers[primary].config.name
            );
            self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
        }
    }

    /// A replicated write applied as Secondary: marked for every peer not connected to us,
    /// and for every Diskless peer (the sender too, when it is a diskless Primary), which
    /// stores nothing.
    pub(super) fn mark_for_absent_peers(&mut self, from_slot: usize, vslot: usize, extent: Extent) {
        for (slot, peer) in self.peers.iter_mut().enumerate() {
            let diskless = peer.disks[vslot] == DiskState::Diskless;
            let marked = diskless || (slot != from_slot && peer.connection != ConnState::Connected);
            if marked && !peer.bitmap_free[vslot] {
                mark(&mut peer.bitmaps[vslot], extent);
            }
        }
    }

    /// A resync write applied as sync target of the peer in `source`: the block changes
    /// here and reaches no other peer through us, so it is marked for every other peer,
    /// connected or not (a connected Secondary on our generation does not have it either,
    /// when the source is a third node whose bits nobody else counted).
    pub(super) fn mark_resync_write(&mut self, source: usize, vslot: usize, extent: Extent) {
        for (slot, peer) in self.peers.iter_mut().enumerate() {
            if slot != source && !peer.bitmap_free[vslot] {
                mark(&mut peer.bitmaps[vslot], extent);
            }
        }
    }

    /// A resync from the peer in `source` ended with this disk UpToDate: every other
    /// Secondary Established with us, on a link no Primary feeds, for which the resync
    /// left bits gets a new handshake, so that the two never stay UpToDate with different
    /// data (the handshake moves the bits, or clears them when a Primary feeds the peer).
    pub(super) fn rehandshake_after_resync(
        &mut self,
        source: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        for slot in 0..self.peers.len() {
            let p = &self.peers[slot];
            let established = p.connection == ConnState::Connected
                && matches!(p.syncs[vslot], SyncState::Established);
            if slot == source
                || !established
                || p.role == Role::Primary
                || self.fed_by_primary(slot, vslot)
            {
                continue;
            }
            if p.bitmaps[vslot].count_set_blocks() > 0 {
                self.send_handshake(slot, vslot, out);
            }
        }
    }

    /// Two Secondaries fed by a Primary connect with equal generations: the bits this node
    /// kept for the peer in `slot` (and its bitmap identifier) are dropped.
    pub(super) fn forget_bits_for(&mut self, slot: usize, vslot: usize, out: &mut Vec<Action<P>>) {
        let node = self.peers[slot].node;
        let had_bits = self.peers[slot].bitmaps[vslot].count_set_blocks() > 0;
        self.peers[slot].bitmaps[vslot].clear_all();
        let had_uuid = self.volumes[vslot].ids.bitmap_uuid(node) != 0;
        if had_uuid {
            self.volumes[vslot].ids.clear_bitmap_uuid(node);
        }
        if had_bits || had_uuid {
            self.meta_changed(vslot, out);
        }
    }

    /// A resync between this Secondary and the Secondary in `slot` (`source`: we would send)
    /// waits while a Primary feeds the peer, while another connected peer of ours may be a
    /// Primary (its role known or not yet), or while this node already receives a resync
    /// from another peer: the resync's ordering rules (`resync.rs`) hold only when its
    /// source is the one writer. The connection is dropped with the reason returned and tried
    /// again later; meanwhile the Primary brings the lagging side up to date itself.
    ///
    /// Invariant: a sync target takes part in no other resync. Not as a target (above), and
    /// not as a source either way round: a node that sends a resync must not become a target
    /// while it runs, since the blocks it already sent would change under its own target
    /// (nothing marks them again for it), which would then end UpToDate with a mixture of the
    /// old and the new data; and a node that is becoming a target must not start to send one
    /// (its disk is about to be overwritten; once Inconsistent, `refuse_conflicts` refuses).
    pub(super) fn secondary_resync_must_wait(
        &self,
        slot: usize,
        vslot: usize,
        source: bool,
        peer: &UuidsMessage,
    ) -> Option<String> {
        let name = &self.peers[slot].config.name;
        if self.primary_may_be_near(slot) || peer.ids.flags.primary_peer {
            let (from, to) = if source {
                ("this node", name.as_str())
            } else {
                (name.as_str(), "this node")
            };
            return Some(format!(
                "a resync from {from} to {to} waits: a Primary is replicating to one of them, and \
                 it brings the lagging one up to date itself"
            ));
        }
        let resyncing = |target: bool| {
            self.peers.iter().enumerate().any(|(other, p)| {
                other != slot
                    && match &p.syncs[vslot] {
                        SyncState::StartingTarget(_) | SyncState::Target(_) => target,
                        SyncState::StartingSource(_) | SyncState::Source(_) => !target,
                        _ => false,
                    }
            })
        };
        if resyncing(true) {
            let what = if source {
                format!("a resync from this node to {name}")
            } else {
                format!("a resync from {name}")
            };
            return Some(format!(
                "{what} waits: this node is already the target of another resync"
            ));
        }
        (!source && resyncing(false)).then(|| {
            format!(
                "a resync from {name} waits: this node is the source of another resync, whose \
                 blocks sent so far would change under it"
            )
        })
    }

    /// Becoming the sync target of a crashed Primary's activity log (a Secondary source whose
    /// handshake says `crashed_primary`): the other diskful Secondaries this node is connected
    /// to are dropped, and stay away until the resync is over
    /// ([`Engine::established_beside_crashed_source`]).
    ///
    /// Such a resync moves blocks the crashed Primary holds bits for without a generation of
    /// their own (its hot extents, marked at attach for every peer): the target ends on the
    /// generation it had, which a third Secondary shares. Left Established with it, the two
    /// would be UpToDate and differ, and nothing would ever say so: the third node's
    /// generation is no ancestor of ours (so it is not left behind), and resync writes are
    /// marked only for absent peers. Absent, it gets them marked (`mark_for_absent_peers`),
    /// and the handshake when it returns (equal generations, our bits) resyncs them to it.
    /// Only for a crashed source: any Secondary resync marking its connected peers would set
    /// off the next one, without end.
    pub(super) fn leave_secondaries_beside_crashed_source(
        &mut self,
        now: Time,
        source: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let source_name = self.peers[source].config.name.clone();
        for other in 0..self.peers.len() {
            let p = &self.peers[other];
            if other == source
                || p.connection != ConnState::Connected
                || p.role == Role::Primary
                || p.disks[vslot] == DiskState::Diskless
            {
                continue;
            }
            let reason = format!(
                "this node receives the activity log of {source_name}, a crashed Primary, which \
                 this peer lacks: it stays away until that resync is over, then gets the blocks \
                 from here"
            );
            self.drop_peer(now, other, ConnState::Unconnected, reason, out);
        }
    }

    /// Why this node may not be Established with another diskful Secondary on `vslot` now: it
    /// is (becoming) the sync target of a crashed Primary other than the peer in `slot`
    /// ([`Engine::leave_secondaries_beside_crashed_source`]).
    pub(super) fn established_beside_crashed_source(
        &self,
        slot: usize,
        vslot: usize,
    ) -> Option<String> {
        let source = self.peers.iter().enumerate().find(|&(other, p)| {
            other != slot
                && matches!(
                    p.syncs[vslot],
                    SyncState::StartingTarget(_) | SyncState::Target(_)
                )
                && p.known_ids[vslot]
                    .as_ref()
                    .is_some_and(|ids| ids.flags.crashed_primary)
        })?;
        Some(format!(
            "this node receives the activity log of {}, a crashed Primary: a Secondary beside it \
             waits until that resync is over",
            source.1.config.name
        ))
    }

    /// Whether another peer than `slot` is connected and not known to be Secondary (a Primary,
    /// or one whose role has not arrived yet: connections that come up together race).
    fn primary_may_be_near(&self, slot: usize) -> bool {
        self.peers.iter().enumerate().any(|(other, p)| {
            other != slot && p.connection == ConnState::Connected && p.role != Role::Secondary
        })
    }

    /// Whether another connected peer than `slot` is a Primary we are Established with on
    /// `vslot` (sent as [`crate::GenerationFlags::primary_peer`]).
    pub(super) fn fed_by_primary(&self, slot: usize, vslot: usize) -> bool {
        self.peers.iter().enumerate().any(|(other, p)| {
            other != slot
                && p.connection == ConnState::Connected
                && p.role == Role::Primary
                && matches!(p.syncs[vslot], SyncState::Established)
        })
    }
}
