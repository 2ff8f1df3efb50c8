//! Activity-log tests of the Primary's write path (issue 3: "a primary that crashes is
//! recovered from its activity log"; drbd-semantics.md §3 "Activity log": a write to an
//! inactive extent costs a synchronous metadata write first). Node A is Primary with a log of
//! 7 extents over a 64 MiB volume; the test plays the driver and answers every
//! `WriteActivityLog` by hand, keeping the ring and the bitmap pages it wrote.

use std::collections::{BTreeMap, BTreeSet};

use meta::{
    format_ring, recover, ActivityLog, ActivityLogConfig, AlUpdates, Bitmap, Transaction,
    AL_EXTENT_BYTES,
};

use super::*;

const EXTENT: u64 = AL_EXTENT_BYTES;
const EXTENTS: u64 = 16;
const LOGGED_BYTES: u64 = EXTENTS * EXTENT;
const AL_EXTENTS: u16 = 7;
const RING_BLOCKS: u32 = 8;
const BLOCK: u64 = 4096;

fn new_log(updates: AlUpdates) -> ActivityLog {
    let config = ActivityLogConfig {
        al_extents: AL_EXTENTS,
        al_ring_blocks: RING_BLOCKS,
        extent_count: EXTENTS,
        updates,
    };
    // The driver formatted the ring with transactions 0..RING_BLOCKS.
    ActivityLog::new(config, u64::from(RING_BLOCKS)).expect("valid log")
}

/// A 64 MiB volume in sync with its peer's, with an activity log if `log`.
pub(super) fn logged_volume(log: Option<AlUpdates>) -> VolumeConfig {
    let mut ids = GenerationIds::just_created();
    ids.current = SYNCED_UUID;
    VolumeConfig {
        ids,
        disk: DiskState::UpToDate,
        activity_log: log.map(new_log),
        ..VolumeConfig::fresh(0, LOGGED_BYTES)
    }
}

fn kinds(pair: &Pair, node: usize) -> Vec<&'static str> {
    let kind = |action: &Action<Vec<u8>>| match action {
        Action::LocalWrite { .. } => "write",
        Action::WriteActivityLog { .. } => "al",
        Action::PersistMeta { .. } => "meta",
        Action::LocalFlush { .. } => "flush",
        _ => "other",
    };
    pair.local[node].iter().map(kind).collect()
}

fn count(kinds: &[&str], kind: &str) -> usize {
    kinds.iter().filter(|k| **k == kind).count()
}

fn op_bytes<P>(op: &DiskOp<P>) -> Extent {
    match op {
        DiskOp::Write { offset, length, .. }
        | DiskOp::Trim { offset, length, .. }
        | DiskOp::WriteZeroes { offset, length, .. } => Extent {
            offset: *offset,
            length: *length,
        },
    }
}

impl Pair {
    /// Connected, in sync, A Primary with an activity log, B without one.
    fn logged(protocol: Protocol) -> Pair {
        let a = engine_with(
            0,
            peer_config(1, protocol),
            logged_volume(Some(AlUpdates::Enabled)),
        );
        let b = engine_with(1, peer_config(0, protocol), logged_volume(None));
        let mut pair = Pair::unconnected([a, b]);
        pair.connect();
        let mut out = Vec::new();
        pair.nodes[A]
            .promote(Promotion::Normal, &mut out)
            .expect("promote");
        pair.route(A, out);
        pair.deliver_all();
        pair
    }

    fn submit_op(&mut self, request: RequestId, op: Op<Vec<u8>>) {
        let mut out = Vec::new();
        self.nodes[A].submit(self.now, request, 0, op, &mut out);
        self.route(A, out);
    }

    /// Removes the first queued activity-log write of `node`.
    fn take_al(&mut self, node: usize) -> Option<Action<Vec<u8>>> {
        let index = self.local[node]
            .iter()
            .position(|a| matches!(a, Action::WriteActivityLog { .. }))?;
        self.local[node].remove(index)
    }

    /// Performs (answers Ok) the first queued activity-log write of `node`.
    fn run_al(&mut self, node: usize) -> bool {
        let Some(action) = self.take_al(node) else {
            return false;
        };
        self.perform(node, action);
        true
    }

    /// Answers the first queued activity-log write of `node` with an I/O error.
    fn fail_al(&mut self, node: usize) -> bool {
        let Some(Action::WriteActivityLog { io, .. }) = self.take_al(node) else {
            return false;
        };
        let mut out = Vec::new();
        self.nodes[node].local_done(self.now, io, Err(IoError::Io), &mut out);
        self.route(node, out);
        true
    }

    /// Performs the queued local write of `node` that starts at `offset`.
    fn run_write_at(&mut self, node: usize, offset: u64) {
        let index = self.local[node]
            .iter()
            .position(
                |a| matches!(a, Action::LocalWrite { op, .. } if op_bytes(op).offset == offset),
            )
            .expect("a local write at that offset is queued");
        let action = self.local[node].remove(index).expect("present");
        self.perform(node, action);
    }

