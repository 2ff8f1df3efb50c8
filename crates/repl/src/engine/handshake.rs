//! The sync handshake after a connect and the bitmap exchange (drbd-semantics.md §2, §3).
//!
//! Both sides send their generation identifiers for every volume on the data socket
//! ([`UuidsPurpose::Handshake`]), so they precede every write sent after the connect. When a
//! side holds both its own (as sent) and the peer's, it decides with [`compare`]; both sides
//! decide on the same two sets of identifiers, so their decisions mirror each other, and so do
//! the checks that refuse a decision (they only read values both sides exchanged):
//! - **split brain:** [`resolve_split_brain`] with this connection's `after-sb-*` policies and
//!   the `--discard-my-data` flags picks a victim, which becomes the target of a bitmap resync
//!   of the union of both bitmaps (the blocks either side changed since they split), or of a
//!   full resync when the split brain is not auto-recoverable (no bitmap identifier the two
//!   share counts the divergence); or both go StandAlone. Either way the driver gets
//!   [`Action::SplitBrain`].
//! - **unrelated data:** both go StandAlone; except that an Inconsistent side facing an
//!   UpToDate one is the target of a full resync.
//! - **resync goal:** a resync to an Inconsistent side whose resync goal the source's
//!   identifiers do not include is a split brain instead (not auto-recoverable), whatever
//!   rule chose it.
//! - **rr-conflict:** a decision that makes a Primary the sync target, or an Inconsistent disk
//!   the sync source, is refused: both go StandAlone.
//! - **equal current:** DRBD's rules call equal current generations "no sync", except that
//!   an Inconsistent side facing an UpToDate one is the target of a bitmap resync (a
//!   replicated write failed on it under `pass_on`; both bitmaps are OR-ed); otherwise, if a
//!   bitmap still has bits (a write the peer failed), that side is the source of a bitmap
//!   resync (both having bits: the lower node id), so replicas never stay different silently.
//!
//! A resync starts with both bitmaps exchanged (RLE chunks, OR-ed into the receiver's bitmap):
//! the target sends its bitmap at once; the source first persists a new sync identifier as its
//! bitmap identifier for the target ([`GenerationIds::new_sync_uuid`]), then sends
//! [`UuidsPurpose::SyncStart`] and its bitmap. The target makes the sync identifier its current
//! and persists itself Inconsistent before it requests anything, so an interrupted resync
//! resumes by the bitmap rules on the next connect.

use meta::RleDecoder;

use crate::after_split_brain::{
    resolve_split_brain, younger_primary, Resolution, SideFacts, SplitBrainFacts,
};
use crate::engine::Engine;
use crate::state::{ConnState, DiskState, Role};
use crate::sync::{SentUuids, SourceSync, StartingSource, StartingTarget, SyncState, TargetSync};
use crate::types::{Action, Followed, PeerMessage, Time, UuidsMessage, UuidsPurpose};
use crate::uuid::{
    compare, Adoption, GenerationIds, Handshake, HandshakeNodes, NodeSet, Rule, SyncDecision,
    Transfer,
};
use crate::PeerViolation;

/// Most RLE bytes per bitmap chunk: what one wire `BitmapChunk` carries
/// (`wire::BITMAP_CHUNK_LEN_MAX`).
pub const BITMAP_CHUNK_BYTES_MAX: usize = 4094;

/// The outcome of a handshake for one volume.
enum Outcome {
    /// No resync; replicate.
    Established,
    /// Resync in this direction.
    Source(Transfer),
    Target(Transfer),
    /// Refuse: StandAlone with this reason.
    StandAlone(String),
}

impl<P: Clone> Engine<P> {
    /// Sends our identifiers for a handshake round and waits for the peer's.
    pub(super) fn send_handshake(&mut self, slot: usize, vslot: usize, out: &mut Vec<Action<P>>) {
        if self.hold_handshake(slot, vslot) {
            return;
        }
        let sent = self.send_uuids(slot, vslot, UuidsPurpose::Handshake, out);
        self.peers[slot].syncs[vslot] = SyncState::WaitUuids {
            sent: Box::new(sent),
        };
    }

    /// Sends our identifiers for `vslot` to the peer in `slot`; returns what was sent.
    pub(super) fn send_uuids(
        &mut self,
        slot: usize,
        vslot: usize,
        purpose: UuidsPurpose,
        out: &mut Vec<Action<P>>,
    ) -> SentUuids {
        let p = &self.peers[slot];
        let volume = &self.volumes[vslot];
        let mut ids = volume.ids.clone();
        ids.flags.discard_my_data = p.discard_my_data;
        ids.flags.primary_peer = self.fed_by_primary(slot, vslot);
        let bitmap_bits = p.bitmaps[vslot].count_set_blocks();
        // A crashed Primary is one towards a peer only while it holds bits for it: the flag
        // outlives the first peer's resync (`bits_owed_to_others`), and a crashed Primary
        // with nothing for this peer must not override what the peer has for it (such as a
        // new Primary's full resync of it, which the flag would turn into an rr-conflict).
        ids.flags.crashed_primary &= bitmap_bits > 0;
        // Likewise a crashed Secondary: only its bits are suspect.
        ids.flags.crashed_secondary &= bitmap_bits > 0;
        let followed = self.followed(slot);
        let message = UuidsMessage {
            volume: volume.number,
            purpose,
            role: self.role,
            disk: volume.disk,
            ids: ids.clone(),
            bitmap_bits,
            size_bytes: volume.size_bytes,
            bitmap_granularity_bytes: p.bitmaps[vslot].granularity_bytes(),
            followed,
        };
        out.push(Action::SendOnData {
            peer: p.config.node_id,
            message: PeerMessage::SyncUuids(Box::new(message)),
        });
        SentUuids {
            ids,
            bitmap_bits,
            role: self.role,
            disk: volume.disk,
            followed,
        }
    }

