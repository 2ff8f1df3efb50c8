//! Graceful departure and last man standing (`engine/leave.rs`, `engine/quorum.rs`): a
//! Secondary that the administrator disconnects from a Primary outdates itself durably before
//! it says goodbye, and a Primary whose absent peers are all known Outdated keeps quorum.

use super::*;

const PEER_OF_A: u8 = 1;
const PEER_OF_B: u8 = 0;

impl Pair {
    /// Connected, in sync, A Primary, both nodes with `quorum majority` (suspend-io).
    fn majority() -> Pair {
        let mut pair = Pair::new(Protocol::C);
        let config = QuorumConfig {
            rule: QuorumRule::Majority,
            ..QuorumConfig::default()
        };
        for node in [A, B] {
            let mut out = Vec::new();
            pair.nodes[node].set_quorum(pair.now, config, &mut out);
            pair.route(node, out);
        }
        pair.deliver_all();
        pair
    }

    /// The administrator disconnects `node` from its peer (`tandem disconnect`); no local
    /// I/O is performed yet.
    fn admin_disconnect(&mut self, node: usize) {
        let peer = if node == A { PEER_OF_A } else { PEER_OF_B };
        let mut out = Vec::new();
        self.nodes[node]
            .set_connect(self.now, peer, false, &mut out)
            .expect("known peer");
        self.route(node, out);
    }

    /// What the driver does once `node` dropped the link: the other side's link ends, after
    /// the messages `node` queued before its goodbye were delivered.
    fn goodbye_from(&mut self, node: usize) {
        let other = 1 - node;
        while self.deliver(other) {}
        let mut out = Vec::new();
        self.nodes[other].peer_disconnected(
            self.now,
            node as u8,
            ConnState::NetworkFailure,
            "the peer said goodbye",
            &mut out,
        );
        self.route(other, out);
        self.links = [VecDeque::new(), VecDeque::new()];
        while self.run_local(other) {}
    }

    /// B departs gracefully and completely: disconnected by the administrator, its metadata
    /// written, its goodbye received by A.
    fn depart_b(&mut self) {
        self.admin_disconnect(B);
        while self.run_local(B) {}
        self.goodbye_from(B);
    }

    /// The administrator connects B again (`tandem connect`); the handshake and any resync
    /// run to their end.
    fn rejoin_b(&mut self) {
        let mut out = Vec::new();
        self.nodes[B]
            .set_connect(self.now, PEER_OF_B, true, &mut out)
            .expect("known peer");
        self.route(B, out);
        self.connect();
        for _ in 0..20 {
            self.tick(A, TICK_INTERVAL);
            self.tick(B, TICK_INTERVAL);
            self.deliver_all();
        }
    }

    fn peer_disk_of(&self, node: usize) -> DiskState {
        self.nodes[node].status().peers[0].volumes[0].peer_disk
    }
}

#[test]
fn a_secondary_leaving_its_primary_outdates_itself_and_the_primary_keeps_quorum() {
    let mut pair = Pair::majority();
    assert!(pair.nodes[A].has_quorum());
    pair.admin_disconnect(B);
    assert_eq!(
        pair.disk(B),
        DiskState::Outdated,
        "B knows it will miss writes"
    );
    assert_eq!(
        pair.connection(B),
        ConnState::Disconnecting,
        "the goodbye waits for the metadata"
    );
    assert!(
        pair.disconnects.is_empty(),
        "nothing is said before the Outdated state is durable"
    );
    assert!(pair.links[A].is_empty(), "the Primary hears nothing yet");

    while pair.run_local(B) {}
    let persisted = pair.persisted[B].as_ref().expect("B wrote its metadata");
    assert!(
        !persisted.was_up_to_date() && persisted.consistent(),
        "durably Outdated: {persisted:?}"
    );
    assert_eq!(pair.disconnects, vec![(B, ConnState::StandAlone)]);
    assert!(
        pair.links[A].iter().any(|(kind, m)| {
            *kind == Kind::Control
                && matches!(
                    m,
                    PeerMessage::State { disks, .. } if disks == &vec![(0, DiskState::Outdated)]
                )
        }),
        "the Primary is told before the goodbye: {:?}",
        pair.links[A]
    );
    assert_eq!(pair.connection(B), ConnState::StandAlone);

    pair.goodbye_from(B);
    assert_eq!(
        pair.peer_disk_of(A),
        DiskState::Outdated,
        "the departed peer is known Outdated"
    );
    assert!(
        pair.nodes[A].has_quorum(),
        "last man standing: {}",
        pair.nodes[A].quorum_report()
    );
    pair.write(1, 0, 5, 4096);
    while pair.run_local(A) {}
    assert!(pair.is_complete(1), "the lone Primary goes on writing");
    assert!(pair.out_of_sync() > 0, "and records what B misses");
}

