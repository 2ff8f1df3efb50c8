//! Diskless nodes (issue 3, issue 4 items 3 and 5): a `disk none;` tiebreaker connects
//! without metadata or backing file, shows `disk:Diskless` (and `peer-disk:Diskless` on its
//! peers), and counts toward quorum: with two data nodes and the tiebreaker, the Primary keeps
//! quorum when the other data node dies, and loses it only when cut off alone.

use std::time::Duration;

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::nbd_client;

const ALICE: usize = 0;
const BOB: usize = 1;
const CAROL: usize = 2;
const STATE_DEADLINE: Duration = Duration::from_secs(15);

fn has_quorum(cluster: &Cluster, index: usize) -> bool {
    cluster.status_json(index)["resources"][0]["devices"][0]["quorum"].as_bool().unwrap_or(false)
}

/// drbd-semantics.md §5 `configs/r3.res` and §6 "diskless tiebreaker since 9.0.18".
#[test]
fn a_diskless_tiebreaker_keeps_quorum_for_the_primary_and_stores_nothing() {
    let spec = Spec::three_nodes('C').diskless_node(CAROL).options_line("quorum majority;").options_line("on-no-quorum io-error;");
    let cluster = Cluster::with_primary(spec);
    let carol = cluster.admin_ok(CAROL, &["status", RESOURCE]);
    assert!(carol.contains("disk:Diskless"), "carol's status: {carol}");
    let alice = cluster.admin_ok(ALICE, &["status", RESOURCE]);
    assert!(alice.lines().any(|line| line.contains("peer-disk:Diskless")), "alice sees carol diskless: {alice}");
    assert!(!cluster.log(CAROL).contains("not supported"), "carol started diskless:\n{}", cluster.log(CAROL));
    let untouched = std::fs::read(cluster.disk(CAROL)).expect("carol's unused file").iter().all(|&b| b == 0);
    assert!(untouched, "nothing is stored on the tiebreaker");

    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    assert_eq!(client.write(0, &[1; 4096]), 0);
    cluster.kill(BOB);
    cluster.wait_until("alice notices bob is gone", STATE_DEADLINE, || cluster.status(ALICE).connection_state("bob") != "Connected");
    assert!(has_quorum(&cluster, ALICE), "alice and the tiebreaker are 2 of 3");
    assert_eq!(client.write(4096, &[2; 4096]), 0, "writes go on with the tiebreaker's vote");
    assert_eq!(client.read(4096, 4096), vec![2; 4096]);

    cluster.kill(CAROL);
    cluster.wait_until("alice, alone, loses quorum", STATE_DEADLINE, || !has_quorum(&cluster, ALICE));
    assert_eq!(client.write(8192, &[3; 4096]), 5, "a write without quorum fails with EIO");
    let text = cluster.admin_ok(ALICE, &["status", RESOURCE]);
    assert!(text.contains("quorum:no"), "status: {text}");
    client.disconnect();
}

/// The data node cut off alone loses quorum; the other one keeps it through the tiebreaker
/// and may take over.
#[test]
fn the_data_node_left_with_the_tiebreaker_keeps_quorum_and_may_be_promoted() {
    let spec = Spec::three_nodes('C').diskless_node(CAROL).options_line("quorum majority;").options_line("on-no-quorum io-error;");
    let cluster = Cluster::with_primary(spec);
    cluster.kill(ALICE);
    cluster.wait_until("bob notices alice is gone", STATE_DEADLINE, || cluster.status(BOB).connection_state("alice") != "Connected");
    assert!(has_quorum(&cluster, BOB), "bob and the tiebreaker are 2 of 3");
    cluster.admin_ok(BOB, &["primary", RESOURCE]);
    cluster.wait_until("carol sees bob Primary", STATE_DEADLINE, || cluster.status(CAROL).peer_role("bob") == "Primary");
    let mut client = nbd_client::open(&cluster.nbd_socket(BOB), RESOURCE).expect("open on bob");
    assert_eq!(client.write(0, &[4; 4096]), 0, "bob writes with the tiebreaker's vote");
    client.disconnect();
    let refused = cluster.admin(CAROL, &["primary", "--force", RESOURCE]);
    assert!(!refused.status.success(), "a diskless node has nothing to serve");
}
