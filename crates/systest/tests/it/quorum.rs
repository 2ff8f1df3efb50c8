//! Quorum with three nodes (issue 4): a Primary that still reaches a majority keeps writing;
//! one cut off from both peers stops completing writes — they wait (`suspend-io`) until
//! quorum returns, or fail (`io-error`) — and status says `quorum:no`; a node without quorum
//! cannot be promoted. Peers that leave gracefully (`down`) outdate themselves first, and a
//! Primary whose absent peers are all known Outdated keeps quorum alone (last man standing).

use std::sync::mpsc;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::nbd_client;

const ALICE: usize = 0;
const BOB: usize = 1;
const CAROL: usize = 2;
const STATE_DEADLINE: Duration = Duration::from_secs(15);

fn quorum_cluster(on_loss: &str) -> Cluster {
    let spec = Spec::three_nodes('C')
        .options_line("quorum majority;")
        .options_line(&format!("on-no-quorum {on_loss};"));
    let cluster = Cluster::with_primary(spec);
    assert!(cluster.has_quorum(ALICE));
    cluster
}

#[test]
fn a_primary_cut_off_from_both_peers_suspends_writes_until_quorum_returns() {
    let cluster = quorum_cluster("suspend-io");
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    cluster.kill(BOB);
    cluster.wait_until("alice notices bob is gone", STATE_DEADLINE, || {
        cluster.status(ALICE).connection_state("bob") != "Connected"
    });
    assert!(cluster.has_quorum(ALICE), "2 of 3 is a majority");
    assert_eq!(
        client.write(0, &[1; 4096]),
        0,
        "writes go on with a majority"
    );

    cluster.kill(CAROL);
    cluster.wait_until("alice loses quorum", STATE_DEADLINE, || {
        !cluster.has_quorum(ALICE)
    });
    let text = cluster.admin_ok(ALICE, &["status", RESOURCE]);
    assert!(text.contains("quorum:no"), "status: {text}");
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let errno = client.write(4096, &[2; 4096]);
        let _ = done_tx.send(errno);
        client
    });
    cluster.hold_for(
        "the write waits for quorum",
        Duration::from_millis(1500),
        || done_rx.try_recv().is_err(),
    );

    cluster.start_node(BOB);
    cluster.wait_until("alice regains quorum", STATE_DEADLINE, || {
        cluster.has_quorum(ALICE)
    });
    let errno = done_rx
        .recv_timeout(STATE_DEADLINE)
        .expect("the held write completed once quorum returned");
    assert_eq!(errno, 0);
    writer.join().expect("writer").disconnect();
}

#[test]
fn with_io_error_writes_fail_without_quorum_and_promotion_is_refused() {
    let cluster = quorum_cluster("io-error");
    cluster.kill(BOB);
    cluster.kill(CAROL);
    cluster.wait_until("alice loses quorum", STATE_DEADLINE, || {
        !cluster.has_quorum(ALICE)
    });
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    let errno = client.write(0, &[3; 4096]);
    assert_eq!(errno, 5, "a write without quorum fails with EIO");
    client.disconnect();

    // Carol, alone after a restart, has no quorum either and refuses to become Primary.
    cluster.start_node(CAROL);
    cluster.admin_ok(ALICE, &["disconnect", RESOURCE]);
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    let refused = cluster.admin(CAROL, &["primary", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("no quorum"),
        "carol: {stderr}"
    );
}

/// A Primary cut off from both peers holds a write (suspend-io) and its client keeps the
/// export open: `secondary` is refused, `secondary --force` fails the held write with EIO
/// (it is never acknowledged) and demotes, so the node can rejoin the majority as Secondary.
#[test]
fn secondary_force_fails_a_held_write_and_demotes_an_open_export() {
    let cluster = quorum_cluster("suspend-io");
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    cluster.kill(BOB);
    cluster.kill(CAROL);
    cluster.wait_until("alice loses quorum", STATE_DEADLINE, || {
        !cluster.has_quorum(ALICE)
    });
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let errno = client.write(4096, &[2; 4096]);
        let _ = done_tx.send(errno);
        client
    });
    cluster.hold_for(
        "the write waits for quorum",
        Duration::from_millis(1000),
        || done_rx.try_recv().is_err(),
    );

    let refused = cluster.admin(ALICE, &["secondary", RESOURCE]);
    assert!(
        !refused.status.success(),
        "a plain secondary is refused while the export is open"
    );
    assert!(
        done_rx.try_recv().is_err(),
        "and it did not release the held write"
    );
    cluster.admin_ok(ALICE, &["secondary", "--force", RESOURCE]);
    let errno = done_rx
        .recv_timeout(STATE_DEADLINE)
        .expect("the held write completed");
    assert_eq!(
        errno, 5,
        "the held write fails with EIO, never acknowledged"
    );
    assert_eq!(cluster.status(ALICE).role(), "Secondary");
    let mut client = writer.join().expect("writer");
    assert_ne!(
        client.write(0, &[3; 4096]),
        0,
        "a Secondary refuses the open client's next write"
    );
    client.disconnect();
}