#[test]
fn a_peer_lost_without_a_goodbye_takes_quorum_with_it() {
    let mut pair = Pair::majority();
    pair.disconnect();
    pair.deliver_all();
    assert_eq!(pair.peer_disk_of(A), DiskState::DUnknown);
    assert!(
        !pair.nodes[A].has_quorum(),
        "an unknown peer may be Primary elsewhere"
    );
    assert_eq!(
        pair.disk(B),
        DiskState::UpToDate,
        "a lost link outdates nobody"
    );
    pair.write(1, 0, 5, 4096);
    while pair.run_local(A) {}
    assert!(!pair.is_complete(1), "held for want of quorum");
}

#[test]
fn the_departed_peer_comes_back_and_resyncs_to_up_to_date() {
    let mut pair = Pair::majority();
    pair.depart_b();
    pair.write(1, 0, 5, 4096);
    while pair.run_local(A) {}
    assert!(pair.is_complete(1));

    pair.rejoin_b();
    assert_eq!(pair.disk(B), DiskState::UpToDate, "resynced");
    assert_eq!(pair.peer_disk_of(A), DiskState::UpToDate);
    assert_eq!(pair.disks[A], pair.disks[B]);
    assert!(pair.nodes[A].has_quorum());
}

#[test]
fn without_quorum_or_fencing_a_disconnect_outdates_nobody() {
    let mut pair = Pair::new(Protocol::C);
    pair.admin_disconnect(B);
    assert_eq!(
        pair.disk(B),
        DiskState::UpToDate,
        "DRBD outdates only where quorum or fencing needs it"
    );
    assert_eq!(
        pair.disconnects,
        vec![(B, ConnState::StandAlone)],
        "at once"
    );
    assert_eq!(pair.connection(B), ConnState::StandAlone);
}

#[test]
fn a_primary_disconnecting_outdates_nobody() {
    let mut pair = Pair::majority();
    pair.admin_disconnect(A);
    assert_eq!(pair.disk(A), DiskState::UpToDate);
    assert_eq!(pair.disconnects, vec![(A, ConnState::StandAlone)]);
    assert!(
        !pair.nodes[A].has_quorum(),
        "the peer's state is unknown: quorum goes with it"
    );
}

#[test]
fn a_failed_metadata_write_ends_the_departure_without_claiming_outdated() {
    let mut pair = Pair::majority();
    pair.admin_disconnect(B);
    let Some(Action::PersistMeta { io, .. }) = pair.local[B].pop_front() else {
        panic!("B writes its metadata first: {:?}", pair.local[B])
    };
    let mut out = Vec::new();
    pair.nodes[B].local_done(pair.now, io, Err(IoError::Io), &mut out);
    pair.route(B, out);
    assert_eq!(
        pair.disconnects,
        vec![(B, ConnState::StandAlone)],
        "the departure ends"
    );
    assert!(
        !pair.links[A]
            .iter()
            .any(|(_, m)| matches!(m, PeerMessage::State { .. })),
        "no Outdated claim that is not durable: {:?}",
        pair.links[A]
    );
    pair.goodbye_from(B);
    assert_eq!(pair.peer_disk_of(A), DiskState::DUnknown);
    assert!(!pair.nodes[A].has_quorum());
}

#[test]
fn a_departure_whose_metadata_never_finishes_ends_after_the_bound_without_the_claim() {
    let mut pair = Pair::majority();
    pair.admin_disconnect(B);
    pair.local[B].clear();
    pair.tick(B, TICK_INTERVAL);
    assert!(pair.disconnects.is_empty(), "still waiting");
    pair.tick(B, LEAVE_PERSIST_MAX);
    assert_eq!(pair.disconnects, vec![(B, ConnState::StandAlone)]);
    assert!(!pair.links[A].iter().any(|(_, m)| matches!(
        m,
        PeerMessage::State { disks, .. } if disks.iter().any(|(_, d)| *d == DiskState::Outdated)
    )));
}

