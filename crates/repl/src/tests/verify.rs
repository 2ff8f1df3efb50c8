//! Online verify scenario tests (drbd-semantics.md §3, "Online verify": only digests cross
//! the wire, mismatches are marked out of sync, VerifyS/VerifyT): two engines with in-memory
//! disks, the harness digesting each block with FNV-1a as its `verify-alg`.

use super::*;

const BLOCK: u64 = 4096;
/// Blocks per verify request (128 KiB of 4 KiB blocks).
const RANGE_BLOCKS: u64 = 32;

/// The test driver's `verify-alg`: the 64-bit FNV-1a hash of each block, big-endian.
pub(super) fn block_digests(data: &[u8], block_bytes: u32) -> Vec<u8> {
    data.chunks(block_bytes as usize)
        .flat_map(|block| {
            let hash = block.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
            hash.to_be_bytes()
        })
        .collect()
}

/// Two engines in sync and connected (A Primary), both disks holding the same pattern.
fn verify_pair(rate_kib_per_s: u32, protocol: Protocol) -> Pair {
    let mut configs = [peer_config(1, protocol), peer_config(0, protocol)];
    for config in &mut configs {
        config.resync.resync_rate_kib_per_s = rate_kib_per_s;
    }
    let [to_b, to_a] = configs;
    let nodes = [
        engine_with(0, to_b, synced_volume()),
        engine_with(1, to_a, synced_volume()),
    ];
    let mut pair = Pair::unconnected(nodes);
    let pattern: Vec<u8> = (0..VOLUME_BYTES).map(|i| (i % 251) as u8).collect();
    pair.disks = [pattern.clone(), pattern];
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("promote");
    pair.route(A, out);
    pair.deliver_all();
    pair
}

impl Pair {
    fn verify_from(&mut self, node: usize) -> Result<(), StateError> {
        let mut out = Vec::new();
        let result = self.nodes[node].start_verify(self.now, None, &mut out);
        self.route(node, out);
        result
    }

    fn peer_volume(&self, node: usize) -> PeerVolumeStatus {
        self.nodes[node].status().peers[0].volumes[0].clone()
    }

    fn verifying(&self) -> bool {
        [A, B].iter().any(|&node| {
            matches!(
                self.peer_volume(node).replication,
                ReplState::VerifyS | ReplState::VerifyT
            )
        })
    }

    /// Delivers everything and ticks both nodes until no verify runs (at most `ticks_max`).
    fn verify_until_done(&mut self, ticks_max: u32) {
        for _ in 0..ticks_max {
            self.deliver_all();
            if !self.verifying() {
                return;
            }
            self.tick(A, TICK_INTERVAL);
            let mut out = Vec::new();
            self.nodes[B].tick(self.now, &mut out);
            self.route(B, out);
        }
        panic!("still verifying after {ticks_max} ticks");
    }

    /// Ticks both nodes `ticks` times, delivering everything after each tick.
    fn settle(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.deliver_all();
            self.tick(A, TICK_INTERVAL);
            let mut out = Vec::new();
            self.nodes[B].tick(self.now, &mut out);
            self.route(B, out);
        }
        self.deliver_all();
    }

    /// Flips a byte of `block` on `node`'s disk.
    fn corrupt(&mut self, node: usize, block: u64) {
        self.disks[node][(block * BLOCK + 17) as usize] ^= 0x5A;
    }

    /// The ranges `node` reported with `VerifyFound`, in order.
    fn found_by(&self, node: usize) -> Vec<(u64, u64)> {
        self.verify_events
            .iter()
            .filter_map(|(from, action)| match action {
                Action::VerifyFound { offset, length, .. } if *from == node => {
                    Some((*offset, *length))
                }
                _ => None,
            })
            .collect()
    }

    /// `(node, oos_bytes, skipped_bytes)` of every `VerifyFinished`.
    fn finished(&self) -> Vec<(usize, u64, u64)> {
        self.verify_events
            .iter()
            .filter_map(|(from, action)| match action {
                Action::VerifyFinished {
                    oos_bytes,
                    skipped_bytes,
                    ..
                } => Some((*from, *oos_bytes, *skipped_bytes)),
                _ => None,
            })
            .collect()
    }

    fn established_both(&self) {
        for node in [A, B] {
            assert_eq!(
                self.peer_volume(node).replication,
                ReplState::Established,
                "node {node}"
            );
        }
    }

    /// Index in `node`'s local queue of the first `LocalDigest`.
    fn digest_index(&self, node: usize) -> usize {
        self.local[node]
            .iter()
            .position(|a| matches!(a, Action::LocalDigest { .. }))
            .expect("a digest is queued")
    }
}

