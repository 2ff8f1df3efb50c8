//! The activity log in the Primary's write path (drbd-semantics.md §3, issue 3): a client write
//! reaches a disk only once its 4 MiB extents are hot in a durable transaction, so a Primary that
//! crashes resyncs its hot extents instead of the whole device.
//!
//! A volume attached with a `meta::ActivityLog` ([`crate::VolumeConfig::activity_log`]) runs
//! every client write, trim and write-zeroes through it (not resync writes, not writes applied
//! as a Secondary). Once a write is admitted (no overlapping write ahead of it),
//! `begin_write` over the extents it touches says:
//! - `Hot`: the write is issued at once, locally and to the peers, as without a log;
//! - `NeedsTransaction`: an [`Action::WriteActivityLog`] goes out with the transaction block
//!   and, for every peer, the dirty bitmap pages of each extent the transaction evicts; the
//!   write is held until the driver answers;
//! - `AfterTransaction`: the write is held until that transaction is answered;
//! - `Busy`: the write is held in a FIFO per volume, retried in order after every answered
//!   transaction and every released reservation. While the FIFO is not empty, later writes of
//!   the volume join its end without trying, so none overtakes another and none starves.
//!
//! A transaction that fails (`local_done` with an error) fails the writes waiting for it with
//! [`IoError::Io`]: none of them was issued, so nothing was written and no bit changes. Its
//! extents go back to cold and the next cold write tries a new transaction; the pages of the
//! extents it evicted (which may not have reached the disk) go with that next transaction.
//! The disk state does not change: the driver saw the error and decides about the disk.
//!
//! Invariants:
//! - A data write is issued only after `Hot` or after its transaction was answered Ok, so its
//!   extents are hot in a durable transaction (asserted in `start_logged`).
//! - A write's extents are released (`end_write`) only once the write is complete to the client
//!   **and** no peer's transfer log holds it (each peer wrote it, or its blocks are marked out of
//!   sync for that peer). Releasing at the local completion would let the extent be evicted
//!   while a peer may still lack the write: a crash then would leave a difference that neither
//!   the ring nor a bitmap records.
//! - Every `begin_write` that reserved is matched by exactly one `end_write`: a held write that
//!   fails is ended at once, a started one by [`Engine::release_if_done`] (its entry in
//!   `reservations` is removed when it is ended).
//! - Held writes count as in flight: later overlapping writes wait behind them (`conflicts`)
//!   and no resync read starts under them (`start_reads_for`).
//! - Bounded: held writes are client requests, bounded by the driver's in-flight limits; at most
//!   one transaction per volume is in flight (the `meta` cache allows no more).

use std::collections::BTreeMap;

use meta::{extent_byte_range, ActivityLog, AlUpdates, AlWrite, Begin, ExtentRange};

use crate::engine::{op_extent, Engine, Peer};
use crate::extent::Extent;
use crate::state::DiskState;
use crate::types::{Action, IoError, IoId, Op, RequestId, Time};
use crate::uuid::SyncError;

/// A volume's activity log and what the engine keeps beside it.
#[derive(Debug)]
pub(super) struct VolumeLog {
    log: ActivityLog,
    /// Extents whose bitmap pages the transaction in flight carries.
    carried: Vec<u32>,
    /// Extents evicted by a transaction that failed: their pages go with the next one.
    owed: Vec<u32>,
    /// Transactions written (`al-writes`).
    pub(super) written: u64,
}

impl VolumeLog {
    /// The log of a volume being attached, or None for `al-updates no`. It must be new (nothing
    /// in flight) and cover the whole volume.
    pub(super) fn attach(
        volume: u16,
        size_bytes: u64,
        log: Option<ActivityLog>,
    ) -> Result<Option<VolumeLog>, SyncError> {
        let Some(log) = log.filter(|log| log.config().updates == AlUpdates::Enabled) else {
            return Ok(None);
        };
        let extent_count = log.config().extent_count;
        if extent_count.saturating_mul(meta::AL_EXTENT_BYTES) < size_bytes {
            return Err(SyncError::ActivityLogTooSmall {
                volume,
                extent_count,
                volume_bytes: size_bytes,
            });
        }
        let busy = log
            .active_extents()
            .iter()
            .any(|&e| log.writes_in_flight(e) > 0);
        if busy || log.transaction_in_flight().is_some() {
            return Err(SyncError::ActivityLogInUse { volume });
        }
        Ok(Some(VolumeLog {
            log,
            carried: Vec::new(),
            owed: Vec::new(),
            written: 0,
        }))
    }

