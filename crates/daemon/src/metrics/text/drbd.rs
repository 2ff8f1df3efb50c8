//! The same status under drbd-reactor's Prometheus names (`drbd_*`), so the dashboards and
//! alert rules written for DRBD read a tandem node unchanged. Rendered after the `tandem_*`
//! families, from the admin report `tandem status` prints (the values drbd-reactor reads
//! from `drbdsetup events2`), so sizes have KiB precision as there.
//!
//! Names and labels follow drbd-reactor's prometheus plugin (its doc/prometheus.md):
//! - resource, label `name`: `drbd_resource_role` (one-hot, label `drbd_resource_role`),
//!   `drbd_resource_suspended`, `drbd_resource_maypromote`, `drbd_resource_promotionscore`,
//!   `drbd_resource_forceiofailures`; and `drbd_resource_resources`, the resource count,
//!   without labels;
//! - device, labels `name volume minor`: `drbd_device_state` (one-hot, label
//!   `drbd_device_state`), `drbd_device_client`, `drbd_device_unintentionaldiskless`,
//!   `drbd_device_quorum`, `drbd_device_open`, `drbd_device_size_bytes`,
//!   `drbd_device_read_bytes_total`, `drbd_device_written_bytes_total`,
//!   `drbd_device_alwrites_total`, `drbd_device_bmwrites_total`, `drbd_device_upperpending`,
//!   `drbd_device_lowerpending`, `drbd_device_alsuspended`;
//! - connection, labels `name conn_name peer_node_id`: `drbd_connection_state` (one-hot,
//!   label `drbd_connection_state`), `drbd_connection_congested`,
//!   `drbd_connection_apinflight_bytes`, `drbd_connection_rsinflight_bytes`;
//! - peer device, connection labels and `volume`: `drbd_peerdevice_outofsync_bytes`,
//!   `drbd_peerdevice_sent_bytes`, `drbd_peerdevice_received_bytes` (counters without
//!   `_total`, as drbd-reactor names them: the one exception to this module's naming rule).
//!
//! A volume without a device minor has `minor=""`. `drbd_resource_forceiofailures` and
//! `drbd_device_alsuspended` are always 0 (tandem has neither state); `read` is 0 until
//! tandem counts local reads.

use admin::{ConnectionStatus, DeviceStatus, ResourceStatus};
use repl::{ConnState, DiskState, Role};

use super::{counter, gauge, Exposition, Labels, Metric};

const KIB: u64 = 1024;

const RESOURCES: Metric = gauge(
    "drbd_resource_resources",
    "Number of resources (drbd-reactor's name).",
);
const ROLE: Metric = gauge(
    "drbd_resource_role",
    "1 for the resource's role (label drbd_resource_role), 0 for the others.",
);
const SUSPENDED: Metric = gauge(
    "drbd_resource_suspended",
    "1 while client I/O of the resource is suspended.",
);
const MAY_PROMOTE: Metric = gauge(
    "drbd_resource_maypromote",
    "1 when a plain primary would find nothing against it (events2's may_promote).",
);
const PROMOTION_SCORE: Metric = gauge(
    "drbd_resource_promotionscore",
    "events2's promotion_score: higher is a better Primary.",
);
const FORCE_IO_FAILURES: Metric = gauge(
    "drbd_resource_forceiofailures",
    "Always 0: tandem has no force-io-failures state.",
);
const DEVICE_STATE: Metric = gauge(
    "drbd_device_state",
    "1 for the volume's disk state (label drbd_device_state), 0 for the others.",
);
const DEVICE_CLIENT: Metric = gauge(
    "drbd_device_client",
    "1 for a volume configured without a disk (intentionally diskless).",
);
const DEVICE_UNINTENTIONAL_DISKLESS: Metric = gauge(
    "drbd_device_unintentionaldiskless",
    "1 for a volume that lost or detached its disk.",
);
const DEVICE_QUORUM: Metric = gauge("drbd_device_quorum", "1 while the volume has quorum.");
const DEVICE_OPEN: Metric = gauge("drbd_device_open", "1 while the volume's export is open.");
const DEVICE_SIZE: Metric = gauge("drbd_device_size_bytes", "Size of the volume.");
const DEVICE_READ: Metric = counter(
    "drbd_device_read_bytes_total",
    "Bytes read from the local disk (0: tandem does not count them yet).",
);
const DEVICE_WRITTEN: Metric = counter(
    "drbd_device_written_bytes_total",
    "Bytes written to the local disk.",
);
const DEVICE_AL_WRITES: Metric = counter(
    "drbd_device_alwrites_total",
    "Activity-log transactions written.",
);
const DEVICE_BM_WRITES: Metric = counter("drbd_device_bmwrites_total", "Bitmap pages written.");
const DEVICE_UPPER_PENDING: Metric = gauge(
    "drbd_device_upperpending",
    "Client requests in flight on the volume.",
);
const DEVICE_LOWER_PENDING: Metric = gauge(
    "drbd_device_lowerpending",
    "Local disk operations in flight on the volume.",
);
const DEVICE_AL_SUSPENDED: Metric = gauge(
    "drbd_device_alsuspended",
    "Always 0: tandem never suspends the activity log.",
);
const CONNECTION_STATE: Metric = gauge(
    "drbd_connection_state",
    "1 for the connection's state (label drbd_connection_state), 0 for the others.",
);
const CONNECTION_CONGESTED: Metric = gauge(
    "drbd_connection_congested",
    "1 while the congestion policy holds the peer Ahead.",
);
const CONNECTION_AP_IN_FLIGHT: Metric = gauge(
    "drbd_connection_apinflight_bytes",
    "Application data sent to the peer and not yet confirmed.",
);
const CONNECTION_RS_IN_FLIGHT: Metric = gauge(
    "drbd_connection_rsinflight_bytes",
    "Resync data sent to the peer and not yet confirmed.",
);
const PEER_DEVICE_OUT_OF_SYNC: Metric = gauge(
    "drbd_peerdevice_outofsync_bytes",
    "Bytes of the volume that may differ on the peer.",
);
const PEER_DEVICE_SENT: Metric = counter(
    "drbd_peerdevice_sent_bytes",
    "Bytes of the volume sent to the peer.",
);
const PEER_DEVICE_RECEIVED: Metric = counter(
    "drbd_peerdevice_received_bytes",
    "Bytes of the volume received from the peer.",
);

