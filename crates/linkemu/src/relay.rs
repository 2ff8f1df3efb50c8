//! The relay: a TCP listener whose every accepted connection is forwarded to one target address
//! through the emulated link, and the handle that changes the link and reads counters while it
//! runs.
//!
//! Invariants:
//! - The link in force is always one that passed [`Link::check`].
//! - While [`Link::refuses`] holds, every accepted connection is reset at once and every open
//!   one has been or is being reset.
//! - Stopping (by [`RelayHandle::shutdown`] or by dropping the handle) resets every open
//!   connection; no task of the relay outlives `shutdown`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::link::{Direction, Link};
use crate::pace::Bucket;
use crate::pipe::{self, reset};
use crate::timer::Timer;
use crate::LinkError;

/// Pause after a failed accept (for example out of file descriptors) before the next one.
const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(50);

/// A snapshot of a relay's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Stats {
    /// Bytes delivered to the target (written to its socket).
    pub forward_bytes: u64,
    /// Bytes delivered back to clients.
    pub reverse_bytes: u64,
    /// Bytes read from clients and not yet delivered, summed over connections.
    pub forward_queued_bytes: u64,
    /// Bytes read from the target and not yet delivered, summed over connections.
    pub reverse_queued_bytes: u64,
    /// Connections accepted since the start (including refused ones).
    pub connections_accepted: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// Connections reset on accept because a resetting partition was in force.
    pub connections_refused: u64,
    /// Open connections reset by a partition, a failure on the other side, or shutdown.
    pub connections_reset: u64,
}

/// Counters shared by the relay's tasks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) delivered_bytes: [AtomicU64; 2],
    pub(crate) queued_bytes: [AtomicU64; 2],
    pub(crate) accepted: AtomicU64,
    pub(crate) open: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) reset: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> Stats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Stats {
            forward_bytes: load(&self.delivered_bytes[Direction::Forward.index()]),
            reverse_bytes: load(&self.delivered_bytes[Direction::Reverse.index()]),
            forward_queued_bytes: load(&self.queued_bytes[Direction::Forward.index()]),
            reverse_queued_bytes: load(&self.queued_bytes[Direction::Reverse.index()]),
            connections_accepted: load(&self.accepted),
            connections_open: load(&self.open),
            connections_refused: load(&self.refused),
            connections_reset: load(&self.reset),
        }
    }
}

/// Whether the relay runs or is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Running,
    Stopping,
}

/// What every connection task of one relay shares.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) target: SocketAddr,
    pub(crate) link: watch::Receiver<Link>,
    pub(crate) lifecycle: watch::Receiver<Lifecycle>,
    pub(crate) counters: Arc<Counters>,
    /// One token bucket per direction, shared by all connections.
    pub(crate) buckets: [Mutex<Bucket>; 2],
    pub(crate) timer: Timer,
    /// When the relay started: times given to the pure pacing code count from here.
    pub(crate) epoch: Instant,
}

impl Context {
    /// Nanoseconds since the relay started.
    pub(crate) fn now_ns(&self) -> u64 {
        crate::pace::nanos(self.epoch.elapsed())
    }

    /// The instant `ns` nanoseconds after the start.
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// Reserves `bytes` of `direction`'s bandwidth now; returns when they may leave.
    pub(crate) fn reserve(&self, direction: Direction, bytes: u64) -> Instant {
        let rate = self.link.borrow().shape(direction).rate_bytes_per_s;
        let now_ns = self.now_ns();
        let mut bucket = self.buckets[direction.index()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.instant(bucket.reserve(now_ns, bytes, rate))
    }
}

/// Starts relays; see [`Relay::start`].
#[derive(Debug)]
pub struct Relay;

impl Relay {
    /// Listens on `listen` and forwards every accepted connection to `target` through `link`.
    /// Must run inside a tokio runtime (with the time and net drivers).
    pub async fn start(
        listen: SocketAddr,
        target: SocketAddr,
        link: Link,
    ) -> Result<RelayHandle, LinkError> {
        link.check()?;
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| LinkError::Bind {
                address: listen,
                source,
            })?;
        let local = listener.local_addr().map_err(|source| LinkError::Bind {
            address: listen,
            source,
        })?;
        let (link_sender, link_receiver) = watch::channel(link);
        let (lifecycle_sender, lifecycle_receiver) = watch::channel(Lifecycle::Running);
        let counters = Arc::new(Counters::default());
        let context = Arc::new(Context {
            target,
            link: link_receiver,
            lifecycle: lifecycle_receiver,
            counters: Arc::clone(&counters),
            buckets: Default::default(),
            timer: Timer::start()?,
            epoch: Instant::now(),
        });
        let task = tokio::spawn(accept_loop(listener, context));
        tracing::info!(%local, %target, "relay started");
        Ok(RelayHandle {
            local,
            target,
            link: link_sender,
            lifecycle: lifecycle_sender,
            counters,
            task: Mutex::new(Some(task)),
        })
    }
}

/// A running relay. Dropping it stops the relay without waiting.
#[derive(Debug)]
pub struct RelayHandle {
    local: SocketAddr,
    target: SocketAddr,
    link: watch::Sender<Link>,
    lifecycle: watch::Sender<Lifecycle>,
    counters: Arc<Counters>,
    /// The accept loop, taken by the first `shutdown`.
    task: Mutex<Option<JoinHandle<()>>>,
}

impl RelayHandle {
    /// The address the relay listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address every connection is forwarded to.
    pub fn target_addr(&self) -> SocketAddr {
        self.target
    }

    /// The link in force.
    pub fn link(&self) -> Link {
        *self.link.borrow()
    }

    /// Replaces the link. Delay and jitter apply to bytes read from now on, the rate and the
    /// queue bound at once; a partition holds or resets at once.
    pub fn set(&self, link: Link) -> Result<(), LinkError> {
        link.check()?;
        self.link.send_replace(link);
        tracing::info!(?link, local = %self.local, "link changed");
        Ok(())
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    /// Stops accepting, resets every open connection and waits for all tasks to end. Later
    /// calls return at once.
    pub async fn shutdown(&self) {
        self.lifecycle.send_replace(Lifecycle::Stopping);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            // A join error means the task was cancelled or panicked; either way it is over.
            let _ = task.await;
        }
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.lifecycle.send_replace(Lifecycle::Stopping);
    }
}

async fn accept_loop(listener: TcpListener, context: Arc<Context>) {
    let mut lifecycle = context.lifecycle.clone();
    let mut connections = JoinSet::new();
    loop {
        let stopping = async {
            let _ = lifecycle
                .wait_for(|state| *state == Lifecycle::Stopping)
                .await;
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, from)) => admit(&context, &mut connections, client, from),
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = stopping => break,
        }
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
    tracing::info!(target = %context.target, "relay stopped");
}

fn admit(
    context: &Arc<Context>,
    connections: &mut JoinSet<()>,
    client: TcpStream,
    from: SocketAddr,
) {
    context.counters.accepted.fetch_add(1, Ordering::Relaxed);
    if context.link.borrow().refuses() {
        context.counters.refused.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%from, "partitioned: connection refused");
        reset(&client);
        return;
    }
    let serial = context.counters.accepted.load(Ordering::Relaxed);
    connections.spawn(pipe::run(Arc::clone(context), client, from, serial));
}
