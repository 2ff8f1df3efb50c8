//! Online verify (`tandem verify`; DRBD's `drbdadm verify`, drbd-semantics.md §3): compare a
//! volume with a peer's copy block by block while both stay in service, moving only digests.
//!
//! The node that runs it is the **verify source** (VerifyS); the peer becomes the **verify
//! target** (VerifyT) when the first request arrives (there is no announcement: a request
//! says it all). The source walks the volume from 0 in ranges of up to
//! [`VERIFY_REQUEST_BYTES_MAX`], paced by the resync rate controller and bounded by
//! `max-buffers`. For each range both sides digest their copy ([`Action::LocalDigest`]; the
//! driver computes one digest per bitmap block with `verify-alg`, the engine only compares
//! byte strings) and the target sends its digests back. Every block whose digests differ is
//! marked out of sync for the peer, counted and reported ([`Action::VerifyFound`]). At the
//! end the source sends `VerifyDone` and both are Established again. Like DRBD, verify does
//! not repair: the marked blocks are resynced at the next reconnect (from the verify source,
//! whose bitmap holds them: run verify on the node whose data should win, normally the
//! Primary) or by `invalidate-remote`.
//!
//! **Digest lengths:** the driver's algorithm decides the length of one digest. A node's own
//! digests must be a non-empty multiple of the range's block count and at most
//! [`VERIFY_DIGESTS_BYTES_MAX`], or the range counts as unreadable. The source requires the
//! target's digests to be exactly as long as its own: a difference means the two nodes use
//! different `verify-alg`s or bitmap block sizes, and is a protocol error. A range either
//! side could not read is not judged: it counts as failed in the progress, and is not marked
//! (the driver reports the read error itself).
//!
//! **Invariant (writes during a verify):** a block that a write may have changed between the
//! two digests is not judged; every other block of its range is. So a write neither causes a
//! false difference nor hides a real one in a neighbouring block. A write is *unfinished* on
//! a node until its local disk write finished (a client write's local half, or a received
//! write). Each side marks blocks "written", per range:
//! - the source, when it issues a range: the blocks of writes unfinished here; and until it
//!   judges the range: the blocks of every client write that starts here and every write that
//!   arrives here;
//! - the target, when the request arrives: the blocks of writes unfinished there; and until
//!   its digest finished: the blocks of every write that starts or arrives there. It sends its
//!   marks with the digests (`written_blocks`), and the source adds them to its own.
//!
//! With two nodes this covers every write (writes and verify messages share the ordered data
//! socket): a write that lands on one side only between the two digests is either unfinished
//! on one side at the right moment, or is submitted or received on the source before the
//! reply arrives. Blocks not judged are counted (`verify_skipped_bytes`), never marked. With a
//! third node as Primary, its writes reach the two sides on separate sockets: one that has
//! finished on the target before the request arrives and reaches the source only after the
//! range was judged makes a block look different (it is marked and resynced, harmlessly).
//!
//! A disconnect ends the verify at once (both sides Off, the digests still running are
//! dropped when they finish); a handshake from the peer ends it in favour of the handshake.
//! If both nodes start a verify at once, the one with the lower node id keeps it and ignores
//! the other's requests; the other becomes its target when the first request arrives.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::{mark, Engine, Stage};
use crate::extent::Extent;
use crate::resync_rate::{ResyncLoad, ResyncRateController, ResyncTick};
use crate::state::{ConnState, DiskState};
use crate::sync::{Progress, SyncState};
use crate::types::{
    Action, DigestAlg, IoError, IoId, PeerMessage, ResyncProgress, StateError, Time, UuidsMessage,
    UuidsPurpose, VerifyOutcome,
};
use crate::PeerViolation;

#[cfg(test)]
mod tests;

/// Largest range one verify request covers (for bitmap blocks larger than this: one block).
pub const VERIFY_REQUEST_BYTES_MAX: u64 = 128 * 1024;
/// Most digest bytes of one range: what one wire `VerifyReply` carries
/// (`wire::VERIFY_DIGESTS_LEN_MAX`). With 4 KiB blocks that is 127 bytes per block.
pub const VERIFY_DIGESTS_BYTES_MAX: usize = 4069;
/// Most blocks one range has (the bits of a written-block mask).
const RANGE_BLOCKS_MAX: u64 = 32;
/// Bytes of a `max-buffers` page (as in `engine/resync.rs`).
const PAGE_BYTES: u64 = 4096;
/// DRBD's largest `max-buffers`, in pages: a verify target accepts requests up to this much in
/// flight (as a sync source does), whatever the source's own setting.
const MAX_BUFFERS_PAGES_LIMIT: u64 = 131_072;

