//! tandem under a real cluster manager (issue 26): three nodes, each in its own network
//! namespace (`netns::Network`) and its own mount, UTS and IPC namespaces, run Corosync 3
//! (knet, on the namespaces' addresses) and Pacemaker; Pacemaker runs the OCF agent
//! `contrib/ocf/tandem` as a promotable clone, with `contrib/ocf/tandem-fence-peer` as the
//! resource's `fence-peer` handler (`fencing resource-only`) and a dependent
//! `ocf:heartbeat:Dummy` colocated with the promoted instance and ordered after its
//! promotion. How such a cluster forms on one machine: ../shared/reference/pacemaker-netns.md.
//!
//! One node, as the holder script ([`NODE_SCRIPT`]) makes it inside `unshare`:
//!
//! ```text
//!   netns tdm-PID-N-a ─ mount/uts/ipc ns: hostname alice, tmpfs over /etc/corosync,
//!     /var/lib/corosync, /var/lib/pacemaker, /var/log/pacemaker, /run, /dev/shm;
//!     DIR/ocf bound over /usr/lib/ocf/resource.d (the system's agents + tandem's);
//!     DIR/alice.run bound at /run/tandem (the agent's default run dir, seen by the test)
//!   corosync -f, pacemakerd -f ─► pacemaker-execd ─► ocf:tandem:tandem ─► tandem node
//! ```
//!
//! Invariants:
//! - Every process of a node lives in its network namespace; [`PacemakerNode`]'s drop kills
//!   every process `ip netns pids` lists there (also when the test panics) until none is
//!   left, so the private mounts go with the namespaces, and [`Network`]'s drop then
//!   deletes the namespaces. Field order in [`PacemakerCluster`] makes that order.
//! - Nothing waits with a fixed sleep: every wait polls against a deadline.
//!
//! Needs root, iproute2, util-linux (unshare, nsenter), python3 and the Debian packages
//! pacemaker, corosync, crmsh and resource-agents (`scripts/test` installs them); without
//! them the test prints "skipped: REASON" and passes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{tandem_bin, Cluster, Spec, Status, NODE_NAMES, POLL_INTERVAL, RESOURCE};
use crate::ha_netns::{read_back, wait_rejoined, write_blocks, Write};
use crate::netns::{pids_in, Network};
use crate::tools::{self, fresh_seed, run_with_deadline, Rng};

/// How long Corosync and Pacemaker may take to form a quorate three-node cluster.
const FORM_DEADLINE: Duration = Duration::from_secs(120);
/// How long Pacemaker may take to start, promote or recover the clone.
const PACEMAKER_DEADLINE: Duration = Duration::from_secs(120);
/// How long one cluster command (crm, cibadmin, crm_mon) may take.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);
/// How long the killing of a node's processes may take.
const CLEANUP_DEADLINE: Duration = Duration::from_secs(30);
/// How long a rejoin and its resync may take.
const SYNC_DEADLINE: Duration = Duration::from_secs(120);
/// The promotable clone and its primitive.
const CLONE: &str = "tandem-r0-clone";
/// The dependent resource.
const APP: &str = "app";
const MIB: u64 = 1 << 20;

/// Runs inside a node's namespaces (`sh SCRIPT NAME DIR`): private directories for the
/// cluster stack, the agent in place, then Corosync and Pacemaker in the foreground.
const NODE_SCRIPT: &str = r#"set -eu
name=$1
dir=$2
hostname "$name"
for d in /etc/corosync /var/lib/corosync /var/lib/pacemaker /var/log/pacemaker /run; do
    mount -t tmpfs -o mode=0755 tmpfs "$d"
done
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount --bind "$dir/ocf" /usr/lib/ocf/resource.d
mkdir -p /var/lib/pacemaker/cib /var/lib/pacemaker/pengine /var/lib/pacemaker/blackbox \
    /var/lib/pacemaker/cores /run/crm /run/pacemaker /run/tandem
