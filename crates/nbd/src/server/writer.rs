//! The reply writer task: one per connection, the only writer of the socket in transmission.
//!
//! It takes whatever replies are queued (up to [`BATCH_REPLIES_MAX`]) and writes their headers
//! and data with vectored writes, so a read reply is one syscall with its header and a burst of
//! small replies is one syscall in all; nothing is copied.
//!
//! Invariants:
//! - Replies are written whole and back to back: a partial write resumes exactly where it
//!   stopped, so the stream never interleaves two replies.
//! - The task ends only when every reply sender is gone (the reader finished and every
//!   completion was answered). After a write error it keeps receiving and discarding replies
//!   until then, so completions never block and in-flight permits are always released.

use std::collections::VecDeque;
use std::io::IoSlice;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::completion::Outgoing;
use crate::NbdError;

/// Most replies gathered into one vectored write.
pub(crate) const BATCH_REPLIES_MAX: usize = 64;
/// Each reply is at most two slices: header and data.
const IO_SLICES_MAX: usize = 2 * BATCH_REPLIES_MAX;

const _: () = assert!(IO_SLICES_MAX <= 1024, "Linux IOV_MAX");

/// Writes replies until every sender is dropped, then shuts the stream's write side down.
pub(crate) async fn write_replies<W: AsyncWrite + Unpin>(
    mut stream: W,
    mut replies: UnboundedReceiver<Outgoing>,
) -> Result<(), NbdError> {
    let mut batch = VecDeque::with_capacity(BATCH_REPLIES_MAX);
    while let Some(first) = replies.recv().await {
        batch.push_back(first);
        while batch.len() < BATCH_REPLIES_MAX {
            match replies.try_recv() {
                Ok(reply) => batch.push_back(reply),
                Err(_) => break,
            }
        }
        if let Err(error) = write_batch(&mut stream, &mut batch).await {
            batch.clear();
            // Keep answering completions (into the void) until all of them are done.
            while replies.recv().await.is_some() {}
            return Err(error);
        }
    }
    if let Err(error) = stream.shutdown().await {
        tracing::debug!(%error, "shutting down the connection's write side failed");
    }
    Ok(())
}

async fn write_batch<W: AsyncWrite + Unpin>(
    stream: &mut W,
    batch: &mut VecDeque<Outgoing>,
) -> Result<(), NbdError> {
    let mut front_written = 0;
    while !batch.is_empty() {
        let written = {
            let mut slices = [IoSlice::new(&[]); IO_SLICES_MAX];
            let count = fill_slices(batch, front_written, &mut slices);
            stream.write_vectored(&slices[..count]).await?
        };
        if written == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
        }
        front_written = consume(batch, front_written, written);
    }
    Ok(())
}

/// Fills `slices` with the unwritten parts of `batch` (skipping `front_written` bytes of the
/// first reply) and returns how many it filled.
fn fill_slices<'a>(
    batch: &'a VecDeque<Outgoing>,
    front_written: usize,
    slices: &mut [IoSlice<'a>],
) -> usize {
    let mut skip = front_written;
    let mut count = 0;
    for reply in batch {
        for part in [&reply.header[..], &reply.data[..]] {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            let Some(slot) = slices.get_mut(count) else {
                return count;
            };
            *slot = IoSlice::new(&part[skip..]);
            skip = 0;
            count += 1;
        }
    }
    count
}

/// Drops the replies that `written` more bytes completed; returns how much of the new front
/// reply is written.
fn consume(batch: &mut VecDeque<Outgoing>, front_written: usize, written: usize) -> usize {
    let mut front_written = front_written;
    let mut written = written;
    while let Some(front) = batch.front() {
        let remaining = front.len() - front_written;
        if written < remaining {
            return front_written + written;
        }
        written -= remaining;
        front_written = 0;
        batch.pop_front();
    }
    assert_eq!(written, 0, "the stream wrote more bytes than it was given");
    0
}