// Ranges of the smallest bitmap blocks fit a 32-bit mask; larger blocks give fewer per range.
const _: () = assert!(meta::layout::BITMAP_GRANULARITY_BYTES_MIN >= 4096);
const _: () = assert!(VERIFY_REQUEST_BYTES_MAX / 4096 <= RANGE_BLOCKS_MAX);
const _: () = assert!(RANGE_BLOCKS_MAX <= u32::BITS as u64);
// A range of 4 KiB blocks with SHA-512 digests fits one reply.
const _: () = assert!(VERIFY_REQUEST_BYTES_MAX / 4096 * 64 <= VERIFY_DIGESTS_BYTES_MAX as u64);

/// What the latest online verify of one volume with one peer found (kept after it ends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct VerifyCounts {
    /// Bytes found differing (marked out of sync).
    pub(crate) oos_bytes: u64,
    /// Bytes not judged because a write touched them meanwhile (source side only).
    pub(crate) skipped_bytes: u64,
}

/// One side's digests of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Digests {
    /// One per block, concatenated.
    Ready(Vec<u8>),
    /// The range could not be read (or the digests broke the driver contract).
    Failed,
}

/// A range the source asked about and has not judged yet.
#[derive(Debug)]
struct VerifyRange {
    extent: Extent,
    /// When it was issued (for the round trip).
    since: Time,
    local: Option<Digests>,
    remote: Option<Digests>,
    /// Bit `i`: block `i` of the range was (maybe) written while the range was in flight.
    written: u32,
}

/// VerifyS: this node walks the volume and judges.
#[derive(Debug)]
pub(crate) struct VerifySource {
    /// The peer's bitmap block: one digest each.
    block_bytes: u64,
    /// The next byte to verify; only grows, always a block boundary (or the volume's end).
    cursor: u64,
    /// Ranges issued and not judged, by request id (ids and offsets grow together).
    ranges: BTreeMap<u64, VerifyRange>,
    controller: ResyncRateController,
    /// Bytes that may still be issued in this tick; negative: overdrawn, repaid later.
    /// Bytes judged since the last tick (for the controller).
    judged_since_tick: u64,
    round_trip: Option<Duration>,
    /// A write touched the volume since the last tick (application I/O for `c-min-rate`).
    application_active: bool,
    progress: Progress,
}

impl VerifySource {
    fn new(block_bytes: u64, size_bytes: u64, controller: ResyncRateController, now: Time) -> Self {
        VerifySource {
            block_bytes,
            cursor: 0,
            ranges: BTreeMap::new(),
            controller,
            judged_since_tick: 0,
            round_trip: None,
            application_active: false,
            progress: Progress::new(size_bytes, now),
        }
    }

    /// Bytes issued and not judged.
    fn in_flight_bytes(&self) -> u64 {
        self.ranges.values().map(|r| r.extent.length).sum()
    }

    /// The progress `status` shows (`done` counts judged and skipped bytes, `failed` the
    /// unreadable ones).
    pub(crate) fn report(&self) -> ResyncProgress {
        self.progress.report(self.in_flight_bytes())
    }

    /// The longest range: [`VERIFY_REQUEST_BYTES_MAX`] in whole blocks, at least one block.
    fn range_bytes_max(&self) -> u64 {
        (VERIFY_REQUEST_BYTES_MAX / self.block_bytes).max(1) * self.block_bytes
    }

    fn note_write(&mut self, write: Extent) {
        self.application_active = true;
        for range in self.ranges.values_mut() {
            range.written |= block_mask(range.extent, write, self.block_bytes);
        }
    }
}

/// A request the target is digesting.
#[derive(Debug, Clone, Copy)]
struct Answering {
    /// The source's id of the request.
    request: u64,
    extent: Extent,
    /// Bit `i`: block `i` of the range was (maybe) written while it was being digested.
    written: u32,
}

