//! The OCF agent `contrib/ocf/tandem` run by hand, without Pacemaker (its scores then go
//! nowhere: crm_attribute fails and the agent carries on): the OCF exit codes of every
//! action against real nodes, and meta-data that resource-agents' schema accepts. The
//! `pacemaker` module runs the same agent under the real cluster manager.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster::{tandem_bin, Cluster, Spec, RESOURCE};
use crate::tools::run_with_deadline;

/// OCF exit codes (OCF 1.1).
const OCF_SUCCESS: i32 = 0;
const OCF_ERR_UNIMPLEMENTED: i32 = 3;
const OCF_ERR_CONFIGURED: i32 = 6;
const OCF_NOT_RUNNING: i32 = 7;
const OCF_RUNNING_PROMOTED: i32 = 8;
/// How long one agent action may take (its own retries stop after the OCF timeout below).
const ACTION_DEADLINE: Duration = Duration::from_secs(60);
/// The action timeout the agent is told, in ms (OCF_RESKEY_CRM_meta_timeout).
const ACTION_TIMEOUT_MS: &str = "20000";
/// resource-agents' schema for agent meta-data.
const METADATA_SCHEMA: &str = "/usr/share/resource-agents/metadata.rng";

fn agent() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/ocf/tandem")
}

/// Runs `action` of the agent for node `index` of `cluster` (`manage_daemon=false`: the
/// harness runs the nodes); returns its exit code.
fn act(cluster: &Cluster, index: usize, action: &str) -> i32 {
    act_with(cluster, index, action, &[])
}

/// Like [`act`], with more (or overriding) `OCF_RESKEY_*` variables.
fn act_with(cluster: &Cluster, index: usize, action: &str, extra: &[(&str, String)]) -> i32 {
    let mut command = Command::new("sh");
    command
        .arg(agent())
        .arg(action)
        .env("OCF_RESKEY_resource", RESOURCE)
        .env("OCF_RESKEY_config", cluster.config_path(index))
        .env("OCF_RESKEY_run_dir", cluster.run_dir(index))
        .env("OCF_RESKEY_tandem", tandem_bin())
        .env("OCF_RESKEY_manage_daemon", "false")
        .env("OCF_RESKEY_connect_timeout", "10")
        .env("OCF_RESKEY_CRM_meta_timeout", ACTION_TIMEOUT_MS)
        .env("OCF_RESOURCE_INSTANCE", "tandem-r0")
        .envs(extra.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::null());
    let output = run_with_deadline(command, ACTION_DEADLINE);
    output
        .status
        .code()
        .unwrap_or_else(|| panic!("agent {action} died: {output:?}"))
}

/// Every action's exit code, in the order Pacemaker would run them on two nodes.
#[test]
fn the_agent_drives_real_nodes_with_ocf_exit_codes() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    let table: [(usize, &str, i32); 14] = [
        (0, "validate-all", OCF_SUCCESS),
        (0, "monitor", OCF_SUCCESS),
        (0, "promote", OCF_SUCCESS),
        (0, "monitor", OCF_RUNNING_PROMOTED),
        (0, "promote", OCF_SUCCESS),
        (1, "monitor", OCF_SUCCESS),
        (1, "notify", OCF_SUCCESS),
        (0, "demote", OCF_SUCCESS),
        (0, "monitor", OCF_SUCCESS),
        (1, "promote", OCF_SUCCESS),
        (1, "monitor", OCF_RUNNING_PROMOTED),
        (0, "stop", OCF_SUCCESS),
        (0, "monitor", OCF_NOT_RUNNING),
        (0, "start", OCF_SUCCESS),
    ];
    for (index, action, expected) in table {
        let code = act(&cluster, index, action);
        if code != expected {
            cluster.fail(&format!(
                "agent {action} on {} exited {code}, not {expected}",
                cluster.name(index)
            ));
        }
    }
    cluster.wait_connected();
    assert_eq!(act(&cluster, 0, "monitor"), OCF_SUCCESS);
    // The stop left node 0 Outdated (a graceful leave); after start it resyncs from node 1.
    cluster.wait_until("node 0 is UpToDate again", Duration::from_secs(30), || {
        cluster.status(0).disk() == "UpToDate"
    });
    // Stopping the Primary demotes it first.
    assert_eq!(act(&cluster, 1, "stop"), OCF_SUCCESS);
    assert_eq!(act(&cluster, 1, "monitor"), OCF_NOT_RUNNING);
    assert_eq!(cluster.status(1).role(), "Secondary");
}

