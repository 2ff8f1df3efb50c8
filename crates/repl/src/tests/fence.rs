//! Fencing (`engine/fence.rs`, drbd-semantics.md §1 `fencing`): a Primary that loses an
//! UpToDate peer asks for one `fence-peer` run; with `resource-and-stonith` its I/O is frozen
//! until the handler says the peer cannot be promoted (exit 3, 4, 5, 7) or the administrator
//! runs `resume-io`; promotion without a reachable peer waits for the handler.

use super::*;

const PEER_OF_A: u8 = 1;
const PEER_OF_B: u8 = 0;

impl Pair {
    /// Connected, in sync, A Primary, both with `policy` for their connection.
    fn fencing(policy: FencePolicy) -> Pair {
        let mut pair = Pair::new(Protocol::C);
        for (node, peer) in [(A, PEER_OF_A), (B, PEER_OF_B)] {
            let mut out = Vec::new();
            pair.nodes[node]
                .set_fencing(pair.now, peer, policy, &mut out)
                .expect("known peer");
            pair.route(node, out);
        }
        pair
    }

    fn fence_done(&mut self, node: usize, status: i32) {
        let peer = if node == A { PEER_OF_A } else { PEER_OF_B };
        let mut out = Vec::new();
        self.nodes[node].fence_peer_done(self.now, peer, status, &mut out);
        self.route(node, out);
        while self.run_local(node) {}
    }

    fn resume_io(&mut self, node: usize) -> Result<(), StateError> {
        let mut out = Vec::new();
        let result = self.nodes[node].resume_io(self.now, &mut out);
        self.route(node, out);
        while self.run_local(node) {}
        result
    }

    fn promote_node(&mut self, node: usize, promotion: Promotion) -> Result<(), StateError> {
        let mut out = Vec::new();
        let result = self.nodes[node].promote(promotion, &mut out);
        self.route(node, out);
        result
    }

    /// A becomes Secondary (B learns it), then the link is cut: two Secondaries apart.
    fn demote_a_and_disconnect(&mut self) {
        let mut out = Vec::new();
        self.nodes[A].demote(&mut out).expect("demote");
        self.route(A, out);
        self.deliver_all();
        self.disconnect();
    }

    fn peer_disk(&self, node: usize) -> DiskState {
        self.nodes[node].status().peers[0].volumes[0].peer_disk
    }

    /// A's write `request`, written locally but not yet acknowledged by B; then the link is
    /// cut and everything A can do alone is done.
    fn write_then_lose_peer(&mut self, request: RequestId) {
        self.write(request, 0, 7, 4096);
        self.run_local(A);
        assert!(!self.is_complete(request), "protocol C waits for B");
        self.disconnect();
        while self.run_local(A) {}
    }
}

#[test]
fn stonith_freezes_io_until_the_handler_says_the_peer_was_shot() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    assert_eq!(
        pair.fence_calls,
        vec![(A, PEER_OF_A)],
        "one fence-peer run against B"
    );
    assert!(
        !pair.is_complete(1),
        "the write B may lack is not acknowledged before B is fenced"
    );
    assert_eq!(pair.nodes[A].suspend_reasons(), vec!["fencing"]);
    assert!(pair.nodes[A].io_suspended());
    pair.write(2, 8192, 8, 4096);
    pair.flush(3);
    while pair.run_local(A) {}
    assert!(
        !pair.is_complete(2) && !pair.is_complete(3),
        "new writes and flushes wait too"
    );
    pair.fence_done(A, 7);
    assert!(
        pair.is_complete(1) && pair.is_complete(2) && pair.is_complete(3),
        "{:?}",
        pair.completed
    );
    assert!(!pair.nodes[A].io_suspended());
    assert_eq!(
        pair.peer_disk(A),
        DiskState::Outdated,
        "a fenced peer shows Outdated"
    );
    assert_eq!(pair.fence_calls.len(), 1);
}