/// VerifyT: this node answers the peer's requests.
#[derive(Debug)]
pub(crate) struct VerifyTarget {
    /// Our bitmap block for the peer: one digest each.
    block_bytes: u64,
    /// Requests whose digests are being computed, by our own id for the digest (unique for
    /// the engine's life, unlike the peer's ids, which restart with the peer: a digest of an
    /// earlier connection can never pass for the answer to a new request).
    answering: BTreeMap<u64, Answering>,
    progress: Progress,
}

impl VerifyTarget {
    fn new(block_bytes: u64, size_bytes: u64, now: Time) -> Self {
        VerifyTarget {
            block_bytes,
            answering: BTreeMap::new(),
            progress: Progress::new(size_bytes, now),
        }
    }

    fn in_flight_bytes(&self) -> u64 {
        self.answering.values().map(|a| a.extent.length).sum()
    }

    /// The progress `status` shows: the bytes answered of the volume.
    pub(crate) fn report(&self) -> ResyncProgress {
        self.progress.report(self.in_flight_bytes())
    }

    fn note_write(&mut self, write: Extent) {
        for answer in self.answering.values_mut() {
            answer.written |= block_mask(answer.extent, write, self.block_bytes);
        }
    }
}

/// What judging one range gave.
#[derive(Debug, Default, PartialEq, Eq)]
struct Verdict {
    /// Runs of differing blocks, ascending.
    found: Vec<Extent>,
    skipped_bytes: u64,
    failed_bytes: u64,
}

impl<P: Clone> Engine<P> {
    /// `tandem verify`: become the verify source towards `peer` (every connected peer if
    /// `None`) for every volume; see the module documentation. Refused, changing nothing,
    /// unless each such peer is connected with every volume Established (no handshake, resync
    /// or verify running) and both disks UpToDate.
    pub fn start_verify(
        &mut self,
        now: Time,
        peer: Option<u8>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slots = self.verify_peer_slots(peer)?;
        for &slot in &slots {
            for vslot in 0..self.volumes.len() {
                self.check_verifiable(slot, vslot)?;
            }
        }
        for slot in slots {
            for vslot in 0..self.volumes.len() {
                self.begin_verify_source(now, slot, vslot, out);
            }
        }
        Ok(())
    }

    fn verify_peer_slots(&self, peer: Option<u8>) -> Result<Vec<usize>, StateError> {
        if let Some(peer) = peer {
            return Ok(vec![self
                .peer_slot(peer)
                .ok_or(StateError::NoSuchPeer(peer))?]);
        }
        let slots: Vec<usize> = (0..self.peers.len())
            .filter(|&slot| self.peers[slot].connection == ConnState::Connected)
            .collect();
        if slots.is_empty() {
            return Err(StateError::NoConnectedPeer);
        }
        Ok(slots)
    }

    fn check_verifiable(&self, slot: usize, vslot: usize) -> Result<(), StateError> {
        let p = &self.peers[slot];
        let peer = p.config.name.clone();
        if p.connection != ConnState::Connected {
            return Err(StateError::PeerNotConnected { peer });
        }
        if !matches!(p.syncs[vslot], SyncState::Established) {
            return Err(StateError::SyncInProgress { peer });
        }
        let (local, peer_disk) = (self.volumes[vslot].disk, p.disks[vslot]);
        if local != DiskState::UpToDate || peer_disk != DiskState::UpToDate {
            return Err(StateError::VerifyNeedsUpToDate {
                peer,
                local,
                peer_disk,
            });
        }
        Ok(())
    }

    fn begin_verify_source(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let size_bytes = self.volumes[vslot].size_bytes;
        let p = &mut self.peers[slot];
        let mut controller = p.rate.clone();
        controller.restart();
        let block_bytes = u64::from(p.bitmaps[vslot].granularity_bytes());
        let source = VerifySource::new(block_bytes, size_bytes, controller, now);
        p.syncs[vslot] = SyncState::VerifySource(Box::new(source));
        p.verify_counts[vslot] = VerifyCounts::default();
        out.push(Action::StateChanged);
        self.verify_source_tick(now, slot, vslot, out);
    }

