//! Tests of the metrics listener: the exposition text from fixed status values (golden lines,
//! escaping, one-hot states, family grouping), the HTTP head parser (tables and properties),
//! and the server on a real loopback socket with no resources (routes, limits).

use std::time::Duration;

use proptest::prelude::*;
use repl::{
    ConnState, DiskState, EngineStatus, LagStatus, PeerStatus, PeerVolumeStatus, Protocol,
    ReplState, ResyncProgress, Role, VolumeStatus,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http::{self, BadRequest, RequestHead, Route, Status};
use super::text::{self, NodeSample, ResourceSample};

const MIB: u64 = 1 << 20;

fn volume() -> VolumeStatus {
    VolumeStatus {
        volume: 0,
        disk: DiskState::UpToDate,
        size_bytes: 64 * MIB,
        written_bytes: 12_288,
        upper_pending: 2,
        lower_pending: 1,
        al_writes: 7,
        bm_writes: 3,
        possibly_stale: false,
        unclean_since_restart: false,
    }
}

fn peer_volume(resync: Option<ResyncProgress>) -> PeerVolumeStatus {
    PeerVolumeStatus {
        volume: 0,
        replication: if resync.is_some() {
            ReplState::SyncSource
        } else {
            ReplState::Established
        },
        peer_disk: if resync.is_some() {
            DiskState::Inconsistent
        } else {
            DiskState::UpToDate
        },
        sent_bytes: 4096,
        received_bytes: 512,
        out_of_sync_bytes: 8192,
        pending: 0,
        resync,
        resync_suspended: Default::default(),
        verify_oos_bytes: 0,
        verify_skipped_bytes: 0,
    }
}

fn peer(resync: Option<ResyncProgress>) -> PeerStatus {
    PeerStatus {
        node_id: 1,
        connection: ConnState::Connected,
        role: Role::Secondary,
        protocol: Protocol::C,
        lag: LagStatus {
            effective_protocol: Some(Protocol::A),
            unreplicated_bytes: 65_536,
            oldest_age_ms: 1_500,
            peer_possibly_stale: true,
            waiting_writes: 4,
        },
        last_error: None,
        unacked: 5,
        volumes: vec![peer_volume(resync)],
    }
}

fn resource(name: &str, resync: Option<ResyncProgress>) -> ResourceSample {
    ResourceSample {
        name: name.to_string(),
        status: EngineStatus {
            node_id: 0,
            role: Role::Primary,
            volumes: vec![volume()],
            peers: vec![peer(resync)],
        },
        quorum: true,
        suspended: false,
        down: false,
        peer_names: vec![(1, "bob".to_string())],
        srm: None,
        report: admin::ResourceStatus {
            name: name.to_string(),
            ..admin::fixtures::two_nodes()
        },
    }
}

fn node(resources: Vec<ResourceSample>) -> NodeSample {
    NodeSample {
        node: "alice".into(),
        version: "1.2.3".into(),
        resources,
    }
}

fn resyncing() -> Option<ResyncProgress> {
    Some(ResyncProgress {
        total_bytes: 4 * MIB,
        done_bytes: MIB,
        failed_bytes: 0,
        in_flight_bytes: 0,
        rate_bytes_per_s: 2 * MIB,
    })
}

fn assert_lines(text: &str, expected: &[&str]) {
    for line in expected {
        assert!(
            text.lines().any(|l| l == *line),
            "missing line {line:?} in:\n{text}"
        );
    }
}

#[test]
fn the_exposition_holds_every_metric_with_its_labels_and_value() {
    let text = text::render(&node(vec![resource("r0", resyncing())]));
    assert_lines(
        &text,
        &[
            "# HELP tandem_build_info Always 1; the labels name the tandem version and this node.",
            "# TYPE tandem_build_info gauge",
            "tandem_build_info{version=\"1.2.3\",node=\"alice\"} 1",
            "tandem_resource_role{resource=\"r0\",role=\"Primary\"} 1",
            "tandem_resource_role{resource=\"r0\",role=\"Secondary\"} 0",
            "tandem_resource_quorum{resource=\"r0\"} 1",
            "tandem_resource_suspended{resource=\"r0\"} 0",
            "tandem_device_disk_state{resource=\"r0\",volume=\"0\",state=\"UpToDate\"} 1",
            "tandem_device_disk_state{resource=\"r0\",volume=\"0\",state=\"Inconsistent\"} 0",
            "tandem_device_size_bytes{resource=\"r0\",volume=\"0\"} 67108864",
            "# TYPE tandem_device_written_bytes_total counter",
            "tandem_device_written_bytes_total{resource=\"r0\",volume=\"0\"} 12288",
            "tandem_device_al_writes_total{resource=\"r0\",volume=\"0\"} 7",
            "tandem_device_bm_writes_total{resource=\"r0\",volume=\"0\"} 3",
            "tandem_device_upper_pending{resource=\"r0\",volume=\"0\"} 2",
            "tandem_device_lower_pending{resource=\"r0\",volume=\"0\"} 1",
            "tandem_device_possibly_stale{resource=\"r0\",volume=\"0\"} 0",
            "tandem_connection_connected{resource=\"r0\",peer=\"bob\"} 1",
            "tandem_connection_state{resource=\"r0\",peer=\"bob\",state=\"Connected\"} 1",
            "tandem_connection_state{resource=\"r0\",peer=\"bob\",state=\"StandAlone\"} 0",
            "tandem_connection_peer_role{resource=\"r0\",peer=\"bob\",role=\"Secondary\"} 1",
            "tandem_connection_protocol{resource=\"r0\",peer=\"bob\",protocol=\"A\"} 1",
            "tandem_connection_protocol{resource=\"r0\",peer=\"bob\",protocol=\"C\"} 0",
            "tandem_connection_unacked_writes{resource=\"r0\",peer=\"bob\"} 5",
            "tandem_connection_unreplicated_bytes{resource=\"r0\",peer=\"bob\"} 65536",
            "tandem_connection_oldest_unreplicated_seconds{resource=\"r0\",peer=\"bob\"} 1.500",
            "tandem_connection_peer_possibly_stale{resource=\"r0\",peer=\"bob\"} 1",
            "tandem_connection_waiting_writes{resource=\"r0\",peer=\"bob\"} 4",
            "tandem_peer_device_replication_state{resource=\"r0\",peer=\"bob\",volume=\"0\",\
             state=\"SyncSource\"} 1",
            "tandem_peer_device_peer_disk_state{resource=\"r0\",peer=\"bob\",volume=\"0\",\
             state=\"Inconsistent\"} 1",
            "# TYPE tandem_peer_device_sent_bytes_total counter",
            "tandem_peer_device_sent_bytes_total{resource=\"r0\",peer=\"bob\",volume=\"0\"} 4096",
            "tandem_peer_device_received_bytes_total{resource=\"r0\",peer=\"bob\",volume=\"0\"} \
             512",
            "tandem_peer_device_out_of_sync_bytes{resource=\"r0\",peer=\"bob\",volume=\"0\"} 8192",
            "tandem_peer_device_pending{resource=\"r0\",peer=\"bob\",volume=\"0\"} 0",
            "tandem_peer_device_resync_done_percent{resource=\"r0\",peer=\"bob\",volume=\"0\"} 25",
            "tandem_peer_device_resync_rate_bytes_per_second{resource=\"r0\",peer=\"bob\",\
             volume=\"0\"} 2097152",
        ],
    );
    assert!(text.ends_with('\n'));
}

#[test]
fn every_name_is_prefixed_and_every_family_is_declared_once_before_its_samples() {
    let text = text::render(&node(vec![
        resource("r0", resyncing()),
        resource("r1", None),
    ]));
    let mut declared: Vec<&str> = Vec::new();
    let mut current = "";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap_or_default();
            assert!(!declared.contains(&name), "{name} declared twice");
            declared.push(name);
            current = name;
        } else if !line.starts_with("# HELP ") {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            assert_eq!(name, current, "sample {line:?} outside its family");
            assert!(
                name.starts_with("tandem_") || name.starts_with("drbd_"),
                "{name}"
            );
        }
    }
    assert!(
        text.contains("tandem_device_size_bytes{resource=\"r1\",volume=\"0\"}"),
        "both resources are rendered"
    );
    assert_eq!(
        declared.len(),
        29 + DRBD_FAMILIES.len(),
        "every family appears with a resync running: {declared:?}"
    );
    let drbd: Vec<&str> = declared
        .iter()
        .copied()
        .filter(|name| name.starts_with("drbd_"))
        .collect();
    assert_eq!(
        drbd, DRBD_FAMILIES,
        "the drbd_* families come last, in their order"
    );
    for name in declared.iter().filter(|name| name.ends_with("_total")) {
        assert!(
            text.contains(&format!("# TYPE {name} counter")),
            "{name} is a counter"
        );
    }
}

