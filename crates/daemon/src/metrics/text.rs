//! The Prometheus text exposition format (version 0.0.4) of a node's status: a pure function
//! from status values to text, so it is tested without sockets.
//!
//! Invariants:
//! - Every metric family appears once: its `# HELP` and `# TYPE` lines, then all its samples
//!   (of every resource). Families come in the order of first use, samples in the order of
//!   the input, so equal input renders to identical text.
//! - Label values are escaped as the format requires (`\\`, `\"`, `\n`); names are constants.
//! - `tandem_*` counters end in `_total`; sizes are in bytes (`_bytes`), ages in seconds
//!   (`_seconds`).
//! - States are one-hot: one sample per possible state, 1 for the current one and 0 for the
//!   others, so a state that is left drops to 0 instead of lingering as a stale series.
//! - A family with no sample (the resync progress while nothing resyncs) is left out.
//! - The `tandem_*` families come first; then the same status under drbd-reactor's `drbd_*`
//!   names and labels (`drbd`), whose counters keep drbd-reactor's names even without
//!   `_total`.

mod drbd;

use std::fmt::Write;

use repl::{
    ConnState, DiskState, EngineStatus, PeerStatus, PeerVolumeStatus, Protocol, ReplState, Role,
    VolumeStatus,
};

/// What a scrape shows of a node.
#[derive(Debug, Clone)]
pub(crate) struct NodeSample {
    /// The node's name (its `on NAME` section).
    pub(crate) node: String,
    /// The tandem version.
    pub(crate) version: String,
    /// Every resource of the node, in configuration order.
    pub(crate) resources: Vec<ResourceSample>,
}

/// One resource: the engine's status and what the daemon knows besides (as `tandem status`).
#[derive(Debug, Clone)]
pub(crate) struct ResourceSample {
    /// The resource name.
    pub(crate) name: String,
    /// The engine's status.
    pub(crate) status: EngineStatus,
    /// This node has quorum.
    pub(crate) quorum: bool,
    /// Client I/O is suspended (quorum lost with `on-no-quorum suspend-io`, or fencing).
    pub(crate) suspended: bool,
    /// The resource is down (`tandem down`): every connection shows `StandAlone`.
    pub(crate) down: bool,
    /// Peer names by node id; a peer missing here is shown as `node-ID`.
    pub(crate) peer_names: Vec<(u8, String)>,
    /// The Selective Replication Manager's latest measurements (None: `srm off`, or no
    /// interval has passed yet).
    pub(crate) srm: Option<srm::Observation>,
    /// The resource as `tandem status` reports it, for the `drbd_*` families.
    pub(crate) report: admin::ResourceStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
}

/// A metric family: name, help text and type.
#[derive(Debug, Clone, Copy)]
struct Metric {
    name: &'static str,
    help: &'static str,
    kind: Kind,
}

const fn gauge(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: Kind::Gauge,
    }
}

const fn counter(name: &'static str, help: &'static str) -> Metric {
    Metric {
        name,
        help,
        kind: Kind::Counter,
    }
}