/// The runs of differing blocks a verify reports: adjacent blocks merge within one request's
/// range, never across two.
fn expected_runs(blocks: &[u64]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &block in blocks {
        match runs.last_mut() {
            Some((offset, length))
                if *offset + *length == block * BLOCK && block % RANGE_BLOCKS != 0 =>
            {
                *length += BLOCK
            }
            _ => runs.push((block * BLOCK, BLOCK)),
        }
    }
    runs
}

/// drbd-semantics.md §3: identical replicas verify clean; only digests cross the wire, both
/// sides are VerifyS/VerifyT while it runs and Established after.
#[test]
fn identical_disks_verify_clean_and_move_no_data() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.verify_from(A).expect("verify");
    assert_eq!(pair.peer_volume(A).replication, ReplState::VerifyS);
    assert!(pair.deliver(B), "the first request reaches the peer");
    assert_eq!(pair.peer_volume(B).replication, ReplState::VerifyT);
    pair.verify_until_done(20);
    pair.established_both();
    assert!(pair.found_by(A).is_empty());
    assert_eq!(pair.finished(), vec![(A, 0, 0)]);
    assert_eq!(pair.resync_sent_bytes, [0, 0], "no data moved");
    for node in [A, B] {
        let status = pair.peer_volume(node);
        assert_eq!(
            (status.out_of_sync_bytes, status.verify_oos_bytes),
            (0, 0),
            "node {node}"
        );
        assert_eq!(status.resync, None, "no progress once it ended");
    }
    assert!(pair.disconnects.is_empty());
}

/// drbd-semantics.md §3: exactly the blocks that differ are found, reported and marked, from
/// either side, wherever they lie (range boundaries, the last block, runs).
#[test]
fn found_blocks_are_exactly_the_corrupted_ones() {
    let cases: [(&[u64], usize); 6] = [
        (&[], A),
        (&[3, 31, 32], A),
        (&[40, 41, 42], A),
        (&[0, 255], A),
        (&[7, 100, 101, 200], B),
        ((&[63, 64, 65]), B),
    ];
    for (blocks, verifier) in cases {
        let mut pair = verify_pair(1 << 20, Protocol::C);
        for &block in blocks {
            pair.corrupt(1 - verifier, block);
        }
        pair.verify_from(verifier).expect("verify");
        pair.verify_until_done(20);
        let oos = blocks.len() as u64 * BLOCK;
        assert_eq!(
            pair.found_by(verifier),
            expected_runs(blocks),
            "{blocks:?} from node {verifier}"
        );
        assert!(pair.found_by(1 - verifier).is_empty());
        assert_eq!(pair.finished(), vec![(verifier, oos, 0)], "{blocks:?}");
        assert_eq!(
            pair.peer_volume(verifier).out_of_sync_bytes,
            oos,
            "marked for the peer"
        );
        assert_eq!(
            pair.peer_volume(1 - verifier).out_of_sync_bytes,
            0,
            "the target marks nothing"
        );
        for node in [A, B] {
            assert_eq!(
                pair.peer_volume(node).verify_oos_bytes,
                oos,
                "status of node {node}"
            );
        }
        pair.established_both();
    }
}

/// drbd-semantics.md §3: verify does not repair; the next reconnect resyncs exactly the found
/// blocks from the verify source, and a second verify is clean.
#[test]
fn found_blocks_are_resynced_at_the_next_reconnect() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    for block in [3, 50, 51] {
        pair.corrupt(B, block);
    }
    pair.verify_from(A).expect("verify");
    pair.verify_until_done(20);
    assert_eq!(pair.resync_sent_bytes, [0, 0], "not on its own");
    pair.disconnect();
    pair.connect();
    pair.settle(20);
    assert_eq!(
        pair.resync_sent_bytes,
        [3 * BLOCK, 0],
        "only the found blocks move"
    );
    assert_eq!(pair.disks[A], pair.disks[B]);
    pair.verify_events.clear();
    pair.verify_from(A).expect("second verify");
    pair.verify_until_done(20);
    assert_eq!(pair.finished(), vec![(A, 0, 0)]);
}