chown -R hacluster:haclient /var/lib/pacemaker /var/log/pacemaker /run/crm /run/pacemaker
chmod 750 /var/lib/pacemaker/cib /var/lib/pacemaker/pengine /var/lib/pacemaker/blackbox \
    /var/lib/pacemaker/cores
mount --bind "$dir/$name.run" /run/tandem
cp "$dir/corosync.conf" "$dir/authkey" /etc/corosync/
chmod 400 /etc/corosync/authkey
corosync -f >"$dir/$name.corosync.log" 2>&1 &
tries=0
until corosync-cfgtool -s >/dev/null 2>&1; do
    tries=$((tries + 1))
    [ "$tries" -lt 300 ] || { echo "corosync does not answer" >&2; exit 1; }
    sleep 0.1
done
pacemakerd -f >"$dir/$name.pacemakerd.log" 2>&1 &
wait
"#;

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network and mount namespaces)".into());
    }
    let programs = [
        ("ip", "iproute2"),
        ("unshare", "util-linux"),
        ("nsenter", "util-linux"),
        ("python3", "python3"),
        ("corosync", "corosync"),
        ("corosync-cfgtool", "corosync"),
        ("pacemakerd", "pacemaker"),
        ("crm_mon", "pacemaker-cli-utils"),
        ("cibadmin", "pacemaker-cli-utils"),
        ("crm_resource", "pacemaker-cli-utils"),
        ("crm", "crmsh"),
    ];
    for (program, package) in programs {
        if !in_path(program) {
            return Some(format!("'{program}' is missing (Debian package {package})"));
        }
    }
    if !Path::new("/usr/lib/ocf/resource.d/heartbeat/Dummy").exists() {
        return Some("ocf:heartbeat:Dummy is missing (Debian package resource-agents)".into());
    }
    None
}

fn in_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|dir| dir.join(program).is_file())
}

/// The directory of the OCF agent and the fence handlers in this checkout.
fn contrib_ocf() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../contrib/ocf")
        .canonicalize()
        .expect("contrib/ocf exists")
}

/// One node's holder process (`unshare` inside `ip netns exec`): its pid names the node's
/// namespaces for `nsenter`.
struct PacemakerNode {
    namespace: String,
    holder: Child,
}

impl PacemakerNode {
    fn spawn(network: &Network, index: usize, dir: &Path) -> PacemakerNode {
        let namespace = network.namespace(index).to_string();
        let log = std::fs::File::create(dir.join(format!("{}.holder.log", NODE_NAMES[index])))
            .expect("holder log");
        let holder = Command::new("ip")
            .args([
                "netns", "exec", &namespace, "unshare", "--mount", "--uts", "--ipc", "--fork", "sh",
            ])
            .arg(dir.join("node.sh"))
            .arg(NODE_NAMES[index])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("holder log"))
            .stderr(log)
            .spawn()
            .expect("cannot spawn the node holder");
        PacemakerNode { namespace, holder }
    }

    /// `program ARGS` inside this node's namespaces.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut command = Command::new("nsenter");
        command
            .args([
                "-t",
                &self.holder.id().to_string(),
                "-n",
                "-m",
                "-u",
                "-i",
                "--",
            ])
            .arg(program)
            .args(args)
            .stdin(Stdio::null());
        command
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        run_with_deadline(self.command(program, args), COMMAND_DEADLINE)
    }

    /// Runs a command that must succeed; returns its stdout.
    fn run_ok(&self, program: &str, args: &[&str]) -> String {
        String::from_utf8_lossy(
            &tools::run_ok(self.command(program, args), COMMAND_DEADLINE).stdout,
        )
        .into_owned()
    }
}