/// drbd-reactor's family names (its doc/prometheus.md), in the order tandem renders them.
const DRBD_FAMILIES: [&str; 26] = [
    "drbd_resource_resources",
    "drbd_resource_role",
    "drbd_resource_suspended",
    "drbd_resource_maypromote",
    "drbd_resource_promotionscore",
    "drbd_resource_forceiofailures",
    "drbd_device_state",
    "drbd_device_client",
    "drbd_device_unintentionaldiskless",
    "drbd_device_quorum",
    "drbd_device_open",
    "drbd_device_size_bytes",
    "drbd_device_read_bytes_total",
    "drbd_device_written_bytes_total",
    "drbd_device_alwrites_total",
    "drbd_device_bmwrites_total",
    "drbd_device_upperpending",
    "drbd_device_lowerpending",
    "drbd_device_alsuspended",
    "drbd_connection_state",
    "drbd_connection_congested",
    "drbd_connection_apinflight_bytes",
    "drbd_connection_rsinflight_bytes",
    "drbd_peerdevice_outofsync_bytes",
    "drbd_peerdevice_sent_bytes",
    "drbd_peerdevice_received_bytes",
];

/// Issue 27, item 4: drbd-reactor's series and labels, so its dashboards read a tandem node.
#[test]
fn drbd_reactor_names_and_labels_follow_the_tandem_ones() {
    let mut sample = resource("r0", None);
    sample.report.devices[0].size_kib = 64 * 1024;
    sample.report.devices[0].written_kib = 12;
    sample.report.connections[0].ap_in_flight_kib = 4;
    sample.report.connections[0].peer_devices[0].out_of_sync_kib = 8;
    let text = text::render(&node(vec![sample]));
    assert_lines(
        &text,
        &[
            "drbd_resource_resources 1",
            "drbd_resource_role{name=\"r0\",drbd_resource_role=\"Primary\"} 1",
            "drbd_resource_role{name=\"r0\",drbd_resource_role=\"Secondary\"} 0",
            "drbd_resource_maypromote{name=\"r0\"} 0",
            "drbd_resource_promotionscore{name=\"r0\"} 10100",
            "drbd_device_state{name=\"r0\",volume=\"0\",minor=\"0\",\
             drbd_device_state=\"UpToDate\"} 1",
            "drbd_device_quorum{name=\"r0\",volume=\"0\",minor=\"0\"} 1",
            "drbd_device_size_bytes{name=\"r0\",volume=\"0\",minor=\"0\"} 67108864",
            "# TYPE drbd_device_written_bytes_total counter",
            "drbd_device_written_bytes_total{name=\"r0\",volume=\"0\",minor=\"0\"} 12288",
            "drbd_device_unintentionaldiskless{name=\"r0\",volume=\"0\",minor=\"0\"} 0",
            "drbd_connection_state{name=\"r0\",conn_name=\"bob\",peer_node_id=\"1\",\
             drbd_connection_state=\"Connected\"} 1",
            "drbd_connection_apinflight_bytes{name=\"r0\",conn_name=\"bob\",peer_node_id=\"1\"} \
             4096",
            "drbd_peerdevice_outofsync_bytes{name=\"r0\",conn_name=\"bob\",peer_node_id=\"1\",\
             volume=\"0\"} 8192",
            "# TYPE drbd_peerdevice_sent_bytes counter",
            "drbd_peerdevice_sent_bytes{name=\"r0\",conn_name=\"bob\",peer_node_id=\"1\",\
             volume=\"0\"} 0",
        ],
    );
}