    pub(super) fn receive_uuids(
        &mut self,
        now: Time,
        slot: usize,
        message: UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(message.volume)
            .ok_or(PeerViolation::UuidsUnknownVolume {
                volume: message.volume,
            })?;
        self.peers[slot].disks[vslot] = message.disk;
        if message.role == Role::Secondary && message.ids.flags.primary_peer {
            self.vote_handed_on(slot);
        }
        // A new round starts over; within one, a report of a disk that cannot be promoted
        // sticks (an older UpToDate on the other socket may arrive after it, `quorum.rs`).
        let unpromotable = message.disk != DiskState::UpToDate;
        let p = &mut self.peers[slot];
        p.unpromotable[vslot] =
            unpromotable || (p.unpromotable[vslot] && message.purpose != UuidsPurpose::Handshake);
        if matches!(
            message.purpose,
            UuidsPurpose::Handshake | UuidsPurpose::Rotate
        ) {
            self.peers[slot].known_ids[vslot] = Some(Box::new(message.ids.clone()));
        }
        match message.purpose {
            UuidsPurpose::Handshake if self.peers[slot].handshake_held[vslot].is_some() => {
                // Ours waits for the metadata (`leave.rs`): theirs is answered with it.
                self.peers[slot].handshake_held[vslot] = Some(super::leave::HeldHandshake {
                    theirs: Some(Box::new(message)),
                });
                Ok(())
            }
            UuidsPurpose::Handshake => self.receive_handshake(now, slot, vslot, message, out),
            UuidsPurpose::Accepted => {
                self.peers[slot].accepted[vslot] = true;
                // The peer may now count toward quorum (`quorum_counts`).
                self.update_quorum(now, out);
                Ok(())
            }
            UuidsPurpose::Adopt => self.adopt_uuids(slot, vslot, &message, out),
            UuidsPurpose::SyncStart => self.sync_start(now, slot, vslot, &message, out),
            UuidsPurpose::Rotate => {
                self.receive_rotation(now, slot, vslot, &message, out);
                Ok(())
            }
            UuidsPurpose::RotateSeen => {
                self.generation_seen(vslot);
                self.rotation_answered(now, slot, out);
                Ok(())
            }
        }
    }

    /// The peer's identifiers of a handshake round for volume slot `vslot`: decides the resync.
    fn receive_handshake(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        message: UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        // A handshake from a pulled-ahead Primary ends its episode here too.
        self.peers[slot].ahead.behind = false;
        if matches!(self.peers[slot].syncs[vslot], SyncState::Established) {
            // The peer started a new round (e.g. after `primary --force`): answer it.
            self.send_handshake(slot, vslot, out);
        }
        let state = std::mem::replace(&mut self.peers[slot].syncs[vslot], SyncState::Off);
        let SyncState::WaitUuids { sent } = state else {
            self.peers[slot].syncs[vslot] = state;
            return Err(PeerViolation::HandshakeDuringResync {
                volume: message.volume,
            });
        };
        if let Some(reason) = self.geometry_mismatch(slot, vslot, &message) {
            self.drop_peer(now, slot, ConnState::StandAlone, reason, out);
            return Ok(());
        }
        if let Some(reason) = self.second_primary(slot, message.role) {
            self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
            return Ok(());
        }
        if message.role == Role::Primary && self.peers[slot].role == Role::Unknown {
            // The handshake (data socket) may come before the peer's `State` (control
            // socket): a Secondary that accepts a Primary's handshake follows it from
            // now on, so a second Primary announced meanwhile is the one refused
            // (`second_primary`), not this one after it counted us (sim seed 15268).
            self.peers[slot].role = Role::Primary;
        }
        self.decide(now, slot, vslot, &sent, &message, out);
        if self.peers[slot].connection == ConnState::Connected
            && !matches!(self.peers[slot].syncs[vslot], SyncState::Off)
        {
            self.send_uuids(slot, vslot, UuidsPurpose::Accepted, out);
        }
        self.update_quorum(now, out);
        Ok(())
    }

    /// Why the bitmaps of `vslot` cannot be exchanged with the peer (sizes or granularities
    /// differ), if they cannot: the connection then goes StandAlone with that reason.
    fn geometry_mismatch(&self, slot: usize, vslot: usize, peer: &UuidsMessage) -> Option<String> {
        let (volume, bitmap) = (&self.volumes[vslot], &self.peers[slot].bitmaps[vslot]);
        if volume.disk == DiskState::Diskless || peer.disk == DiskState::Diskless {
            // No bitmap is exchanged with a diskless side, and it has no size of its own.
            return None;
        }
        let name = &self.peers[slot].config.name;
        if peer.size_bytes != volume.size_bytes {
            return Some(format!(
                "volume {} is {} bytes here and {} bytes on {name}; both sides must export the \
                 same size (resize the smaller backing device, or check meta-disk)",
                volume.number, volume.size_bytes, peer.size_bytes
            ));
        }
        if peer.bitmap_granularity_bytes != bitmap.granularity_bytes() {
            return Some(format!(
                "volume {}: the bitmap has {} bytes per bit here and {} on {name}; recreate the \
                 metadata of one node with `create-md --bitmap-granularity` matching the other",
                volume.number,
                bitmap.granularity_bytes(),
                peer.bitmap_granularity_bytes
            ));
        }
        None
    }

    fn nodes(&self, slot: usize) -> HandshakeNodes {
        self.peers[slot].nodes
    }

    fn decide(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        sent: &SentUuids,
        peer: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        // A peer without a disk of its own (`disk none;`) announces size 0; a detached one
        // keeps its size.
        self.peers[slot].bitmap_free[vslot] =
            peer.disk == DiskState::Diskless && peer.size_bytes == 0;
        if sent.disk == DiskState::Diskless || peer.disk == DiskState::Diskless {
            self.establish_diskless(slot, vslot, out);
            self.outdate_behind_diskless_primary(vslot, sent, peer, out);
            return;
        }
        let handshake = self.settle_handshake(slot, vslot, sent, peer, out);
        self.peers[slot].discard_my_data = false;
        let outcome = match handshake.decision {
            SyncDecision::NoSync => Outcome::Established,
            SyncDecision::Source(transfer) => Outcome::Source(transfer),
            SyncDecision::Target(transfer) => Outcome::Target(transfer),
            SyncDecision::Unrelated => {
                Outcome::StandAlone(format!("unrelated data, refusing to connect ({handshake})"))
            }
            SyncDecision::SplitBrain { auto_recoverable } => {
                self.split_brain(slot, vslot, sent, peer, auto_recoverable, out)
            }
        };
        let outcome = match refuse_conflicts(outcome, sent, peer) {
            // The identifiers were sent while Secondary and this node was promoted since
            // (promotion waits for handshakes, so only a promotion racing the connect gets
            // here): a Primary never becomes a sync target.
            Outcome::Target(_) if self.role == Role::Primary => Outcome::StandAlone(
                "rr-conflict: this node became Primary during the handshake and the resync would \
                 overwrite its data"
                    .into(),
            ),
            outcome => outcome,
        };
        let resync = matches!(outcome, Outcome::Source(_) | Outcome::Target(_));
        if resync && sent.role != Role::Primary && peer.role != Role::Primary {
            let source = matches!(outcome, Outcome::Source(_));
            if let Some(reason) = self.secondary_resync_must_wait(slot, vslot, source, peer) {
                self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
                return;
            }
            if !source && peer.ids.flags.crashed_primary {
                self.leave_secondaries_beside_crashed_source(now, slot, vslot, out);
            }
        }
        if matches!(outcome, Outcome::Established)
            && peer.role == Role::Secondary
            && peer.disk != DiskState::Diskless
        {
            if let Some(reason) = self.established_beside_crashed_source(slot, vslot) {
                self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
                return;
            }
        }
        if !matches!(outcome, Outcome::StandAlone(_)) {
            // The peer now shares this generation, or replaces it: it is no longer unused.
            self.generation_seen(vslot);
        }
        match outcome {
            Outcome::Established => self.establish(vslot, slot, peer, out),
            Outcome::Source(transfer) => self.start_source(now, slot, vslot, transfer, out),
            Outcome::Target(transfer) => self.start_target(slot, vslot, transfer, out),
            Outcome::StandAlone(reason) => {
                self.drop_peer(now, slot, ConnState::StandAlone, reason, out)
            }
        }
    }

