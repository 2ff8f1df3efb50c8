//! Test fixtures: a healthy two-node resource, to be bent into each case by the tests.
//! Other crates' tests use them through the `fixtures` feature (a dev-dependency only).

use crate::report::{
    ConnectionStatus, DeviceStatus, PeerDeviceStatus, ResourceStatus, StatusReport,
};

/// A Secondary resource `name` with no volumes and no connections.
pub fn resource(name: &str) -> ResourceStatus {
    ResourceStatus {
        name: name.to_string(),
        node_id: 0,
        role: "Secondary".to_string(),
        suspended: false,
        suspend_reasons: Vec::new(),
        write_ordering: "flush".to_string(),
        down: false,
        devices: Vec::new(),
        connections: Vec::new(),
    }
}

/// An UpToDate, closed volume with minor = volume and zero counters.
pub fn device(volume: u16) -> DeviceStatus {
    DeviceStatus {
        volume,
        minor: Some(u32::from(volume)),
        disk: "UpToDate".to_string(),
        backing_dev: "/dev/vg0/r0".to_string(),
        quorum: true,
        open: false,
        size_kib: 0,
        read_kib: 0,
        written_kib: 0,
        al_writes: 0,
        bm_writes: 0,
        upper_pending: 0,
        lower_pending: 0,
        blocked: false,
        possibly_stale: false,
        unclean_since_restart: false,
    }
}

/// A Connected connection to a Secondary peer, without peer volumes.
pub fn connection(name: &str, peer_node_id: u8) -> ConnectionStatus {
    ConnectionStatus {
        name: name.to_string(),
        peer_node_id,
        connection: "Connected".to_string(),
        role: "Secondary".to_string(),
        congested: false,
        ap_in_flight_kib: 0,
        rs_in_flight_kib: 0,
        protocol: "C".to_string(),
        last_error: None,
        unreplicated_kib: 0,
        peer_possibly_stale: false,
        async_buffer_kib: 0,
        peer_devices: Vec::new(),
        paths: Vec::new(),
    }
}

/// An Established peer volume with an UpToDate peer disk and zero counters.
pub fn peer_device(volume: u16) -> PeerDeviceStatus {
    PeerDeviceStatus {
        volume,
        replication: "Established".to_string(),
        peer_disk: "UpToDate".to_string(),
        resync_suspended: "no".into(),
        received_kib: 0,
        sent_kib: 0,
        out_of_sync_kib: 0,
        pending: 0,
        unacked: 0,
        done_percent: None,
        rate_kib_per_s: None,
        verify_found_kib: 0,
        verify_skipped_kib: 0,
        peer_client: false,
    }
}

/// `r0`: this node (id 0) Primary with volume 0, connected to `bob` (id 1) with volume 0.
pub fn two_nodes() -> ResourceStatus {
    let mut resource = resource("r0");
    resource.role = "Primary".to_string();
    resource.devices.push(device(0));
    let mut bob = connection("bob", 1);
    bob.peer_devices.push(peer_device(0));
    resource.connections.push(bob);
    resource
}

/// A report of the given resources.
pub fn report(resources: Vec<ResourceStatus>) -> StatusReport {
    StatusReport { resources }
}
