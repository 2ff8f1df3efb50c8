//! events2 tests: the initial dump and change lines for each kind of state change, checked
//! against the `drbdsetup events2` lines quoted in drbd-semantics.md §4.

use super::*;
use crate::fixtures::{connection, device, peer_device, report, resource, two_nodes};

#[track_caller]
fn check_initial(resources: Vec<ResourceStatus>, statistics: bool, expected: &str) {
    let options = EventsOptions {
        statistics,
        full: false,
    };
    let actual = initial_events(&report(resources), options).join("\n");
    assert_eq!(actual, expected.trim(), "\nactual:\n{actual}");
}

#[track_caller]
fn check_change(
    old: Vec<ResourceStatus>,
    new: Vec<ResourceStatus>,
    statistics: bool,
    expected: &str,
) {
    let options = EventsOptions {
        statistics,
        full: false,
    };
    let actual = change_events(&report(old), &report(new), options).join("\n");
    assert_eq!(actual, expected.trim(), "\nactual:\n{actual}");
}

#[test]
fn initial_dump_lists_parents_first_and_ends_with_exists_dash() {
    let mut r0 = two_nodes();
    r0.connections.push(connection("alice", 2));
    check_initial(
        vec![r0, resource("empty")],
        false,
        "
exists resource name:empty role:Secondary suspended:no force-io-failures:no may_promote:no \
    promotion_score:0
exists resource name:r0 role:Primary suspended:no force-io-failures:no may_promote:no \
    promotion_score:10200
exists device name:r0 volume:0 minor:0 backing_dev:/dev/vg0/r0 disk:UpToDate client:no open:no \
    quorum:yes
exists connection name:r0 peer-node-id:2 conn-name:alice connection:Connected role:Secondary
exists connection name:r0 peer-node-id:1 conn-name:bob connection:Connected role:Secondary
exists peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 replication:Established \
    peer-disk:UpToDate peer-client:no resync-suspended:no
exists -
"
        .trim_start(),
    );
}

#[test]
fn initial_dump_with_statistics_adds_every_counter() {
    let mut r0 = two_nodes();
    r0.devices[0].minor = None;
    r0.devices[0].size_kib = 1024;
    r0.connections[0].ap_in_flight_kib = 4;
    r0.connections[0].peer_devices[0].done_percent = Some(12.346);
    check_initial(
        vec![r0],
        true,
        "
exists resource name:r0 role:Primary suspended:no force-io-failures:no may_promote:no \
    promotion_score:10100 write-ordering:flush
exists device name:r0 volume:0 backing_dev:/dev/vg0/r0 disk:UpToDate client:no open:no quorum:yes \
    size:1024 read:0 written:0 al-writes:0 bm-writes:0 upper-pending:0 lower-pending:0 \
    al-suspended:no blocked:no
exists connection name:r0 peer-node-id:1 conn-name:bob connection:Connected role:Secondary \
    congested:no ap-in-flight:8 rs-in-flight:0
exists peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 replication:Established \
    peer-disk:UpToDate peer-client:no resync-suspended:no done:12.35 received:0 sent:0 \
    out-of-sync:0 pending:0 unacked:0 verify-found:0 verify-skipped:0
exists -
"
        .trim_start(),
    );
}

#[test]
fn empty_report_dumps_only_exists_dash() {
    check_initial(vec![], true, "exists -");
}

#[test]
fn equal_reports_give_no_lines() {
    check_change(vec![two_nodes()], vec![two_nodes()], true, "");
}

#[test]
fn a_change_lists_only_the_changed_state_fields() {
    let mut promoted = two_nodes();
    promoted.role = "Secondary".to_string();
    promoted.devices[0].open = true;
    check_change(
        vec![two_nodes()],
        vec![promoted],
        false,
        "
change resource name:r0 role:Secondary may_promote:yes
change device name:r0 volume:0 minor:0 open:yes
",
    );
}

#[test]
fn counter_changes_need_statistics_and_then_list_every_counter() {
    let mut busy = two_nodes();
    busy.devices[0].written_kib = 4;
    busy.connections[0].peer_devices[0].sent_kib = 4;
    check_change(vec![two_nodes()], vec![busy.clone()], false, "");
    check_change(
        vec![two_nodes()],
        vec![busy],
        true,
        "
change device name:r0 volume:0 minor:0 size:0 read:0 written:4 al-writes:0 bm-writes:0 \
    upper-pending:0 lower-pending:0 al-suspended:no blocked:no
change peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 received:0 sent:4 out-of-sync:0 \
    pending:0 unacked:0 verify-found:0 verify-skipped:0
",
    );
}