    /// The handshake's decision for volume slot `vslot`: the identifiers compared, then the
    /// equal-current and unrelated-Inconsistent rules and the resync goal applied (see
    /// [`Engine::decide`]). Peers both fed by a Primary may forget the bits they kept.
    fn settle_handshake(
        &mut self,
        slot: usize,
        vslot: usize,
        sent: &SentUuids,
        peer: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) -> Handshake {
        let nodes = self.nodes(slot);
        let compared = compare(&sent.ids, &peer.ids, nodes);
        let equal_current = matches!(
            compared.rule,
            Rule::EqualCurrent
                | Rule::CrashedPrimarySelf
                | Rule::CrashedPrimaryPeer
                | Rule::CrashedPrimaryBoth
        );
        let fed_by_primary = equal_current
            && sent.role != Role::Primary
            && peer.role != Role::Primary
            && (sent.ids.flags.primary_peer || peer.ids.flags.primary_peer);
        let reconcile_later = fed_by_primary && unfed_side_holds_bits(sent, peer);
        if reconcile_later && sent.ids.flags.primary_peer {
            // This side still follows the Primary the peer lost: when it loses it too, it
            // asks the peer for a new handshake, which resyncs the bits (`reconcile.rs`).
            self.peers[slot].reconcile_owed[vslot] = true;
        }
        let handshake = if reconcile_later {
            // Both keep their bits and stay connected (and lend each other quorum) until then.
            Handshake {
                decision: SyncDecision::NoSync,
                rule: compared.rule,
            }
        } else if fed_by_primary {
            // Either is fed by a Primary (rotate.rs): no resync between them; the bits they
            // kept for each other are moot, unless one is Inconsistent (a replicated write
            // failed on it): its bits are what a later resync between them must move. A
            // crashed Primary's hot extents too: whoever received them from it kept its other
            // Secondaries away meanwhile (`leave_secondaries_beside_crashed_source`) and marked
            // them for them, and the Primary it feeds us both from has them.
            if sent.disk != DiskState::Inconsistent && peer.disk != DiskState::Inconsistent {
                self.forget_bits_for(slot, vslot, out);
            }
            Handshake {
                decision: SyncDecision::NoSync,
                rule: compared.rule,
            }
        } else {
            let settled = settle_equal_current(
                compared,
                EqualSide::sent(sent),
                EqualSide::received(peer),
                nodes,
            );
            settle_unrelated_inconsistent(settled, sent.disk, peer.disk)
        };
        keep_resync_goal(handshake, (sent.disk, &sent.ids), (peer.disk, &peer.ids))
    }

    #[allow(clippy::too_many_arguments)]
    fn split_brain(
        &mut self,
        slot: usize,
        vslot: usize,
        sent: &SentUuids,
        peer: &UuidsMessage,
        auto_recoverable: bool,
        out: &mut Vec<Action<P>>,
    ) -> Outcome {
        let nodes = self.nodes(slot);
        let local_bitmap = sent.ids.bitmap_uuid(nodes.peer());
        let peer_bitmap = peer.ids.bitmap_uuid(nodes.local());
        let facts = SplitBrainFacts {
            local: SideFacts {
                node_id: nodes.local(),
                role: sent.role,
                changed_blocks: sent.bitmap_bits,
                discard_my_data: sent.ids.flags.discard_my_data,
            },
            peer: SideFacts {
                node_id: nodes.peer(),
                role: peer.role,
                changed_blocks: peer.bitmap_bits,
                discard_my_data: peer.ids.flags.discard_my_data,
            },
            younger_primary: younger_primary(local_bitmap, peer_bitmap),
            auto_recoverable,
        };
        let resolution = resolve_split_brain(&facts, &self.peers[slot].config.split_brain);
        let detail = format!(
            "split brain detected (local bits {}, peer bits {}): {resolution:?}",
            sent.bitmap_bits, peer.bitmap_bits
        );
        out.push(Action::SplitBrain {
            peer: self.peers[slot].config.node_id,
            volume: self.volumes[vslot].number,
            resolution,
            detail: detail.clone(),
        });
        match resolution {
            Resolution::Disconnect => Outcome::StandAlone(format!(
                "{detail}; the after-sb policies leave it to the administrator"
            )),
            // No bitmap counts a divergence that is not auto-recoverable (it began before
            // any bitmap identifier the two share): everything is copied.
            Resolution::DiscardLocal => Outcome::Target(split_brain_transfer(auto_recoverable)),
            Resolution::DiscardRemote => Outcome::Source(split_brain_transfer(auto_recoverable)),
            Resolution::CallPriLostAfterSb => Outcome::StandAlone(format!(
                "{detail}; this Primary must demote (pri-lost-after-sb)"
            )),
        }
    }