/// DRBD's last man standing: bob leaves with `down`, carol's daemon is stopped (SIGTERM);
/// each outdates its own disk durably before saying goodbye, so alice knows neither can be
/// promoted and keeps quorum alone; carol's metadata on disk says Outdated, and a departed
/// node that comes back resyncs to UpToDate.
#[test]
fn peers_that_leave_gracefully_leave_a_lone_primary_with_quorum() {
    let cluster = quorum_cluster("suspend-io");
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    cluster.admin_ok(BOB, &["down", RESOURCE]);
    cluster.wait_disk(BOB, "Outdated", STATE_DEADLINE);
    cluster.stop(CAROL);
    for name in ["bob", "carol"] {
        cluster.wait_until(
            &format!("alice sees {name} gone, Outdated"),
            STATE_DEADLINE,
            || {
                let status = cluster.status(ALICE);
                status.connection_state(name) != "Connected" && status.peer_disk(name) == "Outdated"
            },
        );
    }
    assert!(
        cluster.has_quorum(ALICE),
        "every absent peer is known Outdated: {}",
        cluster.admin_ok(ALICE, &["status", RESOURCE])
    );
    assert_eq!(
        client.write(0, &[7; 4096]),
        0,
        "the lone Primary goes on writing"
    );
    let flags = cluster.dumped_flags(CAROL);
    assert!(
        flags.contains("consistent") && !flags.contains("was-up-to-date"),
        "carol's metadata says Outdated: {flags}"
    );

    cluster.admin_ok(BOB, &["up", RESOURCE]);
    cluster.wait_disk(BOB, "UpToDate", STATE_DEADLINE);
    cluster.wait_replication(ALICE, BOB, "Established", STATE_DEADLINE);
    client.disconnect();
}

/// The departures are in alice's metadata (DRBD's `MDF_PEER_OUTDATED`): stopped and started
/// again, alone, she still knows both peers cannot be promoted, has quorum and can be
/// promoted; a returning peer resyncs from her.
#[test]
fn a_lone_node_restarted_after_its_peers_departed_keeps_quorum() {
    let cluster = quorum_cluster("suspend-io");
    for peer in [BOB, CAROL] {
        cluster.admin_ok(peer, &["down", RESOURCE]);
        cluster.wait_disk(peer, "Outdated", STATE_DEADLINE);
    }
    cluster.wait_until(
        "alice sees both peers gone, Outdated",
        STATE_DEADLINE,
        || {
            let status = cluster.status(ALICE);
            ["bob", "carol"].iter().all(|name| {
                status.connection_state(name) != "Connected" && status.peer_disk(name) == "Outdated"
            })
        },
    );
    cluster.stop(ALICE);
    let dumped = cluster.dumped_metadata(ALICE);
    let recorded = dumped
        .lines()
        .filter(|line| line.starts_with("peer slot") && line.contains("flags outdated"))
        .count();
    assert_eq!(recorded, 2, "both departures are on disk:\n{dumped}");

    cluster.start_node(ALICE);
    cluster.wait_until(
        "restarted alice knows both peers Outdated and has quorum",
        STATE_DEADLINE,
        || {
            let status = cluster.status(ALICE);
            ["bob", "carol"]
                .iter()
                .all(|name| status.peer_disk(name) == "Outdated")
                && cluster.has_quorum(ALICE)
        },
    );
    cluster.admin_ok(ALICE, &["primary", RESOURCE]);
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    assert_eq!(client.write(0, &[9; 4096]), 0, "the lone Primary writes");

    cluster.admin_ok(BOB, &["up", RESOURCE]);
    cluster.wait_disk(BOB, "UpToDate", STATE_DEADLINE);
    cluster.wait_replication(ALICE, BOB, "Established", STATE_DEADLINE);
    client.disconnect();
}

