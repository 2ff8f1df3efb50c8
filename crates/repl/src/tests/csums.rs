//! Checksum-based resync tests (`csums-alg`, drbd-semantics.md §1): blocks out of sync by the
//! bitmap but equal on both sides move no data, everything else resyncs as usual, and the
//! replicas end identical even with client writes racing the resync.

use super::*;

const BLOCK: u64 = 4096;
const RANGE_BYTES: u64 = 128 * 1024;

/// In sync, connected, A Primary, then disconnected; `csums-alg` as given on both sides.
fn split_pair(csums: bool, rate_kib_per_s: u32) -> Pair {
    let mut configs = [peer_config(1, Protocol::C), peer_config(0, Protocol::C)];
    for config in &mut configs {
        config.csums = csums;
        config.resync.resync_rate_kib_per_s = rate_kib_per_s;
    }
    let [to_b, to_a] = configs;
    let nodes = [
        engine_with(0, to_b, synced_volume()),
        engine_with(1, to_a, synced_volume()),
    ];
    let mut pair = Pair::unconnected(nodes);
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("promote");
    pair.route(A, out);
    pair.deliver_all();
    pair.disconnect();
    pair
}

fn submit_write(pair: &mut Pair, request: RequestId, offset: u64, byte: u8, length: u64) {
    let data = vec![byte; length as usize];
    let op = Op::Write {
        offset,
        length,
        data,
        flags: WriteFlags::default(),
    };
    let mut out = Vec::new();
    pair.nodes[A].submit(pair.now, request, 0, op, &mut out);
    pair.route(A, out);
}

/// Ticks both nodes and delivers until neither resyncs (at most `ticks_max` ticks).
fn resync_until_quiet(pair: &mut Pair, ticks_max: u32) {
    for _ in 0..ticks_max {
        pair.deliver_all();
        let syncing = [A, B].iter().any(|&node| {
            let replication = pair.nodes[node].status().peers[0].volumes[0].replication;
            !matches!(replication, ReplState::Established | ReplState::Off)
        });
        if !syncing {
            return;
        }
        pair.tick(A, TICK_INTERVAL);
        let mut out = Vec::new();
        pair.nodes[B].tick(pair.now, &mut out);
        pair.route(B, out);
    }
    panic!("still resyncing after {ticks_max} ticks");
}

fn assert_in_sync(pair: &Pair) {
    assert!(pair.disks[A] == pair.disks[B], "the replicas differ");
    for node in [A, B] {
        let status = pair.nodes[node].status();
        assert_eq!(status.volumes[0].disk, DiskState::UpToDate, "node {node}");
        assert_eq!(
            status.peers[0].volumes[0].replication,
            ReplState::Established,
            "node {node}"
        );
        assert_eq!(
            status.peers[0].volumes[0].out_of_sync_bytes, 0,
            "node {node}"
        );
    }
}

/// Starts the connection on both nodes without delivering anything.
fn connect_without_delivering(pair: &mut Pair) {
    for node in [A, B] {
        let mut out = Vec::new();
        pair.nodes[node].peer_connected(pair.now, 1 - node as u8, &mut out);
        pair.route(node, out);
    }
}

/// Counts the `CsumRequest`s in flight to `node` (A is the source here).
fn csum_requests_to(pair: &Pair, node: usize) -> usize {
    pair.links[node]
        .iter()
        .filter(|(_, m)| matches!(m, PeerMessage::CsumRequest { .. }))
        .count()
}