const BUILD_INFO: Metric = gauge(
    "tandem_build_info",
    "Always 1; the labels name the tandem version and this node.",
);
const RESOURCE_ROLE: Metric = gauge(
    "tandem_resource_role",
    "1 for this node's role in the resource (label role), 0 for the other roles.",
);
const RESOURCE_QUORUM: Metric = gauge(
    "tandem_resource_quorum",
    "1 while this node has quorum for the resource (always 1 with quorum off).",
);
const RESOURCE_SUSPENDED: Metric = gauge(
    "tandem_resource_suspended",
    "1 while client I/O is suspended (quorum lost with on-no-quorum suspend-io, or fencing).",
);
const DEVICE_DISK_STATE: Metric = gauge(
    "tandem_device_disk_state",
    "1 for the local disk state of the volume (label state), 0 for the other states.",
);
const DEVICE_SIZE: Metric = gauge("tandem_device_size_bytes", "Exported size of the volume.");
const DEVICE_WRITTEN: Metric = counter(
    "tandem_device_written_bytes_total",
    "Bytes written by clients to the volume since the node started.",
);
const DEVICE_AL_WRITES: Metric = counter(
    "tandem_device_al_writes_total",
    "Activity-log transactions written since the node started.",
);
const DEVICE_BM_WRITES: Metric = counter(
    "tandem_device_bm_writes_total",
    "Bitmap pages written since the node started.",
);
const DEVICE_UPPER_PENDING: Metric = gauge(
    "tandem_device_upper_pending",
    "Client requests in flight on the volume.",
);
const DEVICE_LOWER_PENDING: Metric = gauge(
    "tandem_device_lower_pending",
    "Local disk operations in flight on the volume.",
);
const DEVICE_POSSIBLY_STALE: Metric = gauge(
    "tandem_device_possibly_stale",
    "1 while this node is marked possibly stale (replicated to asynchronously, not caught up): \
     promotion needs --force.",
);
const CONNECTION_CONNECTED: Metric = gauge(
    "tandem_connection_connected",
    "1 while the connection to the peer is Connected.",
);
const CONNECTION_STATE: Metric = gauge(
    "tandem_connection_state",
    "1 for the state of the connection to the peer (label state), 0 for the other states.",
);
const CONNECTION_PEER_ROLE: Metric = gauge(
    "tandem_connection_peer_role",
    "1 for the peer's role as last reported (label role), 0 for the other roles.",
);
const CONNECTION_PROTOCOL: Metric = gauge(
    "tandem_connection_protocol",
    "1 for the replication protocol in effect on the connection (label protocol), 0 for the \
     others.",
);
const CONNECTION_UNACKED: Metric = gauge(
    "tandem_connection_unacked_writes",
    "Writes sent to the peer and not yet acknowledged as the protocol requires.",
);
const CONNECTION_UNREPLICATED: Metric = gauge(
    "tandem_connection_unreplicated_bytes",
    "Bytes sent to the peer and not yet confirmed written by it.",
);
const CONNECTION_OLDEST: Metric = gauge(
    "tandem_connection_oldest_unreplicated_seconds",
    "Age of the oldest write not yet confirmed written by the peer; 0 when there is none.",
);
const CONNECTION_PEER_STALE: Metric = gauge(
    "tandem_connection_peer_possibly_stale",
    "1 while the peer is marked possibly stale (asynchronous replication in effect or draining).",
);
const CONNECTION_WAITING: Metric = gauge(
    "tandem_connection_waiting_writes",
    "Client writes waiting to start (for an overlapping write or the lag bound).",
);
const PEER_DEVICE_REPLICATION: Metric = gauge(
    "tandem_peer_device_replication_state",
    "1 for the replication state of the volume towards the peer (label state), 0 for the other \
     states.",
);
const PEER_DEVICE_PEER_DISK: Metric = gauge(
    "tandem_peer_device_peer_disk_state",
    "1 for the peer's disk state of the volume as known here (label state), 0 for the other \
     states.",
);
const PEER_DEVICE_SENT: Metric = counter(
    "tandem_peer_device_sent_bytes_total",
    "Bytes of the volume sent to the peer.",
);
const PEER_DEVICE_RECEIVED: Metric = counter(
    "tandem_peer_device_received_bytes_total",
    "Bytes of the volume received from the peer.",
);
const PEER_DEVICE_OUT_OF_SYNC: Metric = gauge(
    "tandem_peer_device_out_of_sync_bytes",
    "Bytes of the volume that may differ on the peer.",
);
const PEER_DEVICE_PENDING: Metric = gauge(
    "tandem_peer_device_pending",
    "Writes received from the peer and not yet written.",
);
const PEER_DEVICE_RESYNC_DONE: Metric = gauge(
    "tandem_peer_device_resync_done_percent",
    "Progress of the running resync or verify with the peer, 0 to 100; absent when none runs.",
);
const SRM_CPU_BUSY: Metric = gauge(
    "tandem_srm_cpu_busy_ratio",
    "Share of CPU time busy over the manager's last interval (0 to 1).",
);
const SRM_CPU_STEAL: Metric = gauge(
    "tandem_srm_cpu_steal_ratio",
    "Share of CPU time stolen by the hypervisor over the manager's last interval (0 to 1).",
);
const SRM_MEMORY_AVAILABLE: Metric = gauge(
    "tandem_srm_memory_available_ratio",
    "MemAvailable / MemTotal at the manager's last interval (0 to 1).",
);
const SRM_WRITE_RATE: Metric = gauge(
    "tandem_srm_write_bytes_per_second",
    "Client write rate over the manager's last interval.",
);
const SRM_WRITE_SEQUENTIAL: Metric = gauge(
    "tandem_srm_write_sequential_ratio",
    "Share of client writes that continued the previous one (0 to 1).",
);
const SRM_PEER_RTT: Metric = gauge(
    "tandem_srm_peer_rtt_seconds",
    "Round trip of the manager's last ping probe to the peer; absent until one was answered.",
);
const SRM_PEER_ACK_LATENCY: Metric = gauge(
    "tandem_srm_peer_ack_latency_seconds",
    "Mean time from sending a write to its write ack over the last interval; absent without acks.",
);
const SRM_PEER_GOODPUT: Metric = gauge(
    "tandem_srm_peer_goodput_bytes_per_second",
    "Bytes the peer confirmed written over the last interval.",
);
const SRM_PEER_QUEUE_FILL: Metric = gauge(
    "tandem_srm_peer_send_queue_fill_ratio",
    "Unconfirmed bytes over the max-buffers window (0 to 1).",
);
const SRM_TCP_RTT: Metric = gauge(
    "tandem_srm_tcp_rtt_seconds",
    "The kernel's smoothed round trip of the replication data socket (TCP_INFO).",
);
const SRM_TCP_RETRANSMITS: Metric = counter(
    "tandem_srm_tcp_retransmits_total",
    "Segments the replication data socket retransmitted (TCP_INFO).",
);
const SRM_TCP_CWND: Metric = gauge(
    "tandem_srm_tcp_congestion_window_segments",
    "Congestion window of the replication data socket (TCP_INFO).",
);
const SRM_TCP_NOT_SENT: Metric = gauge(
    "tandem_srm_tcp_not_sent_bytes",
    "Bytes in the replication data socket not yet sent.",
);
const PEER_DEVICE_RESYNC_RATE: Metric = gauge(
    "tandem_peer_device_resync_rate_bytes_per_second",
    "Rate of the running resync or verify over the last few seconds; absent when none runs.",
);

