//! Disk failure and detach (drbd-semantics.md §2 disk states; DRBD's `on-io-error` and
//! `drbdadm detach`): a volume whose backing disk failed (or was detached by the
//! administrator) becomes Diskless and goes on through its peers.
//!
//! - `on-io-error pass_on`: a local I/O error is passed up to the client (EIO); the disk stays
//!   attached (the engine's behaviour before the policy is set, see [`OnIoError`]). On a
//!   Secondary a failed replicated write makes the disk Inconsistent, as in DRBD, and the
//!   link to the sender is dropped so that the reconnect resyncs it
//!   ([`Engine::replicated_write_failed`]).
//! - `detach` (DRBD's default): the volume becomes Diskless at the first local data error;
//!   `call-local-io-error`: the same, and the driver runs the `local-io-error` handler
//!   ([`Action::Detached`]).
//!
//! A local data error is any [`IoError`] of the backing device ([`IoError::is_disk_error`]):
//! ENOSPC of a full (thin or sparse) backing store is handled exactly as EIO.
//!
//! Invariants:
//! - **A failed replicated write leaves a durable trace before it is answered:** a Secondary
//!   whose disk fails a replicated write is no longer UpToDate (Inconsistent, or Diskless with
//!   metadata saying Inconsistent), and the NegAck goes out only once that metadata is durable
//!   (the failed write stays pending in the receiver meanwhile, so neither its epoch's barrier
//!   ack nor an overlapping write gets ahead of it). The Primary, which completes the write
//!   on its own disk or other peers, thus never acknowledges a write that a node it could
//!   fail over to lacks while still saying UpToDate.
//! - A write of a Diskless volume completes successfully only once every peer it was sent to
//!   settled it and at least one of them wrote it (its `WriteAck`); otherwise it fails with
//!   EIO. Nothing is acknowledged that is on no disk. This holds for the write whose local
//!   failure caused the detach too: it was sent to the peers with the local write.
//! - A flush with a Diskless volume waits for every connected peer's barrier ack whatever
//!   the protocol, and succeeds only if one acknowledged (its data is only there).
//! - A Diskless volume issues no local data I/O (writes, flushes); its peers learn the state at
//!   once and mark what they apply for it (`mark_for_absent_peers`), so it is never a sync
//!   source; the driver serves its reads from an UpToDate peer.
//! - A client read of a Diskless volume goes to one connected UpToDate peer
//!   ([`Engine::read_through_peer`], wire `ReadRequest`); the peer reads its disk and answers
//!   with the data or an error; a lost connection fails the reads that waited on it (EIO).
//!   Never to a peer for which this node keeps an out-of-sync bit in the range.
//! - A Diskless volume's writes skip the activity log and its metadata is left as it was. A
//!   node configured `disk none;` announces size 0 and its peers keep no bitmap for it; a
//!   handshake with a Diskless side never starts a resync.
//! - Only a disk error detaches ([`IoError::is_disk_error`]), never a payload that stopped
//!   arriving (`IoError::Aborted`).
//! - An administrator's detach of a Primary is refused unless an UpToDate peer is connected
//!   (DRBD refuses too): the export would have no data left.
//!
//! Limitations:
//! - `attach` is refused on a Primary: its disk would be a sync target under itself.
//! - A write that was waiting for an activity-log transaction when the disk failed fails if
//!   the transaction does.
//! - A detached node's peers learn it on the control socket, so a write they apply in
//!   between is written (or refused and marked), never lost. `attach` relies on the
//!   generations (a bitmap resync after a Primary's new generation), else on DRBD's rules.
//! - With three nodes, a Secondary that comes back Outdated behind a Diskless Primary stays
//!   Outdated while that Primary is connected (a resync between Secondaries waits while a
//!   Primary is near, and the Diskless Primary has nothing to send); reads avoid it.

use serde::{Deserialize, Serialize};

use super::*;

/// A replicated write that failed on this node's disk, waiting for the metadata that
/// records the failure (`version` of volume slot `vslot`) before it is answered.
#[derive(Debug)]
pub(super) struct FailedPeerWrite {
    peer: u8,
    seq: u64,
    vslot: usize,
    version: u64,
    error: IoError,
}

/// A client read sent to a peer.
#[derive(Debug)]
pub(super) struct ForwardedRead {
    request: RequestId,
    slot: usize,
    volume: u16,
    extent: Extent,
}

/// What a local data I/O error does (`on-io-error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnIoError {
    /// Pass the error up to the client; stay attached. The engine's default, so drivers and
    /// tests that never set a policy see every error; the daemon sets the configured one
    /// (DRBD's default, `detach`).
    #[default]
    PassOn,
    /// Detach: go Diskless and serve through the peers.
    Detach,
    /// Run the `local-io-error` handler, then detach.
    CallLocalIoError,
}