    fn al_records(&self) -> Vec<AlRecord> {
        self.al_written
            .iter()
            .filter(|(n, _)| *n == A)
            .map(|(_, r)| r.clone())
            .collect()
    }

    fn volume_status(&self) -> VolumeStatus {
        self.nodes[A].status().volumes[0].clone()
    }

    fn sent_offsets(&self) -> Vec<u64> {
        let data = |(_, m): &(Kind, PeerMessage<Vec<u8>>)| match m {
            PeerMessage::Data { offset, .. } => Some(*offset),
            _ => None,
        };
        self.links[B].iter().filter_map(data).collect()
    }

    fn tick_all(&mut self) {
        for node in [A, B] {
            self.now = self.now.after(TICK_INTERVAL);
            let mut out = Vec::new();
            self.nodes[node].tick(self.now, &mut out);
            self.route(node, out);
        }
    }

    fn failed(&self, request: RequestId) -> Option<IoError> {
        self.completed
            .iter()
            .find(|(r, _)| *r == request)
            .and_then(|(_, result)| result.err())
    }
}

/// Once every write is durably confirmed by the peer (its epoch closed, flushed and
/// acknowledged), the cache is idle: no transaction and no write in flight (every begin was
/// ended).
fn assert_log_idle(pair: &mut Pair) {
    pair.confirm_all();
    let log = pair.nodes[A].activity_log(0).expect("A has a log");
    assert_eq!(log.transaction_in_flight(), None);
    for extent in log.active_extents() {
        assert_eq!(
            log.writes_in_flight(extent),
            0,
            "extent {extent} still has a write in flight"
        );
    }
}

/// Issue 3: a write to a cold extent first makes its activation durable; nothing is written or
/// sent before the driver answers the transaction.
#[test]
fn a_cold_write_issues_the_transaction_first_and_nothing_else() {
    let mut pair = Pair::logged(Protocol::C);
    pair.write(1, 0, 7, 4096);
    assert_eq!(kinds(&pair, A), ["al"]);
    assert!(
        pair.links[B].is_empty(),
        "nothing sent before the transaction is durable"
    );
    let Some(Action::WriteActivityLog {
        io,
        volume,
        offset_bytes,
        block,
        bitmap_pages,
        evicts,
    }) = pair.local[A].front().cloned()
    else {
        panic!("expected the transaction");
    };
    let transaction = Transaction::decode(&block).expect("a valid 4 KiB block");
    assert_eq!((volume, block.len()), (0, 4096));
    assert_eq!(
        io,
        IoId::ActivityLog {
            volume: 0,
            seq: transaction.seq
        }
    );
    assert_eq!(
        transaction.seq,
        u64::from(RING_BLOCKS),
        "the first number after the formatted ring"
    );
    assert_eq!(offset_bytes, 0, "transaction 8 goes to ring block 0");
    assert_eq!(transaction.updates.len(), 1);
    assert_eq!(transaction.updates[0].extent, Some(0));
    assert!(bitmap_pages.is_empty(), "nothing is evicted");
    assert!(!evicts, "an activation alone needs no data flush before it");
    assert!(pair.run_al(A));
    assert_eq!(kinds(&pair, A), ["write"]);
    assert_eq!(pair.sent_offsets(), [0]);
    pair.deliver_all();
    assert!(pair.is_complete(1));
    assert_eq!(pair.volume_status().al_writes, 1);
    assert_log_idle(&mut pair);
}

/// A second write to the extent being activated waits for the same transaction.
#[test]
fn a_write_to_an_extent_being_activated_waits_for_the_same_transaction() {
    let mut pair = Pair::logged(Protocol::C);
    pair.write(1, 0, 1, 4096);
    pair.write(2, 65536, 2, 4096);
    assert_eq!(kinds(&pair, A), ["al"], "one transaction for both writes");
    assert!(pair.links[B].is_empty());
    assert!(pair.run_al(A));
    assert_eq!(kinds(&pair, A), ["write", "write"]);
    assert_eq!(pair.sent_offsets(), [0, 65536]);
    pair.deliver_all();
    assert!(pair.is_complete(1) && pair.is_complete(2));
    assert_eq!(pair.volume_status().al_writes, 1);
}

/// A write to a hot extent goes out at once.
#[test]
fn a_hot_extent_needs_no_transaction() {
    let mut pair = Pair::logged(Protocol::C);
    pair.write(1, 0, 1, 4096);
    pair.deliver_all();
    pair.write(2, EXTENT - 4096, 2, 4096);
    assert_eq!(kinds(&pair, A), ["write"]);
    assert_eq!(pair.sent_offsets(), [EXTENT - 4096]);
    pair.deliver_all();
    assert_eq!(pair.volume_status().al_writes, 1);
    assert_eq!(pair.al_records().len(), 1);
}

