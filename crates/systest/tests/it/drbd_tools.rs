//! Issue 27: a live three-node cluster read and driven through DRBD's tool names. The test
//! makes links named `drbdadm` and `drbdsetup` to the tandem binary in its own directory
//! (as the package installs them in `/usr/lib/tandem/compat/`), points them at a node with
//! `TANDEM_RUN_DIR`, and checks `drbdsetup events2 --now --statistics`, `tandem events
//! --now --statistics`, `drbdsetup status --json`, `drbdadm role|cstate|dstate|sh-*`, a
//! Nagios-style check script that finds `drbdadm` on its PATH, a switchover with `drbdadm
//! secondary` / `primary` seen through `may_promote`, `drbdadm outdate` refused on the
//! Primary, `drbdadm -V` and `get-gi`, the refusal of a verb tandem lacks, and
//! drbd-reactor's `drbd_*` metric names on the node's Prometheus listener, including every
//! series that `contrib/`'s Grafana dashboard and Prometheus alert rules use.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cluster::{free_port, tandem_bin, Cluster, Spec, ADMIN_DEADLINE, RESOURCE};
use crate::metrics::scrape;
use crate::tools::run_with_deadline;

const ALICE: usize = 0;
const BOB: usize = 1;
const CAROL: usize = 2;
const STATE_DEADLINE: Duration = Duration::from_secs(10);

/// The field names of each events2 object, in drbdsetup's order (tandem's own
/// `verify-found`/`verify-skipped` follow DRBD's last field and are skipped here).
const RESOURCE_FIELDS: &str =
    "name role suspended force-io-failures may_promote promotion_score write-ordering";
const DEVICE_FIELDS: &str = "name volume minor backing_dev disk client open quorum size read \
    written al-writes bm-writes upper-pending lower-pending al-suspended blocked";
const CONNECTION_FIELDS: &str =
    "name peer-node-id conn-name connection role congested ap-in-flight rs-in-flight";
const PEER_DEVICE_FIELDS: &str = "name peer-node-id conn-name volume replication peer-disk \
    peer-client resync-suspended received sent out-of-sync pending unacked";
const PATH_FIELDS: &str = "name peer-node-id conn-name local peer established";

/// The directory with the `drbdadm` and `drbdsetup` links.
fn compat_dir(cluster: &Cluster) -> PathBuf {
    let dir = cluster.dir().join("compat");
    if !dir.exists() {
        std::fs::create_dir(&dir).expect("compat dir");
        for name in ["drbdadm", "drbdsetup"] {
            std::os::unix::fs::symlink(tandem_bin(), dir.join(name)).expect("symlink");
        }
    }
    dir
}

/// Runs `TOOL ARGS...` (a link in the compat directory) against node `index`.
fn tool(cluster: &Cluster, index: usize, tool: &str, args: &[&str]) -> Output {
    let mut command = Command::new(compat_dir(cluster).join(tool));
    command
        .env("TANDEM_RUN_DIR", cluster.run_dir(index))
        .env("__DRBD_NODE__", cluster.name(index))
        .args(args)
        .stdin(Stdio::null());
    run_with_deadline(command, ADMIN_DEADLINE)
}