#[test]
fn one_hot_states_have_exactly_one_sample_at_one() {
    let text = text::render(&node(vec![resource("r0", None)]));
    let families = [
        ("tandem_resource_role{", Role::ALL.len()),
        ("tandem_device_disk_state{", DiskState::ALL.len()),
        ("tandem_connection_state{", ConnState::ALL.len()),
        ("tandem_connection_peer_role{", Role::ALL.len()),
        ("tandem_connection_protocol{", 3),
        (
            "tandem_peer_device_replication_state{",
            ReplState::ALL.len(),
        ),
        ("tandem_peer_device_peer_disk_state{", DiskState::ALL.len()),
    ];
    for (prefix, states) in families {
        let samples: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with(prefix))
            .collect();
        assert_eq!(samples.len(), states, "{prefix}");
        assert_eq!(
            samples.iter().filter(|line| line.ends_with(" 1")).count(),
            1,
            "{prefix}: {samples:?}"
        );
        assert_eq!(
            samples.iter().filter(|line| line.ends_with(" 0")).count(),
            states - 1,
            "{prefix}"
        );
    }
}

#[test]
fn resync_progress_is_absent_while_nothing_resyncs() {
    let text = text::render(&node(vec![resource("r0", None)]));
    assert!(
        !text.contains("tandem_peer_device_resync_done_percent"),
        "{text}"
    );
    assert!(
        !text.contains("tandem_peer_device_resync_rate_bytes_per_second"),
        "{text}"
    );
    assert_lines(
        &text,
        &[
            "tandem_peer_device_replication_state{resource=\"r0\",peer=\"bob\",\
                           volume=\"0\",state=\"Established\"} 1",
        ],
    );
}