/// A write overlapping one that waits for the log is not issued before it, even once the
/// transaction is written: the earlier write goes first and the later one wins on both disks.
#[test]
fn an_overlapping_write_never_overtakes_one_waiting_for_the_log() {
    let mut pair = Pair::logged(Protocol::C);
    pair.write(1, 0, 1, 8192);
    pair.write(2, 4096, 2, 4096);
    pair.write(3, 2 * EXTENT, 3, 4096);
    assert_eq!(
        kinds(&pair, A),
        ["al"],
        "write 2 overlaps write 1; write 3 is busy"
    );
    assert!(pair.run_al(A));
    assert_eq!(
        kinds(&pair, A),
        ["write", "al"],
        "write 1 goes; write 3's transaction follows"
    );
    assert_eq!(pair.sent_offsets(), [0]);
    assert!(pair.run_al(A));
    assert_eq!(
        pair.sent_offsets(),
        [0, 2 * EXTENT],
        "write 2 still waits for write 1"
    );
    pair.deliver_all();
    assert!((1..=3).all(|r| pair.is_complete(r)));
    assert_eq!(pair.disks[A][4096], 2);
    assert_eq!(pair.disks[A], pair.disks[B]);
}

/// drbd-semantics.md §3 and the meta crash-safety rule: the transaction that evicts an extent
/// carries the dirty bitmap pages covering it, so the bits for an absent peer are durable
/// before the ring stops calling the extent hot.
#[test]
fn an_eviction_carries_the_bitmap_pages_of_the_evicted_extent() {
    let mut pair = Pair::logged(Protocol::C);
    pair.disconnect();
    for extent in 0..=u64::from(AL_EXTENTS) {
        pair.write(extent + 1, extent * EXTENT, 1, 4096);
        pair.deliver_all();
        assert!(pair.is_complete(extent + 1));
    }
    let records = pair.al_records();
    assert_eq!(records.len(), usize::from(AL_EXTENTS) + 1);
    assert!(
        records[..usize::from(AL_EXTENTS)]
            .iter()
            .all(|r| r.bitmap_pages.is_empty()),
        "free slots evict nothing"
    );
    let eviction = &records[usize::from(AL_EXTENTS)];
    let transaction = Transaction::decode(&eviction.block).expect("valid");
    assert_eq!(
        transaction.updates,
        [meta::activity_log::SlotUpdate {
            slot: 0,
            extent: Some(7)
        }],
        "extent 0 was least recently used"
    );
    // One page covers 128 MiB at 4 KiB per bit: the whole volume.
    assert_eq!(eviction.bitmap_pages.len(), 1);
    let (peer, page, image) = &eviction.bitmap_pages[0];
    assert_eq!((*peer, *page), (1, 0));
    let mut durable = Bitmap::new(LOGGED_BYTES, 4096).expect("valid");
    durable.load_page(0, image).expect("a whole page");
    assert!(durable.is_set(0), "the evicted extent's bit is in the page");
    assert_eq!(
        durable.count_set_blocks(),
        7,
        "the page as it was before the eighth write"
    );
    assert_eq!(pair.volume_status().bm_writes, 1);
    let pages = pair.nodes[A].take_dirty_bitmap_pages(0, 1);
    assert_eq!(
        pages.pages.len(),
        1,
        "the eighth write dirtied page 0 again"
    );
    assert!(!pages.clears, "client writes only set bits");
    assert_eq!(
        pair.volume_status().bm_writes,
        2,
        "pages taken by the driver count too"
    );
    assert_log_idle(&mut pair);
}

/// Backpressure: with every slot held by a write in flight, one more cold write waits (and no
/// transaction is issued) until one of them ends, which is when its peer confirmed it
/// durably too (its epoch's barrier acknowledged after the peer's flush).
#[test]
fn a_full_cache_holds_a_cold_write_until_a_write_ends_everywhere() {
    let mut pair = Pair::logged(Protocol::C);
    for extent in 0..u64::from(AL_EXTENTS) {
        pair.write(extent, extent * EXTENT, 1, 4096);
    }
    while pair.run_al(A) {}
    assert_eq!(pair.volume_status().al_writes, u64::from(AL_EXTENTS));
    assert_eq!(count(&kinds(&pair, A), "write"), usize::from(AL_EXTENTS));
    pair.write(7, 7 * EXTENT, 2, 4096);
    assert_eq!(
        count(&kinds(&pair, A), "al"),
        0,
        "busy: every slot holds a write in flight"
    );
    assert!(!pair.sent_offsets().contains(&(7 * EXTENT)));
    pair.write(8, 2 * EXTENT + 8192, 3, 4096);
    assert!(
        !pair.sent_offsets().contains(&(2 * EXTENT + 8192)),
        "a write to a hot extent queues behind the busy one (first come, first served)"
    );
    pair.run_write_at(A, 3 * EXTENT);
    assert_eq!(
        count(&kinds(&pair, A), "al"),
        0,
        "the peer has not confirmed write 3 yet"
    );
    while pair.deliver(B) {}
    pair.run_write_at(B, 3 * EXTENT);
    assert!(pair.deliver(A), "write ack for write 3");
    assert!(pair.is_complete(3));
    assert!(
        pair.take_al(A).is_none(),
        "write 3 is not durable on B yet: its extent stays hot"
    );
    // A write is durable on B only with its whole epoch: finish the other writes, close the
    // epoch, let B flush it and acknowledge the barrier. Only then does a slot free up.
    for extent in (0..u64::from(AL_EXTENTS)).filter(|&e| e != 3) {
        pair.run_write_at(A, extent * EXTENT);
    }
    for _ in 0..2 {
        pair.tick(A, TICK_INTERVAL);
        while pair.deliver(B) | pair.run_local(B) {}
        while pair.deliver(A) {}
    }
    let Some(Action::WriteActivityLog { block, .. }) = pair.take_al(A) else {
        panic!("the held write's transaction")
    };
    let transaction = Transaction::decode(&block).expect("valid");
    assert_eq!(transaction.updates.len(), 1, "{:?}", transaction.updates);
    assert_eq!(
        transaction.updates[0].extent,
        Some(7),
        "the held write's extent takes a freed slot"
    );
    assert!(
        pair.sent_offsets().contains(&(2 * EXTENT + 8192)),
        "the queue moved on: the hot write goes while the transaction is written"
    );
    let io = IoId::ActivityLog {
        volume: 0,
        seq: transaction.seq,
    };
    let mut out = Vec::new();
    pair.nodes[A].local_done(pair.now, io, Ok(()), &mut out);
    pair.route(A, out);
    assert!(pair.sent_offsets().contains(&(7 * EXTENT)));
    pair.deliver_all();
    assert!((0..=8).all(|r| pair.is_complete(r)));
    assert_log_idle(&mut pair);
}

