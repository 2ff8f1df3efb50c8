//! The tandem binary invoked through links named `drbdadm` and `drbdsetup` (issue 27, item
//! 3), against a fake node: the run directory comes from `TANDEM_RUN_DIR`, supported
//! commands reach the node, the rest is refused by name with status 2.

use std::path::{Path, PathBuf};
use std::process::Command;

use admin::{Reply, Request};

use super::{answering, report, run, text};

/// A link named `name` to the tandem binary in `dir`, as the package installs them.
fn link(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tandem"), &path).expect("symlink");
    path
}

fn tool(dir: &Path, name: &str, run_dir: &Path) -> Command {
    let mut command = Command::new(link(dir, name));
    command.env("TANDEM_RUN_DIR", run_dir);
    command
}

#[test]
fn drbdadm_role_reads_the_node_named_by_tandem_run_dir() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let bin = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Status(report()));
    let mut command = tool(bin.path(), "drbdadm", run_dir.path());
    command.args(["role", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "Primary\n");
    assert_eq!(
        node.join().expect("node"),
        Request::Status {
            resource: Some("r0".to_string())
        }
    );
}

#[test]
fn drbdadm_primary_sends_the_request_and_drbdsetup_status_json_is_drbds_schema() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let bin = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Ok { message: None });
    let mut command = tool(bin.path(), "drbdadm", run_dir.path());
    command.args(["primary", "--force", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let expected = Request::Primary {
        resource: Some("r0".to_string()),
        force: true,
    };
    assert_eq!(node.join().expect("node"), expected);

    std::fs::remove_file(run_dir.path().join("admin.sock")).expect("the first fake node's socket");
    let node = answering(run_dir.path(), Reply::Status(report()));
    let mut command = tool(bin.path(), "drbdsetup", run_dir.path());
    command.args(["status", "--json", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(
        printed[0]["connections"][0]["connection-state"], "Connected",
        "{printed}"
    );
    node.join().expect("node");
}

#[test]
fn unsupported_commands_are_refused_by_name_with_status_2() {
    let bin = tempfile::tempdir().expect("tempdir");
    let run_dir = bin.path().join("no-node");
    for (name, args, expected) in [
        (
            "drbdadm",
            &["wipe-md", "r0"][..],
            "drbdadm: 'wipe-md' is not supported by tandem's drbdadm",
        ),
        (
            "drbdsetup",
            &["resize", "r0"][..],
            "drbdsetup: 'resize' is not supported by tandem's drbdsetup",
        ),
        (
            "drbdsetup",
            &["events2", "--diff"][..],
            "drbdsetup: events2: unknown option '--diff'",
        ),
    ] {
        let dir = tempfile::tempdir_in(bin.path()).expect("tempdir");
        let mut command = tool(dir.path(), name, &run_dir);
        command.args(args);
        let output = run(command);
        assert_eq!(output.status.code(), Some(2), "{name} {args:?}");
        assert!(
            text(&output.stderr).starts_with(expected),
            "{}",
            text(&output.stderr)
        );
    }
}

/// Issue 27, item 5: the same queries as tandem verbs, `RES[:PEER][/VOL]` checked by clap.
#[test]
fn tandem_role_cstate_dstate_answer_from_the_status_report() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    for (args, expected) in [
        (["role", "r0"], "Primary\n"),
        (["cstate", "r0:bob"], "Connected\n"),
        (["dstate", "r0/0"], "UpToDate/Inconsistent\n"),
    ] {
        let node = answering(run_dir.path(), Reply::Status(report()));
        let mut command = super::tandem(run_dir.path());
        command.args(args);
        let output = run(command);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stdout), expected, "{args:?}");
        node.join().expect("node");
        std::fs::remove_file(run_dir.path().join("admin.sock")).expect("socket");
    }
    let mut command = super::tandem(run_dir.path());
    command.args(["role", "r0:bob"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("takes no peer"),
        "{}",
        text(&output.stderr)
    );
}

/// `tandem wait-connect`: done at once when Connected; with `--timeout 0`, a Connecting peer
/// is an error naming it.
#[test]
fn wait_connect_returns_when_connected_and_names_who_is_not() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Status(report()));
    let mut command = super::tandem(run_dir.path());
    command.args(["wait-connect", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    node.join().expect("node");
    std::fs::remove_file(run_dir.path().join("admin.sock")).expect("socket");

    let mut connecting = report();
    connecting.resources[0].connections[0].connection = "Connecting".to_string();
    let node = answering(run_dir.path(), Reply::Status(connecting));
    let mut command = super::tandem(run_dir.path());
    command.args(["wait-connect", "--timeout", "0", "r0:bob"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("not connected after")
            && text(&output.stderr).contains("bob Connecting"),
        "{}",
        text(&output.stderr)
    );
    node.join().expect("node");
}
