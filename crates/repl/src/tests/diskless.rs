//! Diskless nodes (drbd-semantics.md §6, "diskless tiebreaker"): a node whose volume is
//! `disk none;` connects, shows Diskless on both sides, is never a sync source or target, and
//! stores nothing; its peer keeps marking what it writes out of sync for it.

use super::*;

/// The volume of a `disk none;` node, as the daemon builds it.
fn diskless_volume() -> VolumeConfig {
    VolumeConfig {
        disk: DiskState::Diskless,
        ..VolumeConfig::fresh(0, 0)
    }
}

/// A (UpToDate) and B (diskless), connected; A Primary.
fn pair_with_diskless_peer(protocol: Protocol) -> Pair {
    let a = engine(0, 1, protocol);
    let b = engine_with(1, peer_config(0, protocol), diskless_volume());
    let mut pair = Pair::unconnected([a, b]);
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("an UpToDate node beside a diskless one may promote");
    pair.route(A, out);
    pair.deliver_all();
    pair
}

#[test]
fn a_diskless_peer_connects_without_a_resync_and_both_sides_say_diskless() {
    let pair = pair_with_diskless_peer(Protocol::C);
    let a = pair.nodes[A].status();
    let b = pair.nodes[B].status();
    assert_eq!(a.peers[0].connection, ConnState::Connected);
    assert_eq!(
        a.peers[0].volumes[0].replication,
        ReplState::Established,
        "no resync with a diskless peer"
    );
    assert_eq!(a.peers[0].volumes[0].peer_disk, DiskState::Diskless);
    assert_eq!(a.volumes[0].disk, DiskState::UpToDate);
    assert_eq!(b.volumes[0].disk, DiskState::Diskless);
    assert_eq!(b.peers[0].volumes[0].replication, ReplState::Established);
    assert_eq!(b.peers[0].volumes[0].peer_disk, DiskState::UpToDate);
    assert!(
        pair.disconnects.is_empty(),
        "no geometry or handshake refusal: {:?}",
        pair.disconnects
    );
    assert!(
        pair.persisted[B].is_none(),
        "a diskless node has no metadata to write"
    );
}

#[test]
fn writes_complete_without_the_diskless_peer_which_gets_no_bitmap() {
    let mut pair = pair_with_diskless_peer(Protocol::C);
    pair.write(1, 0, 7, 8192);
    // The local write, and the new generation a peer left behind calls for (rotate.rs).
    while pair.run_local(A) {}
    assert!(
        pair.is_complete(1),
        "protocol C does not wait for a peer that stores nothing"
    );
    assert!(
        pair.links[B]
            .iter()
            .all(|(_, m)| !matches!(m, PeerMessage::Data { .. })),
        "no data goes to a diskless peer"
    );
    assert_eq!(
        pair.out_of_sync(),
        0,
        "no bitmap for a peer without a disk (DRBD's --bitmap=no)"
    );
    pair.deliver_all();
    assert!(pair.disconnects.is_empty());
}

#[test]
fn a_diskless_node_cannot_be_promoted() {
    let mut pair = pair_with_diskless_peer(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A].demote(&mut out).expect("demote");
    pair.route(A, out);
    pair.deliver_all();
    let mut out = Vec::new();
    assert!(
        pair.nodes[B].promote(Promotion::Normal, &mut out).is_err(),
        "nothing to serve from"
    );
    assert!(
        pair.nodes[B].promote(Promotion::Forced, &mut out).is_err(),
        "not even forced"
    );
}

#[test]
fn a_write_that_reaches_a_diskless_node_before_its_handshake_is_refused_not_fatal() {
    // The Primary may send a write in the moment between connect and handshake.
    let a = engine(0, 1, Protocol::C);
    let b = engine_with(1, peer_config(0, Protocol::C), diskless_volume());
    let mut pair = Pair::unconnected([a, b]);
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Forced, &mut out)
        .expect("promote alone");
    pair.route(A, out);
    pair.deliver_all();
    let mut out = Vec::new();
    pair.nodes[A].peer_connected(pair.now, 1, &mut out);
    pair.route(A, out);
    pair.write(1, 4096, 9, 4096);
    let mut out = Vec::new();
    pair.nodes[B].peer_connected(pair.now, 0, &mut out);
    pair.route(B, out);
    pair.deliver_all();
    assert!(pair.is_complete(1));
    assert!(
        pair.disconnects.is_empty(),
        "not a protocol error: {:?}",
        pair.disconnects
    );
    assert_eq!(
        pair.out_of_sync(),
        0,
        "the refused write is not kept for a peer without a disk"
    );
    assert_eq!(
        pair.nodes[A].status().peers[0].volumes[0].peer_disk,
        DiskState::Diskless
    );
}

