//! Resync scenario tests: the sync handshake, the bitmap exchange and the resync between two
//! engines (drbd-semantics.md §2 generation identifiers and split brain, §3 bitmap and
//! initial sync), with the disks compared byte for byte at the end.

use super::*;

const BLOCK: u64 = 4096;

/// A seeded xorshift generator for the randomized tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

fn with_rate(rate_kib_per_s: u32) -> impl Fn(&mut PeerConfig) {
    move |config| config.resync.resync_rate_kib_per_s = rate_kib_per_s
}

impl Pair {
    /// Two engines with these volumes and peer settings, not connected.
    pub(super) fn build(volumes: [VolumeConfig; 2], configure: impl Fn(&mut PeerConfig)) -> Pair {
        let [a, b] = volumes;
        let mut configs = [peer_config(1, Protocol::C), peer_config(0, Protocol::C)];
        configs.iter_mut().for_each(&configure);
        let [to_b, to_a] = configs;
        Pair::unconnected([engine_with(0, to_b, a), engine_with(1, to_a, b)])
    }

    /// In sync, connected, A Primary, then disconnected.
    pub(super) fn split(rate_kib_per_s: u32) -> Pair {
        let mut pair = Pair::build(
            [synced_volume(), synced_volume()],
            with_rate(rate_kib_per_s),
        );
        pair.connect();
        pair.promote(A, Promotion::Normal);
        pair.disconnect();
        pair
    }

    pub(super) fn promote(&mut self, node: usize, promotion: Promotion) {
        let mut out = Vec::new();
        self.nodes[node]
            .promote(promotion, &mut out)
            .expect("promote");
        self.route(node, out);
        self.deliver_all();
    }

    pub(super) fn demote(&mut self, node: usize) {
        let mut out = Vec::new();
        self.nodes[node].demote(&mut out).expect("demote");
        self.route(node, out);
        self.deliver_all();
    }

    pub(super) fn write_on(
        &mut self,
        node: usize,
        request: RequestId,
        offset: u64,
        byte: u8,
        length: u64,
    ) {
        let op = Op::Write {
            offset,
            length,
            data: vec![byte; length as usize],
            flags: WriteFlags::default(),
        };
        let mut out = Vec::new();
        self.nodes[node].submit(self.now, request, 0, op, &mut out);
        self.route(node, out);
    }

    /// Writes and completes `length` bytes on `node` while disconnected.
    pub(super) fn write_alone(
        &mut self,
        node: usize,
        request: RequestId,
        offset: u64,
        byte: u8,
        length: u64,
    ) {
        self.write_on(node, request, offset, byte, length);
        while self.run_local(node) {}
        assert!(self.is_complete(request), "write {request} on node {node}");
    }

    pub(super) fn replication(&self, node: usize) -> ReplState {
        self.nodes[node].status().peers[0].volumes[0].replication
    }

    pub(super) fn disk(&self, node: usize) -> DiskState {
        self.nodes[node].status().volumes[0].disk
    }

    pub(super) fn connection(&self, node: usize) -> ConnState {
        self.nodes[node].status().peers[0].connection
    }

    pub(super) fn oos(&self, node: usize) -> u64 {
        self.nodes[node].status().peers[0].volumes[0].out_of_sync_bytes
    }

    pub(super) fn syncing(&self) -> bool {
        [A, B]
            .iter()
            .any(|&n| !matches!(self.replication(n), ReplState::Established | ReplState::Off))
    }

    /// Delivers everything and ticks both nodes until no resync runs (at most `ticks_max`).
    pub(super) fn sync_until_quiet(&mut self, ticks_max: u32) {
        for _ in 0..ticks_max {
            self.deliver_all();
            if !self.syncing() {
                return;
            }
            self.tick_both();
        }
        panic!(
            "still syncing after {ticks_max} ticks: {:?} / {:?}",
            self.replication(A),
            self.replication(B)
        );
    }

    pub(super) fn tick_both(&mut self) {
        self.tick(A, TICK_INTERVAL);
        let mut out = Vec::new();
        self.nodes[B].tick(self.now, &mut out);
        self.route(B, out);
    }

    pub(super) fn assert_identical(&self) {
        let differing = (0..VOLUME_BYTES as usize)
            .filter(|&i| self.disks[A][i] != self.disks[B][i])
            .count();
        assert_eq!(differing, 0, "the replicas differ in {differing} bytes");
    }

    pub(super) fn assert_in_sync(&self) {
        self.assert_identical();
        for node in [A, B] {
            assert_eq!(
                self.replication(node),
                ReplState::Established,
                "node {node}"
            );
            assert_eq!(self.disk(node), DiskState::UpToDate, "node {node}");
            assert_eq!(self.oos(node), 0, "node {node} still has out-of-sync bits");
        }
    }
}

