//! Status layout tests: each case is a report, options and the exact expected text, checked
//! against the `drbdsetup status` forms quoted in drbd-semantics.md §4.

use super::*;
use crate::fixtures::{connection, device, peer_device, report, resource, two_nodes};

const PLAIN: StatusOptions = StatusOptions {
    verbose: false,
    statistics: false,
    width: 80,
};
const STATISTICS: StatusOptions = StatusOptions {
    statistics: true,
    ..PLAIN
};
const VERBOSE: StatusOptions = StatusOptions {
    verbose: true,
    ..PLAIN
};
const VERBOSE_STATISTICS: StatusOptions = StatusOptions {
    verbose: true,
    statistics: true,
    ..PLAIN
};

#[track_caller]
fn check(resources: Vec<ResourceStatus>, options: StatusOptions, expected: &str) {
    let actual = format_status(&report(resources), &options);
    assert_eq!(
        actual, expected,
        "\nactual:\n{actual}\nexpected:\n{expected}"
    );
}

#[test]
fn healthy_primary_with_a_connected_and_a_connecting_peer() {
    // §4: a connected peer shows its role and a peer-disk line; a peer that is not
    // connected shows only its connection state.
    let mut r0 = two_nodes();
    let mut carol = connection("carol", 2);
    carol.connection = "Connecting".to_string();
    carol.role = "Unknown".to_string();
    carol.peer_devices.push(peer_device(0));
    r0.connections.push(carol);
    check(
        vec![r0],
        PLAIN,
        "r0 role:Primary
  disk:UpToDate open:no
  bob role:Secondary
    peer-disk:UpToDate
  carol connection:Connecting

",
    );
}

#[test]
fn resync_shows_replication_and_done() {
    // §4 "Current output during a resync".
    let mut r0 = two_nodes();
    r0.connections[0].name = "server2".to_string();
    let peer = &mut r0.connections[0].peer_devices[0];
    peer.replication = "SyncSource".to_string();
    peer.peer_disk = "Inconsistent".to_string();
    peer.out_of_sync_kib = 1000;
    peer.done_percent = Some(0.04);
    check(
        vec![r0],
        PLAIN,
        "r0 role:Primary
  disk:UpToDate open:no
  server2 role:Secondary
    replication:SyncSource peer-disk:Inconsistent done:0.04

",
    );
}

#[test]
fn a_paused_resync_shows_its_reasons() {
    let mut r0 = two_nodes();
    let peer = &mut r0.connections[0].peer_devices[0];
    peer.replication = "PausedSyncT".to_string();
    peer.peer_disk = "UpToDate".to_string();
    peer.done_percent = Some(12.5);
    peer.resync_suspended = "user,dependency".to_string();
    check(
        vec![r0],
        PLAIN,
        "r0 role:Primary
  disk:UpToDate open:no
  bob role:Secondary
    replication:PausedSyncT peer-disk:UpToDate done:12.50
        resync-suspended:user,dependency

",
    );
}

#[test]
fn several_volumes_are_numbered_in_order() {
    let mut r0 = resource("r0");
    r0.devices = vec![device(1), device(0)];
    let mut bob = connection("bob", 1);
    bob.peer_devices = vec![peer_device(1), peer_device(0)];
    bob.peer_devices[1].replication = "SyncTarget".to_string();
    bob.peer_devices[1].done_percent = Some(37.5);
    bob.peer_devices[1].rate_kib_per_s = Some(100 * 1024);
    r0.connections.push(bob);
    check(
        vec![r0],
        PLAIN,
        "r0 role:Secondary
  volume:0 disk:UpToDate open:no
  volume:1 disk:UpToDate open:no
  bob role:Secondary
    volume:0 replication:SyncTarget peer-disk:UpToDate done:37.50
        rate:100.0MiB/s
    volume:1 peer-disk:UpToDate

",
    );
}

