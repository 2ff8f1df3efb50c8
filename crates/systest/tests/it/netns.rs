//! Multi-host tests in network namespaces (issue 4 item 7): each node runs in its own network
//! namespace with its own address, all joined by a bridge that lives in one more namespace,
//! so a test can partition a node by taking its bridge port down and limit its bandwidth
//! with `tc ... tbf` (this machine has no netem, so no delay).
//!
//! Layout of one [`Network`] of `n` nodes, made by test process `PID` as its `N`th network:
//!
//! ```text
//!   tdm-PID-N-a  (10.X.Y.1, eth0) ──veth── port0 ┐
//!   tdm-PID-N-b  (10.X.Y.2, eth0) ──veth── port1 ├─ br0   in tdm-PID-N-br
//!   tdm-PID-N-c  (10.X.Y.3, eth0) ──veth── port2 ┘
//! ```
//!
//! Every link is created from inside the test's namespaces (never in the host namespace),
//! so interface names cannot collide with anybody else's; `X.Y` comes from the process id
//! and the counter, so two tests' addresses differ too. Nodes listen on [`NODE_PORT`]
//! inside their namespace; their admin and NBD sockets are unix sockets in the run dir,
//! reachable from the host namespace.
//!
//! Invariants:
//! - Every namespace is recorded before it is created, and [`Network`]'s drop deletes every
//!   recorded one (and with it every veth end and the bridge inside), also when the test
//!   panics. [`NetCluster`] drops its nodes before its network, so no process holds a
//!   namespace that is being deleted.
//! - A network left behind by a test process that was killed (SIGKILL skips drops) is
//!   deleted by the next [`Network::create`], processes still running in it first: the
//!   namespace names carry the pid.
//! - Traffic flows only between the namespaces the test created.
//!
//! Needs root and iproute2 (`ip`, `tc`); without them the test fails and says so. A node
//! started by `ip netns exec` also runs in a mount namespace of its own (`ip` remounts
//! `/sys` there): files and sockets under the test's tempdir are shared, but a FUSE mount a
//! node makes would not be visible to the test.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::ops::Deref;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::cluster::{Cluster, Placement, Spec, NODE_NAMES};
use crate::tools::{require, run_with_deadline};

/// The peer port every node listens on inside its own namespace.
pub const NODE_PORT: u16 = 7789;
/// How long one `ip` or `tc` command may take.
const IP_DEADLINE: Duration = Duration::from_secs(20);
/// Where iproute2 keeps the names of network namespaces.
const NETNS_DIR: &str = "/run/netns";
/// The prefix of every namespace this harness creates.
const PREFIX: &str = "tdm-";
/// The node's end of its veth pair, in the node's namespace.
const NODE_LINK: &str = "eth0";
/// The bridge, in the bridge namespace.
const BRIDGE: &str = "br0";

/// A bridge and one namespace per node; see the module documentation.
#[derive(Debug)]
pub struct Network {
    /// Every namespace this network created (or tried to), deleted on drop.
    created: Vec<String>,
    bridge_namespace: String,
    node_namespaces: Vec<String>,
    /// The second and third octet of every address: `10.X.Y.(index + 1)`.
    subnet: [u8; 2],
}

impl Network {
    /// Creates the bridge namespace and `node_count` node namespaces, linked and up.
    pub fn create(node_count: usize) -> Network {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(
            euid, 0,
            "the network namespace tests need root (ip netns add); run them as root"
        );
        require("ip", "iproute2");
        require("tc", "iproute2");
        delete_orphans();
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let sequence = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let stem = format!("{PREFIX}{pid}-{sequence}");
        let subnet_number = (pid.wrapping_mul(64) ^ sequence) & 0xffff;
        let mut network = Network {
            created: Vec::new(),
            bridge_namespace: format!("{stem}-br"),
            node_namespaces: NODE_NAMES[..node_count]
                .iter()
                .map(|name| format!("{stem}-{}", &name[..1]))
                .collect(),
            subnet: subnet_number.to_be_bytes()[2..]
                .try_into()
                .expect("two bytes"),
        };
        network.add_namespace(&network.bridge_namespace.clone());
        let bridge = network.bridge_namespace.clone();
        ip(&["-n", &bridge, "link", "add", BRIDGE, "type", "bridge"]);
        ip(&["-n", &bridge, "link", "set", BRIDGE, "up"]);
        for index in 0..node_count {
            network.add_node(index);
        }
        network
    }

    fn add_namespace(&mut self, name: &str) {
        // Recorded first: a half-made namespace is deleted too.
        self.created.push(name.to_string());
        ip(&["netns", "add", name]);
        ip(&["-n", name, "link", "set", "lo", "up"]);
    }

    fn add_node(&mut self, index: usize) {
        let namespace = self.node_namespaces[index].clone();
        self.add_namespace(&namespace);
        let bridge = self.bridge_namespace.clone();
        let port = port_name(index);
        ip(&[
            "-n", &bridge, "link", "add", &port, "type", "veth", "peer", "name", NODE_LINK,
            "netns", &namespace,
        ]);
        ip(&["-n", &bridge, "link", "set", &port, "master", BRIDGE, "up"]);
        let address = format!("{}/24", self.address(index));
        ip(&["-n", &namespace, "addr", "add", &address, "dev", NODE_LINK]);
        ip(&["-n", &namespace, "link", "set", NODE_LINK, "up"]);
    }