/// drbd-semantics.md §2 (bitmap-self) and §3: writes made while the peer was away set its
/// bits; on reconnect only those blocks move, and the disks end identical.
#[test]
fn reconnect_resyncs_only_the_blocks_written_while_disconnected() {
    let mut pair = Pair::split(1 << 20);
    pair.write_alone(A, 1, 0, 1, BLOCK);
    pair.write_alone(A, 2, 10 * BLOCK, 2, 2 * BLOCK);
    pair.write_alone(A, 3, 100 * BLOCK + 512, 3, 512);
    assert_eq!(pair.oos(A), 4 * BLOCK);
    pair.connect();
    pair.sync_until_quiet(50);
    assert_eq!(
        pair.resync_sent_bytes,
        [4 * BLOCK, 0],
        "only the dirty blocks, from A"
    );
    assert_eq!(pair.disks[B][10 * BLOCK as usize], 2);
    pair.assert_in_sync();
    let (a, b) = (
        pair.persisted[A].clone().expect("A persisted"),
        pair.persisted[B].clone().expect("B persisted"),
    );
    assert_eq!(
        a.ids.current & !UUID_PRIMARY,
        b.ids.current & !UUID_PRIMARY,
        "B adopted A's generation"
    );
    assert_eq!(b.disk, DiskState::UpToDate);
    assert_eq!(a.ids.bitmap[1], 0, "A forgot B's bitmap identifier");
}

/// drbd-semantics.md §2 (bitmap-peer): the old Secondary was promoted while disconnected and
/// wrote; the old Primary demoted and did not. The new Primary is the source.
#[test]
fn the_promoted_secondary_is_the_source() {
    let mut pair = Pair::split(1 << 20);
    pair.demote(A);
    pair.promote(B, Promotion::Normal);
    pair.write_alone(B, 1, 5 * BLOCK, 9, 3 * BLOCK);
    pair.connect();
    pair.sync_until_quiet(50);
    assert_eq!(pair.resync_sent_bytes, [0, 3 * BLOCK]);
    assert_eq!(pair.disks[A][5 * BLOCK as usize], 9);
    pair.assert_in_sync();
}

/// drbd-semantics.md §3 (initial sync): two just-created disks come up Inconsistent and
/// connect without a sync; `primary --force` on one makes it the source of a full sync.
#[test]
fn primary_force_on_fresh_disks_starts_a_full_sync() {
    let mut pair = Pair::build(
        [
            VolumeConfig::fresh(0, VOLUME_BYTES),
            VolumeConfig::fresh(0, VOLUME_BYTES),
        ],
        with_rate(1 << 20),
    );
    pair.disks[A]
        .iter_mut()
        .enumerate()
        .for_each(|(i, byte)| *byte = (i % 251) as u8);
    pair.connect();
    assert_eq!([pair.disk(A), pair.disk(B)], [DiskState::Inconsistent; 2]);
    assert_eq!(
        pair.replication(A),
        ReplState::Established,
        "both just created: no sync"
    );
    let mut out = Vec::new();
    assert!(matches!(
        pair.nodes[A].promote(Promotion::Normal, &mut out),
        Err(StateError::NotUpToDate(DiskState::Inconsistent))
    ));
    pair.promote(A, Promotion::Forced);
    assert_eq!(pair.disk(A), DiskState::UpToDate);
    pair.sync_until_quiet(100);
    assert_eq!(
        pair.resync_sent_bytes,
        [VOLUME_BYTES, 0],
        "everything moves"
    );
    pair.assert_in_sync();
}

/// drbd-semantics.md §3: `new-current-uuid --clear-bitmap` on empty fresh disks skips the
/// initial sync; both become UpToDate, and a later reconnect needs no sync either.
#[test]
fn new_current_uuid_clear_bitmap_skips_the_initial_sync() {
    let mut pair = Pair::build(
        [
            VolumeConfig::fresh(0, VOLUME_BYTES),
            VolumeConfig::fresh(0, VOLUME_BYTES),
        ],
        with_rate(1 << 20),
    );
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .new_current_uuid(true, &mut out)
        .expect("new-current-uuid");
    pair.route(A, out);
    pair.deliver_all();
    pair.assert_in_sync();
    assert_eq!(pair.resync_sent_bytes, [0, 0]);
    let (a, b) = (
        pair.persisted[A].clone().expect("A"),
        pair.persisted[B].clone().expect("B"),
    );
    assert_eq!(a.ids.current, b.ids.current);
    assert_ne!(a.ids.current, UUID_JUST_CREATED);
    pair.disconnect();
    pair.connect();
    pair.sync_until_quiet(10);
    assert_eq!(pair.resync_sent_bytes, [0, 0]);
    pair.assert_in_sync();
}