#[test]
fn a_resource_that_is_down_shows_its_connections_standalone_and_unknown_peers_by_id() {
    let mut sample = resource("r0", None);
    sample.down = true;
    sample.peer_names.clear();
    sample.quorum = false;
    sample.suspended = true;
    let text = text::render(&node(vec![sample]));
    assert_lines(
        &text,
        &[
            "tandem_connection_connected{resource=\"r0\",peer=\"node-1\"} 0",
            "tandem_connection_state{resource=\"r0\",peer=\"node-1\",state=\"StandAlone\"} 1",
            "tandem_connection_state{resource=\"r0\",peer=\"node-1\",state=\"Connected\"} 0",
            "tandem_resource_quorum{resource=\"r0\"} 0",
            "tandem_resource_suspended{resource=\"r0\"} 1",
        ],
    );
}

#[test]
fn label_values_escape_backslash_quote_and_newline() {
    let cases = [
        ("plain", "plain"),
        ("a\"b", "a\\\"b"),
        ("a\\b", "a\\\\b"),
        ("a\nb", "a\\nb"),
        ("\\\"\n", "\\\\\\\"\\n"),
        ("ünïcode", "ünïcode"),
    ];
    for (raw, escaped) in cases {
        assert_eq!(text::escape_label_value(raw), escaped, "{raw:?}");
    }
    let text = text::render(&node(vec![resource("we\"ird\\name\nx", None)]));
    assert_lines(
        &text,
        &["tandem_resource_quorum{resource=\"we\\\"ird\\\\name\\nx\"} 1"],
    );
    assert!(
        text.lines().all(|line| !line.ends_with("name")),
        "a raw newline split a sample line"
    );
}

#[test]
fn the_oldest_age_is_printed_in_seconds_with_millisecond_precision() {
    for (millis, printed) in [
        (0, "0.000"),
        (7, "0.007"),
        (1_000, "1.000"),
        (61_234, "61.234"),
    ] {
        let mut sample = resource("r0", None);
        sample.status.peers[0].lag.oldest_age_ms = millis;
        let text = text::render(&node(vec![sample]));
        let line = format!(
            "tandem_connection_oldest_unreplicated_seconds{{resource=\"r0\",peer=\"bob\"}} \
             {printed}"
        );
        assert_lines(&text, &[&line]);
    }
}

#[test]
fn head_end_finds_the_blank_line() {
    let cases: [(&[u8], Option<usize>); 7] = [
        (b"GET / HTTP/1.1\r\n\r\n", Some(18)),
        (b"GET / HTTP/1.1\n\n", Some(16)),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody", Some(27)),
        (b"GET / HTTP/1.1\r\nHost: x\r\n", None),
        (b"GET / HTTP/1.1\r\n\r", None),
        (b"", None),
        (b"\n\n", Some(2)),
    ];
    for (buffer, end) in cases {
        assert_eq!(
            http::head_end(buffer),
            end,
            "{:?}",
            String::from_utf8_lossy(buffer)
        );
    }
}

