//! `on-congestion pull-ahead` end to end (issue 5): protocol A through the link emulator at
//! a low rate. Once the unconfirmed data passes `congestion-fill`, alice goes Ahead (bob is
//! durably marked possibly stale first), keeps completing writes at local speed, and once the
//! link drained resyncs what bob missed; the replicas end identical and bob's mark is cleared.

use std::time::Duration;

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::link::LinkEmulator;
use crate::nbd_client;

const ALICE: usize = 0;
const BOB: usize = 1;
const DEADLINE: Duration = Duration::from_secs(30);
/// What the test writes: 64 writes of 64 KiB.
const WRITE_BYTES: usize = 64 * 1024;
const WRITES: u64 = 64;

fn bob_possibly_stale(cluster: &Cluster) -> bool {
    cluster.status_json(BOB)["resources"][0]["devices"][0]["possibly_stale"]
        .as_bool()
        .unwrap_or(false)
}

#[test]
fn a_congested_link_goes_ahead_then_resyncs_to_identical_replicas() {
    let spec = Spec::two_nodes('A')
        .through_relays()
        .net_line_all("on-congestion pull-ahead;")
        // 512 KiB (in sectors, as DRBD counts it).
        .net_line_all("congestion-fill 1024;");
    let cluster = Cluster::create(spec);
    let link = LinkEmulator::start(&cluster);
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    link.set(r#"{"rate":"256KB"}"#);

    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open the export");
    let mut write = |i: u64| {
        let byte = u8::try_from(i % 251).unwrap_or(0) + 1;
        assert_eq!(
            client.write(i * WRITE_BYTES as u64, &[byte; WRITE_BYTES]),
            0,
            "write {i}"
        );
    };
    // 2 MiB that the socket buffers take at once, far more than the link carries soon.
    (0..WRITES / 2).for_each(&mut write);
    // Ahead lasts until the link drained and its dwell time passed (seconds at this rate).
    cluster.wait_replication(ALICE, BOB, "Ahead", DEADLINE);
    assert!(
        bob_possibly_stale(&cluster),
        "bob is marked possibly stale while alice is Ahead"
    );
    cluster.wait_replication(BOB, ALICE, "Behind", DEADLINE);
    (WRITES / 2..WRITES).for_each(&mut write);
    assert_eq!(
        cluster.status(ALICE).replication("bob"),
        "Ahead",
        "still Ahead: the link has not drained"
    );
    assert!(
        cluster.out_of_sync_kib(ALICE, BOB) >= 1024,
        "the writes made while Ahead are marked out of sync, not shipped"
    );
    client.disconnect();

    link.set(r#"{"rate":"unlimited"}"#);
    cluster.wait_until("alice caught bob up", DEADLINE, || {
        let status = cluster.status(ALICE);
        status.replication("bob") == "Established" && status.out_of_sync_kib("bob") == 0
    });
    cluster.wait_identical(ALICE, BOB, DEADLINE);
    cluster.wait_replication(BOB, ALICE, "Established", DEADLINE);
    cluster.wait_until("bob's possibly-stale mark is cleared", DEADLINE, || {
        !bob_possibly_stale(&cluster)
    });
    let events = cluster.admin_ok(ALICE, &["status", RESOURCE]);
    assert!(
        events.contains("UpToDate"),
        "status after the catch-up:\n{events}"
    );
}