/// Both nodes wrote while disconnected (A as Primary, then B after its promotion).
fn split_brain_pair(configure: impl Fn(&mut PeerConfig)) -> Pair {
    let mut pair = Pair::build([synced_volume(), synced_volume()], configure);
    pair.connect();
    pair.promote(A, Promotion::Normal);
    pair.disconnect();
    pair.write_alone(A, 1, 0, 0xA, BLOCK);
    pair.demote(A);
    pair.promote(B, Promotion::Normal);
    pair.write_alone(B, 2, 8 * BLOCK, 0xB, 3 * BLOCK);
    pair.demote(B);
    pair
}

/// drbd-semantics.md §2 (bitmap-both) and §1 `after-sb-*` default `disconnect`: a split brain
/// is detected on connect, nothing is transferred, both go StandAlone and stay there.
#[test]
fn split_brain_is_detected_and_nothing_moves() {
    let mut pair = split_brain_pair(with_rate(1 << 20));
    pair.connect();
    assert_eq!(
        pair.split_brains,
        vec![(A, Resolution::Disconnect), (B, Resolution::Disconnect)]
    );
    assert_eq!(pair.resync_sent_bytes, [0, 0]);
    assert_eq!(pair.resync_requested_bytes, [0, 0]);
    for node in [A, B] {
        assert_eq!(pair.connection(node), ConnState::StandAlone);
        assert!(
            !pair.nodes[node].wants_connection(1 - node as u8),
            "no reconnect until the administrator says so"
        );
        let error = pair.nodes[node].status().peers[0]
            .last_error
            .clone()
            .unwrap_or_default();
        assert!(error.contains("split brain"), "{error}");
    }
    assert_eq!(
        (pair.disks[A][0], pair.disks[B][8 * BLOCK as usize]),
        (0xA, 0xB),
        "both versions kept"
    );
}

/// drbd-semantics.md §2 (manual recovery): the victim connects with `--discard-my-data`; the
/// survivor's data wins, only the blocks either side changed move.
#[test]
fn discard_my_data_makes_the_victim_the_target() {
    let mut pair = split_brain_pair(with_rate(1 << 20));
    pair.connect();
    for node in [A, B] {
        let mut out = Vec::new();
        pair.nodes[node]
            .set_connect(pair.now, 1 - node as u8, true, &mut out)
            .expect("connect");
    }
    pair.nodes[B]
        .set_discard_my_data(0)
        .expect("discard-my-data");
    pair.connect();
    assert_eq!(
        pair.split_brains[2..],
        [
            (A, Resolution::DiscardRemote),
            (B, Resolution::DiscardLocal)
        ]
    );
    pair.sync_until_quiet(50);
    assert_eq!(
        pair.resync_sent_bytes,
        [4 * BLOCK, 0],
        "A's one block and B's three, from A"
    );
    assert_eq!(pair.disks[B][0], 0xA);
    assert_eq!(
        pair.disks[B][8 * BLOCK as usize],
        0,
        "B's changes are rolled back"
    );
    pair.assert_in_sync();
}

/// The victim of a split brain is never the Primary: while `--discard-my-data` waits for the
/// connection, promotion is refused (with `--force` the administrator keeps the data after
/// all); once the resync replaced the data, the node can be promoted.
#[test]
fn a_node_whose_data_is_to_be_discarded_is_not_promoted() {
    let mut pair = split_brain_pair(with_rate(1 << 20));
    pair.nodes[B]
        .set_discard_my_data(0)
        .expect("discard-my-data");
    let mut out = Vec::new();
    let refused = pair.nodes[B].promote(Promotion::Normal, &mut out);
    assert!(
        matches!(refused, Err(StateError::DataToBeDiscarded { .. })),
        "{refused:?}"
    );
    pair.connect();
    for node in [A, B] {
        let mut out = Vec::new();
        pair.nodes[node]
            .set_connect(pair.now, 1 - node as u8, true, &mut out)
            .expect("connect");
    }
    pair.connect();
    pair.sync_until_quiet(50);
    pair.assert_in_sync();
    pair.disconnect();
    pair.promote(B, Promotion::Normal);
}