impl Drop for PacemakerNode {
    fn drop(&mut self) {
        let start = Instant::now();
        loop {
            let pids = pids_in(&self.namespace);
            if pids.is_empty() {
                break;
            }
            if start.elapsed() > CLEANUP_DEADLINE {
                eprintln!("processes left in {}: {pids:?}", self.namespace);
                break;
            }
            for pid in pids {
                // SAFETY: kill has no memory-safety preconditions; the pid is in our namespace.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// The whole setup. Field order matters: the nodes' processes die first, then the tandem
/// cluster's files go, then the namespaces.
struct PacemakerCluster {
    nodes: Vec<PacemakerNode>,
    /// The node whose CLI tools (crm_mon, cibadmin, crm_resource) the test uses: one in the
    /// majority while a node is cut off.
    console: std::cell::Cell<usize>,
    cluster: Cluster,
    network: Network,
}

impl Drop for PacemakerCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- Pacemaker view and logs ----\n{}", self.report());
        }
    }
}

impl PacemakerCluster {
    fn start() -> PacemakerCluster {
        let network = Network::create(3);
        let handlers = contrib_ocf();
        let spec = Spec::three_nodes('C')
            .in_namespaces(network.placements())
            .options_line("quorum majority;")
            .options_line("on-no-quorum suspend-io;")
            .net_line_all("fencing resource-only;")
            .handler(
                "fence-peer",
                &handlers.join("tandem-fence-peer").display().to_string(),
            )
            .handler(
                "unfence-peer",
                &handlers.join("tandem-unfence-peer").display().to_string(),
            );
        let cluster = Cluster::create(spec);
        write_stack_files(&cluster, &network);
        let nodes = (0..3)
            .map(|index| PacemakerNode::spawn(&network, index, cluster.dir()))
            .collect();
        PacemakerCluster {
            nodes,
            console: std::cell::Cell::new(0),
            cluster,
            network,
        }
    }

    fn console(&self) -> &PacemakerNode {
        &self.nodes[self.console.get()]
    }

    /// Starts everything, loads the configuration, skips the initial sync and waits until
    /// Pacemaker promoted exactly one node; returns the setup and that node. None (after
    /// printing "skipped: REASON") when the test cannot run here.
    fn running() -> Option<(PacemakerCluster, usize)> {
        if let Some(reason) = skip_reason() {
            eprintln!("skipped: {reason}");
            return None;
        }
        let setup = PacemakerCluster::start();
        let cluster = &setup.cluster;
        setup.wait_formed();
        setup.configure();
        setup.wait_until(
            "Pacemaker starts tandem on every node and they connect",
            PACEMAKER_DEADLINE,
            || (0..3).all(|index| setup.answers(index)) && cluster.all_connected(),
        );
        // Fresh metadata is Inconsistent everywhere, so nothing is promoted until the initial
        // sync is skipped (empty disks), as an administrator does once.
        assert!(
            setup.primaries().is_empty(),
            "an Inconsistent node was promoted"
        );
        cluster.initial_sync();
        let first = setup.wait_one_primary(None);
        Some((setup, first))
    }

    /// Pacemaker runs tandem on `old` again; it rejoins as Secondary of `primary` and
    /// resyncs, the fence constraint against it goes, every write in `written` reads back
    /// from the Primary, and every replica is identical to the Primary's.
    fn check_rejoined(&self, old: usize, primary: usize, written: &[&[Write]]) {
        let cluster = &self.cluster;
        self.wait_until(
            "the old Primary's tandem is back",
            PACEMAKER_DEADLINE,
            || self.answers(old),
        );
        wait_rejoined(cluster);
        assert_eq!(cluster.status(old).role(), "Secondary");
        assert_eq!(
            self.primaries(),
            vec![primary],
            "the Primary moved after the rejoin"
        );
        self.wait_until(
            "the fence constraint is removed after the resync",
            PACEMAKER_DEADLINE,
            || !self.has_fence_constraint(old),
        );
        self.check_replicas(primary, written);
    }

    /// Every write in `written` reads back from `primary`, and every replica is identical
    /// to the Primary's.
    fn check_replicas(&self, primary: usize, written: &[&[Write]]) {
        for writes in written {
            read_back(&self.cluster, primary, writes);
        }
        for node in (0..3).filter(|node| *node != primary) {
            self.cluster.wait_identical(primary, node, SYNC_DEADLINE);
        }
    }