    /// Covers a volume grown to `size_bytes` (`resize.rs`).
    pub(super) fn grow(&mut self, size_bytes: u64) -> Result<(), String> {
        let extent_count = size_bytes.div_ceil(meta::AL_EXTENT_BYTES);
        self.log.grow(extent_count).map_err(|e| e.to_string())
    }

    /// Releases a reservation; each is released exactly once.
    pub(super) fn end(&mut self, range: ExtentRange) {
        let ended = self.log.end_write(range);
        assert!(
            ended.is_ok(),
            "an activity-log reservation ended twice: {ended:?}"
        );
    }
}

/// What a held write waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AlWait {
    /// Its extents are reserved; transaction `seq` must be written first.
    Transaction { seq: u64 },
    /// Nothing reserved: retried in order when a transaction is written or extents are released.
    Busy,
}

/// An admitted client write waiting for the activity log.
#[derive(Debug)]
pub(super) struct Held<P> {
    request: RequestId,
    volume: u16,
    op: Op<P>,
    extent: Extent,
    range: ExtentRange,
    wait: AlWait,
}

impl<P> Held<P> {
    /// Whether this write must go before a later write of `extent` on `volume`.
    pub(super) fn overlaps(&self, volume: u16, extent: &Extent) -> bool {
        self.volume == volume && self.extent.overlaps(extent)
    }

    /// The bytes it will write, if it is a write of `volume`.
    pub(super) fn extent_on(&self, volume: u16) -> Option<Extent> {
        (self.volume == volume).then_some(self.extent)
    }
}

/// The extents a started write holds in its volume's activity log.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reservation {
    vslot: usize,
    range: ExtentRange,
}

/// The outcome of asking the activity log for a write's extents.
pub(super) enum Begun {
    /// Issue the write now.
    Start,
    /// Hold it.
    Hold(AlWait),
    /// The write spans more extents than one transaction can activate.
    Refuse,
}

/// Started writes holding extents, by write sequence number.
pub(super) type Reservations = BTreeMap<u64, Reservation>;

impl<P: Clone> Engine<P> {
    /// The activity log of `volume`, if it has one (`al-updates yes`).
    pub fn activity_log(&self, volume: u16) -> Option<&ActivityLog> {
        let vslot = self.volume_slot(volume)?;
        self.volumes[vslot].log.as_ref().map(|l| &l.log)
    }

    /// Starts an admitted client write, or holds it for the activity log.
    pub(super) fn admit_write(
        &mut self,
        now: Time,
        request: RequestId,
        volume: u16,
        op: Op<P>,
        out: &mut Vec<Action<P>>,
    ) {
        let vslot = self.volume_slot(volume);
        // A Diskless volume writes nothing locally, so there is nothing its log would have
        // to recover after a crash: its writes skip the log (and the metadata it lives in,
        // which may be on the failed disk).
        let logged = vslot.is_some_and(|v| {
            self.volumes[v].log.is_some() && self.volumes[v].disk != DiskState::Diskless
        });
        let (Some(vslot), Some(extent), true) = (vslot, op_extent(&op), logged) else {
            if let Some(seq) = self.start_write(now, request, volume, op, out) {
                self.complete_if_diskless(now, seq, out);
            }
            return;
        };
        let Ok(range) = ExtentRange::covering(extent.offset, extent.length) else {
            out.push(Action::Complete {
                request,
                result: Err(IoError::Invalid),
            });
            return;
        };
        let mut held = Held {
            request,
            volume,
            op,
            extent,
            range,
            wait: AlWait::Busy,
        };
        if self
            .held
            .iter()
            .any(|h| h.volume == volume && h.wait == AlWait::Busy)
        {
            self.held.push_back(held);
            return;
        }
        match self.al_begin(vslot, range, out) {
            Begun::Start => self.start_logged(now, vslot, held, out),
            Begun::Hold(wait) => {
                held.wait = wait;
                self.held.push_back(held);
            }
            Begun::Refuse => out.push(Action::Complete {
                request,
                result: Err(IoError::Invalid),
            }),
        }
    }