    /// Once per tick for a connected peer: the verify's pacing and progress samples.
    pub(super) fn verify_tick(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        for vslot in 0..self.volumes.len() {
            match &mut self.peers[slot].syncs[vslot] {
                SyncState::VerifySource(_) => self.verify_source_tick(now, slot, vslot, out),
                SyncState::VerifyTarget(target) => target.progress.sample(now),
                _ => {}
            }
        }
    }

    /// Asks the rate controller for this tick's budget and issues ranges within it.
    fn verify_source_tick(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let size_bytes = self.volumes[vslot].size_bytes;
        let SyncState::VerifySource(source) = &mut self.peers[slot].syncs[vslot] else {
            return;
        };
        source.progress.sample(now);
        let tick = ResyncTick {
            now,
            in_flight_bytes: source.in_flight_bytes(),
            answered_bytes: std::mem::take(&mut source.judged_since_tick),
            round_trip: source.round_trip,
            application_active: std::mem::take(&mut source.application_active),
            pending_bytes: size_bytes.saturating_sub(source.cursor),
        };
        // As for the resync, the controller hands out the tick's budget and (dynamic mode)
        // refills its window as ranges are judged: `next_verify_range` asks it.
        source.controller.tick(&tick);
        self.issue_verify_ranges(now, slot, vslot, out);
    }

    /// Issues ranges from the cursor on while the rate controller and `max-buffers` allow; finishes
    /// the verify when the whole volume is judged.
    fn issue_verify_ranges(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let volume = self.volumes[vslot].number;
        let peer = self.peers[slot].config.node_id;
        while let Some((extent, block_bytes)) = self.next_verify_range(slot, vslot) {
            let written = self.unfinished_write_mask(vslot, extent, block_bytes);
            let id = self.next_request_id;
            self.next_request_id += 1;
            let SyncState::VerifySource(source) = &mut self.peers[slot].syncs[vslot] else {
                return;
            };
            source.cursor = extent.end();
            source.controller.issued(extent.length);
            let range = VerifyRange {
                extent,
                since: now,
                local: None,
                remote: None,
                written,
            };
            source.ranges.insert(id, range);
            let Extent { offset, length } = extent;
            let io = IoId::VerifyRead { peer, id };
            let block_bytes = u32::try_from(block_bytes).unwrap_or(u32::MAX);
            out.push(Action::LocalDigest {
                io,
                volume,
                offset,
                length,
                block_bytes,
                alg: DigestAlg::Verify,
            });
            let message = PeerMessage::VerifyRequest {
                id,
                volume,
                offset,
                length,
            };
            out.push(Action::SendOnData { peer, message });
        }
        self.finish_verify_if_done(slot, vslot, out);
    }

    /// The next range to issue and the block size, if the rate controller's allowance and
    /// `max-buffers` leave room: within the allowance (a tick's budget is overdrawn by less
    /// than a block; a refill never passes the window), and whole blocks (only the volume's
    /// last block may be short).
    fn next_verify_range(&self, slot: usize, vslot: usize) -> Option<(Extent, u64)> {
        let size_bytes = self.volumes[vslot].size_bytes;
        let p = &self.peers[slot];
        let SyncState::VerifySource(source) = &p.syncs[vslot] else {
            return None;
        };
        if source.cursor >= size_bytes {
            return None;
        }
        let block = source.block_bytes;
        let smallest = block.min(size_bytes - source.cursor);
        let load = ResyncLoad {
            in_flight_bytes: source.in_flight_bytes(),
            application_active: source.application_active,
        };
        let limit =
            super::resync::request_limit(source.controller.allowance(&load), block, smallest)?;
        let in_flight_max = u64::from(p.config.max_buffers_pages) * PAGE_BYTES;
        let room = in_flight_max.saturating_sub(source.in_flight_bytes());
        // With nothing in flight one block always goes, however small `max-buffers` is.
        let room = if source.ranges.is_empty() {
            room.max(block)
        } else {
            room
        };
        let whole_blocks = source.range_bytes_max().min(limit).min(room) / block * block;
        let length = whole_blocks.min(size_bytes - source.cursor);
        (length > 0).then_some((
            Extent {
                offset: source.cursor,
                length,
            },
            block,
        ))
    }

