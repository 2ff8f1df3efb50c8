//! The Prometheus metrics listener (issue 5 item 2, `metrics-address` in an `on` section):
//! scraped over plain TCP from real nodes, it shows roles, states and counters that move
//! with the workload; it answers 404, 405 and 400 where it should; a bare port binds
//! loopback only; a busy port fails the start.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use crate::cluster::{free_port, Cluster, Spec, RESOURCE};
use crate::nbd_client;
use crate::tools::{fresh_seed, Rng};

const ALICE: usize = 0;
const BOB: usize = 1;
/// How long one HTTP exchange may take.
const HTTP_DEADLINE: Duration = Duration::from_secs(10);
/// How long counters may take to reach the values a finished write implies.
const SETTLE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a node may take to give up on a busy port.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);
const KIB: u64 = 1024;
const MIB: u64 = 1 << 20;

/// An HTTP answer: status code, raw head, body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Sends `request` to `port` on loopback, ends the sending side, and reads the answer.
fn exchange(port: u16, request: &[u8]) -> Answer {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&address, HTTP_DEADLINE)
        .expect("cannot connect to the metrics port");
    stream
        .set_read_timeout(Some(HTTP_DEADLINE))
        .expect("cannot set a read timeout");
    stream.write_all(request).expect("cannot send the request");
    stream
        .shutdown(Shutdown::Write)
        .expect("cannot end the request");
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .expect("cannot read the answer");
    let text = String::from_utf8(bytes).expect("the answer is not UTF-8");
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// `GET /metrics`: the exposition text; fails unless the answer is a 200 of the right type.
pub(crate) fn scrape(port: u16) -> String {
    let answer = exchange(
        port,
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n",
    );
    assert_eq!(answer.status, 200, "{}", answer.head);
    assert!(
        answer
            .head
            .contains("\r\nContent-Type: text/plain; version=0.0.4"),
        "{}",
        answer.head
    );
    answer.body
}

/// The value of the sample `series` (name and labels, exactly as printed), as printed.
fn raw<'a>(text: &'a str, series: &str) -> &'a str {
    text.lines()
        .find_map(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
}

/// The value of the sample `series` as a number.
fn value(text: &str, series: &str) -> f64 {
    raw(text, series)
        .parse()
        .unwrap_or_else(|_| panic!("{series} is not a number in:\n{text}"))
}

/// The value of a byte gauge or counter, which must be a whole number.
fn bytes(text: &str, series: &str) -> u64 {
    raw(text, series)
        .parse()
        .unwrap_or_else(|_| panic!("{series} is not a whole number in:\n{text}"))
}

/// Local addresses (as /proc/net/tcp{,6} print them) of sockets listening on `port`.
fn listening_addresses(port: u16) -> Vec<String> {
    let suffix = format!(":{port:04X}");
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // Field 1 is the local address, field 3 the state; 0A is LISTEN.
            if fields.len() > 3 && fields[3] == "0A" && fields[1].ends_with(&suffix) {
                found.push(fields[1].to_string());
            }
        }
    }
    found
}

/// Writes `count` seeded 64 KiB blocks, 1 MiB apart, through `index`'s export.
fn write_blocks(cluster: &Cluster, index: usize, count: u64) {
    let mut rng = Rng::new(fresh_seed());
    let mut client =
        nbd_client::open(&cluster.nbd_socket(index), RESOURCE).expect("open the export");
    for block in 0..count {
        assert_eq!(
            client.write(block * MIB, &rng.bytes(64 * 1024)),
            0,
            "write {block}"
        );
    }
    client.disconnect();
}