/// Runs A's queued local I/O, failing every data write with EIO (a dying disk).
fn run_local_failing_writes(pair: &mut Pair) {
    pair.run_local_failing(A, |_| true);
}

fn result_of(pair: &Pair, request: RequestId) -> Option<Result<(), IoError>> {
    pair.completed
        .iter()
        .find(|(r, _)| *r == request)
        .map(|(_, result)| *result)
}

/// drbd-semantics.md §2 (Diskless), `on-io-error detach`: the write whose local leg failed is
/// acknowledged because the peer wrote it; the Primary goes Diskless and later writes go only
/// to the peer, which marks them for the Diskless node.
#[test]
fn detach_on_a_write_error_completes_through_the_peer_and_goes_diskless() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::Detach);
    pair.write(1, 0, 7, 4096);
    run_local_failing_writes(&mut pair);
    assert_eq!(result_of(&pair, 1), None, "not before the peer wrote it");
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::Diskless);
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Ok(())), "the peer has it");
    assert_eq!(pair.disks[B][0], 7);
    assert_eq!(
        pair.nodes[B].status().peers[0].volumes[0].peer_disk,
        DiskState::Diskless,
        "B heard A is Diskless"
    );

    pair.write(2, 8192, 9, 4096);
    assert!(
        pair.local[A]
            .iter()
            .all(|a| !matches!(a, Action::LocalWrite { .. })),
        "a Diskless volume writes nothing locally"
    );
    pair.deliver_all();
    assert_eq!(result_of(&pair, 2), Some(Ok(())));
    assert_eq!(pair.disks[B][8192], 9);
    assert!(
        pair.nodes[B].status().peers[0].volumes[0].out_of_sync_bytes >= 4096,
        "B keeps the blocks A lacks"
    );
    assert_eq!(pair.nodes[A].read_source(0), Some(1), "reads go to B");
}

/// `on-io-error pass_on`: the error reaches the client and the disk stays attached.
#[test]
fn pass_on_fails_the_write_and_stays_attached() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::PassOn);
    pair.write(1, 0, 7, 4096);
    run_local_failing_writes(&mut pair);
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::Io)));
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::UpToDate);
}

/// `on-io-error pass_on` on a Primary: the peer may have written a write this disk failed,
/// so both would stay UpToDate with different data. The Primary drops the link, and the
/// reconnect resyncs the block from its disk: the failed write ends on neither replica.
#[test]
fn pass_on_primary_resyncs_a_failed_write_away_from_its_peer() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::PassOn);
    pair.write(1, 8192, 7, 4096);
    while pair.deliver(B) {}
    while pair.run_local(B) {}
    run_local_failing_writes(&mut pair);
    assert!(
        pair.disconnects
            .iter()
            .any(|&(node, state)| node == A && state == ConnState::Unconnected),
        "A dropped the link to resync: {:?}",
        pair.disconnects
    );
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::Io)));
    assert_eq!(
        pair.disks[B][8192], 7,
        "B wrote it before A's disk failed it"
    );
    pair.disconnect();
    pair.connect();
    pair.sync_until_quiet(50);
    assert_eq!(
        pair.disks[B][8192], 0,
        "the failed write is on neither replica"
    );
    assert_eq!(
        [
            pair.nodes[A].status().volumes[0].disk,
            pair.nodes[B].status().volumes[0].disk
        ],
        [DiskState::UpToDate; 2]
    );
    pair.assert_in_sync();
}