/// What the Primary knows of a departed peer lasts only until the peer reconnects: back
/// UpToDate and then lost without a word, it is unknown again, and quorum goes with it.
#[test]
fn a_departed_peer_that_returned_and_was_lost_again_is_unknown() {
    let mut pair = Pair::majority();
    pair.depart_b();
    assert!(pair.nodes[A].has_quorum());
    // B comes back (unknown until its handshake says otherwise), then is lost without a word.
    pair.rejoin_b();
    assert_eq!(pair.peer_disk_of(A), DiskState::UpToDate);
    pair.disconnect();
    pair.deliver_all();
    assert_eq!(
        pair.peer_disk_of(A),
        DiskState::DUnknown,
        "an UpToDate peer lost without a goodbye is unknown"
    );
    assert!(!pair.nodes[A].has_quorum());
}

/// A promotion that races a connect: B sent its identifiers as a Secondary and waits for A's.
/// Promoting B now could make a Primary the target of the resync the handshake decides
/// (found by the simulator's quorum mode: a new Primary's writes overwritten by resync
/// replies from the returning old Primary). It is refused until the handshake is done.
#[test]
fn promotion_waits_for_a_handshake_under_way() {
    let mut pair = Pair::unconnected([engine(0, 1, Protocol::C), engine(1, 0, Protocol::C)]);
    let mut out = Vec::new();
    pair.nodes[B].peer_connected(pair.now, PEER_OF_B, &mut out);
    pair.route(B, out);
    let mut out = Vec::new();
    let refused = pair.nodes[B].promote(Promotion::Normal, &mut out);
    assert!(
        matches!(refused, Err(StateError::SyncInProgress { .. })),
        "{refused:?}"
    );
    assert_eq!(pair.nodes[B].role(), Role::Secondary);
    let mut out = Vec::new();
    pair.nodes[A].peer_connected(pair.now, PEER_OF_A, &mut out);
    pair.route(A, out);
    pair.deliver_all();
    let mut out = Vec::new();
    pair.nodes[B]
        .promote(Promotion::Normal, &mut out)
        .expect("promotion once the handshake is done");
    pair.route(B, out);
    assert_eq!(pair.nodes[B].role(), Role::Primary);
}

/// `disconnect` then `connect` at once (the simulator's administrator cycles links so): the
/// departure still outdates B durably, and the link is retried afterwards, not left
/// StandAlone; the handshake then resyncs B.
#[test]
fn a_connect_during_the_departure_reconnects_once_it_is_done() {
    let mut pair = Pair::majority();
    pair.admin_disconnect(B);
    let mut out = Vec::new();
    pair.nodes[B]
        .set_connect(pair.now, PEER_OF_B, true, &mut out)
        .expect("known peer");
    pair.route(B, out);
    assert_eq!(pair.connection(B), ConnState::Disconnecting);
    while pair.run_local(B) {}
    assert_eq!(
        pair.connection(B),
        ConnState::Connecting,
        "retried, not StandAlone"
    );
    assert!(pair.nodes[B].wants_connection(PEER_OF_B));
    pair.goodbye_from(B);
    pair.rejoin_b();
    assert_eq!(pair.disk(B), DiskState::UpToDate);
}

/// A Primary that loses quorum forgets that an absent peer departed Outdated: the peer may
/// since have resynced from the partition that has quorum now. Here A keeps quorum alone
/// after B's departure, then a stricter rule (2 nodes) takes it away: B counts as unknown
/// from then on, even when the rule is relaxed again.
#[test]
fn losing_quorum_forgets_what_was_known_of_departed_peers() {
    let mut pair = Pair::majority();
    pair.depart_b();
    assert!(pair.nodes[A].has_quorum());
    assert_eq!(pair.nodes[A].quorum_left_out(), 1);
    for rule in [QuorumRule::Nodes(2), QuorumRule::Majority] {
        let mut out = Vec::new();
        pair.nodes[A].set_quorum(
            pair.now,
            QuorumConfig {
                rule,
                ..QuorumConfig::default()
            },
            &mut out,
        );
        pair.route(A, out);
    }
    assert_eq!(
        pair.peer_disk_of(A),
        DiskState::DUnknown,
        "forgotten at the loss"
    );
    assert!(!pair.nodes[A].has_quorum(), "B may be anywhere now");
}

/// Whether `actions` send a handshake round's identifiers.
fn sends_handshake(actions: &[Action<Vec<u8>>]) -> bool {
    actions.iter().any(|a| {
        matches!(
            a,
            Action::SendOnData { message: PeerMessage::SyncUuids(m), .. }
                if m.purpose == UuidsPurpose::Handshake
        )
    })
}

