//! Fencing and the handler timeout (issue 4, drbd-semantics.md §1 `fencing`): a Primary with
//! `fencing resource-and-stonith` that loses its UpToDate peer freezes client I/O
//! (`suspended:fencing`) and runs `fence-peer` with DRBD's variables; exit 7 (or 3, 4, 5)
//! resumes I/O with the peer shown Outdated, another status keeps it frozen until `tandem
//! resume-io`; a handler that hangs is killed after `handler-timeout` (tandem only) and
//! reported, and the node goes on; a Secondary promoted without its peer runs fence-peer
//! first and is refused if it fails. Every run shows in `tandem events` as DRBD's
//! `call helper` / `response helper` lines.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::nbd_client;

const ALICE: usize = 0;
const BOB: usize = 1;
const STATE_DEADLINE: Duration = Duration::from_secs(15);
/// How long a frozen write is watched to stay frozen.
const FROZEN_HOLD: Duration = Duration::from_millis(1500);

/// The fence-peer script: records its environment, then waits until the test writes the
/// exit status into `fence-status` (and exits with it).
const FENCE_SCRIPT: &str = "env > \"$1/fence-env.out\"\n\
    while [ ! -s \"$1/fence-status\" ]; do sleep 0.05; done\n\
    exit \"$(cat \"$1/fence-status\")\"\n";

/// A handler that hangs: it starts a grandchild (whose pid it records) and waits for it.
const HANG_SCRIPT: &str = "sleep 600 &\n\
    echo $! > \"$1/hang-child.pid\"\n\
    wait\n";

fn write_script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write a handler script");
    path
}

/// A connected pair, alice Primary, with `fencing` and a fence-peer handler that runs
/// `script` (a file in the cluster's directory, written before the nodes start).
fn fencing_pair(fencing: &str, script: &str, extra: impl FnOnce(Spec) -> Spec) -> Cluster {
    let spec = Spec::two_nodes('C')
        .net_line_all(&format!("fencing {fencing};"))
        .handler("fence-peer", "sh {dir}/fence-peer.sh {dir}");
    let cluster = Cluster::create(extra(spec));
    write_script(cluster.dir(), "fence-peer.sh", script);
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    cluster
}

fn suspended(cluster: &Cluster, index: usize) -> (bool, String) {
    let json = cluster.status_json(index);
    let resource = &json["resources"][0];
    let reasons: Vec<&str> = resource["suspend_reasons"]
        .as_array()
        .map(|list| list.iter().filter_map(|r| r.as_str()).collect())
        .unwrap_or_default();
    (
        resource["suspended"].as_bool().unwrap_or(false),
        reasons.join(","),
    )
}

/// Kills bob and waits until alice has lost him and runs fence-peer (its environment file
/// appears); returns that environment.
fn lose_bob(cluster: &Cluster) -> String {
    let env_out = cluster.dir().join("fence-env.out");
    cluster.kill(BOB);
    cluster.wait_until("alice notices bob is gone", STATE_DEADLINE, || {
        cluster.status(ALICE).connection_state("bob") != "Connected"
    });
    cluster.wait_until("fence-peer runs on alice", STATE_DEADLINE, || {
        std::fs::metadata(&env_out).is_ok_and(|m| m.len() > 0)
    });
    std::fs::read_to_string(&env_out).unwrap_or_default()
}

/// Starts a 4 KiB write at `offset` on its own thread; the receiver gets its errno.
fn write_in_background(
    cluster: &Cluster,
    offset: u64,
    byte: u8,
) -> (mpsc::Receiver<u32>, std::thread::JoinHandle<()>) {
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open alice's export");
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let errno = client.write(offset, &[byte; 4096]);
        let _ = done_tx.send(errno);
        client.disconnect();
    });
    (done_rx, writer)
}

fn set_fence_status(cluster: &Cluster, status: i32) {
    std::fs::write(cluster.dir().join("fence-status"), format!("{status}\n"))
        .expect("write fence-status");
}