    /// Node `index`'s address.
    pub fn address(&self, index: usize) -> Ipv4Addr {
        let host = u8::try_from(index + 1).expect("few nodes");
        Ipv4Addr::new(10, self.subnet[0], self.subnet[1], host)
    }

    /// Node `index`'s namespace.
    pub fn namespace(&self, index: usize) -> &str {
        &self.node_namespaces[index]
    }

    /// Where each node runs, for [`Spec::in_namespaces`].
    pub fn placements(&self) -> Vec<Placement> {
        (0..self.node_namespaces.len())
            .map(|index| Placement {
                namespace: self.node_namespaces[index].clone(),
                address: SocketAddr::V4(SocketAddrV4::new(self.address(index), NODE_PORT)),
            })
            .collect()
    }

    /// Cuts node `index` off from every other node: its bridge port goes down, as when a
    /// switch port fails. The node's own interface stays up, so it only stops hearing back.
    pub fn cut(&self, index: usize) {
        ip(&[
            "-n",
            &self.bridge_namespace,
            "link",
            "set",
            &port_name(index),
            "down",
        ]);
    }

    /// Undoes [`Network::cut`].
    pub fn heal(&self, index: usize) {
        ip(&[
            "-n",
            &self.bridge_namespace,
            "link",
            "set",
            &port_name(index),
            "up",
        ]);
    }

    /// Limits node `index`'s link to `rate_kbit` kbit/s in both directions: a token bucket
    /// (`tc qdisc ... tbf`) on the node's interface (what it sends) and on its bridge port
    /// (what it receives).
    pub fn limit_rate(&self, index: usize, rate_kbit: u32) {
        let rate = format!("{rate_kbit}kbit");
        for (namespace, link) in self.link_ends(index) {
            tc(
                &namespace,
                &[
                    "qdisc", "replace", "dev", &link, "root", "tbf", "rate", &rate, "burst",
                    "16kb", "latency", "500ms",
                ],
            );
        }
    }

    /// Bytes the token buckets of [`Network::limit_rate`] passed on node `index`'s link, in
    /// both directions: evidence that traffic went through the limit.
    pub fn limited_bytes(&self, index: usize) -> u64 {
        self.link_ends(index)
            .iter()
            .map(|(namespace, link)| {
                let output = tc(namespace, &["-s", "qdisc", "show", "dev", link]);
                tbf_sent_bytes(&String::from_utf8_lossy(&output.stdout))
            })
            .sum()
    }

    fn link_ends(&self, index: usize) -> [(String, String); 2] {
        [
            (self.node_namespaces[index].clone(), NODE_LINK.to_string()),
            (self.bridge_namespace.clone(), port_name(index)),
        ]
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for name in self.created.iter().rev() {
            delete_namespace(name);
        }
    }
}

/// A [`Cluster`] whose nodes run in the namespaces of a [`Network`]. Field order matters:
/// the nodes are killed before the namespaces are deleted.
pub struct NetCluster {
    pub cluster: Cluster,
    pub network: Network,
}

impl NetCluster {
    /// A network for `spec`'s nodes, and `build` (e.g. `Cluster::with_primary`) over it.
    pub fn build(spec: Spec, build: impl FnOnce(Spec) -> Cluster) -> NetCluster {
        let network = Network::create(spec.node_count);
        let cluster = build(spec.in_namespaces(network.placements()));
        NetCluster { cluster, network }
    }
}

