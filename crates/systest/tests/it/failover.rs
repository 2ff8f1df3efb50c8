//! Failover and three nodes (issue 4): when the Primary dies a peer is promoted with every
//! acknowledged write; the old Primary comes back as Secondary and resyncs from the new one;
//! with three nodes every write reaches both peers and a returning node catches up.

use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::nbd_client;
use crate::tools::{fresh_seed, Rng};

const ALICE: usize = 0;
const BOB: usize = 1;
const CAROL: usize = 2;
const STATE_DEADLINE: Duration = Duration::from_secs(20);
const SYNC_DEADLINE: Duration = Duration::from_secs(60);
const MIB: u64 = 1 << 20;

/// Writes `count` seeded 64 KiB blocks from `offset` through `index`'s export; returns them.
fn write_blocks(
    cluster: &Cluster,
    index: usize,
    rng: &mut Rng,
    offset: u64,
    count: u64,
) -> Vec<(u64, Vec<u8>)> {
    let mut client =
        nbd_client::open(&cluster.nbd_socket(index), RESOURCE).expect("open the export");
    let writes: Vec<(u64, Vec<u8>)> = (0..count)
        .map(|i| (offset + i * MIB, rng.bytes(65536)))
        .collect();
    for (at, data) in &writes {
        assert_eq!(client.write(*at, data), 0, "write at {at}");
    }
    client.disconnect();
    cluster.wait_until("the export is closed", STATE_DEADLINE, || {
        !cluster.status(index).open()
    });
    writes
}

fn read_back(cluster: &Cluster, index: usize, writes: &[(u64, Vec<u8>)]) {
    let mut client =
        nbd_client::open(&cluster.nbd_socket(index), RESOURCE).expect("open the export");
    for (at, data) in writes {
        let length = u32::try_from(data.len()).expect("small");
        assert!(
            client.read(*at, length) == *data,
            "{} lacks the write at {at}",
            cluster.name(index)
        );
    }
    client.disconnect();
}

fn wait_all_up_to_date(cluster: &Cluster) {
    cluster.wait_until(
        "every node and peer is UpToDate and Established",
        SYNC_DEADLINE,
        || cluster.all_up_to_date(),
    );
}

#[test]
fn a_peer_takes_over_with_every_acknowledged_write_and_the_old_primary_resyncs_from_it() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let mut rng = Rng::new(fresh_seed());
    let before = write_blocks(&cluster, ALICE, &mut rng, 0, 8);
    cluster.kill(ALICE);
    cluster.wait_until("bob sees alice gone", STATE_DEADLINE, || {
        cluster.status(BOB).connection_state(NODE_NAMES[ALICE]) != "Connected"
    });
    cluster.admin_ok(BOB, &["primary", RESOURCE]);
    assert_eq!(cluster.status(BOB).role(), "Primary");
    read_back(&cluster, BOB, &before);
    write_blocks(&cluster, BOB, &mut rng, 16 * MIB, 4);
    cluster.start_node(ALICE);
    cluster.wait_until("alice is back as Secondary", STATE_DEADLINE, || {
        cluster.status(ALICE).role() == "Secondary"
    });
    wait_all_up_to_date(&cluster);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
}

/// Three nodes: every write reaches both Secondaries, and carol, stopped and restarted while
/// alice writes, catches up. (It used to end "unrelated data" between bob and carol now and
/// then, before the Secondaries followed the Primary's new generations: engine/rotate.rs.)
#[test]
fn three_nodes_replicate_every_write_and_a_returning_node_catches_up() {
    let cluster = Cluster::with_primary(Spec::three_nodes('C'));
    let mut rng = Rng::new(fresh_seed());
    write_blocks(&cluster, ALICE, &mut rng, 0, 4);
    for peer in [BOB, CAROL] {
        cluster.wait_identical(ALICE, peer, STATE_DEADLINE);
    }
    cluster.kill(CAROL);
    write_blocks(&cluster, ALICE, &mut rng, 8 * MIB, 4);
    assert!(
        cluster.out_of_sync_kib(ALICE, CAROL) >= 256,
        "alice tracks what carol missed"
    );
    cluster.start_node(CAROL);
    wait_all_up_to_date(&cluster);
    for peer in [BOB, CAROL] {
        cluster.wait_identical(ALICE, peer, STATE_DEADLINE);
    }
}

/// A Secondary that left the Primary (`disconnect --peer`, Outdated) but stayed connected to
/// the other Secondary is resynced by that one once it is promoted: nobody counted the
/// writes it missed, so its handshake with the new Primary moves everything, and it ends
/// UpToDate with the writes of both Primaries.
#[test]
fn an_outdated_secondary_is_resynced_by_the_next_primary() {
    let spec = Spec::three_nodes('C')
        .options_line("quorum majority;")
        .options_line("on-no-quorum suspend-io;");
    let cluster = Cluster::with_primary(spec);
    let mut rng = Rng::new(fresh_seed());
    let before = write_blocks(&cluster, ALICE, &mut rng, 0, 4);
    cluster.admin_ok(BOB, &["disconnect", "--peer", NODE_NAMES[ALICE], RESOURCE]);
    cluster.wait_disk(BOB, "Outdated", STATE_DEADLINE);
    let missed = write_blocks(&cluster, ALICE, &mut rng, 8 * MIB, 4);
    cluster.kill(ALICE);
    cluster.wait_until("carol sees alice gone", STATE_DEADLINE, || {
        cluster.status(CAROL).connection_state(NODE_NAMES[ALICE]) != "Connected"
    });
    cluster.admin_ok(CAROL, &["primary", RESOURCE]);
    let after = write_blocks(&cluster, CAROL, &mut rng, 16 * MIB, 4);
    cluster.wait_disk(BOB, "UpToDate", SYNC_DEADLINE);
    cluster.wait_replication(CAROL, BOB, "Established", SYNC_DEADLINE);
    for writes in [&before, &missed, &after] {
        read_back(&cluster, CAROL, writes);
    }
    cluster.wait_identical(CAROL, BOB, SYNC_DEADLINE);
}
