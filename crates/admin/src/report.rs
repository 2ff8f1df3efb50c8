//! The state of a node's resources as the daemon reports it to admin clients.
//!
//! States are DRBD's names as strings (roles `Primary`/`Secondary`/`Unknown`; disk states
//! `UpToDate`, `Outdated`, `DUnknown`, ...; connection states `Connected`, `Connecting`,
//! `StandAlone`, ...; replication states `Established`, `SyncSource`, ...), so the text
//! formats print them unchanged and new states need no change here.
//!
//! Units are in the field names: `_kib` fields are KiB; `al_writes`, `bm_writes`, `pending`,
//! `unacked`, `upper_pending` and `lower_pending` are counts.

use serde::{Deserialize, Serialize};

/// The answer to a status request: every resource the request named.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// The resources, in any order (formatting sorts them by name).
    pub resources: Vec<ResourceStatus>,
}

/// One resource on this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceStatus {
    /// Resource name, e.g. `r0`.
    pub name: String,
    /// This node's id within the resource.
    pub node_id: u8,
    /// This node's role: `Primary`, `Secondary`.
    pub role: String,
    /// Whether application I/O is suspended (for fencing, quorum or by the operator).
    pub suspended: bool,
    /// Why, in DRBD's words (`fencing`, `quorum`); empty when not suspended or when the
    /// daemon does not say.
    #[serde(default)]
    pub suspend_reasons: Vec<String>,
    /// The write-ordering method in use: `none`, `drain`, `flush` or `barrier`.
    pub write_ordering: String,
    /// tandem: the resource is down (`tandem down`): not connecting, not promotable until
    /// `tandem up`.
    #[serde(default)]
    pub down: bool,
    /// The local volumes.
    pub devices: Vec<DeviceStatus>,
    /// The connections to peers.
    pub connections: Vec<ConnectionStatus>,
}

impl ResourceStatus {
    /// DRBD's `suspended:` value: `no`, the reasons joined by commas, or `yes` when
    /// suspended for reasons not given.
    pub fn suspended_words(&self) -> String {
        match (self.suspended, self.suspend_reasons.is_empty()) {
            (false, _) => "no".into(),
            (true, true) => "yes".into(),
            (true, false) => self.suspend_reasons.join(","),
        }
    }

    /// events2's `may_promote`: whether a plain `primary` (no `--force`) would find nothing
    /// against it in this report: the resource is up, this node is Secondary, no connected
    /// peer is Primary, it has at least one volume, every volume is UpToDate, has quorum, is
    /// not possibly stale and not unclean since a restart, and I/O is not suspended. The
    /// daemon may still refuse for what a report does not show (a handshake under way, a
    /// failed `fence-peer`).
    pub fn may_promote(&self) -> bool {
        self.role == "Secondary"
            && !self.down
            && !self.suspended
            && !self
                .connections
                .iter()
                .any(|connection| connection.role == "Primary")
            && !self.devices.is_empty()
            && self.devices.iter().all(|device| {
                device.disk == "UpToDate"
                    && device.quorum
                    && !device.possibly_stale
                    && !device.unclean_since_restart
            })
    }

    /// events2's `promotion_score`: how good a Primary this node would make, higher is better
    /// (drbd-reactor's promoter prefers the node with the highest score among those that
    /// `may_promote`). tandem's rule: 0 unless every volume is UpToDate; otherwise
    /// [`PROMOTION_SCORE_UP_TO_DATE`] plus [`PROMOTION_SCORE_PER_PEER`] for each
    /// `Connected` peer. It does not depend on the role, so a Primary scores as it would as a
    /// Secondary.
    pub fn promotion_score(&self) -> u32 {
        let up_to_date =
            !self.devices.is_empty() && self.devices.iter().all(|device| device.disk == "UpToDate");
        if !up_to_date {
            return 0;
        }
        let connected = self
            .connections
            .iter()
            .filter(|connection| connection.connection == "Connected")
            .count();
        let connected = u32::try_from(connected).unwrap_or(u32::MAX);
        PROMOTION_SCORE_UP_TO_DATE
            .saturating_add(PROMOTION_SCORE_PER_PEER.saturating_mul(connected))
    }
}

/// The `promotion_score` of a node whose every volume is UpToDate, before connected peers.
pub const PROMOTION_SCORE_UP_TO_DATE: u32 = 10_000;
/// What each `Connected` peer adds to `promotion_score`.
pub const PROMOTION_SCORE_PER_PEER: u32 = 100;