/// `tandem verify` is refused, changing nothing, unless the peer is connected, nothing else
/// runs with it and both disks are UpToDate.
#[test]
fn verify_is_refused_when_it_cannot_run() {
    let mut out = Vec::new();
    let mut pair = verify_pair(1 << 20, Protocol::C);
    assert_eq!(
        pair.nodes[A].start_verify(pair.now, Some(7), &mut out),
        Err(StateError::NoSuchPeer(7))
    );

    pair.verify_from(A).expect("verify");
    pair.deliver(B);
    let busy = |name: &str| {
        Err(StateError::SyncInProgress {
            peer: name.to_string(),
        })
    };
    assert_eq!(
        pair.nodes[A].start_verify(pair.now, None, &mut out),
        busy("node1"),
        "already running"
    );
    assert_eq!(
        pair.nodes[B].start_verify(pair.now, None, &mut out),
        busy("node0"),
        "the target's too"
    );
    assert_eq!(
        pair.nodes[A].new_current_uuid(false, &mut out),
        busy("node1"),
        "other admin changes wait"
    );
    assert_eq!(pair.nodes[A].invalidate_remote(1, &mut out), busy("node1"));

    pair.disconnect();
    let not_connected = Err(StateError::PeerNotConnected {
        peer: "node1".to_string(),
    });
    assert_eq!(
        pair.nodes[A].start_verify(pair.now, Some(1), &mut out),
        not_connected
    );
    assert_eq!(
        pair.nodes[A].start_verify(pair.now, None, &mut out),
        Err(StateError::NoConnectedPeer)
    );

    let mut fresh = Pair::unconnected([
        engine_with(
            0,
            peer_config(1, Protocol::C),
            VolumeConfig::fresh(0, VOLUME_BYTES),
        ),
        engine_with(
            1,
            peer_config(0, Protocol::C),
            VolumeConfig::fresh(0, VOLUME_BYTES),
        ),
    ]);
    fresh.connect();
    let inconsistent = DiskState::Inconsistent;
    let refusal = StateError::VerifyNeedsUpToDate {
        peer: "node1".to_string(),
        local: inconsistent,
        peer_disk: inconsistent,
    };
    assert_eq!(
        fresh.nodes[A].start_verify(fresh.now, None, &mut out),
        Err(refusal)
    );
    assert!(out.is_empty(), "a refusal does nothing");
    assert!(pair.verify_events.is_empty() && fresh.verify_events.is_empty());
}

/// A verify of a peer that is resyncing is refused with the resync named.
#[test]
fn verify_is_refused_during_a_resync() {
    let mut pair = verify_pair(100, Protocol::C);
    pair.disconnect();
    let mut out = Vec::new();
    let write = Op::Write {
        offset: 0,
        length: 8 * BLOCK,
        data: vec![9; 8 * BLOCK as usize],
        flags: WriteFlags::default(),
    };
    pair.nodes[A].submit(pair.now, 1, 0, write, &mut out);
    pair.route(A, out);
    pair.deliver_all();
    pair.connect();
    assert_eq!(pair.peer_volume(A).replication, ReplState::SyncSource);
    let mut out = Vec::new();
    let refused = pair.nodes[A].start_verify(pair.now, None, &mut out);
    assert_eq!(
        refused,
        Err(StateError::SyncInProgress {
            peer: "node1".to_string()
        })
    );
}