/// A split brain that no shared bitmap identifier counts (history-both: the two share only
/// an older generation), resolved by `--discard-my-data`: the victim gets everything, not
/// the union of the bitmaps, which need not cover where the two differ (simulator seed 15:
/// replicas left different after such a resolution).
#[test]
fn discard_my_data_after_a_history_only_split_brain_copies_everything() {
    let diverged = |current| {
        let mut volume = synced_volume();
        volume.ids.current = current;
        volume.ids.history[0] = SYNCED_UUID;
        volume
    };
    let mut pair = Pair::build([diverged(0x7770), diverged(0x8880)], with_rate(1 << 20));
    pair.disks[A][0] = 0xA;
    pair.disks[B][8 * BLOCK as usize] = 0xB;
    pair.connect();
    assert_eq!(
        pair.split_brains,
        vec![(A, Resolution::Disconnect), (B, Resolution::Disconnect)]
    );
    for node in [A, B] {
        let mut out = Vec::new();
        pair.nodes[node]
            .set_connect(pair.now, 1 - node as u8, true, &mut out)
            .expect("connect");
    }
    pair.nodes[B]
        .set_discard_my_data(0)
        .expect("discard-my-data");
    pair.connect();
    assert_eq!(
        pair.split_brains[2..],
        [
            (A, Resolution::DiscardRemote),
            (B, Resolution::DiscardLocal)
        ]
    );
    pair.sync_until_quiet(200);
    assert_eq!(
        pair.resync_sent_bytes[A], VOLUME_BYTES,
        "a full resync from A"
    );
    assert_eq!(
        (pair.disks[B][0], pair.disks[B][8 * BLOCK as usize]),
        (0xA, 0),
        "B holds A's data"
    );
    pair.assert_in_sync();
}

/// A resync from an Outdated source (two nodes left behind by a Primary that is away, the
/// newer of them the source) leaves the target Outdated too: it holds the source's data,
/// which lacks the Primary's later writes, so it must not become promotable (simulator).
#[test]
fn a_resync_from_an_outdated_source_leaves_the_target_outdated() {
    let mut newer = synced_volume();
    newer.ids.current = 0x7770;
    newer.ids.history[0] = SYNCED_UUID;
    newer.disk = DiskState::Outdated;
    let mut older = synced_volume();
    older.disk = DiskState::Outdated;
    let mut pair = Pair::build([newer, older], with_rate(1 << 20));
    pair.disks[A][0] = 0xA;
    pair.connect();
    pair.sync_until_quiet(200);
    assert_eq!(pair.disks[B][0], 0xA, "B has A's data");
    assert_eq!(pair.replication(B), ReplState::Established);
    assert_eq!(
        pair.disk(B),
        DiskState::Outdated,
        "as current as its source, no more"
    );
    assert_eq!(
        pair.persisted[B].clone().expect("B persisted").disk,
        DiskState::Outdated
    );
}

/// drbd-semantics.md §1 `after-sb-0pri discard-least-changes`: with no Primary, the node
/// that changed fewer blocks (A: one, B: three) is discarded automatically.
#[test]
fn after_sb_0pri_discard_least_changes_picks_the_victim() {
    let mut pair = split_brain_pair(|config: &mut PeerConfig| {
        config.resync.resync_rate_kib_per_s = 1 << 20;
        config.split_brain.zero_primaries = AfterSb0Pri::DiscardLeastChanges;
    });
    pair.connect();
    assert_eq!(
        pair.split_brains,
        vec![
            (A, Resolution::DiscardLocal),
            (B, Resolution::DiscardRemote)
        ]
    );
    pair.sync_until_quiet(50);
    assert_eq!(pair.resync_sent_bytes, [0, 4 * BLOCK]);
    assert_eq!(
        (pair.disks[A][0], pair.disks[A][8 * BLOCK as usize]),
        (0, 0xB)
    );
    pair.assert_in_sync();
}

/// drbd-semantics.md §2 rule 6: no shared generation at all is refused with a clear reason.
#[test]
fn unrelated_data_is_refused() {
    let mut other = synced_volume();
    other.ids.current = 0x7770;
    let mut pair = Pair::build([synced_volume(), other], with_rate(1 << 20));
    pair.connect();
    for node in [A, B] {
        assert_eq!(pair.connection(node), ConnState::StandAlone);
        let error = pair.nodes[node].status().peers[0]
            .last_error
            .clone()
            .unwrap_or_default();
        assert!(error.contains("unrelated data"), "{error}");
    }
    assert!(pair.split_brains.is_empty());
    assert_eq!(pair.resync_requested_bytes, [0, 0]);
}

/// Bitmaps are exchanged only between volumes of the same size and granularity: otherwise
/// both sides go StandAlone with the reason, and nothing moves.
#[test]
fn volumes_of_different_size_or_granularity_are_refused() {
    let coarse = VolumeConfig {
        bitmaps: vec![PeerBitmap {
            peer: 0,
            bitmap: meta::Bitmap::new(VOLUME_BYTES, 65536).expect("bitmap"),
        }],
        ..synced_volume()
    };
    let smaller = VolumeConfig {
        size_bytes: VOLUME_BYTES / 2,
        ..synced_volume()
    };
    for (other, expected) in [
        (coarse, "bytes per bit here"),
        (smaller, "both sides must export the same size"),
    ] {
        let mut pair = Pair::build([synced_volume(), other], with_rate(1 << 20));
        pair.connect();
        for node in [A, B] {
            assert_eq!(pair.connection(node), ConnState::StandAlone);
            let error = pair.nodes[node].status().peers[0]
                .last_error
                .clone()
                .unwrap_or_default();
            assert!(error.contains(expected), "{error}");
        }
        assert_eq!(pair.resync_requested_bytes, [0, 0]);
    }
}