/// A sample value.
#[derive(Debug, Clone, Copy)]
enum Value {
    /// An integer, printed exactly.
    Count(u64),
    /// Milliseconds, printed as seconds with three decimals.
    Millis(u64),
    /// A real number.
    Real(f64),
}

impl From<u64> for Value {
    fn from(count: u64) -> Value {
        Value::Count(count)
    }
}

impl From<bool> for Value {
    fn from(flag: bool) -> Value {
        Value::Count(u64::from(flag))
    }
}

/// Label pairs of one sample, in print order.
type Labels<'a> = [(&'static str, &'a str)];

/// The families rendered so far, each with its sample lines.
#[derive(Default)]
struct Exposition {
    families: Vec<(Metric, String)>,
}

impl Exposition {
    fn sample(&mut self, metric: Metric, labels: &Labels, value: impl Into<Value>) {
        let index = match self
            .families
            .iter()
            .position(|(known, _)| known.name == metric.name)
        {
            Some(index) => index,
            None => {
                self.families.push((metric, String::new()));
                self.families.len() - 1
            }
        };
        let lines = &mut self.families[index].1;
        lines.push_str(metric.name);
        write_labels(lines, labels);
        lines.push(' ');
        write_value(lines, value.into());
        lines.push('\n');
    }

    /// One sample per state in `all`: 1 for `current`, 0 for the others.
    fn one_hot(
        &mut self,
        metric: Metric,
        labels: &Labels,
        label: &'static str,
        all: impl IntoIterator<Item = &'static str>,
        current: &str,
    ) {
        let mut with_state: Vec<(&'static str, &str)> = labels.to_vec();
        for state in all {
            with_state.push((label, state));
            self.sample(metric, &with_state, state == current);
            with_state.pop();
        }
    }

    fn finish(self) -> String {
        let mut text = String::new();
        for (metric, lines) in self.families {
            text.push_str("# HELP ");
            text.push_str(metric.name);
            text.push(' ');
            text.push_str(&escape_help(metric.help));
            text.push_str("\n# TYPE ");
            text.push_str(metric.name);
            text.push_str(match metric.kind {
                Kind::Gauge => " gauge\n",
                Kind::Counter => " counter\n",
            });
            text.push_str(&lines);
        }
        text
    }
}

fn write_labels(out: &mut String, labels: &Labels) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (index, (name, value)) in labels.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        out.push_str(&escape_label_value(value));
        out.push('"');
    }
    out.push('}');
}

