//! The day-2 verbs of issue 27 item 5 on real nodes: `get-gi`/`show-gi` from a running node
//! and from the metadata of a stopped one (drbdsetup's layout, checked field by field);
//! `outdate` on a live Secondary and on a stopped node's metadata; `wipe-md`; `suspend-io`
//! holding reads and writes until `resume-io`; `forget-peer` turning a reconnect into a full
//! sync.

use std::sync::mpsc;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::nbd_client;

/// How long a held request must stay held for the test to believe it.
const HELD: Duration = Duration::from_millis(600);
/// How long a released request may take.
const RELEASED: Duration = Duration::from_secs(10);

const ALICE: usize = 0;
const BOB: usize = 1;

/// The fields of a get-gi line: four UUIDs, seven local flags, five peer flags.
fn gi_fields(line: &str) -> Vec<String> {
    let fields: Vec<String> = line.trim().split(':').map(str::to_string).collect();
    assert_eq!(fields.len(), 16, "get-gi line: {line}");
    fields
}

/// A UUID without its lowest bit, which says whether its creator was Primary
/// (drbd-semantics.md §2, `UUID_PRIMARY`).
fn generation(uuid: &str) -> u64 {
    u64::from_str_radix(uuid, 16).expect("hex UUID") & !1
}

/// `tandem get-gi` with the node stopped, reading its metadata through the configuration.
fn get_gi_on_disk(cluster: &Cluster, index: usize, spec: &str) -> String {
    let config = cluster.config_path(index).display().to_string();
    cluster.admin_ok(
        index,
        &[
            "get-gi",
            "--config",
            &config,
            "--node",
            cluster.name(index),
            spec,
        ],
    )
}

/// drbdsetup get-gi (v9): `CURRENT:BITMAP:HIST1:HIST2:` + 7 local + 5 peer flag digits.
/// Connected and in sync, both nodes have the same current UUID, consistent and
/// was-up-to-date set and the peer connected; once bob stops, alice sees him disconnected
/// and bob's own metadata, read from disk, holds the current UUID both shared.
#[test]
fn get_gi_and_show_gi_live_and_from_disk() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let alice = gi_fields(&cluster.admin_ok(ALICE, &["get-gi", &format!("{RESOURCE}:bob")]));
    let bob = gi_fields(&cluster.admin_ok(BOB, &["get-gi", RESOURCE]));
    assert_eq!(
        generation(&alice[0]),
        generation(&bob[0]),
        "connected peers share the current UUID"
    );
    assert!(
        alice[0].len() == 16
            && alice[0]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()),
        "{alice:?}"
    );
    assert_eq!(
        &alice[4..7],
        ["1", "1", "1"],
        "alice: consistent, was-up-to-date, primary"
    );
    assert_eq!(
        &bob[4..7],
        ["1", "1", "0"],
        "bob: consistent, was-up-to-date, secondary"
    );
    assert_eq!(alice[11], "1", "alice sees bob connected");
    let shown = cluster.admin_ok(ALICE, &["show-gi", RESOURCE]);
    assert!(
        shown.contains("r0/0 with peer bob (node-id 1)")
            && shown.contains(&format!("current  {}", alice[0])),
        "{shown}"
    );

    cluster.stop(BOB);
    cluster.wait_until("alice sees bob gone", Duration::from_secs(10), || {
        gi_fields(&cluster.admin_ok(ALICE, &["get-gi", RESOURCE]))[11] == "0"
    });
    let on_disk = gi_fields(&get_gi_on_disk(&cluster, BOB, RESOURCE));
    assert_eq!(
        on_disk[0], bob[0],
        "bob's metadata keeps the shared current UUID"
    );
    assert_eq!(
        on_disk[8], "1",
        "a clean stop leaves the activity log clean"
    );
    assert_eq!(on_disk[11], "0", "no connection is read from disk");
    let refused = cluster.admin(
        BOB,
        &[
            "get-gi",
            "--config",
            &cluster.config_path(BOB).display().to_string(),
            "--node",
            "bob",
            "r0:zed",
        ],
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no connection named 'zed'"),
        "{refused:?}"
    );
}

fn stderr_of(cluster: &Cluster, index: usize, args: &[&str]) -> String {
    let output = cluster.admin(index, args);
    assert!(
        !output.status.success(),
        "'tandem {}' succeeded where it must fail",
        args.join(" ")
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `tandem ARGS --config CONFIG --node NAME` for a stopped node's metadata.
fn on_disk_args<'a>(
    cluster: &'a Cluster,
    index: usize,
    config: &'a str,
    args: &[&'a str],
) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(["--config", config, "--node", cluster.name(index), RESOURCE]);
    all
}

/// drbdadm outdate: refused on the Primary and on a connected Secondary; a disconnected
/// Secondary goes Outdated and its metadata says so after a clean stop (was-up-to-date 0);
/// with the node stopped, `outdate` writes the flag into the metadata itself.
#[test]
fn outdate_live_and_on_a_stopped_node() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let refused = stderr_of(&cluster, ALICE, &["outdate", RESOURCE]);
    assert!(refused.contains("Primary"), "{refused}");
    let refused = stderr_of(&cluster, BOB, &["outdate", RESOURCE]);
    assert!(refused.contains("connected to peer alice"), "{refused}");

    cluster.admin_ok(BOB, &["disconnect", RESOURCE]);
    cluster.admin_ok(BOB, &["outdate", RESOURCE]);
    assert_eq!(cluster.status(BOB).disk(), "Outdated");
    assert_eq!(
        cluster.admin_ok(BOB, &["dstate", RESOURCE]).trim(),
        "Outdated/DUnknown"
    );
    cluster.stop(BOB);
    let bob_config = cluster.config_path(BOB).display().to_string();
    let fields =
        gi_fields(&cluster.admin_ok(BOB, &on_disk_args(&cluster, BOB, &bob_config, &["get-gi"])));
    assert_eq!(
        &fields[4..6],
        ["1", "0"],
        "consistent, not up to date: {fields:?}"
    );

    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    cluster.stop(ALICE);
    let alice_config = cluster.config_path(ALICE).display().to_string();
    let report = cluster.admin_ok(
        ALICE,
        &on_disk_args(&cluster, ALICE, &alice_config, &["outdate"]),
    );
    assert!(report.contains("r0/0: marked Outdated"), "{report}");
    let fields = gi_fields(&cluster.admin_ok(
        ALICE,
        &on_disk_args(&cluster, ALICE, &alice_config, &["get-gi"]),
    ));
    assert_eq!(
        &fields[4..6],
        ["1", "0"],
        "alice outdated on disk: {fields:?}"
    );
}

