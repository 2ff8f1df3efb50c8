//! `tandem status --drbd-json`: the report in the JSON schema of `drbdsetup status --json`,
//! for consumers written against DRBD (monitoring checks, drbd-reactor-style tools).
//!
//! The schema: a top-level array of resources, each with `name`, `node-id`, `role`,
//! `suspended`, `write-ordering`, `devices` and `connections`; connections hold
//! `peer_devices` (with an underscore, as drbdsetup spells it). Field names are DRBD's,
//! values are typed as drbdsetup types them: booleans for flags (`suspended`, `client`,
//! `quorum`, `congested`, ...), strings for states and for `blocked` / `resync-suspended`
//! (`no`, `upper`, `user,peer`), numbers for counters. Sizes are KiB, in-flight counters
//! 512-byte sectors, as in drbdsetup's text.
//!
//! Fields tandem does not track print a fixed value (`force-io-failures: false`,
//! `al-suspended: false`); objects it does not have (`paths`) are
//! left out. `percent-in-sync` is 100 × (size − out-of-sync) / size of the local volume
//! (100 when the size is unknown).
//!
//! Invariant: like every formatter of this crate, deterministic: resources and connections
//! sorted by name, devices and peer devices by volume.

use serde::Serialize;

use crate::report::{
    ConnectionStatus, DeviceStatus, PeerDeviceStatus, ResourceStatus, StatusReport,
};
use crate::status::sorted;
use crate::words;

/// Prints `report` as drbdsetup's `status --json` does: pretty JSON ending in `\n`.
pub fn format_drbd_json(report: &StatusReport) -> String {
    let resources: Vec<Resource> = sorted(&report.resources, |resource| resource.name.clone())
        .into_iter()
        .map(resource)
        .collect();
    crate::protocol::to_json_pretty(&resources)
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Resource {
    name: String,
    node_id: u8,
    role: String,
    suspended: bool,
    suspended_user: bool,
    suspended_no_data: bool,
    suspended_fencing: bool,
    suspended_quorum: bool,
    force_io_failures: bool,
    write_ordering: String,
    devices: Vec<Device>,
    connections: Vec<Connection>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Device {
    volume: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    minor: Option<u32>,
    disk_state: String,
    client: bool,
    open: bool,
    quorum: bool,
    size: u64,
    read: u64,
    written: u64,
    al_writes: u64,
    bm_writes: u64,
    upper_pending: u64,
    lower_pending: u64,
    al_suspended: bool,
    blocked: String,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Connection {
    peer_node_id: u8,
    name: String,
    connection_state: String,
    congested: bool,
    peer_role: String,
    ap_in_flight: u64,
    rs_in_flight: u64,
    #[serde(rename = "peer_devices")]
    peer_devices: Vec<PeerDevice>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct PeerDevice {
    volume: u16,
    replication_state: String,
    peer_disk_state: String,
    peer_client: bool,
    resync_suspended: String,
    received: u64,
    sent: u64,
    out_of_sync: u64,
    pending: u64,
    unacked: u64,
    has_sync_details: bool,
    has_online_verify_details: bool,
    percent_in_sync: f64,
}

fn resource(resource: &ResourceStatus) -> Resource {
    let reason = |name: &str| resource.suspend_reasons.iter().any(|reason| reason == name);
    let devices = sorted(&resource.devices, |device| device.volume);
    let connections = sorted(&resource.connections, |connection| connection.name.clone())
        .into_iter()
        .map(|connection| self::connection(connection, &devices))
        .collect();
    Resource {
        name: resource.name.clone(),
        node_id: resource.node_id,
        role: resource.role.clone(),
        suspended: resource.suspended,
        suspended_user: reason("user"),
        suspended_no_data: reason("no-data"),
        suspended_fencing: reason("fencing"),
        suspended_quorum: reason("quorum"),
        force_io_failures: false,
        write_ordering: resource.write_ordering.clone(),
        devices: devices.into_iter().map(device).collect(),
        connections,
    }
}

fn device(device: &DeviceStatus) -> Device {
    Device {
        volume: device.volume,
        minor: device.minor,
        disk_state: device.disk.clone(),
        client: device.is_client(),
        open: device.open,
        quorum: device.quorum,
        size: device.size_kib,
        read: device.read_kib,
        written: device.written_kib,
        al_writes: device.al_writes,
        bm_writes: device.bm_writes,
        upper_pending: device.upper_pending,
        lower_pending: device.lower_pending,
        al_suspended: false,
        blocked: words::blocked(device.blocked).to_string(),
    }
}

fn connection(connection: &ConnectionStatus, devices: &[&DeviceStatus]) -> Connection {
    let peer_devices = sorted(&connection.peer_devices, |peer_device| peer_device.volume)
        .into_iter()
        .map(|peer_device| {
            let size_kib = devices
                .iter()
                .find(|device| device.volume == peer_device.volume)
                .map_or(0, |device| device.size_kib);
            self::peer_device(peer_device, size_kib)
        })
        .collect();
    Connection {
        peer_node_id: connection.peer_node_id,
        name: connection.name.clone(),
        connection_state: connection.connection.clone(),
        congested: connection.congested,
        peer_role: connection.role.clone(),
        ap_in_flight: words::sectors_from_kib(connection.ap_in_flight_kib),
        rs_in_flight: words::sectors_from_kib(connection.rs_in_flight_kib),
        peer_devices,
    }
}

fn peer_device(peer_device: &PeerDeviceStatus, size_kib: u64) -> PeerDevice {
    let verifying = peer_device.replication.starts_with("Verify");
    PeerDevice {
        volume: peer_device.volume,
        replication_state: peer_device.replication.clone(),
        peer_disk_state: peer_device.peer_disk.clone(),
        peer_client: peer_device.peer_client,
        resync_suspended: peer_device.resync_suspended.clone(),
        received: peer_device.received_kib,
        sent: peer_device.sent_kib,
        out_of_sync: peer_device.out_of_sync_kib,
        pending: peer_device.pending,
        unacked: peer_device.unacked,
        has_sync_details: peer_device.done_percent.is_some() && !verifying,
        has_online_verify_details: peer_device.done_percent.is_some() && verifying,
        percent_in_sync: percent_in_sync(size_kib, peer_device.out_of_sync_kib),
    }
}

/// 100 × (size − out of sync) / size, rounded to two decimals as drbdsetup prints it.
fn percent_in_sync(size_kib: u64, out_of_sync_kib: u64) -> f64 {
    if size_kib == 0 {
        return 100.0;
    }
    let in_sync = size_kib.saturating_sub(out_of_sync_kib) as f64;
    (in_sync * 10_000.0 / size_kib as f64).round() / 100.0
}

#[cfg(test)]
mod tests;