fn write_value(out: &mut String, value: Value) {
    // Writing to a String cannot fail.
    let _ = match value {
        Value::Count(count) => write!(out, "{count}"),
        Value::Millis(millis) => write!(out, "{}.{:03}", millis / 1000, millis % 1000),
        Value::Real(real) if real.is_nan() => write!(out, "NaN"),
        Value::Real(real) if real == f64::INFINITY => write!(out, "+Inf"),
        Value::Real(real) if real == f64::NEG_INFINITY => write!(out, "-Inf"),
        Value::Real(real) => write!(out, "{real}"),
    };
}

/// A label value as the format requires: backslash, double quote and line feed escaped.
pub(crate) fn escape_label_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// A help text as the format requires: backslash and line feed escaped.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

fn protocol_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::A => "A",
        Protocol::B => "B",
        Protocol::C => "C",
    }
}

/// The exposition text of `node`.
pub(crate) fn render(node: &NodeSample) -> String {
    let mut out = Exposition::default();
    out.sample(
        BUILD_INFO,
        &[("version", &node.version), ("node", &node.node)],
        1,
    );
    for resource in &node.resources {
        let labels = [("resource", resource.name.as_str())];
        out.one_hot(
            RESOURCE_ROLE,
            &labels,
            "role",
            Role::ALL.iter().map(|r| r.name()),
            resource.status.role.name(),
        );
        out.sample(RESOURCE_QUORUM, &labels, resource.quorum);
        out.sample(RESOURCE_SUSPENDED, &labels, resource.suspended);
        for volume in &resource.status.volumes {
            device(&mut out, &resource.name, volume);
        }
        for peer in &resource.status.peers {
            let name = peer_name(resource, peer.node_id);
            connection(&mut out, resource, &name, peer);
            for volume in &peer.volumes {
                peer_device(
                    &mut out,
                    &[("resource", &resource.name), ("peer", &name)],
                    volume,
                );
            }
        }
        if let Some(observation) = &resource.srm {
            srm_metrics(&mut out, resource, observation);
        }
    }
    let reports: Vec<&admin::ResourceStatus> = node
        .resources
        .iter()
        .map(|resource| &resource.report)
        .collect();
    drbd::render(&mut out, &reports);
    out.finish()
}

/// The manager's measurements: host-wide per resource, and per peer.
fn srm_metrics(out: &mut Exposition, resource: &ResourceSample, observation: &srm::Observation) {
    let labels = [("resource", resource.name.as_str())];
    let ratio = |permille: u32| Value::Real(f64::from(permille) / 1000.0);
    let seconds = |d: std::time::Duration| Value::Real(d.as_secs_f64());
    out.sample(
        SRM_CPU_BUSY,
        &labels,
        ratio(observation.system.cpu_busy_permille),
    );
    out.sample(
        SRM_CPU_STEAL,
        &labels,
        ratio(observation.system.cpu_steal_permille),
    );
    out.sample(
        SRM_MEMORY_AVAILABLE,
        &labels,
        ratio(observation.system.memory_available_permille),
    );
    out.sample(SRM_WRITE_RATE, &labels, observation.writes.bytes_per_s);
    out.sample(
        SRM_WRITE_SEQUENTIAL,
        &labels,
        ratio(observation.writes.sequential_permille),
    );
    for peer in &observation.peers {
        let name = peer_name(resource, peer.peer);
        let labels = [
            ("resource", resource.name.as_str()),
            ("peer", name.as_str()),
        ];
        if let Some(rtt) = peer.rtt {
            out.sample(SRM_PEER_RTT, &labels, seconds(rtt));
        }
        if let Some(ack) = peer.ack_latency_mean {
            out.sample(SRM_PEER_ACK_LATENCY, &labels, seconds(ack));
        }
        out.sample(SRM_PEER_GOODPUT, &labels, peer.goodput_bytes_per_s);
        out.sample(
            SRM_PEER_QUEUE_FILL,
            &labels,
            ratio(peer.send_queue_fill_permille),
        );
        if let Some(tcp) = peer.tcp {
            out.sample(SRM_TCP_RTT, &labels, seconds(tcp.rtt));
            out.sample(SRM_TCP_RETRANSMITS, &labels, tcp.retransmits_total);
            out.sample(
                SRM_TCP_CWND,
                &labels,
                u64::from(tcp.congestion_window_segments),
            );
            out.sample(SRM_TCP_NOT_SENT, &labels, tcp.not_sent_bytes);
        }
    }
}