const FENCE_CALL: &str = "call helper name:r0 peer-node-id:1 conn-name:bob helper:fence-peer";

/// (a) resource-and-stonith: after bob dies a write on alice waits until fence-peer exits 7;
/// then it completes, bob shows Outdated, and events show the call and the response.
#[test]
fn stonith_freezes_writes_until_fence_peer_says_the_peer_was_shot() {
    let cluster = fencing_pair("resource-and-stonith", FENCE_SCRIPT, |spec| spec);
    let events = cluster.events(ALICE);
    let env = lose_bob(&cluster);
    events.wait_for(&cluster, FENCE_CALL, STATE_DEADLINE);
    for variable in [
        "DRBD_RESOURCE=r0",
        "DRBD_PEER_NODE_ID=1",
        "DRBD_PEER=bob",
        "DRBD_PEER_ADDRESS=127.0.0.1",
        "DRBD_PEER_AF=ipv4",
        "DRBD_MY_NODE_ID=0",
        "DRBD_NODE_ID_1=bob",
        "DRBD_MINOR_0=0",
    ] {
        assert!(
            env.lines().any(|line| line == variable),
            "fence-peer's environment lacks {variable}:\n{env}"
        );
    }
    let conf = format!("DRBD_CONF={}", cluster.config_path(ALICE).display());
    assert!(
        env.lines().any(|line| line == conf),
        "fence-peer's environment lacks {conf}:\n{env}"
    );
    assert_eq!(suspended(&cluster, ALICE), (true, "fencing".to_string()));
    let text = cluster.admin_ok(ALICE, &["status", RESOURCE]);
    assert!(text.contains("suspended:fencing"), "status: {text}");
    events.wait_for(
        &cluster,
        "change resource name:r0 suspended:fencing",
        STATE_DEADLINE,
    );

    let (done, writer) = write_in_background(&cluster, 0, 7);
    cluster.hold_for("the write waits for fence-peer", FROZEN_HOLD, || {
        done.try_recv().is_err()
    });
    set_fence_status(&cluster, 7);
    assert_eq!(
        done.recv_timeout(STATE_DEADLINE),
        Ok(0),
        "the write completes once bob is fenced"
    );
    writer.join().expect("writer");
    events.wait_for(
        &cluster,
        "response helper name:r0 peer-node-id:1 conn-name:bob helper:fence-peer status:7",
        STATE_DEADLINE,
    );
    assert_eq!(suspended(&cluster, ALICE), (false, String::new()));
    assert_eq!(
        cluster.status(ALICE).peer_disk("bob"),
        "Outdated",
        "a STONITHed peer shows Outdated"
    );
    events.wait_for(
        &cluster,
        "change resource name:r0 suspended:no",
        STATE_DEADLINE,
    );
}

/// (b) A fence-peer that fails (exit 1) keeps I/O frozen until `tandem resume-io`; the
/// peer stays unfenced (DUnknown).
#[test]
fn a_failed_fence_peer_keeps_io_frozen_until_resume_io() {
    let cluster = fencing_pair("resource-and-stonith", FENCE_SCRIPT, |spec| spec);
    let events = cluster.events(ALICE);
    set_fence_status(&cluster, 1);
    lose_bob(&cluster);
    events.wait_for(
        &cluster,
        "response helper name:r0 peer-node-id:1 conn-name:bob helper:fence-peer status:1",
        STATE_DEADLINE,
    );
    let (done, writer) = write_in_background(&cluster, 8192, 9);
    cluster.hold_for(
        "the write stays frozen after the failure",
        FROZEN_HOLD,
        || done.try_recv().is_err() && suspended(&cluster, ALICE).0,
    );
    cluster.admin_ok(ALICE, &["resume-io", RESOURCE]);
    assert_eq!(
        done.recv_timeout(STATE_DEADLINE),
        Ok(0),
        "resume-io releases the write"
    );
    writer.join().expect("writer");
    assert_eq!(suspended(&cluster, ALICE), (false, String::new()));
    assert_eq!(cluster.status(ALICE).peer_disk("bob"), "DUnknown");
    let again = cluster.admin(ALICE, &["resume-io", RESOURCE]);
    assert!(
        !again.status.success(),
        "resume-io with nothing frozen is an error"
    );
}