/// A failed transaction fails the writes waiting for it with an I/O error; nothing of them was
/// written or sent, no bit is set, and the next cold write tries a new transaction.
#[test]
fn a_failed_transaction_fails_the_writes_waiting_for_it() {
    let mut pair = Pair::logged(Protocol::C);
    pair.write(1, 0, 1, 4096);
    pair.write(2, 8192, 2, 4096);
    pair.write(3, 2 * EXTENT, 3, 4096);
    assert!(pair.fail_al(A));
    assert_eq!(pair.failed(1), Some(IoError::Io));
    assert_eq!(pair.failed(2), Some(IoError::Io));
    assert_eq!(
        pair.failed(3),
        None,
        "write 3 waited for a free transaction, not for this one"
    );
    assert_eq!(kinds(&pair, A), ["al"], "write 3 gets its own transaction");
    assert!(pair.links[B].is_empty());
    pair.deliver_all();
    assert!(pair.is_complete(3));
    assert_eq!(
        pair.disks[A][0], 0,
        "the failed writes never reached a disk"
    );
    assert_eq!(pair.out_of_sync(), 0);
    pair.write(4, 0, 4, 4096);
    assert_eq!(kinds(&pair, A), ["al"], "extent 0 is cold again");
    pair.deliver_all();
    assert!(pair.is_complete(4));
    assert_eq!(pair.volume_status().al_writes, 2);
    assert_log_idle(&mut pair);
}

/// The pages a failed transaction carried (which may not have reached the disk) go with the
/// next transaction, so the extents it evicted stay covered.
#[test]
fn the_next_transaction_carries_the_pages_a_failed_one_owed() {
    let mut pair = Pair::logged(Protocol::C);
    pair.disconnect();
    for extent in 0..u64::from(AL_EXTENTS) {
        pair.write(extent + 1, extent * EXTENT, 1, 4096);
        pair.deliver_all();
    }
    pair.write(10, 7 * EXTENT, 2, 4096);
    let Some(Action::WriteActivityLog { bitmap_pages, .. }) = pair.local[A].front().cloned() else {
        panic!("eviction")
    };
    assert_eq!(
        bitmap_pages.len(),
        1,
        "the eviction of extent 0 carries page 0"
    );
    assert!(pair.fail_al(A));
    assert_eq!(pair.failed(10), Some(IoError::Io));
    pair.write(11, 8 * EXTENT, 3, 4096);
    let Some(Action::WriteActivityLog { bitmap_pages, .. }) = pair.local[A].front().cloned() else {
        panic!("eviction")
    };
    assert_eq!(
        bitmap_pages.len(),
        1,
        "page 0 again, although no bit changed since"
    );
    pair.deliver_all();
    assert!(pair.is_complete(11));
}

/// A transaction that evicts says so even when the evicted extent has no dirty bitmap page
/// (every write to it reached the peer): the driver must still make the data disk's
/// completed writes durable before it, or a power loss could drop a write to that extent
/// while the ring no longer calls it hot. An activation alone says nothing is evicted.
#[test]
fn an_eviction_without_dirty_pages_still_asks_for_the_data_flush() {
    let mut pair = Pair::logged(Protocol::C);
    for extent in 0..u64::from(AL_EXTENTS) {
        pair.write(extent + 1, extent * EXTENT, 1, 4096);
        let Some(Action::WriteActivityLog { evicts, .. }) = pair.local[A].front().cloned() else {
            panic!("extent {extent} is cold: a transaction first")
        };
        assert!(!evicts, "extent {extent} fills a free slot");
        pair.deliver_all();
    }
    assert_eq!(pair.out_of_sync(), 0);
    pair.write(100, u64::from(AL_EXTENTS) * EXTENT, 2, 4096);
    let Some(Action::WriteActivityLog {
        evicts,
        bitmap_pages,
        ..
    }) = pair.local[A].front().cloned()
    else {
        panic!("eviction")
    };
    assert!(
        bitmap_pages.is_empty(),
        "every write reached the peer: no dirty page"
    );
    assert!(evicts, "an extent leaves the log");
    pair.deliver_all();
    assert!(pair.is_complete(100));
}

