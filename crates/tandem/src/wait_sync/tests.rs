//! `assess` on hand-built status reports: each state a resource can be in.

use admin::{ConnectionStatus, DeviceStatus, PeerDeviceStatus, ResourceStatus};

use super::{assess, Assessment, Meter};

fn resource(
    disk: &str,
    connection: &str,
    replication: &str,
    peer_disk: &str,
    out_of_sync_kib: u64,
) -> ResourceStatus {
    ResourceStatus {
        down: false,
        name: "r0".into(),
        node_id: 0,
        role: "Secondary".into(),
        suspended: false,
        suspend_reasons: Vec::new(),
        write_ordering: "flush".into(),
        devices: vec![DeviceStatus {
            volume: 0,
            minor: None,
            disk: disk.into(),
            backing_dev: "/dev/x".into(),
            quorum: true,
            open: false,
            size_kib: 1024,
            read_kib: 0,
            written_kib: 0,
            al_writes: 0,
            bm_writes: 0,
            upper_pending: 0,
            lower_pending: 0,
            blocked: false,
            possibly_stale: false,
            unclean_since_restart: false,
        }],
        connections: vec![ConnectionStatus {
            paths: Vec::new(),
            name: "bob".into(),
            peer_node_id: 1,
            connection: connection.into(),
            role: "Secondary".into(),
            congested: false,
            ap_in_flight_kib: 0,
            rs_in_flight_kib: 0,
            protocol: "C".into(),
            last_error: (connection == "StandAlone").then(|| "split brain detected".to_string()),
            unreplicated_kib: 0,
            peer_possibly_stale: false,
            async_buffer_kib: 0,
            peer_devices: vec![PeerDeviceStatus {
                peer_client: false,
                volume: 0,
                replication: replication.into(),
                peer_disk: peer_disk.into(),
                resync_suspended: "no".into(),
                received_kib: 0,
                sent_kib: 0,
                out_of_sync_kib,
                pending: 0,
                unacked: 0,
                done_percent: None,
                rate_kib_per_s: None,
                verify_found_kib: 0,
                verify_skipped_kib: 0,
            }],
        }],
    }
}

#[test]
fn every_state_is_judged() {
    let cases = [
        (
            resource("UpToDate", "Connected", "Established", "UpToDate", 0),
            "in sync",
        ),
        (
            resource("UpToDate", "Connected", "SyncSource", "Inconsistent", 4096),
            "waiting",
        ),
        (
            resource("Inconsistent", "Connected", "SyncTarget", "UpToDate", 4096),
            "waiting",
        ),
        (
            resource("UpToDate", "Connecting", "Off", "DUnknown", 512),
            "waiting",
        ),
        (
            resource("UpToDate", "StandAlone", "Off", "DUnknown", 512),
            "stuck",
        ),
        (
            resource(
                "Inconsistent",
                "Connected",
                "Established",
                "Inconsistent",
                0,
            ),
            "stuck",
        ),
        (
            resource("UpToDate", "Connected", "Established", "UpToDate", 8),
            "stuck",
        ),
        (
            resource("UpToDate", "Connected", "VerifyS", "UpToDate", 8),
            "waiting",
        ),
    ];
    for (status, expected) in cases {
        let judged = match assess(&status) {
            Assessment::InSync => "in sync",
            Assessment::Waiting { .. } => "waiting",
            Assessment::Stuck(_) => "stuck",
        };
        assert_eq!(judged, expected, "{status:?}");
    }
}

#[test]
fn remaining_is_the_out_of_sync_sum_and_stuck_messages_say_what_to_do() {
    let Assessment::Waiting {
        remaining_kib,
        what,
    } = assess(&resource(
        "UpToDate",
        "Connected",
        "SyncSource",
        "Inconsistent",
        4096,
    ))
    else {
        panic!("expected waiting");
    };
    assert_eq!((remaining_kib, what.as_str()), (4096, "resyncing"));
    let Assessment::Stuck(message) =
        assess(&resource("UpToDate", "StandAlone", "Off", "DUnknown", 0))
    else {
        panic!("expected stuck");
    };
    assert!(
        message.contains("split brain detected") && message.contains("--discard-my-data"),
        "{message}"
    );
    let Assessment::Stuck(message) = assess(&resource(
        "Inconsistent",
        "Connected",
        "Established",
        "Inconsistent",
        0,
    )) else {
        panic!("expected stuck");
    };
    assert!(message.contains("primary --force r0"), "{message}");
}

#[test]
fn the_meter_reports_rate_and_eta() {
    let start = std::time::Instant::now();
    let mut meter = Meter::default();
    meter.sample(start, 10 * 1024);
    meter.sample(start + std::time::Duration::from_secs(1), 8 * 1024);
    assert_eq!(meter.largest_kib, 10 * 1024);
    assert_eq!(
        meter.message(8 * 1024, "resyncing"),
        "resyncing: 8 MiB left, 2.0 MiB/s, ETA 4s"
    );
    let fresh = Meter::default();
    assert_eq!(
        fresh.message(1024, "resyncing"),
        "resyncing: 1 MiB left, --, ETA --"
    );
}