/// `on-io-error pass_on` on a Secondary, as DRBD: a replicated write that fails there makes
/// its disk Inconsistent (never promotable, never a sync source) with the block marked; the
/// Primary's write still completes (its disk has it). The Secondary drops the link, and the
/// reconnect's handshake resyncs exactly what it lacks.
#[test]
fn pass_on_secondary_goes_inconsistent_and_is_resynced_on_reconnect() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[B].set_on_io_error(0, OnIoError::PassOn);
    pair.write(1, 8192, 7, 4096);
    while pair.deliver(B) {}
    pair.run_local_failing(B, |io| matches!(io, IoId::PeerWrite { .. }));
    let b = pair.nodes[B].status();
    assert_eq!(
        b.volumes[0].disk,
        DiskState::Inconsistent,
        "B lacks a write the Primary acknowledges"
    );
    assert!(
        b.peers[0].volumes[0].out_of_sync_bytes >= 4096,
        "B marked the block it lacks"
    );
    assert!(
        pair.disconnects
            .iter()
            .any(|&(node, state)| node == B && state == ConnState::Unconnected),
        "B dropped the link to resync: {:?}",
        pair.disconnects
    );
    pair.deliver_all();
    assert_eq!(
        pair.persisted[B].as_ref().map(|meta| meta.disk),
        Some(DiskState::Inconsistent),
        "the state is durable"
    );
    assert_eq!(
        result_of(&pair, 1),
        Some(Ok(())),
        "the Primary's disk has the write"
    );
    let mut out = Vec::new();
    assert!(
        pair.nodes[B].promote(Promotion::Normal, &mut out).is_err(),
        "an Inconsistent disk is not promoted"
    );
    assert_eq!(pair.disks[B][8192], 0, "the failed write is not on B");

    pair.disconnect();
    pair.connect();
    pair.sync_until_quiet(50);
    assert_eq!(
        pair.nodes[B].status().volumes[0].disk,
        DiskState::UpToDate,
        "the resync brought B back"
    );
    assert_eq!(pair.disks[B][8192], 7, "with the block it had failed");
    pair.assert_in_sync();
}

/// With no peer to write it, a Diskless Primary's write is on no disk: EIO, never Ok.
#[test]
fn a_detached_primary_without_peers_fails_writes() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::Detach);
    pair.disconnect();
    pair.write(1, 0, 7, 4096);
    run_local_failing_writes(&mut pair);
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::Io)));
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::Diskless);
    pair.write(2, 4096, 7, 4096);
    run_local_failing_writes(&mut pair);
    assert_eq!(result_of(&pair, 2), Some(Err(IoError::Io)));
}

/// `detach` by the administrator: refused on a Primary without a connected UpToDate peer.
#[test]
fn an_administrators_detach_of_a_primary_needs_an_up_to_date_peer() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.disconnect();
    assert!(pair.nodes[A].detach(pair.now, &mut out).is_err());
    pair.connect();
    pair.deliver_all();
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    assert!(out
        .iter()
        .any(|a| matches!(a, Action::Detached { failed: false, .. })));
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::Diskless);
}

/// A Diskless Primary's client read is served by the UpToDate peer (wire `ReadRequest`).
#[test]
fn a_diskless_primary_reads_through_its_peer() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::Detach);
    pair.write(1, 4096, 5, 8192);
    run_local_failing_writes(&mut pair);
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Ok(())));
    let mut out = Vec::new();
    pair.nodes[A].read_through_peer(77, 0, 4096, 8192, &mut out);
    pair.route(A, out);
    pair.deliver_all();
    assert_eq!(pair.reads_done, vec![(77, Ok(vec![5; 8192]))]);
}

/// With no UpToDate peer connected, the read fails at once; a read in flight when the peer
/// goes fails too.
#[test]
fn a_diskless_read_without_a_peer_fails() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    pair.route(A, out);
    pair.deliver_all();
    let mut out = Vec::new();
    pair.nodes[A].read_through_peer(1, 0, 0, 4096, &mut out);
    pair.route(A, out);
    pair.disconnect();
    let mut out = Vec::new();
    pair.nodes[A].read_through_peer(2, 0, 0, 4096, &mut out);
    pair.route(A, out);
    assert_eq!(
        pair.reads_done,
        vec![(1, Err(IoError::Io)), (2, Err(IoError::Io))]
    );
}