/// Issue 3: with an activity log a crashed Primary keeps the bits the driver marked from the
/// ring instead of setting every bit; without one (or with `al-updates no`) it sets them all.
/// The crashed-primary handshake flag is raised either way (drbd-semantics.md §2).
#[test]
fn a_crashed_primary_sets_every_bit_only_without_a_log() {
    let cases = [
        (None, LOGGED_BYTES),
        (Some(AlUpdates::Enabled), EXTENT),
        (Some(AlUpdates::Disabled), LOGGED_BYTES),
    ];
    for (updates, out_of_sync) in cases {
        let mut volume = logged_volume(updates);
        volume.crashed_primary = true;
        let mut bitmap = Bitmap::new(LOGGED_BYTES, 4096).expect("valid");
        bitmap.set(2 * EXTENT, EXTENT).expect("in range");
        volume.bitmaps = vec![PeerBitmap { peer: 1, bitmap }];
        let engine = engine_with(0, peer_config(1, Protocol::C), volume);
        let status = engine.status();
        assert_eq!(
            status.peers[0].volumes[0].out_of_sync_bytes, out_of_sync,
            "{updates:?}"
        );
        let meta = engine.meta(0).expect("volume 0");
        assert!(meta.ids.flags.crashed_primary, "{updates:?}");
        assert_eq!(
            engine.activity_log(0).is_some(),
            updates == Some(AlUpdates::Enabled)
        );
    }
}

/// `al-updates no`: no transaction is ever written.
#[test]
fn a_disabled_log_writes_no_transaction() {
    let a = engine_with(
        0,
        peer_config(1, Protocol::C),
        logged_volume(Some(AlUpdates::Disabled)),
    );
    let b = engine_with(1, peer_config(0, Protocol::C), logged_volume(None));
    let mut pair = Pair::unconnected([a, b]);
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("promote");
    pair.route(A, out);
    pair.deliver_all();
    for extent in 0..EXTENTS {
        pair.write(extent, extent * EXTENT, 1, 4096);
        assert_eq!(count(&kinds(&pair, A), "al"), 0);
    }
    pair.deliver_all();
    assert_eq!(pair.completed.len(), EXTENTS as usize);
    assert_eq!(pair.volume_status().al_writes, 0);
}

#[test]
fn the_engine_refuses_a_log_that_does_not_fit() {
    let config = |log: ActivityLog| EngineConfig {
        node_id: 0,
        volumes: vec![VolumeConfig {
            activity_log: Some(log),
            ..logged_volume(None)
        }],
        peers: vec![peer_config(1, Protocol::C)],
        random_seed: 1,
    };
    let small = ActivityLogConfig {
        extent_count: EXTENTS - 1,
        ..*new_log(AlUpdates::Enabled).config()
    };
    let small = ActivityLog::new(small, 8).expect("valid on its own");
    let refused = Engine::<Vec<u8>>::new(config(small)).err();
    let expected = SyncError::ActivityLogTooSmall {
        volume: 0,
        extent_count: EXTENTS - 1,
        volume_bytes: LOGGED_BYTES,
    };
    assert_eq!(refused, Some(expected));
    let mut used = new_log(AlUpdates::Enabled);
    used.begin_write(meta::ExtentRange { first: 0, end: 1 })
        .expect("in range");
    let refused = Engine::<Vec<u8>>::new(config(used)).err();
    assert_eq!(refused, Some(SyncError::ActivityLogInUse { volume: 0 }));
}

/// A request spanning more extents than one transaction may activate is refused, not split.
#[test]
fn a_request_spanning_too_many_extents_is_refused() {
    let mut pair = Pair::logged(Protocol::C);
    let flags = WriteFlags::default();
    pair.submit_op(
        1,
        Op::Trim {
            offset: 0,
            length: u64::from(AL_EXTENTS + 1) * EXTENT,
            flags,
        },
    );
    assert_eq!(pair.failed(1), Some(IoError::Invalid));
    pair.submit_op(
        2,
        Op::Trim {
            offset: EXTENT / 2,
            length: EXTENT,
            flags,
        },
    );
    assert_eq!(
        kinds(&pair, A),
        ["al"],
        "a trim over two extents activates both at once"
    );
    pair.deliver_all();
    assert!(pair.is_complete(2));
    assert_eq!(pair.volume_status().al_writes, 1);
    assert_log_idle(&mut pair);
}