impl<P: Clone> Engine<P> {
    /// Sets the `on-io-error` policy of `volume` (at start and by `adjust`); an unknown
    /// volume is ignored.
    pub fn set_on_io_error(&mut self, volume: u16, policy: OnIoError) {
        if let Some(vslot) = self.volume_slot(volume) {
            self.volumes[vslot].on_io_error = policy;
        }
    }

    /// The `on-io-error` policy in effect for `volume`.
    pub fn on_io_error(&self, volume: u16) -> Option<OnIoError> {
        Some(self.volumes[self.volume_slot(volume)?].on_io_error)
    }

    /// Whether volume `volume` has no disk (never had one, failed, or detached).
    pub fn is_diskless(&self, volume: u16) -> bool {
        self.volume_slot(volume)
            .is_some_and(|vslot| self.volumes[vslot].disk == DiskState::Diskless)
    }

    /// A local data read of `volume` failed (the driver serves client reads itself): under a
    /// detaching policy the volume is detached. Returns whether the volume is Diskless now
    /// (then the driver fetches the data from a peer instead of failing the read).
    pub fn local_read_failed(&mut self, now: Time, volume: u16, out: &mut Vec<Action<P>>) -> bool {
        let Some(vslot) = self.volume_slot(volume) else {
            return false;
        };
        self.local_io_failed(now, vslot, out)
    }

    /// A connected peer with UpToDate data for `volume` (where a Diskless volume's reads go),
    /// if any; the lowest node id, so the choice is stable.
    pub fn read_source(&self, volume: u16) -> Option<u8> {
        let vslot = self.volume_slot(volume)?;
        self.peers
            .iter()
            .filter(|p| {
                p.connection == ConnState::Connected && p.disks[vslot] == DiskState::UpToDate
            })
            .map(|p| p.config.node_id)
            .min()
    }

    /// Where a read of `extent` of `vslot` goes: a connected UpToDate peer for which we keep
    /// no out-of-sync bit in the range (a peer that missed a write while away, or failed
    /// it, may hold older data there even though it says UpToDate: with three nodes it may
    /// have been Established with us again without a resync). The lowest node id.
    fn read_source_for(&self, vslot: usize, extent: Extent) -> Option<usize> {
        let clean = |bitmap: &meta::Bitmap| {
            let granularity = u64::from(bitmap.granularity_bytes());
            let first = extent.offset / granularity;
            let last = extent.end().saturating_sub(1) / granularity;
            bitmap.next_set(first).is_none_or(|block| block > last)
        };
        (0..self.peers.len())
            .filter(|&slot| {
                let p = &self.peers[slot];
                p.connection == ConnState::Connected
                    && p.disks[vslot] == DiskState::UpToDate
                    && clean(&p.bitmaps[vslot])
            })
            .min_by_key(|&slot| self.peers[slot].config.node_id)
    }

