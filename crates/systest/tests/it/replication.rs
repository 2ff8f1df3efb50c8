//! Replication through real NBD clients: protocols A, B and C converge to byte-identical
//! replicas under a verifying fio workload; the Primary keeps serving when its peer is
//! killed in the middle of a workload and counts what the peer missed; with protocol C a
//! write the client saw acknowledged is on the peer's disk even if the Primary dies at once.

use std::process::Command;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES};
use crate::tools::{fio_verify, require, require_fio, run_ok, Background};

/// How long one fio run may take.
const FIO_DEADLINE: Duration = Duration::from_secs(25);
/// How long the peer may lag behind the Primary once the client is done (protocols A, B).
const CONVERGE_DEADLINE: Duration = Duration::from_secs(10);

/// drbd-semantics.md §1 "When a write completes": A completes at the local disk plus the
/// send buffer, B at the peer's receipt, C at the peer's disk. Whatever the protocol, once
/// the client is done and the link stays up, the peer applies every write in order, so the
/// replicas become byte-identical (A and B may lag a moment, hence the deadline).
fn replicas_converge(protocol: char) {
    require_fio();
    let cluster = Cluster::with_primary(Spec::two_nodes(protocol));
    let uri = cluster.nbd_uri(0);
    run_ok(
        fio_verify(&uri, cluster.dir(), "randwrite", "4k", "32M"),
        FIO_DEADLINE,
    );
    run_ok(
        fio_verify(&uri, cluster.dir(), "write", "1M", "64M"),
        FIO_DEADLINE,
    );
    assert_data_reached_the_file(&cluster, 0);
    cluster.wait_identical(0, 1, CONVERGE_DEADLINE);
    let bob = NODE_NAMES[1];
    cluster.wait_until(
        "the Primary reports bob UpToDate with nothing out of sync",
        CONVERGE_DEADLINE,
        || {
            let status = cluster.status(0);
            status.peer_disk(bob) == "UpToDate" && status.out_of_sync_kib(bob) == 0
        },
    );
    let status = cluster.status(0);
    assert_eq!(
        status.connection_state(bob),
        "Connected",
        "the link dropped during the workload"
    );
    assert_eq!(status.replication(bob), "Established", "{}", status.0);
    assert_eq!(status.role(), "Primary");
}

#[test]
fn protocol_a_replicas_converge_after_fio_verify() {
    replicas_converge('A');
}

#[test]
fn protocol_b_replicas_converge_after_fio_verify() {
    replicas_converge('B');
}

#[test]
fn protocol_c_replicas_converge_after_fio_verify() {
    replicas_converge('C');
}

/// fio's sequential pass wrote the whole export, so the backing file must hold data: two
/// all-zero files would compare identical without anything having been replicated.
fn assert_data_reached_the_file(cluster: &Cluster, index: usize) {
    let data = std::fs::read(cluster.disk(index)).expect("cannot read a backing file");
    let zero_blocks = data
        .chunks(4096)
        .filter(|block| block.iter().all(|byte| *byte == 0))
        .count();
    assert!(
        zero_blocks < data.len() / 4096 / 2,
        "{} of {} blocks of {}'s backing file are zero after fio wrote the whole export",
        zero_blocks,
        data.len() / 4096,
        cluster.name(index)
    );
}

/// drbd-semantics.md §1 and §2: when the peer fails, the Primary goes on serving
/// (its disk stays UpToDate) and tracks what the peer misses as out-of-sync; the connection
/// leaves Connected.
#[test]
fn primary_keeps_serving_when_the_secondary_is_killed_mid_workload() {
    require_fio();
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let mut fio = fio_verify(&cluster.nbd_uri(0), cluster.dir(), "randwrite", "4k", "16M");
    // 4096 writes at 2000/s: about 2 s of writing, so the kill lands in the middle.
    fio.arg("--rate_iops=2000");
    let mut fio = Background::spawn(fio);
    cluster.wait_until(
        "bob's backing file holds at least 128 written blocks",
        Duration::from_secs(10),
        || nonzero_blocks(&cluster, 1, 16 << 20) >= 128,
    );
    assert!(
        fio.is_running(),
        "fio finished before the kill: the workload is too short for this test"
    );
    cluster.kill(1);
    let output = fio.wait(FIO_DEADLINE);
    assert!(
        output.status.success(),
        "fio failed after the secondary was killed (the Primary must keep serving):\nstdout: \
         {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let bob = NODE_NAMES[1];
    let status = cluster.status(0);
    assert_ne!(
        status.connection_state(bob),
        "Connected",
        "alice still reports the dead bob Connected: {}",
        status.0
    );
    assert!(
        status.out_of_sync_kib(bob) > 0,
        "alice kept writing without bob but reports nothing out of sync: {}",
        status.0
    );
    assert_eq!(status.role(), "Primary");
    assert_eq!(status.disk(), "UpToDate");
}

fn nonzero_blocks(cluster: &Cluster, index: usize, length: usize) -> usize {
    let data = std::fs::read(cluster.disk(index)).expect("cannot read a backing file");
    data[..length]
        .chunks(4096)
        .filter(|block| block.iter().any(|byte| *byte != 0))
        .count()
}

/// drbd-semantics.md §1, protocol C: a write completes only once it is on the local disk
/// and on every peer's disk. So after qemu-io has seen its writes acknowledged, killing the
/// Primary cannot take them away from the Secondary.
#[test]
fn protocol_c_acknowledged_write_is_on_the_secondary_when_the_primary_dies() {
    require("qemu-io", "qemu-utils");
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let mut qemu_io = Command::new("qemu-io");
    qemu_io
        .args(["-f", "raw"])
        .args(["-c", "write -P 0xab 4M 1M"])
        .args(["-c", "write -P 0xcd 9220k 12k"])
        .arg(cluster.nbd_uri(0));
    let output = run_ok(qemu_io, FIO_DEADLINE);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        said.matches("wrote ").count() == 2,
        "qemu-io did not report both writes: {said}"
    );
    cluster.kill(0);
    let data = std::fs::read(cluster.disk(1)).expect("cannot read bob's backing file");
    for (offset, length, pattern) in [(4 << 20, 1 << 20, 0xab_u8), (9220 << 10, 12 << 10, 0xcd)] {
        let region: &[u8] = &data[offset..offset + length];
        let wrong = region.iter().position(|byte| *byte != pattern);
        assert!(
            wrong.is_none(),
            "bob's byte {} is {:#x}, not the acknowledged pattern {pattern:#x}",
            offset + wrong.unwrap_or_default(),
            region[wrong.unwrap_or_default()]
        );
    }
}
