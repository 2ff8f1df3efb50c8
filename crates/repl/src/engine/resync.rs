//! The resync itself, once the bitmaps are exchanged: the target requests the blocks set in
//! its bitmap, paced by the rate controller and bounded by `max-buffers`; the source reads and
//! sends them; the target writes them and clears its bits, the source clears its bits when the
//! target confirms.
//!
//! **Pacing (target):** at each tick the controller (`resync_rate.rs`) sets the tick's
//! budget and, in dynamic mode, a window (the data in flight it aims at); `issue_requests`
//! runs at the tick and again whenever in-flight space is freed (a reply written, a negative
//! reply), asking the controller each time. So once the budget is spent the window is
//! refilled as soon as replies come back, within the tick's `c-max-rate` (and, while
//! application I/O arrives, `c-min-rate`) cap, instead of waiting for the next tick. In fixed
//! mode only the budget is issued. **Invariant (asserted in `issue_requests`):** data in
//! flight (requested, not yet written) never exceeds `max-buffers`, whatever the controller
//! allows.
//!
//! **Invariant (application writes during a resync; asserted in `start_write`,
//! `start_resync_reads` and the receiver):** a block a client wrote is never overwritten by
//! older resync data.
//! - On the source, a resync read starts only when no client write to its blocks is in flight
//!   and no write to them sent to this peer is unconfirmed (its transfer-log entry is gone:
//!   written on the target). A client write to blocks being read, or whose reply the target
//!   has not confirmed, waits until the target's ack. So the two never run concurrently, and
//!   whichever started first reaches the data socket first.
//! - On the target, writes arrive on that one ordered socket and the receiver applies
//!   overlapping ones in arrival order, never concurrently. So a resync reply read before a
//!   write lands before it, and one read after it carries its data.
//! - Writes from an earlier connection that are still being applied are ordered the same way
//!   (they arrived earlier), and their blocks stay out of sync on the source until confirmed.
//!
//! A resync that ends with failed blocks (a write error on the target, a read error on the
//! source) leaves the target Inconsistent with those blocks still marked, and the target drops
//! the link: the reconnect after `connect-int` retries them.

use crate::engine::{csums, Engine};
use crate::extent::Extent;
use crate::resync_rate::{Allowance, ResyncLoad, ResyncTick};
use crate::state::{DiskState, Role};
use crate::sync::{Requested, SyncState};
use crate::types::{Action, DiskOp, IoError, IoId, PeerMessage, Time};
use crate::PeerViolation;

/// Largest single resync request.
pub const RESYNC_REQUEST_BYTES_MAX: u64 = 128 * 1024;
/// Bytes of a `max-buffers` page.
const PAGE_BYTES: u64 = 4096;
/// DRBD's largest `max-buffers`, in pages: a source accepts requests up to this much in
/// flight, so a target configured with more buffers than the source still works.
const MAX_BUFFERS_PAGES_LIMIT: u64 = 131_072;

impl<P: Clone> Engine<P> {
    /// Bytes of resync data one peer may have in flight.
    fn resync_in_flight_max(&self, slot: usize) -> u64 {
        u64::from(self.peers[slot].config.max_buffers_pages) * PAGE_BYTES
    }

    /// Whether a resync read, or a reply the target has not confirmed, covers part of `extent`
    /// on `volume` (a client write to it must wait).
    pub(super) fn resync_busy(&self, volume: u16, extent: &Extent) -> bool {
        let Some(vslot) = self.volume_slot(volume) else {
            return false;
        };
        self.peers
            .iter()
            .any(|p| matches!(&p.syncs[vslot], SyncState::Source(source) if source.is_busy(extent)))
    }

    // ----- source ---------------------------------------------------------------------------