impl Deref for NetCluster {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

/// The bridge-side name of node `index`'s veth.
fn port_name(index: usize) -> String {
    format!("port{index}")
}

/// Runs `ip ARGS`; fails the test with its output if it fails.
fn ip(args: &[&str]) -> Output {
    let mut command = Command::new("ip");
    command.args(args).stdin(Stdio::null());
    checked(command, &format!("ip {}", args.join(" ")))
}

/// Runs `tc ARGS` inside `namespace`; fails the test with its output if it fails.
fn tc(namespace: &str, args: &[&str]) -> Output {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", namespace, "tc"])
        .args(args)
        .stdin(Stdio::null());
    checked(command, &format!("tc {} (in {namespace})", args.join(" ")))
}

fn checked(command: Command, what: &str) -> Output {
    let output = run_with_deadline(command, IP_DEADLINE);
    assert!(
        output.status.success(),
        "'{what}' failed with {} (root and iproute2 are needed):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Deletes one namespace; a failure is reported but does not stop the cleanup of the rest
/// (this runs in drops, also while a test panics).
fn delete_namespace(name: &str) {
    if !std::path::Path::new(NETNS_DIR).join(name).exists() {
        return;
    }
    let mut command = Command::new("ip");
    command.args(["netns", "delete", name]).stdin(Stdio::null());
    let output = run_with_deadline(command, IP_DEADLINE);
    if !output.status.success() {
        eprintln!(
            "cannot delete network namespace {name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Deletes the namespaces of test processes that no longer run (killed before their drops).
fn delete_orphans() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = orphan_pid(&name) {
            if !std::path::Path::new("/proc").join(pid.to_string()).exists() {
                kill_processes_in(&name);
                delete_namespace(&name);
            }
        }
    }
}

/// SIGKILLs what still runs in an orphaned namespace (daemons a killed test left, such as
/// the `pacemaker` test's Corosync and Pacemaker), so they do not outlive it unnamed.
fn kill_processes_in(name: &str) {
    for pid in pids_in(name) {
        // SAFETY: kill has no memory-safety preconditions; the process is in a namespace of
        // ours whose test process is gone.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// The processes running in network namespace `name` (`ip netns pids`).
pub fn pids_in(name: &str) -> Vec<i32> {
    let mut command = Command::new("ip");
    command.args(["netns", "pids", name]).stdin(Stdio::null());
    let output = run_with_deadline(command, IP_DEADLINE);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// The pid in a name of ours (`tdm-PID-N-SUFFIX`), if it is one.
fn orphan_pid(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(PREFIX)?.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u32>().ok()?;
    let suffix = parts.next()?;
    matches!(suffix, "br" | "a" | "b" | "c").then_some(pid)
}

/// The `Sent N bytes` of a `tc -s qdisc show` of a tbf qdisc (0 if there is none).
fn tbf_sent_bytes(text: &str) -> u64 {
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with("qdisc tbf") {
            let stats = lines.next().unwrap_or_default();
            let mut words = stats.split_whitespace();
            if words.next() == Some("Sent") {
                return words
                    .next()
                    .and_then(|bytes| bytes.parse().ok())
                    .unwrap_or(0);
            }
        }
    }
    0
}

/// A namespace left by a test process that no longer exists is deleted by the next
/// network's creation; the network's own namespaces are not.
#[test]
fn orphans_of_dead_test_processes_are_deleted() {
    // pid_max is at most 2^22, so this process id never exists.
    let orphan = format!("{PREFIX}{}-0-a", 1u32 << 23);
    ip(&["netns", "add", &orphan]);
    let network = Network::create(1);
    let left = std::path::Path::new(NETNS_DIR).join(&orphan).exists();
    if left {
        delete_namespace(&orphan);
    }
    assert!(!left, "{orphan} survived Network::create");
    assert!(network
        .created
        .iter()
        .all(|name| std::path::Path::new(NETNS_DIR).join(name).exists()));
}

#[test]
fn names_and_statistics_parse() {
    assert_eq!(orphan_pid("tdm-123-4-br"), Some(123));
    assert_eq!(orphan_pid("tdm-123-4-c"), Some(123));
    assert_eq!(orphan_pid("tdm-123-x-a"), None);
    assert_eq!(orphan_pid("tdm-123-4-z"), None);
    assert_eq!(orphan_pid("other-123-4-a"), None);
    let text =
        "qdisc tbf 8001: root refcnt 2 rate 8Mbit burst 16Kb lat 500ms \n Sent 123456 bytes 90 \
         pkt (dropped 0, overlimits 7 requeues 0) \n backlog 0b 0p requeues 0\n";
    assert_eq!(tbf_sent_bytes(text), 123_456);
    assert_eq!(
        tbf_sent_bytes("qdisc noqueue 0: root refcnt 2\n Sent 5 bytes 1 pkt\n"),
        0
    );
}

/// The harness itself: the nodes' namespaces reach each other through the bridge, a cut
/// port stops that, and every namespace is gone after the drop.
#[test]
fn a_network_connects_cuts_and_cleans_up() {
    let network = Network::create(2);
    let names: Vec<String> = network.created.clone();
    assert_eq!(names.len(), 3);
    let target = network.address(1).to_string();
    let reach = |network: &Network| {
        // A TCP connect from node 0's namespace to a listener in node 1's: bash's /dev/tcp
        // needs no extra package.
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", network.namespace(0), "bash", "-c"])
            .arg(format!("timeout 2 bash -c 'echo > /dev/tcp/{target}/9'"));
        run_with_deadline(command, IP_DEADLINE)
    };
    // Nothing listens on port 9: a reachable host answers with a reset ("refused"), a cut
    // one does not answer at all (timeout, exit 124).
    let reachable = reach(&network);
    assert!(
        String::from_utf8_lossy(&reachable.stderr).contains("refused"),
        "node 1 must answer node 0: {reachable:?}"
    );
    network.cut(1);
    let cut = reach(&network);
    assert_eq!(
        cut.status.code(),
        Some(124),
        "a cut node must not answer: {cut:?}"
    );
    network.heal(1);
    let healed = reach(&network);
    assert!(
        String::from_utf8_lossy(&healed.stderr).contains("refused"),
        "healed: {healed:?}"
    );
    drop(network);
    for name in names {
        assert!(
            !std::path::Path::new(NETNS_DIR).join(&name).exists(),
            "{name} is left behind"
        );
    }
}