#[test]
fn losing_a_peer_changes_the_connection_and_its_volumes() {
    let mut lost = two_nodes();
    let bob = &mut lost.connections[0];
    bob.connection = "Connecting".to_string();
    bob.role = "Unknown".to_string();
    bob.peer_devices[0].replication = "Off".to_string();
    bob.peer_devices[0].peer_disk = "DUnknown".to_string();
    check_change(
        vec![two_nodes()],
        vec![lost],
        false,
        "
change resource name:r0 promotion_score:10000
change connection name:r0 peer-node-id:1 conn-name:bob connection:Connecting role:Unknown
change peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 replication:Off peer-disk:DUnknown
",
    );
}

#[test]
fn resync_progress_is_a_change_of_done() {
    // §4 "change peer-device ... replication:SyncSource peer-disk:Inconsistent ... done:37.50".
    let mut started = two_nodes();
    let peer = &mut started.connections[0].peer_devices[0];
    peer.replication = "SyncSource".to_string();
    peer.peer_disk = "Inconsistent".to_string();
    peer.done_percent = Some(0.0);
    let mut progressed = started.clone();
    progressed.connections[0].peer_devices[0].done_percent = Some(37.5);
    let mut finished = progressed.clone();
    let peer = &mut finished.connections[0].peer_devices[0];
    peer.replication = "Established".to_string();
    peer.peer_disk = "UpToDate".to_string();
    peer.done_percent = None;
    let ids = "name:r0 peer-node-id:1 conn-name:bob volume:0";
    let expected =
        format!("change peer-device {ids} replication:SyncSource peer-disk:Inconsistent done:0.00");
    check_change(vec![two_nodes()], vec![started.clone()], false, &expected);
    let expected = format!("change peer-device {ids} done:37.50");
    check_change(vec![started], vec![progressed.clone()], false, &expected);
    let expected = format!("change peer-device {ids} replication:Established peer-disk:UpToDate");
    check_change(vec![progressed], vec![finished], false, &expected);
}

#[test]
fn new_objects_are_created_parents_first_with_all_fields() {
    let mut grown = two_nodes();
    grown.devices.push(device(1));
    let mut carol = connection("carol", 2);
    carol.peer_devices.push(peer_device(0));
    grown.connections.push(carol);
    check_change(
        vec![two_nodes()],
        vec![grown, resource("r1")],
        false,
        "
change resource name:r0 promotion_score:10200
create device name:r0 volume:1 minor:1 backing_dev:/dev/vg0/r0 disk:UpToDate client:no open:no \
    quorum:yes
create connection name:r0 peer-node-id:2 conn-name:carol connection:Connected role:Secondary
create peer-device name:r0 peer-node-id:2 conn-name:carol volume:0 replication:Established \
    peer-disk:UpToDate peer-client:no resync-suspended:no
create resource name:r1 role:Secondary suspended:no force-io-failures:no may_promote:no \
    promotion_score:0
",
    );
}

#[test]
fn vanished_objects_are_destroyed_children_first_before_other_changes() {
    let mut r1 = two_nodes();
    r1.name = "r1".to_string();
    let mut shrunk = two_nodes();
    shrunk.connections.clear();
    shrunk.role = "Secondary".to_string();
    check_change(
        vec![two_nodes(), r1],
        vec![shrunk],
        false,
        "
destroy peer-device name:r1 peer-node-id:1 conn-name:bob volume:0
destroy connection name:r1 peer-node-id:1 conn-name:bob
destroy device name:r1 volume:0 minor:0
destroy resource name:r1
destroy peer-device name:r0 peer-node-id:1 conn-name:bob volume:0
destroy connection name:r0 peer-node-id:1 conn-name:bob
change resource name:r0 role:Secondary may_promote:yes promotion_score:10000
",
    );
}

#[test]
fn a_new_minor_is_a_destroy_and_a_create() {
    let mut moved = two_nodes();
    moved.devices[0].minor = Some(7);
    check_change(
        vec![two_nodes()],
        vec![moved],
        false,
        "
destroy device name:r0 volume:0 minor:0
create device name:r0 volume:0 minor:7 backing_dev:/dev/vg0/r0 disk:UpToDate client:no open:no \
    quorum:yes
",
    );
}