/// (c) A fence-peer that hangs is killed after `handler-timeout 1` with everything it
/// started, reported (status 137 = killed by SIGKILL), and the node goes on: under
/// resource-only writes never waited, and bob, restarted, resyncs (and `unfence-peer` runs
/// on alice when that resync ends).
#[test]
fn a_hung_handler_is_killed_after_its_timeout_and_the_node_goes_on() {
    let cluster = fencing_pair("resource-only", HANG_SCRIPT, |spec| {
        spec.options_line("handler-timeout 1;")
            .handler("unfence-peer", "true")
    });
    let events = cluster.events(ALICE);
    cluster.kill(BOB);
    events.wait_for(&cluster, FENCE_CALL, STATE_DEADLINE);
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open alice's export");
    assert_eq!(
        client.write(0, &[5; 4096]),
        0,
        "resource-only does not freeze I/O"
    );
    events.wait_for(
        &cluster,
        "response helper name:r0 peer-node-id:1 conn-name:bob helper:fence-peer status:137",
        STATE_DEADLINE,
    );
    assert!(
        cluster.log(ALICE).contains("handler-timeout"),
        "alice's log says why the handler was killed"
    );
    let pid = std::fs::read_to_string(cluster.dir().join("hang-child.pid"))
        .expect("the handler recorded its child");
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    cluster.wait_until("the handler's child is gone too", STATE_DEADLINE, || {
        std::fs::read_to_string(proc_dir.join("stat")).map_or(true, |stat| stat.contains(") Z "))
    });
    assert_eq!(
        client.write(4096, &[6; 4096]),
        0,
        "writes go on after the kill"
    );
    client.disconnect();
    cluster.start_node(BOB);
    cluster.wait_connected();
    cluster.wait_until("bob catches up", STATE_DEADLINE, || {
        cluster.status(ALICE).peer_disk("bob") == "UpToDate"
    });
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    // The resync that brought bob back ends with unfence-peer on its source.
    events.wait_for(
        &cluster,
        "response helper name:r0 peer-node-id:1 conn-name:bob helper:unfence-peer status:0",
        STATE_DEADLINE,
    );
}