    /// No resync: an Outdated or Consistent disk facing an UpToDate one with the same data is
    /// UpToDate too.
    fn establish(
        &mut self,
        vslot: usize,
        slot: usize,
        peer: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        self.peers[slot].syncs[vslot] = SyncState::Established;
        // From now on the peer holds (and receives) data of our current generation.
        let node = self.peers[slot].node;
        self.volumes[vslot].shared_with = self.volumes[vslot].shared_with.with(node);
        let disk = self.volumes[vslot].disk;
        if peer.disk == DiskState::UpToDate
            && matches!(disk, DiskState::Outdated | DiskState::Consistent)
        {
            self.volumes[vslot].disk = DiskState::UpToDate;
            self.meta_changed(vslot, out);
        }
        out.push(Action::StateChanged);
    }

    /// One side has no disk: it is never a sync source or target, and the generations are not
    /// compared (a diskless side holds none of its own). The connection carries states,
    /// quorum and pings; the diskful side keeps marking blocks out of sync for the diskless
    /// one (`send_to_peer`), so an attach later resyncs them by the bitmap rules — unless it has
    /// no disk at all (`disk none;`), for which no bitmap is kept (DRBD's `--bitmap=no`).
    fn establish_diskless(&mut self, slot: usize, vslot: usize, out: &mut Vec<Action<P>>) {
        self.peers[slot].syncs[vslot] = SyncState::Established;
        if self.peers[slot].bitmap_free[vslot]
            && self.peers[slot].bitmaps[vslot].count_set_blocks() > 0
        {
            // Bits kept before we knew it has no disk: moot.
            self.peers[slot].bitmaps[vslot].clear_all();
            self.meta_changed(vslot, out);
        }
        out.push(Action::StateChanged);
    }

    /// A Diskless Primary holds no data to resync us from, so a generation of its that we do
    /// not have means we missed writes it made through other peers while we were away: this
    /// disk is Outdated until a resync from one of them (its reads avoid us meanwhile).
    fn outdate_behind_diskless_primary(
        &mut self,
        vslot: usize,
        sent: &SentUuids,
        peer: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        let base = |uuid: u64| uuid & !crate::uuid::UUID_PRIMARY;
        let behind = peer.role == Role::Primary
            && peer.disk == DiskState::Diskless
            && sent.disk == DiskState::UpToDate
            && base(peer.ids.current) != base(sent.ids.current);
        if behind && self.volumes[vslot].disk == DiskState::UpToDate {
            self.volumes[vslot].disk = DiskState::Outdated;
            self.meta_changed(vslot, out);
        }
    }

    fn start_source(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        transfer: Transfer,
        out: &mut Vec<Action<P>>,
    ) {
        let peer = self.peers[slot].node;
        // The target takes over our current generation when it finishes, which we may not
        // hear of before the link drops.
        self.volumes[vslot].shared_with = self.volumes[vslot].shared_with.with(peer);
        if transfer == Transfer::Full {
            self.peers[slot].bitmaps[vslot].set_all();
        }
        let random = self.next_random();
        self.volumes[vslot].ids.new_sync_uuid(peer, random);
        let meta_version = self.meta_changed(vslot, out);
        let decoder = RleDecoder::new(&self.peers[slot].bitmaps[vslot]);
        self.peers[slot].syncs[vslot] = SyncState::StartingSource(Box::new(StartingSource {
            decoder,
            meta_version,
            announced: false,
        }));
        self.advance_starting(now, slot, vslot, out);
    }

    fn start_target(
        &mut self,
        slot: usize,
        vslot: usize,
        transfer: Transfer,
        out: &mut Vec<Action<P>>,
    ) {
        if transfer == Transfer::Full {
            self.peers[slot].bitmaps[vslot].set_all();
        }
        self.send_bitmap(slot, vslot, out);
        let decoder = RleDecoder::new(&self.peers[slot].bitmaps[vslot]);
        self.peers[slot].syncs[vslot] = SyncState::StartingTarget(Box::new(StartingTarget {
            decoder,
            source_ids: None,
            meta_version: None,
        }));
        out.push(Action::StateChanged);
    }

    /// Sends our bitmap for the peer in `slot`, in chunks.
    fn send_bitmap(&mut self, slot: usize, vslot: usize, out: &mut Vec<Action<P>>) {
        let p = &self.peers[slot];
        let (peer, volume) = (p.config.node_id, self.volumes[vslot].number);
        // BITMAP_CHUNK_BYTES_MAX lies within the encoder's accepted range (checked in tests).
        let Ok(chunks) = p.bitmaps[vslot].rle_chunks(BITMAP_CHUNK_BYTES_MAX) else {
            return;
        };
        for chunk in chunks {
            out.push(Action::SendOnData {
                peer,
                message: PeerMessage::BitmapChunk { volume, chunk },
            });
        }
    }

    /// The source's `SyncStart`: make its sync identifier our current and persist ourselves
    /// Inconsistent before any resync write.
    fn sync_start(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        message: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let sync_uuid = message.ids.bitmap_uuid(self.node);
        if sync_uuid == 0 {
            return Err(PeerViolation::SyncStartWithoutIdentifier);
        }
        let SyncState::StartingTarget(starting) = &self.peers[slot].syncs[vslot] else {
            return Err(PeerViolation::SyncStartNotTarget {
                volume: message.volume,
            });
        };
        if starting.source_ids.is_some() {
            return Err(PeerViolation::SecondSyncStart {
                volume: message.volume,
            });
        }
        // The data a pending `--discard-my-data` towards another peer gives up is replaced
        // now by this source's: that split brain is a new one, for the administrator again.
        for other in &mut self.peers {
            other.discard_my_data = false;
        }
        let volume = &mut self.volumes[vslot];
        volume.ids.current = sync_uuid;
        volume.ids.learn_source_ancestors(&message.ids);
        volume.shared_with = NodeSet::ALL;
        volume.ids.mark_role(self.role);
        volume.disk = DiskState::Inconsistent;
        let version = self.meta_changed(vslot, out);
        if let SyncState::StartingTarget(starting) = &mut self.peers[slot].syncs[vslot] {
            starting.source_ids = Some(Box::new(message.ids.clone()));
            starting.meta_version = Some(version);
        }
        // Our identifiers now descend from the source's ancestors: a Secondary connected to
        // us that is still on one of them, and reaches no Primary, is left behind (it hears
        // this the way it hears a rotation, `rotate.rs`).
        self.tell_secondaries_of_new_generation(slot, vslot, out);
        self.advance_starting(now, slot, vslot, out);
        Ok(())
    }