/// A disconnect ends the verify on both sides at once; digests still running are dropped when
/// they finish; the found bits stay; a later verify runs normally.
#[test]
fn a_disconnect_mid_verify_aborts_it_cleanly() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.corrupt(B, 2);
    pair.corrupt(B, 200);
    pair.verify_from(A).expect("verify");
    // Range 0 is judged; the others are in flight on both sides.
    while pair.deliver(B) {}
    let digest = pair.digest_index(B);
    let action = pair.local[B].remove(digest).expect("queued");
    pair.perform(B, action);
    let digest = pair.digest_index(A);
    let action = pair.local[A].remove(digest).expect("queued");
    pair.perform(A, action);
    assert!(pair.deliver(A), "the reply arrives");
    assert_eq!(pair.found_by(A), vec![(2 * BLOCK, BLOCK)]);
    pair.disconnect();
    for node in [A, B] {
        let status = pair.peer_volume(node);
        assert_eq!(
            (status.replication, status.resync),
            (ReplState::Off, None),
            "node {node}"
        );
    }
    while pair.run_local(A) | pair.run_local(B) {}
    assert!(
        pair.links.iter().all(|link| link.is_empty()),
        "late digests send nothing"
    );
    assert!(pair.finished().is_empty());
    assert_eq!(
        pair.peer_volume(A).verify_oos_bytes,
        BLOCK,
        "what was found is kept"
    );
    assert_eq!(pair.peer_volume(A).out_of_sync_bytes, BLOCK);
    pair.connect();
    pair.settle(20);
    assert_eq!(
        pair.resync_sent_bytes,
        [BLOCK, 0],
        "the found block is resynced"
    );
    pair.established_both();
    pair.verify_events.clear();
    pair.verify_from(A).expect("verify again");
    pair.verify_until_done(20);
    assert_eq!(
        pair.found_by(A),
        vec![(200 * BLOCK, BLOCK)],
        "block 200 was never judged before"
    );
}

/// A client write that lands between the two digests of its block is not a difference, and
/// does not hide a real one in the same range: only its own blocks are skipped.
#[test]
fn a_write_during_the_verify_of_its_range_is_not_a_false_positive() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.corrupt(B, 5);
    pair.verify_from(A).expect("verify");
    // A digests range 0 before the write; B after it (its digest waits behind the write).
    let digest = pair.digest_index(A);
    let action = pair.local[A].remove(digest).expect("queued");
    pair.perform(A, action);
    let data = vec![0x77; 2 * BLOCK as usize];
    let write = Op::Write {
        offset: BLOCK,
        length: 2 * BLOCK,
        data,
        flags: WriteFlags::default(),
    };
    let mut out = Vec::new();
    pair.nodes[A].submit(pair.now, 1, 0, write, &mut out);
    pair.route(A, out);
    while pair.deliver(B) {}
    let write_index = pair.local[B]
        .iter()
        .position(|a| matches!(a, Action::LocalWrite { .. }))
        .expect("write queued");
    let write = pair.local[B].remove(write_index).expect("queued");
    pair.perform(B, write);
    pair.verify_until_done(20);
    assert!(pair.is_complete(1));
    assert_eq!(pair.found_by(A), vec![(5 * BLOCK, BLOCK)], "block 5 only");
    assert_eq!(
        pair.finished(),
        vec![(A, BLOCK, 2 * BLOCK)],
        "blocks 1 and 2 skipped"
    );
    assert_eq!(pair.peer_volume(A).verify_skipped_bytes, 2 * BLOCK);
}

/// Protocol A: a write completed on the source before its range was issued may still be
/// unwritten on the target when the request arrives; the target marks that block, so a
/// digest read before the write lands is not judged.
#[test]
fn a_write_unfinished_on_the_target_is_marked_by_the_target() {
    let mut pair = verify_pair(1 << 20, Protocol::A);
    let write = Op::Write {
        offset: 2 * BLOCK,
        length: BLOCK,
        data: vec![0x33; BLOCK as usize],
        flags: WriteFlags::default(),
    };
    let mut out = Vec::new();
    pair.nodes[A].submit(pair.now, 1, 0, write, &mut out);
    pair.route(A, out);
    assert!(pair.run_local(A));
    assert!(
        pair.is_complete(1),
        "protocol A: complete before the peer wrote"
    );
    pair.verify_from(A).expect("verify");
    while pair.deliver(B) {}
    // B digests range 0 before its write of block 2 finishes.
    let digest = pair.digest_index(B);
    let action = pair.local[B].remove(digest).expect("queued");
    pair.perform(B, action);
    pair.verify_until_done(20);
    assert_eq!(pair.disks[A], pair.disks[B]);
    assert!(pair.found_by(A).is_empty(), "not a false positive");
    assert_eq!(pair.finished(), vec![(A, 0, BLOCK)]);
}