/// drbd-semantics.md §2: a Primary never becomes a sync target (rr-conflict); both sides
/// refuse together.
#[test]
fn a_primary_is_never_made_a_sync_target() {
    let mut pair = Pair::split(1 << 20);
    pair.demote(A);
    pair.promote(B, Promotion::Normal);
    pair.write_alone(B, 1, 0, 1, BLOCK);
    pair.demote(B);
    pair.promote(A, Promotion::Normal);
    // A is Primary but behind (bitmap-peer): refused on both sides.
    pair.connect();
    assert_eq!(
        [pair.connection(A), pair.connection(B)],
        [ConnState::StandAlone; 2]
    );
    assert_eq!(pair.resync_requested_bytes, [0, 0]);
}

/// Without an activity log, a Primary that crashed resyncs everything to its peer (the
/// crashed-primary rule of drbd-semantics.md §2 with every bit set).
#[test]
fn a_crashed_primary_resyncs_everything() {
    let mut crashed = synced_volume();
    crashed.crashed_primary = true;
    let mut pair = Pair::build([crashed, synced_volume()], with_rate(1 << 20));
    pair.disks[A][12345] = 7;
    pair.connect();
    pair.sync_until_quiet(100);
    assert_eq!(pair.resync_sent_bytes, [VOLUME_BYTES, 0]);
    pair.assert_in_sync();
    let meta = pair.persisted[A].clone().expect("A persisted");
    assert!(!meta.ids.flags.crashed_primary, "resolved by the resync");
}

/// A Primary that crashed and returns to the peer that was promoted meanwhile, before that
/// peer wrote anything (equal current generations), is the sync target of the new Primary,
/// not its would-be source: its unacknowledged hot extents are overwritten with the new
/// Primary's data (DRBD's rule 41). Before, the crashed-primary rule made the returning node
/// the source and both went StandAlone on an rr-conflict: a crash and a restart needed an
/// administrator.
#[test]
fn a_crashed_primary_returning_to_a_new_primary_is_its_sync_target() {
    let mut crashed = synced_volume();
    crashed.crashed_primary = true;
    let mut pair = Pair::build([crashed, synced_volume()], with_rate(1 << 20));
    // A write the crashed Primary had in flight, never acknowledged, never on B.
    pair.disks[A][12345] = 7;
    pair.promote(B, Promotion::Normal);
    pair.connect();
    pair.sync_until_quiet(100);
    assert_eq!(
        [pair.connection(A), pair.connection(B)],
        [ConnState::Connected; 2]
    );
    assert_eq!(
        pair.resync_sent_bytes,
        [0, VOLUME_BYTES],
        "the new Primary is the source"
    );
    assert_eq!(
        pair.disks[A][12345], 0,
        "the unacknowledged write is discarded"
    );
    pair.assert_in_sync();
    assert_eq!(pair.disk(A), DiskState::UpToDate);
    let meta = pair.persisted[A].clone().expect("A persisted");
    assert!(!meta.ids.flags.crashed_primary, "resolved by the resync");
}

/// A crashed Primary with two peers stays a crashed Primary after the resync to the first:
/// its hot extents (here, without an activity log, every block) are still marked for the
/// other, and the flag is what makes it that peer's source when their current generations
/// are equal. Cleared early, that handshake fell to the tie-break between two sides with bits,
/// and a Secondary that lacked the crashed Primary's last acknowledged writes became its
/// source (simulator seed 6671, three nodes under quorum: two UpToDate replicas differed).
#[test]
fn a_crashed_primary_stays_one_until_every_peer_is_resynced() {
    let mut crashed = synced_volume();
    crashed.crashed_primary = true;
    let config = EngineConfig {
        node_id: 0,
        volumes: vec![crashed],
        peers: vec![peer_config(1, Protocol::C), peer_config(2, Protocol::C)],
        random_seed: 0x5eed,
    };
    let a = Engine::new(config).expect("valid test configuration");
    let mut pair = Pair::unconnected([a, engine(1, 0, Protocol::C)]);
    pair.disks[A][12345] = 7;
    pair.connect();
    pair.sync_until_quiet(100);
    assert_eq!(pair.resync_sent_bytes, [VOLUME_BYTES, 0]);
    pair.assert_in_sync();
    let meta = pair.persisted[A].clone().expect("A persisted");
    assert!(
        meta.ids.flags.crashed_primary,
        "node 2 is still owed the crashed Primary's blocks"
    );
    let status = pair.nodes[A].status();
    let owed = status
        .peers
        .iter()
        .find(|p| p.node_id == 2)
        .map(|p| p.volumes[0].out_of_sync_bytes);
    assert_eq!(owed, Some(VOLUME_BYTES));
}