/// Like [`tool`], for a command that must succeed; its standard output.
fn tool_ok(cluster: &Cluster, index: usize, name: &str, args: &[&str]) -> String {
    let output = tool(cluster, index, name, args);
    if !output.status.success() {
        cluster.fail(&format!(
            "'{name} {}' on {} failed with {}: {}",
            args.join(" "),
            cluster.name(index),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// The `key` of each `key:value` word of an events2 line, after its verb and object.
fn field_names(line: &str) -> String {
    let names: Vec<&str> = line
        .split(' ')
        .skip(2)
        .filter_map(|word| word.split_once(':').map(|(name, _)| name))
        .filter(|name| !matches!(*name, "verify-found" | "verify-skipped"))
        .collect();
    names.join(" ")
}

/// The value of `key` in an events2 line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|word| word.strip_prefix(key)?.strip_prefix(':'))
}

/// Checks a `--now --statistics` dump of a three-node resource: one resource, one device,
/// two connections, two peer devices and two paths, every field in drbdsetup's order, then
/// `exists -`.
fn check_dump(cluster: &Cluster, dump: &str, role: &str) {
    let lines: Vec<&str> = dump.lines().collect();
    let shape = |prefix: &str| {
        lines
            .iter()
            .filter(|line| line.starts_with(prefix))
            .copied()
            .collect::<Vec<_>>()
    };
    let wrong = |what: &str| -> ! { cluster.fail(&format!("events2 dump: {what}:\n{dump}")) };
    if lines.last() != Some(&"exists -") {
        wrong("does not end with 'exists -'");
    }
    let objects = [
        ("exists resource ", RESOURCE_FIELDS, 1),
        ("exists device ", DEVICE_FIELDS, 1),
        ("exists connection ", CONNECTION_FIELDS, 2),
        ("exists peer-device ", PEER_DEVICE_FIELDS, 2),
        ("exists path ", PATH_FIELDS, 2),
    ];
    for (prefix, fields, count) in objects {
        let found = shape(prefix);
        if found.len() != count || found.iter().any(|line| field_names(line) != fields) {
            wrong(&format!(
                "expected {count} '{prefix}' lines with fields '{fields}'"
            ));
        }
    }
    if lines.len() != 9 {
        wrong("expected 9 lines");
    }
    let resource = shape("exists resource ")[0];
    if field(resource, "role") != Some(role) || field(resource, "may_promote") != Some("no") {
        wrong(&format!("expected role:{role} may_promote:no"));
    }
    // Every volume UpToDate and both peers connected: 10000 + 2 × 100.
    if field(resource, "promotion_score") != Some("10200") {
        wrong("expected promotion_score:10200");
    }
    for line in shape("exists connection ") {
        if field(line, "connection") != Some("Connected") {
            wrong("a connection is not Connected");
        }
    }
    for line in shape("exists path ") {
        let local = field(line, "local").unwrap_or_default();
        if !local.starts_with("ipv4:127.0.0.1:") || field(line, "established") != Some("yes") {
            wrong("a path is not an established ipv4 loopback path");
        }
    }
}

/// Issue 27, "Done when": the compat entry points and `events --now --statistics` on a live
/// three-node cluster.
#[test]
fn drbd_tools_read_and_drive_a_live_three_node_cluster() {
    let metrics_port = free_port();
    let spec = Spec::three_nodes('C').host_line(ALICE, &format!("metrics-address {metrics_port};"));
    let cluster = Cluster::with_primary(spec);
    let scraped = scrape(metrics_port);
    check_drbd_metrics(&scraped);
    check_contrib_series(&cluster, &scraped);

    let dump = tool_ok(
        &cluster,
        ALICE,
        "drbdsetup",
        &["events2", "--now", "--statistics", RESOURCE],
    );
    check_dump(&cluster, &dump, "Primary");
    let dump = cluster.admin_ok(BOB, &["events", "--now", "--statistics", RESOURCE]);
    check_dump(&cluster, &dump, "Secondary");

    check_status_json(&cluster);
    // The OCF agent's wait after its connect: at once, everything is Connected.
    let timeouts = [
        "--wfc-timeout=5",
        "--degr-wfc-timeout=5",
        "--outdated-wfc-timeout=5",
    ];
    tool_ok(
        &cluster,
        ALICE,
        "drbdsetup",
        &[&["wait-connect-resource", RESOURCE][..], &timeouts[..]].concat(),
    );
    check_queries(&cluster);
    check_nagios_style_script(&cluster);
    check_drbd_shellfuncs(&cluster);

    // A switchover with drbdadm: once alice is Secondary, bob may promote.
    tool_ok(&cluster, ALICE, "drbdadm", &["secondary", RESOURCE]);
    cluster.wait_until(
        "bob's events2 shows may_promote:yes",
        STATE_DEADLINE,
        || {
            let dump = tool_ok(&cluster, BOB, "drbdsetup", &["events2", "--now", RESOURCE]);
            dump.lines().any(|line| {
                line.starts_with("exists resource ") && field(line, "may_promote") == Some("yes")
            })
        },
    );
    tool_ok(&cluster, BOB, "drbdadm", &["primary", RESOURCE]);
    assert_eq!(
        tool_ok(&cluster, BOB, "drbdadm", &["role", RESOURCE]),
        "Primary\n"
    );

    // drbdadm outdate exists now (issue 27 item 5): on the Primary it is refused, exit 1.
    let refused = tool(&cluster, BOB, "drbdadm", &["outdate", RESOURCE]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Primary"), "{stderr}");
    let version = tool_ok(&cluster, BOB, "drbdadm", &["-V"]);
    assert!(
        version
            .lines()
            .any(|line| line == "DRBD_KERNEL_VERSION_CODE=0x090200"),
        "{version}"
    );
    let gi = tool_ok(
        &cluster,
        BOB,
        "drbdadm",
        &["get-gi", &format!("{RESOURCE}:alice")],
    );
    assert_eq!(gi.trim().split(':').count(), 16, "get-gi: {gi}");
    let refused = tool(&cluster, BOB, "drbdadm", &["wipe-md", RESOURCE]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("'wipe-md' is not supported by tandem's drbdadm"),
        "{stderr}"
    );
}

fn check_status_json(cluster: &Cluster) {
    let text = tool_ok(cluster, ALICE, "drbdsetup", &["status", "--json", RESOURCE]);
    let json: Value = serde_json::from_str(&text)
        .unwrap_or_else(|error| cluster.fail(&format!("{error}:\n{text}")));
    let resource = &json[0];
    assert_eq!(resource["name"], RESOURCE, "{text}");
    assert_eq!(resource["role"], "Primary", "{text}");
    assert_eq!(resource["devices"][0]["disk-state"], "UpToDate", "{text}");
    assert_eq!(resource["devices"][0]["quorum"], true, "{text}");
    let connections = resource["connections"]
        .as_array()
        .expect("connections array");
    assert_eq!(connections.len(), 2, "{text}");
    for connection in connections {
        assert_eq!(connection["connection-state"], "Connected", "{text}");
        assert_eq!(connection["peer-role"], "Secondary", "{text}");
        let peer_device = &connection["peer_devices"][0];
        assert_eq!(peer_device["replication-state"], "Established", "{text}");
        assert_eq!(peer_device["peer-disk-state"], "UpToDate", "{text}");
        assert_eq!(peer_device["percent-in-sync"], 100.0, "{text}");
    }
}

fn check_queries(cluster: &Cluster) {
    assert_eq!(
        tool_ok(cluster, ALICE, "drbdadm", &["role", RESOURCE]),
        "Primary\n"
    );
    assert_eq!(
        tool_ok(cluster, BOB, "drbdadm", &["role", RESOURCE]),
        "Secondary\n"
    );
    assert_eq!(
        tool_ok(cluster, ALICE, "drbdadm", &["cstate", RESOURCE]),
        "Connected\nConnected\n"
    );
    assert_eq!(
        tool_ok(cluster, ALICE, "drbdadm", &["cstate", "r0:bob"]),
        "Connected\n"
    );
    assert_eq!(
        tool_ok(cluster, ALICE, "drbdadm", &["dstate", RESOURCE]),
        "UpToDate/UpToDate/UpToDate\n"
    );
    let config = cluster.config_path(BOB).display().to_string();
    assert_eq!(
        tool_ok(cluster, BOB, "drbdadm", &["-c", &config, "sh-resources"]),
        format!("{RESOURCE}\n")
    );
    let lower = tool_ok(
        cluster,
        BOB,
        "drbdadm",
        &["-c", &config, "sh-ll-dev", RESOURCE],
    );
    assert_eq!(lower, format!("{}\n", cluster.disk(BOB).display()));
}

/// A monitoring check as people write them: `drbdadm` from PATH, exit 0 for OK, 2 for
/// CRITICAL.
fn check_nagios_style_script(cluster: &Cluster) {
    const CHECK: &str = r#"
state=$(drbdadm dstate "$1") || { echo "UNKNOWN: drbdadm failed"; exit 3; }
case "$state" in
  UpToDate/UpToDate*) echo "OK: $1 $state"; exit 0 ;;
  *) echo "CRITICAL: $1 $state"; exit 2 ;;
esac
"#;
    let stdout = run_script(
        cluster,
        "sh",
        CHECK,
        &["check_drbd".as_ref(), RESOURCE.as_ref()],
    );
    assert_eq!(stdout, "OK: r0 UpToDate/UpToDate/UpToDate\n");
}

/// Runs `SHELL -c script ARGS...` against alice with the compat directory first on PATH, as
/// a monitoring or cluster script runs; it must exit 0. Its standard output.
fn run_script(cluster: &Cluster, shell: &str, script: &str, args: &[&std::ffi::OsStr]) -> String {
    let path = format!(
        "{}:{}",
        compat_dir(cluster).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(shell);
    command
        .arg("-c")
        .arg(script)
        .args(args)
        .env("PATH", path)
        .env("TANDEM_RUN_DIR", cluster.run_dir(ALICE))
        .stdin(Stdio::null());
    let output = run_with_deadline(command, ADMIN_DEADLINE);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// drbd-reactor's families that its dashboards and alert rules read, and samples of a healthy
/// three-node Primary with its labels (`name`, `volume`, `minor`, `conn_name`,
/// `peer_node_id`).
fn check_drbd_metrics(text: &str) {
    for family in [
        "drbd_resource_role",
        "drbd_resource_maypromote",
        "drbd_resource_promotionscore",
        "drbd_device_state",
        "drbd_device_quorum",
        "drbd_device_written_bytes_total",
        "drbd_connection_state",
        "drbd_connection_congested",
        "drbd_connection_apinflight_bytes",
        "drbd_peerdevice_outofsync_bytes",
        "drbd_peerdevice_sent_bytes",
    ] {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "no family {family} in:\n{text}"
        );
    }
    let has = |prefix: &str, value: &str| {
        text.lines()
            .any(|line| line.starts_with(prefix) && line.ends_with(&format!("}} {value}")))
    };
    assert!(
        has(
            "drbd_resource_role{name=\"r0\",drbd_resource_role=\"Primary\"",
            "1"
        ),
        "{text}"
    );
    assert!(
        has("drbd_resource_promotionscore{name=\"r0\"", "10200"),
        "{text}"
    );
    assert!(
        has("drbd_device_quorum{name=\"r0\",volume=\"0\",minor=", "1"),
        "{text}"
    );
    for (peer, id) in [("bob", 1), ("carol", 2)] {
        let connection = format!("name=\"r0\",conn_name=\"{peer}\",peer_node_id=\"{id}\"");
        assert!(
            has(
                &format!("drbd_connection_state{{{connection},drbd_connection_state=\"Connected\""),
                "1"
            ),
            "{text}"
        );
        assert!(
            has(
                &format!("drbd_peerdevice_outofsync_bytes{{{connection},volume=\"0\""),
                "0"
            ),
            "{text}"
        );
    }
}

/// Where drbd-utils installs LINBIT's status helpers for its OCF agent and fence scripts;
/// `DRBD_SHELLFUNCS` overrides it.
const DRBD_SHELLFUNCS_DEFAULT: &str = "/usr/lib/ocf/resource.d/linbit/drbd.shellfuncs.sh";

/// Issue 27, item 3: LINBIT's `drbd_set_status_variables` (drbd-utils' drbd.shellfuncs.sh,
/// which parses `drbdsetup events2 --now RES`) reads alice, Primary with two UpToDate peers,
/// through the `drbdsetup` link. Skipped, and said so, where drbd-utils is not installed.
fn check_drbd_shellfuncs(cluster: &Cluster) {
    let expected =
        "primary=true peer_primary=false disk=true pdsk=true unknown=false quorum=true mask=0x7\n";
    check_drbd_shellfuncs_say(cluster, expected);
}

/// Runs LINBIT's `drbd_set_status_variables` on alice and compares what it concluded with
/// `expected`; skipped where drbd-utils is not installed.
fn check_drbd_shellfuncs_say(cluster: &Cluster, expected: &str) {
    let shellfuncs = std::env::var_os("DRBD_SHELLFUNCS")
        .map_or_else(|| PathBuf::from(DRBD_SHELLFUNCS_DEFAULT), PathBuf::from);
    if !shellfuncs.exists() {
        eprintln!(
            "{} not found (drbd-utils not installed; DRBD_SHELLFUNCS=FILE): not checked",
            shellfuncs.display()
        );
        return;
    }
    const SCRIPT: &str = r#"
source "$1" || exit 3
DRBD_RESOURCE=r0 DRBD_HAS_EVENTS2=true DRBD_MY_NODE_ID=0
drbd_set_status_variables
echo "primary=$status_primary peer_primary=$status_some_peer_primary" \
  "disk=$status_disk_all_up_to_date pdsk=$status_pdsk_all_up_to_date" \
  "unknown=$status_pdsk_any_unknown quorum=$status_have_quorum mask=$FAKE_UP_TO_DATE_NODE_MASK"
"#;
    let stdout = run_script(
        cluster,
        "bash",
        SCRIPT,
        &["shellfuncs".as_ref(), shellfuncs.as_os_str()],
    );
    assert_eq!(stdout, expected);
}

/// A diskless tiebreaker is DRBD's "client": `client:yes` on carol, `peer-client:yes` on
/// its peers, so LINBIT's helpers leave it out when they judge the peers' data (alice's peers
/// count as all UpToDate although carol has no disk).
#[test]
fn a_diskless_tiebreaker_is_a_client_in_events2() {
    let cluster = Cluster::with_primary(Spec::three_nodes('C').diskless_node(CAROL));
    let alice = tool_ok(
        &cluster,
        ALICE,
        "drbdsetup",
        &["events2", "--now", RESOURCE],
    );
    let peer_client = |dump: &str, peer: &str| {
        dump.lines()
            .find(|line| {
                line.starts_with("exists peer-device ") && field(line, "conn-name") == Some(peer)
            })
            .and_then(|line| field(line, "peer-client"))
            .map(str::to_string)
    };
    assert_eq!(
        peer_client(&alice, "carol").as_deref(),
        Some("yes"),
        "{alice}"
    );
    assert_eq!(peer_client(&alice, "bob").as_deref(), Some("no"), "{alice}");
    let carol = tool_ok(
        &cluster,
        CAROL,
        "drbdsetup",
        &["events2", "--now", RESOURCE],
    );
    let device = carol
        .lines()
        .find(|line| line.starts_with("exists device "))
        .unwrap_or_default();
    assert_eq!(
        (field(device, "disk"), field(device, "client")),
        (Some("Diskless"), Some("yes")),
        "{carol}"
    );
    check_drbd_shellfuncs_say(
        &cluster,
        "primary=true peer_primary=false disk=true pdsk=true unknown=false quorum=true mask=0x7\n",
    );
}

/// Series families that exist only while a resync or verify runs; the daemon's unit test
/// `every_name_is_prefixed_and_every_family_is_declared_once_before_its_samples` renders them.
const RESYNC_ONLY: [&str; 2] = [
    "tandem_peer_device_resync_done_percent",
    "tandem_peer_device_resync_rate_bytes_per_second",
];

/// The metric names (not label names) of a PromQL expression that start with `tandem_` or
/// `drbd_`.
fn metric_names(expr: &str) -> Vec<String> {
    let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find(|c: char| is_name_char(c)) {
        let after_start = &rest[start..];
        let end = after_start
            .find(|c: char| !is_name_char(c))
            .unwrap_or(after_start.len());
        let (token, after) = after_start.split_at(end);
        let is_label = ["=", "!=", "=~", "!~"]
            .iter()
            .any(|operator| after.trim_start().starts_with(operator));
        if (token.starts_with("tandem_") || token.starts_with("drbd_")) && !is_label {
            names.push(token.to_string());
        }
        rest = after;
    }
    names
}

/// Every string value under an `expr` or `query` key of a JSON document.
fn json_expressions(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "query", Value::String(text)) => found.push(text.clone()),
                    _ => json_expressions(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| json_expressions(item, found)),
        _ => {}
    }
}

/// Issue 27, item 4: every series a dashboard panel or an alert rule of `contrib/` uses is
/// exported by this live node (or renders only while a resync runs: [`RESYNC_ONLY`]).
fn check_contrib_series(cluster: &Cluster, scraped: &str) {
    let contrib = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib");
    let read = |path: &str| {
        std::fs::read_to_string(contrib.join(path))
            .unwrap_or_else(|error| cluster.fail(&format!("contrib/{path}: {error}")))
    };
    let rules = read("prometheus/tandem-alerts.yml");
    let mut expressions: Vec<String> = rules
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("expr:").map(str::to_string))
        .collect();
    assert_eq!(
        expressions.len(),
        5,
        "one expr line per alert rule:\n{rules}"
    );
    let dashboard: Value = serde_json::from_str(&read("grafana/tandem-dashboard.json"))
        .unwrap_or_else(|error| cluster.fail(&format!("dashboard: {error}")));
    json_expressions(&dashboard, &mut expressions);
    let mut names: Vec<String> = expressions
        .iter()
        .flat_map(|expr| metric_names(expr))
        .collect();
    names.sort();
    names.dedup();
    assert!(
        names.len() >= 20,
        "the expressions name too few series: {names:?}"
    );
    let missing: Vec<&String> = names
        .iter()
        .filter(|name| {
            !scraped.contains(&format!("# TYPE {name} ")) && !RESYNC_ONLY.contains(&name.as_str())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "contrib/ uses series a live node does not export: {missing:?}"
    );
}

/// `promtool check rules` on the alert rules, where promtool is installed (Debian's
/// `prometheus` package); elsewhere the test says it did not run it.
#[test]
fn alert_rules_pass_promtool_where_it_is_installed() {
    let rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib/prometheus/tandem-alerts.yml");
    let mut command = Command::new("promtool");
    command
        .arg("check")
        .arg("rules")
        .arg(&rules)
        .stdin(Stdio::null());
    match command.output() {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("promtool is not installed (Debian package prometheus): rules not checked");
        }
        Err(error) => panic!("cannot run promtool: {error}"),
        Ok(output) => assert!(
            output.status.success(),
            "promtool check rules failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

#[test]
fn metric_names_skip_label_names_and_functions() {
    let names = metric_names(concat!(
        r#"(tandem_resource_role{role="Primary"} == 1) unless on (resource) "#,
        r#"sum by (resource) (rate(drbd_x_total{drbd_connection_state!="Off"}[1m]))"#,
    ));
    assert_eq!(names, ["tandem_resource_role", "drbd_x_total"]);
}