/// `detach` then `attach` on a Secondary (drbd-semantics.md §2, Diskless → Attaching →
/// Outdated → SyncTarget → UpToDate): only the blocks written meanwhile are resynced.
#[test]
fn a_detached_secondary_attaches_and_resyncs_only_what_it_missed() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 1, 4096);
    pair.deliver_all();
    let mut out = Vec::new();
    pair.nodes[B]
        .detach(pair.now, &mut out)
        .expect("a Secondary may detach");
    pair.route(B, out);
    pair.deliver_all();
    assert_eq!(
        pair.nodes[A].status().peers[0].volumes[0].peer_disk,
        DiskState::Diskless
    );
    pair.write(2, 65536, 2, 8192);
    pair.deliver_all();
    assert!(pair.is_complete(2));
    assert_eq!(pair.disks[B][65536], 0, "nothing reaches a Diskless peer");
    assert_eq!(pair.out_of_sync(), 8192, "A keeps the bits for B");

    let mut out = Vec::new();
    pair.nodes[B].begin_attach(0, &mut out).expect("Diskless");
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Attaching);
    pair.nodes[B].finish_attach(pair.now, 0, true, &mut out);
    pair.route(B, out);
    for _ in 0..20 {
        pair.tick(A, TICK_INTERVAL);
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::UpToDate);
    assert_eq!(pair.disks[A], pair.disks[B], "identical after the resync");
    assert_eq!(
        pair.resync_sent_bytes[A], 8192,
        "only the blocks written meanwhile"
    );
    assert!(pair.disconnects.is_empty(), "{:?}", pair.disconnects);
}

#[test]
fn attach_is_refused_on_a_primary_and_on_an_attached_disk() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    assert_eq!(
        pair.nodes[A].begin_attach(0, &mut out),
        Err(StateError::NotDetached(DiskState::UpToDate))
    );
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    assert_eq!(
        pair.nodes[A].begin_attach(0, &mut out),
        Err(StateError::AttachOnPrimary)
    );
}

/// A Diskless node's volume never becomes Inconsistent or UpToDate by `invalidate` or
/// `new-current-uuid`: it has nothing to hold the data.
#[test]
fn invalidate_and_new_current_uuid_are_refused_without_a_disk() {
    let mut pair = pair_with_diskless_peer(Protocol::C);
    let mut out = Vec::new();
    assert_eq!(
        pair.nodes[B].invalidate(&mut out),
        Err(StateError::Diskless)
    );
    assert_eq!(
        pair.nodes[B].new_current_uuid(true, &mut out),
        Err(StateError::Diskless)
    );
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Diskless);
}

/// A Diskless Primary's flush waits for the peer's barrier ack even under protocol A (its
/// data is only there), and fails when no peer acknowledged it.
#[test]
fn a_diskless_flush_needs_a_peers_barrier_ack() {
    let mut pair = Pair::new(Protocol::A);
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    pair.route(A, out);
    pair.deliver_all();
    pair.write(1, 0, 7, 4096);
    pair.flush(2);
    while pair.run_local(A) {}
    assert_eq!(
        result_of(&pair, 2),
        None,
        "not before B acknowledged the barrier"
    );
    pair.deliver_all();
    assert_eq!(result_of(&pair, 2), Some(Ok(())));

    pair.disconnect();
    pair.flush(3);
    while pair.run_local(A) {}
    assert_eq!(
        result_of(&pair, 3),
        Some(Err(IoError::Io)),
        "no peer: nothing is durable"
    );
}

/// A peer that missed a write of a Diskless Primary (it was away, the write failed) is not
/// asked for those blocks even once it is back and says UpToDate; other blocks still are.
#[test]
fn reads_avoid_blocks_a_peer_missed() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    pair.route(A, out);
    pair.deliver_all();
    pair.disconnect();
    pair.write(1, 0, 7, 4096);
    while pair.run_local(A) {}
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::Io)), "on no disk");
    pair.connect();
    pair.deliver_all();
    let mut out = Vec::new();
    pair.nodes[A].read_through_peer(10, 0, 0, 4096, &mut out);
    pair.nodes[A].read_through_peer(11, 0, 8192, 4096, &mut out);
    pair.route(A, out);
    pair.deliver_all();
    assert_eq!(
        pair.reads_done,
        vec![(10, Err(IoError::Io)), (11, Ok(vec![0; 4096]))]
    );
}

