//! Tests of the reply writer: partial vectored writes resume exactly where they stopped, and
//! after a write error the writer keeps draining completions until every sender is gone.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, Semaphore};

use super::writer::write_replies;
use crate::completion::Expect;
use crate::protocol::{parse_simple_reply_header, SIMPLE_REPLY_HEADER_LEN};
use crate::{Completion, Errno, NbdError};

/// A sink that accepts at most `step` bytes per call and fails once `fail_after` is reached.
struct Trickle {
    written: Vec<u8>,
    step: usize,
    fail_after: usize,
}

impl AsyncWrite for Trickle {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_write_vectored(context, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        slices: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if self.written.len() >= self.fail_after {
            return Poll::Ready(Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe)));
        }
        let mut budget = self.step;
        for slice in slices {
            let take = budget.min(slice.len());
            self.written.extend_from_slice(&slice[..take]);
            budget -= take;
        }
        Poll::Ready(Ok(self.step - budget))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Completes `count` requests with replies of varying shapes; returns the expected stream.
async fn complete_all(
    count: u64,
    permits: &Arc<Semaphore>,
    replies: &mpsc::UnboundedSender<crate::completion::Outgoing>,
) -> Vec<u8> {
    let mut expected = Vec::new();
    for cookie in 0..count {
        let permit = Arc::clone(permits).acquire_owned().await.unwrap();
        let data = Bytes::from(vec![
            u8::try_from(cookie % 251).unwrap();
            usize::try_from(cookie * 3).unwrap()
        ]);
        let completion = Completion::new(
            cookie,
            Expect::Data(u32::try_from(data.len()).unwrap()),
            replies.clone(),
            permit,
        );
        if cookie % 5 == 4 {
            completion.error(Errno::NoSpc);
            expected.extend_from_slice(
                &crate::protocol::SimpleReplyHeader {
                    cookie,
                    error: Some(Errno::NoSpc),
                }
                .encode(),
            );
        } else {
            expected.extend_from_slice(
                &crate::protocol::SimpleReplyHeader {
                    cookie,
                    error: None,
                }
                .encode(),
            );
            expected.extend_from_slice(&data);
            completion.read_data(data);
        }
    }
    expected
}

#[tokio::test]
async fn partial_vectored_writes_keep_replies_whole_and_in_order() {
    for step in [1, 5, 16, 17, 1000] {
        let (sender, receiver) = mpsc::unbounded_channel();
        let permits = Arc::new(Semaphore::new(1000));
        let expected = complete_all(200, &permits, &sender).await;
        drop(sender);
        let mut sink = Trickle {
            written: Vec::new(),
            step,
            fail_after: usize::MAX,
        };
        write_replies(&mut sink, receiver).await.unwrap();
        assert!(sink.written == expected, "step {step}");
        assert_eq!(permits.available_permits(), 1000, "every permit came back");
    }
}

#[tokio::test]
async fn wrong_sized_read_data_and_dropped_completions_become_eio() {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(4));
    let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
    Completion::new(1, Expect::Data(8), sender.clone(), permit)
        .read_data(Bytes::from_static(b"short"));
    let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
    drop(Completion::new(2, Expect::Status, sender.clone(), permit));
    let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
    Completion::new(3, Expect::Data(8), sender, permit).ok();
    for cookie in 1..=3 {
        let reply = receiver.recv().await.unwrap();
        let header = parse_simple_reply_header(&reply.header).unwrap();
        assert_eq!((header.cookie, header.error), (cookie, Some(Errno::Io)));
        assert!(reply.data.is_empty());
        assert_eq!(reply.len(), SIMPLE_REPLY_HEADER_LEN);
    }
}

#[tokio::test]
async fn after_a_write_error_the_writer_drains_until_every_sender_is_gone() {
    let (sender, receiver) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(1000));
    complete_all(50, &permits, &sender).await;
    let sink = Trickle {
        written: Vec::new(),
        step: 7,
        fail_after: 100,
    };
    let writer = tokio::spawn(write_replies(sink, receiver));
    // Completions keep arriving after the failure and must not be stuck.
    complete_all(50, &permits, &sender).await;
    drop(sender);
    let result = writer.await.unwrap();
    assert!(matches!(result, Err(NbdError::Io(_))));
    assert_eq!(permits.available_permits(), 1000);
}
