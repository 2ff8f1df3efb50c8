//! One relayed connection: two pipes (client to target, target to client), each a reader that
//! timestamps chunks into a queue and a writer that releases them at their time.
//!
//! Invariants:
//! - A pipe's queued bytes (read, not yet written) never exceed the queue bound in force when
//!   the reader last checked: the reader is the only one that adds, and it reads at most the
//!   room left. When the queue is full the reader stops reading, so the sender's TCP window
//!   closes (backpressure) and memory stays bounded.
//! - Chunks are written in the order they were read; the writer waits for a chunk's release
//!   time, then for the partition to lift, then for the bandwidth, and only then writes.
//! - End of stream is forwarded as a half-close (FIN) after every queued byte; any error, a
//!   resetting partition or the relay stopping resets both sockets (RST), so neither side ever
//!   mistakes a cut for a clean end.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};

use crate::link::{Direction, Link};
use crate::pace::{Schedule, SplitMix};
use crate::relay::{Context, Counters, Lifecycle};

/// Largest single read from a socket, in bytes.
pub const CHUNK_BYTES_MAX: u64 = 128 << 10;

/// What the reader hands the writer.
#[derive(Debug)]
enum Item {
    /// Bytes read, and when they may leave (nanoseconds since the relay started).
    Chunk { data: Bytes, release_ns: u64 },
    /// The source half-closed.
    End,
}

/// State one pipe's reader and writer share.
#[derive(Debug, Default)]
struct PipeState {
    queued_bytes: AtomicU64,
    /// Signalled by the writer each time it frees room.
    room: Notify,
}

/// How a connection ended.
#[derive(Debug)]
enum Outcome {
    /// Both directions reached end of stream and were delivered.
    Closed,
    /// A socket failed; the other side is reset too.
    Failed(io::Error),
    /// A resetting partition came into force.
    Partitioned,
    /// The relay is stopping.
    Stopped,
}

/// Each relay socket's kernel receive buffer, fixed (no autotuning). Bytes the relay has not
/// read yet are link buffering the shape does not see: left to autotuning (up to
/// `net.ipv4.tcp_rmem`'s maximum, tens of MiB) a slow link would absorb a burst at full speed
/// until that buffer filled, whatever its queue bound. A quarter MiB keeps loopback at full
/// speed (the relay reads as fast as its queue has room).
pub const RECEIVE_BUFFER_BYTES: usize = 256 * 1024;

/// Resets `stream` when it is dropped: SO_LINGER 0 makes close send RST.
pub(crate) fn reset(stream: &TcpStream) {
    if let Err(error) = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO)) {
        tracing::debug!(%error, "cannot set SO_LINGER for a reset");
    }
}

/// Keeps `connections_open` right however the task ends (including abort).
struct OpenGuard<'a>(&'a Counters);

