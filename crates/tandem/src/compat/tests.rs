//! The drbdadm/drbdsetup command lines scripts use (issue 27, item 3): each is understood
//! as the tandem request or query it stands for; anything else is refused by name.

use super::*;
use admin::fixtures;

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[track_caller]
fn check(tool: Tool, line: &str, expected: Invocation) {
    assert_eq!(parse(tool, &args(line)), Ok(expected), "{line}");
}

#[track_caller]
fn check_refused(tool: Tool, line: &str, message_part: &str) {
    match parse(tool, &args(line)) {
        Err(error) => assert!(error.to_string().contains(message_part), "{line}: {error}"),
        Ok(invocation) => panic!("{line}: accepted as {invocation:?}"),
    }
}

fn some(name: &str) -> Option<String> {
    Some(name.to_string())
}

#[test]
fn argv0_picks_the_tool_by_file_name() {
    for (arg0, expected) in [
        ("drbdadm", Some(Tool::Drbdadm)),
        ("/usr/lib/tandem/compat/drbdsetup", Some(Tool::Drbdsetup)),
        ("tandem", None),
        ("/usr/bin/drbdadm-9", None),
    ] {
        assert_eq!(Tool::from_argv0(OsStr::new(arg0)), expected, "{arg0}");
    }
}

#[test]
fn drbdsetup_events2_and_status() {
    let events = |statistics, now, full, resource: Option<String>| {
        Invocation::Events(EventsArgs {
            statistics,
            now,
            poll: false,
            full,
            timestamps: false,
            target: Target { resource },
        })
    };
    check(
        Tool::Drbdsetup,
        "events2 --now r0",
        events(false, true, false, some("r0")),
    );
    check(
        Tool::Drbdsetup,
        "events2 --statistics --now all",
        events(true, true, false, None),
    );
    check(
        Tool::Drbdsetup,
        "events2 -s --full",
        events(true, false, true, None),
    );
    let status = |style, verbose, statistics, resource| Invocation::Status {
        resource,
        style,
        verbose,
        statistics,
    };
    check(
        Tool::Drbdsetup,
        "status --json r0",
        status(StatusStyle::DrbdJson, false, false, some("r0")),
    );
    check(
        Tool::Drbdsetup,
        "status r0 --verbose --statistics",
        status(StatusStyle::Text, true, true, some("r0")),
    );
    check(
        Tool::Drbdadm,
        "status",
        status(StatusStyle::Text, false, false, None),
    );
}

/// The OCF agent's `drbdsetup wait-connect-resource RES --wfc-timeout=T --degr-wfc-timeout=T
/// --outdated-wfc-timeout=T`.
#[test]
fn drbdsetup_wait_connect_resource() {
    let spec = Spec {
        resource: some("r0"),
        peer: None,
        volume: None,
    };
    check(
        Tool::Drbdsetup,
        "wait-connect-resource r0 --wfc-timeout=5 --degr-wfc-timeout=5 --outdated-wfc-timeout=5",
        Invocation::WaitConnect {
            spec: spec.clone(),
            timeout_seconds: Some(5),
        },
    );
    check(
        Tool::Drbdsetup,
        "wait-connect-resource --wfc-timeout=0 r0",
        Invocation::WaitConnect {
            spec,
            timeout_seconds: None,
        },
    );
    check_refused(
        Tool::Drbdsetup,
        "wait-connect-resource r0 --wfc-timeout=x",
        "'x' is not a number of seconds",
    );
    check_refused(
        Tool::Drbdsetup,
        "wait-connect-resource r0:bob",
        "not a peer",
    );
    check_refused(
        Tool::Drbdsetup,
        "wait-connect-resource",
        "needs one resource name",
    );
}