    /// Reserves `range` in volume `vslot`'s log, issuing a transaction if it needs one.
    pub(super) fn al_begin(
        &mut self,
        vslot: usize,
        range: ExtentRange,
        out: &mut Vec<Action<P>>,
    ) -> Begun {
        let Some(log) = self.volumes[vslot].log.as_mut() else {
            return Begun::Start;
        };
        match log.log.begin_write(range) {
            Err(_) => Begun::Refuse,
            Ok(Begin::Hot) => Begun::Start,
            Ok(Begin::AfterTransaction { seq }) => Begun::Hold(AlWait::Transaction { seq }),
            Ok(Begin::NeedsTransaction(write)) => {
                // A Secondary keeps the extents of unsettled writes hot (`secondary_log.rs`):
                // telling it what is settled first lets it make room for the write that
                // follows this transaction.
                self.announce_settled(true, out);
                self.issue_transaction(vslot, &write, out);
                Begun::Hold(AlWait::Transaction {
                    seq: write.transaction.seq,
                })
            }
            Ok(Begin::Busy) => {
                // Writes that completed in this epoch may hold the extents until their barrier
                // is acknowledged: send it now rather than at the next tick.
                if self.epoch_must_close {
                    self.close_epoch(false, out);
                }
                Begun::Hold(AlWait::Busy)
            }
        }
    }

    /// Emits the transaction with the dirty bitmap pages of every extent it makes cold (and
    /// of those a failed transaction made cold), for every peer.
    fn issue_transaction(&mut self, vslot: usize, write: &AlWrite, out: &mut Vec<Action<P>>) {
        let block = match write.encode() {
            Ok(block) => block,
            Err(error) => panic!("the activity log built a transaction it cannot encode: {error}"),
        };
        let volume = &mut self.volumes[vslot];
        let Some(log) = volume.log.as_mut() else {
            return;
        };
        let mut carried = std::mem::take(&mut log.owed);
        carried.extend(&write.cold_extents);
        carried.sort_unstable();
        carried.dedup();
        let bitmap_pages = take_pages(&mut self.peers, vslot, volume.size_bytes, &carried);
        let evicts = !carried.is_empty();
        log.carried = carried;
        let pages = u64::try_from(bitmap_pages.len()).unwrap_or(u64::MAX);
        volume.bm_writes = volume.bm_writes.saturating_add(pages);
        let (number, seq) = (volume.number, write.transaction.seq);
        out.push(Action::WriteActivityLog {
            io: IoId::ActivityLog {
                volume: number,
                seq,
            },
            volume: number,
            offset_bytes: write.ring_offset_bytes(),
            block,
            bitmap_pages,
            evicts,
        });
    }

    /// Issues a held write whose extents are durably hot and records its reservation.
    fn start_logged(&mut self, now: Time, vslot: usize, held: Held<P>, out: &mut Vec<Action<P>>) {
        let in_flight = self.volumes[vslot]
            .log
            .as_ref()
            .and_then(|l| l.log.transaction_in_flight());
        let waits = matches!(held.wait, AlWait::Transaction { seq } if in_flight == Some(seq));
        assert!(
            !waits,
            "a write is issued while the transaction it waits for is in flight"
        );
        let range = held.range;
        match self.start_write(now, held.request, held.volume, held.op, out) {
            Some(seq) => {
                let reservation = Reservation { vslot, range };
                assert!(
                    self.reservations.insert(seq, reservation).is_none(),
                    "one reservation per write"
                );
                self.complete_if_diskless(now, seq, out);
            }
            None => {
                if let Some(log) = self.volumes[vslot].log.as_mut() {
                    log.end(range);
                }
            }
        }
    }

    /// Releases the extents of write `seq` once it is complete and no peer's transfer log
    /// holds it; then retries the writes that were busy.
    pub(super) fn release_if_done(&mut self, now: Time, seq: u64, out: &mut Vec<Action<P>>) {
        let Some(&Reservation { vslot, range }) = self.reservations.get(&seq) else {
            return;
        };
        // Transfer logs are ordered by sequence number (`send_to_peer` asserts it).
        let unconfirmed =
            |p: &Peer<P>| p.transfer_log.binary_search_by_key(&seq, |s| s.seq).is_ok();
        if self.in_flight.contains_key(&seq) || self.peers.iter().any(unconfirmed) {
            return;
        }
        self.reservations.remove(&seq);
        if let Some(log) = self.volumes[vslot].log.as_mut() {
            log.end(range);
        }
        self.retry_busy(now, vslot, out);
    }