#[test]
fn a_single_volume_other_than_zero_is_numbered() {
    // §4 "volume:17 disk:UpToDate blocked:upper".
    let mut r0 = resource("r0");
    let mut volume = device(17);
    volume.blocked = true;
    volume.open = true;
    r0.devices.push(volume);
    check(
        vec![r0],
        PLAIN,
        "r0 role:Secondary
  volume:17 disk:UpToDate open:yes blocked:upper

",
    );
}

#[test]
fn suspension_reasons_are_shown() {
    let mut r0 = resource("r0");
    r0.role = "Primary".to_string();
    r0.suspended = true;
    r0.suspend_reasons = vec!["fencing".to_string()];
    check(vec![r0], PLAIN, "r0 role:Primary suspended:fencing\n\n");
}

#[test]
fn lost_quorum_and_suspension_are_shown() {
    // §4 "disk:Outdated quorum:no".
    let mut r0 = resource("r0");
    r0.suspended = true;
    let mut volume = device(0);
    volume.disk = "Outdated".to_string();
    volume.quorum = false;
    r0.devices.push(volume);
    check(
        vec![r0],
        PLAIN,
        "r0 role:Secondary suspended:yes
  disk:Outdated quorum:no open:no

",
    );
}

#[test]
fn congestion_shows_in_flight_sectors() {
    // §4 "m13c23 role:Secondary congested:yes ap-in-flight:0 rs-in-flight:2264";
    // in-flight counters are printed in sectors.
    let mut r0 = two_nodes();
    let peer = &mut r0.connections[0];
    peer.name = "m13c23".to_string();
    peer.congested = true;
    peer.rs_in_flight_kib = 1132;
    check(
        vec![r0],
        PLAIN,
        "r0 role:Primary
  disk:UpToDate open:no
  m13c23 role:Secondary congested:yes ap-in-flight:0 rs-in-flight:2264
    peer-disk:UpToDate

",
    );
}

#[test]
fn standalone_peer_shows_connection_only() {
    // §4 "m10c27 connection:StandAlone".
    let mut r0 = two_nodes();
    let peer = &mut r0.connections[0];
    peer.name = "m10c27".to_string();
    peer.connection = "StandAlone".to_string();
    peer.role = "Unknown".to_string();
    peer.peer_devices[0].replication = "Off".to_string();
    peer.peer_devices[0].peer_disk = "DUnknown".to_string();
    check(
        vec![r0],
        PLAIN,
        "r0 role:Primary
  disk:UpToDate open:no
  m10c27 connection:StandAlone

",
    );
}

#[test]
fn resources_and_connections_are_sorted_and_separated_by_blank_lines() {
    let mut r0 = two_nodes();
    r0.connections.insert(0, connection("zed", 2));
    let r1 = resource("r1");
    check(
        vec![r1, r0],
        PLAIN,
        "r0 role:Primary
  disk:UpToDate open:no
  bob role:Secondary
    peer-disk:UpToDate
  zed role:Secondary

r1 role:Secondary

",
    );
}

#[test]
fn no_resources() {
    check(
        vec![],
        PLAIN,
        "# No currently configured tandem resources found.\n",
    );
}

#[test]
fn statistics_add_counter_lines() {
    // Without --verbose, out-of-sync: is printed only when non-zero.
    let mut r0 = two_nodes();
    r0.devices[0].read_kib = 12;
    r0.devices[0].written_kib = 34;
    r0.connections[0].peer_devices[0].sent_kib = 34;
    r0.connections[0].peer_devices[0].out_of_sync_kib = 8;
    let mut carol = connection("carol", 2);
    carol.connection = "Connecting".to_string();
    carol.role = "Unknown".to_string();
    let mut unknown = peer_device(0);
    unknown.replication = "Off".to_string();
    unknown.peer_disk = "DUnknown".to_string();
    carol.peer_devices.push(unknown);
    r0.connections.push(carol);
    check(
        vec![r0],
        STATISTICS,
        "r0 role:Primary
  disk:UpToDate open:no
      read:12 written:34
  bob role:Secondary
    peer-disk:UpToDate
        received:0 sent:34 out-of-sync:8
  carol connection:Connecting
    peer-disk:DUnknown
        received:0 sent:0

",
    );
}