/// Two nodes, the Diskless Primary's peer away for a moment: the writes meanwhile failed
/// (on no disk), no new generation was made, so the peer comes back UpToDate and serves
/// reads again.
#[test]
fn a_peer_back_after_a_blip_of_a_diskless_primary_stays_up_to_date() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    pair.route(A, out);
    pair.deliver_all();
    pair.disconnect();
    pair.write(1, 0, 7, 4096);
    while pair.run_local(A) {}
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::Io)));
    pair.connect();
    pair.deliver_all();
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::UpToDate);
    assert_eq!(pair.nodes[A].read_source(0), Some(1));
}

/// A Diskless Primary whose generation the returning peer lacks (it wrote through others
/// meanwhile): the peer marks itself Outdated, and no read goes to it.
#[test]
fn a_peer_behind_a_diskless_primary_outdates_itself() {
    let a = engine(0, 1, Protocol::C);
    let mut behind = synced_volume();
    behind.ids.current = SYNCED_UUID + 0x100;
    let b = engine_with(1, peer_config(0, Protocol::C), behind);
    let mut pair = Pair::unconnected([a, b]);
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("promote alone");
    pair.route(A, out);
    pair.nodes[A].set_on_io_error(0, OnIoError::Detach);
    pair.write(1, 0, 7, 4096);
    run_local_failing_writes(&mut pair);
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::Diskless);
    pair.connect();
    pair.deliver_all();
    for _ in 0..3 {
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Outdated);
    assert_eq!(pair.nodes[A].read_source(0), None, "no UpToDate source");
    assert!(pair.disconnects.is_empty(), "{:?}", pair.disconnects);
}

/// `on-io-error` is a volume's setting (a `disk { }` section inside `volume N`): a failed
/// write detaches only a volume whose policy says so.
#[test]
fn on_io_error_is_a_per_volume_policy() {
    let second = VolumeConfig {
        number: 1,
        ..synced_volume()
    };
    let config = EngineConfig {
        node_id: 0,
        volumes: vec![synced_volume(), second],
        peers: vec![peer_config(1, Protocol::C)],
        random_seed: 7,
    };
    let mut engine: Engine<Vec<u8>> = Engine::new(config).expect("two volumes");
    engine.set_on_io_error(0, OnIoError::Detach);
    engine.set_on_io_error(1, OnIoError::PassOn);
    engine.set_on_io_error(9, OnIoError::Detach);
    assert_eq!(engine.on_io_error(0), Some(OnIoError::Detach));
    assert_eq!(engine.on_io_error(1), Some(OnIoError::PassOn));
    assert_eq!(engine.on_io_error(9), None, "no such volume");
    let mut out = Vec::new();
    engine
        .promote(Promotion::Forced, &mut out)
        .expect("alone: forced");
    // Every local write fails; metadata and activity-log writes succeed.
    let run = |engine: &mut Engine<Vec<u8>>, mut out: Vec<Action<Vec<u8>>>| {
        let mut completed = Vec::new();
        while let Some(action) = out.pop() {
            let mut next = Vec::new();
            match action {
                Action::LocalWrite { io, .. } => {
                    engine.local_done(Time(1), io, Err(IoError::Io), &mut next)
                }
                Action::PersistMeta { io, .. }
                | Action::WriteActivityLog { io, .. }
                | Action::LocalFlush { io } => engine.local_done(Time(1), io, Ok(()), &mut next),
                Action::Complete { request, result } => completed.push((request, result)),
                _ => {}
            }
            out.extend(next);
        }
        completed
    };
    run(&mut engine, out);
    let write = |volume| Op::Write {
        offset: 0,
        length: 4096,
        data: vec![volume as u8; 4096],
        flags: WriteFlags::default(),
    };
    let mut out = Vec::new();
    engine.submit(Time(1), 1, 1, write(1), &mut out);
    let completed = run(&mut engine, out);
    assert_eq!(
        completed,
        vec![(1, Err(IoError::Io))],
        "pass_on: the error goes to the client"
    );
    assert!(!engine.is_diskless(1), "pass_on keeps the disk");
    let mut out = Vec::new();
    engine.submit(Time(1), 2, 0, write(0), &mut out);
    run(&mut engine, out);
    assert!(engine.is_diskless(0), "detach: volume 0 goes Diskless");
    assert!(!engine.is_diskless(1), "and volume 1 is left alone");
}

