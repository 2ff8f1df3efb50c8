//! The Selective Replication Manager end to end (issue 5): fio 4 KiB random writes at QD32
//! through the link emulator while the round trip steps 0 -> 20 ms -> 0. The manager takes
//! the peer to protocol A within a few intervals (the peer durably marked possibly stale
//! first), returns to protocol C once the link recovers, the unreplicated backlog never
//! passes its bound, and the replicas end byte-identical.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::link::LinkEmulator;
use crate::nbd_client;
use crate::tools::{require_fio, Background};

const ALICE: usize = 0;
const BOB: usize = 1;
/// `srm-max-lag-bytes` in the test's configuration, in KiB.
const LAG_BOUND_KIB: u64 = 8 * 1024;
const SWITCH_DEADLINE: Duration = Duration::from_secs(20);
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The protocol in effect towards bob and the unreplicated KiB, as alice reports them.
fn alice_link(cluster: &Cluster) -> (String, u64) {
    let status = cluster.status_json(ALICE);
    let connection = &status["resources"][0]["connections"][0];
    (
        connection["protocol"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        connection["unreplicated_kib"].as_u64().unwrap_or(0),
    )
}

fn bob_possibly_stale(cluster: &Cluster) -> bool {
    cluster.status_json(BOB)["resources"][0]["devices"][0]["possibly_stale"]
        .as_bool()
        .unwrap_or(false)
}

/// Polls until alice runs `protocol` towards bob, checking the backlog bound at every poll;
/// returns the largest backlog seen.
fn wait_protocol(cluster: &Cluster, protocol: &str, fio: &mut Background) -> u64 {
    let start = Instant::now();
    let mut largest = 0;
    loop {
        assert!(fio.is_running(), "fio stopped early");
        let (now, backlog) = alice_link(cluster);
        largest = largest.max(backlog);
        assert!(
            backlog <= LAG_BOUND_KIB,
            "unreplicated backlog {backlog} KiB passed the {LAG_BOUND_KIB} KiB bound"
        );
        if now == protocol {
            return largest;
        }
        if start.elapsed() > SWITCH_DEADLINE {
            let srm = cluster.admin_ok(ALICE, &["srm", "status", RESOURCE]);
            cluster.fail(&format!(
                "alice still runs protocol {now} towards bob after {SWITCH_DEADLINE:?}; srm \
                 status:\n{srm}"
            ));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// fio 4 KiB random writes at QD32 for up to two minutes (jobs as threads, so killing fio
/// ends them all).
fn fio_command(cluster: &Cluster) -> Command {
    let mut fio = Command::new("fio");
    fio.args([
        "--name=srm",
        "--thread",
        "--ioengine=nbd",
        "--rw=randwrite",
        "--bs=4k",
        "--iodepth=32",
        "--size=16M",
        "--time_based",
        "--runtime=120",
        "--output=/dev/null",
    ])
    .arg(format!("--uri={}", cluster.nbd_uri(ALICE)));
    fio
}

/// Two nodes behind the link emulator (no delay yet) with the manager on (200 ms interval,
/// 1 s dwell, latency thresholds 8 ms / 5 ms, lag bound LAG_BOUND_KIB / 1 s), alice Primary
/// and in sync with bob.
fn srm_pair() -> (Cluster, LinkEmulator) {
    require_fio();
    let spec = Spec::two_nodes('C')
        .through_relays()
        .options_line("srm on;")
        .options_line("srm-interval 200;")
        .net_line_all("srm-min-dwell 1;")
        .net_line_all(&format!("srm-max-lag-bytes {LAG_BOUND_KIB}K;"))
        .net_line_all("srm-max-lag-time 1000;")
        // The emulated delay is 10 ms each way; thresholds of 8 ms out and 5 ms back keep the
        // loopback's own latency on a loaded two-core machine (ack latencies of 3 ms, peaks of
        // 7 ms seen with the default 5/2 ms) from holding the manager in protocol A.
        .net_line_all("srm-latency-high 8;")
        .net_line_all("srm-latency-low 5;");
    let cluster = Cluster::create(spec);
    let link = LinkEmulator::start(&cluster);
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    (cluster, link)
}

#[test]
fn the_manager_goes_async_on_a_slow_link_and_back_within_its_lag_bound() {
    let (cluster, link) = srm_pair();

    let mut fio = Background::spawn(fio_command(&cluster));
    cluster.wait_until("fio writes", SWITCH_DEADLINE, || {
        cluster.status(ALICE).open()
    });
    assert_eq!(alice_link(&cluster).0, "C");

    link.set(r#"{"delay_ms":10}"#);
    wait_protocol(&cluster, "A", &mut fio);
    assert!(
        bob_possibly_stale(&cluster),
        "bob must be marked possibly stale while alice runs protocol A towards it"
    );
    // A while under protocol A: the backlog stays bounded.
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let (protocol, backlog) = alice_link(&cluster);
        assert!(
            backlog <= LAG_BOUND_KIB,
            "backlog {backlog} KiB under protocol {protocol}"
        );
        std::thread::sleep(POLL_INTERVAL);
    }

    // Protocol A really is asynchronous: with the link held (a partition that keeps the
    // bytes), a write still completes, and the backlog shows it.
    drop(fio);
    cluster.wait_until("fio's export is closed", SWITCH_DEADLINE, || {
        !cluster.status(ALICE).open()
    });
    assert_eq!(
        alice_link(&cluster).0,
        "A",
        "idle, the manager has no reason to return yet"
    );
    link.set(r#"{"partition":"both"}"#);
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open the export");
    assert_eq!(
        client.write(0, &[9; 65536]),
        0,
        "a write under protocol A completes while the peer cannot receive it"
    );
    assert!(
        alice_link(&cluster).1 >= 64,
        "the held write is counted as unreplicated"
    );
    client.disconnect();
    link.set(r#"{"partition":"none"}"#);
    let mut fio = Background::spawn(fio_command(&cluster));

    link.set(r#"{"delay_ms":0}"#);
    wait_protocol(&cluster, "C", &mut fio);
    cluster.wait_until(
        "bob's possibly-stale mark is cleared",
        SWITCH_DEADLINE,
        || !bob_possibly_stale(&cluster),
    );
    let srm = cluster.admin_ok(ALICE, &["srm", "status", RESOURCE]);
    assert!(
        srm.contains("protocol A") && srm.contains("protocol C"),
        "srm status lacks the switches:\n{srm}"
    );
    // Issue 29: the switch says what it was predicted to gain, and what it did.
    assert!(
        srm.contains("last switch to A")
            && srm.contains("predicted gain")
            && srm.contains("(kept)"),
        "srm status lacks the switch's gains:\n{srm}"
    );
    assert!(
        srm.contains("tcp-rtt:") && srm.contains("cwnd:"),
        "srm status lacks the replication socket's TCP_INFO:\n{srm}"
    );

    drop(fio);
    cluster.wait_until("alice's export is closed", SWITCH_DEADLINE, || {
        !cluster.status(ALICE).open()
    });
    cluster.wait_until("nothing is left to replicate", SWITCH_DEADLINE, || {
        alice_link(&cluster).1 == 0 && cluster.out_of_sync_kib(ALICE, BOB) == 0
    });
    cluster.wait_identical(ALICE, BOB, SWITCH_DEADLINE);
}

/// Failover after asynchronous replication (issue 5): while the manager runs bob
/// asynchronously, bob is durably marked possibly stale; if alice dies then, bob refuses to
/// become Primary without `--force` (and says why), and accepts it with `--force`. The mark
/// survives bob's restart.
#[test]
fn a_peer_left_behind_asynchronously_refuses_promotion_without_force() {
    let (cluster, link) = srm_pair();
    let mut fio = Background::spawn(fio_command(&cluster));
    link.set(r#"{"delay_ms":10}"#);
    wait_protocol(&cluster, "A", &mut fio);
    cluster.wait_until("bob is marked possibly stale", SWITCH_DEADLINE, || {
        bob_possibly_stale(&cluster)
    });

    cluster.kill(ALICE);
    drop(fio);
    cluster.wait_until("bob notices alice is gone", SWITCH_DEADLINE, || {
        cluster.status(BOB).connection_state("alice") != "Connected"
    });
    let refused = cluster.admin(BOB, &["primary", RESOURCE]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "bob became Primary although it may lack acknowledged writes"
    );
    assert!(
        stderr.contains("may lack acknowledged writes") && stderr.contains("--force"),
        "refusal: {stderr}"
    );

    cluster.restart(BOB);
    assert!(
        bob_possibly_stale(&cluster),
        "the mark is durable: it survives a restart"
    );
    assert!(!cluster.admin(BOB, &["primary", RESOURCE]).status.success());
    cluster.admin_ok(BOB, &["primary", "--force", RESOURCE]);
    assert_eq!(cluster.status(BOB).role(), "Primary");
    assert!(
        !bob_possibly_stale(&cluster),
        "--force accepts bob's data as it is"
    );
}