    /// Retries the busy writes of volume `vslot` in order, up to the first that is still busy.
    pub(super) fn retry_busy(&mut self, now: Time, vslot: usize, out: &mut Vec<Action<P>>) {
        let volume = self.volumes[vslot].number;
        let mut index = 0;
        while index < self.held.len() {
            let held = &self.held[index];
            if held.volume != volume || held.wait != AlWait::Busy {
                index += 1;
                continue;
            }
            let range = held.range;
            match self.al_begin(vslot, range, out) {
                Begun::Hold(AlWait::Busy) => return,
                Begun::Hold(wait) => {
                    self.held[index].wait = wait;
                    index += 1;
                }
                Begun::Start => {
                    if let Some(held) = self.held.remove(index) {
                        self.start_logged(now, vslot, held, out);
                    }
                }
                Begun::Refuse => {
                    if let Some(held) = self.held.remove(index) {
                        let request = held.request;
                        out.push(Action::Complete {
                            request,
                            result: Err(IoError::Invalid),
                        });
                    }
                }
            }
        }
    }

    /// The driver answered an [`Action::WriteActivityLog`].
    pub(super) fn transaction_done(
        &mut self,
        now: Time,
        volume: u16,
        seq: u64,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        let Some(log) = self.volumes[vslot].log.as_mut() else {
            return;
        };
        // An answer for a transaction not in flight has nothing waiting for it.
        if log.log.transaction_in_flight() != Some(seq) {
            return;
        }
        let wait = AlWait::Transaction { seq };
        if result.is_ok() {
            let written = log.log.transaction_written(seq);
            assert!(
                written.is_ok(),
                "the transaction in flight is written: {written:?}"
            );
            log.written += 1;
            log.carried.clear();
            self.pins_activated(vslot, seq, true);
            while let Some(index) = self
                .held
                .iter()
                .position(|h| h.volume == volume && h.wait == wait)
            {
                if let Some(held) = self.held.remove(index) {
                    self.start_logged(now, vslot, held, out);
                }
            }
        } else {
            // Pins end before the log forgets the transaction (it refuses while one holds).
            let unprotected = self.pins_activated(vslot, seq, false);
            self.fail_transaction(vslot, seq, out);
            for slot in unprotected {
                let reason = "a replicated write waits for an activity-log transaction that failed"
                    .to_string();
                self.drop_peer(now, slot, crate::state::ConnState::Unconnected, reason, out);
            }
        }
        self.retry_busy(now, vslot, out);
        self.start_waiting(now, out);
        self.resume_deferred(now, out);
    }

    /// Transaction `seq` could not be written: the writes waiting for it fail, its extents go
    /// back to cold, and the pages it carried are owed by the next transaction.
    fn fail_transaction(&mut self, vslot: usize, seq: u64, out: &mut Vec<Action<P>>) {
        let volume = self.volumes[vslot].number;
        let wait = AlWait::Transaction { seq };
        let Some(log) = self.volumes[vslot].log.as_mut() else {
            return;
        };
        while let Some(index) = self
            .held
            .iter()
            .position(|h| h.volume == volume && h.wait == wait)
        {
            if let Some(held) = self.held.remove(index) {
                log.end(held.range);
                out.push(Action::Complete {
                    request: held.request,
                    result: Err(IoError::Io),
                });
            }
        }
        let failed = log.log.transaction_failed(seq);
        assert!(
            failed.is_ok(),
            "every write waiting for a failed transaction was ended: {failed:?}"
        );
        log.owed = std::mem::take(&mut log.carried);
        // The pages it carried were taken (no longer dirty) but may not be on disk: dirty them
        // again so the next transaction takes those of the owed extents.
        for peer in &mut self.peers {
            peer.bitmaps[vslot].mark_all_pages_dirty();
        }
    }

    /// Client writes admitted and not yet issued.
    pub(super) fn held_count(&self) -> usize {
        self.held.len()
    }
}

/// Takes, for every peer, the dirty bitmap pages covering `extents` of volume `vslot`:
/// `(peer node id, page index, image)`.
fn take_pages<P>(
    peers: &mut [Peer<P>],
    vslot: usize,
    size_bytes: u64,
    extents: &[u32],
) -> Vec<(u8, u64, Vec<u8>)> {
    let mut pages = Vec::new();
    for peer in peers {
        let node_id = peer.config.node_id;
        let bitmap = &mut peer.bitmaps[vslot];
        for &extent in extents {
            let Some((offset, length)) = extent_byte_range(extent, size_bytes) else {
                continue;
            };
            match bitmap.take_dirty_pages_in(offset, length) {
                Ok(taken) => {
                    pages.extend(taken.map(|(page, image)| (node_id, page, image.to_vec())))
                }
                Err(error) => panic!("an extent of the volume lies within its bitmap: {error}"),
            }
        }
    }
    pages
}