    /// The blocks of `range` that writes unfinished here (a client write whose local write
    /// has not finished, a received write not yet written) may still change.
    fn unfinished_write_mask(&self, vslot: usize, range: Extent, block_bytes: u64) -> u32 {
        let volume = self.volumes[vslot].number;
        let client = self
            .in_flight
            .values()
            .filter(|w| w.volume == volume && w.local == Stage::Pending)
            .map(|w| w.extent);
        let received = self
            .peers
            .iter()
            .flat_map(|p| p.receiver.pending_extents(volume));
        client.chain(received).fold(0, |mask, write| {
            mask | block_mask(range, write, block_bytes)
        })
    }

    /// A write to `extent` started here (a client write) or arrived (a replicated write):
    /// the verify ranges it touches are not judged there.
    pub(super) fn verify_note_write(&mut self, volume: u16, extent: Extent) {
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        for p in &mut self.peers {
            match &mut p.syncs[vslot] {
                SyncState::VerifySource(source) => source.note_write(extent),
                SyncState::VerifyTarget(target) => target.note_write(extent),
                _ => {}
            }
        }
    }

    /// A `LocalDigest` finished: `digests` are the range's block digests, concatenated (or
    /// why there are none).
    pub fn local_digest_done(
        &mut self,
        now: Time,
        io: IoId,
        digests: Result<Vec<u8>, IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        match io {
            IoId::VerifyRead { peer, id } => self.source_digest_done(now, peer, id, digests, out),
            IoId::VerifyPeerRead { peer, id } => self.target_digest_done(peer, id, digests, out),
            IoId::CsumRead { peer, id } => self.csum_target_digest_done(peer, id, digests, out),
            IoId::CsumPeerRead { peer, id } => self.csum_source_digest_done(peer, id, digests, out),
            _ => {}
        }
    }

    fn source_digest_done(
        &mut self,
        now: Time,
        peer: u8,
        id: u64,
        digests: Result<Vec<u8>, IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let found = self.peers[slot].syncs.iter().position(
            |s| matches!(s, SyncState::VerifySource(source) if source.ranges.contains_key(&id)),
        );
        // Not found: the verify ended since (disconnect, or a handshake); nothing to judge.
        let Some(vslot) = found else { return };
        let SyncState::VerifySource(source) = &mut self.peers[slot].syncs[vslot] else {
            return;
        };
        let block_bytes = source.block_bytes;
        let Some(range) = source.ranges.get_mut(&id) else {
            return;
        };
        assert!(range.local.is_none(), "one completion per LocalDigest");
        range.local = Some(checked_digests(digests, range.extent, block_bytes));
        if let Err(reason) = self.judge_if_ready(now, slot, vslot, id, out) {
            self.drop_peer(now, slot, ConnState::ProtocolError, reason, out);
        }
    }

    fn target_digest_done(
        &mut self,
        peer: u8,
        id: u64,
        digests: Result<Vec<u8>, IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let found = self.peers[slot].syncs.iter().position(
            |s| matches!(s, SyncState::VerifyTarget(target) if target.answering.contains_key(&id)),
        );
        // Not found: the verify ended since; the source no longer waits for this answer.
        let Some(vslot) = found else { return };
        let volume = self.volumes[vslot].number;
        let p = &mut self.peers[slot];
        let block_bytes = u64::from(p.bitmaps[vslot].granularity_bytes());
        let SyncState::VerifyTarget(target) = &mut p.syncs[vslot] else {
            return;
        };
        let Some(answer) = target.answering.remove(&id) else {
            return;
        };
        let outcome = match checked_digests(digests, answer.extent, block_bytes) {
            Digests::Ready(digests) => VerifyOutcome::Digests {
                written_blocks: answer.written,
                digests,
            },
            Digests::Failed => VerifyOutcome::ReadFailed,
        };
        let Extent { offset, length } = answer.extent;
        if outcome == VerifyOutcome::ReadFailed {
            target.progress.failed_bytes += length;
        } else {
            target.progress.done_bytes += length;
        }
        let message = PeerMessage::VerifyReply {
            id: answer.request,
            volume,
            offset,
            length,
            outcome,
        };
        out.push(Action::SendOnData { peer, message });
    }

