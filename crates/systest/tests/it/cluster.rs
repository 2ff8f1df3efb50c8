//! The harness: a cluster of real `tandem node` processes on loopback, in one tempdir.
//!
//! A [`Cluster`] owns a tempdir holding, per node, a configuration file (DRBD syntax), a
//! backing file, a metadata file, a run directory (`admin.sock`, `nbd.sock`) and a log file
//! that receives the node's stdout and stderr. Nodes are named `alice`, `bob`, `carol` with
//! node-ids 0, 1, 2, and serve one resource, [`RESOURCE`].
//!
//! Metadata (drbd-semantics.md §3): by default every node has EXTERNAL metadata in
//! `DIR/NAME.md` (4 MiB), so the backing files hold nothing but the exported data and two
//! replicas compare byte for byte; [`Spec::internal_metadata`] puts it at the end of the
//! backing file instead, and the comparisons then stop at the exported size. `Cluster::create`
//! runs `tandem create-md` for every node (unless [`Spec::without_metadata`]), so nodes start
//! `Inconsistent`; [`Cluster::connected`] then skips the initial sync with
//! `new-current-uuid --clear-bitmap` (empty disks), [`Cluster::connected_fresh`] does not.
//!
//! Invariants:
//! - Every process the harness starts is killed (SIGKILL) and reaped when the cluster drops,
//!   also when the test panics; the tempdir is removed after that.
//! - Nothing waits with a fixed sleep: every wait polls a condition every [`POLL_INTERVAL`]
//!   against a deadline and fails with the node logs and states when the deadline passes.
//! - A node that dies without the test asking for it (kill/stop) fails the next wait.
//! - Ports come from binding port 0, and a process-wide set makes sure two tests running in
//!   parallel threads never get the same one.
//! - A test that judges timing ([`timing_sensitive`]) never runs alongside one that keeps
//!   both CPUs busy on purpose ([`cpu_heavy`]).

use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::tools::{run_with_deadline, signal};

/// Shared by the tests that judge timing, held alone by the ones that load the machine.
static MACHINE: RwLock<()> = RwLock::new(());

/// Held by a test whose verdict depends on measured latency (the replication manager's
/// thresholds, congestion): several such tests may share the machine, but not with a
/// [`cpu_heavy`] one, which on two cores would make the latency the nodes measure a property
/// of the test run rather than of the emulated link.
pub fn timing_sensitive() -> RwLockReadGuard<'static, ()> {
    MACHINE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Held by a test that keeps the CPUs busy on purpose (the failover torture trials).
pub fn cpu_heavy() -> RwLockWriteGuard<'static, ()> {
    MACHINE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The one resource every test cluster serves.
pub const RESOURCE: &str = "r0";
/// Node names by index; the index is also the node-id.
pub const NODE_NAMES: [&str; 3] = ["alice", "bob", "carol"];
/// Backing file size unless a test asks otherwise.
pub const DISK_BYTES_DEFAULT: u64 = 64 << 20;
/// How often waits poll their condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(25);
/// How long a node may take to open its admin socket after it is spawned.
pub const NODE_READY_DEADLINE: Duration = Duration::from_secs(10);
/// How long two started nodes may take to reach Connected (connect-int is 1 s).
pub const CONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// How long one admin command may take.
pub const ADMIN_DEADLINE: Duration = Duration::from_secs(10);
/// How long a node may take to exit after SIGTERM.
pub const STOP_DEADLINE: Duration = Duration::from_secs(10);
/// How long `tandem create-md` may take.
pub const CREATE_MD_DEADLINE: Duration = Duration::from_secs(20);
/// How long connected fresh nodes may take to become UpToDate after
/// `new-current-uuid --clear-bitmap` (no data moves).
pub const INITIAL_SYNC_DEADLINE: Duration = Duration::from_secs(10);
/// Size of every external metadata file: room for the superblock, the activity log and the
/// bitmaps of every peer of the largest test disk.
pub const META_FILE_BYTES: u64 = 4 << 20;
/// The metadata block unit (and superblock size): 4 KiB.
pub const META_BLOCK_BYTES: u64 = 4096;
/// Lines of each node log printed when a test fails.
const LOG_TAIL_LINES_MAX: usize = 200;

/// What cluster to build.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Number of nodes, 1 to 3.
    pub node_count: usize,
    /// Replication protocol: 'A', 'B' or 'C'.
    pub protocol: char,
    /// Size of every backing file.
    pub disk_bytes: u64,
    /// Extra lines for the `net { }` section, per node index (each node has its own file,
    /// so the nodes may disagree, e.g. on the shared secret).
    pub net_extra: Vec<Vec<String>>,
    /// Lines for the resource's `disk { }` section (peer-device options such as
    /// `resync-rate`), the same on every node; no section when empty.
    pub disk_extra: Vec<String>,
    /// `handlers { NAME "COMMAND"; }` entries; `{dir}` in a command becomes the cluster's
    /// directory.
    pub handlers: Vec<(String, String)>,
    /// Where the metadata lives.
    pub metadata: Metadata,
    /// Whether `Cluster::create` runs `tandem create-md` for every node.
    pub create_md: bool,
    /// Extra lines for one node's `on NAME { }` section (node index, line), written in every
    /// node's file; `{dir}` in a line becomes the cluster's directory.
    pub host_extra: Vec<(usize, String)>,
    /// Lines for the resource's `options { }` section (quorum, ...); none when empty.
    pub options_extra: Vec<String>,
    /// Loopback ports of relays (the link emulator) in front of each node: a node's
    /// configuration names the relay as every other node's address.
    pub relay_ports: Option<Vec<u16>>,
    /// Nodes whose volume is `disk none;` (diskless tiebreakers): no backing file is used
    /// and no metadata is created for them.
    pub diskless: Vec<usize>,
    /// Run every node with the test-only disk fault injection (`TANDEM_TEST_DISK_FAULT`):
    /// [`Cluster::fail_disk`] then makes its data disk fail every I/O with EIO.
    pub disk_faults: bool,
    /// Where each node runs when not on loopback: its network namespace and its address
    /// there (`netns::Network::placements`); `None` runs every node in the test's own
    /// namespace on a loopback port.
    pub placements: Option<Vec<Placement>>,
}

