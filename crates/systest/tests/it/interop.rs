//! The export through independent NBD client implementations: libnbd's nbdinfo and nbdcopy,
//! and QEMU's qemu-img. What they write must read back identical and reach the peer; a
//! Secondary must refuse them and name the Primary.

use std::process::Command;
use std::time::Duration;

use crate::cluster::{first_difference, Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::nbd_client::{self, REP_ERR_POLICY};
use crate::tools::{fresh_seed, require, run_ok, run_with_deadline, Rng};

/// How long one client run may take.
const CLIENT_DEADLINE: Duration = Duration::from_secs(25);
/// How long the peer may take to apply the last writes.
const CONVERGE_DEADLINE: Duration = Duration::from_secs(10);

/// Writes `length` random bytes from a printed seed to a scratch file in the cluster dir.
fn random_file(cluster: &Cluster, name: &str, length: u64) -> std::path::PathBuf {
    let seed = fresh_seed();
    eprintln!("{name}: random data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let path = cluster.dir().join(name);
    let length = usize::try_from(length).expect("file length fits usize");
    std::fs::write(&path, Rng::new(seed).bytes(length)).expect("cannot write a scratch file");
    path
}

/// nbd.md "Options": NBD_OPT_GO / NBD_OPT_INFO report the export size; the export of a
/// volume is its whole backing file.
#[test]
fn nbdinfo_json_reports_the_export_size() {
    require("nbdinfo", "libnbd-bin");
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let mut nbdinfo = Command::new("nbdinfo");
    nbdinfo.arg("--json").arg(cluster.nbd_uri(0));
    let output = run_ok(nbdinfo, CLIENT_DEADLINE);
    let text = String::from_utf8_lossy(&output.stdout);
    let info: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("nbdinfo --json is not JSON ({error}): {text}"));
    let export = &info["exports"][0];
    assert_eq!(export["export-name"], RESOURCE, "{text}");
    assert_eq!(
        export["export-size"].as_u64(),
        Some(cluster.disk_bytes()),
        "{text}"
    );
    assert_eq!(
        export["is_read_only"], false,
        "the Primary's export must be writable: {text}"
    );
}

/// drbd-semantics.md §1: every write the Primary completes is replicated; a bulk parallel
/// writer (nbdcopy) reads back exactly what it wrote, and the peer ends identical.
#[test]
fn nbdcopy_round_trip_is_identical_and_replicated() {
    require("nbdcopy", "libnbd-bin");
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let source = random_file(&cluster, "source.raw", cluster.disk_bytes());
    let copy = cluster.dir().join("copy.raw");
    let mut write = Command::new("nbdcopy");
    write.arg(&source).arg(cluster.nbd_uri(0));
    run_ok(write, CLIENT_DEADLINE);
    let mut read = Command::new("nbdcopy");
    read.arg(cluster.nbd_uri(0)).arg(&copy);
    run_ok(read, CLIENT_DEADLINE);
    if let Some(difference) = first_difference(&source, &copy) {
        panic!("nbdcopy read back something else than it wrote: {difference}");
    }
    if let Some(difference) = first_difference(&source, cluster.disk(0)) {
        panic!("alice's backing file differs from what nbdcopy wrote: {difference}");
    }
    cluster.wait_identical(0, 1, CONVERGE_DEADLINE);
}

/// Same as above through QEMU's NBD client: `qemu-img convert -n` writes into the existing
/// export, `qemu-img compare` reads it back.
#[test]
fn qemu_img_convert_then_compare_matches() {
    require("qemu-img", "qemu-utils");
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let source = random_file(&cluster, "source.raw", cluster.disk_bytes());
    let mut convert = Command::new("qemu-img");
    convert
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&source)
        .arg(cluster.nbd_uri(0));
    run_ok(convert, CLIENT_DEADLINE);
    let mut compare = Command::new("qemu-img");
    compare
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&source)
        .arg(cluster.nbd_uri(0));
    let output = run_with_deadline(compare, CLIENT_DEADLINE);
    assert!(
        output.status.success(),
        "qemu-img compare found a difference ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    cluster.wait_identical(0, 1, CONVERGE_DEADLINE);
    if let Some(difference) = first_difference(&source, cluster.disk(1)) {
        panic!("bob's backing file differs from what qemu-img wrote: {difference}");
    }
}

/// drbd-semantics.md §2 roles, nbd.md "INFO/GO errors": a Secondary never serves
/// application I/O; the open fails with NBD_REP_ERR_POLICY and the message names the
/// Primary so the operator knows where to go.
#[test]
fn secondary_refuses_nbd_and_names_the_primary() {
    require("nbdinfo", "libnbd-bin");
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let primary = NODE_NAMES[0];
    let mut nbdinfo = Command::new("nbdinfo");
    // libnbd before 1.16 puts the server's error message only into its debug output.
    nbdinfo.env("LIBNBD_DEBUG", "1").arg(cluster.nbd_uri(1));
    let output = run_with_deadline(nbdinfo, CLIENT_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "nbdinfo succeeded against the Secondary:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("server error message") && line.contains(primary)),
        "the server's error message, as nbdinfo shows it, does not name the Primary '{primary}': \
         {stderr}"
    );
    let refusal = nbd_client::open(&cluster.nbd_socket(1), RESOURCE)
        .expect_err("the Secondary accepted NBD_OPT_GO");
    assert_eq!(
        refusal.reply_type, REP_ERR_POLICY,
        "refusal is not NBD_REP_ERR_POLICY: {refusal:?}"
    );
    assert!(
        refusal.message.contains(primary),
        "refusal does not name the Primary: {refusal:?}"
    );
    assert!(
        !cluster.status(1).open(),
        "the refused open was counted as open on bob"
    );
}