    pub(super) fn receive_verify_request(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self.checked_verify_range(slot, volume, extent)?;
        if !self.accept_verify_request(now, slot, vslot, out)? {
            return Ok(());
        }
        let peer = self.peers[slot].config.node_id;
        let block_bytes = self.peers[slot].bitmaps[vslot].granularity_bytes();
        let written = self.unfinished_write_mask(vslot, extent, u64::from(block_bytes));
        let SyncState::VerifyTarget(target) = &mut self.peers[slot].syncs[vslot] else {
            return Ok(());
        };
        if target.answering.values().any(|a| a.request == id) {
            return Err(PeerViolation::VerifyRequestTwice { id });
        }
        let limit = MAX_BUFFERS_PAGES_LIMIT * PAGE_BYTES + VERIFY_REQUEST_BYTES_MAX;
        if target.in_flight_bytes() + extent.length > limit {
            return Err(PeerViolation::VerifyRequestsBeyondMaxBuffers { limit_bytes: limit });
        }
        let Extent { offset, length } = extent;
        let answer = Answering {
            request: id,
            extent,
            written,
        };
        let id = self.next_request_id;
        self.next_request_id += 1;
        target.answering.insert(id, answer);
        let io = IoId::VerifyPeerRead { peer, id };
        out.push(Action::LocalDigest {
            io,
            volume,
            offset,
            length,
            block_bytes,
            alg: DigestAlg::Verify,
        });
        Ok(())
    }