/// One node's network namespace and the peer address it listens on inside it.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The name `ip netns exec` takes.
    pub namespace: String,
    /// The node's `address` in every configuration.
    pub address: SocketAddr,
}

/// Where a node's metadata lives (the `meta-disk` of its volume).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metadata {
    /// `meta-disk "DIR/NAME.md";`: a file of [`META_FILE_BYTES`] beside the backing file,
    /// superblock at offset 0. The whole backing file is exported.
    External,
    /// `meta-disk internal;`: at the end of the backing file, superblock in its last 4 KiB
    /// block. The export is smaller than the backing file.
    Internal,
}

impl Spec {
    /// Two nodes, the given protocol, default disks, external metadata created.
    pub fn two_nodes(protocol: char) -> Spec {
        Spec {
            node_count: 2,
            protocol,
            disk_bytes: DISK_BYTES_DEFAULT,
            net_extra: vec![Vec::new(); 2],
            disk_extra: Vec::new(),
            handlers: Vec::new(),
            metadata: Metadata::External,
            create_md: true,
            host_extra: Vec::new(),
            options_extra: Vec::new(),
            relay_ports: None,
            diskless: Vec::new(),
            disk_faults: false,
            placements: None,
        }
    }

    /// Three nodes in a `connection-mesh`, otherwise like [`Spec::two_nodes`].
    pub fn three_nodes(protocol: char) -> Spec {
        Spec {
            node_count: 3,
            net_extra: vec![Vec::new(); 3],
            ..Spec::two_nodes(protocol)
        }
    }

    /// Nodes can be made to fail their disk I/O ([`Cluster::fail_disk`]).
    pub fn with_disk_faults(mut self) -> Spec {
        self.disk_faults = true;
        self
    }

    /// Makes `node` diskless (`disk none;`).
    pub fn diskless_node(mut self, node: usize) -> Spec {
        self.diskless.push(node);
        self
    }

    /// Peers reach each node through a relay on a fresh loopback port (see
    /// `link::LinkEmulator`, which must be started before the nodes).
    pub fn through_relays(mut self) -> Spec {
        self.relay_ports = Some((0..self.node_count).map(|_| free_port()).collect());
        self
    }

    /// Runs node `i` inside `placements[i].namespace` (with `ip netns exec`), listening on
    /// `placements[i].address`.
    pub fn in_namespaces(mut self, placements: Vec<Placement>) -> Spec {
        assert_eq!(placements.len(), self.node_count, "one placement per node");
        self.placements = Some(placements);
        self
    }

    /// Adds a line to the resource's `options { }` section.
    pub fn options_line(mut self, line: &str) -> Spec {
        self.options_extra.push(line.to_string());
        self
    }

    /// Adds a line to node `node`'s `on` section; `{dir}` becomes the cluster's directory.
    pub fn host_line(mut self, node: usize, line: &str) -> Spec {
        self.host_extra.push((node, line.to_string()));
        self
    }

    /// Adds a `net { }` line to one node's configuration.
    pub fn net_line(mut self, node: usize, line: &str) -> Spec {
        self.net_extra[node].push(line.to_string());
        self
    }

    /// Adds a `net { }` line to every node's configuration.
    pub fn net_line_all(mut self, line: &str) -> Spec {
        for lines in &mut self.net_extra {
            lines.push(line.to_string());
        }
        self
    }

    /// Adds a line to the resource's `disk { }` section.
    pub fn disk_line(mut self, line: &str) -> Spec {
        self.disk_extra.push(line.to_string());
        self
    }

    /// Adds a handler; `{dir}` in `command` becomes the cluster's directory.
    pub fn handler(mut self, name: &str, command: &str) -> Spec {
        self.handlers.push((name.to_string(), command.to_string()));
        self
    }

    /// Backing files of `bytes` bytes.
    pub fn disk_bytes(mut self, bytes: u64) -> Spec {
        self.disk_bytes = bytes;
        self
    }

    /// `meta-disk internal;` instead of external metadata files.
    pub fn internal_metadata(mut self) -> Spec {
        self.metadata = Metadata::Internal;
        self
    }

    /// No `tandem create-md` in `Cluster::create`: the disks have no metadata (and an
    /// invalid configuration, which create-md would refuse, can be written).
    pub fn without_metadata(mut self) -> Spec {
        self.create_md = false;
        self
    }
}

/// Files and addresses of one node.
#[derive(Debug)]
struct Node {
    name: &'static str,
    address: SocketAddr,
    run_dir: PathBuf,
    disk: PathBuf,
    /// The metadata file (external) or the backing file (internal).
    meta: PathBuf,
    config: PathBuf,
    log: PathBuf,
}

/// A set of node processes in one tempdir; see the module documentation.
pub struct Cluster {
    /// Dropped last (after the processes are killed): removes every file.
    dir: TempDir,
    spec: Spec,
    nodes: Vec<Node>,
    /// The running process of each node, `None` when not running.
    processes: RefCell<Vec<Option<Child>>>,
    /// Whether the logs were already printed by a failure message.
    logs_printed: Cell<bool>,
    /// Bytes every node exports, once a node told (internal metadata only).
    export_bytes: Cell<Option<u64>>,
}