/// Every `drbd_*` family of `reports`.
pub(super) fn render(out: &mut Exposition, reports: &[&ResourceStatus]) {
    let count = u64::try_from(reports.len()).unwrap_or(u64::MAX);
    out.sample(RESOURCES, &[], count);
    for report in reports {
        resource(out, report);
    }
}

fn resource(out: &mut Exposition, report: &ResourceStatus) {
    let labels = [("name", report.name.as_str())];
    out.one_hot(
        ROLE,
        &labels,
        ROLE.name,
        Role::ALL.iter().map(|role| role.name()),
        &report.role,
    );
    out.sample(SUSPENDED, &labels, report.suspended);
    out.sample(MAY_PROMOTE, &labels, report.may_promote());
    out.sample(
        PROMOTION_SCORE,
        &labels,
        u64::from(report.promotion_score()),
    );
    out.sample(FORCE_IO_FAILURES, &labels, false);
    for device in &report.devices {
        self::device(out, &report.name, device);
    }
    for connection in &report.connections {
        self::connection(out, &report.name, connection);
    }
}

fn device(out: &mut Exposition, resource: &str, device: &DeviceStatus) {
    let volume = device.volume.to_string();
    let minor = device
        .minor
        .map(|minor| minor.to_string())
        .unwrap_or_default();
    let labels: &Labels = &[("name", resource), ("volume", &volume), ("minor", &minor)];
    out.one_hot(
        DEVICE_STATE,
        labels,
        DEVICE_STATE.name,
        DiskState::ALL.iter().map(|state| state.name()),
        &device.disk,
    );
    out.sample(DEVICE_CLIENT, labels, device.is_client());
    out.sample(
        DEVICE_UNINTENTIONAL_DISKLESS,
        labels,
        !device.is_client() && device.disk == DiskState::Diskless.name(),
    );
    out.sample(DEVICE_QUORUM, labels, device.quorum);
    out.sample(DEVICE_OPEN, labels, device.open);
    out.sample(DEVICE_SIZE, labels, device.size_kib.saturating_mul(KIB));
    out.sample(DEVICE_READ, labels, device.read_kib.saturating_mul(KIB));
    out.sample(
        DEVICE_WRITTEN,
        labels,
        device.written_kib.saturating_mul(KIB),
    );
    out.sample(DEVICE_AL_WRITES, labels, device.al_writes);
    out.sample(DEVICE_BM_WRITES, labels, device.bm_writes);
    out.sample(DEVICE_UPPER_PENDING, labels, device.upper_pending);
    out.sample(DEVICE_LOWER_PENDING, labels, device.lower_pending);
    out.sample(DEVICE_AL_SUSPENDED, labels, false);
}

fn connection(out: &mut Exposition, resource: &str, connection: &ConnectionStatus) {
    let peer_node_id = connection.peer_node_id.to_string();
    let labels: &Labels = &[
        ("name", resource),
        ("conn_name", &connection.name),
        ("peer_node_id", &peer_node_id),
    ];
    let states = ConnState::ALL.iter().map(|state| state.name());
    out.one_hot(
        CONNECTION_STATE,
        labels,
        CONNECTION_STATE.name,
        states,
        &connection.connection,
    );
    out.sample(CONNECTION_CONGESTED, labels, connection.congested);
    out.sample(
        CONNECTION_AP_IN_FLIGHT,
        labels,
        connection.ap_in_flight_kib.saturating_mul(KIB),
    );
    out.sample(
        CONNECTION_RS_IN_FLIGHT,
        labels,
        connection.rs_in_flight_kib.saturating_mul(KIB),
    );
    for peer_device in &connection.peer_devices {
        let volume = peer_device.volume.to_string();
        let mut with_volume = labels.to_vec();
        with_volume.push(("volume", &volume));
        out.sample(
            PEER_DEVICE_OUT_OF_SYNC,
            &with_volume,
            peer_device.out_of_sync_kib.saturating_mul(KIB),
        );
        out.sample(
            PEER_DEVICE_SENT,
            &with_volume,
            peer_device.sent_kib.saturating_mul(KIB),
        );
        out.sample(
            PEER_DEVICE_RECEIVED,
            &with_volume,
            peer_device.received_kib.saturating_mul(KIB),
        );
    }
}