/// A Secondary promoted while its peer is away runs fence-peer first: refused when it fails,
/// promoted (peer shown Outdated) once it outdates the peer.
#[test]
fn promotion_without_the_peer_runs_fence_peer_first() {
    let cluster = fencing_pair("resource-only", FENCE_SCRIPT, |spec| spec);
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    set_fence_status(&cluster, 1);
    cluster.kill(ALICE);
    cluster.wait_until("bob notices alice is gone", STATE_DEADLINE, || {
        cluster.status(BOB).connection_state("alice") != "Connected"
    });
    let refused = cluster.admin(BOB, &["primary", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("fence-peer"),
        "bob: {stderr}"
    );
    assert_eq!(cluster.status(BOB).role(), "Secondary");
    set_fence_status(&cluster, 4);
    cluster.admin_ok(BOB, &["primary", RESOURCE]);
    let status = cluster.status(BOB);
    assert_eq!(
        (status.role(), status.peer_disk("alice")),
        ("Primary".to_string(), "Outdated".to_string())
    );
}

/// fence-peer exit 6 (the peer is Primary) on a Secondary asking before its promotion: it
/// outdates its own disk, as DRBD does, durably (still Outdated after a restart), and only
/// `--force` promotes it.
#[test]
fn a_secondary_told_the_peer_is_primary_outdates_its_own_disk() {
    let cluster = fencing_pair("resource-only", FENCE_SCRIPT, |spec| spec);
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    set_fence_status(&cluster, 6);
    cluster.kill(ALICE);
    cluster.wait_until("bob notices alice is gone", STATE_DEADLINE, || {
        cluster.status(BOB).connection_state("alice") != "Connected"
    });
    assert_eq!(cluster.status(BOB).disk(), "UpToDate");
    let refused = cluster.admin(BOB, &["primary", RESOURCE]);
    assert!(
        !refused.status.success(),
        "bob promoted although fence-peer ran"
    );
    cluster.wait_until("bob outdates his disk", STATE_DEADLINE, || {
        cluster.status(BOB).disk() == "Outdated"
    });
    let refused = cluster.admin(BOB, &["primary", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("Outdated"),
        "bob: {stderr}"
    );
    cluster.stop(BOB);
    cluster.start_node(BOB);
    cluster.wait_until("bob is up again", STATE_DEADLINE, || {
        cluster.status(BOB).disk() == "Outdated"
    });
    cluster.admin_ok(BOB, &["primary", "--force", RESOURCE]);
    assert_eq!(cluster.status(BOB).role(), "Primary");
}

/// `fencing` changes live with `tandem adjust`; without a fence-peer handler every fence
/// fails, so after turning on resource-and-stonith the loss of bob freezes alice's writes
/// (her log says why) until `resume-io`.
#[test]
fn adjust_turns_fencing_on_and_without_a_handler_io_stays_frozen() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let path = cluster.config_path(ALICE);
    let text = std::fs::read_to_string(path).expect("read alice's config");
    let edited = text.replace(
        "ping-timeout 20;",
        "ping-timeout 20;\n    fencing resource-and-stonith;",
    );
    assert_ne!(text, edited);
    std::fs::write(path, edited).expect("write alice's config");
    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(
        report.contains("bob: fencing dont-care -> resource-and-stonith"),
        "report: {report}"
    );
    let again = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(again.contains("r0: no changes"), "second adjust: {again}");

    cluster.kill(BOB);
    cluster.wait_until("alice freezes I/O for fencing", STATE_DEADLINE, || {
        suspended(&cluster, ALICE) == (true, "fencing".to_string())
    });
    let (done, writer) = write_in_background(&cluster, 0, 3);
    cluster.hold_for(
        "the write stays frozen without a handler",
        FROZEN_HOLD,
        || done.try_recv().is_err(),
    );
    assert!(
        cluster
            .log(ALICE)
            .contains("fence-peer handler did not run"),
        "alice's log says why"
    );
    cluster.admin_ok(ALICE, &["resume-io", RESOURCE]);
    assert_eq!(done.recv_timeout(STATE_DEADLINE), Ok(0));
    writer.join().expect("writer");
}

/// A peer fenced while the Primary wrote nothing comes back with nothing to resync (equal
/// generations): `unfence-peer` still runs once it is Established and UpToDate, so a
/// cluster manager's constraint against it does not outlive the outage.
#[test]
fn a_fenced_peer_back_without_a_resync_is_unfenced() {
    let cluster = fencing_pair("resource-only", FENCE_SCRIPT, |spec| {
        spec.handler("unfence-peer", "true")
    });
    set_fence_status(&cluster, 4);
    let events = cluster.events(ALICE);
    cluster.kill(BOB);
    events.wait_for(&cluster, FENCE_CALL, STATE_DEADLINE);
    events.wait_for(
        &cluster,
        "response helper name:r0 peer-node-id:1 conn-name:bob helper:fence-peer status:4",
        STATE_DEADLINE,
    );
    cluster.start_node(BOB);
    cluster.wait_connected();
    cluster.wait_until("alice sees bob UpToDate", STATE_DEADLINE, || {
        cluster.status(ALICE).peer_disk("bob") == "UpToDate"
    });
    events.wait_for(
        &cluster,
        "response helper name:r0 peer-node-id:1 conn-name:bob helper:unfence-peer status:0",
        STATE_DEADLINE,
    );
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
}