    /// `new-current-uuid --clear-bitmap` on the peer: take its identifiers, UpToDate.
    fn adopt_uuids(
        &mut self,
        slot: usize,
        vslot: usize,
        message: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if !matches!(self.peers[slot].syncs[vslot], SyncState::Established) {
            return Err(PeerViolation::AdoptDuringResync {
                volume: message.volume,
            });
        }
        if self.volumes[vslot].disk == DiskState::Diskless {
            // Nothing here to take the identifiers for.
            return Ok(());
        }
        let adoption = Adoption {
            local: self.node,
            source: self.peers[slot].node,
            role: self.role,
        };
        self.volumes[vslot].ids.adopt_source(&message.ids, adoption);
        self.volumes[vslot].shared_with = NodeSet::ALL;
        self.volumes[vslot].disk = DiskState::UpToDate;
        self.peers[slot].bitmaps[vslot].clear_all();
        self.meta_changed(vslot, out);
        Ok(())
    }

    pub(super) fn receive_bitmap_chunk(
        &mut self,
        now: Time,
        slot: usize,
        volume: u16,
        chunk: &[u8],
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::BitmapUnknownVolume { volume })?;
        let p = &mut self.peers[slot];
        let decoder = match &mut p.syncs[vslot] {
            SyncState::StartingSource(starting) => &mut starting.decoder,
            SyncState::StartingTarget(starting) => &mut starting.decoder,
            _ => return Err(PeerViolation::BitmapOutsideExchange { volume }),
        };
        if decoder.is_complete() {
            return Err(PeerViolation::BitmapAfterComplete { volume });
        }
        decoder
            .apply(chunk, &mut p.bitmaps[vslot])
            .map_err(|error| PeerViolation::BitmapChunkInvalid { volume, error })?;
        self.advance_starting(now, slot, vslot, out);
        Ok(())
    }

    /// Moves WFBitMapS / WFBitMapT on once what they wait for is there.
    pub(super) fn advance_starting(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        match &self.peers[slot].syncs[vslot] {
            SyncState::StartingSource(starting) => {
                let (version, announced, complete) = (
                    starting.meta_version,
                    starting.announced,
                    starting.decoder.is_complete(),
                );
                if !announced && self.is_persisted(vslot, version) {
                    self.send_uuids(slot, vslot, UuidsPurpose::SyncStart, out);
                    self.send_bitmap(slot, vslot, out);
                    if let SyncState::StartingSource(starting) = &mut self.peers[slot].syncs[vslot]
                    {
                        starting.announced = true;
                    }
                }
                if (announced || self.is_persisted(vslot, version)) && complete {
                    let total = self.peers[slot].bitmaps[vslot].count_set_bytes();
                    self.peers[slot].syncs[vslot] =
                        SyncState::Source(Box::new(SourceSync::new(total, now)));
                    out.push(Action::StateChanged);
                }
            }
            SyncState::StartingTarget(starting) => {
                let persisted = starting
                    .meta_version
                    .is_some_and(|v| self.is_persisted(vslot, v));
                if !(persisted && starting.decoder.is_complete()) {
                    return;
                }
                let state = std::mem::replace(&mut self.peers[slot].syncs[vslot], SyncState::Off);
                let SyncState::StartingTarget(starting) = state else {
                    return;
                };
                let Some(source_ids) = starting.source_ids else {
                    return;
                };
                self.begin_target(now, slot, vslot, source_ids, out);
            }
            _ => {}
        }
    }

    fn begin_target(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        source_ids: Box<GenerationIds>,
        out: &mut Vec<Action<P>>,
    ) {
        let p = &mut self.peers[slot];
        let total = p.bitmaps[vslot].count_set_bytes();
        let mut controller = p.rate.clone();
        controller.restart();
        p.syncs[vslot] = SyncState::Target(Box::new(TargetSync {
            source_ids,
            cursor: 0,
            requests: Default::default(),
            writing: Default::default(),
            controller,
            answered_since_tick: 0,
            round_trip: None,
            application_active: false,
            progress: crate::sync::Progress::new(total, now),
        }));
        out.push(Action::StateChanged);
        self.target_tick(now, slot, vslot, out);
    }

    /// Whether volume `vslot` is (becoming) a sync target of some peer.
    pub(super) fn is_sync_target(&self, vslot: usize) -> bool {
        self.peers.iter().any(|p| {
            matches!(
                p.syncs[vslot],
                SyncState::StartingTarget(_) | SyncState::Target(_)
            )
        })
    }
}

/// One side of a handshake as [`settle_equal_current`] judges it.
#[derive(Debug, Clone, Copy)]
struct EqualSide {
    /// Bits set in its bitmap for the other side.
    bits: u64,
    disk: DiskState,
    role: Role,
    /// It asked to discard its data (`connect --discard-my-data`).
    discard: bool,
    followed: Option<Followed>,
    /// It went down uncleanly as a Secondary (`crashed_secondary`).
    crashed: bool,
}

impl EqualSide {
    fn sent(sent: &SentUuids) -> EqualSide {
        EqualSide {
            bits: sent.bitmap_bits,
            disk: sent.disk,
            role: sent.role,
            discard: sent.ids.flags.discard_my_data,
            followed: sent.followed,
            crashed: sent.ids.flags.crashed_secondary,
        }
    }

    fn received(peer: &UuidsMessage) -> EqualSide {
        EqualSide {
            bits: peer.bitmap_bits,
            disk: peer.disk,
            role: peer.role,
            discard: peer.ids.flags.discard_my_data,
            followed: peer.followed,
            crashed: peer.ids.flags.crashed_secondary,
        }
    }
}