#[test]
fn scrapes_show_roles_states_and_counters_that_grow_with_writes() {
    let ports = [free_port(), free_port()];
    let spec = Spec::two_nodes('C')
        .host_line(ALICE, &format!("metrics-address {};", ports[ALICE]))
        .host_line(BOB, &format!("metrics-address {};", ports[BOB]));
    let cluster = Cluster::with_primary(spec);
    let device = "{resource=\"r0\",volume=\"0\"}";
    let towards_bob = "{resource=\"r0\",peer=\"bob\"}";
    let towards_bob_volume = "{resource=\"r0\",peer=\"bob\",volume=\"0\"}";
    let from_alice_volume = "{resource=\"r0\",peer=\"alice\",volume=\"0\"}";

    let before = scrape(ports[ALICE]);
    assert_gauges_before_writes(&before);
    assert_eq!(
        bytes(&before, &format!("tandem_device_size_bytes{device}")),
        cluster.export_bytes()
    );
    assert!(
        !before.contains("tandem_peer_device_resync_done_percent"),
        "no resync runs, yet:\n{before}"
    );
    let bob_before = scrape(ports[BOB]);
    assert_eq!(
        value(
            &bob_before,
            "tandem_resource_role{resource=\"r0\",role=\"Secondary\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &bob_before,
            "tandem_connection_peer_role{resource=\"r0\",peer=\"alice\",role=\"Primary\"}"
        ),
        1.0
    );

    write_blocks(&cluster, ALICE, 4);
    let written = 4 * 64 * KIB;
    let after = scrape(ports[ALICE]);
    let grown = |text: &str, old: &str, series: &str| bytes(text, series) - bytes(old, series);
    assert!(
        grown(
            &after,
            &before,
            &format!("tandem_device_written_bytes_total{device}")
        ) >= written,
        "{after}"
    );
    assert!(
        grown(
            &after,
            &before,
            &format!("tandem_peer_device_sent_bytes_total{towards_bob_volume}")
        ) >= written,
        "{after}"
    );
    assert!(
        bytes(&after, &format!("tandem_device_al_writes_total{device}")) >= 1,
        "a write to a cold extent writes the activity log:\n{after}"
    );
    cluster.wait_until(
        "bob's scrape counts the received writes",
        SETTLE_DEADLINE,
        || {
            grown(
                &scrape(ports[BOB]),
                &bob_before,
                &format!("tandem_peer_device_received_bytes_total{from_alice_volume}"),
            ) >= written
        },
    );
    cluster.wait_until(
        "nothing is left unreplicated under protocol C",
        SETTLE_DEADLINE,
        || {
            let text = scrape(ports[ALICE]);
            bytes(
                &text,
                &format!("tandem_connection_unreplicated_bytes{towards_bob}"),
            ) == 0
                && value(
                    &text,
                    &format!("tandem_connection_oldest_unreplicated_seconds{towards_bob}"),
                ) == 0.0
        },
    );

    assert_log_and_listeners(&cluster, ports);
}

/// Before any write: alice's scrape shows her build, roles, states and a clean peer device.
fn assert_gauges_before_writes(before: &str) {
    assert!(
        before
            .lines()
            .any(|line| line.starts_with("tandem_build_info{version=")
                && line.ends_with(",node=\"alice\"} 1")),
        "{before}"
    );
    for (series, expected) in [
        (
            "tandem_resource_role{resource=\"r0\",role=\"Primary\"}",
            1.0,
        ),
        (
            "tandem_resource_role{resource=\"r0\",role=\"Secondary\"}",
            0.0,
        ),
        ("tandem_resource_quorum{resource=\"r0\"}", 1.0),
        ("tandem_resource_suspended{resource=\"r0\"}", 0.0),
        (
            "tandem_device_disk_state{resource=\"r0\",volume=\"0\",state=\"UpToDate\"}",
            1.0,
        ),
        (
            "tandem_connection_connected{resource=\"r0\",peer=\"bob\"}",
            1.0,
        ),
        (
            "tandem_connection_state{resource=\"r0\",peer=\"bob\",state=\"Connected\"}",
            1.0,
        ),
        (
            "tandem_connection_peer_role{resource=\"r0\",peer=\"bob\",role=\"Secondary\"}",
            1.0,
        ),
        (
            "tandem_connection_protocol{resource=\"r0\",peer=\"bob\",protocol=\"C\"}",
            1.0,
        ),
        (
            "tandem_connection_peer_possibly_stale{resource=\"r0\",peer=\"bob\"}",
            0.0,
        ),
        (
            "tandem_peer_device_replication_state{resource=\"r0\",peer=\"bob\",volume=\"0\",\
             state=\"Established\"}",
            1.0,
        ),
        (
            "tandem_peer_device_peer_disk_state{resource=\"r0\",peer=\"bob\",volume=\"0\",\
             state=\"UpToDate\"}",
            1.0,
        ),
        (
            "tandem_peer_device_out_of_sync_bytes{resource=\"r0\",peer=\"bob\",volume=\"0\"}",
            0.0,
        ),
    ] {
        assert_eq!(value(before, series), expected, "{series}");
    }
}

/// The log names the metrics address, and each bare port listens on loopback only (the
/// scraper's refusals checked on alice's).
fn assert_log_and_listeners(cluster: &Cluster, ports: [u16; 2]) {
    let log = cluster.log(ALICE);
    assert!(
        log.contains(&format!("http://127.0.0.1:{}/metrics", ports[ALICE])),
        "the log does not name the metrics address:\n{log}"
    );
    assert!(
        !log.lines()
            .any(|line| line.contains("metrics-address") && line.contains("not yet active")),
        "metrics-address is reported as not yet active:\n{log}"
    );
    assert_refusals(ports[ALICE]);
    for port in ports {
        let listening = listening_addresses(port);
        assert!(
            listening.len() == 1
                && ["0100007F", "7F000001"]
                    .iter()
                    .any(|loopback| listening[0].starts_with(loopback)),
            "a bare port must bind 127.0.0.1 only; listening on {listening:?}"
        );
    }
}

