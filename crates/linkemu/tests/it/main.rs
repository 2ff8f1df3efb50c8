//! Integration tests of the relay and the `tandem-linkemu` binary, on loopback only: integrity
//! and order both ways, delay, bandwidth, live changes, partitions (hold and reset), queue
//! backpressure, the control socket and bad arguments. Every wait polls against a deadline;
//! nothing sleeps a fixed time to synchronise with the thing under test.

mod binary;
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linkemu::{Link, OnPartition, Partition, Relay, Shape};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::{echo_server, eventually, payload, round_trip, sink_server, DEADLINE};

fn shape(delay_ms: u64, jitter_ms: u64) -> Shape {
    Shape {
        delay: Duration::from_millis(delay_ms),
        jitter: Duration::from_millis(jitter_ms),
        ..Shape::default()
    }
}

/// Writes `data` through `stream` while reading the echo back; returns what came back.
async fn echo_through(stream: TcpStream, data: Arc<Vec<u8>>) -> Vec<u8> {
    let (mut read, mut write) = stream.into_split();
    let to_send = Arc::clone(&data);
    let writer = tokio::spawn(async move {
        write
            .write_all(&to_send)
            .await
            .expect("write through the relay");
        write.shutdown().await.expect("half-close");
    });
    let mut back = Vec::with_capacity(data.len());
    tokio::time::timeout(DEADLINE, read.read_to_end(&mut back))
        .await
        .expect("echo within the deadline")
        .expect("read echo");
    writer.await.expect("writer task");
    back
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_arrive_intact_and_in_order_both_ways() {
    let echo = echo_server().await;
    let cases: Vec<(&str, Link)> = vec![
        ("transparent", Link::default()),
        (
            "delay and jitter",
            Link {
                jitter_seed: 5,
                ..Link::symmetric(shape(2, 2))
            },
        ),
        (
            "rate limit",
            Link::symmetric(Shape {
                rate_bytes_per_s: Some(40 << 20),
                ..Shape::default()
            }),
        ),
        (
            "tiny queue and jitter",
            Link::symmetric(Shape {
                queue_bytes_max: 4096,
                ..shape(1, 1)
            }),
        ),
    ];
    let data = Arc::new(payload(3, 4 << 20));
    for (name, link) in cases {
        let relay = Relay::start(support::any_port(), echo, link)
            .await
            .expect("start relay");
        let stream = TcpStream::connect(relay.local_addr())
            .await
            .expect("connect");
        let back = echo_through(stream, Arc::clone(&data)).await;
        assert_eq!(back.len(), data.len(), "{name}: length");
        assert_eq!(
            crc32c::crc32c(&back),
            crc32c::crc32c(&data),
            "{name}: checksum"
        );
        assert!(back == *data, "{name}: bytes differ");
        eventually(&format!("{name}: connection closed"), || {
            relay.stats().connections_open == 0
        })
        .await;
        let stats = relay.stats();
        let length = u64::try_from(data.len()).expect("fits");
        assert_eq!(
            (stats.forward_bytes, stats.reverse_bytes),
            (length, length),
            "{name}: counted bytes"
        );
        assert_eq!(
            (stats.forward_queued_bytes, stats.reverse_queued_bytes),
            (0, 0),
            "{name}: queues empty"
        );
        relay.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_delay_is_observed() {
    let echo = echo_server().await;
    let delay = Duration::from_millis(20);
    let relay = Relay::start(support::any_port(), echo, Link::symmetric(shape(20, 0)))
        .await
        .expect("start");
    let mut stream = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect");
    for _ in 0..5 {
        let rtt = round_trip(&mut stream).await;
        assert!(
            rtt >= 2 * delay,
            "round trip {rtt:?} shorter than twice the one-way delay"
        );
        // Generous: a loaded two-core machine still answers a 40 ms ping well within a second.
        assert!(
            rtt < 2 * delay + Duration::from_secs(1),
            "round trip {rtt:?} far too long"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_link_is_a_fat_pipe_not_stop_and_wait() {
    // 8 MiB over a 100 ms link: stop-and-wait with chunks of at most 128 KiB would take at
    // least 64 × 100 ms = 6.4 s; a pipe carries it in one delay plus the copying.
    let total: usize = 8 << 20;
    let (sink, received, _gate) = sink_server(true).await;
    let relay = Relay::start(support::any_port(), sink, Link::symmetric(shape(100, 0)))
        .await
        .expect("start");
    let started = Instant::now();
    let mut stream = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect");
    let data = payload(4, total);
    stream.write_all(&data).await.expect("write");
    let total_bytes = u64::try_from(total).expect("fits");
    eventually("all bytes delivered", || {
        received.load(Ordering::Relaxed) == total_bytes
    })
    .await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(100),
        "delivered in {elapsed:?}, before the delay"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "8 MiB over a 100 ms link took {elapsed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bandwidth_limit_holds_on_average_across_connections() {
    let rate_bytes_per_s: u64 = 2_000_000;
    let (sink, received, _gate) = sink_server(true).await;
    let link = Link {
        forward: Shape {
            rate_bytes_per_s: Some(rate_bytes_per_s),
            ..Shape::default()
        },
        ..Link::default()
    };
    let relay = Relay::start(support::any_port(), sink, link)
        .await
        .expect("start");
    // Two connections share the bucket: 3 MB in all, about 1.5 s at the limit.
    let per_connection = 1_500_000usize;
    let started = Instant::now();
    let mut senders = Vec::new();
    for seed in 0..2 {
        let mut stream = TcpStream::connect(relay.local_addr())
            .await
            .expect("connect");
        let data = payload(seed, per_connection);
        senders.push(tokio::spawn(async move {
            stream.write_all(&data).await.expect("write");
            stream
        }));
    }
    let total = u64::try_from(2 * per_connection).expect("fits");
    eventually("all bytes delivered", || {
        received.load(Ordering::Relaxed) == total
    })
    .await;
    let elapsed = started.elapsed();
    let observed = total as f64 / elapsed.as_secs_f64();
    let limit = rate_bytes_per_s as f64;
    assert!(
        elapsed >= Duration::from_secs(1),
        "measured over {elapsed:?}, under a second"
    );
    assert!(
        observed <= limit * 1.15,
        "observed {observed:.0} B/s over the limit {limit} B/s"
    );
    assert!(
        observed >= limit * 0.5,
        "observed {observed:.0} B/s, under half the limit {limit} B/s"
    );
    for sender in senders {
        drop(sender.await.expect("sender"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_delay_takes_effect_while_running() {
    let echo = echo_server().await;
    let relay = Relay::start(support::any_port(), echo, Link::default())
        .await
        .expect("start");
    let mut stream = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect");
    let before = round_trip(&mut stream).await;
    relay.set(Link::symmetric(shape(30, 0))).expect("set 30 ms");
    let slow = round_trip(&mut stream).await;
    assert!(
        slow >= Duration::from_millis(60),
        "round trip {slow:?} after setting 30 ms each way (was {before:?})"
    );
    relay.set(Link::default()).expect("set 0 ms");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let fast = round_trip(&mut stream).await;
        if fast < Duration::from_millis(30) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "round trips stay slow ({fast:?}) after removing the delay"
        );
    }
    assert_eq!(
        relay.stats().connections_open,
        1,
        "the change kept the connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_holds_data_and_healing_delivers_everything() {
    let echo = echo_server().await;
    let relay = Relay::start(support::any_port(), echo, Link::default())
        .await
        .expect("start");
    let mut stream = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect");
    round_trip(&mut stream).await;
    let before = relay.stats();
    relay
        .set(Link {
            partition: Partition::Both,
            ..Link::default()
        })
        .expect("partition");
    let data = payload(9, 256 << 10);
    stream
        .write_all(&data)
        .await
        .expect("write while partitioned");
    let held = u64::try_from(data.len()).expect("fits");
    eventually("the relay holds every byte", || {
        relay.stats().forward_queued_bytes == held
    })
    .await;
    let during = relay.stats();
    assert_eq!(
        during.forward_bytes, before.forward_bytes,
        "nothing crossed the partition"
    );
    let mut probe = [0u8; 1];
    assert!(
        matches!(
            stream.try_read(&mut probe),
            Err(ref error) if error.kind() == std::io::ErrorKind::WouldBlock
        ),
        "an echo came back through a partition"
    );
    relay.set(Link::default()).expect("heal");
    let mut back = vec![0u8; data.len()];
    tokio::time::timeout(DEADLINE, stream.read_exact(&mut back))
        .await
        .expect("delivered after healing")
        .expect("read");
    assert!(back == data, "held data changed");
    assert_eq!(relay.stats().connections_reset, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_on_partition_resets_and_refuses() {
    let echo = echo_server().await;
    let relay = Relay::start(support::any_port(), echo, Link::default())
        .await
        .expect("start");
    let mut stream = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect");
    round_trip(&mut stream).await;
    let cut = Link {
        partition: Partition::Both,
        on_partition: OnPartition::Reset,
        ..Link::default()
    };
    relay.set(cut).expect("partition with reset");
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(DEADLINE, stream.read(&mut buffer))
        .await
        .expect("reset within the deadline");
    assert!(
        matches!(read, Err(ref error) if error.kind() == std::io::ErrorKind::ConnectionReset),
        "expected a reset, got {read:?}"
    );
    eventually("reset counted", || relay.stats().connections_reset == 1).await;
    // The relay accepts and resets at once; the reset may even beat connect()'s completion.
    if let Ok(mut refused) = TcpStream::connect(relay.local_addr()).await {
        let read = tokio::time::timeout(DEADLINE, refused.read(&mut buffer))
            .await
            .expect("refusal within the deadline");
        assert!(
            matches!(read, Err(_) | Ok(0)),
            "a connection during a resetting partition got {read:?}"
        );
    }
    eventually("refusal counted", || relay.stats().connections_refused == 1).await;
    relay.set(Link::default()).expect("heal");
    let mut healed = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect after healing");
    round_trip(&mut healed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_gives_backpressure_with_bounded_memory() {
    let bound: u64 = 256 << 10;
    let total: usize = 128 << 20;
    let (sink, received, gate) = sink_server(false).await;
    let link = Link {
        forward: Shape {
            queue_bytes_max: bound,
            ..Shape::default()
        },
        ..Link::default()
    };
    let relay = Relay::start(support::any_port(), sink, link)
        .await
        .expect("start");
    let stream = support::connect_small(relay.local_addr()).await;
    let sent = Arc::new(AtomicU64::new(0));
    let sender = tokio::spawn(support::send_counted(stream, total, Arc::clone(&sent)));
    eventually("the relay's queue fills", || {
        relay.stats().forward_queued_bytes == bound
    })
    .await;
    let mut peak = 0;
    for _ in 0..20 {
        peak = peak.max(relay.stats().forward_queued_bytes);
        tokio::task::yield_now().await;
    }
    assert!(peak <= bound, "queued {peak} bytes over the bound {bound}");
    assert!(
        !sender.is_finished(),
        "the sender finished although nobody read"
    );
    assert!(
        sent.load(Ordering::Relaxed) < u64::try_from(total).expect("fits"),
        "every write went through"
    );
    gate.notify_one();
    let checksum = tokio::time::timeout(DEADLINE, sender)
        .await
        .expect("sender finishes once read")
        .expect("sender");
    let total_bytes = u64::try_from(total).expect("fits");
    eventually("everything received", || {
        received.load(Ordering::Relaxed) == total_bytes
    })
    .await;
    assert_eq!(
        checksum,
        crc32c::crc32c(&payload(11, total)),
        "payload generator mismatch"
    );
    assert!(relay.stats().forward_queued_bytes <= bound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_resets_open_connections() {
    let echo = echo_server().await;
    let relay = Relay::start(support::any_port(), echo, Link::default())
        .await
        .expect("start");
    let mut stream = TcpStream::connect(relay.local_addr())
        .await
        .expect("connect");
    round_trip(&mut stream).await;
    tokio::time::timeout(DEADLINE, relay.shutdown())
        .await
        .expect("shutdown within the deadline");
    let mut buffer = [0u8; 4];
    let read = tokio::time::timeout(DEADLINE, stream.read(&mut buffer))
        .await
        .expect("reset within the deadline");
    assert!(
        matches!(read, Err(ref error) if error.kind() == std::io::ErrorKind::ConnectionReset),
        "got {read:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_links_are_refused() {
    let echo = echo_server().await;
    let bad = Link::symmetric(Shape {
        queue_bytes_max: 0,
        ..Shape::default()
    });
    assert!(Relay::start(support::any_port(), echo, bad).await.is_err());
    let relay = Relay::start(support::any_port(), echo, Link::default())
        .await
        .expect("start");
    assert!(relay.set(bad).is_err());
    assert_eq!(
        relay.link(),
        Link::default(),
        "a refused link changed nothing"
    );
}