    /// The volume slot of a request's range, which must be whole blocks of the volume and at
    /// most one request long.
    fn checked_verify_range(
        &self,
        slot: usize,
        volume: u16,
        extent: Extent,
    ) -> Result<usize, PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::VerifyRequestUnknownVolume { volume })?;
        let block = u64::from(self.peers[slot].bitmaps[vslot].granularity_bytes());
        let valid = Extent::new(extent.offset, extent.length).is_some_and(|e| {
            e.length > 0
                && e.length <= VERIFY_REQUEST_BYTES_MAX.max(block)
                && e.end() <= self.volumes[vslot].size_bytes
                && e.offset % block == 0
        });
        if !valid {
            return Err(PeerViolation::VerifyRequestInvalid {
                offset: extent.offset,
                length: extent.length,
            });
        }
        Ok(vslot)
    }

    /// Whether to answer a verify request now, becoming the verify target if needed; see the
    /// module documentation for the races.
    fn accept_verify_request(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) -> Result<bool, PeerViolation> {
        let (size_bytes, node_id) = (self.volumes[vslot].size_bytes, self.node_id);
        let p = &mut self.peers[slot];
        let block_bytes = u64::from(p.bitmaps[vslot].granularity_bytes());
        match &p.syncs[vslot] {
            SyncState::VerifyTarget(_) => return Ok(true),
            SyncState::Established => {}
            // Our handshake is on its way: the source ends its verify when it arrives and
            // expects no answer to what it asked before.
            SyncState::WaitUuids { .. } => return Ok(false),
            // Both started a verify: the lower node id keeps its own; the other gives up its
            // own (the lower ignores its requests) and answers.
            SyncState::VerifySource(_) if node_id < p.config.node_id => return Ok(false),
            SyncState::VerifySource(_) => {}
            other => {
                return Err(PeerViolation::VerifyRequestDuring {
                    state: other.repl_state(),
                    volume: self.volumes[vslot].number,
                })
            }
        }
        let target = VerifyTarget::new(block_bytes, size_bytes, now);
        p.syncs[vslot] = SyncState::VerifyTarget(Box::new(target));
        p.verify_counts[vslot] = VerifyCounts::default();
        out.push(Action::StateChanged);
        Ok(true)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn receive_verify_reply(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        outcome: VerifyOutcome,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::VerifyReplyUnknownVolume { volume })?;
        let SyncState::VerifySource(source) = &mut self.peers[slot].syncs[vslot] else {
            return Err(PeerViolation::VerifyReplyNotVerifying { volume });
        };
        let block_bytes = source.block_bytes;
        let range = source
            .ranges
            .get_mut(&id)
            .filter(|r| r.remote.is_none())
            .ok_or(PeerViolation::VerifyReplyUnknownRequest { id })?;
        if range.extent != extent {
            return Err(PeerViolation::VerifyReplyWrongRange { id });
        }
        let remote = match outcome {
            VerifyOutcome::Digests {
                written_blocks,
                digests,
            } => {
                if !digests_fit(digests.len(), extent, block_bytes) {
                    return Err(PeerViolation::VerifyReplyDigestBytes {
                        id,
                        digest_bytes: digests.len(),
                        length: extent.length,
                    });
                }
                range.written |= written_blocks;
                Digests::Ready(digests)
            }
            VerifyOutcome::ReadFailed => Digests::Failed,
        };
        range.remote = Some(remote);
        source.round_trip = Some(now.since(range.since));
        self.judge_if_ready(now, slot, vslot, id, out)
    }

    /// Judges range `id` once both digests are in: marks and reports what differs, counts the
    /// rest, and issues more ranges. An error is a protocol error (digests of another length).
    fn judge_if_ready(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        id: u64,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let volume = self.volumes[vslot].number;
        let p = &mut self.peers[slot];
        let peer = p.config.node_id;
        let SyncState::VerifySource(source) = &mut p.syncs[vslot] else {
            return Ok(());
        };
        let ready = source
            .ranges
            .get(&id)
            .is_some_and(|r| r.local.is_some() && r.remote.is_some());
        if !ready {
            return Ok(());
        }
        let Some(range) = source.ranges.remove(&id) else {
            return Ok(());
        };
        let verdict = judge(&range, source.block_bytes)?;
        let length = range.extent.length;
        source.judged_since_tick += length;
        source.progress.done_bytes += length - verdict.failed_bytes;
        source.progress.failed_bytes += verdict.failed_bytes;
        let counts = &mut p.verify_counts[vslot];
        counts.skipped_bytes += verdict.skipped_bytes;
        for run in verdict.found {
            mark(&mut p.bitmaps[vslot], run);
            counts.oos_bytes += run.length;
            let Extent { offset, length } = run;
            out.push(Action::VerifyFound {
                peer,
                volume,
                offset,
                length,
            });
        }
        self.issue_verify_ranges(now, slot, vslot, out);
        Ok(())
    }

    /// The whole volume is judged: back to Established, tell the target and the driver.
    fn finish_verify_if_done(&mut self, slot: usize, vslot: usize, out: &mut Vec<Action<P>>) {
        let (volume, size_bytes) = (self.volumes[vslot].number, self.volumes[vslot].size_bytes);
        let p = &mut self.peers[slot];
        let SyncState::VerifySource(source) = &p.syncs[vslot] else {
            return;
        };
        if source.cursor < size_bytes || !source.ranges.is_empty() {
            return;
        }
        p.syncs[vslot] = SyncState::Established;
        let peer = p.config.node_id;
        let VerifyCounts {
            oos_bytes,
            skipped_bytes,
        } = p.verify_counts[vslot];
        let message = PeerMessage::VerifyDone { volume, oos_bytes };
        out.push(Action::SendOnData { peer, message });
        out.push(Action::VerifyFinished {
            peer,
            volume,
            oos_bytes,
            skipped_bytes,
        });
        out.push(Action::StateChanged);
    }

    pub(super) fn receive_verify_done(
        &mut self,
        slot: usize,
        volume: u16,
        oos_bytes: u64,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::VerifyDoneUnknownVolume { volume })?;
        let p = &mut self.peers[slot];
        match &p.syncs[vslot] {
            SyncState::VerifyTarget(target) if !target.answering.is_empty() => {
                return Err(PeerViolation::VerifyDoneUnanswered { volume });
            }
            SyncState::VerifyTarget(_) => p.syncs[vslot] = SyncState::Established,
            // A source with nothing to ask (an empty volume) never made us its target.
            SyncState::Established | SyncState::WaitUuids { .. } => {}
            other => {
                return Err(PeerViolation::VerifyDoneDuring {
                    volume,
                    state: other.repl_state(),
                });
            }
        }
        p.verify_counts[vslot] = VerifyCounts {
            oos_bytes,
            skipped_bytes: 0,
        };
        out.push(Action::StateChanged);
        Ok(())
    }

    /// A handshake from the peer ends a verify of that volume: the peer started it before it
    /// saw our first request (it ignores our requests until its handshake is answered), and
    /// the handshake goes on. (Identifiers to adopt, from `new-current-uuid --clear-bitmap`
    /// on the peer in the same moment, still break the protocol as during a resync.)
    pub(super) fn end_verify_for_handshake(
        &mut self,
        slot: usize,
        message: &UuidsMessage,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(vslot) = self.volume_slot(message.volume) else {
            return;
        };
        let sync = &mut self.peers[slot].syncs[vslot];
        let verifying = matches!(
            sync,
            SyncState::VerifySource(_) | SyncState::VerifyTarget(_)
        );
        if verifying && message.purpose == UuidsPurpose::Handshake {
            *sync = SyncState::Established;
            out.push(Action::StateChanged);
        }
    }
}

