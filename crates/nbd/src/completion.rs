//! [`Completion`]: the export's handle for answering one request, from any thread.
//!
//! Invariants:
//! - A completion sends exactly one reply: the first of `ok`/`read_data`/`error`/drop sends it
//!   and the consumed route makes a second impossible.
//! - A successful read reply carries exactly the requested number of bytes; anything else
//!   would desynchronise the client's stream, so a wrong-sized answer becomes `EIO` instead.
//! - The in-flight permit travels with the reply and is released only once the writer task has
//!   written (or discarded) it, so queued-but-unwritten replies count against the limit too.

use bytes::Bytes;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::OwnedSemaphorePermit;

use crate::protocol::{SimpleReplyHeader, SIMPLE_REPLY_HEADER_LEN};
use crate::Errno;

/// A reply ready for the writer task.
pub(crate) struct Outgoing {
    /// Encoded simple reply header.
    pub(crate) header: [u8; SIMPLE_REPLY_HEADER_LEN],
    /// Read data (empty for every other reply).
    pub(crate) data: Bytes,
    /// Released when the reply is dropped by the writer.
    _permit: OwnedSemaphorePermit,
    /// Payload-budget pages, released with the reply.
    _budget: Option<OwnedSemaphorePermit>,
}

impl Outgoing {
    /// Bytes on the wire.
    pub(crate) fn len(&self) -> usize {
        self.header.len() + self.data.len()
    }
}

// Completions are moved to whatever thread finishes the request.
const _: fn() = || {
    fn send_and_static<T: Send + 'static>() {}
    send_and_static::<Completion>();
};

/// What a successful reply must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A status only (every command but a non-empty read).
    Status,
    /// Exactly this many bytes of read data.
    Data(u32),
}

/// Where the reply goes; taken when the reply is sent.
struct Route {
    replies: UnboundedSender<Outgoing>,
    permit: OwnedSemaphorePermit,
    budget: Option<OwnedSemaphorePermit>,
}

/// Completes one request. Call exactly one of [`ok`](Completion::ok),
/// [`read_data`](Completion::read_data) or [`error`](Completion::error); dropping it instead
/// replies `EIO` and logs a warning, so every request always gets a reply.
pub struct Completion {
    cookie: u64,
    expect: Expect,
    route: Option<Route>,
}

impl std::fmt::Debug for Completion {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Completion")
            .field("cookie", &self.cookie)
            .field("expect", &self.expect)
            .field("completed", &self.route.is_none())
            .finish()
    }
}

impl Completion {
    pub(crate) fn new(
        cookie: u64,
        expect: Expect,
        replies: UnboundedSender<Outgoing>,
        permit: OwnedSemaphorePermit,
    ) -> Completion {
        Completion {
            cookie,
            expect,
            route: Some(Route { replies, permit, budget: None }),
        }
    }

    /// Attach payload-budget pages, released when the reply has been written.
    pub(crate) fn with_budget(mut self, budget: Option<OwnedSemaphorePermit>) -> Completion {
        if let Some(route) = self.route.as_mut() {
            route.budget = budget;
        }
        self
    }

    /// The client's cookie for this request (for logs).
    pub fn cookie(&self) -> u64 {
        self.cookie
    }

    /// Success without data: for every command except a read (on a read this is a bug of
    /// the export; it is logged and the client gets `EIO`).
    pub fn ok(mut self) {
        match self.expect {
            Expect::Status => self.send(None, Bytes::new()),
            Expect::Data(length) => {
                tracing::error!(cookie = self.cookie, length, "read completed without data");
                self.send(Some(Errno::Io), Bytes::new());
            }
        }
    }

    /// Success of a read, with exactly the requested number of bytes. Data of another size,
    /// or data for a command that is not a read, is a bug of the export: it is logged and the
    /// client gets `EIO` (sending it would desynchronise the client's stream).
    pub fn read_data(mut self, data: Bytes) {
        match self.expect {
            Expect::Data(length) if u32::try_from(data.len()) == Ok(length) => {
                self.send(None, data);
            }
            expect => {
                tracing::error!(
                    cookie = self.cookie,
                    ?expect,
                    got = data.len(),
                    "read data of the wrong size"
                );
                self.send(Some(Errno::Io), Bytes::new());
            }
        }
    }

    /// Failure with `errno`.
    pub fn error(mut self, errno: Errno) {
        self.send(Some(errno), Bytes::new());
    }

    fn send(&mut self, error: Option<Errno>, data: Bytes) {
        let Some(route) = self.route.take() else {
            return;
        };
        let header = SimpleReplyHeader {
            cookie: self.cookie,
            error,
        }
        .encode();
        // A send fails only when the writer task has ended (connection gone); the reply has
        // nowhere to go then, and dropping it releases the permit.
        let _ = route.replies.send(Outgoing {
            header,
            data,
            _permit: route.permit,
            _budget: route.budget,
        });
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if self.route.is_some() {
            tracing::warn!(
                cookie = self.cookie,
                "completion dropped unanswered; replying EIO"
            );
            self.send(Some(Errno::Io), Bytes::new());
        }
    }
}