/// DRBD's fence-peer exit codes: 3 (peer Inconsistent), 4 (outdated), 5 (unreachable), 7
/// (STONITHed) resume I/O; anything else (6: the peer is Primary, 1, a kill after the
/// timeout shown as 128 + 9, a handler that could not run, -1) keeps it frozen.
#[test]
fn exit_codes_decide_whether_io_resumes() {
    let cases: &[(i32, Option<DiskState>)] = &[
        (3, Some(DiskState::Inconsistent)),
        (4, Some(DiskState::Outdated)),
        (5, Some(DiskState::Outdated)),
        (7, Some(DiskState::Outdated)),
        (0, None),
        (1, None),
        (6, None),
        (137, None),
        (-1, None),
    ];
    for &(status, resumed_with) in cases {
        let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
        pair.write_then_lose_peer(1);
        pair.fence_done(A, status);
        match resumed_with {
            Some(disk) => {
                assert!(pair.is_complete(1), "status {status} resumes I/O");
                assert_eq!(pair.peer_disk(A), disk, "status {status}");
                assert_eq!(
                    pair.resume_io(A),
                    Err(StateError::NotSuspended),
                    "status {status}"
                );
            }
            None => {
                assert!(!pair.is_complete(1), "status {status} keeps I/O frozen");
                assert_eq!(pair.peer_disk(A), DiskState::DUnknown, "status {status}");
                assert_eq!(
                    pair.nodes[A].suspend_reasons(),
                    vec!["fencing"],
                    "status {status}"
                );
                pair.resume_io(A).expect("resume-io");
                assert!(
                    pair.is_complete(1),
                    "status {status}: resume-io releases the write"
                );
                assert_eq!(
                    pair.peer_disk(A),
                    DiskState::DUnknown,
                    "resume-io fences nobody"
                );
                pair.write(2, 8192, 8, 4096);
                while pair.run_local(A) {}
                assert!(
                    pair.is_complete(2),
                    "status {status}: new writes go on after resume-io"
                );
            }
        }
        assert_eq!(pair.fence_calls.len(), 1, "status {status}");
    }
}

#[test]
fn resume_io_while_the_handler_runs_releases_io_and_its_answer_still_counts() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    pair.resume_io(A).expect("resume-io");
    assert!(pair.is_complete(1));
    pair.fence_done(A, 4);
    assert_eq!(pair.peer_disk(A), DiskState::Outdated);
    assert!(!pair.nodes[A].io_suspended());
}

#[test]
fn resource_only_runs_the_handler_without_freezing() {
    let mut pair = Pair::fencing(FencePolicy::ResourceOnly);
    pair.write_then_lose_peer(1);
    assert_eq!(pair.fence_calls, vec![(A, PEER_OF_A)]);
    assert!(pair.is_complete(1), "resource-only does not hold I/O");
    assert!(!pair.nodes[A].io_suspended());
    pair.fence_done(A, 1);
    assert!(
        !pair.nodes[A].io_suspended(),
        "a failure does not freeze either"
    );
}

#[test]
fn no_fencing_without_the_policy_or_on_a_secondary() {
    let mut pair = Pair::fencing(FencePolicy::DontCare);
    pair.write_then_lose_peer(1);
    assert!(pair.fence_calls.is_empty());
    assert!(pair.is_complete(1));
    // B, the Secondary, lost its Primary: not its business to fence.
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.disconnect();
    assert!(!pair.fence_calls.iter().any(|(node, _)| *node == B));
}

#[test]
fn one_run_per_peer_and_a_reconnect_lifts_the_freeze() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    pair.connect();
    while pair.run_local(A) {}
    assert!(
        !pair.nodes[A].io_suspended(),
        "the peer is back: the handshake decides"
    );
    assert!(pair.is_complete(1));
    pair.disconnect();
    while pair.run_local(A) {}
    assert_eq!(
        pair.fence_calls.len(),
        1,
        "the run under way answers for the second loss too"
    );
    assert!(
        pair.nodes[A].io_suspended(),
        "the second loss freezes again"
    );
    assert!(pair.nodes[A].fencing_running(PEER_OF_A));
    pair.fence_done(A, 7);
    assert!(!pair.nodes[A].io_suspended());
    // The next loss after a reconnect asks again.
    pair.connect();
    pair.disconnect();
    assert_eq!(pair.fence_calls.len(), 2);
}

#[test]
fn a_late_answer_after_a_reconnect_is_ignored() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    pair.connect();
    pair.fence_done(A, 4);
    assert_eq!(
        pair.peer_disk(A),
        DiskState::UpToDate,
        "the connected peer says what its disk is"
    );
    assert!(!pair.nodes[A].fencing_running(PEER_OF_A));
}