/// drbdadm wipe-md: refused while the node runs (it holds the metadata), refused without
/// --force when standard input is not a terminal; with --force the metadata is gone and
/// create-md formats the device again without --force.
#[test]
fn wipe_md_needs_a_stopped_node_and_force() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    let config = cluster.config_path(BOB).display().to_string();
    let refused = stderr_of(
        &cluster,
        BOB,
        &on_disk_args(&cluster, BOB, &config, &["wipe-md", "--force"]),
    );
    assert!(
        refused.contains("in use by a running tandem node"),
        "{refused}"
    );
    cluster.stop(BOB);
    let refused = stderr_of(
        &cluster,
        BOB,
        &on_disk_args(&cluster, BOB, &config, &["wipe-md"]),
    );
    assert!(refused.contains("pass --force"), "{refused}");
    gi_fields(&cluster.admin_ok(BOB, &on_disk_args(&cluster, BOB, &config, &["get-gi"])));

    let report = cluster.admin_ok(
        BOB,
        &on_disk_args(&cluster, BOB, &config, &["wipe-md", "--force"]),
    );
    assert!(report.contains("r0/0: metadata wiped"), "{report}");
    let gone = stderr_of(
        &cluster,
        BOB,
        &on_disk_args(&cluster, BOB, &config, &["get-gi"]),
    );
    assert!(gone.contains("no tandem metadata"), "{gone}");
    cluster.create_md(BOB);
}

/// drbdadm suspend-io: with client I/O suspended a read and a write on the Primary's export
/// both wait and neither fails; status and events show `suspended:user`; resume-io releases
/// both, the read returning the data written before the suspension.
#[test]
fn suspend_io_holds_reads_and_writes_until_resume_io() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let events = cluster.events(ALICE);
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open alice's export");
    assert_eq!(client.write(0, &[5; 4096]), 0);
    client.disconnect();

    cluster.admin_ok(ALICE, &["suspend-io", RESOURCE]);
    let text = cluster.admin_ok(ALICE, &["status", RESOURCE]);
    assert!(text.contains("suspended:user"), "status: {text}");
    events.wait_for(&cluster, "change resource name:r0 suspended:user", RELEASED);

    let (read_tx, read_rx) = mpsc::channel();
    let mut reader =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open for the read");
    let read = std::thread::spawn(move || {
        let _ = read_tx.send(reader.read(0, 4096));
        reader.disconnect();
    });
    let (write_tx, write_rx) = mpsc::channel();
    let mut writer =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open for the write");
    let write = std::thread::spawn(move || {
        let _ = write_tx.send(writer.write(8192, &[6; 4096]));
        writer.disconnect();
    });
    cluster.hold_for("the read and the write wait while suspended", HELD, || {
        read_rx.try_recv().is_err() && write_rx.try_recv().is_err()
    });

    cluster.admin_ok(ALICE, &["resume-io", RESOURCE]);
    assert_eq!(
        read_rx.recv_timeout(RELEASED).expect("the read completes"),
        vec![5; 4096]
    );
    assert_eq!(
        write_rx.recv_timeout(RELEASED),
        Ok(0),
        "the write completes"
    );
    read.join().expect("reader");
    write.join().expect("writer");
    events.wait_for(&cluster, "change resource name:r0 suspended:no", RELEASED);
    let again = cluster.admin(ALICE, &["resume-io", RESOURCE]);
    assert!(
        !again.status.success(),
        "resume-io with nothing suspended is an error"
    );
}

/// drbdadm forget-peer: refused while connected; after a disconnect every block is out of
/// sync for the forgotten peer, and the reconnect resyncs all of it to identical replicas.
#[test]
fn forget_peer_makes_the_next_connect_a_full_sync() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let refused = stderr_of(&cluster, ALICE, &["forget-peer", "r0:bob"]);
    assert!(refused.contains("bob is connected"), "{refused}");
    let refused = stderr_of(&cluster, ALICE, &["forget-peer", "r0:zed"]);
    assert!(refused.contains("no peer named 'zed'"), "{refused}");

    cluster.admin_ok(ALICE, &["disconnect", RESOURCE]);
    cluster.admin_ok(ALICE, &["forget-peer", "r0:bob"]);
    let whole_kib = cluster.export_bytes() / 1024;
    assert_eq!(
        cluster.out_of_sync_kib(ALICE, BOB),
        whole_kib,
        "every block is out of sync for bob"
    );
    cluster.admin_ok(ALICE, &["connect", RESOURCE]);
    cluster.wait_until(
        "the full sync to bob finishes",
        Duration::from_secs(60),
        || cluster.all_up_to_date() && cluster.out_of_sync_kib(ALICE, BOB) == 0,
    );
    cluster.wait_identical(ALICE, BOB, Duration::from_secs(30));
}
