//! Role rules through the admin verbs: one Primary at a time, no demotion while the export
//! is open, a clean switch-over, and `tandem status` in drbdsetup's text layout.

use std::process::Command;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, CONNECT_DEADLINE, NODE_NAMES, RESOURCE};
use crate::nbd_client::{self, REP_ERR_POLICY};

/// How long a close or a role change may take to show in status.
const STATE_DEADLINE: Duration = Duration::from_secs(10);

/// drbd-semantics.md §1 table, `allow-two-primaries` (default no): while the peer is
/// Primary, promotion is refused, with or without --force (--force only overrides the
/// local disk state). Exit status 1 and a message that says the peer is Primary.
#[test]
fn promotion_is_refused_while_the_peer_is_primary() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    for args in [
        &["primary", RESOURCE][..],
        &["primary", "--force", RESOURCE][..],
    ] {
        let output = cluster.admin(1, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(1),
            "'tandem {}' on bob: {stderr}",
            args.join(" ")
        );
        assert!(
            stderr.contains(NODE_NAMES[0]) && stderr.contains("Primary"),
            "'tandem {}' on bob does not say that alice is Primary: {stderr}",
            args.join(" ")
        );
        assert_eq!(cluster.status(1).role(), "Secondary");
        assert_eq!(cluster.status(0).role(), "Primary");
    }
}

/// drbd-semantics.md §2 roles, DRBD's "Device is held open by someone": a Primary whose
/// device is open cannot be demoted. Once the client closes, demotion works, and the other
/// node can then be promoted and serve while the old Primary refuses and names it.
#[test]
fn demotion_is_refused_while_an_nbd_client_holds_the_export() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let client =
        nbd_client::open(&cluster.nbd_socket(0), RESOURCE).expect("the Primary refused NBD_OPT_GO");
    assert!(
        cluster.status(0).open(),
        "status does not show the export open while a client holds it"
    );
    let output = cluster.admin(0, &["secondary", RESOURCE]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "'tandem secondary' with the export open: {stderr}"
    );
    assert!(
        stderr.to_lowercase().contains("open"),
        "the refusal does not say the export is open: {stderr}"
    );
    assert_eq!(cluster.status(0).role(), "Primary");

    client.disconnect();
    cluster.wait_until("alice's export is closed", STATE_DEADLINE, || {
        !cluster.status(0).open()
    });
    cluster.admin_ok(0, &["secondary", RESOURCE]);
    cluster.wait_until("bob sees alice as Secondary", STATE_DEADLINE, || {
        cluster.status(1).peer_role(NODE_NAMES[0]) == "Secondary"
    });
    cluster.admin_ok(1, &["primary", RESOURCE]);
    assert_eq!(cluster.status(1).role(), "Primary");
    cluster.wait_until("alice sees bob as Primary", STATE_DEADLINE, || {
        cluster.status(0).peer_role(NODE_NAMES[1]) == "Primary"
    });
    let served = nbd_client::open(&cluster.nbd_socket(1), RESOURCE)
        .expect("the new Primary refused NBD_OPT_GO");
    let refusal = nbd_client::open(&cluster.nbd_socket(0), RESOURCE)
        .expect_err("the old Primary still serves");
    assert_eq!(refusal.reply_type, REP_ERR_POLICY, "{refusal:?}");
    assert!(
        refusal.message.contains(NODE_NAMES[1]),
        "the refusal does not name the new Primary: {refusal:?}"
    );
    served.disconnect();
}

/// drbd-semantics.md §4: `drbdadm status` layout: the resource line with the role, the
/// local disk indented by two, each peer by two with its role, its disk by four.
#[test]
fn status_text_has_the_drbd_layout() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let expected = [
        (
            0,
            [
                "r0 role:Primary",
                "  disk:UpToDate",
                "  bob role:Secondary",
                "    peer-disk:UpToDate",
            ],
        ),
        (
            1,
            [
                "r0 role:Secondary",
                "  disk:UpToDate",
                "  alice role:Primary",
                "    peer-disk:UpToDate",
            ],
        ),
    ];
    for (index, lines) in expected {
        let text = cluster.admin_ok(index, &["status"]);
        let actual: Vec<&str> = text.lines().collect();
        assert!(
            actual.len() >= 4,
            "status on {} is too short:\n{text}",
            cluster.name(index)
        );
        assert_eq!(
            actual[0],
            lines[0],
            "resource line on {}:\n{text}",
            cluster.name(index)
        );
        // drbdsetup may add ` open:no` and the like after the disk state.
        let disk_ok = actual[1] == lines[1] || actual[1].starts_with(&format!("{} ", lines[1]));
        assert!(disk_ok, "disk line on {}:\n{text}", cluster.name(index));
        assert_eq!(
            actual[2],
            lines[2],
            "peer line on {}:\n{text}",
            cluster.name(index)
        );
        assert_eq!(
            actual[3],
            lines[3],
            "peer disk line on {}:\n{text}",
            cluster.name(index)
        );
        let text_for_resource = cluster.admin_ok(index, &["status", RESOURCE]);
        assert_eq!(
            text_for_resource, text,
            "'status r0' differs from 'status' with one resource"
        );
        // --verbose adds the device minor (`device /dev/drbd0;`), as drbdsetup does.
        let verbose = cluster.admin_ok(index, &["status", "--verbose", RESOURCE]);
        assert!(
            verbose
                .lines()
                .nth(1)
                .is_some_and(|line| line.contains(" minor:0 ") || line.ends_with(" minor:0")),
            "no minor:0 on the volume line of {}:\n{verbose}",
            cluster.name(index)
        );
    }
}