impl Cluster {
    /// Writes the configuration, backing and metadata files and, unless the spec says
    /// otherwise, runs `tandem create-md` for every node; starts nothing.
    pub fn create(spec: Spec) -> Cluster {
        assert!(
            (1..=NODE_NAMES.len()).contains(&spec.node_count),
            "node_count out of range"
        );
        assert_eq!(
            spec.net_extra.len(),
            spec.node_count,
            "one net_extra list per node"
        );
        let dir = tempfile::Builder::new()
            .prefix("tandem-systest-")
            .tempdir()
            .expect("cannot create the test tempdir");
        let nodes: Vec<Node> = (0..spec.node_count)
            .map(|index| {
                let name = NODE_NAMES[index];
                let disk = dir.path().join(format!("{name}.img"));
                let meta = match spec.metadata {
                    Metadata::External => dir.path().join(format!("{name}.md")),
                    Metadata::Internal => disk.clone(),
                };
                Node {
                    name,
                    address: match &spec.placements {
                        Some(placements) => placements[index].address,
                        None => SocketAddr::from(([127, 0, 0, 1], free_port())),
                    },
                    run_dir: dir.path().join(format!("{name}.run")),
                    disk,
                    meta,
                    config: dir.path().join(format!("{name}.res")),
                    log: dir.path().join(format!("{name}.log")),
                }
            })
            .collect();
        let processes = RefCell::new((0..spec.node_count).map(|_| None).collect());
        let cluster = Cluster {
            dir,
            spec,
            nodes,
            processes,
            logs_printed: Cell::new(false),
            export_bytes: Cell::new(None),
        };
        for index in 0..cluster.nodes.len() {
            cluster.write_node_files(index);
        }
        if cluster.spec.create_md {
            for index in
                (0..cluster.nodes.len()).filter(|index| !cluster.spec.diskless.contains(index))
            {
                cluster.create_md(index);
            }
        }
        cluster
    }

    fn write_node_files(&self, index: usize) {
        let node = &self.nodes[index];
        std::fs::create_dir_all(&node.run_dir).expect("cannot create a run dir");
        let disk = File::create(&node.disk).expect("cannot create a backing file");
        disk.set_len(self.spec.disk_bytes)
            .expect("cannot size a backing file");
        if self.spec.metadata == Metadata::External {
            let meta = File::create(&node.meta).expect("cannot create a metadata file");
            meta.set_len(META_FILE_BYTES)
                .expect("cannot size a metadata file");
        }
        std::fs::write(&node.config, self.config_text(index)).expect("cannot write a config file");
    }

    /// The command line of `tandem create-md` for one node (not run).
    pub fn create_md_command(&self, index: usize) -> Command {
        let node = &self.nodes[index];
        let mut command = Command::new(tandem_bin());
        command
            .arg("create-md")
            .arg("--config")
            .arg(&node.config)
            .arg("--node")
            .arg(node.name)
            .arg(RESOURCE)
            .stdin(Stdio::null());
        command
    }