/// With `manage_daemon=true` (the default) the agent starts the node process itself, and
/// its stop ends that process (the node's only resource is down then).
#[test]
fn the_agent_starts_and_stops_its_own_node_process() {
    let cluster = Cluster::create(Spec::two_nodes('C'));
    let own = [
        ("OCF_RESKEY_manage_daemon", "true".to_string()),
        ("OCF_RESKEY_node_name", cluster.name(0).to_string()),
        ("OCF_RESKEY_connect_timeout", "1".to_string()),
        (
            "OCF_RESKEY_log_file",
            cluster.dir().join("agent-node.log").display().to_string(),
        ),
    ];
    assert_eq!(act_with(&cluster, 0, "start", &own), OCF_SUCCESS);
    assert_eq!(act_with(&cluster, 0, "monitor", &own), OCF_SUCCESS);
    let pid_file = cluster.run_dir(0).join("tandem-ocf.pid");
    let pid = std::fs::read_to_string(&pid_file)
        .expect("the agent's pid file")
        .trim()
        .to_string();
    assert!(
        Path::new("/proc").join(&pid).exists(),
        "the node process {pid} does not run"
    );
    assert_eq!(act_with(&cluster, 0, "stop", &own), OCF_SUCCESS);
    // stop waits until `kill -0` fails on the process, then removes the pid file.
    assert!(!pid_file.exists(), "the pid file is left after stop");
    assert!(
        !cluster.admin(0, &["status"]).status.success(),
        "a node still answers after stop"
    );
    assert_eq!(act_with(&cluster, 0, "monitor", &own), OCF_NOT_RUNNING);
}

/// Without a node, without a resource name, or asked for an unknown action, the agent
/// answers with the OCF code for it; its meta-data is valid for resource-agents' schema
/// (checked with xmllint when both are installed).
#[test]
fn the_agent_reports_absence_misconfiguration_and_its_meta_data() {
    let cluster = Cluster::create(Spec::two_nodes('C'));
    assert_eq!(act(&cluster, 0, "monitor"), OCF_NOT_RUNNING, "no node runs");
    assert_eq!(
        act(&cluster, 0, "stop"),
        OCF_SUCCESS,
        "stopping what does not run"
    );
    assert_eq!(act(&cluster, 0, "frobnicate"), OCF_ERR_UNIMPLEMENTED);
    let mut unnamed = Command::new("sh");
    unnamed
        .arg(agent())
        .arg("validate-all")
        .env("OCF_RESKEY_tandem", tandem_bin())
        .stdin(Stdio::null());
    assert_eq!(
        run_with_deadline(unnamed, ACTION_DEADLINE).status.code(),
        Some(OCF_ERR_CONFIGURED)
    );

    let mut meta_data = Command::new("sh");
    meta_data.arg(agent()).arg("meta-data").stdin(Stdio::null());
    let output = run_with_deadline(meta_data, ACTION_DEADLINE);
    assert_eq!(output.status.code(), Some(OCF_SUCCESS));
    let file = cluster.dir().join("meta-data.xml");
    std::fs::write(&file, &output.stdout).expect("write meta-data");
    let have_xmllint = Command::new("xmllint")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !have_xmllint || !Path::new(METADATA_SCHEMA).exists() {
        eprintln!(
            "skipped the schema check: needs xmllint (libxml2-utils) and {METADATA_SCHEMA} \
             (resource-agents)"
        );
        return;
    }
    let mut validate = Command::new("xmllint");
    validate
        .args(["--noout", "--relaxng", METADATA_SCHEMA])
        .arg(&file)
        .stdin(Stdio::null());
    let checked = run_with_deadline(validate, ACTION_DEADLINE);
    assert!(
        checked.status.success(),
        "meta-data fails {METADATA_SCHEMA}: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
}
