//! Diskless nodes (drbd-semantics.md §6, "diskless tiebreaker"): a node whose volume is
//! `disk none;` connects, shows Diskless on both sides, is never a sync source or target, and
//! stores nothing; its peer keeps marking what it writes out of sync for it.

use super::*;

/// The volume of a `disk none;` node, as the daemon builds it.
fn diskless_volume() -> VolumeConfig {
    VolumeConfig { disk: DiskState::Diskless, ..VolumeConfig::fresh(0, 0) }
}

/// A (UpToDate) and B (diskless), connected; A Primary.
fn pair_with_diskless_peer(protocol: Protocol) -> Pair {
    let a = engine(0, 1, protocol);
    let b = engine_with(1, peer_config(0, protocol), diskless_volume());
    let mut pair = Pair::unconnected([a, b]);
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A].promote(false, &mut out).expect("an UpToDate node beside a diskless one may promote");
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
    assert_eq!(a.peers[0].volumes[0].replication, ReplState::Established, "no resync with a diskless peer");
    assert_eq!(a.peers[0].volumes[0].peer_disk, DiskState::Diskless);
    assert_eq!(a.volumes[0].disk, DiskState::UpToDate);
    assert_eq!(b.volumes[0].disk, DiskState::Diskless);
    assert_eq!(b.peers[0].volumes[0].replication, ReplState::Established);
    assert_eq!(b.peers[0].volumes[0].peer_disk, DiskState::UpToDate);
    assert!(pair.disconnects.is_empty(), "no geometry or handshake refusal: {:?}", pair.disconnects);
    assert!(pair.persisted[B].is_none(), "a diskless node has no metadata to write");
}

#[test]
fn writes_complete_without_the_diskless_peer_and_are_marked_for_it() {
    let mut pair = pair_with_diskless_peer(Protocol::C);
    pair.write(1, 0, 7, 8192);
    // The local write, and the new generation a peer left behind calls for (rotate.rs).
    while pair.run_local(A) {}
    assert!(pair.is_complete(1), "protocol C does not wait for a peer that stores nothing");
    assert!(pair.links[B].iter().all(|(_, m)| !matches!(m, PeerMessage::Data { .. })), "no data goes to a diskless peer");
    assert_eq!(pair.out_of_sync(), 8192, "the blocks are marked for the diskless peer");
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
    assert!(pair.nodes[B].promote(false, &mut out).is_err(), "nothing to serve from");
    assert!(pair.nodes[B].promote(true, &mut out).is_err(), "not even forced");
}

#[test]
fn a_write_that_reaches_a_diskless_node_before_its_handshake_is_refused_not_fatal() {
    // The Primary may send a write in the moment between connect and handshake.
    let a = engine(0, 1, Protocol::C);
    let b = engine_with(1, peer_config(0, Protocol::C), diskless_volume());
    let mut pair = Pair::unconnected([a, b]);
    let mut out = Vec::new();
    pair.nodes[A].promote(true, &mut out).expect("promote alone");
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
    assert!(pair.disconnects.is_empty(), "not a protocol error: {:?}", pair.disconnects);
    assert_eq!(pair.nodes[A].status().peers[0].volumes[0].peer_disk, DiskState::Diskless);
}
