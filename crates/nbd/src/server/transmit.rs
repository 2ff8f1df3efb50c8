//! The transmission phase of one connection: a reader loop that parses requests and submits
//! them, and a spawned writer task (`writer.rs`) that sends replies in completion order.
//!
//! Invariants:
//! - A permit of the connection's semaphore is taken before each request header is read and
//!   released when its reply is written, so at most `in_flight_max_per_connection` requests
//!   are outstanding; when none is free the reader stops reading (backpressure).
//! - Before a write payload is read, or a read is submitted, pages of the shared payload
//!   budget are taken; they travel with the completion and return when the reply is written.
//! - Reads go through one bounded buffer per connection (`READ_BUFFER_BYTES`): at most that
//!   much of the client's stream is held beyond the request being parsed.
//! - A write payload is read straight into a pooled buffer and frozen (or, for an export that
//!   streams large writes, submitted first and filled as it arrives); a rejected write's
//!   payload is read and dropped in bounded chunks so the next header is found where expected.
//! - The export is dropped only after the writer task ended, i.e. after every completion of
//!   this connection was answered.

use std::sync::Arc;

use bufpool::BufPool;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::negotiate::Session;
use super::writer::write_replies;
use super::ServerConfig;
use crate::completion::{Expect, Outgoing};
use crate::protocol::{
    parse_request_header, Admitted, ExportLimits, Rejection, RequestHeader, Verdict,
    REQUEST_HEADER_LEN,
};
use crate::{Command, Completion, Export, NbdError, Request};

/// Size of the scratch buffer used to skip a rejected write's payload.
const DISCARD_CHUNK_BYTES: usize = 64 * 1024;

/// The connection's read buffer. Under a queue of small requests one `recv` brings in many
/// headers and payloads at once instead of two system calls per request; a payload larger
/// than this is read past the buffer, straight into its own.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Serves requests on `stream` until the client disconnects, then waits for every reply.
pub(crate) async fn transmit<S>(
    stream: S,
    session: Session,
    config: Arc<ServerConfig>,
) -> Result<(), NbdError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (read_half, write_half) = tokio::io::split(stream);
    let (replies, replies_receiver) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_replies(write_half, replies_receiver));
    let mut reader = RequestReader {
        stream: tokio::io::BufReader::with_capacity(READ_BUFFER_BYTES, read_half),
        export: Arc::clone(&session.export),
        limits: session.limits,
        pool: Arc::clone(&config.pool),
        permits: Arc::new(Semaphore::new(config.in_flight_max_per_connection)),
        payload_budget: Arc::clone(&config.payload_budget),
        replies,
        discard: Vec::new(),
    };
    let read_result = reader.run().await;
    // Dropping the reader drops its sender: the writer ends once every completion is answered.
    drop(reader);
    let write_result = writer.await;
    drop(session);
    read_result?;
    write_result?
}

/// The reader half of a connection.
struct RequestReader<R> {
    stream: R,
    export: Arc<dyn Export>,
    limits: ExportLimits,
    pool: Arc<BufPool>,
    permits: Arc<Semaphore>,
    payload_budget: Arc<Semaphore>,
    replies: UnboundedSender<Outgoing>,
    /// Scratch space for skipping payloads; allocated on first use.
    discard: Vec<u8>,
}

impl<R: AsyncRead + Unpin> RequestReader<R> {
    /// Reads and dispatches requests until `NBD_CMD_DISC` or end of stream.
    async fn run(&mut self) -> Result<(), NbdError> {
        loop {
            // The semaphore is never closed, so acquiring only waits.
            let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await else {
                return Ok(());
            };
            let Some(header) = self.read_header().await? else {
                tracing::debug!("client closed the connection without NBD_CMD_DISC");
                return Ok(());
            };
            match Verdict::decide(&header, &self.limits) {
                Verdict::Disconnect => return Ok(()),
                Verdict::Empty => self.completion(&header, Expect::Status, permit).ok(),
                Verdict::Reject {
                    rejection,
                    discard_bytes,
                } => {
                    self.reject(&header, rejection, discard_bytes, permit)
                        .await?;
                }
                Verdict::Submit { command, fua } => {
                    self.submit(&header, command, fua, permit).await?;
                }
            }
        }
    }