/// One local volume of a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceStatus {
    /// Volume number within the resource.
    pub volume: u16,
    /// Device minor number, if the volume is exported as a device.
    pub minor: Option<u32>,
    /// Local disk state: `UpToDate`, `Inconsistent`, `Diskless`, ...
    pub disk: String,
    /// Path of the backing device or file.
    pub backing_dev: String,
    /// Whether this volume has quorum.
    pub quorum: bool,
    /// Whether the exported device is open by an application.
    pub open: bool,
    /// Usable size.
    pub size_kib: u64,
    /// Data read from the local disk since the resource came up.
    pub read_kib: u64,
    /// Data written to the local disk since the resource came up.
    pub written_kib: u64,
    /// Activity-log metadata writes.
    pub al_writes: u64,
    /// Bitmap metadata writes.
    pub bm_writes: u64,
    /// Application requests not yet completed.
    pub upper_pending: u64,
    /// Requests to the local disk not yet completed.
    pub lower_pending: u64,
    /// Whether application I/O is blocked (printed as DRBD's `blocked:upper`).
    pub blocked: bool,
    /// tandem: a Primary replicated to this node asynchronously and it has not caught up;
    /// promotion needs `--force` (printed as `possibly-stale:yes`).
    #[serde(default)]
    pub possibly_stale: bool,
    /// tandem: this node went down uncleanly as a Secondary and has met no peer since;
    /// promotion needs `--force` (printed as `unclean-since-restart:yes`).
    #[serde(default)]
    pub unclean_since_restart: bool,
}

impl DeviceStatus {
    /// DRBD's `client:`: a volume configured without a disk (`disk none`), as opposed to one
    /// that lost or detached its disk.
    pub fn is_client(&self) -> bool {
        self.backing_dev == "none"
    }
}

/// One connection from this node to a peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionStatus {
    /// Connection (peer host) name, e.g. `bob`.
    pub name: String,
    /// The peer's node id.
    pub peer_node_id: u8,
    /// Connection state: `Connected`, `Connecting`, `StandAlone`, ...
    pub connection: String,
    /// The peer's role: `Primary`, `Secondary`, `Unknown` when not connected.
    pub role: String,
    /// Whether the congestion policy has triggered.
    pub congested: bool,
    /// Application data sent but not yet acknowledged.
    pub ap_in_flight_kib: u64,
    /// Resync data sent but not yet acknowledged.
    pub rs_in_flight_kib: u64,
    /// Replication protocol: `A`, `B` or `C`.
    pub protocol: String,
    /// Why the connection last failed, if it did.
    pub last_error: Option<String>,
    /// tandem: data written and not yet confirmed by this peer.
    #[serde(default)]
    pub unreplicated_kib: u64,
    /// tandem: this peer is marked possibly stale (asynchronous replication in force or
    /// draining).
    #[serde(default)]
    pub peer_possibly_stale: bool,
    /// tandem: bytes of writes completed under protocol A that wait in the link's async
    /// buffer (`async-buffer`), not yet in the socket.
    #[serde(default)]
    pub async_buffer_kib: u64,
    /// The volumes as seen over this connection.
    pub peer_devices: Vec<PeerDeviceStatus>,
    /// The network paths to the peer (events2's `path` objects); empty when the daemon does
    /// not say.
    #[serde(default)]
    pub paths: Vec<PathStatus>,
}

/// One network path of a connection: this node's address and the peer's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathStatus {
    /// This node's address for the peer, `IP:PORT` (`[IPv6]:PORT`).
    pub local: String,
    /// The peer's address, `IP:PORT` (`[IPv6]:PORT`).
    pub peer: String,
    /// Whether the connection runs over this path.
    pub established: bool,
}

/// One volume as seen over one connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerDeviceStatus {
    /// Volume number within the resource.
    pub volume: u16,
    /// Replication state: `Off`, `Established`, `SyncSource`, ...
    pub replication: String,
    /// The peer's disk state.
    pub peer_disk: String,
    /// Why a resync with this peer is suspended, as DRBD prints it: `no`, or reasons among
    /// `user`, `peer`, `dependency` joined by commas.
    pub resync_suspended: String,
    /// Data received from the peer.
    pub received_kib: u64,
    /// Data sent to the peer.
    pub sent_kib: u64,
    /// Data known to differ between this node and the peer.
    pub out_of_sync_kib: u64,
    /// Requests sent to the peer and not yet answered.
    pub pending: u64,
    /// Requests received from the peer and not yet answered.
    pub unacked: u64,
    /// Resync progress in percent, while a resync or verify runs.
    pub done_percent: Option<f64>,
    /// Bytes per second the running resync or verify moves (over the last few seconds), in
    /// KiB; `None` when none runs.
    #[serde(default)]
    pub rate_kib_per_s: Option<u64>,
    /// Data the last online verify found different (marked out of sync), in KiB.
    #[serde(default)]
    pub verify_found_kib: u64,
    /// Data the last online verify could not judge (being written meanwhile), in KiB.
    #[serde(default)]
    pub verify_skipped_kib: u64,
    /// DRBD's `peer-client`: the peer is configured without a disk for this volume (a
    /// diskless tiebreaker), as opposed to one that lost or detached its disk.
    #[serde(default)]
    pub peer_client: bool,
}