#[test]
fn drbdadm_verbs_become_requests() {
    let request = Invocation::Request;
    check(
        Tool::Drbdadm,
        "primary --force r0",
        request(Request::Primary {
            resource: some("r0"),
            force: true,
        }),
    );
    check(
        Tool::Drbdadm,
        "secondary r0",
        request(Request::Secondary {
            resource: some("r0"),
            force: false,
        }),
    );
    check(
        Tool::Drbdadm,
        "up all",
        request(Request::Up { resource: None }),
    );
    check(
        Tool::Drbdadm,
        "-c /etc/drbd.conf down r0",
        request(Request::Down {
            resource: some("r0"),
        }),
    );
    check(
        Tool::Drbdadm,
        "adjust r0",
        request(Request::Adjust {
            resource: some("r0"),
            skip_net: false,
        }),
    );
    check(
        Tool::Drbdadm,
        "adjust --skip-net r0",
        request(Request::Adjust {
            resource: some("r0"),
            skip_net: true,
        }),
    );
    check(
        Tool::Drbdadm,
        "connect --discard-my-data r0:bob",
        request(Request::Connect {
            resource: some("r0"),
            peer: some("bob"),
            discard_my_data: true,
        }),
    );
    check(
        Tool::Drbdadm,
        "disconnect r0",
        request(Request::Disconnect {
            resource: some("r0"),
            peer: None,
        }),
    );
    check(
        Tool::Drbdadm,
        "new-current-uuid --clear-bitmap r0",
        request(Request::NewCurrentUuid {
            resource: some("r0"),
            clear_bitmap: true,
        }),
    );
}

#[test]
fn drbdadm_queries_and_sh_verbs() {
    let spec = |peer: Option<String>, volume| Spec {
        resource: some("r0"),
        peer,
        volume,
    };
    check(
        Tool::Drbdadm,
        "role r0",
        Invocation::Query {
            state: QueriedState::Role,
            spec: spec(None, None),
        },
    );
    check(
        Tool::Drbdadm,
        "cstate r0:bob",
        Invocation::Query {
            state: QueriedState::Connection,
            spec: spec(some("bob"), None),
        },
    );
    check(
        Tool::Drbdadm,
        "dstate r0/0",
        Invocation::Query {
            state: QueriedState::Disk,
            spec: spec(None, Some(0)),
        },
    );
    check(
        Tool::Drbdadm,
        "--config-file=/tmp/r.res sh-ll-dev r0",
        Invocation::Sh {
            verb: ShVerb::LowerDev,
            config: PathBuf::from("/tmp/r.res"),
            resource: some("r0"),
        },
    );
    check(
        Tool::Drbdadm,
        "sh-resources",
        Invocation::Sh {
            verb: ShVerb::Resources,
            config: PathBuf::from(CONFIG_PATH_DEFAULT),
            resource: None,
        },
    );
}

#[test]
fn the_rest_is_refused_by_name() {
    check_refused(
        Tool::Drbdadm,
        "wipe-md r0",
        "'wipe-md' is not supported by tandem's drbdadm",
    );
    check_refused(Tool::Drbdadm, "sh-ip r0", "'sh-ip' is not supported");
    check_refused(
        Tool::Drbdsetup,
        "primary r0",
        "'primary' is not supported by tandem's drbdsetup",
    );
    check_refused(Tool::Drbdsetup, "events2 --diff", "unknown option '--diff'");
    check_refused(
        Tool::Drbdsetup,
        "events2 --now --poll",
        "exclude each other",
    );
    check_refused(Tool::Drbdadm, "", "no command given");
    check_refused(Tool::Drbdadm, "detach r0/1", "whole resources");
    check_refused(Tool::Drbdadm, "role", "needs one resource name");
    check_refused(Tool::Drbdadm, "role r0 r1", "unexpected argument 'r1'");
    check_refused(Tool::Drbdadm, "up r0:bob", "takes no peer");
    check_refused(Tool::Drbdadm, "dstate r0/x", "not a volume number");
    check_refused(Tool::Drbdadm, "cstate :bob", "names no resource");
    check_refused(Tool::Drbdadm, "-c", "needs a file name");
}