impl<'a> OpenGuard<'a> {
    fn new(counters: &'a Counters) -> Self {
        counters.open.fetch_add(1, Ordering::Relaxed);
        OpenGuard(counters)
    }
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Connects to the target and relays `client` until both directions end or a reset.
pub(crate) async fn run(context: Arc<Context>, client: TcpStream, from: SocketAddr, serial: u64) {
    let _open = OpenGuard::new(&context.counters);
    let mut lifecycle = context.lifecycle.clone();
    let connected = tokio::select! {
        connected = TcpStream::connect(context.target) => connected,
        _ = lifecycle.wait_for(|state| *state == Lifecycle::Stopping) => {
            reset(&client);
            return;
        }
    };
    let target = match connected {
        Ok(target) => target,
        Err(error) => {
            tracing::warn!(
                %from, target = %context.target, %error,
                "cannot reach the target; resetting the client"
            );
            reset(&client);
            return;
        }
    };
    for stream in [&client, &target] {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        if let Err(error) =
            socket2::SockRef::from(stream).set_recv_buffer_size(RECEIVE_BUFFER_BYTES)
        {
            tracing::debug!(%error, "cannot set SO_RCVBUF");
        }
    }
    tracing::debug!(%from, serial, "connection open");
    match relay_streams(&context, client, target, serial).await {
        Outcome::Failed(error) => {
            tracing::debug!(%from, serial, %error, "connection failed; both sides reset")
        }
        outcome => tracing::debug!(%from, serial, ?outcome, "connection ended"),
    }
}

async fn relay_streams(
    context: &Context,
    mut client: TcpStream,
    mut target: TcpStream,
    serial: u64,
) -> Outcome {
    let states = [PipeState::default(), PipeState::default()];
    let outcome = {
        let (client_read, client_write) = client.split();
        let (target_read, target_write) = target.split();
        let forward = pipe(
            context,
            Direction::Forward,
            client_read,
            target_write,
            &states[0],
            serial,
        );
        let reverse = pipe(
            context,
            Direction::Reverse,
            target_read,
            client_write,
            &states[1],
            serial,
        );
        let mut link = context.link.clone();
        let mut lifecycle = context.lifecycle.clone();
        let partitioned = async {
            let _ = link.wait_for(Link::refuses).await;
        };
        let stopping = async {
            let _ = lifecycle
                .wait_for(|state| *state == Lifecycle::Stopping)
                .await;
        };
        tokio::select! {
            result = async { tokio::try_join!(forward, reverse) } => match result {
                Ok(_) => Outcome::Closed,
                Err(error) => Outcome::Failed(error),
            },
            () = partitioned => Outcome::Partitioned,
            () = stopping => Outcome::Stopped,
        }
    };
    for direction in Direction::ALL {
        let left = states[direction.index()]
            .queued_bytes
            .load(Ordering::Relaxed);
        context.counters.queued_bytes[direction.index()].fetch_sub(left, Ordering::Relaxed);
    }
    if !matches!(outcome, Outcome::Closed) {
        context.counters.reset.fetch_add(1, Ordering::Relaxed);
        reset(&client);
        reset(&target);
    }
    outcome
}

async fn pipe<R, W>(
    context: &Context,
    direction: Direction,
    source: R,
    sink: W,
    state: &PipeState,
    serial: u64,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let seed = context.link.borrow().jitter_seed
        ^ serial.wrapping_mul(2)
        ^ u64::from(direction == Direction::Reverse);
    let schedule = Schedule::new(SplitMix::new(seed).next_u64());
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::try_join!(
        read_side(context, direction, source, state, sender, schedule),
        write_side(context, direction, sink, state, receiver)
    )?;
    Ok(())
}

/// Waits until the queue has room and returns how many bytes may be read.
async fn wait_for_room(
    direction: Direction,
    state: &PipeState,
    link: &mut watch::Receiver<Link>,
) -> usize {
    loop {
        let bound = link.borrow_and_update().shape(direction).queue_bytes_max;
        let queued = state.queued_bytes.load(Ordering::Relaxed);
        if queued < bound {
            let room = (bound - queued).min(CHUNK_BYTES_MAX);
            // CHUNK_BYTES_MAX fits any usize this crate builds for.
            return usize::try_from(room).unwrap_or(1 << 16);
        }
        // A raised bound also makes room; a closed link channel means the relay is stopping
        // and this connection is about to be reset.
        let bound_changed = async {
            if link.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = state.room.notified() => {}
            () = bound_changed => {}
        }
    }
}

async fn read_side<R: AsyncRead + Unpin>(
    context: &Context,
    direction: Direction,
    mut source: R,
    state: &PipeState,
    sender: mpsc::UnboundedSender<Item>,
    mut schedule: Schedule,
) -> io::Result<()> {
    let mut link = context.link.clone();
    loop {
        let room = wait_for_room(direction, state, &mut link).await;
        let mut buffer = BytesMut::with_capacity(room);
        let count = source.read_buf(&mut (&mut buffer).limit(room)).await?;
        if count == 0 {
            // The writer may already be gone after an error; that error ends the connection.
            let _ = sender.send(Item::End);
            return Ok(());
        }
        let release_ns = schedule.release_ns(context.now_ns(), link.borrow().shape(direction));
        let bytes = u64::try_from(count).unwrap_or(u64::MAX);
        state.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        context.counters.queued_bytes[direction.index()].fetch_add(bytes, Ordering::Relaxed);
        if sender
            .send(Item::Chunk {
                data: buffer.freeze(),
                release_ns,
            })
            .is_err()
        {
            return Ok(());
        }
    }
}

async fn write_side<W: AsyncWrite + Unpin>(
    context: &Context,
    direction: Direction,
    mut sink: W,
    state: &PipeState,
    mut receiver: mpsc::UnboundedReceiver<Item>,
) -> io::Result<()> {
    let mut link = context.link.clone();
    while let Some(item) = receiver.recv().await {
        let (data, release_ns) = match item {
            Item::Chunk { data, release_ns } => (data, release_ns),
            Item::End => return sink.shutdown().await,
        };
        context.timer.sleep_until(context.instant(release_ns)).await;
        // An error means the relay is stopping; the connection is reset then anyway.
        let _ = link.wait_for(|link| !link.holds(direction)).await;
        let bytes = u64::try_from(data.len()).unwrap_or(u64::MAX);
        context
            .timer
            .sleep_until(context.reserve(direction, bytes))
            .await;
        sink.write_all(&data).await?;
        state.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
        context.counters.queued_bytes[direction.index()].fetch_sub(bytes, Ordering::Relaxed);
        context.counters.delivered_bytes[direction.index()].fetch_add(bytes, Ordering::Relaxed);
        state.room.notify_one();
    }
    Ok(())
}