/// drbd-semantics.md §3 with the resync invariant of `engine/resync.rs`: client writes held for
/// the log while A is a sync source keep resync reads off their blocks (the engine asserts it),
/// and the replicas end identical.
#[test]
fn writes_held_for_the_log_during_a_resync_end_identical() {
    for seed in 1..=8_u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let mut pair = Pair::logged(Protocol::C);
        pair.disconnect();
        // Blocks 0..8 of every extent differ while B is away.
        for extent in 0..EXTENTS {
            pair.write(extent, extent * EXTENT, 1, 8 * 4096);
            pair.deliver_all();
        }
        pair.connect();
        let mut request = 100;
        for _ in 0..600 {
            match rng.below(8) {
                0 => pair.tick_all(),
                1 if request < 200 => {
                    let offset = rng.below(EXTENTS) * EXTENT + rng.below(8) * BLOCK;
                    pair.write(request, offset, rng.below(250) as u8 + 2, 4096);
                    request += 1;
                }
                2 | 3 => {
                    pair.deliver(A);
                }
                4 | 5 => {
                    pair.deliver(B);
                }
                node => {
                    let node = if node == 6 { A } else { B };
                    if !pair.local[node].is_empty() {
                        let index = rng.below(pair.local[node].len() as u64) as usize;
                        let action = pair.local[node].remove(index).expect("present");
                        pair.perform(node, action);
                    }
                }
            }
        }
        for _ in 0..2000 {
            pair.deliver_all();
            let replication = pair.nodes[A].status().peers[0].volumes[0].replication;
            if replication == ReplState::Established && pair.out_of_sync() == 0 {
                break;
            }
            pair.tick_all();
        }
        assert_eq!(pair.out_of_sync(), 0, "seed {seed}: the resync finished");
        assert_eq!(
            pair.completed.len() as u64,
            EXTENTS + request - 100,
            "seed {seed}"
        );
        assert!(pair.completed.iter().all(|(_, r)| r.is_ok()), "seed {seed}");
        assert!(
            pair.disks[A] == pair.disks[B],
            "seed {seed}: replicas differ"
        );
        assert!(pair.disconnects.is_empty(), "seed {seed}");
        assert_log_idle(&mut pair);
    }
}

/// `engine/resync.rs` invariant with the log: a resync request that arrives for blocks a
/// client write is held on (waiting for its transaction) is not read until that write is done,
/// so the old data cannot overwrite the new on the target.
#[test]
fn a_resync_read_waits_for_a_write_held_for_the_log() {
    let mut pair = Pair::logged(Protocol::C);
    pair.disconnect();
    // Block 0 of extents 0..=7 differs; extent 0 is evicted by the eighth.
    for extent in 0..=u64::from(AL_EXTENTS) {
        pair.write(extent, extent * EXTENT, 1, 4096);
        pair.deliver_all();
    }
    for node in [A, B] {
        let mut out = Vec::new();
        pair.nodes[node].peer_connected(pair.now, 1 - node as u8, &mut out);
        pair.route(node, out);
    }
    let requested = |pair: &Pair| {
        let request =
            |(_, m): &(Kind, PeerMessage<Vec<u8>>)| matches!(m, PeerMessage::ResyncRequest { .. });
        pair.links[A].iter().any(request)
    };
    for _ in 0..100 {
        if requested(&pair) {
            break;
        }
        let _ = pair.deliver(B) || pair.run_local(B) || pair.run_local(A) || pair.deliver(A);
    }
    assert!(requested(&pair), "B asks for the blocks");
    pair.write(100, 0, 9, 4096);
    assert_eq!(
        count(&kinds(&pair, A), "al"),
        1,
        "extent 0 is cold: the write is held"
    );
    while pair.deliver(A) {}
    let reads_block_0 = pair.local[A]
        .iter()
        .any(|a| matches!(a, Action::LocalRead { offset: 0, .. }));
    assert!(!reads_block_0, "no resync read under the held write");
    for _ in 0..100 {
        pair.deliver_all();
        if pair.out_of_sync() == 0 && pair.is_complete(100) {
            break;
        }
        pair.tick_all();
    }
    assert!(pair.is_complete(100));
    assert_eq!(pair.out_of_sync(), 0);
    assert_eq!(
        pair.disks[B][0], 9,
        "the client write is not overwritten by older resync data"
    );
    assert!(pair.disks[A] == pair.disks[B]);
}

/// A seeded xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// What the test driver knows about node A's metadata disk and which blocks may differ on B.
struct Model {
    ring: Vec<u8>,
    /// The bitmap pages for B that A's transactions made durable.
    durable: Bitmap,
    records_seen: usize,
    /// Extents the durable ring calls hot.
    hot: BTreeSet<u64>,
    /// Writes A issued that may still differ: seq → (bytes, done on A, done on B).
    open: BTreeMap<u64, (Extent, bool, bool)>,
    seen: BTreeSet<u64>,
    /// Blocks B will never get from the write path (written while it was away).
    absent: BTreeSet<u64>,
    connected: bool,
}

