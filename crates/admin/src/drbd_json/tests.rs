//! The `drbdsetup status --json` schema (issue 27, item 2): every key a consumer of
//! drbdsetup's JSON reads is there, in drbdsetup's order, with drbdsetup's JSON type.

use serde_json::Value;

use super::*;
use crate::fixtures::{report, two_nodes};

/// Keys of each object in drbdsetup's order, with the JSON type of each value: `s` string,
/// `n` number, `b` boolean, `a` array. Written from drbdsetup's `status --json` output
/// format for these tests.
const RESOURCE_KEYS: &[(&str, char)] = &[
    ("name", 's'),
    ("node-id", 'n'),
    ("role", 's'),
    ("suspended", 'b'),
    ("suspended-user", 'b'),
    ("suspended-no-data", 'b'),
    ("suspended-fencing", 'b'),
    ("suspended-quorum", 'b'),
    ("force-io-failures", 'b'),
    ("write-ordering", 's'),
    ("devices", 'a'),
    ("connections", 'a'),
];
const DEVICE_KEYS: &[(&str, char)] = &[
    ("volume", 'n'),
    ("minor", 'n'),
    ("disk-state", 's'),
    ("client", 'b'),
    ("open", 'b'),
    ("quorum", 'b'),
    ("size", 'n'),
    ("read", 'n'),
    ("written", 'n'),
    ("al-writes", 'n'),
    ("bm-writes", 'n'),
    ("upper-pending", 'n'),
    ("lower-pending", 'n'),
    ("al-suspended", 'b'),
    ("blocked", 's'),
];
const CONNECTION_KEYS: &[(&str, char)] = &[
    ("peer-node-id", 'n'),
    ("name", 's'),
    ("connection-state", 's'),
    ("congested", 'b'),
    ("peer-role", 's'),
    ("ap-in-flight", 'n'),
    ("rs-in-flight", 'n'),
    ("peer_devices", 'a'),
];
const PEER_DEVICE_KEYS: &[(&str, char)] = &[
    ("volume", 'n'),
    ("replication-state", 's'),
    ("peer-disk-state", 's'),
    ("peer-client", 'b'),
    ("resync-suspended", 's'),
    ("received", 'n'),
    ("sent", 'n'),
    ("out-of-sync", 'n'),
    ("pending", 'n'),
    ("unacked", 'n'),
    ("has-sync-details", 'b'),
    ("has-online-verify-details", 'b'),
    ("percent-in-sync", 'n'),
];

fn kind(value: &Value) -> char {
    match value {
        Value::String(_) => 's',
        Value::Number(_) => 'n',
        Value::Bool(_) => 'b',
        Value::Array(_) => 'a',
        Value::Object(_) => 'o',
        Value::Null => '0',
    }
}

/// The types of `value`'s keys (serde_json's map does not keep the order; see
/// [`keys_at_indent`] for that).
#[track_caller]
fn check_types(what: &str, value: &Value, expected: &[(&str, char)]) {
    let Value::Object(map) = value else {
        panic!("{what} is not an object: {value}")
    };
    assert_eq!(map.len(), expected.len(), "{what}: {value}");
    for (key, expected_kind) in expected {
        let found = map.get(*key).map(kind);
        assert_eq!(found, Some(*expected_kind), "{what}: key {key}");
    }
}

/// The keys of the pretty-printed `text` whose line is indented by exactly `indent`
/// spaces, in order: the keys of every object at one depth of the tree.
fn keys_at_indent(text: &str, indent: usize) -> Vec<String> {
    text.lines()
        .filter(|line| line.len() - line.trim_start().len() == indent)
        .filter_map(|line| {
            line.trim_start()
                .strip_prefix('"')?
                .split_once("\":")
                .map(|(key, _)| key.to_string())
        })
        .collect()
}

fn names(keys: &[&[(&str, char)]]) -> Vec<String> {
    keys.iter()
        .flat_map(|keys| keys.iter().map(|(key, _)| key.to_string()))
        .collect()
}

fn parsed(resources: Vec<ResourceStatus>) -> Value {
    let text = format_drbd_json(&report(resources));
    assert!(text.ends_with('\n'));
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn every_object_has_drbdsetups_keys_in_order_with_its_types() {
    let mut r0 = two_nodes();
    r0.devices[0].size_kib = 1000;
    r0.connections[0].peer_devices[0].out_of_sync_kib = 250;
    let text = format_drbd_json(&report(vec![r0.clone()]));
    // Order: resource keys at depth 1 (indent 4), device then connection keys at depth 2,
    // peer-device keys at depth 3.
    assert_eq!(keys_at_indent(&text, 4), names(&[RESOURCE_KEYS]));
    assert_eq!(
        keys_at_indent(&text, 8),
        names(&[DEVICE_KEYS, CONNECTION_KEYS])
    );
    assert_eq!(keys_at_indent(&text, 12), names(&[PEER_DEVICE_KEYS]));
    let json = parsed(vec![r0]);
    let Value::Array(resources) = &json else {
        panic!("not an array: {json}")
    };
    assert_eq!(resources.len(), 1);
    let resource = &resources[0];
    check_types("resource", resource, RESOURCE_KEYS);
    check_types("device", &resource["devices"][0], DEVICE_KEYS);
    let connection = &resource["connections"][0];
    check_types("connection", connection, CONNECTION_KEYS);
    let peer_device = &connection["peer_devices"][0];
    check_types("peer device", peer_device, PEER_DEVICE_KEYS);
    assert_eq!(peer_device["percent-in-sync"], 75.0);
    assert_eq!(resource["role"], "Primary");
    assert_eq!(connection["peer-role"], "Secondary");
    assert_eq!(connection["connection-state"], "Connected");
}

#[test]
fn values_follow_drbdsetups_spelling() {
    let mut r0 = two_nodes();
    r0.suspended = true;
    r0.suspend_reasons = vec!["quorum".to_string()];
    r0.devices[0].blocked = true;
    r0.devices[0].minor = None;
    r0.connections[0].ap_in_flight_kib = 4;
    let peer = &mut r0.connections[0].peer_devices[0];
    peer.replication = "SyncSource".to_string();
    peer.resync_suspended = "user".to_string();
    peer.done_percent = Some(40.0);
    let json = parsed(vec![r0]);
    let resource = &json[0];
    assert_eq!(
        (&resource["suspended"], &resource["suspended-quorum"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    assert_eq!(resource["suspended-fencing"], false);
    assert_eq!(resource["devices"][0]["blocked"], "upper");
    assert!(
        resource["devices"][0].get("minor").is_none(),
        "no minor without a device"
    );
    assert_eq!(resource["connections"][0]["ap-in-flight"], 8, "sectors");
    let peer = &resource["connections"][0]["peer_devices"][0];
    assert_eq!(peer["resync-suspended"], "user");
    assert_eq!(
        (
            &peer["has-sync-details"],
            &peer["has-online-verify-details"]
        ),
        (&Value::Bool(true), &Value::Bool(false))
    );
}

#[test]
fn no_resources_is_an_empty_array() {
    assert_eq!(parsed(Vec::new()), Value::Array(Vec::new()));
}
