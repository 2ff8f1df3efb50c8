//! The async server: accept loops, and one connection's life (handshake, then transmission).
//!
//! Invariants:
//! - An error on one connection is logged and ends that connection only; the accept loops
//!   run until their task is dropped.
//! - Every accepted TCP stream has `TCP_NODELAY` set: replies are already batched by the writer,
//!   so Nagle's algorithm would only add latency.

mod negotiate;
mod transmit;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use bufpool::{BufPool, PoolConfig, BUFFER_BYTES_MAX};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tracing::Instrument;

use crate::{ExportRegistry, NbdError};
use negotiate::{negotiate, Negotiated, BLOCK_BYTES_PREFERRED};

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
/// Unit of the payload budget.
pub(crate) const PAGE_BYTES: usize = 4096;

const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Server settings, shared by all connections.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Longest read or write payload accepted; advertised as the maximum block size. Must be
    /// within `4096..=bufpool::BUFFER_BYTES_MAX`.
    pub request_bytes_max: u32,
    /// Requests outstanding per connection before the server stops reading (≥ 1).
    pub in_flight_max_per_connection: usize,
    /// Where write payloads are read into.
    pub pool: Arc<BufPool>,
    /// Payload bytes (writes being read or executed, reads being executed) in flight across
    /// every connection that shares this budget, in 4 KiB pages. With the per-connection
    /// limit this bounds the server's memory however many clients connect.
    pub payload_budget: Arc<tokio::sync::Semaphore>,
}

impl ServerConfig {
    /// Default `request_bytes_max`: 32 MiB, the size every client may assume (proto.md).
    pub const REQUEST_BYTES_MAX_DEFAULT: u32 = 32 * 1024 * 1024;
    /// Default `in_flight_max_per_connection`.
    pub const IN_FLIGHT_MAX_PER_CONNECTION_DEFAULT: usize = 128;
    /// Default payload budget: 512 MiB in 4 KiB pages.
    pub const PAYLOAD_BUDGET_PAGES_DEFAULT: usize = 512 * 256;

    /// A payload budget of `pages` 4 KiB pages.
    pub fn budget(pages: usize) -> Arc<tokio::sync::Semaphore> {
        Arc::new(tokio::sync::Semaphore::new(pages))
    }

    /// Defaults, with payloads taken from `pool`.
    pub fn new(pool: Arc<BufPool>) -> ServerConfig {
        ServerConfig {
            request_bytes_max: Self::REQUEST_BYTES_MAX_DEFAULT,
            in_flight_max_per_connection: Self::IN_FLIGHT_MAX_PER_CONNECTION_DEFAULT,
            pool,
            payload_budget: Self::budget(Self::PAYLOAD_BUDGET_PAGES_DEFAULT),
        }
    }

    /// Checks the limits against what the protocol and the pool allow.
    pub fn validate(&self) -> Result<(), NbdError> {
        let request_bytes_max = usize::try_from(self.request_bytes_max).unwrap_or(usize::MAX);
        if self.request_bytes_max < BLOCK_BYTES_PREFERRED {
            return Err(NbdError::InvalidConfig(
                "request_bytes_max below the 4096-byte block",
            ));
        }
        if request_bytes_max > BUFFER_BYTES_MAX {
            return Err(NbdError::InvalidConfig(
                "request_bytes_max above the pool's largest",
            ));
        }
        let pages_needed = request_bytes_max.div_ceil(PAGE_BYTES);
        if self.payload_budget.available_permits() < pages_needed {
            return Err(NbdError::InvalidConfig(
                "payload budget smaller than one request",
            ));
        }
        if self.in_flight_max_per_connection == 0 {
            return Err(NbdError::InvalidConfig(
                "in_flight_max_per_connection is zero",
            ));
        }
        if self.in_flight_max_per_connection > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(NbdError::InvalidConfig(
                "in_flight_max_per_connection too large",
            ));
        }
        Ok(())
    }
}

impl Default for ServerConfig {
    /// Defaults with a new pool of default settings.
    fn default() -> ServerConfig {
        ServerConfig::new(BufPool::new(PoolConfig::default()))
    }
}

const _: () = assert!(ServerConfig::REQUEST_BYTES_MAX_DEFAULT as usize <= BUFFER_BYTES_MAX);
const _: () = assert!(ServerConfig::REQUEST_BYTES_MAX_DEFAULT >= BLOCK_BYTES_PREFERRED);

/// Serves one client connection: handshake, then requests until the client disconnects.
/// Returns when the connection is closed and every request was answered.
pub async fn serve_connection<S>(
    mut stream: S,
    registry: Arc<dyn ExportRegistry>,
    config: Arc<ServerConfig>,
) -> Result<(), NbdError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    config.validate()?;
    match negotiate(&mut stream, registry.as_ref(), &config).await? {
        Negotiated::Aborted => Ok(()),
        Negotiated::Transmission(session) => {
            tracing::debug!(limits = ?session.limits, "transmission");
            transmit::transmit(stream, session, config).await
        }
    }
}

/// Accepts connections on a unix socket forever, serving each on its own task.
pub async fn serve_unix(
    listener: UnixListener,
    registry: Arc<dyn ExportRegistry>,
    config: Arc<ServerConfig>,
) {
    if let Err(error) = config.validate() {
        tracing::error!(%error, "NBD server not started");
        return;
    }
    let mut accepted: u64 = 0;
    loop {
        match listener.accept().await {
            Ok((stream, _address)) => {
                accepted += 1;
                let span = tracing::info_span!("nbd", connection = accepted, transport = "unix");
                spawn_connection(stream, Arc::clone(&registry), Arc::clone(&config), span);
            }
            Err(error) => accept_failed(error).await,
        }
    }
}

/// Accepts connections on a TCP socket forever, serving each on its own task.
pub async fn serve_tcp(
    listener: TcpListener,
    registry: Arc<dyn ExportRegistry>,
    config: Arc<ServerConfig>,
) {
    if let Err(error) = config.validate() {
        tracing::error!(%error, "NBD server not started");
        return;
    }
    let mut accepted: u64 = 0;
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                accepted += 1;
                let span = tracing::info_span!("nbd", connection = accepted, %peer);
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::warn!(parent: &span, %error, "setting TCP_NODELAY failed");
                }
                spawn_connection(stream, Arc::clone(&registry), Arc::clone(&config), span);
            }
            Err(error) => accept_failed(error).await,
        }
    }
}

async fn accept_failed(error: std::io::Error) {
    tracing::warn!(%error, "accepting an NBD connection failed");
    tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
}

fn spawn_connection<S>(
    stream: S,
    registry: Arc<dyn ExportRegistry>,
    config: Arc<ServerConfig>,
    span: tracing::Span,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = async move {
        tracing::debug!("connected");
        match serve_connection(stream, registry, config).await {
            Ok(()) => tracing::debug!("closed"),
            Err(error) => tracing::info!(%error, "connection ended with an error"),
        }
    };
    tokio::spawn(connection.instrument(span));
}

#[cfg(test)]
mod tests;