impl Model {
    fn new() -> Model {
        let ring = format_ring(RING_BLOCKS, AL_EXTENTS, 0).expect("formats");
        let durable = Bitmap::new(LOGGED_BYTES, 4096).expect("valid");
        let (records_seen, hot, open, seen, absent) = Default::default();
        Model {
            ring,
            durable,
            records_seen,
            hot,
            open,
            seen,
            absent,
            connected: true,
        }
    }

    /// Takes in what happened since the last call and checks the crash-safety invariant.
    fn observe(&mut self, pair: &Pair, seed: u64) {
        let records = pair
            .al_written
            .iter()
            .filter(|(n, _)| *n == A)
            .map(|(_, r)| r);
        for record in records.skip(self.records_seen) {
            let offset = usize::try_from(record.offset_bytes).expect("small");
            self.ring[offset..offset + 4096].copy_from_slice(&record.block);
            for (peer, page, image) in &record.bitmap_pages {
                assert_eq!(*peer, 1, "seed {seed}: A's only peer");
                self.durable.load_page(*page, image).expect("a whole page");
            }
            self.records_seen += 1;
            let recovery = recover(&self.ring, AlUpdates::Enabled).expect("reads");
            assert_eq!(
                recovery.full_resync, None,
                "seed {seed}: the ring always recovers"
            );
            self.hot = recovery.hot_extents.iter().map(|&e| u64::from(e)).collect();
        }
        let local = pair.local[A].iter().filter_map(|a| match a {
            Action::LocalWrite {
                io: IoId::Write { seq },
                op,
                ..
            } => Some((*seq, op_bytes(op))),
            _ => None,
        });
        let sent = pair.links[B].iter().filter_map(|(_, m)| match m {
            PeerMessage::Data { seq, op, .. } => Some((*seq, op_bytes(op))),
            _ => None,
        });
        for (seq, bytes) in local.chain(sent).collect::<Vec<_>>() {
            if self.seen.insert(seq) {
                self.open.insert(seq, (bytes, false, !self.connected));
                if !self.connected {
                    self.absent.extend(blocks(bytes));
                }
            }
        }
        self.check(seed);
    }

    fn check(&self, seed: u64) {
        for (seq, (bytes, _, _)) in &self.open {
            let extents = bytes.offset / EXTENT..bytes.end().div_ceil(EXTENT);
            for extent in extents {
                assert!(
                    self.hot.contains(&extent),
                    "seed {seed}: write {seq} in flight on extent {extent}, which the ring calls \
                     cold"
                );
            }
        }
        for &block in &self.absent {
            let hot = self.hot.contains(&(block * BLOCK / EXTENT));
            assert!(
                hot || self.durable.is_set(block),
                "seed {seed}: block {block} differs on B, is neither hot nor in a durable page"
            );
        }
    }

    fn done(&mut self, node: usize, io: IoId) {
        let (seq, node_done) = match (node, io) {
            (A, IoId::Write { seq }) => (seq, 0),
            (B, IoId::PeerWrite { seq, .. }) => (seq, 1),
            _ => return,
        };
        let Some(entry) = self.open.get_mut(&seq) else {
            return;
        };
        if node_done == 0 {
            entry.1 = true;
        } else {
            entry.2 = true;
        }
        if entry.1 && entry.2 {
            self.open.remove(&seq);
        }
    }

    fn disconnected(&mut self) {
        self.connected = false;
        for (bytes, _, b_done) in self.open.values_mut() {
            if !*b_done {
                *b_done = true;
                self.absent.extend(blocks(*bytes));
            }
        }
        self.open.retain(|_, (_, a_done, _)| !*a_done);
    }
}

fn blocks(bytes: Extent) -> impl Iterator<Item = u64> {
    bytes.offset / BLOCK..bytes.end().div_ceil(BLOCK)
}

/// One random local I/O of `node`; A's transactions fail now and then when `failures` is set.
fn run_random_local(
    pair: &mut Pair,
    model: &mut Model,
    rng: &mut Rng,
    node: usize,
    failures: bool,
) {
    let len = pair.local[node].len() as u64;
    let index = rng.below(len) as usize;
    let Some(action) = pair.local[node].remove(index) else {
        return;
    };
    if let (true, Action::WriteActivityLog { io, .. }) = (failures && rng.below(6) == 0, &action) {
        let mut out = Vec::new();
        pair.nodes[node].local_done(pair.now, *io, Err(IoError::Io), &mut out);
        pair.route(node, out);
        return;
    }
    let io = match &action {
        Action::LocalWrite { io, .. } => Some(*io),
        _ => None,
    };
    pair.perform(node, action);
    if let Some(io) = io {
        model.done(node, io);
    }
}

