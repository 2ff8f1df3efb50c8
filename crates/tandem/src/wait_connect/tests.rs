//! `wait-connect`'s judgement of one status report, case by case.

use admin::fixtures;

use super::*;
use crate::compat::parse_spec;

#[track_caller]
fn check(spec: &str, bend: impl FnOnce(&mut admin::ResourceStatus), expected: &str) {
    let mut r0 = fixtures::two_nodes();
    r0.connections.push(fixtures::connection("carol", 2));
    bend(&mut r0);
    let spec = parse_spec(spec).expect("a valid spec");
    let actual = match assess(&fixtures::report(vec![r0]), &spec) {
        Assessment::Connected => "Connected".to_string(),
        Assessment::Waiting(what) => format!("Waiting: {what}"),
        Assessment::Stuck(why) => format!("Stuck: {why}"),
    };
    assert!(actual.starts_with(expected), "{actual}");
}

#[test]
fn connections_are_judged_by_state() {
    check("r0", |_| {}, "Connected");
    check(
        "r0",
        |r0| r0.connections[1].connection = "Connecting".into(),
        "Waiting: carol Connecting",
    );
    check(
        "r0:bob",
        |r0| r0.connections[1].connection = "Connecting".into(),
        "Connected",
    );
    check(
        "r0",
        |r0| r0.connections[0].connection = "StandAlone".into(),
        "Stuck: r0: the connection to bob is StandAlone",
    );
    check("r0", |r0| r0.down = true, "Stuck: resource 'r0' is down");
    check(
        "r0:dave",
        |_| {},
        "Stuck: resource 'r0' has no connection named 'dave'",
    );
    check(
        "r0",
        |r0| r0.connections.clear(),
        "Stuck: resource 'r0' has no connections",
    );
    check("r9", |_| {}, "Stuck: no resource named 'r9'");
}
