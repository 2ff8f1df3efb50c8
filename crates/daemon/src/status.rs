//! The engine's status, dressed with names and paths for admin clients.

use std::sync::atomic::Ordering;

use admin::{ConnectionStatus, DeviceStatus, PathStatus, PeerDeviceStatus, ResourceStatus};

use crate::resource::Resource;

const KIB: u64 = 1024;

/// The status of one resource as `tandem status` shows it.
pub(crate) fn resource_status(resource: &Resource) -> ResourceStatus {
    let (status, open, quorum, suspended, reasons) = resource.with_engine(|engine| {
        (
            engine.status(),
            engine.is_open(),
            engine.has_quorum(),
            engine.io_suspended(),
            engine.suspend_reasons(),
        )
    });
    let down = resource.down.load(Ordering::Relaxed);
    let devices = status
        .volumes
        .iter()
        .map(|v| device_status(resource, v, quorum, open))
        .collect();
    let connections = status
        .peers
        .iter()
        .map(|p| connection_status(resource, p, down))
        .collect();
    ResourceStatus {
        name: resource.name.clone(),
        node_id: status.node_id,
        role: status.role.to_string(),
        suspended,
        suspend_reasons: reasons.into_iter().map(str::to_owned).collect(),
        write_ordering: "flush".into(),
        down,
        devices,
        connections,
    }
}

/// One volume's device line.
fn device_status(
    resource: &Resource,
    v: &repl::VolumeStatus,
    quorum: bool,
    open: bool,
) -> DeviceStatus {
    DeviceStatus {
        volume: v.volume,
        minor: resource.minor(v.volume),
        disk: v.disk.to_string(),
        // DRBD's `backing_dev:none` for a volume without a disk (`disk none;`).
        backing_dev: resource
            .volumes
            .iter()
            .find(|(n, _)| *n == v.volume)
            .map_or_else(
                || "none".to_string(),
                |(_, d)| d.path().display().to_string(),
            ),
        quorum,
        open,
        size_kib: v.size_bytes / KIB,
        read_kib: 0,
        written_kib: v.written_bytes / KIB,
        al_writes: v.al_writes,
        bm_writes: v.bm_writes,
        upper_pending: v.upper_pending,
        lower_pending: v.lower_pending,
        blocked: false,
        possibly_stale: v.possibly_stale,
        unclean_since_restart: v.unclean_since_restart,
    }
}

/// One peer's connection, with its paths and peer devices.
fn connection_status(resource: &Resource, p: &repl::PeerStatus, down: bool) -> ConnectionStatus {
    ConnectionStatus {
        name: resource.peer_name(p.node_id),
        peer_node_id: p.node_id,
        connection: if down {
            "StandAlone".into()
        } else {
            p.connection.to_string()
        },
        role: p.role.to_string(),
        congested: p
            .volumes
            .iter()
            .any(|pv| pv.replication == repl::ReplState::Ahead),
        ap_in_flight_kib: p.lag.unreplicated_bytes / KIB,
        rs_in_flight_kib: p
            .volumes
            .iter()
            .filter_map(|pv| pv.resync)
            .map(|r| r.in_flight_bytes / KIB)
            .sum(),
        protocol: p.protocol.to_string(),
        last_error: p.last_error.clone(),
        unreplicated_kib: p.lag.unreplicated_bytes / KIB,
        peer_possibly_stale: p.lag.peer_possibly_stale,
        async_buffer_kib: resource.async_buffered_bytes(p.node_id) / KIB,
        paths: paths(
            resource,
            p.node_id,
            p.connection == repl::ConnState::Connected && !down,
        ),
        peer_devices: p
            .volumes
            .iter()
            .map(|pv| peer_device_status(resource, p, pv))
            .collect(),
    }
}

/// One volume as a peer has it.
fn peer_device_status(
    resource: &Resource,
    p: &repl::PeerStatus,
    pv: &repl::PeerVolumeStatus,
) -> PeerDeviceStatus {
    PeerDeviceStatus {
        volume: pv.volume,
        replication: pv.replication.to_string(),
        peer_disk: pv.peer_disk.to_string(),
        resync_suspended: pv.resync_suspended.describe(),
        received_kib: pv.received_bytes / KIB,
        sent_kib: pv.sent_bytes / KIB,
        out_of_sync_kib: pv.out_of_sync_bytes / KIB,
        pending: pv.pending,
        unacked: p.unacked,
        done_percent: pv.resync.map(|r| r.percent_done()),
        rate_kib_per_s: pv.resync.map(|r| r.rate_bytes_per_s / KIB),
        verify_found_kib: pv.verify_oos_bytes / KIB,
        verify_skipped_kib: pv.verify_skipped_bytes / KIB,
        peer_client: resource
            .peers
            .iter()
            .any(|info| info.node_id == p.node_id && info.diskless_volumes.contains(&pv.volume)),
    }
}

/// The one path tandem keeps to a peer: this node's address for it and the peer's.
fn paths(resource: &Resource, node_id: u8, established: bool) -> Vec<PathStatus> {
    resource
        .peers
        .iter()
        .filter(|info| info.node_id == node_id)
        .map(|info| PathStatus {
            local: info.local_address.to_string(),
            peer: info.address.to_string(),
            established,
        })
        .collect()
}
