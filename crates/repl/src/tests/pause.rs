//! Paused resyncs (`engine/pause.rs`): `pause-sync`/`resume-sync` on either side and the
//! `resync-after` dependency hold a resync without losing anything, show PausedSyncS/T with
//! the reason on both sides, and the resync finishes identical once resumed.

use super::*;

const BLOCK: u64 = 4096;
/// Slow enough that a resync of a few blocks takes several ticks.
const RATE_KIB_PER_S: u32 = 40;

impl Pair {
    fn pause(&mut self, node: usize, paused: bool) {
        let mut out = Vec::new();
        self.nodes[node]
            .pause_sync(self.now, None, paused, &mut out)
            .expect("pause-sync");
        self.route(node, out);
        self.deliver_all();
    }

    fn depend(&mut self, node: usize, paused: bool) {
        let mut out = Vec::new();
        self.nodes[node].set_sync_dependency(self.now, 0, paused, &mut out);
        self.route(node, out);
        self.deliver_all();
    }

    fn suspended(&self, node: usize) -> SyncPause {
        self.nodes[node].status().peers[0].volumes[0].resync_suspended
    }

    /// A disconnected Primary A with `blocks` dirty blocks for B, reconnected: B becomes the
    /// target of a bitmap resync paced at about one block per tick.
    fn dirty_reconnected(blocks: u64) -> Pair {
        let mut pair = Pair::split(RATE_KIB_PER_S);
        for block in 0..blocks {
            pair.write_alone(A, block + 1, block * 2 * BLOCK, 7, BLOCK);
        }
        pair.connect();
        pair.deliver_all();
        pair
    }

    /// Ticks both nodes `ticks` times, delivering everything between.
    fn run_ticks(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.tick_both();
            self.deliver_all();
        }
    }
}

fn user(user: bool, peer: bool) -> SyncPause {
    SyncPause {
        user,
        peer,
        dependency: false,
    }
}

#[test]
fn pause_sync_on_the_target_holds_the_resync_and_resume_finishes_it() {
    let mut pair = Pair::dirty_reconnected(8);
    pair.pause(B, true);
    let before = pair.oos(B);
    pair.run_ticks(10);
    assert_eq!(pair.replication(B), ReplState::PausedSyncT);
    assert_eq!(pair.replication(A), ReplState::PausedSyncS);
    assert_eq!(pair.suspended(B), user(true, false));
    assert_eq!(pair.suspended(A), user(false, true));
    assert_eq!(pair.oos(B), before, "nothing moved while paused");
    pair.pause(B, false);
    pair.sync_until_quiet(200);
    pair.assert_in_sync();
    assert_eq!(pair.suspended(A), SyncPause::default());
}

#[test]
fn pause_sync_on_the_source_holds_the_target_too() {
    let mut pair = Pair::dirty_reconnected(8);
    pair.pause(A, true);
    let before = pair.oos(B);
    pair.run_ticks(10);
    assert_eq!(pair.replication(B), ReplState::PausedSyncT);
    assert_eq!(pair.suspended(B).describe(), "peer");
    assert_eq!(pair.suspended(A).describe(), "user");
    assert_eq!(pair.oos(B), before);
    pair.pause(A, false);
    pair.sync_until_quiet(200);
    pair.assert_in_sync();
}

#[test]
fn a_pause_set_before_the_connect_holds_the_resync_from_its_start() {
    let mut pair = Pair::split(RATE_KIB_PER_S);
    pair.write_alone(A, 1, 0, 9, 4 * BLOCK);
    pair.pause(A, true);
    pair.connect();
    pair.deliver_all();
    pair.run_ticks(5);
    assert_eq!(pair.replication(B), ReplState::PausedSyncT);
    assert_eq!(pair.oos(B), 4 * BLOCK);
    pair.pause(A, false);
    pair.sync_until_quiet(200);
    pair.assert_in_sync();
}

#[test]
fn the_resync_after_dependency_pauses_and_releases() {
    let mut pair = Pair::dirty_reconnected(4);
    assert!(
        pair.nodes[A].resync_running(0),
        "A's volume 0 is a sync source"
    );
    pair.depend(B, true);
    pair.run_ticks(5);
    assert_eq!(pair.replication(B), ReplState::PausedSyncT);
    assert_eq!(pair.suspended(B).describe(), "dependency");
    assert_eq!(pair.suspended(A).describe(), "peer");
    pair.depend(B, false);
    pair.sync_until_quiet(200);
    pair.assert_in_sync();
    assert!(!pair.nodes[A].resync_running(0));
}

#[test]
fn requests_in_flight_when_paused_are_still_answered_and_written() {
    let mut pair = Pair::dirty_reconnected(16);
    // One tick issues requests; pause before they are delivered.
    pair.tick_both();
    pair.pause(B, true);
    pair.run_ticks(5);
    let moved = pair.resync_sent_bytes[A];
    assert!(
        moved > 0,
        "the requests issued before the pause were answered"
    );
    for offset in (0..32 * BLOCK).step_by(2 * BLOCK as usize) {
        let (a, b) = (
            &pair.disks[A][offset as usize],
            &pair.disks[B][offset as usize],
        );
        assert!(
            *b == 0 || a == b,
            "a block at {offset} holds neither old nor new data"
        );
    }
    pair.run_ticks(5);
    assert_eq!(
        pair.resync_sent_bytes[A], moved,
        "no new requests while paused"
    );
    pair.pause(B, false);
    pair.sync_until_quiet(200);
    pair.assert_in_sync();
}

#[test]
fn a_pause_outlives_a_reconnect_but_the_peers_reason_does_not() {
    let mut pair = Pair::dirty_reconnected(4);
    pair.pause(A, true);
    pair.disconnect();
    assert_eq!(
        pair.suspended(B),
        SyncPause::default(),
        "the peer's reason is forgotten"
    );
    assert_eq!(pair.suspended(A), user(true, false));
    pair.connect();
    pair.deliver_all();
    pair.run_ticks(3);
    assert_eq!(pair.suspended(B).describe(), "peer");
    assert_eq!(pair.replication(B), ReplState::PausedSyncT);
}

#[test]
fn pause_sync_names_an_unknown_peer() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    assert_eq!(
        pair.nodes[A].pause_sync(pair.now, Some(9), true, &mut out),
        Err(StateError::NoSuchPeer(9))
    );
    assert!(out.is_empty());
}

#[test]
fn describe_lists_every_reason() {
    assert_eq!(SyncPause::default().describe(), "no");
    let all = SyncPause {
        user: true,
        peer: true,
        dependency: true,
    };
    assert_eq!(all.describe(), "user,peer,dependency");
}
