//! The async buffer (`async-buffer`, issue 5) end to end, protocol A through a slow link
//! emulator (32 KB/s, small queues): with the buffer, a 2 MiB burst completes at local speed
//! and drains afterwards; `tandem adjust` to `async-buffer 0` makes writes wait for the
//! socket again (backpressure); the replicas end identical.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, Spec, RESOURCE};
use crate::link::LinkEmulator;
use crate::nbd_client;

const ALICE: usize = 0;
const BOB: usize = 1;
const DEADLINE: Duration = Duration::from_secs(30);
const WRITE_BYTES: usize = 64 * 1024;
/// 2 MiB: at the slow link's 32 KB/s, over a minute of transfer.
const BURST_WRITES: u64 = 32;
/// 16 MiB: more than the kernel's socket buffers on both sides of the relay can hold (after
/// the fast phase, TCP auto-tuning has grown them to a few MiB).
const NO_BUFFER_WRITES: u64 = 256;
const SLOW_LINK: &str = r#"{"rate":32768,"queue":65536}"#;

fn alice_connection(cluster: &Cluster, field: &str) -> u64 {
    cluster.status_json(ALICE)["resources"][0]["connections"][0][field]
        .as_u64()
        .unwrap_or(0)
}

fn write_burst(cluster: &Cluster, first: u64, count: u64) {
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open the export");
    for i in first..first + count {
        let byte = u8::try_from(i % 250).unwrap_or(0) + 1;
        assert_eq!(
            client.write(i * WRITE_BYTES as u64, &[byte; WRITE_BYTES]),
            0,
            "write {i}"
        );
    }
    client.disconnect();
}

#[test]
fn the_async_buffer_absorbs_a_burst_and_adjust_turns_it_off() {
    let spec = Spec::two_nodes('A')
        .through_relays()
        .net_line_all("sndbuf-size 64k;")
        .net_line_all("async-buffer 4M;");
    let cluster = Cluster::create(spec);
    let link = LinkEmulator::start(&cluster);
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    link.set(SLOW_LINK);

    // The burst completes long before the link could carry it.
    let started = Instant::now();
    write_burst(&cluster, 0, BURST_WRITES);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "2 MiB took {:?} with a 4 MiB async buffer",
        started.elapsed()
    );
    let buffered = alice_connection(&cluster, "async_buffer_kib");
    assert!(
        buffered > 0,
        "the burst waits in the async buffer, not in the socket"
    );
    assert!(
        buffered <= 4096,
        "the buffer holds at most its capacity: {buffered} KiB"
    );
    assert!(
        alice_connection(&cluster, "unreplicated_kib") >= buffered,
        "buffered writes count as unreplicated"
    );

    // Lift the limit: the buffer drains and bob gets everything.
    link.set(r#"{"rate":"unlimited"}"#);
    cluster.wait_until("the async buffer drained", DEADLINE, || {
        alice_connection(&cluster, "async_buffer_kib") == 0
    });
    cluster.wait_identical(ALICE, BOB, DEADLINE);

    // Without the buffer (changed live), writes wait for the socket again.
    let config = std::fs::read_to_string(cluster.config_path(ALICE)).expect("read alice's config");
    std::fs::write(
        cluster.config_path(ALICE),
        config.replace("async-buffer 4M;", "async-buffer 0;"),
    )
    .expect("write alice's config");
    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(
        report.contains("async-buffer 4194304 -> 0"),
        "adjust report: {report}"
    );
    link.set(SLOW_LINK);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (done, socket) = (Arc::clone(&done), cluster.nbd_socket(ALICE));
        std::thread::spawn(move || {
            let mut client = nbd_client::open(&socket, RESOURCE).expect("open the export");
            for i in 0..NO_BUFFER_WRITES {
                assert_eq!(
                    client.write(i * WRITE_BYTES as u64, &[0xee; WRITE_BYTES]),
                    0,
                    "write {i}"
                );
            }
            client.disconnect();
            done.store(true, Ordering::SeqCst);
        })
    };
    cluster.hold_for(
        "a 16 MiB burst without async buffer waits for the 32 KB/s link",
        Duration::from_secs(3),
        || !done.load(Ordering::SeqCst),
    );
    assert_eq!(
        alice_connection(&cluster, "async_buffer_kib"),
        0,
        "nothing is buffered with async-buffer 0"
    );
    link.set(r#"{"rate":"unlimited"}"#);
    cluster.wait_until(
        "the writes complete once the link is fast again",
        DEADLINE,
        || done.load(Ordering::SeqCst),
    );
    writer.join().expect("writer thread");
    cluster.wait_identical(ALICE, BOB, DEADLINE);
}

/// Bytes relay `pair` delivered towards its node so far.
fn forwarded(link: &LinkEmulator, pair: usize) -> u64 {
    link.set(r#"{"stats":true}"#)["pairs"][pair]["stats"]["forward_bytes"]
        .as_u64()
        .expect("forward_bytes")
}

/// Writes `count` 64 KiB blocks of compressible text from block `first`.
fn write_text(cluster: &Cluster, first: u64, count: u64) {
    let text: Vec<u8> = b"tandem replicates every acknowledged write. "
        .iter()
        .copied()
        .cycle()
        .take(WRITE_BYTES)
        .collect();
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open the export");
    for i in first..first + count {
        assert_eq!(client.write(i * WRITE_BYTES as u64, &text), 0, "write {i}");
    }
    client.disconnect();
}

#[test]
fn compressed_payloads_cross_the_link_smaller_and_arrive_intact() {
    let spec = Spec::two_nodes('A')
        .through_relays()
        .net_line_all("async-buffer 8M;")
        .net_line_all("async-buffer-compress lz4;");
    let cluster = Cluster::create(spec);
    let link = LinkEmulator::start(&cluster);
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    const BLOCKS: u64 = 64;
    let logical = BLOCKS * WRITE_BYTES as u64;

    let before = forwarded(&link, BOB);
    write_text(&cluster, 0, BLOCKS);
    cluster.wait_identical(ALICE, BOB, DEADLINE);
    let lz4 = forwarded(&link, BOB) - before;
    assert!(
        lz4 < logical / 4,
        "lz4: {lz4} bytes crossed the link for {logical} bytes written"
    );

    // zstd, switched live.
    let config = std::fs::read_to_string(cluster.config_path(ALICE)).expect("read alice's config");
    std::fs::write(
        cluster.config_path(ALICE),
        config.replace("async-buffer-compress lz4;", "async-buffer-compress zstd;"),
    )
    .expect("write alice's config");
    let report = cluster.admin_ok(ALICE, &["adjust", RESOURCE]);
    assert!(
        report.contains("async-buffer-compress lz4 -> zstd"),
        "adjust report: {report}"
    );
    let before = forwarded(&link, BOB);
    write_text(&cluster, BLOCKS, BLOCKS);
    cluster.wait_identical(ALICE, BOB, DEADLINE);
    let zstd = forwarded(&link, BOB) - before;
    assert!(
        zstd < logical / 4,
        "zstd: {zstd} bytes crossed the link for {logical} bytes written"
    );
}