    /// The next header, or None at a clean end of stream (between requests).
    async fn read_header(&mut self) -> Result<Option<RequestHeader>, NbdError> {
        let mut bytes = [0; REQUEST_HEADER_LEN];
        let mut filled = 0;
        while filled < bytes.len() {
            let read = self.stream.read(&mut bytes[filled..]).await?;
            if read == 0 {
                if filled == 0 {
                    return Ok(None);
                }
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
            filled += read;
        }
        parse_request_header(&bytes).map(Some)
    }

    fn completion(
        &self,
        header: &RequestHeader,
        expect: Expect,
        permit: OwnedSemaphorePermit,
    ) -> Completion {
        Completion::new(header.cookie, expect, self.replies.clone(), permit)
    }

    async fn reject(
        &mut self,
        header: &RequestHeader,
        rejection: Rejection,
        discard_bytes: u32,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), NbdError> {
        tracing::debug!(?header, ?rejection, "request rejected");
        self.skip_payload(discard_bytes).await?;
        self.completion(header, Expect::Status, permit)
            .error(rejection.errno());
        Ok(())
    }

    async fn submit(
        &mut self,
        header: &RequestHeader,
        command: Admitted,
        fua: bool,
        permit: OwnedSemaphorePermit,
    ) -> Result<(), NbdError> {
        let pages = match command {
            Admitted::Read { length, .. } | Admitted::Write { length, .. } => {
                usize::try_from(length)
                    .unwrap_or(usize::MAX)
                    .div_ceil(super::PAGE_BYTES)
            }
            _ => 0,
        };
        let pages = u32::try_from(pages).unwrap_or(u32::MAX);
        // Never closed, so acquiring only waits (backpressure across connections).
        let budget = Arc::clone(&self.payload_budget)
            .acquire_many_owned(pages)
            .await
            .ok();
        let (command, expect) = match command {
            Admitted::Read { offset, length } => {
                (Command::Read { offset, length }, Expect::Data(length))
            }
            Admitted::Write { offset, length } if self.streams(length) => {
                let Some(buffer) = self
                    .pool
                    .take(usize::try_from(length).unwrap_or(usize::MAX))
                else {
                    return self
                        .reject(header, Rejection::BufferUnavailable, length, permit)
                        .await;
                };
                let (filler, data) = bufpool::Incoming::filling(buffer);
                let completion = self
                    .completion(header, Expect::Status, permit)
                    .with_budget(budget);
                self.export.submit(
                    Request {
                        command: Command::WriteStreaming { offset, data },
                        fua,
                    },
                    completion,
                );
                return self.fill(filler).await;
            }
            Admitted::Write { offset, length } => match self.read_payload(length).await? {
                Some(data) => (Command::Write { offset, data }, Expect::Status),
                None => {
                    return self
                        .reject(header, Rejection::BufferUnavailable, length, permit)
                        .await
                }
            },
            Admitted::Flush => (Command::Flush, Expect::Status),
            Admitted::Trim { offset, length } => (Command::Trim { offset, length }, Expect::Status),
            Admitted::WriteZeroes {
                offset,
                length,
                no_hole,
            } => (
                Command::WriteZeroes {
                    offset,
                    length,
                    no_hole,
                },
                Expect::Status,
            ),
        };
        let completion = self.completion(header, expect, permit).with_budget(budget);
        self.export.submit(Request { command, fua }, completion);
        Ok(())
    }

    /// Whether a write of `length` bytes is submitted before its payload is read.
    fn streams(&self, length: u32) -> bool {
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        self.export
            .streaming_write_bytes_min()
            .is_some_and(|min| length >= min)
    }

    /// Reads a streaming write's payload as it arrives. On an error the filler is dropped,
    /// which aborts the payload for everyone using it.
    async fn fill(&mut self, mut filler: bufpool::Filler) -> Result<(), NbdError> {
        while filler.remaining() > 0 {
            let read = self.stream.read(filler.spare()).await?;
            if read == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
            filler.publish(read);
            // Let the export's consumers of this payload (its peer senders, woken on this
            // worker by the publish) pass the piece on before it is written here and before
            // the next one is read: otherwise a client that keeps the socket full turns
            // cut-through into store-and-forward, and the peer, the longer path, waits for
            // this node's own write of every piece.
            tokio::task::yield_now().await;
            filler.pass_to_sinks();
        }
        Ok(())
    }

    /// Reads a write payload into a pooled buffer; None (payload untouched) if the pool cannot
    /// supply one.
    async fn read_payload(&mut self, length: u32) -> Result<Option<bytes::Bytes>, NbdError> {
        let Some(mut buffer) = usize::try_from(length)
            .ok()
            .and_then(|len| self.pool.take(len))
        else {
            return Ok(None);
        };
        self.stream.read_exact(&mut buffer).await?;
        Ok(Some(buffer.freeze()))
    }

    async fn skip_payload(&mut self, length: u32) -> Result<(), NbdError> {
        let mut remaining = usize::try_from(length).unwrap_or(usize::MAX);
        if remaining > 0 && self.discard.is_empty() {
            self.discard.resize(DISCARD_CHUNK_BYTES, 0);
        }
        while remaining > 0 {
            let chunk = remaining.min(self.discard.len());
            self.stream.read_exact(&mut self.discard[..chunk]).await?;
            remaining -= chunk;
        }
        Ok(())
    }
}