/// drbd-semantics.md §2: a disconnect in the middle of a resync keeps the remaining bits; the
/// target stays Inconsistent; the next connect resumes (bitmap rules on the sync identifier)
/// and finishes without starting over.
#[test]
fn a_resync_interrupted_by_a_disconnect_resumes_on_reconnect() {
    let mut pair = Pair::split(400);
    pair.write_alone(A, 1, 0, 5, 64 * BLOCK);
    pair.connect();
    for _ in 0..3 {
        pair.deliver_all();
        pair.tick_both();
    }
    pair.deliver_all();
    assert_eq!(pair.replication(B), ReplState::SyncTarget);
    assert_eq!(pair.disk(B), DiskState::Inconsistent);
    assert_eq!(
        pair.persisted[B].as_ref().map(|m| m.disk),
        Some(DiskState::Inconsistent),
        "persisted before any resync write"
    );
    let progress = pair.nodes[B].status().peers[0].volumes[0]
        .resync
        .expect("progress");
    assert!(
        progress.done_bytes > 0 && progress.done_bytes < 64 * BLOCK,
        "{progress:?}"
    );
    assert!(progress.percent_done() > 0.0 && progress.percent_done() < 100.0);
    let moved = pair.resync_sent_bytes[A];
    pair.disconnect();
    assert_eq!(pair.disk(B), DiskState::Inconsistent);
    assert!(pair.oos(A) > 0 && pair.oos(A) <= 64 * BLOCK - progress.done_bytes);
    pair.connect();
    assert_eq!(
        pair.replication(A),
        ReplState::SyncSource,
        "resumes with A as source"
    );
    pair.sync_until_quiet(400);
    assert!(
        pair.resync_sent_bytes[A] < 64 * BLOCK + moved,
        "resumed, not restarted"
    );
    pair.assert_in_sync();
}

/// drbd-semantics.md §1 `resync-rate` (fixed, `c-plan-ahead 0`): the bytes requested never
/// run ahead of the rate by a block or more, and the resync keeps up with it.
#[test]
fn the_rate_controller_bounds_the_bytes_requested_per_tick() {
    let rate_kib_per_s = 400;
    let mut pair = Pair::split(rate_kib_per_s);
    pair.write_alone(A, 1, 0, 5, 128 * BLOCK);
    pair.connect();
    let start = pair.now;
    for _ in 0..20 {
        pair.deliver_all();
        pair.tick_both();
        let elapsed_ms = u64::try_from(pair.now.since(start).as_millis()).expect("short") + 100;
        let allowed = u64::from(rate_kib_per_s) * 1024 * elapsed_ms / 1000 + BLOCK;
        assert!(
            pair.resync_requested_bytes[B] <= allowed,
            "{} requested, {allowed} allowed",
            pair.resync_requested_bytes[B]
        );
    }
    // 2 s at 400 KiB/s is 800 KiB: the whole 512 KiB was requested.
    pair.deliver_all();
    assert_eq!(pair.resync_requested_bytes[B], 128 * BLOCK);
}

/// drbd-semantics.md §3 and the module invariant of `engine/resync.rs`: client writes racing a
/// resync, with messages and local I/O completing in random order and the odd reconnect in
/// the middle, never let older resync data overwrite newer writes: the replicas end
/// identical. Many seeds.
#[test]
fn application_writes_racing_a_resync_end_identical() {
    let mut racing = 0;
    for seed in 1..=60_u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut pair = Pair::split([100, 400, 1600][usize::try_from(seed % 3).expect("small")]);
        for request in 0..40 {
            let offset = rng.below(VOLUME_BYTES / BLOCK - 4) * BLOCK;
            pair.write_alone(
                A,
                request,
                offset,
                rng.below(250) as u8 + 1,
                BLOCK * (1 + rng.below(4)),
            );
        }
        pair.connect();
        let mut request = 100;
        for _ in 0..3000 {
            if rng.below(400) == 0 {
                // Local I/O of the old connection is still running when the new one starts.
                pair.disconnect();
                pair.connect();
            }
            match rng.below(10) {
                0 => pair.tick_both(),
                1 | 2 if request < 400 => {
                    racing += u64::from(pair.replication(B) == ReplState::SyncTarget);
                    let offset = rng.below(VOLUME_BYTES / BLOCK - 2) * BLOCK + rng.below(2) * 512;
                    pair.write_on(
                        A,
                        request,
                        offset,
                        rng.below(250) as u8 + 1,
                        BLOCK * (1 + rng.below(2)),
                    );
                    request += 1;
                }
                3 | 4 => {
                    pair.deliver(A);
                }
                5 | 6 => {
                    pair.deliver(B);
                }
                node => {
                    let node = if node < 8 { A } else { B };
                    if !pair.local[node].is_empty() {
                        let index = rng.below(pair.local[node].len() as u64) as usize;
                        let action = pair.local[node].remove(index).expect("present");
                        pair.perform(node, action);
                    }
                }
            }
        }
        pair.sync_until_quiet(2000);
        assert!(
            pair.disconnects.is_empty(),
            "seed {seed}: {:?}",
            pair.disconnects
        );
        assert_eq!(
            pair.completed.len(),
            usize::try_from(request - 60).expect("small"),
            "seed {seed}: every write completed"
        );
        pair.assert_in_sync();
    }
    assert!(
        racing > 60 * 40,
        "too few writes raced the resync ({racing})"
    );
}