/// `auto-promote yes` (DRBD's default): opening the export on a Secondary makes it Primary
/// when nothing forbids it, and closing the last opener makes it Secondary again; with a peer
/// Primary the open is refused with the reason; `NBD_OPT_INFO` (nbdinfo) never promotes.
#[test]
fn auto_promote_opens_as_primary_and_demotes_on_the_last_close() {
    const ALICE: usize = 0;
    const BOB: usize = 1;
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    // nbdinfo opens with NBD_OPT_GO, so it is an opener like any other: bob is Primary while
    // it looks, Secondary again once it is done.
    let info = Command::new("nbdinfo")
        .arg(cluster.nbd_uri(BOB))
        .output()
        .expect("run nbdinfo");
    assert!(
        info.status.success(),
        "nbdinfo: {}",
        String::from_utf8_lossy(&info.stderr)
    );
    cluster.wait_until(
        "bob is Secondary again after nbdinfo",
        CONNECT_DEADLINE,
        || cluster.status(BOB).role() == "Secondary",
    );

    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("auto-promote on open");
    assert_eq!(cluster.status(ALICE).role(), "Primary");
    let refused = nbd_client::open(&cluster.nbd_socket(BOB), RESOURCE)
        .expect_err("bob must refuse while alice is Primary");
    assert!(
        refused.message.contains("auto-promote failed"),
        "{}",
        refused.message
    );
    assert_eq!(client.write(0, &[7; 4096]), 0);
    client.disconnect();
    cluster.wait_until(
        "alice is Secondary again after the last close",
        CONNECT_DEADLINE,
        || cluster.status(ALICE).role() == "Secondary",
    );

    let explicit = Cluster::connected(Spec::two_nodes('C').options_line("auto-promote no;"));
    let refused =
        nbd_client::open(&explicit.nbd_socket(ALICE), RESOURCE).expect_err("auto-promote no");
    assert!(
        refused.message.contains("is Secondary"),
        "{}",
        refused.message
    );
}

/// Three nodes, no quorum: bob, cut off from alice by `disconnect`, is promoted while carol
/// still follows alice. When bob connects again, carol keeps following alice and drops bob's
/// connection (each retry) with a reason naming both Primaries (a Secondary follows one Primary:
/// the old and new Primary's data would otherwise meet on its disk); alice and bob, both Primary,
/// refuse each other.
#[test]
fn a_secondary_follows_one_primary() {
    let cluster = Cluster::with_primary(Spec::three_nodes('C'));
    let (alice, bob, carol) = (0, 1, 2);
    cluster.admin_ok(bob, &["disconnect", RESOURCE]);
    cluster.wait_until("bob is cut off", STATE_DEADLINE, || {
        let status = cluster.status(bob);
        status.connection_state("alice") != "Connected"
            && status.connection_state("carol") != "Connected"
    });
    cluster.admin_ok(bob, &["primary", "--force", RESOURCE]);
    cluster.admin_ok(bob, &["connect", RESOURCE]);
    cluster.wait_until(
        "carol refuses bob as a second Primary",
        CONNECT_DEADLINE,
        || {
            cluster
                .log(carol)
                .contains("bob is Primary while this node already follows the Primary alice")
        },
    );
    // Each retry of bob's shows as Connected on carol until bob's handshake arrives and carol
    // drops it (a millisecond, longer on a loaded machine): what never happens is a handshake
    // carol accepts, which would establish replication with bob.
    cluster.hold_for("carol stays with alice", Duration::from_secs(3), || {
        let status = cluster.status(carol);
        status.connection_state("alice") == "Connected"
            && status.peer_role("alice") == "Primary"
            && status.replication("bob") != "Established"
    });
    assert_ne!(
        cluster.status(alice).connection_state("bob"),
        "Connected",
        "two Primaries never connect"
    );
}