/// A resync of N dirty blocks of which M hold the same data on both sides moves only the
/// N-M others with `csums-alg`, and all N without it; either way the replicas end identical.
#[test]
fn csums_resync_moves_only_the_blocks_that_differ() {
    // (first block, blocks, byte): 0 is what B already holds there.
    let writes: [(u64, u64, u8); 6] = [
        (10, 1, 0),
        (20, 2, 0),
        (40, 2, 0xAB),
        (60, 3, 0),
        (80, 1, 0xCD),
        (120, 1, 0),
    ];
    let dirty_blocks: u64 = writes.iter().map(|w| w.1).sum();
    let differing_blocks: u64 = writes.iter().filter(|w| w.2 != 0).map(|w| w.1).sum();
    for (csums, moved_blocks) in [(true, differing_blocks), (false, dirty_blocks)] {
        let mut pair = split_pair(csums, 1 << 20);
        for (request, &(block, blocks, byte)) in (1..).zip(&writes) {
            submit_write(&mut pair, request, block * BLOCK, byte, blocks * BLOCK);
            while pair.run_local(A) {}
            assert!(pair.is_complete(request));
        }
        assert_eq!(pair.out_of_sync(), dirty_blocks * BLOCK);
        pair.connect();
        resync_until_quiet(&mut pair, 50);
        assert_eq!(
            pair.resync_sent_bytes,
            [moved_blocks * BLOCK, 0],
            "csums {csums}"
        );
        assert_in_sync(&pair);
        assert!(pair.disconnects.is_empty());
    }
}

/// The target digests a range before it requests it, then sends a `CsumRequest` (never a
/// plain one); a range with one differing block moves whole.
#[test]
fn the_target_digests_then_requests_and_a_differing_range_moves_whole() {
    let mut pair = split_pair(true, 1 << 20);
    submit_write(&mut pair, 1, 0, 0, 8 * BLOCK);
    while pair.run_local(A) {}
    pair.disks[A][(5 * BLOCK) as usize] = 0xEE;
    connect_without_delivering(&mut pair);
    let mut digested = false;
    while !digested && (pair.deliver(A) | pair.deliver(B) | pair.run_local(A)) {
        digested = pair.local[B]
            .iter()
            .any(|a| matches!(a, Action::LocalDigest { .. }));
        if !digested {
            pair.run_local(B);
        }
    }
    assert!(digested, "the target digests its range");
    assert_eq!(csum_requests_to(&pair, A), 0, "and requests it only then");
    while !matches!(pair.local[B].front(), Some(Action::LocalDigest { .. })) {
        assert!(pair.run_local(B));
    }
    assert!(pair.run_local(B));
    assert_eq!(csum_requests_to(&pair, A), 1);
    resync_until_quiet(&mut pair, 50);
    assert_eq!(pair.resync_requested_bytes, [0, 0], "no plain request");
    assert_eq!(pair.resync_sent_bytes, [8 * BLOCK, 0]);
    assert_in_sync(&pair);
}

/// The classic use: a full sync of disks that are nearly equal moves only the request
/// ranges that hold a difference.
#[test]
fn a_full_sync_of_nearly_equal_disks_moves_only_ranges_with_differences() {
    let mut configs = [peer_config(1, Protocol::C), peer_config(0, Protocol::C)];
    configs.iter_mut().for_each(|c| c.csums = true);
    let [to_b, to_a] = configs;
    let fresh = || VolumeConfig::fresh(0, VOLUME_BYTES);
    let mut pair =
        Pair::unconnected([engine_with(0, to_b, fresh()), engine_with(1, to_a, fresh())]);
    let pattern: Vec<u8> = (0..VOLUME_BYTES).map(|i| (i % 253) as u8).collect();
    pair.disks = [pattern.clone(), pattern];
    pair.disks[B][(3 * BLOCK + 9) as usize] ^= 1;
    pair.disks[B][(200 * BLOCK) as usize] ^= 1;
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Forced, &mut out)
        .expect("primary --force");
    pair.route(A, out);
    resync_until_quiet(&mut pair, 100);
    assert_eq!(
        pair.resync_sent_bytes,
        [2 * RANGE_BYTES, 0],
        "two ranges of the eight"
    );
    assert_in_sync(&pair);
}

