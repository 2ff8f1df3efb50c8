//! Pull-ahead (`engine/ahead.rs`): a congested protocol-A peer is durably marked possibly
//! stale, then left behind (its writes marked, not shipped), then caught up by a bitmap
//! resync once the link drained; a resync after an episode is never interrupted by another
//! one (LINBIT/drbd issue 46), and episodes close together back off.

use super::*;

const KIB4: usize = 4096;
/// Two unconfirmed 4 KiB writes fit; a third is congestion.
const FILL_BYTES: u64 = 2 * KIB4 as u64;

fn congested_config(node_id: u8, policy: CongestionPolicy) -> PeerConfig {
    PeerConfig {
        congestion: Some(Congestion {
            policy,
            fill_bytes: FILL_BYTES,
            extents: 0,
        }),
        ..peer_config(node_id, Protocol::A)
    }
}

impl Pair {
    /// Protocol A with `on-congestion pull-ahead` (`congestion-fill` 8 KiB), A Primary.
    fn pull_ahead() -> Pair {
        let nodes = [
            engine_with(
                0,
                congested_config(1, CongestionPolicy::PullAhead),
                synced_volume(),
            ),
            engine_with(
                1,
                congested_config(0, CongestionPolicy::PullAhead),
                synced_volume(),
            ),
        ];
        let mut pair = Pair::unconnected(nodes);
        pair.connect();
        let mut out = Vec::new();
        pair.nodes[A]
            .promote(Promotion::Normal, &mut out)
            .expect("promote");
        pair.route(A, out);
        pair.deliver_all();
        pair
    }

    /// Writes `count` 4 KiB blocks from `first` (request ids from `first`), A's local I/O
    /// only: B hears nothing, so they stay unconfirmed.
    fn write_unconfirmed(&mut self, first: u64, count: u64) {
        for i in first..first + count {
            self.write(i, i * KIB4 as u64, i as u8, KIB4);
            while self.run_local(A) {}
        }
    }

    /// Drives A into Ahead: two writes fill the link, the third is congestion and asks B
    /// for the mark, which B persists and acknowledges.
    fn drive_ahead(&mut self) {
        self.write_unconfirmed(1, 3);
        assert_eq!(
            self.replication(A),
            ReplState::Established,
            "marking first, still shipping"
        );
        self.deliver_all();
        assert!(
            self.nodes[B].status().volumes[0].possibly_stale,
            "B is marked before anything skips it"
        );
        assert!(
            self.persisted[B].as_ref().is_some_and(|m| m.possibly_stale),
            "durably"
        );
        self.write_unconfirmed(4, 1);
        assert_eq!(self.replication(A), ReplState::Ahead);
    }

    fn b_disk(&self) -> &[u8] {
        &self.disks[B]
    }
}