#[test]
fn promotion_without_the_peer_waits_for_fence_peer() {
    let mut pair = Pair::fencing(FencePolicy::ResourceOnly);
    pair.demote_a_and_disconnect();
    assert!(
        pair.fence_calls.is_empty(),
        "Secondaries do not fence on loss"
    );
    assert!(matches!(
        pair.promote_node(B, Promotion::Normal),
        Err(StateError::FencingPeer { .. })
    ));
    assert_eq!(pair.fence_calls, vec![(B, PEER_OF_B)]);
    assert!(matches!(
        pair.promote_node(B, Promotion::Normal),
        Err(StateError::FencingPeer { .. })
    ));
    assert_eq!(
        pair.fence_calls.len(),
        1,
        "a second attempt does not start a second run"
    );
    pair.fence_done(B, 1);
    assert_eq!(
        pair.promote_node(B, Promotion::Normal),
        Err(StateError::PeerNotFenced {
            peer: "node0".into(),
            status: 1
        })
    );
    assert_eq!(pair.nodes[B].role(), Role::Secondary);
    // The next attempt asks again; this time the handler outdates the peer.
    assert!(matches!(
        pair.promote_node(B, Promotion::Normal),
        Err(StateError::FencingPeer { .. })
    ));
    assert_eq!(pair.fence_calls.len(), 2);
    pair.fence_done(B, 4);
    pair.promote_node(B, Promotion::Normal)
        .expect("the peer is fenced");
    assert_eq!(pair.nodes[B].role(), Role::Primary);
    assert_eq!(pair.peer_disk(B), DiskState::Outdated);
}

#[test]
fn forced_promotion_skips_fencing() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.demote_a_and_disconnect();
    pair.promote_node(B, Promotion::Forced).expect("--force");
    assert!(pair.fence_calls.is_empty());
    assert!(!pair.nodes[B].io_suspended());
}

#[test]
fn turning_stonith_off_releases_frozen_io() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    assert!(!pair.is_complete(1));
    let mut out = Vec::new();
    pair.nodes[A]
        .set_fencing(pair.now, PEER_OF_A, FencePolicy::ResourceOnly, &mut out)
        .expect("known peer");
    pair.route(A, out);
    while pair.run_local(A) {}
    assert!(pair.is_complete(1), "resource-only freezes nothing");
    assert!(
        pair.nodes[A].fencing_running(PEER_OF_A),
        "the run under way still answers"
    );
    assert_eq!(
        pair.nodes[A].fence_policy(PEER_OF_A),
        Some(FencePolicy::ResourceOnly)
    );
    assert_eq!(
        FencePolicy::ResourceAndStonith.to_string(),
        "resource-and-stonith"
    );
}

#[test]
fn a_primary_s_failed_fence_is_forgotten_on_demotion() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    pair.fence_done(A, 1);
    pair.resume_io(A).expect("resume-io");
    let mut out = Vec::new();
    pair.nodes[A].demote(&mut out).expect("demote");
    pair.route(A, out);
    while pair.run_local(A) {}
    assert!(
        matches!(
            pair.promote_node(A, Promotion::Normal),
            Err(StateError::FencingPeer { .. })
        ),
        "the next promotion asks again"
    );
    assert_eq!(pair.fence_calls.len(), 2);
    pair.fence_done(A, 5);
    pair.promote_node(A, Promotion::Normal)
        .expect("the peer is unreachable: taken as outdated");
    assert!(!pair.nodes[A].io_suspended());
}

#[test]
fn a_secondary_told_the_peer_is_primary_outdates_itself() {
    let mut pair = Pair::fencing(FencePolicy::ResourceOnly);
    pair.demote_a_and_disconnect();
    assert!(matches!(
        pair.promote_node(B, Promotion::Normal),
        Err(StateError::FencingPeer { .. })
    ));
    let meta_before = pair.nodes[B].meta(0).expect("volume 0");
    assert_eq!(meta_before.disk, DiskState::UpToDate);
    pair.fence_done(B, FENCE_PEER_IS_PRIMARY);
    assert_eq!(
        pair.nodes[B].meta(0).expect("volume 0").disk,
        DiskState::Outdated,
        "and persisted"
    );
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Outdated);
    assert_eq!(
        pair.promote_node(B, Promotion::Normal),
        Err(StateError::NotUpToDate(DiskState::Outdated)),
        "Outdated now"
    );
    assert_eq!(pair.nodes[B].role(), Role::Secondary);
    pair.promote_node(B, Promotion::Forced)
        .expect("--force promotes anyway, as DRBD does");
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::UpToDate);
}

#[test]
fn a_primary_told_the_peer_is_primary_keeps_its_disk_and_stays_frozen() {
    let mut pair = Pair::fencing(FencePolicy::ResourceAndStonith);
    pair.write_then_lose_peer(1);
    pair.fence_done(A, FENCE_PEER_IS_PRIMARY);
    assert!(!pair.is_complete(1), "a failure: I/O stays frozen");
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::UpToDate);
    assert_eq!(pair.nodes[A].suspend_reasons(), vec!["fencing"]);
}