    pub(super) fn receive_resync_request(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ResyncRequestUnknownVolume { volume })?;
        let granularity = u64::from(self.peers[slot].bitmaps[vslot].granularity_bytes());
        let valid = Extent::new(extent.offset, extent.length)
            .filter(|e| {
                e.length > 0
                    && e.length <= RESYNC_REQUEST_BYTES_MAX
                    && e.end() <= self.volumes[vslot].size_bytes
            })
            .filter(|e| e.offset % granularity == 0);
        if valid.is_none() {
            return Err(PeerViolation::ResyncRequestInvalid {
                id,
                offset: extent.offset,
                length: extent.length,
            });
        }
        let limit = MAX_BUFFERS_PAGES_LIMIT * PAGE_BYTES + RESYNC_REQUEST_BYTES_MAX;
        let SyncState::Source(source) = &mut self.peers[slot].syncs[vslot] else {
            return Err(PeerViolation::ResyncRequestNotSource { volume });
        };
        if source.knows(id) {
            return Err(PeerViolation::ResyncRequestTwice { id });
        }
        if source.busy_bytes() + extent.length > limit {
            return Err(PeerViolation::ResyncRequestsBeyondMaxBuffers { limit_bytes: limit });
        }
        source
            .queued
            .push_back((id, Requested { extent, since: now }));
        Ok(())
    }

    /// Starts every queued resync read whose blocks no client write holds (see the module
    /// invariant).
    pub(super) fn start_resync_reads(&mut self, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            for vslot in 0..self.volumes.len() {
                if matches!(self.peers[slot].syncs[vslot], SyncState::Source(_)) {
                    self.start_reads_for(slot, vslot, out);
                }
            }
        }
    }

    fn start_reads_for(&mut self, slot: usize, vslot: usize, out: &mut Vec<Action<P>>) {
        let volume = self.volumes[vslot].number;
        let peer = self.peers[slot].config.node_id;
        // Client writes held for the activity log count: they go before the read.
        let in_flight: Vec<Extent> = self
            .in_flight
            .values()
            .filter(|w| w.volume == volume)
            .map(|w| w.extent)
            .chain(self.held.iter().filter_map(|h| h.extent_on(volume)))
            .collect();
        let p = &mut self.peers[slot];
        let block_bytes = p.bitmaps[vslot].granularity_bytes();
        let unconfirmed: Vec<Extent> = p
            .transfer_log
            .iter()
            .filter(|s| s.volume == volume)
            .map(|s| s.extent)
            .collect();
        let SyncState::Source(source) = &mut p.syncs[vslot] else {
            return;
        };
        let mut index = 0;
        while index < source.queued.len() {
            let (_, request) = source.queued[index];
            let held = in_flight
                .iter()
                .chain(&unconfirmed)
                .any(|e| e.overlaps(&request.extent));
            if held {
                index += 1;
                continue;
            }
            let Some((id, request)) = source.queued.remove(index) else {
                break;
            };
            assert!(
                !in_flight.iter().any(|e| e.overlaps(&request.extent)),
                "a resync read would run with a client write"
            );
            source.reading.insert(id, request);
            if source.csums.contains_key(&id) {
                let io = IoId::CsumPeerRead { peer, id };
                out.push(csums::digest_action(
                    io,
                    volume,
                    request.extent,
                    block_bytes,
                ));
                continue;
            }
            let Extent { offset, length } = request.extent;
            out.push(Action::LocalRead {
                io: IoId::ResyncRead { peer, id },
                volume,
                offset,
                length,
            });
        }
    }

    /// A `LocalRead` finished: `data` is the `length` bytes read (or why not).
    pub fn local_read_done(
        &mut self,
        now: Time,
        io: IoId,
        result: Result<P, IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        if let IoId::ForwardedRead { peer, id } = io {
            self.forwarded_read_done(peer, id, result, out);
            return;
        }
        let IoId::ResyncRead { peer, id } = io else {
            return;
        };
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let found = self.peers[slot].syncs.iter().position(
            |s| matches!(s, SyncState::Source(source) if source.reading.contains_key(&id)),
        );
        // Not found: the connection ended since; the blocks stay out of sync.
        let Some(vslot) = found else { return };
        let volume = self.volumes[vslot].number;
        let p = &mut self.peers[slot];
        let SyncState::Source(source) = &mut p.syncs[vslot] else {
            return;
        };
        let Some(request) = source.reading.remove(&id) else {
            return;
        };
        let Extent { offset, length } = request.extent;
        match result {
            Ok(data) => {
                source.awaiting.insert(id, request);
                p.sent_bytes[vslot] += length;
                out.push(Action::SendOnData {
                    peer,
                    message: PeerMessage::ResyncReply {
                        id,
                        volume,
                        offset,
                        length,
                        data,
                    },
                });
            }
            Err(_) => {
                source.progress.failed_bytes += length;
                out.push(Action::SendOnData {
                    peer,
                    message: PeerMessage::ResyncNegReply {
                        id,
                        volume,
                        offset,
                        length,
                    },
                });
                self.start_waiting(now, out);
            }
        }
    }

    pub(super) fn receive_resync_ack(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        ok: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ResyncAckUnknownVolume { volume })?;
        let p = &mut self.peers[slot];
        let SyncState::Source(source) = &mut p.syncs[vslot] else {
            return Err(PeerViolation::ResyncAckNotSource { volume });
        };
        let request = source
            .awaiting
            .remove(&id)
            .ok_or(PeerViolation::ResyncAckUnknownReply { id })?;
        let Extent { offset, length } = request.extent;
        if ok {
            // Checked against the volume when the request came in.
            let cleared = p.bitmaps[vslot].clear(offset, length);
            assert!(
                cleared.is_ok(),
                "a checked resync range lies within its bitmap"
            );
            source.progress.done_bytes += length;
        } else {
            source.progress.failed_bytes += length;
        }
        self.start_waiting(now, out);
        Ok(())
    }

    pub(super) fn receive_resync_done(
        &mut self,
        slot: usize,
        volume: u16,
        failed_bytes: u64,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ResyncDoneUnknownVolume { volume })?;
        let SyncState::Source(source) = &self.peers[slot].syncs[vslot] else {
            return Err(PeerViolation::ResyncDoneNotSource { volume });
        };
        if source.busy_bytes() != 0 {
            return Err(PeerViolation::ResyncDoneOutstanding { volume });
        }
        self.peers[slot].syncs[vslot] = SyncState::Established;
        if failed_bytes == 0 {
            let peer = self.peers[slot].node;
            let owed = self.bits_owed_to_others(slot, vslot);
            let ids = &mut self.volumes[vslot].ids;
            ids.clear_bitmap_uuid(peer);
            if !owed {
                ids.flags.crashed_primary = false;
            }
            self.peers[slot].disks[vslot] = DiskState::UpToDate;
        }
        self.meta_changed(vslot, out);
        Ok(())
    }

    /// Whether this node still holds out-of-sync bits on `vslot` for a peer other than `slot`
    /// that has a disk (a `disk none;` peer keeps no bitmap).
    ///
    /// Invariant: a node that crashed as Primary keeps its `crashed_primary` flag until a
    /// resync as source leaves no bits for any such peer, not just until the first one ends.
    /// Its hot extents were marked for every peer at attach, and the flag is what makes it the
    /// source of an equal-current handshake (`uuid::compare`, `Rule::CrashedPrimaryPeer`)
    /// and keeps its target's other Secondaries away (`leave_secondaries_beside_crashed_source`).
    /// Cleared after the first peer, the second peer's equal-current handshake fell to the
    /// tie-break of `settle_equal_current` (both having bits: the lower node id), which made a
    /// Secondary that lacked the crashed Primary's last acknowledged writes the source of a
    /// resync of it, while it stayed Established with the first peer: the two ended UpToDate
    /// and different, and the write was gone from it (simulator seed 6671).
    fn bits_owed_to_others(&self, slot: usize, vslot: usize) -> bool {
        self.peers.iter().enumerate().any(|(other, p)| {
            other != slot && !p.bitmap_free[vslot] && p.bitmaps[vslot].count_set_blocks() > 0
        })
    }

    // ----- target ---------------------------------------------------------------------------

    /// Once per tick for a connected peer: the resync's pacing and progress samples.
    pub(super) fn resync_tick(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        for vslot in 0..self.volumes.len() {
            match &mut self.peers[slot].syncs[vslot] {
                SyncState::Source(source) => source.progress.sample(now),
                SyncState::Target(_) => self.target_tick(now, slot, vslot, out),
                _ => {}
            }
        }
    }

    /// Asks the rate controller for this tick's budget and issues requests within it.
    pub(super) fn target_tick(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let p = &mut self.peers[slot];
        let SyncState::Target(target) = &mut p.syncs[vslot] else {
            return;
        };
        target.progress.sample(now);
        let in_flight_bytes = target.in_flight_bytes();
        let set_bytes = p.bitmaps[vslot].count_set_bytes();
        let pending_bytes = set_bytes
            .saturating_sub(in_flight_bytes)
            .saturating_sub(target.progress.failed_bytes);
        let tick = ResyncTick {
            now,
            in_flight_bytes,
            answered_bytes: std::mem::take(&mut target.answered_since_tick),
            round_trip: target.round_trip,
            application_active: std::mem::take(&mut target.application_active),
            pending_bytes,
        };
        target.controller.tick(&tick);
        self.issue_requests(now, slot, vslot, out);
    }

    /// Requests runs of set blocks from the cursor on, while the controller's allowance and
    /// `max-buffers` allow; finishes the resync when nothing is left. Called at each tick and
    /// whenever in-flight space is freed (a reply written, a negative reply), so in dynamic
    /// mode the window is refilled as soon as replies come back.
    pub(super) fn issue_requests(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        if self.sync_pause(slot, vslot).any() {
            return;
        }
        let in_flight_max = self.resync_in_flight_max(slot);
        let (volume, size_bytes) = (self.volumes[vslot].number, self.volumes[vslot].size_bytes);
        let p = &mut self.peers[slot];
        let (peer, csums) = (p.config.node_id, p.config.csums);
        let bitmap = &p.bitmaps[vslot];
        let SyncState::Target(target) = &mut p.syncs[vslot] else {
            return;
        };
        let granularity = u64::from(bitmap.granularity_bytes());
        loop {
            // Only requests issued here add to it, each within the room; it can exceed the
            // limit only after `adjust` lowered max-buffers, and then nothing is issued until
            // replies drain it.
            let in_flight_bytes = target.in_flight_bytes();
            let Some(first) = bitmap.next_set(target.cursor) else {
                break;
            };
            // The first block may be the volume's last, shorter one.
            let smallest = granularity.min(size_bytes - first * granularity);
            let room = in_flight_max.saturating_sub(in_flight_bytes);
            let load = ResyncLoad {
                in_flight_bytes,
                application_active: target.application_active,
            };
            let allowance = target.controller.allowance(&load);
            let Some(limit) = request_limit(allowance, granularity, smallest) else {
                break;
            };
            if room < smallest {
                break;
            }
            let blocks_max = (room.min(RESYNC_REQUEST_BYTES_MAX).min(limit) / granularity).max(1);
            let end = bitmap
                .next_clear(first)
                .unwrap_or(bitmap.block_count())
                .min(first + blocks_max);
            let offset = first * granularity;
            let length = (end * granularity).min(size_bytes) - offset;
            assert!(length <= room, "a resync request beyond max-buffers");
            let id = self.next_request_id;
            self.next_request_id += 1;
            let extent = Extent { offset, length };
            target.requests.insert(id, Requested { extent, since: now });
            target.cursor = end;
            target.controller.issued(length);
            if csums {
                let (io, extent) = (IoId::CsumRead { peer, id }, Extent { offset, length });
                out.push(csums::digest_action(
                    io,
                    volume,
                    extent,
                    bitmap.granularity_bytes(),
                ));
                continue;
            }
            out.push(Action::SendOnData {
                peer,
                message: PeerMessage::ResyncRequest {
                    id,
                    volume,
                    offset,
                    length,
                },
            });
        }
        self.finish_target_if_done(now, slot, vslot, out);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive_resync_reply(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        data: P,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ResyncReplyUnknownVolume { volume })?;
        let p = &mut self.peers[slot];
        let SyncState::Target(target) = &mut p.syncs[vslot] else {
            return Err(PeerViolation::ResyncReplyNotTarget { volume });
        };
        let request = target
            .requests
            .remove(&id)
            .ok_or(PeerViolation::ResyncReplyUnknownRequest { id })?;
        if request.extent != extent {
            return Err(PeerViolation::ResyncReplyWrongRange { id });
        }
        target.round_trip = Some(now.since(request.since));
        target.answered_since_tick += extent.length;
        target.writing.insert(id, request);
        p.received_bytes[vslot] += extent.length;
        // The block changes here: no other peer gets it through us.
        self.mark_resync_write(slot, vslot, extent);
        let p = &mut self.peers[slot];
        let op = DiskOp::Write {
            offset: extent.offset,
            length: extent.length,
            data,
            fua: false,
        };
        p.receiver.resync(id, volume, extent, op, out);
        Ok(())
    }

    pub(super) fn receive_resync_neg_reply(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ResyncNegativeReplyUnknownVolume { volume })?;
        let SyncState::Target(target) = &mut self.peers[slot].syncs[vslot] else {
            return Err(PeerViolation::ResyncNegativeReplyNotTarget { volume });
        };
        let request = target
            .requests
            .remove(&id)
            .ok_or(PeerViolation::ResyncNegativeReplyUnknownRequest { id })?;
        if request.extent != extent {
            return Err(PeerViolation::ResyncNegativeReplyWrongRange { id });
        }
        // The blocks stay out of sync; the resync goes on without them.
        target.progress.failed_bytes += extent.length;
        self.issue_requests(now, slot, vslot, out);
        Ok(())
    }

    /// A resync write finished: clear its bits (on success) and tell the source.
    pub(super) fn resync_write_done(
        &mut self,
        now: Time,
        peer: u8,
        id: u64,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let Some((volume, extent)) = self.peers[slot].receiver.resync_done(id, out) else {
            return;
        };
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        let p = &mut self.peers[slot];
        // A write of an earlier connection's resync: its bits stay set (the source did not
        // see it confirmed either).
        let SyncState::Target(target) = &mut p.syncs[vslot] else {
            return;
        };
        if target.writing.remove(&id).is_none() {
            return;
        }
        let ok = result.is_ok();
        if ok {
            let cleared = p.bitmaps[vslot].clear(extent.offset, extent.length);
            assert!(cleared.is_ok(), "a requested range lies within its bitmap");
            target.progress.done_bytes += extent.length;
        } else {
            target.progress.failed_bytes += extent.length;
        }
        out.push(Action::SendOnData {
            peer,
            message: PeerMessage::ResyncAck { id, volume, ok },
        });
        self.issue_requests(now, slot, vslot, out);
    }

    /// Nothing requested, being written or left to request: the resync is over. On success
    /// adopt the source's identifiers and become UpToDate; either way tell the source. After
    /// failures (a disk error here, a read error there) the disk stays Inconsistent with the
    /// failed blocks still marked, and the link is dropped: the reconnect after `connect-int`
    /// retries them, so a disk that recovers is brought back without an administrator.
    fn finish_target_if_done(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let p = &self.peers[slot];
        let SyncState::Target(target) = &p.syncs[vslot] else {
            return;
        };
        let left = p.bitmaps[vslot].next_set(target.cursor).is_some();
        if left || !target.requests.is_empty() || !target.writing.is_empty() {
            return;
        }
        let state = std::mem::replace(&mut self.peers[slot].syncs[vslot], SyncState::Established);
        let SyncState::Target(target) = state else {
            return;
        };
        let failed_bytes = target.progress.failed_bytes;
        if failed_bytes == 0 {
            let adoption = crate::uuid::Adoption {
                local: self.node,
                source: self.peers[slot].node,
                role: self.role,
            };
            let before = self.volumes[vslot].ids.clone();
            self.volumes[vslot]
                .ids
                .adopt_source(&target.source_ids, adoption);
            if self.role == Role::Primary {
                self.volumes[vslot].ids.mark_role(Role::Primary);
            }
            // The data is the source's, and so is how current it is known to be: a resync
            // from an Outdated (or merely Consistent) disk leaves this one Outdated (or
            // Consistent) too, never UpToDate and promotable without the newer writes.
            self.volumes[vslot].disk = match self.peers[slot].disks[vslot] {
                source @ (DiskState::Outdated | DiskState::Consistent) => source,
                _ => DiskState::UpToDate,
            };
            self.bits_for_adopted_bitmap_uuids(slot, vslot, &before);
        }
        let (peer, volume) = (self.peers[slot].config.node_id, self.volumes[vslot].number);
        out.push(Action::SendOnData {
            peer,
            message: PeerMessage::ResyncDone {
                volume,
                failed_bytes,
            },
        });
        self.meta_changed(vslot, out);
        if failed_bytes == 0 {
            self.tell_secondaries_of_new_generation(slot, vslot, out);
            if self.volumes[vslot].disk == DiskState::UpToDate && self.role == Role::Secondary {
                self.rehandshake_after_resync(slot, vslot, out);
            }
        }
        if failed_bytes > 0 {
            let reason = format!(
                "the resync of volume {volume} left {failed_bytes} bytes failed: reconnecting to \
                 retry them"
            );
            self.drop_peer(now, slot, crate::state::ConnState::Unconnected, reason, out);
        }
    }
}