/// DRBD's `MDF_PEER_OUTDATED`: the Primary records the departure in its metadata, and after a
/// restart (now Secondary, alone) it still knows the peer cannot be promoted, so it has
/// quorum and can be promoted again. Without the record it would have 1 of 2 votes.
#[test]
fn a_restarted_node_remembers_a_departed_peer_and_keeps_quorum_alone() {
    let mut pair = Pair::majority();
    pair.depart_b();
    while pair.run_local(A) {}
    let record = pair.persisted[A].clone().expect("A wrote its metadata");
    let b = NodeId::new(1).expect("node id");
    assert!(
        record.departed.contains(b),
        "the departure is on disk: {record:?}"
    );
    let config = meta::LayoutConfig::new(
        meta::Placement::External {
            metadata_bytes: 1 << 20,
        },
        VOLUME_BYTES,
        1,
    );
    let mut superblock = meta::Superblock::new(meta::Layout::compute(&config).expect("layout"), 0)
        .expect("superblock");
    superblock.peers[0].node_id = Some(1);
    record.apply_to(&mut superblock);
    assert_eq!(
        VolumeMeta::departed_in(&superblock),
        record.departed,
        "the superblock round-trips it"
    );

    let restart = |departed: NodeSet| {
        let volume = VolumeConfig {
            ids: record.ids.clone(),
            disk: VolumeMeta::attach_disk_state(record.consistent(), record.was_up_to_date()),
            departed,
            ..synced_volume()
        };
        let mut engine = engine_with(0, peer_config(1, Protocol::C), volume);
        let mut out = Vec::new();
        engine.set_quorum(
            Time(1),
            QuorumConfig {
                rule: QuorumRule::Majority,
                ..QuorumConfig::default()
            },
            &mut out,
        );
        engine.tick(Time(2), &mut out);
        engine
    };
    let mut restarted = restart(record.departed);
    assert_eq!(
        restarted.status().peers[0].volumes[0].peer_disk,
        DiskState::Outdated
    );
    assert!(
        restarted.has_quorum(),
        "last man standing after the restart: {}",
        restarted.quorum_report()
    );
    assert!(
        restarted
            .promote(Promotion::Normal, &mut Vec::new())
            .is_ok(),
        "and it can be promoted"
    );
    let forgetful = restart(NodeSet::EMPTY);
    assert!(
        !forgetful.has_quorum(),
        "without the record: an unknown peer may be Primary elsewhere"
    );
}

/// The record is removed durably before the handshake with the returning peer goes out
/// (only that handshake can make the peer UpToDate through this node); the peer's own
/// handshake, arriving meanwhile, is answered once ours is sent, and the resync runs.
#[test]
fn a_returning_departed_peer_is_unrecorded_before_the_handshake() {
    let mut pair = Pair::majority();
    pair.depart_b();
    while pair.run_local(A) {}
    pair.write(1, 0, 5, 4096);
    while pair.run_local(A) {}
    assert!(pair.is_complete(1));

    let mut out = Vec::new();
    pair.nodes[B]
        .set_connect(pair.now, PEER_OF_B, true, &mut out)
        .expect("known peer");
    pair.route(B, out);
    let mut out = Vec::new();
    pair.nodes[A].peer_connected(pair.now, PEER_OF_A, &mut out);
    assert!(
        !sends_handshake(&out),
        "A's handshake waits for its metadata: {out:?}"
    );
    let record = out.iter().find_map(|a| match a {
        Action::PersistMeta { meta, .. } => Some(meta.departed),
        _ => None,
    });
    assert_eq!(
        record,
        Some(NodeSet::EMPTY),
        "the write that removes the record"
    );
    pair.route(A, out);
    let mut out = Vec::new();
    pair.nodes[B].peer_connected(pair.now, PEER_OF_B, &mut out);
    assert!(sends_handshake(&out), "B has nothing recorded: {out:?}");
    pair.route(B, out);
    while pair.deliver(A) {}
    assert!(
        !pair.links[B]
            .iter()
            .any(|(_, m)| matches!(m, PeerMessage::SyncUuids(_))),
        "B's handshake is held, not answered"
    );

    while pair.run_local(A) {}
    assert!(pair.persisted[A]
        .as_ref()
        .is_some_and(|m| m.departed == NodeSet::EMPTY));
    assert!(
        pair.links[B].iter().any(
            |(_, m)| matches!(m, PeerMessage::SyncUuids(u) if u.purpose == UuidsPurpose::Handshake)
        ),
        "now it goes out"
    );
    for _ in 0..20 {
        pair.tick(A, TICK_INTERVAL);
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert_eq!(pair.disk(B), DiskState::UpToDate, "resynced");
    assert_eq!(pair.disks[A], pair.disks[B]);
    assert!(
        pair.disconnects.iter().all(|(node, _)| *node == B),
        "no protocol error: {:?}",
        pair.disconnects
    );
}