/// The verify is paced by the resync rate controller: the bytes requested per tick stay
/// within the tick's budget plus one block, and progress climbs to 100%.
#[test]
fn the_rate_controller_paces_the_verify_and_progress_reaches_100() {
    // 1 MiB/s: 104857.6 bytes per 100 ms tick; the 1 MiB volume takes about 10 ticks.
    let mut pair = verify_pair(1024, Protocol::C);
    let budget_bytes_max = 104_858 + BLOCK;
    pair.verify_from(A).expect("verify");
    let mut per_tick = Vec::new();
    let mut percents = Vec::new();
    let mut target_at_end = None;
    for _ in 0..40 {
        let mut requested = 0;
        loop {
            match pair.links[B].front() {
                Some((_, PeerMessage::VerifyRequest { length, .. })) => requested += length,
                Some((_, PeerMessage::VerifyDone { .. })) => {
                    target_at_end = pair.peer_volume(B).resync;
                }
                _ => {}
            }
            if !(pair.deliver(B) | pair.deliver(A) | pair.run_local(A) | pair.run_local(B)) {
                break;
            }
        }
        per_tick.push(requested);
        if !pair.verifying() {
            break;
        }
        percents.push(
            pair.peer_volume(A)
                .resync
                .expect("progress while verifying")
                .percent_done(),
        );
        pair.tick(A, TICK_INTERVAL);
    }
    assert!(
        per_tick.iter().all(|&bytes| bytes <= budget_bytes_max),
        "{per_tick:?}"
    );
    assert_eq!(
        per_tick.iter().sum::<u64>(),
        VOLUME_BYTES,
        "every byte once"
    );
    assert!(
        per_tick.len() >= 10,
        "paced over about 10 ticks: {per_tick:?}"
    );
    assert!(percents.windows(2).all(|w| w[0] <= w[1]), "{percents:?}");
    assert!(percents.first().is_some_and(|&p| p < 20.0), "{percents:?}");
    let target = target_at_end.expect("the target showed progress before VerifyDone");
    assert_eq!(target.percent_done(), 100.0);
    assert_eq!(pair.finished(), vec![(A, 0, 0)]);
}

/// A range the target cannot read counts as failed (progress), is not marked, and the verify
/// goes on to the end.
#[test]
fn an_unreadable_range_is_counted_failed_not_marked() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.verify_from(A).expect("verify");
    while pair.deliver(B) {}
    let digest = pair.digest_index(B);
    let Some(Action::LocalDigest { io, .. }) = pair.local[B].remove(digest) else {
        panic!("a digest")
    };
    let mut out = Vec::new();
    pair.nodes[B].local_digest_done(pair.now, io, Err(IoError::Io), &mut out);
    pair.route(B, out);
    let digest = pair.digest_index(A);
    let action = pair.local[A].remove(digest).expect("queued");
    pair.perform(A, action);
    pair.deliver(A);
    let progress = pair.peer_volume(A).resync.expect("still verifying");
    assert_eq!(progress.failed_bytes, RANGE_BLOCKS * BLOCK);
    pair.verify_until_done(20);
    assert!(pair.found_by(A).is_empty());
    assert_eq!(pair.finished(), vec![(A, 0, 0)]);
    assert_eq!(pair.peer_volume(A).out_of_sync_bytes, 0);
}

/// Digests of another length mean the two nodes digest differently (verify-alg or block
/// size): a protocol error, not a difference.
#[test]
fn digests_of_another_length_are_a_protocol_error() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.verify_from(A).expect("verify");
    while pair.deliver(B) {}
    let digest = pair.digest_index(B);
    let Some(Action::LocalDigest { io, .. }) = pair.local[B].remove(digest) else {
        panic!("a digest")
    };
    let mut out = Vec::new();
    pair.nodes[B].local_digest_done(
        pair.now,
        io,
        Ok(vec![1; RANGE_BLOCKS as usize * 4]),
        &mut out,
    );
    pair.route(B, out);
    pair.deliver_all();
    assert_eq!(pair.disconnects, vec![(A, ConnState::ProtocolError)]);
    assert!(
        matches!(
            pair.reasons.as_slice(),
            [DisconnectReason::Violation(
                PeerViolation::VerifyDigestsDiffer { .. }
            )]
        ),
        "{:?}",
        pair.reasons
    );
    assert!(pair.found_by(A).is_empty());
    assert_eq!(pair.peer_volume(A).out_of_sync_bytes, 0, "nothing marked");
}