impl<P: Clone> Engine<P> {
    /// After taking over identifiers from the peer in `source` (`before`: ours until then), at
    /// the end of a resync or by a Primary's rotation: a third peer's bitmap identifier that
    /// is new to us counts changes our bitmap for that peer never saw (the source's changes,
    /// or writes the Primary sent after that peer left and before we noticed). Every block is
    /// marked for it, so the bitmap rules move everything when they meet (a full resync)
    /// instead of too little; with a Primary near, it resyncs that peer from its own bits
    /// first. Where the identifier is unchanged, our own bits already cover every block we
    /// changed since (writes applied while that peer was away are marked).
    pub(super) fn bits_for_adopted_bitmap_uuids(
        &mut self,
        source: usize,
        vslot: usize,
        before: &crate::GenerationIds,
    ) {
        let after = self.volumes[vslot].ids.clone();
        for third in 0..self.peers.len() {
            if third == source {
                continue;
            }
            let peer = self.peers[third].node;
            let (old, new) = (before.bitmap_uuid(peer), after.bitmap_uuid(peer));
            if new != 0 && crate::uuid::without_primary(new) != crate::uuid::without_primary(old) {
                self.peers[third].bitmaps[vslot].set_all();
            }
        }
    }
}

/// The most bytes the next request may cover under `allowance`, or `None` if no request fits
/// (`smallest` is the length of the first block to request: a whole block, or the volume's
/// shorter last one).
pub(super) fn request_limit(allowance: Allowance, granularity: u64, smallest: u64) -> Option<u64> {
    match allowance {
        Allowance::Wait => None,
        // Rounded up to a block: a request overdraws the tick's budget by less than a block.
        Allowance::Budget { bytes } => Some(bytes.next_multiple_of(granularity)),
        // Whole blocks within the room: a refill never passes the window or the cap.
        Allowance::Refill { bytes } if bytes >= smallest => Some(bytes),
        Allowance::Refill { .. } => None,
    }
}