#[test]
fn parse_head_accepts_requests_and_refuses_garbage() {
    let head = |method: &str, path: &str| {
        Ok(RequestHead {
            method: method.into(),
            path: path.into(),
        })
    };
    let cases: [(&[u8], Result<RequestHead, BadRequest>); 12] = [
        (
            b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n",
            head("GET", "/metrics"),
        ),
        (
            b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n",
            head("GET", "/metrics"),
        ),
        (b"POST / HTTP/1.1\n\n", head("POST", "/")),
        (
            b"HEAD /metrics HTTP/1.1\r\nX-Empty:\r\n\r\n",
            head("HEAD", "/metrics"),
        ),
        (b"hello\r\n\r\n", Err(BadRequest::RequestLine)),
        (
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            Err(BadRequest::RequestLine),
        ),
        (
            b"G(T /metrics HTTP/1.1\r\n\r\n",
            Err(BadRequest::RequestLine),
        ),
        (
            b"GET /metrics HTTP/2.0\r\n\r\n",
            Err(BadRequest::Version("HTTP/2.0".into())),
        ),
        (
            b"GET /metrics HTTP/1.1\r\nno colon\r\n\r\n",
            Err(BadRequest::Header),
        ),
        (
            b"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n",
            Err(BadRequest::Header),
        ),
        (b"GET /m\x00 HTTP/1.1\r\n\r\n", Err(BadRequest::NotText)),
        (b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n", Err(BadRequest::NotText)),
    ];
    for (bytes, expected) in cases {
        assert_eq!(
            http::parse_head(bytes),
            expected,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    let long = format!(
        "GET /{} HTTP/1.1\r\n\r\n",
        "a".repeat(http::REQUEST_HEAD_BYTES_MAX)
    );
    assert_eq!(http::parse_head(long.as_bytes()), Err(BadRequest::TooLarge));
}

#[test]
fn routes_serve_only_get_and_head_of_metrics() {
    let cases = [
        ("GET", "/metrics", Route::Metrics { with_body: true }),
        ("HEAD", "/metrics", Route::Metrics { with_body: false }),
        ("GET", "/", Route::NotFound),
        ("GET", "/metrics/", Route::NotFound),
        ("POST", "/metrics", Route::MethodNotAllowed),
        ("get", "/metrics", Route::MethodNotAllowed),
        ("DELETE", "/other", Route::MethodNotAllowed),
    ];
    for (method, path, expected) in cases {
        assert_eq!(
            http::route(&RequestHead {
                method: method.into(),
                path: path.into()
            }),
            expected,
            "{method} {path}"
        );
    }
}

#[test]
fn responses_carry_length_type_and_close() {
    let ok = String::from_utf8(http::response(
        Status::Ok,
        http::METRICS_CONTENT_TYPE,
        "abc\n",
        true,
    ))
    .unwrap_or_default();
    assert_eq!(
        ok,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; \
         charset=utf-8\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabc\n"
    );
    let head = String::from_utf8(http::response(
        Status::Ok,
        http::METRICS_CONTENT_TYPE,
        "abc\n",
        false,
    ))
    .unwrap_or_default();
    assert!(
        head.ends_with("Content-Length: 4\r\nConnection: close\r\n\r\n"),
        "{head}"
    );
    let refused =
        String::from_utf8(http::error_response(Status::MethodNotAllowed, "no")).unwrap_or_default();
    assert!(
        refused.starts_with("HTTP/1.1 405 Method Not Allowed\r\n")
            && refused.contains("\r\nAllow: GET, HEAD\r\n"),
        "{refused}"
    );
}

proptest! {
    #[test]
    fn parsing_arbitrary_bytes_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let _ = http::head_end(&bytes);
        let _ = http::parse_head(&bytes);
    }

    #[test]
    fn well_formed_heads_parse_to_their_method_and_path(
        method in "[A-Z]{1,8}",
        path in "/[a-z0-9/._-]{0,40}",
        query in proptest::option::of("[a-z=&]{0,20}"),
        headers in proptest::collection::vec(("[A-Za-z-]{1,20}", "[ -~]{0,40}"), 0..8),
    ) {
        let target = query.map_or_else(|| path.clone(), |q| format!("{path}?{q}"));
        let mut text = format!("{method} {target} HTTP/1.1\r\n");
        for (name, value) in &headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        prop_assert_eq!(http::head_end(text.as_bytes()), Some(text.len()));
        prop_assert_eq!(http::parse_head(text.as_bytes()), Ok(RequestHead { method, path }));
    }
}

/// Starts the listener with no resources on a loopback port; returns its address.
async fn listener() -> std::net::SocketAddr {
    let bound = super::bind(Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))).await;
    let Ok(Some(listener)) = bound else {
        panic!("cannot bind a loopback port")
    };
    let Ok(address) = listener.local_addr() else {
        panic!("no local address")
    };
    tokio::spawn(super::serve(listener, "alice".into(), Vec::new()));
    address
}

