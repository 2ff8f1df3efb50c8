//! `tandem events`: the line format of `drbdsetup events2` (drbd-semantics.md §4).
//!
//! Each line is `VERB OBJECT IDS FIELDS`, e.g.
//! `change peer-device name:r0 peer-node-id:1 conn-name:bob volume:0 replication:SyncSource`.
//! Objects and their identifying keys:
//! - `resource name:R`
//! - `device name:R volume:V minor:M` (`minor:` left out when the volume has no device)
//! - `connection name:R peer-node-id:N conn-name:C`
//! - `peer-device name:R peer-node-id:N conn-name:C volume:V`
//! - `path name:R peer-node-id:N conn-name:C local:ipv4:IP:PORT peer:ipv4:IP:PORT` (`ipv6:` with
//!   the address in brackets)
//!
//! An object whose identifying keys change (a new minor, a renamed connection) is reported
//! as destroyed and created again.
//!
//! Fields of each object, in drbdsetup's order; state fields first, then statistics counters:
//! - resource: `role suspended force-io-failures may_promote promotion_score` |
//!   `write-ordering`
//! - device: `backing_dev disk client open quorum` | `size read written al-writes bm-writes
//!   upper-pending lower-pending al-suspended blocked`
//! - connection: `connection role` | `congested ap-in-flight rs-in-flight` (sectors)
//! - peer-device: `replication peer-disk peer-client resync-suspended done` | `received sent
//!   out-of-sync pending unacked verify-found verify-skipped`; `done:` only while the report
//!   has a resync percentage; path: `established`. `verify-found`/`verify-skipped` are tandem's
//!   own (what the last online verify found different or could not judge), after every field
//!   DRBD prints, so a consumer that reads fields by position up to DRBD's last one is not
//!   misled.
//!
//! `may_promote` and `promotion_score` come from [`ResourceStatus::may_promote`] and
//! [`ResourceStatus::promotion_score`]. `client` is `yes` for a volume configured without a
//! disk (`disk none`, `backing_dev:none`), `peer-client` for a peer configured so. Printed
//! with a fixed value because tandem has no such state: `force-io-failures:no`,
//! `al-suspended:no`.
//!
//! Rules (decided here, following drbdsetup where it is clear):
//! - The initial dump is an `exists` line per object, parents before children (resource,
//!   its devices, its connections, its peer devices, its paths), then `exists -`.
//! - `create` lines carry every field, like `exists`. Counters appear only with
//!   `statistics`.
//! - `destroy` lines carry only the identifying keys; children are destroyed before their
//!   parents, and all destroys come before creates and changes.
//! - A `change` line lists only the state fields whose value changed. With `statistics`, if
//!   any counter of the object changed, the line also lists all of its counters (as
//!   drbdsetup does), so a consumer always sees a consistent set. Without `statistics`,
//!   counter changes produce no line. No line is printed for an object with nothing to list.
//! - With `full` (`--full`, which implies `statistics`), a `change` line lists every field
//!   of the object, changed or not, so each line alone gives the object's whole state.
//!

use std::collections::BTreeMap;

use crate::report::{
    ConnectionStatus, DeviceStatus, PathStatus, PeerDeviceStatus, ResourceStatus, StatusReport,
};
use crate::status::sorted;
use crate::words;

/// Which fields event lines carry (`events2 --statistics`, `--full`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventsOptions {
    /// List the statistics counters too.
    pub statistics: bool,
    /// `change` lines list every field, not only the changed ones; implies `statistics`.
    pub full: bool,
}

impl EventsOptions {
    fn statistics(self) -> bool {
        self.statistics || self.full
    }
}