/// DRBD's "no sync" for equal current generations, with these exceptions, in order (each
/// the target of a bitmap resync of both bitmaps OR-ed):
/// - an Inconsistent side facing an UpToDate one is the target, as in DRBD (a replicated
///   write failed on it under `pass_on`), whoever holds the bits;
/// - a side that asked to discard its data is the target of the other;
/// - if a bitmap still has bits (a write the peer failed, or writes a lost Primary may not
///   have settled, `reconcile.rs`), the Primary is the source if one side is; otherwise the
///   side that did not go down uncleanly if the other did (`crashed_secondary`: its disk
///   cache may have lost writes in those blocks); otherwise, if both followed one Primary,
///   the side that received its later write (it holds every write the other received);
///   otherwise the side with bits (both: the lower node id).
fn settle_equal_current(
    handshake: Handshake,
    local: EqualSide,
    peer: EqualSide,
    nodes: HandshakeNodes,
) -> Handshake {
    let crashed = matches!(
        handshake.rule,
        Rule::CrashedPrimarySelf | Rule::CrashedPrimaryPeer | Rule::CrashedPrimaryBoth
    );
    if crashed {
        return current_primary_is_source(handshake, local.role, peer.role);
    }
    if handshake.rule != Rule::EqualCurrent {
        return handshake;
    }
    let source = match (local.disk, peer.disk) {
        (DiskState::UpToDate, DiskState::Inconsistent) => Some(true),
        (DiskState::Inconsistent, DiskState::UpToDate) => Some(false),
        _ => None,
    };
    let source = source.or(match (local.discard, peer.discard) {
        (true, false) => Some(false),
        (false, true) => Some(true),
        _ => None,
    });
    let further = followed_further(local.followed, peer.followed);
    let source = match (source, local.bits > 0, peer.bits > 0) {
        (Some(source), _, _) => source,
        (None, false, false) => return handshake,
        (None, _, _) if local.role == Role::Primary && peer.role != Role::Primary => true,
        (None, _, _) if peer.role == Role::Primary && local.role != Role::Primary => false,
        (None, _, _) if local.crashed != peer.crashed => peer.crashed,
        (None, _, _) if further.is_some() => further == Some(true),
        (None, true, false) => true,
        (None, false, true) => false,
        (None, true, true) => nodes.local() < nodes.peer(),
    };
    let decision = if source {
        SyncDecision::Source(Transfer::Bitmap)
    } else {
        SyncDecision::Target(Transfer::Bitmap)
    };
    Handshake {
        decision,
        rule: Rule::EqualCurrent,
    }
}

/// Whether this side received a later write than the other from the Primary both followed
/// (None: not the same Primary, or the same write). Reads only exchanged values.
fn followed_further(local: Option<Followed>, peer: Option<Followed>) -> Option<bool> {
    let (local, peer) = (local?, peer?);
    (local.node == peer.node && local.seq != peer.seq).then_some(local.seq > peer.seq)
}

/// Whether a side that follows no Primary holds bits for the other, which does: after it lost
/// the Primary they shared it marked the writes no peer ack covered (`reconcile.rs`). If that
/// Primary is dead and the other side has not noticed yet, forgetting those bits (as two
/// Secondaries fed by one Primary do) would leave the two different for ever; so the resync
/// waits until both follow the Primary again or neither does. Reads only exchanged values.
/// Only an UpToDate side counts: one that is not is resynced itself (its bits are kept, see
/// `decide`), and holds no copy the other could be missing.
fn unfed_side_holds_bits(sent: &SentUuids, peer: &UuidsMessage) -> bool {
    let holds =
        |fed: bool, bits: u64, disk: DiskState| !fed && bits > 0 && disk == DiskState::UpToDate;
    holds(sent.ids.flags.primary_peer, sent.bitmap_bits, sent.disk)
        || holds(peer.ids.flags.primary_peer, peer.bitmap_bits, peer.disk)
}

/// A crashed Primary meeting a side that is Primary now, on equal current generations: the
/// Primary now is the source of a bitmap resync of both bitmaps OR-ed, whoever crashed
/// (DRBD's rule 41, "current Primary present"). The crashed side's hot extents hold only
/// writes in flight when it went down; a successor with the same generation has written
/// nothing while the two were apart (its first write would have started a new generation),
/// so everything the crashed side acknowledged under protocol C is on the successor, and
/// the union of the bitmaps covers every block where the two can differ. Without this rule
/// the crashed side would be the source and the Primary its target: an rr-conflict dead end
/// for the most common failover, a crash and a restart. Two Primaries, or none, keep the
/// crashed-primary rule. Reads only exchanged values.
fn current_primary_is_source(handshake: Handshake, local: Role, peer: Role) -> Handshake {
    let decision = match (local, peer) {
        (Role::Primary, Role::Primary) => return handshake,
        (Role::Primary, _) => SyncDecision::Source(Transfer::Bitmap),
        (_, Role::Primary) => SyncDecision::Target(Transfer::Bitmap),
        _ => return handshake,
    };
    Handshake {
        decision,
        rule: Rule::CurrentPrimary,
    }
}

/// "Unrelated data" or a split brain where one side is Inconsistent and the other UpToDate: a
/// full sync to the Inconsistent side, as DRBD decides. Its data is a resync cut short (its
/// current is a sync identifier that only its source knew, and that source may have moved
/// on), never a usable disk; without this it could never rejoin, or (a split brain) an
/// administrator would have to pick the obvious victim. Whether the other side may
/// overwrite it at all is [`keep_resync_goal`]'s to say. Reads only exchanged values.
fn settle_unrelated_inconsistent(
    handshake: Handshake,
    local: DiskState,
    peer: DiskState,
) -> Handshake {
    if !matches!(
        handshake.decision,
        SyncDecision::Unrelated | SyncDecision::SplitBrain { .. }
    ) {
        return handshake;
    }
    let decision = match (local, peer) {
        (DiskState::UpToDate, DiskState::Inconsistent) => SyncDecision::Source(Transfer::Full),
        (DiskState::Inconsistent, DiskState::UpToDate) => SyncDecision::Target(Transfer::Full),
        _ => return handshake,
    };
    Handshake {
        decision,
        rule: handshake.rule,
    }
}

/// A resync to an Inconsistent side from a side whose data does not include the generation
/// the target's cut-short resync was bringing it to ([`GenerationIds::resync_goal`]: the
/// source's current, a bitmap identifier or in its history) is a split brain instead,
/// whatever rule chose it: the target may hold acknowledged writes of a lineage the source
/// never saw (those of a Primary that has gone since), which the resync would overwrite.
/// Not when no goal is recorded, or the target was told to discard its data. Reads only
/// exchanged values.
fn keep_resync_goal(
    handshake: Handshake,
    local: (DiskState, &GenerationIds),
    peer: (DiskState, &GenerationIds),
) -> Handshake {
    let (target, source) = match handshake.decision {
        SyncDecision::Source(_) => (peer, local),
        SyncDecision::Target(_) => (local, peer),
        _ => return handshake,
    };
    let goal = target.1.resync_goal;
    if target.0 != DiskState::Inconsistent
        || goal == 0
        || target.1.flags.discard_my_data
        || source.1.includes(goal)
    {
        return handshake;
    }
    Handshake {
        decision: SyncDecision::SplitBrain {
            auto_recoverable: false,
        },
        rule: Rule::UnknownResyncGoal,
    }
}