#[test]
fn a_congested_peer_is_marked_then_left_behind_then_resynced() {
    let mut pair = Pair::pull_ahead();
    pair.drive_ahead();
    assert!(
        pair.is_complete(4),
        "an Ahead write completes without the peer"
    );
    assert_eq!(pair.b_disk()[4 * KIB4], 0, "and is not shipped");
    assert!(
        pair.out_of_sync() >= KIB4 as u64,
        "it is marked out of sync instead"
    );
    // The link drains; Ahead lasts its dwell time, then a handshake starts the resync.
    pair.confirm_all();
    assert_eq!(
        pair.replication(A),
        ReplState::Ahead,
        "not before the dwell time"
    );
    assert_eq!(
        pair.replication(B),
        ReplState::Behind,
        "the peer knows it is left behind"
    );
    pair.tick(A, AHEAD_DWELL_MIN);
    pair.deliver_all();
    for _ in 0..5 {
        pair.tick(A, TICK_INTERVAL);
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert_eq!(pair.out_of_sync(), 0, "the resync moved what was skipped");
    assert_eq!(pair.disks[A], pair.disks[B], "replicas identical");
    assert_eq!(pair.replication(A), ReplState::Established);
    assert_eq!(
        pair.replication(B),
        ReplState::Established,
        "no longer Behind"
    );
    pair.confirm_all();
    pair.tick(A, TICK_INTERVAL);
    pair.deliver_all();
    assert!(
        !pair.nodes[B].status().volumes[0].possibly_stale,
        "caught up: the mark is cleared"
    );
}

#[test]
fn a_behind_peer_refuses_promotion_without_force() {
    let mut pair = Pair::pull_ahead();
    pair.drive_ahead();
    pair.disconnect();
    assert_ne!(
        pair.replication(B),
        ReplState::Behind,
        "a lost connection is not Behind"
    );
    let mut out = Vec::new();
    let err = pair.nodes[B]
        .promote(Promotion::Normal, &mut out)
        .expect_err("a Behind node is possibly stale");
    assert!(matches!(err, StateError::PossiblyStale), "{err:?}");
}

#[test]
fn no_new_episode_during_the_resync_nor_before_the_cool_down() {
    let mut pair = Pair::pull_ahead();
    pair.drive_ahead();
    pair.confirm_all();
    pair.tick(A, AHEAD_DWELL_MIN);
    // The resync has started; congestion now must not interrupt it.
    pair.write_unconfirmed(10, 4);
    assert_ne!(
        pair.replication(A),
        ReplState::Ahead,
        "a resync after an episode runs to its end"
    );
    pair.deliver_all();
    for _ in 0..5 {
        pair.tick(A, TICK_INTERVAL);
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert_eq!(pair.replication(A), ReplState::Established);
    // Just after the resync: still cooling down, so congestion ships (and backs up) instead.
    pair.write_unconfirmed(20, 4);
    assert_eq!(
        pair.replication(A),
        ReplState::Established,
        "cool-down after an episode"
    );
    assert!(
        pair.b_disk()[20 * KIB4] == 0 && pair.links[B].len() >= 4,
        "the writes were shipped"
    );
    pair.deliver_all();
    pair.confirm_all();
    // Well after the cool-down, congestion starts a new episode again.
    pair.tick(A, COOL_DOWN_MAX);
    pair.deliver_all();
    pair.write_unconfirmed(30, 3);
    pair.deliver_all();
    pair.write_unconfirmed(33, 1);
    assert_eq!(
        pair.replication(A),
        ReplState::Ahead,
        "a later congestion is a new episode"
    );
    assert_eq!(
        pair.disks[A][..20 * KIB4],
        pair.disks[B][..20 * KIB4],
        "earlier writes all arrived"
    );
}

#[test]
fn on_congestion_disconnect_drops_the_link_and_the_reconnect_resyncs() {
    let nodes = [
        engine_with(
            0,
            congested_config(1, CongestionPolicy::Disconnect),
            synced_volume(),
        ),
        engine_with(
            1,
            congested_config(0, CongestionPolicy::Disconnect),
            synced_volume(),
        ),
    ];
    let mut pair = Pair::unconnected(nodes);
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("promote");
    pair.route(A, out);
    pair.deliver_all();
    pair.write_unconfirmed(1, 3);
    assert!(
        pair.disconnects.iter().any(|&(node, _)| node == A),
        "congestion dropped the link"
    );
    assert!(
        pair.is_complete(3),
        "the write itself completes, marked for the peer"
    );
    pair.links = [VecDeque::new(), VecDeque::new()];
    let mut out = Vec::new();
    pair.nodes[B].peer_disconnected(
        pair.now,
        0,
        ConnState::NetworkFailure,
        "peer closed",
        &mut out,
    );
    pair.route(B, out);
    pair.connect();
    for _ in 0..5 {
        pair.tick(A, TICK_INTERVAL);
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert_eq!(
        pair.disks[A], pair.disks[B],
        "the reconnect resynced the marked blocks"
    );
}

#[test]
fn protocol_c_never_pulls_ahead() {
    let config = |node| PeerConfig {
        protocol: Protocol::C,
        ..congested_config(node, CongestionPolicy::PullAhead)
    };
    let mut pair = Pair::unconnected([
        engine_with(0, config(1), synced_volume()),
        engine_with(1, config(0), synced_volume()),
    ]);
    pair.connect();
    let mut out = Vec::new();
    pair.nodes[A]
        .promote(Promotion::Normal, &mut out)
        .expect("promote");
    pair.route(A, out);
    pair.deliver_all();
    pair.write_unconfirmed(1, 5);
    assert_eq!(pair.replication(A), ReplState::Established);
    assert!(
        !(1..=5).any(|r| pair.is_complete(r)),
        "protocol C waits for the peer"
    );
    pair.deliver_all();
    assert!((1..=5).all(|r| pair.is_complete(r)));
}
