//! Test helpers: loopback echo and sink servers, a seeded payload, round-trip timing and
//! polling against a deadline.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Notify;

/// How long any one step may take before the test fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// Interval between polls of a condition.
const POLL_INTERVAL: Duration = Duration::from_millis(2);
/// Socket buffer size of the backpressure test's endpoints, so kernel buffers stay small.
const SMALL_BUFFER_BYTES: u32 = 64 << 10;

/// A loopback address with a port the system picks.
pub fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Deterministic pseudo-random bytes (SplitMix64 of `seed`).
pub fn payload(seed: u64, length: usize) -> Vec<u8> {
    let mut generator = linkemu::pace::SplitMix::new(seed);
    let mut data = Vec::with_capacity(length + 8);
    while data.len() < length {
        data.extend_from_slice(&generator.next_u64().to_le_bytes());
    }
    data.truncate(length);
    data
}

/// Polls `condition` until it holds; fails the test after [`DEADLINE`].
pub async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// An echo server: every connection gets back what it sends, and a half-close when it
/// half-closes.
pub async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind(any_port()).await.expect("bind echo");
    let address = listener.local_addr().expect("echo address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.into_split();
                if tokio::io::copy(&mut read, &mut write).await.is_ok() {
                    let _ = write.shutdown().await;
                }
            });
        }
    });
    address
}

/// A server that reads and counts everything sent to it. Unless `open`, each connection waits
/// for the returned `Notify` before reading. Its sockets have small receive buffers.
pub async fn sink_server(open: bool) -> (SocketAddr, Arc<AtomicU64>, Arc<Notify>) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .set_recv_buffer_size(SMALL_BUFFER_BYTES)
        .expect("receive buffer");
    socket.bind(any_port()).expect("bind sink");
    let listener = socket.listen(16).expect("listen");
    let address = listener.local_addr().expect("sink address");
    let received = Arc::new(AtomicU64::new(0));
    let gate = Arc::new(Notify::new());
    let (counter, signal) = (Arc::clone(&received), Arc::clone(&gate));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (counter, signal) = (Arc::clone(&counter), Arc::clone(&signal));
            tokio::spawn(async move {
                if !open {
                    signal.notified().await;
                }
                let mut buffer = vec![0u8; 64 << 10];
                while let Ok(count @ 1..) = stream.read(&mut buffer).await {
                    counter.fetch_add(u64::try_from(count).expect("fits"), Ordering::Relaxed);
                }
            });
        }
    });
    (address, received, gate)
}

/// Connects with a small send buffer.
pub async fn connect_small(address: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .set_send_buffer_size(SMALL_BUFFER_BYTES)
        .expect("send buffer");
    socket.connect(address).await.expect("connect")
}

/// Writes `total` bytes of `payload(11, ..)` in 64 KiB writes, counting them in `sent`;
/// returns the CRC-32C of what it wrote.
pub async fn send_counted(mut stream: TcpStream, total: usize, sent: Arc<AtomicU64>) -> u32 {
    let data = payload(11, total);
    for chunk in data.chunks(64 << 10) {
        stream.write_all(chunk).await.expect("write");
        sent.fetch_add(u64::try_from(chunk.len()).expect("fits"), Ordering::Relaxed);
    }
    stream.shutdown().await.expect("half-close");
    crc32c::crc32c(&data)
}

/// Sends 8 bytes through an echo path and returns how long the echo took.
pub async fn round_trip(stream: &mut TcpStream) -> Duration {
    let ping = *b"ping1234";
    let started = Instant::now();
    stream.write_all(&ping).await.expect("write ping");
    let mut pong = [0u8; 8];
    tokio::time::timeout(DEADLINE, stream.read_exact(&mut pong))
        .await
        .expect("echo within the deadline")
        .expect("read echo");
    assert_eq!(pong, ping);
    started.elapsed()
}
