//! The Prometheus metrics listener (`metrics-address [ADDR:]PORT;` in a node's `on` section):
//! a small HTTP/1.1 server that answers `GET /metrics` with the node's status in the text
//! exposition format, names prefixed `tandem_` (the list is in `text`, documented in the
//! README).
//!
//! Invariants:
//! - Read-only: a scrape takes each resource's engine lock just long enough to copy its
//!   status (as `tandem status` does) and changes nothing.
//! - Bounded: at most [`CLIENTS_MAX`] connections are served at once (more are closed at
//!   once, unanswered); a request head is at most `http::REQUEST_HEAD_BYTES_MAX` bytes and must
//!   arrive within [`REQUEST_TIMEOUT`]; writing the answer may take [`RESPONSE_TIMEOUT`]; one
//!   request per connection (`Connection: close`).
//! - Bad input (oversized, malformed, non-text heads) gets `400` and the connection closed;
//!   nothing a client sends can panic the server or affect other clients.
//! - The listener is bound before anything else is served (`setup::serve`), so a busy port
//!   fails the start.

mod http;
mod text;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::resource::Resource;
use crate::DaemonError;
use http::{BadRequest, Route, Status};
use text::{NodeSample, ResourceSample};

/// Connections served at once; a scraper needs one, so this only bounds misbehaving clients.
const CLIENTS_MAX: usize = 16;
/// How long a client may take to send its whole request head.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long writing a response may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// After a `400`, how much more of the client's input is read and dropped (so closing the
/// socket does not reset the connection before the client read the answer), and for how long.
const DRAIN_BYTES_MAX: usize = 64 * 1024;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// How long to wait after a failed `accept` (such as too many open files) before the next.
const ACCEPT_RETRY_INTERVAL: Duration = Duration::from_millis(100);
/// Bytes read from a socket at a time.
const READ_CHUNK_BYTES: usize = 1024;

/// What the listener serves.
struct Context {
    node: String,
    resources: Vec<Arc<Resource>>,
    clients: Arc<Semaphore>,
}

/// Binds the metrics listener if `address` is set; a busy port is a start-up error.
pub(crate) async fn bind(address: Option<SocketAddr>) -> Result<Option<TcpListener>, DaemonError> {
    let Some(address) = address else {
        return Ok(None);
    };
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| DaemonError::Listen {
            what: format!("metrics {address}"),
            source,
        })?;
    Ok(Some(listener))
}

/// Serves scrapes on `listener` forever.
pub(crate) async fn serve(listener: TcpListener, node: String, resources: Vec<Arc<Resource>>) {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "serving Prometheus metrics on http://{address}/metrics");
    }
    let context = Arc::new(Context {
        node,
        resources,
        clients: Arc::new(Semaphore::new(CLIENTS_MAX)),
    });
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::debug!("metrics listener: accept failed: {error}");
                tokio::time::sleep(ACCEPT_RETRY_INTERVAL).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&context.clients).try_acquire_owned() else {
            tracing::debug!(
                "metrics listener: {CLIENTS_MAX} clients already connected; closing a new one"
            );
            continue;
        };
        let context = Arc::clone(&context);
        tokio::spawn(async move {
            serve_client(stream, &context).await;
            drop(permit);
        });
    }
}

/// How reading a request head ended.
enum HeadRead {
    /// A complete head.
    Head(Vec<u8>),
    /// The client left before sending anything (a port probe), or the socket failed.
    Gone,
    /// The client sent something that cannot be a request head.
    Bad(BadRequest),
}

async fn serve_client(mut stream: TcpStream, context: &Context) {
    let read = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await;
    let head = match read {
        Err(_) | Ok(HeadRead::Gone) => return,
        Ok(HeadRead::Head(head)) => http::parse_head(&head),
        Ok(HeadRead::Bad(bad)) => Err(bad),
    };
    let answer = match head {
        Ok(head) => answer(&head, context),
        Err(bad) => {
            tracing::debug!("metrics listener: bad request: {bad}");
            let bytes = http::error_response(Status::BadRequest, &format!("bad request: {bad}"));
            send_and_drain(&mut stream, &bytes).await;
            return;
        }
    };
    let _ = tokio::time::timeout(RESPONSE_TIMEOUT, async {
        stream.write_all(&answer).await?;
        stream.shutdown().await
    })
    .await;
}

/// The response to a well-formed request.
fn answer(head: &http::RequestHead, context: &Context) -> Vec<u8> {
    match http::route(head) {
        Route::Metrics { with_body } => {
            let body = text::render(&node_sample(&context.node, &context.resources));
            http::response(Status::Ok, http::METRICS_CONTENT_TYPE, &body, with_body)
        }
        Route::NotFound => {
            http::error_response(Status::NotFound, "not found; metrics are at /metrics")
        }
        Route::MethodNotAllowed => {
            http::error_response(Status::MethodNotAllowed, "only GET and HEAD are served")
        }
    }
}

async fn read_head(stream: &mut TcpStream) -> HeadRead {
    let mut buffer = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    loop {
        let count = match stream.read(&mut chunk).await {
            Ok(0) if buffer.is_empty() => return HeadRead::Gone,
            Ok(0) => return HeadRead::Bad(BadRequest::Truncated),
            Ok(count) => count,
            Err(_) => return HeadRead::Gone,
        };
        buffer.extend_from_slice(chunk.get(..count).unwrap_or_default());
        match http::head_end(&buffer) {
            Some(end) if end <= http::REQUEST_HEAD_BYTES_MAX => {
                buffer.truncate(end);
                return HeadRead::Head(buffer);
            }
            Some(_) => return HeadRead::Bad(BadRequest::TooLarge),
            None if buffer.len() >= http::REQUEST_HEAD_BYTES_MAX => {
                return HeadRead::Bad(BadRequest::TooLarge)
            }
            None => {}
        }
    }
}

/// Sends an error answer, stops writing, and reads (and drops) a bounded amount of what the
/// client still sends, so that closing does not reset the connection under the answer.
async fn send_and_drain(stream: &mut TcpStream, bytes: &[u8]) {
    let sent = tokio::time::timeout(RESPONSE_TIMEOUT, async {
        stream.write_all(bytes).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(sent, Ok(Ok(()))) {
        return;
    }
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, async {
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        let mut drained = 0;
        while drained < DRAIN_BYTES_MAX {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(count) => drained += count,
            }
        }
    })
    .await;
}

/// The node's status now, for one scrape.
fn node_sample(node: &str, resources: &[Arc<Resource>]) -> NodeSample {
    NodeSample {
        node: node.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        resources: resources.iter().map(|r| resource_sample(r)).collect(),
    }
}

fn resource_sample(resource: &Resource) -> ResourceSample {
    let (status, quorum, suspended) = resource
        .with_engine(|engine| (engine.status(), engine.has_quorum(), engine.io_suspended()));
    ResourceSample {
        name: resource.name.clone(),
        status,
        quorum,
        suspended,
        down: resource.is_down(),
        peer_names: resource
            .peers
            .iter()
            .map(|p| (p.node_id, p.name.clone()))
            .collect(),
        srm: resource
            .srm_view
            .lock()
            .ok()
            .and_then(|view| view.as_ref().and_then(|v| v.latest.clone())),
        // A second look at the engine: the drbd_* families may be a moment newer.
        report: crate::status::resource_status(resource),
    }
}