#[test]
fn query_answers_come_from_the_status_report() {
    let report = report_of();
    let spec = |peer: Option<String>, volume| Spec {
        resource: some("r0"),
        peer,
        volume,
    };
    let query = |state, spec: Spec| query_text(&report, state, &spec);
    assert_eq!(
        query(QueriedState::Role, spec(None, None)),
        Ok("Primary\n".to_string())
    );
    assert_eq!(
        query(QueriedState::Connection, spec(None, None)),
        Ok("Connecting\nConnected\n".to_string())
    );
    assert_eq!(
        query(QueriedState::Disk, spec(None, None)),
        Ok("UpToDate/DUnknown/UpToDate\n".to_string())
    );
    assert_eq!(
        query(QueriedState::Disk, spec(some("bob"), Some(0))),
        Ok("UpToDate/UpToDate\n".to_string())
    );
    assert!(query(QueriedState::Disk, spec(None, Some(3))).is_err());
    assert!(query(QueriedState::Connection, spec(some("dave"), None)).is_err());
    let other = Spec {
        resource: some("r9"),
        peer: None,
        volume: None,
    };
    assert_eq!(
        query_text(&report, QueriedState::Role, &other),
        Err("no resource named 'r9' on this node".to_string())
    );
}

#[test]
fn sh_verbs_read_this_nodes_section() {
    let text = "resource r0 {
        volume 0 { device /dev/drbd3; disk /dev/vg/alice0; meta-disk internal; }
        on alice { node-id 0; address 10.0.0.1:7789; }
        on bob { node-id 1; address 10.0.0.2:7789; volume 0 { disk /dev/vg/bob0; } }
    }
    resource r1 {
        volume 0 { device /dev/drbd4; disk /dev/vg/r1; meta-disk /dev/vg/md; }
        on alice { node-id 0; address 10.0.0.1:7790; }
        on bob { node-id 1; address 10.0.0.2:7790; }
    }";
    let config = config::parse_str(text, Path::new("test.res")).expect("valid");
    let sh = |verb, resource, node| sh_text(&config, verb, resource, node);
    assert_eq!(
        sh(ShVerb::Resources, None, "alice"),
        Ok("r0 r1\n".to_string())
    );
    assert_eq!(
        sh(ShVerb::Dev, Some("r0"), "alice"),
        Ok("/dev/drbd3\n".to_string())
    );
    assert_eq!(
        sh(ShVerb::Minor, Some("r0"), "alice"),
        Ok("3\n".to_string())
    );
    assert_eq!(
        sh(ShVerb::LowerDev, Some("r0"), "bob"),
        Ok("/dev/vg/bob0\n".to_string())
    );
    assert_eq!(
        sh(ShVerb::MetaDev, Some("r0"), "alice"),
        Ok("/dev/vg/alice0\n".to_string())
    );
    assert_eq!(
        sh(ShVerb::MetaDev, Some("r1"), "alice"),
        Ok("/dev/vg/md\n".to_string())
    );
    assert!(
        sh(ShVerb::Dev, Some("r0"), "carol").is_err_and(|error| error.contains("__DRBD_NODE__"))
    );
    assert!(sh(ShVerb::Dev, Some("r7"), "alice").is_err());
}

/// `r0`, Primary with volume 0 UpToDate; `bob` Connected with an UpToDate peer disk,
/// `alice` Connecting (listed first: the output sorts peers by name).
fn report_of() -> StatusReport {
    let mut r0 = fixtures::two_nodes();
    let mut alice = fixtures::connection("alice", 2);
    alice.connection = "Connecting".to_string();
    let mut unknown = fixtures::peer_device(0);
    unknown.peer_disk = "DUnknown".to_string();
    alice.peer_devices.push(unknown);
    r0.connections.push(alice);
    fixtures::report(vec![r0])
}

/// `drbdadm -V`: the variables scripts `eval` or grep (LINSTOR reads
/// `DRBD_KERNEL_VERSION_CODE`), one `NAME=VALUE` per line, values without a bare space.
#[test]
fn drbdadm_version_variables() {
    check(Tool::Drbdadm, "-V", Invocation::Version);
    check(Tool::Drbdadm, "--version", Invocation::Version);
    check_refused(Tool::Drbdsetup, "-V", "no command given");
    let text = version_text();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    let expected = [
        "DRBDADM_BUILDTAG",
        "DRBDADM_API_VERSION",
        "DRBD_KERNEL_VERSION_CODE",
        "DRBD_KERNEL_VERSION",
        "DRBDADM_VERSION_CODE",
        "DRBDADM_VERSION",
    ];
    assert_eq!(names, expected, "{text}");
    assert!(
        text.contains("DRBD_KERNEL_VERSION_CODE=0x090200\n"),
        "{text}"
    );
    assert!(text.contains("DRBDADM_VERSION=9.22.0\n"), "{text}");
    for line in text.lines() {
        let value = line
            .split_once('=')
            .map(|(_, value)| value)
            .unwrap_or_default();
        assert!(
            !value.replace("\\ ", "").contains(' '),
            "unescaped space in {line}"
        );
    }
}