/// The bitmap chunks the engine sends fit a wire `BitmapChunk` and the meta encoder accepts
/// that size.
#[test]
fn bitmap_chunk_size_is_accepted_by_the_encoder() {
    let bitmap = meta::Bitmap::new(VOLUME_BYTES, 4096).expect("bitmap");
    assert!(bitmap.rle_chunks(BITMAP_CHUNK_BYTES_MAX).is_ok());
}

/// The receiver invariant across connections: a replicated write of the old connection still
/// being written when the new connection's resync reply for the same block arrives holds the
/// reply back; the newer data lands last whatever order the disk completes them in.
#[test]
fn a_resync_write_waits_for_an_older_write_to_the_same_block() {
    let mut pair = Pair::build([synced_volume(), synced_volume()], with_rate(1 << 20));
    pair.connect();
    pair.promote(A, Promotion::Normal);
    pair.write_on(A, 1, 0, 0x11, BLOCK);
    assert!(pair.deliver(B), "the write reaches B");
    let old = pair.local[B].pop_back().expect("B issued its write");
    assert!(matches!(
        old,
        Action::LocalWrite {
            io: IoId::PeerWrite { .. },
            ..
        }
    ));
    pair.disconnect();
    while pair.run_local(A) {}
    pair.write_alone(A, 2, 0, 0x22, BLOCK);
    pair.connect();
    for _ in 0..5 {
        pair.deliver_all();
        pair.tick_both();
    }
    pair.deliver_all();
    assert_eq!(
        pair.replication(B),
        ReplState::SyncTarget,
        "the resync waits for B's old write"
    );
    let resync_issued = pair.local[B].iter().any(|a| {
        matches!(
            a,
            Action::LocalWrite {
                io: IoId::ResyncWrite { .. },
                ..
            }
        )
    });
    assert!(
        !resync_issued,
        "the reply is held while the older write runs"
    );
    pair.perform(B, old);
    pair.sync_until_quiet(20);
    assert_eq!(pair.disks[B][0], 0x22);
    pair.assert_in_sync();
}

/// Metadata that does not fit the configuration is refused at construction, never guessed.
#[test]
fn engine_refuses_bitmaps_that_do_not_fit() {
    let bitmap = |bytes: u64| meta::Bitmap::new(bytes, 4096).expect("bitmap");
    let cases = [
        (
            PeerBitmap {
                peer: 1,
                bitmap: bitmap(VOLUME_BYTES / 2),
            },
            SyncError::BitmapSizeMismatch {
                volume: 0,
                peer: 1,
                bitmap_bytes: VOLUME_BYTES / 2,
                volume_bytes: VOLUME_BYTES,
            },
        ),
        (
            PeerBitmap {
                peer: 7,
                bitmap: bitmap(VOLUME_BYTES),
            },
            SyncError::BitmapPeerUnknown { volume: 0, peer: 7 },
        ),
    ];
    for (given, expected) in cases {
        let volume = VolumeConfig {
            bitmaps: vec![given],
            ..synced_volume()
        };
        let config = EngineConfig {
            node_id: 0,
            volumes: vec![volume],
            peers: vec![peer_config(1, Protocol::C)],
            random_seed: 1,
        };
        assert_eq!(Engine::<Vec<u8>>::new(config).err(), Some(expected));
    }
    let config = EngineConfig {
        node_id: 1,
        volumes: vec![synced_volume()],
        peers: vec![peer_config(1, Protocol::C)],
        random_seed: 1,
    };
    assert_eq!(
        Engine::<Vec<u8>>::new(config).err(),
        Some(SyncError::SameNodeId { node_id: 1 })
    );
}

impl Pair {
    /// In sync and connected, both Secondary, A's disk holding distinct data everywhere.
    fn synced_with_data() -> Pair {
        let mut pair = Pair::build([synced_volume(), synced_volume()], with_rate(1 << 20));
        for (i, byte) in pair.disks[A].iter_mut().enumerate() {
            *byte = (i % 251) as u8;
        }
        pair.disks[B] = pair.disks[A].clone();
        pair.connect();
        pair
    }
}