/// Bit `i` set for each block `i` of `range` that `write` overlaps.
fn block_mask(range: Extent, write: Extent, block_bytes: u64) -> u32 {
    if !range.overlaps(&write) {
        return 0;
    }
    let first = (write.offset.max(range.offset) - range.offset) / block_bytes;
    let last = (write.end().min(range.end()) - 1 - range.offset) / block_bytes;
    assert!(
        last < RANGE_BLOCKS_MAX,
        "a verify range has at most 32 blocks"
    );
    // first <= last < 32: the shifts stay below 64 and the mask fits u32.
    let mask = ((1_u64 << (last - first + 1)) - 1) << first;
    u32::try_from(mask).unwrap_or(u32::MAX)
}

/// Blocks of `extent` (the last may be short).
fn block_count(extent: Extent, block_bytes: u64) -> u64 {
    extent.length.div_ceil(block_bytes)
}

/// Whether `len` digest bytes are one equal-length digest per block of `extent` and fit a
/// reply.
pub(super) fn digests_fit(len: usize, extent: Extent, block_bytes: u64) -> bool {
    let blocks = block_count(extent, block_bytes);
    len > 0
        && len <= VERIFY_DIGESTS_BYTES_MAX
        && u64::try_from(len).is_ok_and(|len| blocks > 0 && len % blocks == 0)
}

/// The driver's answer to a `LocalDigest`, checked against the driver contract.
fn checked_digests(result: Result<Vec<u8>, IoError>, extent: Extent, block_bytes: u64) -> Digests {
    match result {
        Ok(digests) if digests_fit(digests.len(), extent, block_bytes) => Digests::Ready(digests),
        _ => Digests::Failed,
    }
}

/// Compares both sides' digests of a range block by block, leaving out written blocks.
fn judge(range: &VerifyRange, block_bytes: u64) -> Result<Verdict, PeerViolation> {
    let length = range.extent.length;
    let (local, remote) = match (&range.local, &range.remote) {
        (Some(Digests::Failed), _) | (_, Some(Digests::Failed)) => {
            return Ok(Verdict {
                failed_bytes: length,
                ..Verdict::default()
            })
        }
        (Some(Digests::Ready(local)), Some(Digests::Ready(remote))) => (local, remote),
        _ => return Ok(Verdict::default()),
    };
    if local.len() != remote.len() {
        return Err(PeerViolation::VerifyDigestsDiffer {
            remote_bytes: remote.len(),
            local_bytes: local.len(),
        });
    }
    let blocks = usize::try_from(block_count(range.extent, block_bytes)).unwrap_or(usize::MAX);
    // Both lengths were checked to be a non-zero multiple of `blocks`.
    let digest_len = (local.len() / blocks.max(1)).max(1);
    let mut verdict = Verdict::default();
    let pairs = local
        .chunks_exact(digest_len)
        .zip(remote.chunks_exact(digest_len));
    for (index, (ours, theirs)) in (0_u64..).zip(pairs) {
        let offset = range.extent.offset + index * block_bytes;
        let block = Extent {
            offset,
            length: block_bytes.min(range.extent.end() - offset),
        };
        let written = index < RANGE_BLOCKS_MAX && range.written & (1 << index) != 0;
        if written {
            verdict.skipped_bytes += block.length;
        } else if ours != theirs {
            match verdict.found.last_mut() {
                Some(run) if run.end() == block.offset => run.length += block.length,
                _ => verdict.found.push(block),
            }
        }
    }
    Ok(verdict)
}