#[test]
fn runtime_option_words_become_pairs() {
    let words = |line: &str| args(line);
    let pair = |name: &str, value: &str| (name.to_string(), value.to_string());
    assert_eq!(
        option_pairs(&words("--protocol A --ping-int=5")),
        Ok(vec![pair("protocol", "A"), pair("ping-int", "5")])
    );
    assert_eq!(
        option_pairs(&words("--protocol")),
        Err("--protocol needs a value".to_string())
    );
    assert!(
        option_pairs(&words("protocol A")).is_err_and(|error| error.contains("found 'protocol'"))
    );
    assert!(options_spec("r0/1", false).is_err_and(|error| error.contains("not a volume")));
    assert!(options_spec("r0:bob", true).is_err_and(|error| error.contains("not a peer")));
    assert_eq!(
        options_spec("r0:bob", false).map(|spec| spec.peer),
        Ok(Some("bob".to_string()))
    );
}

#[test]
fn drbdadm_forget_peer() {
    let expected = Request::ForgetPeer {
        resource: "r0".into(),
        peer: "bob".into(),
    };
    check(
        Tool::Drbdadm,
        "forget-peer r0:bob",
        Invocation::Request(expected),
    );
    check_refused(Tool::Drbdadm, "forget-peer r0", "names no peer");
    check_refused(Tool::Drbdadm, "forget-peer r0:bob/0", "takes no volume");
    check_refused(Tool::Drbdadm, "forget-peer", "names no resource");
}

#[test]
fn drbdadm_resize() {
    let grow = |resource: &str, volume, size_bytes, assume_clean, assume_peer_has_space| {
        Invocation::Request(Request::Resize {
            resource: some(resource),
            volume,
            size_bytes,
            assume_clean,
            assume_peer_has_space,
        })
    };
    check(
        Tool::Drbdadm,
        "resize r0",
        grow("r0", None, None, false, false),
    );
    check(
        Tool::Drbdadm,
        "resize --size=2G --assume-clean r0/1",
        grow("r0", Some(1), Some(2 << 30), true, false),
    );
    check(
        Tool::Drbdadm,
        "resize --assume-peer-has-space r0",
        grow("r0", None, None, false, true),
    );
    check_refused(Tool::Drbdadm, "resize --size=lots r0", "lots");
    check_refused(Tool::Drbdadm, "resize r0:bob", "takes no peer");
}

#[test]
fn drbdadm_outdate() {
    let config = PathBuf::from("/etc/drbd.conf");
    check(
        Tool::Drbdadm,
        "-c /etc/drbd.conf outdate r0",
        Invocation::Outdate {
            resource: "r0".into(),
            config,
        },
    );
    check_refused(Tool::Drbdadm, "outdate", "needs one resource name");
    check_refused(Tool::Drbdadm, "outdate r0:bob", "not a peer");
}

#[test]
fn drbdadm_get_gi_and_show_gi() {
    let spec = Spec {
        resource: some("r0"),
        peer: some("bob"),
        volume: Some(0),
    };
    let config = PathBuf::from(CONFIG_PATH_DEFAULT);
    check(
        Tool::Drbdadm,
        "get-gi r0:bob/0",
        Invocation::Gi {
            spec: spec.clone(),
            explained: false,
            config: config.clone(),
        },
    );
    check(
        Tool::Drbdadm,
        "show-gi r0:bob/0",
        Invocation::Gi {
            spec,
            explained: true,
            config,
        },
    );
    check_refused(Tool::Drbdadm, "get-gi", "needs one resource name");
    check_refused(Tool::Drbdadm, "get-gi all", "needs one resource name");
}