/// A digest that fails on either side costs only the data transfer: a failed target digest
/// sends a plain request, a failed source digest sends the data.
#[test]
fn failed_digests_fall_back_to_moving_the_data() {
    for failing in [A, B] {
        let mut pair = split_pair(true, 1 << 20);
        submit_write(&mut pair, 1, 0, 0, 4 * BLOCK);
        while pair.run_local(A) {}
        connect_without_delivering(&mut pair);
        let mut failed = false;
        loop {
            let index = pair.local[failing]
                .iter()
                .position(|a| matches!(a, Action::LocalDigest { .. }));
            if let (Some(index), false) = (index, failed) {
                let Some(Action::LocalDigest { io, .. }) = pair.local[failing].remove(index) else {
                    unreachable!("a digest is at {index}")
                };
                let mut out = Vec::new();
                pair.nodes[failing].local_digest_done(pair.now, io, Err(IoError::Io), &mut out);
                pair.route(failing, out);
                failed = true;
            }
            if !(pair.deliver(A) || pair.deliver(B) || pair.run_local(A) || pair.run_local(B)) {
                break;
            }
        }
        assert!(failed, "node {failing} digested");
        resync_until_quiet(&mut pair, 50);
        assert_eq!(
            pair.resync_sent_bytes,
            [4 * BLOCK, 0],
            "failing node {failing}"
        );
        let plain_requested = if failing == B { 4 * BLOCK } else { 0 };
        assert_eq!(
            pair.resync_requested_bytes,
            [0, plain_requested],
            "failing node {failing}"
        );
        assert_in_sync(&pair);
    }
}

/// The resync invariant holds with `csums-alg`: client writes racing the resync (many equal
/// to what the target holds), messages and local I/O in random order and the odd reconnect
/// never leave the replicas different. Many seeds.
#[test]
fn csums_resync_with_racing_writes_ends_identical() {
    let mut in_sync_answers = 0;
    for seed in 1..=40_u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut below = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let mut pair = split_pair(true, [100, 400, 1600][(seed % 3) as usize]);
        for request in 0..30 {
            let offset = below(VOLUME_BYTES / BLOCK - 4) * BLOCK;
            let byte = if below(2) == 0 {
                0
            } else {
                below(250) as u8 + 1
            };
            submit_write(&mut pair, request, offset, byte, BLOCK * (1 + below(4)));
            while pair.run_local(A) {}
        }
        pair.connect();
        let mut request = 100;
        for _ in 0..3000 {
            in_sync_answers += pair.links[B]
                .iter()
                .filter(|(_, m)| matches!(m, PeerMessage::ResyncInSync { .. }))
                .count();
            if below(400) == 0 {
                pair.disconnect();
                pair.connect();
            }
            match below(10) {
                0 => {
                    pair.tick(A, TICK_INTERVAL);
                    let mut out = Vec::new();
                    pair.nodes[B].tick(pair.now, &mut out);
                    pair.route(B, out);
                }
                1 | 2 if request < 300 => {
                    let offset = below(VOLUME_BYTES / BLOCK - 2) * BLOCK + below(2) * 512;
                    let byte = if below(3) == 0 {
                        0
                    } else {
                        below(250) as u8 + 1
                    };
                    submit_write(&mut pair, request, offset, byte, BLOCK * (1 + below(2)));
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
                        let index = below(pair.local[node].len() as u64) as usize;
                        let action = pair.local[node].remove(index).expect("present");
                        pair.perform(node, action);
                    }
                }
            }
        }
        resync_until_quiet(&mut pair, 2000);
        assert!(
            pair.disconnects.is_empty(),
            "seed {seed}: {:?}",
            pair.disconnects
        );
        assert_eq!(
            pair.completed.len() as u64,
            30 + request - 100,
            "seed {seed}: every write completed"
        );
        assert_in_sync(&pair);
    }
    assert!(
        in_sync_answers > 40,
        "too few in-sync answers ({in_sync_answers})"
    );
}