/// Issue 3: a detach and an attach show as `disk:` changes (Diskless, Attaching), and a
/// node without a disk has `backing_dev:none` (drbd-semantics.md §4's `create device` line).
#[test]
fn detach_and_attach_show_diskless_and_attaching() {
    let attached = two_nodes();
    let mut detached = two_nodes();
    detached.devices[0].disk = "Diskless".to_string();
    let mut attaching = two_nodes();
    attaching.devices[0].disk = "Attaching".to_string();
    let expected = "change resource name:r0 promotion_score:0\nchange device name:r0 volume:0 \
        minor:0 disk:Diskless";
    check_change(vec![attached], vec![detached.clone()], false, expected);
    check_change(
        vec![detached],
        vec![attaching],
        false,
        "change device name:r0 volume:0 minor:0 disk:Attaching",
    );
    let mut tiebreaker = two_nodes();
    tiebreaker.devices[0].disk = "Diskless".to_string();
    tiebreaker.devices[0].backing_dev = "none".to_string();
    tiebreaker.devices[0].minor = None;
    let line = initial_events(&report(vec![tiebreaker]), EventsOptions::default()).join("\n");
    assert!(
        line.contains("exists device name:r0 volume:0 backing_dev:none disk:Diskless client:yes"),
        "{line}"
    );
}

/// Lines in the form `drbdsetup events2 --now --statistics` prints for a two-node resource
/// (written for these tests from drbdsetup(8) and drbd-semantics.md §4, not captured): the
/// field names and their order are what scripts and drbd-reactor read.
const DRBDSETUP_STATISTICS_SAMPLE: &str = "
exists resource name:r0 role:Primary suspended:no force-io-failures:no may_promote:no \
    promotion_score:10101 write-ordering:flush
exists device name:r0 volume:0 minor:0 backing_dev:/dev/vg0/r0 disk:UpToDate client:no open:yes \
    quorum:yes size:1048412 read:2080 written:1048412 al-writes:17 bm-writes:48 upper-pending:0 \
    lower-pending:0 al-suspended:no blocked:no
exists connection name:r0 peer-node-id:1 conn-name:bob connection:Connected role:Secondary \
    congested:no ap-in-flight:0 rs-in-flight:0
exists peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 replication:Established \
    peer-disk:UpToDate peer-client:no resync-suspended:no received:0 sent:1048412 out-of-sync:0 \
    pending:0 unacked:0
exists -
";

/// The same without `--statistics`, and the change lines of a failover as drbdsetup prints
/// them (only the fields that changed, in the object's field order).
const DRBDSETUP_STATE_SAMPLE: &str = "
exists resource name:r0 role:Secondary suspended:no force-io-failures:no may_promote:yes \
    promotion_score:10101
exists device name:r0 volume:0 minor:0 backing_dev:/dev/vg0/r0 disk:UpToDate client:no open:no \
    quorum:yes
exists connection name:r0 peer-node-id:1 conn-name:bob connection:Connected role:Secondary
exists peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 replication:Established \
    peer-disk:UpToDate peer-client:no resync-suspended:no
exists path name:r0 peer-node-id:1 conn-name:bob local:ipv4:10.0.0.1:7789 peer:ipv4:10.0.0.2:7789 \
    established:yes
exists -
change resource name:r0 role:Primary may_promote:no
";

/// Fields tandem prints that drbdsetup does not; they come after DRBD's own.
const TANDEM_ONLY_FIELDS: &[&str] = &["verify-found", "verify-skipped"];

/// `VERB OBJECT` and the names of the `key:value` fields of an event line, in order.
fn shape(line: &str) -> (String, Vec<String>) {
    let mut words = line.split(' ');
    let verb_object: Vec<&str> = words.by_ref().take(2).collect();
    let names = words
        .filter_map(|word| word.split_once(':').map(|(name, _)| name.to_string()))
        .filter(|name| !TANDEM_ONLY_FIELDS.contains(&name.as_str()))
        .collect();
    (verb_object.join(" "), names)
}

#[track_caller]
fn check_same_shapes(sample: &str, actual: &[String]) {
    let expected: Vec<_> = sample.trim().lines().map(shape).collect();
    let actual: Vec<_> = actual.iter().map(|line| shape(line)).collect();
    assert_eq!(actual, expected, "\nactual:\n{actual:#?}");
}

/// A Secondary `r0` with an UpToDate volume, connected to `bob`: the sample's state.
fn secondary_with_bob() -> ResourceStatus {
    let mut r0 = two_nodes();
    r0.role = "Secondary".to_string();
    r0.connections[0].paths.push(PathStatus {
        local: "10.0.0.1:7789".to_string(),
        peer: "10.0.0.2:7789".to_string(),
        established: true,
    });
    r0
}