/// One `key:value` pair of an event line.
type Field = (&'static str, String);

/// One object of the events2 model, ready to print.
#[derive(Debug)]
struct Object {
    /// `resource`, `device`, `connection` or `peer-device`.
    kind: &'static str,
    /// The identifying keys, e.g. `name:r0 volume:0 minor:0`.
    ids: String,
    /// State fields, always listed by `exists`/`create`.
    state: Vec<Field>,
    /// Statistics counters, listed only when events are requested with statistics.
    counters: Vec<Field>,
}

/// The initial dump of `events2`: one `exists` line per object, then `exists -`.
pub fn initial_events(report: &StatusReport, options: EventsOptions) -> Vec<String> {
    let mut lines: Vec<String> = objects(report)
        .iter()
        .map(|object| full_line("exists", object, options.statistics()))
        .collect();
    lines.push("exists -".to_string());
    lines
}

/// The `create`, `destroy` and `change` lines that turn `old` into `new`, in the order
/// described in the module documentation. Equal reports give no lines.
pub fn change_events(
    old: &StatusReport,
    new: &StatusReport,
    options: EventsOptions,
) -> Vec<String> {
    let old_objects = objects(old);
    let new_objects = objects(new);
    let old_by_key: BTreeMap<(&str, &str), &Object> = old_objects
        .iter()
        .map(|object| (key(object), object))
        .collect();
    let new_by_key: BTreeMap<(&str, &str), &Object> = new_objects
        .iter()
        .map(|object| (key(object), object))
        .collect();

    let mut lines = Vec::new();
    for object in old_objects.iter().rev() {
        if !new_by_key.contains_key(&key(object)) {
            lines.push(format!("destroy {} {}", object.kind, object.ids));
        }
    }
    for object in &new_objects {
        match old_by_key.get(&key(object)) {
            None => lines.push(full_line("create", object, options.statistics())),
            Some(before) => lines.extend(change_line(before, object, options)),
        }
    }
    lines
}

fn key(object: &Object) -> (&str, &str) {
    (object.kind, object.ids.as_str())
}

/// `VERB kind ids` followed by every state field and, with `statistics`, every counter.
fn full_line(verb: &str, object: &Object, statistics: bool) -> String {
    let mut line = format!("{verb} {} {}", object.kind, object.ids);
    push_fields(&mut line, &object.state);
    if statistics {
        push_fields(&mut line, &object.counters);
    }
    line
}

/// The `change` line from `before` to `after`, if anything is to be listed.
fn change_line(before: &Object, after: &Object, options: EventsOptions) -> Option<String> {
    assert_eq!(key(before), key(after));
    let statistics = options.statistics();
    if options.full {
        let unchanged = before.state == after.state && before.counters == after.counters;
        return (!unchanged).then(|| full_line("change", after, statistics));
    }
    let changed: Vec<Field> = after
        .state
        .iter()
        .filter(|field| !before.state.contains(field))
        .cloned()
        .collect();
    let counters_changed = statistics && before.counters != after.counters;
    if changed.is_empty() && !counters_changed {
        return None;
    }
    let mut line = format!("change {} {}", after.kind, after.ids);
    push_fields(&mut line, &changed);
    if counters_changed {
        push_fields(&mut line, &after.counters);
    }
    Some(line)
}

fn push_fields(line: &mut String, fields: &[Field]) {
    for (name, value) in fields {
        line.push(' ');
        line.push_str(name);
        line.push(':');
        line.push_str(value);
    }
}

/// Every object of `report`, resources sorted by name, each followed by its devices, its
/// connections and their peer devices.
fn objects(report: &StatusReport) -> Vec<Object> {
    let mut objects = Vec::new();
    for resource in sorted(&report.resources, |resource| resource.name.clone()) {
        objects.push(resource_object(resource));
        for device in sorted(&resource.devices, |device| device.volume) {
            objects.push(device_object(&resource.name, device));
        }
        let connections = sorted(&resource.connections, |connection| connection.name.clone());
        for connection in &connections {
            objects.push(connection_object(&resource.name, connection));
        }
        for connection in &connections {
            for peer_device in sorted(&connection.peer_devices, |peer_device| peer_device.volume) {
                objects.push(peer_device_object(&resource.name, connection, peer_device));
            }
        }
        for connection in &connections {
            for path in &connection.paths {
                objects.push(path_object(&resource.name, connection, path));
            }
        }
    }
    objects
}

fn resource_object(resource: &ResourceStatus) -> Object {
    Object {
        kind: "resource",
        ids: format!("name:{}", resource.name),
        state: vec![
            ("role", resource.role.clone()),
            ("suspended", resource.suspended_words()),
            ("force-io-failures", "no".to_string()),
            (
                "may_promote",
                words::yes_no(resource.may_promote()).to_string(),
            ),
            ("promotion_score", resource.promotion_score().to_string()),
        ],
        counters: vec![("write-ordering", resource.write_ordering.clone())],
    }
}

fn device_object(resource: &str, device: &DeviceStatus) -> Object {
    let mut ids = format!("name:{resource} volume:{}", device.volume);
    if let Some(minor) = device.minor {
        ids.push_str(&format!(" minor:{minor}"));
    }
    Object {
        kind: "device",
        ids,
        state: vec![
            ("backing_dev", device.backing_dev.clone()),
            ("disk", device.disk.clone()),
            ("client", words::yes_no(device.is_client()).to_string()),
            ("open", words::yes_no(device.open).to_string()),
            ("quorum", words::yes_no(device.quorum).to_string()),
        ],
        counters: vec![
            ("size", device.size_kib.to_string()),
            ("read", device.read_kib.to_string()),
            ("written", device.written_kib.to_string()),
            ("al-writes", device.al_writes.to_string()),
            ("bm-writes", device.bm_writes.to_string()),
            ("upper-pending", device.upper_pending.to_string()),
            ("lower-pending", device.lower_pending.to_string()),
            ("al-suspended", "no".to_string()),
            ("blocked", words::blocked(device.blocked).to_string()),
        ],
    }
}

fn connection_ids(resource: &str, connection: &ConnectionStatus) -> String {
    format!(
        "name:{resource} peer-node-id:{} conn-name:{}",
        connection.peer_node_id, connection.name
    )
}

fn connection_object(resource: &str, connection: &ConnectionStatus) -> Object {
    let ap_in_flight = words::sectors_from_kib(connection.ap_in_flight_kib);
    let rs_in_flight = words::sectors_from_kib(connection.rs_in_flight_kib);
    Object {
        kind: "connection",
        ids: connection_ids(resource, connection),
        state: vec![
            ("connection", connection.connection.clone()),
            ("role", connection.role.clone()),
        ],
        counters: vec![
            ("congested", words::yes_no(connection.congested).to_string()),
            ("ap-in-flight", ap_in_flight.to_string()),
            ("rs-in-flight", rs_in_flight.to_string()),
        ],
    }
}

fn path_object(resource: &str, connection: &ConnectionStatus, path: &PathStatus) -> Object {
    Object {
        kind: "path",
        ids: format!(
            "{} local:{} peer:{}",
            connection_ids(resource, connection),
            words::address(&path.local),
            words::address(&path.peer)
        ),
        state: vec![("established", words::yes_no(path.established).to_string())],
        counters: Vec::new(),
    }
}

fn peer_device_object(
    resource: &str,
    connection: &ConnectionStatus,
    peer_device: &PeerDeviceStatus,
) -> Object {
    let mut state = vec![
        ("replication", peer_device.replication.clone()),
        ("peer-disk", peer_device.peer_disk.clone()),
        (
            "peer-client",
            words::yes_no(peer_device.peer_client).to_string(),
        ),
        ("resync-suspended", peer_device.resync_suspended.clone()),
    ];
    if let Some(done) = peer_device.done_percent {
        state.push(("done", words::percent(done)));
    }
    Object {
        kind: "peer-device",
        ids: format!(
            "{} volume:{}",
            connection_ids(resource, connection),
            peer_device.volume
        ),
        state,
        counters: vec![
            ("received", peer_device.received_kib.to_string()),
            ("sent", peer_device.sent_kib.to_string()),
            ("out-of-sync", peer_device.out_of_sync_kib.to_string()),
            ("pending", peer_device.pending.to_string()),
            ("unacked", peer_device.unacked.to_string()),
            ("verify-found", peer_device.verify_found_kib.to_string()),
            ("verify-skipped", peer_device.verify_skipped_kib.to_string()),
        ],
    }
}

#[cfg(test)]
mod tests;