/// 404 for another path, 405 for another method, 400 (and the connection closed) for
/// garbage and for an oversized head; the listener keeps serving afterwards.
fn assert_refusals(port: u16) {
    let cases: [(&[u8], u16); 4] = [
        (b"GET /nothing-here HTTP/1.1\r\n\r\n", 404),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 405),
        (b"this is not http\r\n\r\n", 400),
        (b"GET /metrics HTTP/1.1\r\nHost", 400),
    ];
    for (request, status) in cases {
        let answer = exchange(port, request);
        assert_eq!(
            answer.status,
            status,
            "{:?}: {}",
            String::from_utf8_lossy(request),
            answer.head
        );
        assert!(
            answer.head.contains("\r\nConnection: close"),
            "{}",
            answer.head
        );
    }
    let answer = exchange(port, b"DELETE /metrics HTTP/1.1\r\n\r\n");
    assert!(
        answer.head.contains("\r\nAllow: GET, HEAD"),
        "{}",
        answer.head
    );
    let mut oversized = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while oversized.len() < 32 * KIB as usize {
        oversized.extend_from_slice(b"X-Padding: abcdefghijklmnopqrstuvwxyz0123456789\r\n");
    }
    oversized.extend_from_slice(b"\r\n");
    let answer = exchange(port, &oversized);
    assert_eq!(answer.status, 400, "{}", answer.head);
    assert!(answer.body.contains("longer than"), "{}", answer.body);
    scrape(port);
}

/// While the initial full sync runs (at a fixed, low rate, so it is still running when
/// looked at), the Primary shows it: SyncSource, the peer's disk Inconsistent, bytes out of
/// sync, a done percentage between 0 and 100 and a positive rate.
#[test]
fn a_running_resync_shows_its_progress_and_rate() {
    let port = free_port();
    let spec = Spec::two_nodes('C')
        .disk_line("c-plan-ahead 0;")
        .disk_line("resync-rate 4M;")
        .host_line(ALICE, &format!("metrics-address {port};"));
    let cluster = Cluster::connected_fresh(spec);
    let towards_bob_volume = "{resource=\"r0\",peer=\"bob\",volume=\"0\"}";
    let before = scrape(port);
    assert_eq!(
        value(
            &before,
            "tandem_device_disk_state{resource=\"r0\",volume=\"0\",state=\"Inconsistent\"}"
        ),
        1.0
    );
    cluster.admin_ok(ALICE, &["primary", "--force", RESOURCE]);
    let mut text = String::new();
    cluster.wait_until(
        "alice's scrape shows the resync moving",
        SETTLE_DEADLINE,
        || {
            text = scrape(port);
            text.contains(&format!(
                "tandem_peer_device_resync_rate_bytes_per_second{towards_bob_volume}"
            )) && bytes(
                &text,
                &format!("tandem_peer_device_resync_rate_bytes_per_second{towards_bob_volume}"),
            ) > 0
        },
    );
    assert_eq!(
        value(
            &text,
            &format!(
                "tandem_peer_device_replication_state{}",
                towards_bob_volume.replace('}', ",state=\"SyncSource\"}")
            )
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!(
                "tandem_peer_device_peer_disk_state{}",
                towards_bob_volume.replace('}', ",state=\"Inconsistent\"}")
            )
        ),
        1.0,
        "{text}"
    );
    assert!(
        bytes(
            &text,
            &format!("tandem_peer_device_out_of_sync_bytes{towards_bob_volume}")
        ) > 0,
        "{text}"
    );
    let done = value(
        &text,
        &format!("tandem_peer_device_resync_done_percent{towards_bob_volume}"),
    );
    assert!(
        (0.0..100.0).contains(&done),
        "done {done} while the resync runs:\n{text}"
    );
}

/// A metrics port that is already taken fails the start, naming the address, like a busy
/// peer or NBD port.
#[test]
fn a_busy_metrics_port_fails_the_start() {
    let port = free_port();
    let squatter =
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("cannot occupy the metrics port");
    let cluster =
        Cluster::create(Spec::two_nodes('C').host_line(ALICE, &format!("metrics-address {port};")));
    let output = cluster.run_node_to_exit(ALICE, EXIT_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "tandem node started although its metrics port is taken: {stderr}"
    );
    assert!(
        stderr.contains(&format!("metrics 127.0.0.1:{port}")),
        "stderr does not name the busy metrics address:\n{stderr}"
    );
    assert!(
        std::fs::read_dir(cluster.run_dir(ALICE))
            .map(|mut dir| dir.next().is_none())
            .unwrap_or(true),
        "a node that failed to start left sockets behind"
    );
    drop(squatter);
}