/// What a resolved split brain copies: the union of both bitmaps when it is auto-recoverable
/// (both counted their changes from the same generation), else everything.
fn split_brain_transfer(auto_recoverable: bool) -> Transfer {
    if auto_recoverable {
        Transfer::Bitmap
    } else {
        Transfer::Full
    }
}

/// Refuses a resync whose target is Primary (rr-conflict) or whose source is Inconsistent.
/// Reads only exchanged values, so both sides refuse together.
fn refuse_conflicts(outcome: Outcome, sent: &SentUuids, peer: &UuidsMessage) -> Outcome {
    if sent.role == Role::Primary
        && peer.role == Role::Primary
        && !matches!(outcome, Outcome::StandAlone(_))
    {
        // Not a split brain (that was reported already), but two Primaries may not connect.
        return Outcome::StandAlone(
            "both nodes are Primary (two Primaries are not supported): demote one and connect again"
                .into(),
        );
    }
    let (source, target) = match outcome {
        Outcome::Source(_) => ((sent.disk, sent.role), (peer.disk, peer.role)),
        Outcome::Target(_) => ((peer.disk, peer.role), (sent.disk, sent.role)),
        other => return other,
    };
    if target.1 == Role::Primary {
        return Outcome::StandAlone(
            "rr-conflict: the resync would overwrite a Primary's data".into(),
        );
    }
    if !matches!(
        source.0,
        DiskState::UpToDate | DiskState::Outdated | DiskState::Consistent
    ) {
        return Outcome::StandAlone(format!(
            "the sync source's disk is {}: no copy to resync from",
            source.0
        ));
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only "unrelated data" or a split brain between an Inconsistent and an UpToDate side
    /// becomes a full sync, towards the Inconsistent side; every other pairing and decision is
    /// left alone.
    #[test]
    fn unrelated_data_with_an_inconsistent_side_is_a_full_sync_to_it() {
        use DiskState::{Consistent, Inconsistent, Outdated, UpToDate};
        let unrelated = Handshake {
            decision: SyncDecision::Unrelated,
            rule: Rule::UnrelatedData,
        };
        let rows = [
            (UpToDate, Inconsistent, SyncDecision::Source(Transfer::Full)),
            (Inconsistent, UpToDate, SyncDecision::Target(Transfer::Full)),
            (UpToDate, UpToDate, SyncDecision::Unrelated),
            (Inconsistent, Inconsistent, SyncDecision::Unrelated),
            (Outdated, Inconsistent, SyncDecision::Unrelated),
            (Consistent, Inconsistent, SyncDecision::Unrelated),
        ];
        for (local, peer, want) in rows {
            let got = settle_unrelated_inconsistent(unrelated, local, peer);
            assert_eq!(got.decision, want, "{local} / {peer}");
        }
        let no_sync = Handshake {
            decision: SyncDecision::NoSync,
            rule: Rule::EqualCurrent,
        };
        assert_eq!(
            settle_unrelated_inconsistent(no_sync, UpToDate, Inconsistent).decision,
            SyncDecision::NoSync
        );
        // A split brain with an Inconsistent side (a sync target shares its source's
        // lineage) is a full sync to it, as in DRBD; `keep_resync_goal` still refuses it when
        // the source lacks the generation the target's resync was bringing it to.
        for auto_recoverable in [false, true] {
            let split = Handshake {
                decision: SyncDecision::SplitBrain { auto_recoverable },
                rule: Rule::HistoryBoth,
            };
            assert_eq!(
                settle_unrelated_inconsistent(split, Inconsistent, UpToDate).decision,
                SyncDecision::Target(Transfer::Full)
            );
            assert_eq!(
                settle_unrelated_inconsistent(split, UpToDate, Inconsistent).decision,
                SyncDecision::Source(Transfer::Full)
            );
            assert_eq!(
                settle_unrelated_inconsistent(split, UpToDate, UpToDate).decision,
                split.decision
            );
        }
    }

    /// A resync to an Inconsistent side, by any rule, needs the source to hold the generation
    /// that side's resync was bringing it to (current, bitmap identifier or history); a goal
    /// the source never held is a split brain (the target may have a gone Primary's
    /// acknowledged writes), unless the target discards its data or has no goal, or is not
    /// Inconsistent.
    #[test]
    fn a_resync_goal_the_source_lacks_is_a_split_brain_not_a_resync() {
        use DiskState::{Inconsistent, Outdated, UpToDate};
        let mut target = GenerationIds::just_created();
        target.current = 0x5000;
        target.resync_goal = 0x7000;
        let mut source = GenerationIds::just_created();
        source.current = 0x9000;
        let split = SyncDecision::SplitBrain {
            auto_recoverable: false,
        };
        for transfer in [Transfer::Full, Transfer::Bitmap] {
            let decided = Handshake {
                decision: SyncDecision::Source(transfer),
                rule: Rule::BitmapSelf,
            };
            let got = keep_resync_goal(decided, (UpToDate, &source), (Inconsistent, &target));
            assert_eq!((got.decision, got.rule), (split, Rule::UnknownResyncGoal));
            let got = keep_resync_goal(
                decided.mirrored(),
                (Inconsistent, &target),
                (UpToDate, &source),
            );
            assert_eq!(
                (got.decision, got.rule),
                (split, Rule::UnknownResyncGoal),
                "both sides agree"
            );
        }
        let full = Handshake {
            decision: SyncDecision::Source(Transfer::Full),
            rule: Rule::UnrelatedData,
        };
        let knowing: [fn(&mut GenerationIds); 3] = [
            |ids| ids.current = 0x7001,
            |ids| ids.bitmap[3] = 0x7000,
            |ids| ids.history[1] = 0x7001,
        ];
        for (row, learn) in knowing.iter().enumerate() {
            let mut knows = source.clone();
            learn(&mut knows);
            assert_eq!(
                keep_resync_goal(full, (UpToDate, &knows), (Inconsistent, &target)),
                full,
                "row {row}"
            );
        }
        let mut discarding = target.clone();
        discarding.flags.discard_my_data = true;
        assert_eq!(
            keep_resync_goal(full, (UpToDate, &source), (Inconsistent, &discarding)),
            full,
            "discard-my-data"
        );
        assert_eq!(
            keep_resync_goal(full, (UpToDate, &source), (Outdated, &target)),
            full,
            "not Inconsistent"
        );
        let mut no_goal = target.clone();
        no_goal.resync_goal = 0;
        assert_eq!(
            keep_resync_goal(full, (UpToDate, &source), (Inconsistent, &no_goal)),
            full,
            "no goal"
        );
        let no_sync = Handshake {
            decision: SyncDecision::NoSync,
            rule: Rule::EqualCurrent,
        };
        assert_eq!(
            keep_resync_goal(no_sync, (UpToDate, &source), (Inconsistent, &target)),
            no_sync
        );
    }

    /// Equal current generations: an Inconsistent side facing an UpToDate one is the target
    /// whoever has bits (a Secondary whose replicated write failed marked it for every peer;
    /// the UpToDate peer may know nothing of it); then a side discarding its data is the
    /// target; then with bits the Primary is the source, else the side that followed their
    /// Primary further, else the side with bits, both: the lower node id; no bits: no sync.
    /// Both sides decide alike.
    #[test]
    fn equal_current_settles_by_disk_then_discard_then_role_then_bits() {
        use DiskState::{Inconsistent, Outdated, UpToDate};
        use Role::{Primary, Secondary};
        use SyncDecision::{NoSync, Source, Target};
        let side = equal_side;
        let bitmap = Transfer::Bitmap;
        check_equal_current(&[
            (
                side(0, UpToDate, Secondary, false),
                side(5, Inconsistent, Secondary, false),
                Source(bitmap),
            ),
            (
                side(5, Inconsistent, Secondary, false),
                side(0, UpToDate, Primary, false),
                Target(bitmap),
            ),
            (
                side(5, Inconsistent, Secondary, false),
                side(5, UpToDate, Secondary, false),
                Target(bitmap),
            ),
            (
                side(0, Inconsistent, Secondary, false),
                side(0, UpToDate, Secondary, false),
                Target(bitmap),
            ),
            (
                side(5, UpToDate, Secondary, true),
                side(5, UpToDate, Primary, false),
                Target(bitmap),
            ),
            (
                side(0, UpToDate, Secondary, false),
                side(9, UpToDate, Secondary, true),
                Source(bitmap),
            ),
            (
                side(5, UpToDate, Secondary, false),
                side(0, UpToDate, Secondary, false),
                Source(bitmap),
            ),
            (
                side(0, UpToDate, Secondary, false),
                side(5, UpToDate, Secondary, false),
                Target(bitmap),
            ),
            (
                side(5, UpToDate, Secondary, false),
                side(5, UpToDate, Secondary, false),
                Target(bitmap),
            ),
            (
                side(5, UpToDate, Secondary, false),
                side(5, UpToDate, Primary, false),
                Target(bitmap),
            ),
            (
                side(5, UpToDate, Secondary, false),
                side(0, UpToDate, Primary, false),
                Target(bitmap),
            ),
            (
                side(5, UpToDate, Primary, false),
                side(5, UpToDate, Secondary, false),
                Source(bitmap),
            ),
            (
                side(5, Inconsistent, Secondary, false),
                side(0, Outdated, Secondary, false),
                Source(bitmap),
            ),
            (
                side(0, UpToDate, Primary, false),
                side(0, UpToDate, Secondary, false),
                NoSync,
            ),
        ]);
    }

    /// Equal current identifiers where both sides followed a Primary (see above): the later
    /// write, then a side that went down uncleanly, then the bits decide.
    #[test]
    fn equal_current_settles_by_the_followed_write_then_a_crash() {
        use DiskState::UpToDate;
        use Role::{Primary, Secondary};
        use SyncDecision::{NoSync, Source, Target};
        let (side, after) = (equal_side, followed_side);
        let bitmap = Transfer::Bitmap;
        check_equal_current(&[
            // Both followed one Primary: the side that received its later write is the
            // source, whoever has bits (the lower node id would lose that write).
            (after(5, 0, 90), after(5, 0, 88), Source(bitmap)),
            (after(5, 0, 88), after(0, 0, 90), Target(bitmap)),
            (after(0, 0, 90), after(5, 0, 88), Source(bitmap)),
            // Different Primaries, or the same write: the bits decide.
            (after(5, 0, 90), after(5, 3, 88), Target(bitmap)),
            (after(5, 0, 90), after(0, 0, 90), Source(bitmap)),
            (after(0, 0, 90), after(0, 0, 88), NoSync),
            // A side that went down uncleanly (it knows no Primary any more) is the target of
            // one that did not, whoever has bits; a Primary still wins.
            (
                EqualSide {
                    crashed: true,
                    ..after(5, 0, 90)
                },
                after(5, 0, 88),
                Target(bitmap),
            ),
            (
                after(0, 0, 88),
                EqualSide {
                    crashed: true,
                    ..side(5, UpToDate, Secondary, false)
                },
                Source(bitmap),
            ),
            (
                EqualSide {
                    crashed: true,
                    ..side(5, UpToDate, Primary, false)
                },
                after(5, 0, 88),
                Source(bitmap),
            ),
        ]);
    }

    /// A side of [`settle_equal_current`] that followed no Primary and did not crash.
    fn equal_side(bits: u64, disk: DiskState, role: Role, discard: bool) -> EqualSide {
        EqualSide {
            bits,
            disk,
            role,
            discard,
            followed: None,
            crashed: false,
        }
    }

    /// An UpToDate Secondary side that followed Primary `node` up to its write `seq`.
    fn followed_side(bits: u64, node: u8, seq: u64) -> EqualSide {
        EqualSide {
            followed: Some(Followed { node, seq }),
            ..equal_side(bits, DiskState::UpToDate, Role::Secondary, false)
        }
    }

    /// Each row's local and peer sides settle as it says, and both sides decide alike.
    fn check_equal_current(rows: &[(EqualSide, EqualSide, SyncDecision)]) {
        use SyncDecision::{NoSync, Source, Target};
        let node = |id| crate::uuid::NodeId::new(id).expect("node id");
        let nodes = HandshakeNodes::new(node(2), node(1)).expect("distinct");
        let equal = Handshake {
            decision: NoSync,
            rule: Rule::EqualCurrent,
        };
        for &(local, peer, want) in rows {
            let got = settle_equal_current(equal, local, peer, nodes);
            assert_eq!(got.decision, want, "{local:?} / {peer:?}");
            let mirrored = settle_equal_current(equal, peer, local, nodes.mirrored());
            let mirror = match want {
                Source(t) => Target(t),
                Target(t) => Source(t),
                other => other,
            };
            assert_eq!(
                mirrored.decision, mirror,
                "both sides decide alike: {peer:?} / {local:?}"
            );
        }
    }
}