/// Issue 24 item 4 (drbd-semantics.md §2 disk states; DRBD's `on-io-error`): a Secondary whose
/// disk fails a replicated write, ENOSPC as EIO, is no longer UpToDate (Inconsistent, or
/// Diskless under a detaching policy), its metadata says Inconsistent before its NegAck goes
/// out, the Primary (its disk has the write) completes it only after that NegAck and keeps
/// the block for the Secondary, and the Secondary cannot be promoted without `--force` once
/// the Primary is gone.
#[test]
fn a_secondary_that_fails_a_replicated_write_records_it_before_the_neg_ack() {
    for error in [IoError::NoSpace, IoError::Io] {
        check_secondary_write_failure(error, OnIoError::PassOn, DiskState::Inconsistent);
        check_secondary_write_failure(error, OnIoError::Detach, DiskState::Diskless);
        check_secondary_write_failure(error, OnIoError::CallLocalIoError, DiskState::Diskless);
    }
}

#[track_caller]
fn check_secondary_write_failure(error: IoError, policy: OnIoError, disk_after: DiskState) {
    let case = format!("{error:?} under {policy:?}");
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[B].set_on_io_error(0, policy);
    let out = fail_replicated_write(&mut pair, &case, error);

    assert_eq!(pair.nodes[B].status().volumes[0].disk, disk_after, "{case}");
    let recorded = out.iter().find_map(|a| match a {
        Action::PersistMeta { meta, .. } => Some(meta.disk),
        _ => None,
    });
    assert_eq!(
        recorded,
        Some(DiskState::Inconsistent),
        "{case}: the metadata is written"
    );
    let neg_ack = |message: &PeerMessage<Vec<u8>>| matches!(message, PeerMessage::NegAck { .. });
    assert!(
        !out.iter()
            .any(|a| matches!(a, Action::SendControl { message, .. } if neg_ack(message))),
        "{case}: no NegAck before the metadata is durable: {out:?}"
    );
    pair.route(B, out);
    assert_eq!(
        result_of(&pair, 1),
        None,
        "{case}: the Primary waits for B's answer"
    );

    let index = pair.local[B]
        .iter()
        .position(|a| matches!(a, Action::PersistMeta { .. }));
    let Some(persist) = index.and_then(|i| pair.local[B].remove(i)) else {
        panic!("{case}: B writes its metadata")
    };
    pair.perform(B, persist);
    assert_eq!(
        pair.persisted[B].as_ref().map(|meta| meta.disk),
        Some(DiskState::Inconsistent),
        "{case}: durable"
    );
    let sent: Vec<&PeerMessage<Vec<u8>>> =
        pair.links[A].iter().map(|(_, message)| message).collect();
    let answered = sent.iter().position(|m| neg_ack(m));
    let announced = sent
        .iter()
        .position(|m| matches!(m, PeerMessage::State { .. }));
    assert!(
        answered.is_some(),
        "{case}: the NegAck goes out once durable: {sent:?}"
    );
    assert!(
        announced.is_some_and(|state| Some(state) < answered),
        "{case}: A hears B's disk state before the NegAck: {sent:?}"
    );

    pair.deliver_all();
    assert_eq!(
        result_of(&pair, 1),
        Some(Ok(())),
        "{case}: A's own disk has the write"
    );
    assert!(
        pair.out_of_sync() >= 4096,
        "{case}: A keeps the block for B"
    );
    assert_eq!(pair.disks[B][8192], 0, "{case}: the write is not on B");
    pair.disconnect();
    let mut out = Vec::new();
    assert!(
        pair.nodes[B].promote(Promotion::Normal, &mut out).is_err(),
        "{case}: B lacks an acknowledged write"
    );
}

