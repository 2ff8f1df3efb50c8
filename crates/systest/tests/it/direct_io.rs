//! `disk { io direct; }` (issue 28): a protocol C pair whose nodes open their backing files
//! with `O_DIRECT` replicates aligned and 512-byte-aligned (sub-block) writes written through
//! the NBD export, reads them back, and ends with byte-identical replicas, with external and
//! with internal metadata; fio verifies 512-byte random writes at queue depth 16; the nodes'
//! backing-file descriptors really carry `O_DIRECT`; `adjust` says a changed `io` waits for a
//! restart.

use std::path::Path;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::nbd_client;
use crate::tools::{fio_verify, require_fio, run_ok};

const ALICE: usize = 0;
const BOB: usize = 1;
/// How long the replicas may take to become identical once the client is done (protocol C:
/// only the flush of what was written is left).
const CONVERGE_DEADLINE: Duration = Duration::from_secs(10);
/// How long one fio run may take.
const FIO_DEADLINE: Duration = Duration::from_secs(60);
/// `O_DIRECT` on x86-64 and aarch64 Linux as `/proc/PID/fdinfo` prints flags (octal).
const O_DIRECT_FLAG: u32 = 0o40000;

/// Writes (offset, length): aligned blocks, a large aligned write, single sectors inside a
/// block, writes across block boundaries and a large write that starts mid-block, the kinds
/// a 512-byte-sector client sends.
const WRITES: &[(u64, usize)] = &[
    (0, 4096),
    (64 * 1024, 1024 * 1024),
    (512, 512),
    (8192 + 1536, 512),
    (4096 - 1024, 2048),
    (3 * 1024 * 1024 + 512, 1024 * 1024 + 3584),
    (64 * 1024 + 4096 + 512, 1024),
];

/// drbd-semantics.md §1: with protocol C a write completes once it is on both disks. With
/// `io direct` on both nodes, every write (aligned or not) must read back as written and the
/// replicas must end identical byte for byte.
fn direct_io_pair_replicates_byte_for_byte(spec: Spec) {
    let cluster = Cluster::with_primary(spec.disk_line("io direct;"));
    for node in [ALICE, BOB] {
        assert_backing_file_is_direct(&cluster, node);
    }
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open alice's export");
    let mut model = vec![0u8; 5 * 1024 * 1024];
    for (round, &(offset, length)) in WRITES.iter().enumerate() {
        let data: Vec<u8> = (0..length)
            .map(|i| ((i * 11 + round * 37) % 251) as u8 + 1)
            .collect();
        assert_eq!(client.write(offset, &data), 0, "write {offset}+{length}");
        let at = usize::try_from(offset).expect("offset fits usize");
        model[at..at + length].copy_from_slice(&data);
    }
    assert_eq!(client.flush(), 0, "flush");
    for &(offset, length) in WRITES {
        let at = usize::try_from(offset).expect("offset fits usize");
        let length = u32::try_from(length).expect("length fits u32");
        let back = client.read(offset, length);
        assert!(
            back[..] == model[at..at + back.len()],
            "read back {offset}+{length}"
        );
    }
    client.disconnect();
    let file = std::fs::read(cluster.disk(ALICE)).expect("read alice's backing file");
    assert!(
        file[..model.len()] == model[..],
        "alice's backing file holds exactly what was written"
    );
    cluster.wait_identical(ALICE, BOB, CONVERGE_DEADLINE);
    let status = cluster.status(ALICE);
    assert_eq!(
        status.peer_disk(NODE_NAMES[BOB]),
        "UpToDate",
        "{}",
        status.0
    );
    assert_eq!(status.out_of_sync_kib(NODE_NAMES[BOB]), 0, "{}", status.0);
}

#[test]
fn protocol_c_pair_with_io_direct_replicates_unaligned_writes_byte_for_byte() {
    direct_io_pair_replicates_byte_for_byte(Spec::two_nodes('C'));
}

#[test]
fn io_direct_with_internal_metadata_replicates_byte_for_byte() {
    direct_io_pair_replicates_byte_for_byte(Spec::two_nodes('C').internal_metadata());
}

/// 512-byte random writes at queue depth 16 (fio's nbd engine, every sector once, verified):
/// concurrent writes into different sectors of the same 4 KiB blocks, each a read-modify-write
/// on a direct disk, must all land, on both nodes.
#[test]
fn fio_verifies_512_byte_random_writes_on_an_io_direct_pair() {
    require_fio();
    let cluster = Cluster::with_primary(Spec::two_nodes('C').disk_line("io direct;"));
    run_ok(
        fio_verify(
            &cluster.nbd_uri(ALICE),
            cluster.dir(),
            "randwrite",
            "512",
            "2M",
        ),
        FIO_DEADLINE,
    );
    run_ok(
        fio_verify(&cluster.nbd_uri(ALICE), cluster.dir(), "write", "64k", "8M"),
        FIO_DEADLINE,
    );
    cluster.wait_identical(ALICE, BOB, CONVERGE_DEADLINE);
}

/// `io` is read when the disk is opened: adjust reports the change as waiting for a restart
/// and keeps the connection.
#[test]
fn adjust_reports_a_changed_io_as_applied_at_restart() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C').disk_line("io direct;"));
    let path = cluster.config_path(ALICE);
    let text = std::fs::read_to_string(path).expect("read config");
    let edited = text.replace("io direct;", "io buffered;");
    assert_ne!(text, edited, "the configuration has io direct");
    std::fs::write(path, edited).expect("write config");
    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(
        report.contains(
            "volume 0: io direct -> buffered changed but not applied until the node restarts"
        ),
        "report: {report}"
    );
    assert_backing_file_is_direct(&cluster, ALICE);
    assert_eq!(
        cluster.status(ALICE).connection_state(NODE_NAMES[BOB]),
        "Connected"
    );
}

/// Some descriptor of node `index`'s process points at its backing file with `O_DIRECT`.
fn assert_backing_file_is_direct(cluster: &Cluster, index: usize) {
    let pid = cluster.pid(index).expect("the node runs");
    let disk = std::fs::canonicalize(cluster.disk(index)).expect("backing file path");
    let flags = open_flags_of(pid, &disk);
    assert!(
        !flags.is_empty(),
        "node {index} has no descriptor on {}",
        disk.display()
    );
    assert!(
        flags.iter().any(|flags| flags & O_DIRECT_FLAG != 0),
        "no O_DIRECT descriptor on {}: flags {flags:?} (octal {O_DIRECT_FLAG:o} is O_DIRECT)",
        disk.display()
    );
}

/// The `flags` of every descriptor of process `pid` open on `path`.
fn open_flags_of(pid: u32, path: &Path) -> Vec<u32> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("list the node's descriptors");
    let mut found = Vec::new();
    for entry in fds.flatten() {
        if std::fs::read_link(entry.path()).ok().as_deref() != Some(path) {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/{pid}/fdinfo/{}",
            entry.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        let flags = info
            .lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok());
        found.extend(flags);
    }
    found
}