/// Sends `request`, ends the sending side, and reads the whole answer (the server closes).
async fn exchange(address: std::net::SocketAddr, request: &[u8]) -> String {
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        panic!("cannot connect")
    };
    let _ = stream.write_all(request).await;
    let _ = stream.shutdown().await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn the_server_answers_scrapes_and_refuses_bad_requests() {
    let address = listener().await;
    let ok = exchange(address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("\r\nContent-Type: text/plain; version=0.0.4"),
        "{ok}"
    );
    assert!(
        ok.contains(&format!(
            "tandem_build_info{{version=\"{}\",node=\"alice\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{ok}"
    );
    let head = exchange(address, b"HEAD /metrics HTTP/1.1\r\n\r\n").await;
    assert!(
        head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"),
        "{head}"
    );
    let cases: [(&[u8], &str); 5] = [
        (b"GET /nothing HTTP/1.1\r\n\r\n", "HTTP/1.1 404 "),
        (
            b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 405 ",
        ),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
            "HTTP/1.1 400 ",
        ),
        (b"GET /metrics HTTP/1.1\r\nHost", "HTTP/1.1 400 "),
        (b"GET /metrics HTTP/9\r\n\r\n", "HTTP/1.1 400 "),
    ];
    for (request, status) in cases {
        let answer = exchange(address, request).await;
        assert!(
            answer.starts_with(status),
            "{:?} got {answer}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn an_oversized_head_gets_400_and_the_connection_closed() {
    let address = listener().await;
    let mut request = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while request.len() <= 2 * http::REQUEST_HEAD_BYTES_MAX {
        request.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let answer = exchange(address, &request).await;
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("longer than 8192 bytes"), "{answer}");
}

#[tokio::test]
async fn clients_beyond_the_limit_are_closed_unanswered() {
    let address = listener().await;
    let mut idle = Vec::new();
    for _ in 0..super::CLIENTS_MAX {
        let Ok(stream) = tokio::net::TcpStream::connect(address).await else {
            panic!("cannot connect")
        };
        idle.push(stream);
    }
    // The listener accepts in order, so the idle clients hold every permit by now or soon;
    // the next one is closed without an answer once they do.
    let answer = exchange(address, b"GET /metrics HTTP/1.1\r\n\r\n").await;
    assert_eq!(
        answer,
        "",
        "a client beyond {} got an answer",
        super::CLIENTS_MAX
    );
    drop(idle);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let answer = exchange(address, b"GET /metrics HTTP/1.1\r\n\r\n").await;
        if answer.starts_with("HTTP/1.1 200 OK") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the permits did not come back: {answer:?}"
        );
        tokio::task::yield_now().await;
    }
}

#[test]
fn the_managers_measurements_are_metrics_when_it_runs() {
    let mut with_srm = resource("r0", None);
    let tcp = srm::TcpInfo {
        rtt: Duration::from_micros(1500),
        rtt_variance: Duration::from_micros(100),
        retransmits_total: 3,
        congestion_window_segments: 10,
        unacked_segments: 2,
        not_sent_bytes: 4096,
    };
    let peer = srm::PeerObservation {
        peer: 1,
        connected: true,
        rtt: Some(Duration::from_millis(20)),
        goodput_bytes_per_s: 1000,
        send_queue_fill_permille: 250,
        tcp: Some(tcp),
        ..srm::PeerObservation::default()
    };
    let mut observation = srm::Observation {
        peers: vec![peer],
        ..srm::Observation::default()
    };
    observation.system.cpu_busy_permille = 500;
    with_srm.srm = Some(observation);
    let text = text::render(&node(vec![with_srm]));
    assert_lines(
        &text,
        &[
            "tandem_srm_cpu_busy_ratio{resource=\"r0\"} 0.5",
            "tandem_srm_peer_rtt_seconds{resource=\"r0\",peer=\"bob\"} 0.02",
            "tandem_srm_peer_goodput_bytes_per_second{resource=\"r0\",peer=\"bob\"} 1000",
            "tandem_srm_peer_send_queue_fill_ratio{resource=\"r0\",peer=\"bob\"} 0.25",
            "tandem_srm_tcp_retransmits_total{resource=\"r0\",peer=\"bob\"} 3",
            "tandem_srm_tcp_not_sent_bytes{resource=\"r0\",peer=\"bob\"} 4096",
        ],
    );
    assert!(
        !text.contains("tandem_srm_peer_ack_latency_seconds{"),
        "no acks, no ack latency sample"
    );
    assert!(
        !text::render(&node(vec![resource("r0", None)])).contains("tandem_srm_"),
        "srm off: no manager metrics"
    );
}