/// A peer killed without a goodbye is unknown, not Outdated: it might be Primary in another
/// partition. One such peer puts every node back among the voters, so alice, having only
/// carol's graceful departure and bob's death behind her, has 1 of 3 and stops.
#[test]
fn one_peer_lost_without_a_goodbye_takes_last_man_standing_away() {
    let cluster = quorum_cluster("suspend-io");
    cluster.admin_ok(CAROL, &["down", RESOURCE]);
    cluster.wait_until("alice sees carol Outdated", STATE_DEADLINE, || {
        cluster.status(ALICE).peer_disk("carol") == "Outdated"
    });
    assert!(cluster.has_quorum(ALICE));
    cluster.kill(BOB);
    cluster.wait_until("alice loses quorum", STATE_DEADLINE, || {
        !cluster.has_quorum(ALICE)
    });
    assert_eq!(cluster.status(ALICE).peer_disk("bob"), "DUnknown");
}

/// A promotion counts only the peers that answer it: carol hangs (SIGSTOP: her sockets stay
/// open and bob, with a long ping-int, still counts her), the Primary crashes, and bob's
/// `primary` is refused after waiting for carol's answer; once carol runs again, it succeeds.
/// Without the confirmation bob would be promoted on the vote of a node that may lend it to
/// the old Primary instead.
#[test]
fn a_promotion_counts_only_peers_that_answer_it() {
    let spec = Spec::three_nodes('C')
        .options_line("quorum majority;")
        .options_line("on-no-quorum suspend-io;")
        .net_line_all("ping-int 120;");
    let cluster = Cluster::with_primary(spec);
    cluster.freeze(CAROL);
    cluster.kill(ALICE);
    cluster.wait_until("bob notices alice is gone", STATE_DEADLINE, || {
        cluster.status(BOB).connection_state("alice") != "Connected"
    });
    assert_eq!(
        cluster.status(BOB).connection_state("carol"),
        "Connected",
        "bob has not noticed that carol hangs"
    );
    assert!(cluster.has_quorum(BOB), "bob counts carol");
    let refused = cluster.admin(BOB, &["primary", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("confirming quorum"),
        "bob: {stderr}"
    );
    assert_eq!(cluster.status(BOB).role(), "Secondary");
    cluster.thaw(CAROL);
    cluster.admin_ok(BOB, &["primary", RESOURCE]);
    assert_eq!(cluster.status(BOB).role(), "Primary");
}

/// A Secondary that leaves only the Primary (`disconnect --peer`, its link to the other
/// Secondary stays) outdates itself; the Primary sees it gone and Outdated, does not
/// connect to it again while it stays StandAlone (here the Primary is the side that
/// initiates connections), and goes on writing; a `connect` brings it back resynced.
#[test]
fn a_secondary_leaving_only_the_primary_does_not_hold_its_writes() {
    let cluster = quorum_cluster("suspend-io");
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    cluster.admin_ok(CAROL, &["primary", RESOURCE]);
    cluster.admin_ok(ALICE, &["disconnect", "--peer", "carol", RESOURCE]);
    cluster.wait_disk(ALICE, "Outdated", STATE_DEADLINE);
    cluster.wait_until("carol sees alice gone, Outdated", STATE_DEADLINE, || {
        let status = cluster.status(CAROL);
        status.connection_state("alice") != "Connected" && status.peer_disk("alice") == "Outdated"
    });
    cluster.hold_for(
        "carol stays disconnected from the StandAlone alice",
        Duration::from_secs(3),
        || cluster.status(CAROL).connection_state("alice") != "Connected",
    );
    let mut client = nbd_client::open(&cluster.nbd_socket(CAROL), RESOURCE).expect("open");
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let errno = client.write(4096, &[2; 4096]);
        let _ = done_tx.send(errno);
        client
    });
    let errno = done_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the write after the departure completes");
    assert_eq!(errno, 0);
    let client = writer.join().expect("writer");

    cluster.admin_ok(ALICE, &["connect", "--peer", "carol", RESOURCE]);
    // carol, the initiator, retries after its connect-int (10 s).
    cluster.wait_disk(ALICE, "UpToDate", Duration::from_secs(40));
    cluster.wait_replication(CAROL, ALICE, "Established", STATE_DEADLINE);
    client.disconnect();
    cluster.wait_identical(CAROL, ALICE, STATE_DEADLINE);
}