#[test]
fn golden_events2_statistics_fields_and_order() {
    let options = EventsOptions {
        statistics: true,
        full: false,
    };
    let lines = initial_events(&report(vec![two_nodes()]), options);
    check_same_shapes(DRBDSETUP_STATISTICS_SAMPLE, &lines);
}

#[test]
fn golden_events2_state_fields_and_change_order() {
    let secondary = secondary_with_bob();
    let mut primary = secondary.clone();
    primary.role = "Primary".to_string();
    let options = EventsOptions::default();
    let mut lines = initial_events(&report(vec![secondary.clone()]), options);
    lines.extend(change_events(
        &report(vec![secondary]),
        &report(vec![primary]),
        options,
    ));
    check_same_shapes(DRBDSETUP_STATE_SAMPLE, &lines);
}

#[test]
fn full_change_lines_carry_every_field_and_counter() {
    let mut busy = two_nodes();
    busy.devices[0].written_kib = 8;
    let options = EventsOptions {
        statistics: false,
        full: true,
    };
    let lines = change_events(&report(vec![two_nodes()]), &report(vec![busy]), options);
    let expected = "change device name:r0 volume:0 minor:0 backing_dev:/dev/vg0/r0 disk:UpToDate \
        client:no open:no quorum:yes size:0 read:0 written:8 al-writes:0 bm-writes:0 \
        upper-pending:0 lower-pending:0 al-suspended:no blocked:no";
    assert_eq!(lines, vec![expected.to_string()]);
    assert!(change_events(
        &report(vec![two_nodes()]),
        &report(vec![two_nodes()]),
        options
    )
    .is_empty());
}

/// `may_promote` is what drbd-reactor's promoter waits for: only a Secondary with good
/// data, quorum and no Primary peer may.
#[test]
fn may_promote_needs_good_data_quorum_and_no_primary_peer() {
    let yes = secondary_with_bob();
    assert!(yes.may_promote());
    assert_eq!(yes.promotion_score(), 10_100);
    let mut cases: Vec<(&str, ResourceStatus)> = Vec::new();
    let mut primary = yes.clone();
    primary.role = "Primary".to_string();
    cases.push(("already Primary", primary));
    let mut outdated = yes.clone();
    outdated.devices[0].disk = "Outdated".to_string();
    cases.push(("Outdated disk", outdated));
    let mut no_quorum = yes.clone();
    no_quorum.devices[0].quorum = false;
    cases.push(("no quorum", no_quorum));
    let mut stale = yes.clone();
    stale.devices[0].possibly_stale = true;
    cases.push(("possibly stale", stale));
    let mut peer_primary = yes.clone();
    peer_primary.connections[0].role = "Primary".to_string();
    cases.push(("peer is Primary", peer_primary));
    let mut no_volume = yes.clone();
    no_volume.devices.clear();
    cases.push(("no volume", no_volume));
    let mut down = yes.clone();
    down.down = true;
    cases.push(("resource down", down));
    for (case, resource) in cases {
        assert!(!resource.may_promote(), "{case}");
    }
}

/// drbd-semantics.md §4's `create path` line: a connection's path, its addresses as
/// identifying keys, `established` as its state; last in the dump, after the peer devices.
#[test]
fn paths_are_objects_with_their_addresses_and_established() {
    let mut r0 = two_nodes();
    r0.connections[0].paths.push(PathStatus {
        local: "10.0.0.1:7789".to_string(),
        peer: "[fd00::2]:7789".to_string(),
        established: true,
    });
    let mut lost = r0.clone();
    lost.connections[0].paths[0].established = false;
    let lines = initial_events(&report(vec![r0.clone()]), EventsOptions::default());
    let path = "path name:r0 peer-node-id:1 conn-name:bob local:ipv4:10.0.0.1:7789 \
        peer:ipv6:[fd00::2]:7789";
    assert_eq!(
        lines[lines.len() - 2],
        format!("exists {path} established:yes")
    );
    let changes = change_events(
        &report(vec![r0]),
        &report(vec![lost]),
        EventsOptions::default(),
    );
    assert_eq!(changes, vec![format!("change {path} established:no")]);
}

/// A peer configured without a disk (a diskless tiebreaker) is DRBD's client.
#[test]
fn a_diskless_peer_is_a_peer_client() {
    let mut r0 = two_nodes();
    r0.connections[0].peer_devices[0].peer_disk = "Diskless".to_string();
    r0.connections[0].peer_devices[0].peer_client = true;
    let lines = initial_events(&report(vec![r0]), EventsOptions::default()).join("\n");
    assert!(
        lines.contains(" peer-disk:Diskless peer-client:yes resync-suspended:no"),
        "{lines}"
    );
}
