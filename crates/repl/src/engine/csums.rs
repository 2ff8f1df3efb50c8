//! Checksum-based resync (`csums-alg`, drbd-semantics.md §1): blocks that are out of sync by
//! the bitmap but hold the same data on both sides (a crashed Primary's activity-log extents,
//! a full sync of nearly equal disks) are not sent.
//!
//! With [`crate::PeerConfig::csums`], the sync target digests its own copy of each range it
//! is about to request ([`Action::LocalDigest`] with [`DigestAlg::Csums`]) and sends the
//! digests with the request (`CsumRequest`). The source takes the request like any other
//! (queued until no client write holds its blocks), digests its own copy instead of reading
//! it, and answers `ResyncInSync` if the digests are equal, or reads and sends the data as
//! usual if not. The target clears its bits for an in-sync range and acknowledges it like a
//! written reply, so the source clears its bits on the same ack as always.
//!
//! **Invariant:** equal digests mean the target held, when it digested, exactly what the
//! source holds when it digests; the source digests only once no write to the range is in
//! flight or unconfirmed (as it reads for a reply), and every write after that reaches both
//! sides in order. So a range is cleared without data only when the copies are equal, and
//! nothing is ever written for it (no older data can overwrite a newer write). A digest that
//! fails, or digests that differ in any way (another algorithm or block size), only cost the
//! data transfer the plain resync would have made.

use crate::engine::verify::digests_fit;
use crate::engine::Engine;
use crate::extent::Extent;
use crate::sync::SyncState;
use crate::types::{Action, DigestAlg, IoError, IoId, PeerMessage, Time};
use crate::PeerViolation;

/// The `LocalDigest` of a resync range with `csums-alg`.
pub(super) fn digest_action<P>(
    io: IoId,
    volume: u16,
    extent: Extent,
    block_bytes: u32,
) -> Action<P> {
    let Extent { offset, length } = extent;
    Action::LocalDigest {
        io,
        volume,
        offset,
        length,
        block_bytes,
        alg: DigestAlg::Csums,
    }
}

impl<P: Clone> Engine<P> {
    /// Target: our digests of request `id`'s range are in; send the request with them (a
    /// plain request if they could not be made).
    pub(super) fn csum_target_digest_done(
        &mut self,
        peer: u8,
        id: u64,
        digests: Result<Vec<u8>, IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let p = &self.peers[slot];
        let found = p
            .syncs
            .iter()
            .enumerate()
            .find_map(|(vslot, sync)| match sync {
                SyncState::Target(target) => target.requests.get(&id).map(|r| (vslot, r.extent)),
                _ => None,
            });
        // Not found: the resync ended since; nothing to request.
        let Some((vslot, extent)) = found else {
            return;
        };
        let volume = self.volumes[vslot].number;
        let block_bytes = u64::from(p.bitmaps[vslot].granularity_bytes());
        let Extent { offset, length } = extent;
        let message = match digests {
            Ok(digests) if digests_fit(digests.len(), extent, block_bytes) => {
                PeerMessage::CsumRequest {
                    id,
                    volume,
                    offset,
                    length,
                    digests,
                }
            }
            _ => PeerMessage::ResyncRequest {
                id,
                volume,
                offset,
                length,
            },
        };
        out.push(Action::SendOnData { peer, message });
    }

    /// Source: a request with the target's digests; queued like a plain one.
    pub(super) fn receive_csum_request(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        digests: Vec<u8>,
    ) -> Result<(), PeerViolation> {
        self.receive_resync_request(now, slot, id, volume, extent)?;
        // Not reached: the resync request above refused an unknown volume already.
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ResyncRequestUnknownVolume { volume })?;
        if let SyncState::Source(source) = &mut self.peers[slot].syncs[vslot] {
            source.csums.insert(id, digests);
        }
        Ok(())
    }

    /// Source: our digests of request `id`'s range are in: equal to the target's, answer
    /// in sync; otherwise read and send the data as for a plain request.
    pub(super) fn csum_source_digest_done(
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
            |s| matches!(s, SyncState::Source(source) if source.reading.contains_key(&id)),
        );
        // Not found: the connection ended since; the blocks stay out of sync.
        let Some(vslot) = found else { return };
        let volume = self.volumes[vslot].number;
        let SyncState::Source(source) = &mut self.peers[slot].syncs[vslot] else {
            return;
        };
        let (Some(theirs), Some(request)) = (source.csums.remove(&id), source.reading.get(&id))
        else {
            return;
        };
        let request = *request;
        if digests.is_ok_and(|ours| ours == theirs) {
            source.reading.remove(&id);
            source.awaiting.insert(id, request);
            let message = PeerMessage::ResyncInSync { id, volume };
            out.push(Action::SendOnData { peer, message });
            return;
        }
        let Extent { offset, length } = request.extent;
        let io = IoId::ResyncRead { peer, id };
        out.push(Action::LocalRead {
            io,
            volume,
            offset,
            length,
        });
    }

    /// Target: the source has the range of request `id` as we do: clear its bits (as for a
    /// written reply) and acknowledge it.
    pub(super) fn receive_resync_in_sync(
        &mut self,
        now: Time,
        slot: usize,
        id: u64,
        volume: u16,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::InSyncUnknownVolume { volume })?;
        let p = &mut self.peers[slot];
        let SyncState::Target(target) = &mut p.syncs[vslot] else {
            return Err(PeerViolation::InSyncNotTarget { volume });
        };
        let request = target
            .requests
            .remove(&id)
            .ok_or(PeerViolation::InSyncUnknownRequest { id })?;
        let Extent { offset, length } = request.extent;
        target.round_trip = Some(now.since(request.since));
        target.answered_since_tick += length;
        target.progress.done_bytes += length;
        let cleared = p.bitmaps[vslot].clear(offset, length);
        assert!(cleared.is_ok(), "a requested range lies within its bitmap");
        let message = PeerMessage::ResyncAck {
            id,
            volume,
            ok: true,
        };
        out.push(Action::SendOnData {
            peer: p.config.node_id,
            message,
        });
        self.issue_requests(now, slot, vslot, out);
        Ok(())
    }
}
