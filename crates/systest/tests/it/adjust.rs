//! `tandem adjust` (issue 5, live reconfiguration): a changed protocol and timeout apply to a
//! running connection without dropping it; a configuration that does not load, or changes
//! that cannot apply live, are refused and nothing changes.

use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};

const ALICE: usize = 0;
const BOB: usize = 1;

/// Rewrites node `index`'s configuration file with `edit` applied to its text.
fn edit_config(cluster: &Cluster, index: usize, edit: impl Fn(&str) -> String) {
    let path = cluster.config_path(index);
    let text = std::fs::read_to_string(path).expect("read config");
    let edited = edit(&text);
    assert_ne!(text, edited, "the edit changed nothing");
    std::fs::write(path, edited).expect("write config");
}

fn connects_logged(cluster: &Cluster, index: usize) -> usize {
    cluster.log(index).matches(" connected").count()
}

fn protocol_seen(cluster: &Cluster, index: usize) -> String {
    let status = cluster.status_json(index);
    status["resources"][0]["connections"][0]["protocol"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn adjust_changes_the_protocol_live_and_refuses_what_it_cannot_apply() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let connects = connects_logged(&cluster, ALICE);
    assert_eq!(protocol_seen(&cluster, ALICE), "C");

    edit_config(&cluster, ALICE, |text| {
        text.replace("protocol C;", "protocol A;")
            .replace("ping-timeout 20;", "ping-timeout 25;")
    });
    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(report.contains("bob: protocol C -> A"), "report: {report}");
    assert!(
        report.contains("ping-timeout 2s -> 2.5s"),
        "report: {report}"
    );
    assert_eq!(protocol_seen(&cluster, ALICE), "A");
    assert_eq!(
        connects_logged(&cluster, ALICE),
        connects,
        "adjust dropped the connection"
    );
    assert_eq!(
        cluster.status(ALICE).connection_state(NODE_NAMES[BOB]),
        "Connected"
    );

    let again = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(again.contains("r0: no changes"), "second adjust: {again}");

    // A file that does not load: refused with its position, nothing changes.
    edit_config(&cluster, ALICE, |text| {
        text.replace("protocol A;", "protocol Q;")
    });
    let refused = cluster.admin(ALICE, &["adjust", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains(":")
            && stderr.contains("protocol")
            && stderr.contains("nothing was changed"),
        "stderr: {stderr}"
    );
    assert_eq!(protocol_seen(&cluster, ALICE), "A");

    // A changed disk cannot be applied live.
    edit_config(&cluster, ALICE, |text| {
        text.replace("protocol Q;", "protocol C;")
            .replace(".img", ".other.img")
    });
    let refused = cluster.admin(ALICE, &["adjust", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("volumes (disk, meta-disk, device minor) changed"),
        "stderr: {stderr}"
    );
    assert_eq!(
        protocol_seen(&cluster, ALICE),
        "A",
        "a refused adjust applied part of the file"
    );
    cluster.hold_for(
        "the connection stays up",
        Duration::from_millis(300),
        || cluster.status(ALICE).connection_state(NODE_NAMES[BOB]) == "Connected",
    );
}

/// `adjust --skip-net` (drbdadm's option, also through the `drbdadm` entry point) leaves the
/// connection's options as they run; a plain adjust applies them afterwards.
#[test]
fn adjust_skip_net_leaves_the_connection_options_alone() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    edit_config(&cluster, ALICE, |text| {
        text.replace("protocol C;", "protocol A;")
    });
    let report = cluster.admin_ok(ALICE, &["adjust", "--skip-net", RESOURCE]);
    assert!(report.contains("r0: no changes"), "report: {report}");
    assert_eq!(protocol_seen(&cluster, ALICE), "C");
    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(report.contains("bob: protocol C -> A"), "report: {report}");
    assert_eq!(protocol_seen(&cluster, ALICE), "A");
}

/// Runtime `net-options` and `disk-options` (drbdsetup's verbs): the options change on the
/// running connection through adjust's path, each starting from the running values; unknown
/// options and invalid values are refused with the list or the reason; the next adjust
/// brings the file's values back (not persistent, as in DRBD).
#[test]
fn net_options_and_disk_options_change_the_running_values_until_adjust() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    let connects = connects_logged(&cluster, ALICE);
    let report = cluster.admin_ok(
        ALICE,
        &[
            "net-options",
            RESOURCE,
            "--protocol",
            "A",
            "--ping-timeout=25",
        ],
    );
    assert!(
        report.contains("bob: protocol C -> A") && report.contains("ping-timeout 2s -> 2.5s"),
        "report: {report}"
    );
    assert_eq!(protocol_seen(&cluster, ALICE), "A");
    let report = cluster.admin_ok(ALICE, &["net-options", "r0:bob", "--ko-count", "3"]);
    assert!(
        report.contains("ko-count 7 -> 3") && !report.contains("protocol"),
        "report: {report}"
    );
    assert_eq!(
        protocol_seen(&cluster, ALICE),
        "A",
        "a second net-options starts from the running values"
    );

    let refused = cluster.admin(ALICE, &["net-options", RESOURCE, "--shared-secret", "x"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains("'--shared-secret'")
            && stderr.contains("protocol, max-epoch-size"),
        "{stderr}"
    );
    let refused = cluster.admin(ALICE, &["net-options", RESOURCE, "--protocol", "Q"]);
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("protocol"),
        "{refused:?}"
    );

    let report = cluster.admin_ok(
        ALICE,
        &[
            "disk-options",
            RESOURCE,
            "--on-io-error",
            "pass_on",
            "--resync-rate",
            "100M",
        ],
    );
    assert!(
        report.contains("volume 0: on-io-error") && report.contains("bob: resync options"),
        "report: {report}"
    );
    let refused = cluster.admin(ALICE, &["disk-options", "r0/0", "--al-extents", "1000"]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("on-io-error, resync-rate"),
        "{refused:?}"
    );

    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(
        report.contains("protocol A -> C") && report.contains("ko-count 3 -> 7"),
        "adjust brings the file back: {report}"
    );
    assert_eq!(protocol_seen(&cluster, ALICE), "C");
    assert_eq!(
        connects_logged(&cluster, ALICE),
        connects,
        "no option change dropped the connection"
    );
}