/// Both nodes start a verify at once: the lower node id keeps its verify, the other becomes
/// its target; no protocol error.
#[test]
fn when_both_start_the_lower_node_id_verifies() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.corrupt(B, 9);
    pair.verify_from(A).expect("A verifies");
    pair.verify_from(B).expect("B verifies");
    pair.verify_until_done(20);
    assert!(pair.disconnects.is_empty());
    assert_eq!(pair.finished(), vec![(A, BLOCK, 0)]);
    assert_eq!(pair.found_by(A), vec![(9 * BLOCK, BLOCK)]);
    pair.established_both();
}

/// A handshake the peer started before it saw the first request (here `invalidate`) ends the
/// verify; the handshake goes on (a full sync to the invalidated node).
#[test]
fn a_handshake_from_the_peer_ends_the_verify() {
    let mut pair = verify_pair(1 << 20, Protocol::C);
    pair.verify_from(A).expect("verify");
    let mut out = Vec::new();
    pair.nodes[B]
        .invalidate(&mut out)
        .expect("B is still Established");
    pair.route(B, out);
    pair.settle(40);
    assert!(pair.disconnects.is_empty());
    assert!(
        pair.finished().is_empty(),
        "the verify ended without a result"
    );
    assert_eq!(
        pair.resync_sent_bytes,
        [VOLUME_BYTES, 0],
        "the full sync ran"
    );
    pair.established_both();
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::UpToDate);
}

/// The invariant of `engine/verify.rs` under random interleavings: client writes racing the
/// verify (protocols A, B and C, from the verify source or the target as Primary), messages
/// and local I/O completing in random order, never make an equal block look different, and
/// never keep a real difference in a block nobody wrote from being found. Many seeds.
#[test]
fn writes_racing_a_verify_never_cause_false_positives() {
    // The workload writes blocks 0..200; blocks 230.. are corrupted on the peer and never
    // written, so exactly they must be found.
    let corrupted = [230, 231, 250];
    let mut skipped_total = 0;
    for seed in 1..=60_u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut below = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let protocol = [Protocol::A, Protocol::B, Protocol::C][(seed % 3) as usize];
        let mut pair = verify_pair([200, 800, 1 << 20][(seed / 3 % 3) as usize], protocol);
        let verifier = if seed % 2 == 0 { A } else { B };
        for block in corrupted {
            pair.corrupt(1 - verifier, block);
        }
        pair.verify_from(verifier).expect("verify");
        let mut request = 1;
        for _ in 0..4000 {
            match below(10) {
                0 => pair.settle(0),
                1 | 2 if request < 300 => {
                    let offset = below(200 - 2) * BLOCK + below(2) * 512;
                    let length = BLOCK * (1 + below(2));
                    let op = Op::Write {
                        offset,
                        length,
                        data: vec![below(250) as u8 + 1; length as usize],
                        flags: WriteFlags::default(),
                    };
                    let mut out = Vec::new();
                    pair.nodes[A].submit(pair.now, request, 0, op, &mut out);
                    pair.route(A, out);
                    request += 1;
                }
                1..=3 => {
                    pair.deliver(A);
                }
                4 | 5 => {
                    pair.deliver(B);
                }
                6 => {
                    pair.tick(A, TICK_INTERVAL);
                    let mut out = Vec::new();
                    pair.nodes[B].tick(pair.now, &mut out);
                    pair.route(B, out);
                }
                node => {
                    let node = if node < 8 { A } else { B };
                    if !pair.local[node].is_empty() {
                        let index = below(pair.local[node].len() as u64) as usize;
                        let action = pair.local[node].remove(index).expect("present");
                        pair.perform(node, action);
                    }
                }
            }
        }
        pair.verify_until_done(2000);
        pair.deliver_all();
        assert!(
            pair.disconnects.is_empty(),
            "seed {seed}: {:?}",
            pair.disconnects
        );
        let expected: Vec<(u64, u64)> = expected_runs(&corrupted);
        // The order of the reports follows the order the replies came back in.
        let mut found = pair.found_by(verifier);
        found.sort_unstable();
        assert_eq!(found, expected, "seed {seed}: found");
        let finished = pair.finished();
        assert_eq!(finished.len(), 1, "seed {seed}");
        skipped_total += finished[0].2;
        let differing = (0..VOLUME_BYTES as usize)
            .filter(|&i| pair.disks[A][i] != pair.disks[B][i])
            .count();
        assert_eq!(
            differing,
            corrupted.len(),
            "seed {seed}: only the corrupted bytes differ"
        );
    }
    assert!(
        skipped_total > 0,
        "some writes raced the verify of their blocks"
    );
}