    /// Runs `tandem create-md` for one node; a failure fails the test with its output.
    pub fn create_md(&self, index: usize) {
        let output = run_with_deadline(self.create_md_command(index), CREATE_MD_DEADLINE);
        assert!(
            output.status.success(),
            "'tandem create-md' for {} failed with {}:\nstdout: {}\nstderr: {}",
            self.name(index),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Creates the files and starts every node; waits until each answers `status`. The
    /// nodes are fresh: `Inconsistent`, whether they connect or not.
    pub fn start(spec: Spec) -> Cluster {
        let cluster = Cluster::create(spec);
        cluster.start_all();
        cluster
    }

    /// Starts every node that is not running; waits until each answers `status`.
    pub fn start_all(&self) {
        for index in 0..self.nodes.len() {
            if self.processes.borrow()[index].is_none() {
                self.start_node(index);
            }
        }
    }

    /// Starts every node, waits until every link is Connected on both sides, then skips the
    /// initial sync ([`Cluster::initial_sync`]): every disk is UpToDate.
    pub fn connected(spec: Spec) -> Cluster {
        let cluster = Cluster::connected_fresh(spec);
        cluster.initial_sync();
        cluster
    }

    /// Starts every node and waits until every link is Connected on both sides; the disks
    /// stay `Inconsistent` (no initial sync).
    pub fn connected_fresh(spec: Spec) -> Cluster {
        let cluster = Cluster::start(spec);
        cluster.wait_connected();
        cluster
    }

    /// drbd-semantics.md §3 "Skipping it (only for empty disks)": `new-current-uuid
    /// --clear-bitmap` on node 0 while every node is connected; waits until every node is
    /// UpToDate and sees every peer UpToDate and Established.
    pub fn initial_sync(&self) {
        self.admin_ok(0, &["new-current-uuid", "--clear-bitmap", RESOURCE]);
        self.wait_until(
            "every disk and every peer disk is UpToDate and Established",
            INITIAL_SYNC_DEADLINE,
            || self.all_up_to_date(),
        );
    }

    /// Whether every node is UpToDate and sees every peer Connected, Established and
    /// UpToDate with nothing out of sync.
    pub fn all_up_to_date(&self) -> bool {
        // A diskless node is Diskless on every side; its peers keep no bits for it.
        let disk_of = |index: usize| {
            if self.spec.diskless.contains(&index) {
                "Diskless"
            } else {
                "UpToDate"
            }
        };
        (0..self.nodes.len()).all(|index| {
            let status = self.status(index);
            status.disk() == disk_of(index)
                && self.peers_of(index).all(|peer| {
                    let name = self.name(peer);
                    status.connection_state(name) == "Connected"
                        && status.replication(name) == "Established"
                        && status.peer_disk(name) == disk_of(peer)
                        && status.out_of_sync_kib(name) == 0
                })
        })
    }

    /// The indexes of every node but `index`.
    pub fn peers_of(&self, index: usize) -> impl Iterator<Item = usize> {
        (0..self.nodes.len()).filter(move |peer| *peer != index)
    }

    /// Connected and UpToDate, with node 0 promoted to Primary and every peer seeing it as
    /// Primary.
    pub fn with_primary(spec: Spec) -> Cluster {
        let cluster = Cluster::connected(spec);
        cluster.promote_and_wait(0);
        cluster
    }

    /// `primary` on one node; waits until every connected peer sees it as Primary.
    pub fn promote_and_wait(&self, index: usize) {
        self.admin_ok(index, &["primary", RESOURCE]);
        let name = self.name(index);
        self.wait_until(
            &format!("{name} is Primary and every connected peer sees it as Primary"),
            CONNECT_DEADLINE,
            || {
                self.status(index).role() == "Primary"
                    && self.peers_of(index).all(|peer| {
                        let status = self.status(peer);
                        status.connection_state(name) != "Connected"
                            || status.peer_role(name) == "Primary"
                    })
            },
        );
    }

    /// The configuration file of one node: a DRBD resource file with every node in it.
    pub fn config_text(&self, index: usize) -> String {
        let mut text = format!(
            "# Written by the tandem system tests for node {}.\n",
            self.name(index)
        );
        text.push_str(&format!("resource {RESOURCE} {{\n"));
        if !self.spec.options_extra.is_empty() {
            text.push_str("  options {\n");
            for line in &self.spec.options_extra {
                text.push_str(&format!("    {line}\n"));
            }
            text.push_str("  }\n");
        }
        text.push_str("  net {\n");
        // ping-timeout 2 s instead of DRBD's 500 ms: the nodes are debug builds sharing two
        // cores with the rest of the suite, where a task can wait longer than 500 ms to run;
        // the failure-detection tests kill or cut peers, which no timeout hides.
        text.push_str(&format!(
            "    protocol {};\n    connect-int 1;\n    ping-timeout 20;\n",
            self.spec.protocol
        ));
        for line in &self.spec.net_extra[index] {
            text.push_str(&format!("    {line}\n"));
        }
        text.push_str("  }\n");
        if !self.spec.disk_extra.is_empty() {
            text.push_str("  disk {\n");
            for line in &self.spec.disk_extra {
                text.push_str(&format!("    {line}\n"));
            }
            text.push_str("  }\n");
        }
        if !self.spec.handlers.is_empty() {
            text.push_str("  handlers {\n");
            for (name, command) in &self.spec.handlers {
                let command = command.replace("{dir}", &self.dir.path().display().to_string());
                text.push_str(&format!("    {name} \"{command}\";\n"));
            }
            text.push_str("  }\n");
        }
        text.push_str("  volume 0 {\n    device /dev/drbd0;\n");
        if self.spec.metadata == Metadata::Internal {
            text.push_str("    meta-disk internal;\n");
        }
        text.push_str("  }\n");
        for node_id in 0..self.nodes.len() {
            text.push_str(&self.host_section(index, node_id));
        }
        if self.nodes.len() > 2 {
            let hosts: Vec<&str> = self.nodes.iter().map(|node| node.name).collect();
            text.push_str(&format!(
                "  connection-mesh {{\n    hosts {};\n  }}\n",
                hosts.join(" ")
            ));
        }
        text.push_str("}\n");
        text
    }

    /// The `on` section of node `node_id` in node `index`'s configuration file.
    fn host_section(&self, index: usize, node_id: usize) -> String {
        let node = &self.nodes[node_id];
        let mut text = String::new();
        let address = match &self.spec.relay_ports {
            Some(ports) if node_id != index => SocketAddr::from(([127, 0, 0, 1], ports[node_id])),
            _ => node.address,
        };
        if self.spec.diskless.contains(&node_id) {
            text.push_str(&format!(
                "  on {} {{\n    node-id {node_id};\n    address {};\n    volume 0 {{\n      disk \
                 none;\n",
                node.name, address
            ));
        } else {
            text.push_str(&format!(
                "  on {} {{\n    node-id {node_id};\n    address {};\n    volume 0 {{\n      disk \
                 \"{}\";\n",
                node.name,
                address,
                node.disk.display()
            ));
        }
        if self.spec.metadata == Metadata::External && !self.spec.diskless.contains(&node_id) {
            text.push_str(&format!("      meta-disk \"{}\";\n", node.meta.display()));
        }
        text.push_str("    }\n");
        let directory = self.dir.path().display().to_string();
        for (_, line) in self
            .spec
            .host_extra
            .iter()
            .filter(|(index, _)| *index == node_id)
        {
            text.push_str(&format!("    {}\n", line.replace("{dir}", &directory)));
        }
        text.push_str("  }\n");
        text
    }

    /// The command line that runs one node (not spawned).
    pub fn node_command(&self, index: usize) -> Command {
        let node = &self.nodes[index];
        let mut command = match &self.spec.placements {
            Some(placements) => {
                // `ip netns exec` execs the program in place, so the child is the node itself
                // and kill/stop reach it.
                let mut command = Command::new("ip");
                command
                    .args(["netns", "exec", &placements[index].namespace])
                    .arg(tandem_bin());
                command
            }
            None => Command::new(tandem_bin()),
        };
        command
            .arg("node")
            .arg("--config")
            .arg(&node.config)
            .arg("--node")
            .arg(node.name)
            .arg("--run-dir")
            .arg(&node.run_dir)
            .stdin(Stdio::null());
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        if self.spec.disk_faults {
            command.env("TANDEM_TEST_DISK_FAULT", self.disk_fault_trigger(index));
        }
        command
    }

    /// The file whose existence fails one node's data disk I/O ([`Spec::with_disk_faults`]).
    fn disk_fault_trigger(&self, index: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.disk-fault", self.nodes[index].name))
    }

    /// From now on every data read, write and flush of one node's backing disk fails with
    /// EIO (needs [`Spec::with_disk_faults`]).
    pub fn fail_disk(&self, index: usize) {
        assert!(
            self.spec.disk_faults,
            "fail_disk needs Spec::with_disk_faults"
        );
        std::fs::write(self.disk_fault_trigger(index), b"")
            .expect("cannot create the fault trigger");
    }

    /// Ends [`Cluster::fail_disk`].
    pub fn heal_disk(&self, index: usize) {
        let _ = std::fs::remove_file(self.disk_fault_trigger(index));
    }

    /// Spawns one node with its output appended to its log file; does not wait.
    pub fn spawn_node(&self, index: usize) {
        let mut processes = self.processes.borrow_mut();
        assert!(
            processes[index].is_none(),
            "{} is already running",
            self.name(index)
        );
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.nodes[index].log)
            .expect("cannot open a node log");
        let log_for_stdout = log.try_clone().expect("cannot clone a log handle");
        let child = self
            .node_command(index)
            .stdout(log_for_stdout)
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot spawn {}: {error}", tandem_bin().display()));
        processes[index] = Some(child);
    }

    /// Spawns one node and waits until it answers `status --json`.
    pub fn start_node(&self, index: usize) {
        self.spawn_node(index);
        let what = format!("{} answers 'status --json'", self.name(index));
        self.wait_until(&what, NODE_READY_DEADLINE, || {
            self.nodes[index].run_dir.join("admin.sock").exists()
                && self.admin(index, &["status", "--json"]).status.success()
        });
    }

    /// Runs one node that is expected to exit by itself (a start-up error); returns its output.
    pub fn run_node_to_exit(&self, index: usize, deadline: Duration) -> Output {
        run_with_deadline(self.node_command(index), deadline)
    }

    /// SIGKILL: the node dies at once, as in a crash.
    pub fn kill(&self, index: usize) {
        let mut child = self.processes.borrow_mut()[index]
            .take()
            .unwrap_or_else(|| panic!("kill: {} is not running", self.name(index)));
        child.kill().expect("cannot SIGKILL a node");
        child.wait().expect("cannot reap a killed node");
    }

    /// SIGSTOP: the node stops running but keeps its sockets open, so its peers notice
    /// nothing until a ping goes unanswered (a hung node, or a link that died silently).
    pub fn freeze(&self, index: usize) {
        self.send_signal(index, libc::SIGSTOP);
    }

    /// SIGCONT: a frozen node runs again.
    pub fn thaw(&self, index: usize) {
        self.send_signal(index, libc::SIGCONT);
    }

    fn send_signal(&self, index: usize, number: libc::c_int) {
        let processes = self.processes.borrow();
        let child = processes[index]
            .as_ref()
            .unwrap_or_else(|| panic!("signal: {} is not running", self.name(index)));
        signal(child, number);
    }

    /// SIGTERM and wait: the node must exit with status 0 within [`STOP_DEADLINE`].
    pub fn stop(&self, index: usize) {
        let mut child = self.processes.borrow_mut()[index]
            .take()
            .unwrap_or_else(|| panic!("stop: {} is not running", self.name(index)));
        signal(&child, libc::SIGTERM);
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("cannot poll a node") {
                break status;
            }
            if start.elapsed() > STOP_DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                self.fail(&format!(
                    "{} did not exit within {STOP_DEADLINE:?} after SIGTERM",
                    self.name(index)
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        if !status.success() {
            self.fail(&format!(
                "{} exited with {status} after SIGTERM",
                self.name(index)
            ));
        }
    }

    /// Stops the node if it runs, then starts it again.
    pub fn restart(&self, index: usize) {
        if self.processes.borrow()[index].is_some() {
            self.stop(index);
        }
        self.start_node(index);
    }

    /// Whether the node's process is still alive (it was started and has not exited).
    pub fn is_alive(&self, index: usize) -> bool {
        let mut processes = self.processes.borrow_mut();
        match processes[index].as_mut() {
            Some(child) => child.try_wait().expect("cannot poll a node").is_none(),
            None => false,
        }
    }

    /// The process id of a running node.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.processes.borrow()[index].as_ref().map(Child::id)
    }

    /// Runs `tandem --run-dir DIR ARGS...` against one node.
    pub fn admin(&self, index: usize, args: &[&str]) -> Output {
        let mut command = Command::new(tandem_bin());
        command
            .arg("--run-dir")
            .arg(&self.nodes[index].run_dir)
            .args(args)
            .stdin(Stdio::null());
        run_with_deadline(command, ADMIN_DEADLINE)
    }

    /// Runs an admin command that must succeed; returns its stdout.
    pub fn admin_ok(&self, index: usize, args: &[&str]) -> String {
        let output = self.admin(index, args);
        if !output.status.success() {
            self.fail(&format!(
                "'tandem {}' on {} failed with {}:\nstdout: {}\nstderr: {}",
                args.join(" "),
                self.name(index),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        String::from_utf8(output.stdout).expect("admin output is not UTF-8")
    }

    /// Whether node `index` reports quorum (`status --json`).
    pub fn has_quorum(&self, index: usize) -> bool {
        self.status_json(index)["resources"][0]["devices"][0]["quorum"]
            .as_bool()
            .unwrap_or(false)
    }

    /// `tandem events RES` on node `index`, running until the returned value is dropped.
    pub fn events(&self, index: usize) -> Events {
        Events::start(self, index)
    }

    /// `status --json` of one node, parsed.
    pub fn status_json(&self, index: usize) -> Value {
        let text = self.admin_ok(index, &["status", "--json"]);
        serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("status --json is not JSON ({error}):\n{text}"))
    }

    /// `status --json` of one node, with accessors for resource [`RESOURCE`].
    pub fn status(&self, index: usize) -> Status {
        Status(self.status_json(index))
    }

    /// Polls `condition` every [`POLL_INTERVAL`] until it holds; fails the test with the
    /// node states and logs when `deadline` passes or a node dies unasked.
    pub fn wait_until(&self, what: &str, deadline: Duration, mut condition: impl FnMut() -> bool) {
        let start = Instant::now();
        loop {
            self.check_alive(what);
            if condition() {
                return;
            }
            if start.elapsed() > deadline {
                self.fail(&format!(
                    "timed out after {deadline:?} waiting until {what}"
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Polls `invariant` every [`POLL_INTERVAL`] for `duration`; fails the test the first time
    /// it does not hold. For properties that must stay true, such as "never Connected".
    pub fn hold_for(&self, what: &str, duration: Duration, mut invariant: impl FnMut() -> bool) {
        let start = Instant::now();
        while start.elapsed() < duration {
            self.check_alive(what);
            if !invariant() {
                self.fail(&format!(
                    "after {:?}, it no longer holds that {what}",
                    start.elapsed()
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Waits until every pair of running nodes shows `connection: Connected` on both sides.
    pub fn wait_connected(&self) {
        self.wait_until(
            "every link is Connected on both sides",
            CONNECT_DEADLINE,
            || self.all_connected(),
        );
    }

    /// Whether every pair of nodes shows `connection: Connected` on both sides right now.
    pub fn all_connected(&self) -> bool {
        (0..self.nodes.len()).all(|index| {
            let status = self.status(index);
            (0..self.nodes.len())
                .filter(|peer| *peer != index)
                .all(|peer| status.connection_state(self.name(peer)) == "Connected")
        })
    }

    /// Waits until the backing files of nodes `a` and `b` are byte-identical over the
    /// exported bytes ([`Cluster::export_bytes`]: the whole files with external metadata).
    pub fn wait_identical(&self, a: usize, b: usize, deadline: Duration) {
        self.wait_identical_within(a, b, self.export_bytes(), deadline);
    }

    /// [`Cluster::wait_identical`] over the first `length` bytes (an export grown by `resize`
    /// since [`Cluster::export_bytes`] was remembered).
    pub fn wait_identical_within(&self, a: usize, b: usize, length: u64, deadline: Duration) {
        let what = format!(
            "the first {length} bytes of the backing files of {} and {} are identical",
            self.name(a),
            self.name(b)
        );
        let start = Instant::now();
        loop {
            let Some(last_difference) = first_difference_within(self.disk(a), self.disk(b), length)
            else {
                return;
            };
            if start.elapsed() > deadline {
                self.fail(&format!(
                    "timed out after {deadline:?} waiting until {what}: {last_difference}"
                ));
            }
            self.check_alive(&what);
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Bytes each node exports: the backing file size with external metadata; with internal
    /// metadata what a running node reports (`size_kib`), remembered for later calls.
    pub fn export_bytes(&self) -> u64 {
        if self.spec.metadata == Metadata::External {
            return self.spec.disk_bytes;
        }
        if let Some(bytes) = self.export_bytes.get() {
            return bytes;
        }
        let running = (0..self.nodes.len()).find(|index| self.processes.borrow()[*index].is_some());
        let Some(index) = running else {
            self.fail("export_bytes: no node runs to report the exported size");
        };
        let bytes = self.status(index).size_kib() * 1024;
        assert!(
            bytes > 0 && bytes < self.spec.disk_bytes,
            "internal metadata, yet the export is {bytes} bytes of a {} byte backing file",
            self.spec.disk_bytes
        );
        self.export_bytes.set(Some(bytes));
        bytes
    }

    /// Waits until `node` reports replication state `state` towards `peer`.
    pub fn wait_replication(&self, node: usize, peer: usize, state: &str, deadline: Duration) {
        let peer_name = self.name(peer);
        let what = format!(
            "{} reports replication {state} towards {peer_name}",
            self.name(node)
        );
        self.wait_until(&what, deadline, || {
            let status = self.status(node);
            status.connection_state(peer_name) == "Connected"
                && status.replication(peer_name) == state
        });
    }

    /// Waits until `node`'s local disk state is `state`.
    pub fn wait_disk(&self, node: usize, state: &str, deadline: Duration) {
        let what = format!("{}'s disk is {state}", self.name(node));
        self.wait_until(&what, deadline, || self.status(node).disk() == state);
    }

    /// KiB `node` counts out of sync towards `peer`.
    /// `tandem dump-md` of a stopped node's metadata.
    pub fn dumped_metadata(&self, index: usize) -> String {
        let dumped = Command::new(tandem_bin())
            .arg("dump-md")
            .arg("--config")
            .arg(self.config_path(index))
            .args(["--node", self.name(index), RESOURCE])
            .output()
            .expect("run dump-md");
        String::from_utf8_lossy(&dumped.stdout).into_owned()
    }

    /// The `flags:` line of `tandem dump-md` of a stopped node's metadata.
    pub fn dumped_flags(&self, index: usize) -> String {
        let text = self.dumped_metadata(index);
        text.lines()
            .find(|line| line.starts_with("flags:"))
            .unwrap_or_else(|| panic!("dump-md of {}: {text}", self.name(index)))
            .to_string()
    }

    pub fn out_of_sync_kib(&self, node: usize, peer: usize) -> u64 {
        self.status(node).out_of_sync_kib(self.name(peer))
    }

    /// The file holding one node's metadata: its `.md` file, or its backing file with
    /// internal metadata.
    pub fn meta_path(&self, index: usize) -> &Path {
        &self.nodes[index].meta
    }

    /// Where the superblock sits in [`Cluster::meta_path`]: offset 0 of an external file,
    /// the last 4 KiB-aligned block of the backing file with internal metadata
    /// (drbd-semantics.md §3 "Layout").
    pub fn superblock_offset(&self) -> u64 {
        match self.spec.metadata {
            Metadata::External => 0,
            Metadata::Internal => (self.spec.disk_bytes / META_BLOCK_BYTES - 1) * META_BLOCK_BYTES,
        }
    }

    /// `nbd+unix:///r0?socket=RUN_DIR/nbd.sock` of one node.
    pub fn nbd_uri(&self, index: usize) -> String {
        format!(
            "nbd+unix:///{RESOURCE}?socket={}",
            self.nbd_socket(index).display()
        )
    }

    /// The NBD unix socket of one node.
    pub fn nbd_socket(&self, index: usize) -> PathBuf {
        self.nodes[index].run_dir.join("nbd.sock")
    }

    /// The peer address of one node, as written in the configuration.
    pub fn address(&self, index: usize) -> SocketAddr {
        self.nodes[index].address
    }

    /// The backing file of one node.
    pub fn disk(&self, index: usize) -> &Path {
        &self.nodes[index].disk
    }

    /// The configuration file of one node.
    pub fn config_path(&self, index: usize) -> &Path {
        &self.nodes[index].config
    }

    /// The run directory of one node.
    pub fn run_dir(&self, index: usize) -> &Path {
        &self.nodes[index].run_dir
    }

    /// The name of one node.
    pub fn name(&self, index: usize) -> &'static str {
        self.nodes[index].name
    }

    /// The relay ports of [`Spec::through_relays`], if any.
    pub fn relay_ports(&self) -> Option<&[u16]> {
        self.spec.relay_ports.as_deref()
    }

    /// The size of every backing file.
    pub fn disk_bytes(&self) -> u64 {
        self.spec.disk_bytes
    }

    /// The tempdir, for a test's own scratch files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything one node has logged so far, without terminal colour codes.
    pub fn log(&self, index: usize) -> String {
        std::fs::read(&self.nodes[index].log)
            .map(|bytes| strip_ansi(&String::from_utf8_lossy(&bytes)))
            .unwrap_or_default()
    }

    /// Fails the test with `message`, the states of the running nodes and their logs.
    pub fn fail(&self, message: &str) -> ! {
        let report = self.report();
        self.logs_printed.set(true);
        panic!("{message}\n{report}");
    }

    fn check_alive(&self, what: &str) {
        let mut processes = self.processes.borrow_mut();
        let mut dead = Vec::new();
        for (index, slot) in processes.iter_mut().enumerate() {
            if let Some(child) = slot {
                if let Some(status) = child.try_wait().expect("cannot poll a node") {
                    dead.push(format!("{} exited unasked with {status}", self.name(index)));
                    *slot = None;
                }
            }
        }
        drop(processes);
        if !dead.is_empty() {
            self.fail(&format!("while waiting until {what}: {}", dead.join("; ")));
        }
    }

    /// The states (for running nodes) and log tails of every node.
    fn report(&self) -> String {
        let mut report = String::new();
        for index in 0..self.nodes.len() {
            let running = self.processes.borrow()[index].is_some();
            let state = if running {
                let output = self.admin(index, &["status", "--json"]);
                compact_json(&String::from_utf8_lossy(&output.stdout))
            } else {
                "(not running)".to_string()
            };
            report.push_str(&format!("---- {} status: {state}\n", self.name(index)));
        }
        for index in 0..self.nodes.len() {
            let log = self.log(index);
            let lines: Vec<&str> = log.lines().collect();
            let skip = lines.len().saturating_sub(LOG_TAIL_LINES_MAX);
            report.push_str(&format!(
                "---- {} log ({} lines, last {} shown) ----\n",
                self.name(index),
                lines.len(),
                lines.len() - skip
            ));
            for line in &lines[skip..] {
                report.push_str(line);
                report.push('\n');
            }
        }
        report
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if panicking && !self.logs_printed.get() {
            // Admin commands have a deadline, so a hung node cannot hang this report.
            eprintln!("---- test failed; node logs follow ----\n{}", self.report());
        }
        self.kill_all();
    }
}

impl Cluster {
    fn kill_all(&self) {
        for slot in self.processes.borrow_mut().iter_mut() {
            if let Some(mut child) = slot.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Accessors over one node's `status --json` for resource [`RESOURCE`]. Every accessor
/// panics with the whole JSON when the field is missing, since that is a daemon bug.
#[derive(Debug, Clone)]
pub struct Status(pub Value);

/// `tandem events RES` on one node, its output going to a file of the cluster's directory;
/// the process is killed when this is dropped (also when a test fails).
pub struct Events {
    child: Child,
    out: PathBuf,
}

impl Events {
    fn start(cluster: &Cluster, index: usize) -> Events {
        let out = cluster.dir().join(format!("events-{index}.out"));
        let child = Command::new(tandem_bin())
            .arg("--run-dir")
            .arg(cluster.run_dir(index))
            .args(["events", RESOURCE])
            .stdout(File::create(&out).expect("events output file"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start tandem events");
        let events = Events { child, out };
        // `events` shows helper lines from when it connected: wait until it printed its
        // initial state.
        cluster.wait_until(
            "tandem events printed the initial state",
            NODE_READY_DEADLINE,
            || events.text().contains("exists -"),
        );
        events
    }

    /// Everything printed so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits until the output contains `line`; on the deadline, fails showing the output.
    pub fn wait_for(&self, cluster: &Cluster, line: &str, deadline: Duration) {
        let start = Instant::now();
        while !self.text().contains(line) {
            if start.elapsed() > deadline {
                cluster.fail(&format!(
                    "events never showed '{line}'; they showed:\n{}",
                    self.text()
                ));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Status {
    fn missing(&self, what: &str) -> ! {
        panic!("status --json has no {what}: {}", self.0)
    }

    fn resource(&self) -> &Value {
        let resources = self.0["resources"]
            .as_array()
            .unwrap_or_else(|| self.missing("resources"));
        resources
            .iter()
            .find(|resource| resource["name"] == RESOURCE)
            .unwrap_or_else(|| self.missing("resource r0"))
    }

    fn text(&self, value: &Value, what: &str) -> String {
        value
            .as_str()
            .unwrap_or_else(|| self.missing(what))
            .to_string()
    }

    /// This node's role.
    pub fn role(&self) -> String {
        self.text(&self.resource()["role"], "role")
    }

    /// The local disk state of volume 0.
    pub fn disk(&self) -> String {
        self.text(&self.device()["disk"], "devices[0].disk")
    }

    /// Whether an NBD client holds volume 0 open.
    pub fn open(&self) -> bool {
        self.device()["open"]
            .as_bool()
            .unwrap_or_else(|| self.missing("devices[0].open"))
    }

    fn device(&self) -> &Value {
        let devices = self.resource()["devices"]
            .as_array()
            .unwrap_or_else(|| self.missing("devices"));
        devices
            .first()
            .unwrap_or_else(|| self.missing("devices[0]"))
    }

    /// The connection to `peer`, if listed.
    pub fn connection(&self, peer: &str) -> Option<&Value> {
        let connections = self.resource()["connections"]
            .as_array()
            .unwrap_or_else(|| self.missing("connections"));
        connections
            .iter()
            .find(|connection| connection["name"] == peer)
    }

    /// The connection state towards `peer` (`Connected`, `Connecting`, ...).
    pub fn connection_state(&self, peer: &str) -> String {
        let connection = self
            .connection(peer)
            .unwrap_or_else(|| self.missing(&format!("connection {peer}")));
        self.text(&connection["connection"], "connection state")
    }

    /// The role of `peer` as this node sees it.
    pub fn peer_role(&self, peer: &str) -> String {
        let connection = self
            .connection(peer)
            .unwrap_or_else(|| self.missing(&format!("connection {peer}")));
        self.text(&connection["role"], "peer role")
    }

    /// Volume 0 as seen over the connection to `peer`.
    pub fn peer_device(&self, peer: &str) -> &Value {
        let connection = self
            .connection(peer)
            .unwrap_or_else(|| self.missing(&format!("connection {peer}")));
        let devices = connection["peer_devices"]
            .as_array()
            .unwrap_or_else(|| self.missing("peer_devices"));
        devices
            .first()
            .unwrap_or_else(|| self.missing(&format!("peer_devices[0] of {peer}")))
    }

    /// The replication state of volume 0 towards `peer`.
    pub fn replication(&self, peer: &str) -> String {
        self.text(&self.peer_device(peer)["replication"], "replication")
    }

    /// `peer`'s disk state of volume 0.
    pub fn peer_disk(&self, peer: &str) -> String {
        self.text(&self.peer_device(peer)["peer_disk"], "peer_disk")
    }

    /// KiB of volume 0 known to differ from `peer`.
    pub fn out_of_sync_kib(&self, peer: &str) -> u64 {
        self.peer_device(peer)["out_of_sync_kib"]
            .as_u64()
            .unwrap_or_else(|| self.missing("out_of_sync_kib"))
    }

    /// KiB of volume 0 sent to `peer` since this node started (replicated writes and
    /// resync data).
    pub fn sent_kib(&self, peer: &str) -> u64 {
        self.peer_device(peer)["sent_kib"]
            .as_u64()
            .unwrap_or_else(|| self.missing("sent_kib"))
    }

    /// KiB of volume 0 received from `peer` since this node started.
    pub fn received_kib(&self, peer: &str) -> u64 {
        self.peer_device(peer)["received_kib"]
            .as_u64()
            .unwrap_or_else(|| self.missing("received_kib"))
    }

    /// Resync progress towards `peer` in percent, while a resync runs (`done:NN.NN`).
    pub fn done_percent(&self, peer: &str) -> Option<f64> {
        let value = &self.peer_device(peer)["done_percent"];
        if value.is_null() {
            return None;
        }
        Some(
            value
                .as_f64()
                .unwrap_or_else(|| self.missing("done_percent")),
        )
    }

    /// Why the connection to `peer` last failed, if it did.
    pub fn last_error(&self, peer: &str) -> Option<String> {
        let connection = self
            .connection(peer)
            .unwrap_or_else(|| self.missing(&format!("connection {peer}")));
        connection["last_error"].as_str().map(str::to_string)
    }

    /// The exported size of volume 0 in KiB.
    pub fn size_kib(&self) -> u64 {
        self.device()["size_kib"]
            .as_u64()
            .unwrap_or_else(|| self.missing("devices[0].size_kib"))
    }
}

/// The `tandem` binary: `TANDEM_BIN` if set, else built once with `cargo build -p tandem`.
pub fn tandem_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("TANDEM_BIN") {
            return PathBuf::from(path);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "tandem", "--quiet"])
            .current_dir(&root)
            .status()
            .expect("cannot run cargo to build tandem");
        assert!(
            status.success(),
            "'cargo build -p tandem' failed with {status}"
        );
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        let bin = target.join("debug").join("tandem");
        assert!(
            bin.exists(),
            "{} is missing after 'cargo build -p tandem'",
            bin.display()
        );
        bin
    })
}

/// The ports [`free_port`] hands out: below Linux's default ephemeral range (32768-60999),
/// so no outgoing connection of another test can take one as its source port between the
/// check and the node's bind (CI saw "Address already in use" from exactly that).
const TEST_PORTS: std::ops::Range<u16> = 20000..32000;

/// A loopback port that was free a moment ago and that no other test in this process got.
/// The search starts at a place drawn from the process id, so test binaries running at the
/// same time start apart.
pub fn free_port() -> u16 {
    static NEXT: Mutex<Option<u16>> = Mutex::new(None);
    let span = TEST_PORTS.end - TEST_PORTS.start;
    let mut next = NEXT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut port = next.unwrap_or_else(|| {
        let offset = u16::try_from(std::process::id() % u32::from(span)).unwrap_or(0);
        TEST_PORTS.start + offset
    });
    for _ in 0..span {
        let candidate = port;
        port = if port + 1 >= TEST_PORTS.end {
            TEST_PORTS.start
        } else {
            port + 1
        };
        if TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
            *next = Some(port);
            return candidate;
        }
    }
    panic!("no free loopback port in {TEST_PORTS:?}");
}

/// `None` when the two files are byte-identical, else where they first differ.
pub fn first_difference(a: &Path, b: &Path) -> Option<String> {
    first_difference_within(a, b, u64::MAX)
}

/// `None` when the first `length` bytes of the two files (or all of them, if shorter) are
/// identical, else where they first differ.
pub fn first_difference_within(a: &Path, b: &Path, length: u64) -> Option<String> {
    const CHUNK_BYTES: usize = 1 << 20;
    let mut file_a =
        File::open(a).unwrap_or_else(|error| panic!("cannot open {}: {error}", a.display()));
    let mut file_b =
        File::open(b).unwrap_or_else(|error| panic!("cannot open {}: {error}", b.display()));
    let (mut chunk_a, mut chunk_b) = (vec![0u8; CHUNK_BYTES], vec![0u8; CHUNK_BYTES]);
    let mut offset = 0u64;
    loop {
        let wanted = usize::try_from(length.saturating_sub(offset))
            .unwrap_or(CHUNK_BYTES)
            .min(CHUNK_BYTES);
        let length_a = read_full(&mut file_a, &mut chunk_a[..wanted]);
        let length_b = read_full(&mut file_b, &mut chunk_b[..wanted]);
        if chunk_a[..length_a] != chunk_b[..length_b] {
            let at = chunk_a[..length_a]
                .iter()
                .zip(&chunk_b[..length_b])
                .position(|(x, y)| x != y)
                .unwrap_or(length_a.min(length_b));
            return Some(format!(
                "first difference at byte {} (lengths read {length_a} and {length_b})",
                offset + at as u64
            ));
        }
        if length_a == 0 {
            return None;
        }
        offset += length_a as u64;
    }
}

fn read_full(file: &mut File, buf: &mut [u8]) -> usize {
    let mut filled = 0;
    while filled < buf.len() {
        match file
            .read(&mut buf[filled..])
            .expect("cannot read a backing file")
        {
            0 => break,
            count => filled += count,
        }
    }
    filled
}

fn compact_json(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => value.to_string(),
        Err(_) => text.trim().to_string(),
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
}