/// `invalidate` on B: B's (corrupted) data is replaced by a full sync from A.
#[test]
fn invalidate_replaces_the_local_data_by_a_full_sync() {
    let mut pair = Pair::synced_with_data();
    pair.disks[B][7 * BLOCK as usize] ^= 0xff;
    let mut out = Vec::new();
    pair.nodes[B].invalidate(&mut out).expect("invalidate");
    assert_eq!(pair.disk(B), DiskState::Inconsistent);
    pair.route(B, out);
    pair.sync_until_quiet(200);
    assert_eq!(
        pair.resync_sent_bytes,
        [VOLUME_BYTES, 0],
        "every block, from A"
    );
    pair.assert_in_sync();
    assert_eq!(
        pair.persisted[B].clone().expect("B persisted").disk,
        DiskState::UpToDate
    );
}

/// `invalidate-remote` on A: B's data is replaced by a full sync from A.
#[test]
fn invalidate_remote_makes_the_peer_a_full_sync_target() {
    let mut pair = Pair::synced_with_data();
    pair.disks[B][3 * BLOCK as usize] ^= 0xff;
    let mut out = Vec::new();
    pair.nodes[A]
        .invalidate_remote(1, &mut out)
        .expect("invalidate-remote");
    pair.route(A, out);
    pair.sync_until_quiet(200);
    assert_eq!(
        pair.resync_sent_bytes,
        [VOLUME_BYTES, 0],
        "every block, from A"
    );
    pair.assert_in_sync();
}

/// Refusals: nothing to resync from, a Primary, a disconnected peer, an unknown peer.
#[test]
fn invalidate_and_invalidate_remote_refuse_what_would_lose_data() {
    let mut pair = Pair::synced_with_data();
    let mut out = Vec::new();
    pair.promote(A, Promotion::Normal);
    assert_eq!(
        pair.nodes[A].invalidate(&mut out),
        Err(StateError::IsPrimary)
    );
    assert!(matches!(
        pair.nodes[B].invalidate_remote(0, &mut out),
        Err(StateError::PeerIsPrimary { .. })
    ));
    assert_eq!(
        pair.nodes[A].invalidate_remote(9, &mut out),
        Err(StateError::NoSuchPeer(9))
    );
    pair.disconnect();
    assert_eq!(
        pair.nodes[B].invalidate(&mut out),
        Err(StateError::NoSyncSource)
    );
    assert!(matches!(
        pair.nodes[A].invalidate_remote(1, &mut out),
        Err(StateError::PeerNotConnected { .. })
    ));
    assert!(out.is_empty(), "a refused request does nothing: {out:?}");
    assert_eq!(pair.disk(B), DiskState::UpToDate);
}

/// A resync whose writes fail on the target's disk ends with the target Inconsistent and the
/// failed blocks still marked; the target drops the link, and the reconnect retries them,
/// so once the disk works again the target comes back UpToDate without an administrator.
#[test]
fn a_resync_with_failed_writes_reconnects_and_retries_them() {
    let mut pair = Pair::build([synced_volume(), synced_volume()], with_rate(1 << 20));
    pair.connect();
    pair.promote(A, Promotion::Normal);
    pair.disconnect();
    pair.write_alone(A, 1, 0, 0x31, BLOCK);
    pair.write_alone(A, 2, 4 * BLOCK, 0x32, BLOCK);
    for node in [A, B] {
        let mut out = Vec::new();
        pair.nodes[node].peer_connected(pair.now, 1 - node as u8, &mut out);
        pair.route(node, out);
    }
    for _ in 0..20 {
        while pair.deliver(A) | pair.deliver(B) | pair.run_local(A) {}
        // B's disk fails every resync write.
        pair.run_local_failing(B, |io| matches!(io, IoId::ResyncWrite { .. }));
        if pair.disconnects.iter().any(|&(node, _)| node == B) {
            break;
        }
        pair.tick_both();
    }
    assert!(
        pair.disconnects
            .iter()
            .any(|&(node, state)| node == B && state == ConnState::Unconnected),
        "the target dropped the link to retry: {:?}",
        pair.disconnects
    );
    let b = pair.nodes[B].status();
    assert_eq!(
        b.volumes[0].disk,
        DiskState::Inconsistent,
        "nothing was resynced"
    );
    assert!(
        b.peers[0].volumes[0].out_of_sync_bytes >= 2 * BLOCK,
        "the failed blocks stay marked"
    );

    pair.disconnect();
    pair.connect();
    pair.sync_until_quiet(50);
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::UpToDate);
    assert_eq!(pair.disks[B][0], 0x31);
    assert_eq!(pair.disks[B][(4 * BLOCK) as usize], 0x32);
    pair.assert_in_sync();
}