#[test]
fn verbose_shows_every_state_field() {
    let mut r0 = two_nodes();
    r0.devices[0].minor = None;
    check(
        vec![r0],
        VERBOSE,
        "r0 node-id:0 role:Primary suspended:no
  volume:0 disk:UpToDate backing_dev:/dev/vg0/r0 quorum:yes open:no blocked:no
  bob node-id:1 connection:Connected role:Secondary congested:no ap-in-flight:0
      rs-in-flight:0
    volume:0 replication:Established peer-disk:UpToDate resync-suspended:no

",
    );
}

#[test]
fn verbose_statistics_wraps_at_the_width() {
    // §4 `drbdsetup status r0 --verbose --statistics`. Unlike drbd-utils, whose column
    // count runs short by the indent, no line exceeds the width.
    let mut r0 = two_nodes();
    let volume = &mut r0.devices[0];
    volume.size_kib = 1048412;
    volume.written_kib = 1048412;
    volume.bm_writes = 48;
    volume.open = true;
    r0.connections[0].peer_devices[0].sent_kib = 1048412;
    let expected = "r0 node-id:0 role:Primary suspended:no
    write-ordering:flush
  volume:0 minor:0 disk:UpToDate backing_dev:/dev/vg0/r0 quorum:yes open:yes
      size:1048412 read:0 written:1048412 al-writes:0 bm-writes:48
      upper-pending:0 lower-pending:0 blocked:no
  bob node-id:1 connection:Connected role:Secondary congested:no ap-in-flight:0
      rs-in-flight:0
    volume:0 replication:Established peer-disk:UpToDate resync-suspended:no
        received:0 sent:1048412 out-of-sync:0 verify-found:0 verify-skipped:0
        pending:0 unacked:0

";
    check(vec![r0], VERBOSE_STATISTICS, expected);
    assert!(expected.lines().all(|line| line.len() <= 80));
}

#[test]
fn narrow_width_wraps_every_word_with_continuation_indent() {
    let mut r0 = two_nodes();
    r0.connections[0].peer_devices[0].replication = "SyncSource".to_string();
    r0.connections[0].peer_devices[0].done_percent = Some(50.0);
    let narrow = StatusOptions { width: 20, ..PLAIN };
    check(
        vec![r0],
        narrow,
        "r0 role:Primary
  disk:UpToDate
      open:no
  bob role:Secondary
    replication:SyncSource
        peer-disk:UpToDate
        done:50.00

",
    );
}

#[test]
fn width_zero_never_wraps() {
    let r0 = two_nodes();
    let unwrapped = StatusOptions {
        width: 0,
        ..VERBOSE
    };
    let text = format_status(&report(vec![r0]), &unwrapped);
    assert_eq!(text.lines().count(), 5, "{text}");
}

#[test]
fn json_has_the_report_fields() {
    let text = format_json(&report(vec![two_nodes()]));
    assert!(text.ends_with("}\n"));
    assert!(text.contains("\"peer_disk\": \"UpToDate\""), "{text}");
    let back: StatusReport = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(back, report(vec![two_nodes()]));
}

#[test]
fn rates_below_one_mib_per_second_are_in_kib() {
    assert_eq!(crate::words::rate(250), "250KiB/s");
    assert_eq!(crate::words::rate(1024), "1.0MiB/s");
    assert_eq!(crate::words::rate(100 * 1024 + 512), "100.5MiB/s");
}

/// Issue 3: a Diskless node and a Diskless peer in `status` (drbd-semantics.md §4).
#[test]
fn diskless_local_and_peer_disks() {
    let mut r0 = two_nodes();
    r0.devices[0].disk = "Diskless".to_string();
    r0.connections[0].peer_devices[0].peer_disk = "Diskless".to_string();
    check(
        vec![r0],
        PLAIN,
        "r0 role:Primary
  disk:Diskless open:no
  bob role:Secondary
    peer-disk:Diskless

",
    );
}