    /// Whether every node's disk is UpToDate and `primary` sees every peer Connected,
    /// Established and UpToDate (what the Secondaries say of each other is not looked at).
    fn synced_from(&self, primary: usize) -> bool {
        if !(0..3).all(|node| {
            self.status_if_up(node)
                .is_some_and(|status| status.disk() == "UpToDate")
        }) {
            return false;
        }
        let Some(status) = self.status_if_up(primary) else {
            return false;
        };
        self.cluster.peers_of(primary).all(|peer| {
            let name = NODE_NAMES[peer];
            status.connection_state(name) == "Connected"
                && status.replication(name) == "Established"
                && status.peer_disk(name) == "UpToDate"
        })
    }

    fn wait_until(&self, what: &str, deadline: Duration, mut condition: impl FnMut() -> bool) {
        let start = Instant::now();
        while !condition() {
            if start.elapsed() > deadline {
                self.cluster.fail(&format!(
                    "timed out after {deadline:?} waiting until {what}\n{}",
                    self.report()
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    fn wait_formed(&self) {
        self.wait_until(
            "Corosync and Pacemaker form a quorate cluster of three",
            FORM_DEADLINE,
            || {
                let output = self.console().run("crm_mon", &["-1"]);
                let text = String::from_utf8_lossy(&output.stdout);
                text.contains("partition with quorum")
                    && text.contains("Online: [ alice bob carol ]")
            },
        );
    }

    /// Loads the resources into the CIB with crmsh (the commands README shows).
    fn configure(&self) {
        let agent_options = format!(
            "resource={RESOURCE} config={} tandem={} log_file=/run/tandem/node.log",
            self.cluster.config_path(0).display(),
            tandem_bin().display()
        );
        let text = format!(
            "property stonith-enabled=false no-quorum-policy=stop\n\
             primitive tandem-r0 ocf:tandem:tandem params {agent_options} \
             op start timeout=90s op promote timeout=90s op demote timeout=90s \
             op stop timeout=100s op monitor interval=3s role=Promoted timeout=20s \
             op monitor interval=4s role=Unpromoted timeout=20s\n\
             clone {CLONE} tandem-r0 meta promotable=true promoted-max=1 promoted-node-max=1 \
             clone-max=3 clone-node-max=1 notify=true migration-threshold=1 \
             resource-stickiness=100\n\
             primitive {APP} ocf:heartbeat:Dummy op monitor interval=5s\n\
             colocation app-with-promoted inf: {APP} {CLONE}:Promoted\n\
             order app-after-promote Mandatory: {CLONE}:promote {APP}:start\n"
        );
        let file = self.cluster.dir().join("cib.crm");
        std::fs::write(&file, text).expect("cannot write the crm configuration");
        self.console().run_ok(
            "crm",
            &["configure", "load", "update", &file.display().to_string()],
        );
    }

    /// Whether node `index`'s tandem answers its admin socket.
    fn answers(&self, index: usize) -> bool {
        self.cluster
            .admin(index, &["status", "--json"])
            .status
            .success()
    }

    /// Node `index`'s status, or None while its tandem is not running: one admin call, so a
    /// node that Pacemaker stops between two calls is not a failure.
    fn status_if_up(&self, index: usize) -> Option<Status> {
        let output = self.cluster.admin(index, &["status", "--json"]);
        if !output.status.success() {
            return None;
        }
        serde_json::from_slice(&output.stdout).ok().map(Status)
    }

    /// The nodes whose tandem answers and is Primary.
    fn primaries(&self) -> Vec<usize> {
        (0..3)
            .filter(|index| {
                self.status_if_up(*index)
                    .is_some_and(|status| status.role() == "Primary")
            })
            .collect()
    }

    /// Where Pacemaker runs `resource` (crm_resource --locate), as node names.
    fn located(&self, resource: &str) -> String {
        let output = self
            .console()
            .run("crm_resource", &["--locate", "--resource", resource]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Node `index`'s promotion score for the clone, as the agent set it (None: no score).
    fn promotion_score(&self, index: usize) -> Option<String> {
        let output = self.console().run(
            "crm_attribute",
            &[
                "--node",
                NODE_NAMES[index],
                "--name",
                "master-tandem-r0",
                "--lifetime",
                "reboot",
                "--query",
                "--quiet",
            ],
        );
        let value = String::from_utf8_lossy(&output.stdout).trim().to_string();
        (output.status.success() && !value.is_empty()).then_some(value)
    }

    fn has_fence_constraint(&self, peer: usize) -> bool {
        let xpath = format!(
            "//rsc_location[@id='tandem-fence-{RESOURCE}-{}']",
            NODE_NAMES[peer]
        );
        self.console()
            .run("cibadmin", &["--query", "--xpath", &xpath])
            .status
            .success()
    }

    /// Waits until exactly one node is Primary and `app` runs there; returns it.
    fn wait_one_primary(&self, not: Option<usize>) -> usize {
        let mut promoted = None;
        self.wait_until(
            "Pacemaker promotes exactly one node and starts app there",
            PACEMAKER_DEADLINE,
            || {
                let primaries = self.primaries();
                assert!(
                    primaries.len() <= 1,
                    "more than one Primary: {primaries:?}\n{}",
                    self.report()
                );
                let Some(&primary) = primaries.first() else {
                    return false;
                };
                if Some(primary) == not {
                    return false;
                }
                promoted = Some(primary);
                self.located(APP)
                    .contains(&format!("running on: {}", NODE_NAMES[primary]))
            },
        );
        promoted.expect("a Primary was found")
    }

    /// SIGKILL to node `index`'s tandem (the pid the agent recorded).
    fn kill_tandem(&self, index: usize) {
        let pid_file = self.cluster.run_dir(index).join("tandem-ocf.pid");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .expect("the agent's pid file")
            .trim()
            .parse()
            .expect("a pid");
        // SAFETY: kill has no memory-safety preconditions; the pid is the node the agent started.
        let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
        assert_eq!(killed, 0, "cannot kill {pid}");
    }

    fn report(&self) -> String {
        let mut text = String::new();
        let output = self.console().run("crm_mon", &["-1A"]);
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        for (index, name) in NODE_NAMES.iter().enumerate() {
            let status = self.cluster.admin(index, &["status", "--verbose"]);
            text.push_str(&format!(
                "---- {name} tandem status ----\n{}{}",
                String::from_utf8_lossy(&status.stdout),
                String::from_utf8_lossy(&status.stderr)
            ));
        }
        let dir = self.cluster.dir();
        for name in NODE_NAMES {
            for (what, path) in [
                ("tandem", dir.join(format!("{name}.run/node.log"))),
                ("holder", dir.join(format!("{name}.holder.log"))),
                ("pacemakerd", dir.join(format!("{name}.pacemakerd.log"))),
            ] {
                let log = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                text.push_str(&format!("---- {name} {what} (last lines) ----\n"));
                for line in tail.iter().rev() {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
        text
    }
}

/// corosync.conf, the authkey, and the OCF directory (the system's agents plus tandem's).
fn write_stack_files(cluster: &Cluster, network: &Network) {
    let dir = cluster.dir();
    let mut nodes = String::new();
    for (index, name) in NODE_NAMES.iter().enumerate() {
        let id = index + 1;
        let address = network.address(index);
        nodes.push_str(&format!(
            "  node {{\n    ring0_addr: {address}\n    nodeid: {id}\n    name: {name}\n  }}\n"
        ));
    }
    // The parser wants one option per line (pacemaker-netns.md).
    let conf = format!(
        "totem {{\n  version: 2\n  cluster_name: tandemtest\n  transport: knet\n  crypto_cipher: \
         none\n  \
         crypto_hash: none\n  token: 3000\n}}\nnodelist {{\n{nodes}}}\nquorum {{\n  provider: \
             corosync_votequorum\n}}\n\
         logging {{\n  to_stderr: yes\n  to_syslog: no\n  to_logfile: no\n}}\n"
    );
    std::fs::write(dir.join("corosync.conf"), conf).expect("corosync.conf");
    std::fs::write(dir.join("authkey"), Rng::new(fresh_seed()).bytes(128)).expect("authkey");
    std::fs::write(dir.join("node.sh"), NODE_SCRIPT).expect("node.sh");
    let ocf = dir.join("ocf");
    let mut copy = Command::new("cp");
    copy.args(["-a", "/usr/lib/ocf/resource.d/."])
        .arg(&ocf)
        .stdin(Stdio::null());
    std::fs::create_dir_all(&ocf).expect("ocf dir");
    assert!(
        run_with_deadline(copy, COMMAND_DEADLINE).status.success(),
        "cannot copy the OCF agents"
    );
    std::fs::create_dir_all(ocf.join("tandem")).expect("ocf/tandem");
    std::fs::copy(contrib_ocf().join("tandem"), ocf.join("tandem/tandem"))
        .expect("cannot install the agent");
}

/// The cluster forms and promotes exactly one node, with `app` on it; SIGKILL of the
/// Primary's tandem makes Pacemaker promote another node (the old one is banned after its
/// failure, `migration-threshold=1`, and fenced by `tandem-fence-peer`) holding every write
/// acknowledged before the kill; cleared, the old node rejoins as Secondary and resyncs
/// (the fence constraint goes), and the three backing files are identical.
#[test]
fn pacemaker_promotes_fails_over_and_resyncs_a_tandem_clone() {
    let Some((setup, first)) = PacemakerCluster::running() else {
        return;
    };
    let cluster = &setup.cluster;
    let mut rng = Rng::new(fresh_seed());
    let before = write_blocks(cluster, first, &mut rng, 0, 16);
    setup.kill_tandem(first);
    let second = setup.wait_one_primary(Some(first));
    read_back(cluster, second, &before);
    assert!(
        setup.has_fence_constraint(first),
        "tandem-fence-peer placed no constraint against the old Primary"
    );
    let after = write_blocks(cluster, second, &mut rng, 8 * MIB, 16);

    // The administrator clears the failure; Pacemaker starts tandem there again.
    setup.console().run_ok(
        "crm_resource",
        &[
            "--cleanup",
            "--resource",
            CLONE,
            "--node",
            NODE_NAMES[first],
        ],
    );
    setup.check_rejoined(first, second, &[&before, &after]);
}

/// A partition: the Primary's link is cut. Its Corosync is alone, without quorum, so its
/// Pacemaker demotes and stops tandem there (`no-quorum-policy=stop`) and never promotes
/// it; the two others keep quorum and promote one of them, which has every write the old
/// Primary acknowledged before the cut. Healed, the old Primary rejoins as Secondary and
/// resyncs, and the replicas are identical.
#[test]
fn pacemaker_replaces_a_partitioned_primary_and_the_minority_never_promotes() {
    let Some((setup, first)) = PacemakerCluster::running() else {
        return;
    };
    let cluster = &setup.cluster;
    let majority: Vec<usize> = (0..3).filter(|node| *node != first).collect();
    setup.console.set(majority[0]);
    let mut rng = Rng::new(fresh_seed());
    let before = write_blocks(cluster, first, &mut rng, 0, 16);
    setup.network.cut(first);

    // The minority's own Pacemaker takes tandem down there, and nothing promotes it again.
    let minority_primary = || {
        setup
            .status_if_up(first)
            .is_some_and(|status| status.role() == "Primary")
    };
    setup.wait_until(
        "the cut-off Primary is demoted or stopped",
        PACEMAKER_DEADLINE,
        || !minority_primary(),
    );
    let mut second = None;
    setup.wait_until(
        "the majority promotes one of its nodes",
        PACEMAKER_DEADLINE,
        || {
            assert!(
                !minority_primary(),
                "the minority promoted its node again\n{}",
                setup.report()
            );
            // A majority node's tandem may be down for a moment while its Pacemaker recovers it.
            let primaries: Vec<usize> = setup
                .primaries()
                .into_iter()
                .filter(|node| majority.contains(node))
                .collect();
            assert!(
                primaries.len() <= 1,
                "two Primaries in the majority: {primaries:?}"
            );
            second = primaries.first().copied();
            second.is_some()
        },
    );
    let second = second.expect("a Primary in the majority");
    read_back(cluster, second, &before);
    let after = write_blocks(cluster, second, &mut rng, 8 * MIB, 16);
    assert!(!minority_primary(), "the minority promoted its node");
    // Healed before its stop completes, the old Primary's going-down state would race the rejoin.
    setup.wait_until(
        "the minority's Pacemaker stops its tandem",
        PACEMAKER_DEADLINE,
        || !setup.answers(first),
    );

    setup.network.heal(first);
    setup.check_rejoined(first, second, &[&before, &after]);
}

/// An Outdated node is never promoted: after some writes one Secondary leaves the Primary
/// gracefully (`disconnect --peer`, so it outdates itself) and keeps its link to the other,
/// its promotion score drops to 1; when the Primary's tandem is killed, Pacemaker promotes
/// the UpToDate Secondary, never the Outdated one, and the new Primary has every
/// acknowledged write. Then everything rejoins and resyncs, replicas identical.
#[test]
fn pacemaker_never_promotes_an_outdated_node() {
    let Some((setup, first)) = PacemakerCluster::running() else {
        return;
    };
    let cluster = &setup.cluster;
    let others: Vec<usize> = (0..3).filter(|node| *node != first).collect();
    let (outdated, fresh) = (others[0], others[1]);
    let mut rng = Rng::new(fresh_seed());
    let before = write_blocks(cluster, first, &mut rng, 0, 16);
    cluster.admin_ok(
        outdated,
        &["disconnect", "--peer", NODE_NAMES[first], RESOURCE],
    );
    cluster.wait_disk(outdated, "Outdated", PACEMAKER_DEADLINE);
    setup.wait_until(
        "the Outdated node's promotion score drops to 1",
        PACEMAKER_DEADLINE,
        || {
            setup.promotion_score(outdated).as_deref() == Some("1")
                && setup.promotion_score(fresh).as_deref() == Some("1000")
        },
    );

    let after = write_blocks(cluster, first, &mut rng, 8 * MIB, 16);
    setup.kill_tandem(first);
    let mut promoted = None;
    setup.wait_until("Pacemaker promotes a survivor", PACEMAKER_DEADLINE, || {
        // A node's tandem may be down for a moment while its Pacemaker recovers it.
        let primaries = setup.primaries();
        assert!(
            !primaries.contains(&outdated),
            "the Outdated node was promoted\n{}",
            setup.report()
        );
        promoted = primaries.into_iter().find(|node| others.contains(node));
        promoted.is_some()
    });
    assert_eq!(
        promoted,
        Some(fresh),
        "Pacemaker promoted the Outdated node"
    );
    read_back(cluster, fresh, &before);
    read_back(cluster, fresh, &after);

    // The new Primary resyncs the Outdated node it is connected to (its handshake after the
    // promotion); the administrator reconnects it to the old Primary, which it left.
    cluster.admin_ok(
        outdated,
        &["connect", "--peer", NODE_NAMES[first], RESOURCE],
    );
    setup.console().run_ok(
        "crm_resource",
        &[
            "--cleanup",
            "--resource",
            CLONE,
            "--node",
            NODE_NAMES[first],
        ],
    );
    // Only the Primary's view is waited for: the old Primary was seen to keep calling the
    // resynced node Outdated (a stale view between Secondaries).
    setup.wait_until(
        "every disk is UpToDate as the new Primary sees it",
        SYNC_DEADLINE,
        || setup.synced_from(fresh),
    );
    assert_eq!(cluster.status(outdated).role(), "Secondary");
    assert_eq!(
        setup.primaries(),
        vec![fresh],
        "the Primary moved after the rejoin"
    );
    setup.check_replicas(fresh, &[&before, &after]);
}