    /// `detach`: the administrator takes every volume's disk away. A Primary needs a
    /// connected UpToDate peer for every volume; refused while a handshake, resync or verify
    /// runs with a connected peer.
    pub fn detach(&mut self, now: Time, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        // A resync (or handshake, or verify) in progress would lose its disk midway.
        self.refuse_if_syncing()?;
        if self.role == Role::Primary {
            for volume in &self.volumes {
                if volume.disk != DiskState::Diskless && self.read_source(volume.number).is_none() {
                    return Err(StateError::NoSyncSource);
                }
            }
        }
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk != DiskState::Diskless {
                self.detach_volume(now, vslot, false, out);
            }
        }
        Ok(())
    }

    /// `attach`, first step: the Diskless `volume` shows Attaching while the driver checks its
    /// disk, then [`Engine::finish_attach`]. Refused on a Primary (see
    /// [`StateError::AttachOnPrimary`]).
    pub fn begin_attach(
        &mut self,
        volume: u16,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(StateError::NotDetached(DiskState::DUnknown))?;
        if self.volumes[vslot].disk != DiskState::Diskless {
            return Err(StateError::NotDetached(self.volumes[vslot].disk));
        }
        if self.role == Role::Primary {
            return Err(StateError::AttachOnPrimary);
        }
        self.volumes[vslot].disk = DiskState::Attaching;
        out.push(Action::StateChanged);
        Ok(())
    }

    /// `attach`, second step: the driver could use the disk (`ok`) or not (Diskless again).
    /// An attached disk is Outdated (it missed what was written while it was away) and
    /// handshakes again with every connected peer: the generations decide the resync — a
    /// bitmap resync of the blocks written meanwhile when a Primary started a new generation
    /// for it, or kept bits for it (drbd-semantics.md §2, rules 2 and 3).
    pub fn finish_attach(&mut self, now: Time, volume: u16, ok: bool, out: &mut Vec<Action<P>>) {
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        if self.volumes[vslot].disk != DiskState::Attaching {
            return;
        }
        if !ok {
            self.volumes[vslot].disk = DiskState::Diskless;
            out.push(Action::StateChanged);
            return;
        }
        self.volumes[vslot].disk = DiskState::Outdated;
        self.meta_changed(vslot, out);
        self.announce_disks(out);
        self.rehandshake(vslot, out);
        self.update_quorum(now, out);
    }

    /// Refuses what needs a disk (`invalidate`, `new-current-uuid`) on a node whose volume
    /// has none: it would make a Diskless volume Inconsistent or UpToDate.
    pub(super) fn refuse_if_diskless(&self) -> Result<(), StateError> {
        match self
            .volumes
            .iter()
            .any(|v| matches!(v.disk, DiskState::Diskless | DiskState::Attaching))
        {
            true => Err(StateError::Diskless),
            false => Ok(()),
        }
    }

    /// A local data I/O of `vslot` failed: detach it under a detaching policy. Returns
    /// whether the volume is Diskless now.
    pub(super) fn local_io_failed(
        &mut self,
        now: Time,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) -> bool {
        if self.volumes[vslot].disk == DiskState::Diskless {
            return true;
        }
        if self.volumes[vslot].on_io_error == OnIoError::PassOn {
            return false;
        }
        self.detach_volume(now, vslot, true, out);
        true
    }

    /// Under `pass_on`, this node's disk failed the client write `seq` (the client gets the
    /// error), which its peers were sent and may have written: they would hold data this
    /// disk lacks, and both sides would stay UpToDate with different blocks. The range is
    /// marked for every peer it was sent to, and the links to those peers are dropped, so
    /// each reconnect's handshake (equal generations, this side's bits) resyncs the range
    /// from this disk: a failed write ends on no replica. If this disk cannot read the range
    /// either, the resync leaves the peer Inconsistent there, never UpToDate and different.
    pub(super) fn resync_peers_of_failed_write(
        &mut self,
        now: Time,
        seq: u64,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(write) = self.in_flight.get(&seq) else {
            return;
        };
        let extent = write.extent;
        let sent: Vec<usize> = write
            .peers
            .iter()
            .enumerate()
            .filter(|(_, stage)| !matches!(stage, PeerStage::Skipped))
            .map(|(slot, _)| slot)
            .collect();
        if sent.is_empty() {
            return;
        }
        for &slot in &sent {
            if !self.peers[slot].bitmap_free[vslot] {
                mark(&mut self.peers[slot].bitmaps[vslot], extent);
            }
        }
        self.meta_changed(vslot, out);
        for slot in sent {
            if self.peers[slot].connection == ConnState::Connected {
                let reason = "this node's disk failed a write the peer was sent (on-io-error \
                    pass_on): reconnecting to resync it from here"
                    .to_owned();
                self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
            }
        }
    }

    /// The replicated write `seq` from the peer in `slot` failed on this node's disk with
    /// `error` (any disk error: ENOSPC as EIO). This disk lacks a write that the Primary may
    /// acknowledge (its own disk or other peers have it), so it must never be promoted or be
    /// a sync source until a resync brings it back: it becomes Inconsistent, with the range
    /// marked out of sync for every peer, as in DRBD, and that is written to the metadata
    /// before the write is answered (NegAck): the Primary completes the write only after
    /// this node can no longer come back UpToDate without it, even after a crash.
    ///
    /// Under a detaching policy the volume then detaches (Diskless), its metadata saying
    /// Inconsistent, so that a restart or attach does not bring it back UpToDate (DRBD's
    /// last metadata write on the way to Failed). Under `pass_on` it stays attached; unlike
    /// DRBD, it drops the link to the sender once the write is answered, so that the
    /// reconnect's handshake starts the resync (an Inconsistent disk facing an UpToDate one
    /// is its target) instead of leaving the disk Inconsistent until an administrator
    /// reconnects.
    pub(super) fn replicated_write_failed(
        &mut self,
        now: Time,
        slot: usize,
        seq: u64,
        error: IoError,
        out: &mut Vec<Action<P>>,
    ) {
        let Some((volume, extent)) = self.peers[slot].receiver.issued_write(seq) else {
            panic!("a peer write failed that was never issued");
        };
        let Some(vslot) = self.volume_slot(volume) else {
            self.peers[slot].receiver.write_done(seq, Err(error), out);
            return;
        };
        let mut version = 0;
        if !matches!(
            self.volumes[vslot].disk,
            DiskState::Diskless | DiskState::Attaching
        ) {
            for peer in &mut self.peers {
                mark(&mut peer.bitmaps[vslot], extent);
            }
            if matches!(
                self.volumes[vslot].disk,
                DiskState::UpToDate | DiskState::Consistent | DiskState::Outdated
            ) {
                self.volumes[vslot].disk = DiskState::Inconsistent;
            }
            // Also when already Inconsistent: the bits just set go with this write.
            version = self.meta_changed(vslot, out);
            if !self.local_io_failed(now, vslot, out) {
                self.announce_disks(out);
                self.update_quorum(now, out);
            }
            assert_ne!(
                self.volumes[vslot].disk,
                DiskState::UpToDate,
                "a disk that failed a replicated write is not UpToDate"
            );
        }
        // Failures of one volume are answered in order: one after a detach (which writes no
        // metadata) still waits for the record of the failure that caused it.
        let version = self
            .failed_peer_writes
            .iter()
            .filter(|f| f.vslot == vslot)
            .map(|f| f.version)
            .fold(version, u64::max);
        let peer = self.peers[slot].config.node_id;
        self.failed_peer_writes.push(FailedPeerWrite {
            peer,
            seq,
            vslot,
            version,
            error,
        });
        self.answer_failed_peer_writes(now, out);
    }

    /// Answers (NegAck, through the receiver) every failed replicated write whose record is
    /// durable, in the order they failed; under `pass_on`, then drops the link to its sender
    /// (see [`Engine::replicated_write_failed`]). Called when a metadata write finishes.
    pub(super) fn answer_failed_peer_writes(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        while let Some(index) = self
            .failed_peer_writes
            .iter()
            .position(|f| self.is_persisted(f.vslot, f.version))
        {
            let failed = self.failed_peer_writes.remove(index);
            let Some(slot) = self.peer_slot(failed.peer) else {
                continue;
            };
            self.peers[slot]
                .receiver
                .write_done(failed.seq, Err(failed.error), out);
            let attached = !matches!(
                self.volumes[failed.vslot].disk,
                DiskState::Diskless | DiskState::Attaching
            );
            if attached && self.peers[slot].connection == ConnState::Connected {
                let volume = self.volumes[failed.vslot].number;
                let error = failed.error;
                let reason = format!(
                    "a replicated write to volume {volume} failed on the local disk ({error}; \
                     on-io-error pass_on): reconnecting to resync it"
                );
                self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
            }
        }
    }

    fn detach_volume(&mut self, now: Time, vslot: usize, failed: bool, out: &mut Vec<Action<P>>) {
        let volume = self.volumes[vslot].number;
        self.volumes[vslot].disk = DiskState::Diskless;
        let call_handler = failed && self.volumes[vslot].on_io_error == OnIoError::CallLocalIoError;
        out.push(Action::Detached {
            volume,
            failed,
            call_handler,
        });
        // The peers mark what they apply for us from the moment they hear it.
        self.announce_disks(out);
        self.update_quorum(now, out);
        // Writes that only waited for the local disk are judged by their peers now.
        let writes: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, w)| w.volume == volume)
            .map(|(&seq, _)| seq)
            .collect();
        for seq in writes {
            self.try_complete_write(now, seq, out);
        }
        out.push(Action::StateChanged);
    }

    /// A write just started on a Diskless volume has no local completion to wait for: it may
    /// be done at once (no peer to send it to).
    pub(super) fn complete_if_diskless(&mut self, now: Time, seq: u64, out: &mut Vec<Action<P>>) {
        let diskless = self
            .in_flight
            .get(&seq)
            .is_some_and(|w| self.is_diskless(w.volume));
        if diskless {
            self.try_complete_write(now, seq, out);
        }
    }

    /// For a write of a Diskless volume: None while a peer it was sent to has not settled it;
    /// then Ok if at least one peer wrote it, EIO if none did.
    pub(super) fn diskless_write_result(&self, write: &InFlight) -> Option<Result<(), IoError>> {
        let settled = write
            .peers
            .iter()
            .all(|stage| matches!(stage, PeerStage::Skipped | PeerStage::Settled));
        if !settled {
            return None;
        }
        Some(if write.written_on != 0 {
            Ok(())
        } else {
            Err(IoError::Io)
        })
    }

    /// A client read of a Diskless `volume`: asks an UpToDate peer that has every block of the
    /// range for it; answered with exactly one [`Action::ReadDone`] (EIO at once if no such
    /// peer is connected, or the range is beyond the volume).
    pub fn read_through_peer(
        &mut self,
        request: RequestId,
        volume: u16,
        offset: u64,
        length: u64,
        out: &mut Vec<Action<P>>,
    ) {
        let vslot = self.volume_slot(volume);
        let extent = Extent::new(offset, length)
            .filter(|e| vslot.is_some_and(|v| e.end() <= self.volumes[v].size_bytes));
        let source = vslot
            .zip(extent)
            .and_then(|(vslot, extent)| self.read_source_for(vslot, extent));
        let (Some(slot), Some(extent)) = (source, extent) else {
            out.push(Action::ReadDone {
                request,
                result: Err(IoError::Io),
            });
            return;
        };
        let id = self.next_read_id;
        self.next_read_id += 1;
        self.forwarded_reads.insert(
            id,
            ForwardedRead {
                request,
                slot,
                volume,
                extent,
            },
        );
        let peer = self.peers[slot].config.node_id;
        out.push(Action::SendOnData {
            peer,
            message: PeerMessage::ReadRequest {
                id,
                volume,
                offset,
                length,
            },
        });
    }

    /// A Diskless peer's read: served from our disk if it is UpToDate, refused otherwise.
    pub(super) fn receive_read_request(
        &mut self,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::ReadRequestUnknownVolume { volume })?;
        let fits = extent.length > 0
            && extent.length <= FORWARDED_READ_BYTES_MAX
            && extent.end() <= self.volumes[vslot].size_bytes;
        let peer = self.peers[slot].config.node_id;
        if self.volumes[vslot].disk == DiskState::Diskless {
            // Not a protocol error: we may have detached since the peer chose us.
            let Extent { offset, length } = extent;
            out.push(Action::SendOnData {
                peer,
                message: PeerMessage::ReadNegReply {
                    id,
                    volume,
                    offset,
                    length,
                },
            });
            return Ok(());
        }
        if !fits {
            return Err(PeerViolation::ReadRequestInvalid { volume, extent });
        }
        self.pending_forwarded_serves
            .insert((peer, id), (volume, extent));
        out.push(Action::LocalRead {
            io: IoId::ForwardedRead { peer, id },
            volume,
            offset: extent.offset,
            length: extent.length,
        });
        Ok(())
    }

    /// Our read for a Diskless peer finished: send the data, or say it failed.
    pub(super) fn forwarded_read_done(
        &mut self,
        peer: u8,
        id: u64,
        result: Result<P, IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        if self.peers[slot].connection != ConnState::Connected {
            return;
        }
        let pending = self.pending_forwarded_serves.remove(&(peer, id));
        let Some((volume, extent)) = pending else {
            return;
        };
        let Extent { offset, length } = extent;
        let message = match result {
            Ok(data) => PeerMessage::ReadReply {
                id,
                volume,
                offset,
                length,
                data,
            },
            Err(_) => PeerMessage::ReadNegReply {
                id,
                volume,
                offset,
                length,
            },
        };
        out.push(Action::SendOnData { peer, message });
    }

    /// A peer answered read `id`.
    pub(super) fn receive_read_reply(
        &mut self,
        slot: usize,
        id: u64,
        volume: u16,
        extent: Extent,
        result: Result<P, IoError>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let matches = self
            .forwarded_reads
            .get(&id)
            .is_some_and(|r| r.slot == slot && r.volume == volume && r.extent == extent);
        if !matches {
            return Err(PeerViolation::ReadReplyUnrequested { id });
        }
        let Some(read) = self.forwarded_reads.remove(&id) else {
            return Ok(());
        };
        out.push(Action::ReadDone {
            request: read.request,
            result,
        });
        Ok(())
    }

    /// The peer in `slot` is gone: the reads that waited on it fail (EIO).
    pub(super) fn fail_forwarded_reads(&mut self, slot: usize, out: &mut Vec<Action<P>>) {
        let lost: Vec<u64> = self
            .forwarded_reads
            .iter()
            .filter(|(_, r)| r.slot == slot)
            .map(|(&id, _)| id)
            .collect();
        for id in lost {
            if let Some(read) = self.forwarded_reads.remove(&id) {
                out.push(Action::ReadDone {
                    request: read.request,
                    result: Err(IoError::Io),
                });
            }
        }
        let peer = self.peers[slot].config.node_id;
        self.pending_forwarded_serves.retain(|(p, _), _| *p != peer);
    }
}

/// The longest read a Diskless peer may ask for: the longest NBD request.
pub const FORWARDED_READ_BYTES_MAX: u64 = 32 << 20;