fn peer_name(resource: &ResourceSample, node_id: u8) -> String {
    resource
        .peer_names
        .iter()
        .find(|(id, _)| *id == node_id)
        .map_or_else(|| format!("node-{node_id}"), |(_, name)| name.clone())
}

fn device(out: &mut Exposition, resource: &str, volume: &VolumeStatus) {
    let number = volume.volume.to_string();
    let labels = [("resource", resource), ("volume", number.as_str())];
    out.one_hot(
        DEVICE_DISK_STATE,
        &labels,
        "state",
        DiskState::ALL.iter().map(|s| s.name()),
        volume.disk.name(),
    );
    out.sample(DEVICE_SIZE, &labels, volume.size_bytes);
    out.sample(DEVICE_WRITTEN, &labels, volume.written_bytes);
    out.sample(DEVICE_AL_WRITES, &labels, volume.al_writes);
    out.sample(DEVICE_BM_WRITES, &labels, volume.bm_writes);
    out.sample(DEVICE_UPPER_PENDING, &labels, volume.upper_pending);
    out.sample(DEVICE_LOWER_PENDING, &labels, volume.lower_pending);
    out.sample(DEVICE_POSSIBLY_STALE, &labels, volume.possibly_stale);
}

fn connection(out: &mut Exposition, resource: &ResourceSample, peer_name: &str, peer: &PeerStatus) {
    let labels = [("resource", resource.name.as_str()), ("peer", peer_name)];
    // As `tandem status`: a resource that is down shows its connections StandAlone.
    let state = if resource.down {
        ConnState::StandAlone
    } else {
        peer.connection
    };
    out.sample(CONNECTION_CONNECTED, &labels, state == ConnState::Connected);
    out.one_hot(
        CONNECTION_STATE,
        &labels,
        "state",
        ConnState::ALL.iter().map(|s| s.name()),
        state.name(),
    );
    out.one_hot(
        CONNECTION_PEER_ROLE,
        &labels,
        "role",
        Role::ALL.iter().map(|r| r.name()),
        peer.role.name(),
    );
    let protocol = peer.lag.effective_protocol.unwrap_or(peer.protocol);
    let protocols = [Protocol::A, Protocol::B, Protocol::C].map(protocol_name);
    out.one_hot(
        CONNECTION_PROTOCOL,
        &labels,
        "protocol",
        protocols,
        protocol_name(protocol),
    );
    out.sample(CONNECTION_UNACKED, &labels, peer.unacked);
    out.sample(
        CONNECTION_UNREPLICATED,
        &labels,
        peer.lag.unreplicated_bytes,
    );
    out.sample(
        CONNECTION_OLDEST,
        &labels,
        Value::Millis(peer.lag.oldest_age_ms),
    );
    out.sample(CONNECTION_PEER_STALE, &labels, peer.lag.peer_possibly_stale);
    out.sample(CONNECTION_WAITING, &labels, peer.lag.waiting_writes);
}

fn peer_device(out: &mut Exposition, connection: &Labels, volume: &PeerVolumeStatus) {
    let number = volume.volume.to_string();
    let mut labels: Vec<(&'static str, &str)> = connection.to_vec();
    labels.push(("volume", &number));
    out.one_hot(
        PEER_DEVICE_REPLICATION,
        &labels,
        "state",
        ReplState::ALL.iter().map(|s| s.name()),
        volume.replication.name(),
    );
    out.one_hot(
        PEER_DEVICE_PEER_DISK,
        &labels,
        "state",
        DiskState::ALL.iter().map(|s| s.name()),
        volume.peer_disk.name(),
    );
    out.sample(PEER_DEVICE_SENT, &labels, volume.sent_bytes);
    out.sample(PEER_DEVICE_RECEIVED, &labels, volume.received_bytes);
    out.sample(PEER_DEVICE_OUT_OF_SYNC, &labels, volume.out_of_sync_bytes);
    out.sample(PEER_DEVICE_PENDING, &labels, volume.pending);
    if let Some(resync) = volume.resync {
        out.sample(
            PEER_DEVICE_RESYNC_DONE,
            &labels,
            Value::Real(resync.percent_done()),
        );
        out.sample(PEER_DEVICE_RESYNC_RATE, &labels, resync.rate_bytes_per_s);
    }
}