fn random_write(pair: &mut Pair, rng: &mut Rng, request: RequestId) {
    let block = if rng.below(4) == 0 {
        EXTENT / BLOCK - 1
    } else {
        rng.below(EXTENT / BLOCK)
    };
    let offset = rng.below(EXTENTS) * EXTENT + block * BLOCK;
    let length = ((1 + rng.below(3)) * BLOCK).min(LOGGED_BYTES - offset);
    let flags = WriteFlags::default();
    let op = match rng.below(8) {
        0 => Op::Trim {
            offset,
            length,
            flags,
        },
        1 => Op::WriteZeroes {
            offset,
            length,
            flags,
        },
        _ => Op::Write {
            offset,
            length,
            data: vec![rng.below(255) as u8 + 1; length as usize],
            flags,
        },
    };
    pair.submit_op(request, op);
}

/// One step of the random schedule; false when nothing was left to do.
fn random_step(pair: &mut Pair, model: &mut Model, rng: &mut Rng, failures: bool) -> bool {
    let choices = [
        !pair.local[A].is_empty(),
        !pair.links[B].is_empty(),
        !pair.local[B].is_empty(),
        !pair.links[A].is_empty(),
    ];
    if !choices.contains(&true) {
        return false;
    }
    loop {
        match rng.below(4) {
            0 if choices[0] => run_random_local(pair, model, rng, A, failures),
            1 if choices[1] => {
                pair.deliver(B);
            }
            2 if choices[2] => run_random_local(pair, model, rng, B, failures),
            3 if choices[3] => {
                pair.deliver(A);
            }
            _ => continue,
        }
        return true;
    }
}

/// Issue 3, randomized: writes, trims and write-zeroes over 16 extents with a 7-extent log,
/// completed in random order, sometimes with the peer lost midway and with failing
/// transactions. At every step each write in flight is inside an extent the durable ring calls
/// hot, and each block written while the peer was away is hot or set in a durable bitmap page;
/// at the end every request was answered and every begin was matched by an end.
#[test]
fn randomized_writes_stay_inside_the_durable_hot_set() {
    for seed in 1..=30_u64 {
        run_seed(seed);
    }
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let protocol = [Protocol::A, Protocol::B, Protocol::C][(seed % 3) as usize];
    let disconnect_at = seed.is_multiple_of(2).then(|| 100 + rng.below(300));
    let failures = seed.is_multiple_of(5);
    let mut pair = Pair::logged(protocol);
    let mut model = Model::new();
    let mut submitted = 0;
    for step in 0..500 {
        let outstanding = submitted - pair.completed.len() as u64;
        if Some(step) == disconnect_at {
            pair.disconnect();
            model.disconnected();
        } else if outstanding < 12 && rng.below(3) == 0 {
            random_write(&mut pair, &mut rng, submitted);
            submitted += 1;
        } else if rng.below(20) == 0 {
            pair.tick_all();
        } else {
            random_step(&mut pair, &mut model, &mut rng, failures);
        }
        model.observe(&pair, seed);
    }
    drain(&mut pair, &mut model, &mut rng, failures, seed, submitted);
    assert_log_idle(&mut pair);
    assert!(
        pair.disconnects.is_empty(),
        "seed {seed}: no unplanned disconnect"
    );
    let status = pair.volume_status();
    assert_eq!(status.al_writes, model.records_seen as u64, "seed {seed}");
    assert!(
        status.al_writes > u64::from(AL_EXTENTS),
        "seed {seed}: extents were evicted"
    );
    if disconnect_at.is_none() {
        assert!(
            pair.disks[A] == pair.disks[B],
            "seed {seed}: replicas differ"
        );
    }
    if failures {
        let failed = pair.completed.iter().any(|(_, r)| *r == Err(IoError::Io));
        assert!(failed, "seed {seed}: a transaction failed");
    }
}

/// Runs everything left (ticking when idle, so barriers go out) until every request is answered
/// and every reservation released.
fn drain(
    pair: &mut Pair,
    model: &mut Model,
    rng: &mut Rng,
    failures: bool,
    seed: u64,
    submitted: u64,
) {
    let released = |pair: &Pair| {
        let log = pair.nodes[A].activity_log(0).expect("A has a log");
        log.active_extents()
            .iter()
            .all(|&e| log.writes_in_flight(e) == 0)
    };
    for _ in 0..20_000 {
        if !random_step(pair, model, rng, failures) {
            if pair.completed.len() as u64 == submitted && released(pair) {
                return;
            }
            pair.tick_all();
        }
        model.observe(pair, seed);
    }
    panic!(
        "seed {seed}: {} of {submitted} requests answered after draining",
        pair.completed.len()
    );
}

/// A Diskless volume (detached) writes nothing locally, so its writes skip the activity log
/// and the metadata area it lives in (engine/detach.rs).
#[test]
fn a_detached_primary_writes_without_transactions() {
    let mut pair = Pair::logged(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    pair.route(A, out);
    pair.deliver_all();
    pair.write(1, 0, 7, 4096);
    assert_eq!(
        count(&kinds(&pair, A), "al"),
        0,
        "no transaction: {:?}",
        kinds(&pair, A)
    );
    pair.deliver_all();
    assert!(pair.is_complete(1));
    assert_eq!(pair.disks[B][0], 7);
    assert_eq!(pair.disks[A][0], 0, "nothing written on the detached disk");
}