/// A writes a block through B; B's local write of it fails with `error`: what B does then.
fn fail_replicated_write(pair: &mut Pair, case: &str, error: IoError) -> Vec<Action<Vec<u8>>> {
    pair.write(1, 8192, 7, 4096);
    while pair.run_local(A) {}
    while pair.deliver(B) {}
    let index = pair.local[B].iter().position(|a| {
        matches!(
            a,
            Action::LocalWrite {
                io: IoId::PeerWrite { .. },
                ..
            }
        )
    });
    let Some(Action::LocalWrite { io, .. }) = index.and_then(|i| pair.local[B].remove(i)) else {
        panic!("{case}: B writes the block")
    };
    let mut out = Vec::new();
    pair.nodes[B].local_done(pair.now, io, Err(error), &mut out);
    out
}

/// Issue 24 item 4: a Primary's own write that fails with ENOSPC follows `on-io-error` as
/// one that fails with EIO: `detach` completes it through the peer and goes Diskless,
/// `pass_on` fails it (ENOSPC to the client) and keeps the block for the peer.
#[test]
fn a_primary_out_of_space_follows_on_io_error_as_for_eio() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::Detach);
    pair.write(1, 0, 7, 4096);
    pair.run_local_failing_with(A, IoError::NoSpace, |_| true);
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::Diskless);
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Ok(())), "the peer has it");

    let mut pair = Pair::new(Protocol::C);
    pair.nodes[A].set_on_io_error(0, OnIoError::PassOn);
    pair.write(1, 0, 7, 4096);
    pair.run_local_failing_with(A, IoError::NoSpace, |_| true);
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::NoSpace)));
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::UpToDate);
    assert!(pair.out_of_sync() >= 4096, "the blocks may differ");
}

/// A Secondary that detaches on a failed replicated write tries to record it first; when
/// that metadata write fails too (the disk is gone), it stays Diskless (not Failed, which
/// would send it more local I/O) and still answers the write, so the Primary is not held.
#[test]
fn a_detaching_secondary_whose_record_fails_stays_diskless_and_answers() {
    let mut pair = Pair::new(Protocol::C);
    pair.nodes[B].set_on_io_error(0, OnIoError::Detach);
    pair.write(1, 8192, 7, 4096);
    while pair.run_local(A) {}
    while pair.deliver(B) {}
    while let Some(action) = pair.local[B].pop_front() {
        let mut out = Vec::new();
        match action {
            Action::LocalWrite { io, .. } | Action::PersistMeta { io, .. } => {
                pair.nodes[B].local_done(pair.now, io, Err(IoError::Io), &mut out)
            }
            other => pair.perform(B, other),
        }
        pair.route(B, out);
    }
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Diskless);
    assert!(
        pair.links[A]
            .iter()
            .any(|(_, m)| matches!(m, PeerMessage::NegAck { .. })),
        "answered: {:?}",
        pair.links[A]
    );
    pair.deliver_all();
    assert_eq!(
        result_of(&pair, 1),
        Some(Ok(())),
        "A's own disk has the write"
    );
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Diskless);
}

/// Issue 24 item 4: a peer's NegAck never counts as having the write. A Diskless Primary
/// whose only peer failed the write (ENOSPC) has it on no disk: EIO, not success.
#[test]
fn a_diskless_primary_fails_a_write_its_only_peer_failed() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A]
        .detach(pair.now, &mut out)
        .expect("B is UpToDate");
    pair.route(A, out);
    pair.deliver_all();
    pair.nodes[B].set_on_io_error(0, OnIoError::PassOn);
    pair.write(1, 0, 7, 4096);
    while pair.run_local(A) {}
    while pair.deliver(B) {}
    pair.run_local_failing_with(B, IoError::NoSpace, |io| {
        matches!(io, IoId::PeerWrite { .. })
    });
    pair.deliver_all();
    assert_eq!(result_of(&pair, 1), Some(Err(IoError::Io)), "on no disk");
    assert_eq!(
        pair.nodes[B].status().volumes[0].disk,
        DiskState::Inconsistent
    );
}
