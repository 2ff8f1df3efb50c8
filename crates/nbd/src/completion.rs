//! [`Completion`]: the export's handle for answering one request, from any thread.
//!
//! A completion either routes its reply to an NBD connection's writer task (made by the
//! server), or hands it to a callback ([`Completion::callback`], for callers that are not NBD
//! clients, such as the FUSE export). The guarantees below hold for both.
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
use crate::{Command, Errno};

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
pub enum Expect {
    /// A status only (every command but a read).
    Status,
    /// Exactly this many bytes of read data.
    Data(u32),
}

impl Expect {
    /// What a successful reply to `command` carries.
    pub fn of(command: &Command) -> Expect {
        match command {
            Command::Read { length, .. } => Expect::Data(*length),
            _ => Expect::Status,
        }
    }
}

/// The reply of a callback completion: the read data (empty for every other command), or
/// the error.
pub type CallbackReply = Result<Bytes, Errno>;

/// Where the reply goes; taken when the reply is sent.
enum Route {
    /// To an NBD connection's writer task.
    Connection {
        replies: UnboundedSender<Outgoing>,
        permit: OwnedSemaphorePermit,
        budget: Option<OwnedSemaphorePermit>,
    },
    /// To a caller's function.
    Callback(Box<dyn FnOnce(CallbackReply) + Send>),
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
            route: Some(Route::Connection {
                replies,
                permit,
                budget: None,
            }),
        }
    }

    /// A completion that hands its one reply to `reply`, on whatever thread completes it:
    /// `Ok(data)` with exactly `Data(n)`'s `n` bytes for a read (empty for `Status`), or
    /// `Err(errno)`. The same rules as for NBD replies apply: a read answered with data of
    /// the wrong size, or with `ok`, becomes `Err(Errno::Io)`, and so does dropping the
    /// completion unanswered. `reply` runs exactly once. Its cookie (for logs) is 0.
    pub fn callback(
        expect: Expect,
        reply: impl FnOnce(CallbackReply) + Send + 'static,
    ) -> Completion {
        Completion {
            cookie: 0,
            expect,
            route: Some(Route::Callback(Box::new(reply))),
        }
    }

    /// Attach payload-budget pages, released when the reply has been written.
    pub(crate) fn with_budget(mut self, budget: Option<OwnedSemaphorePermit>) -> Completion {
        if let Some(Route::Connection { budget: slot, .. }) = self.route.as_mut() {
            *slot = budget;
        }
        self
    }

    /// The client's cookie for this request (for logs; 0 for a callback completion).
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
        match route {
            Route::Connection {
                replies,
                permit,
                budget,
            } => {
                let header = SimpleReplyHeader {
                    cookie: self.cookie,
                    error,
                }
                .encode();
                // A send fails only when the writer task has ended (connection gone); the
                // reply has nowhere to go then, and dropping it releases the permit.
                let _ = replies.send(Outgoing {
                    header,
                    data,
                    _permit: permit,
                    _budget: budget,
                });
            }
            Route::Callback(reply) => reply(error.map_or(Ok(data), Err)),
        }
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use bytes::Bytes;

    use super::{CallbackReply, Completion, Expect};
    use crate::{Command, Errno};

    /// A callback completion and the receiver of its replies (to count them).
    fn completion(expect: Expect) -> (Completion, mpsc::Receiver<CallbackReply>) {
        let (sender, receiver) = mpsc::channel();
        let completion = Completion::callback(expect, move |reply| {
            sender.send(reply).unwrap();
        });
        (completion, receiver)
    }

    /// Every way of answering, with the one reply the callback must get.
    #[test]
    fn a_callback_gets_exactly_one_reply_with_the_nbd_rules() {
        type Answer = fn(Completion);
        let cases: [(&str, Expect, Answer, CallbackReply); 8] = [
            ("status ok", Expect::Status, |c| c.ok(), Ok(Bytes::new())),
            (
                "status error",
                Expect::Status,
                |c| c.error(Errno::NoSpc),
                Err(Errno::NoSpc),
            ),
            ("status dropped", Expect::Status, drop, Err(Errno::Io)),
            (
                "data on a status",
                Expect::Status,
                |c| c.read_data(Bytes::from_static(b"x")),
                Err(Errno::Io),
            ),
            (
                "read exact",
                Expect::Data(4),
                |c| c.read_data(Bytes::from_static(b"abcd")),
                Ok(Bytes::from_static(b"abcd")),
            ),
            (
                "read short",
                Expect::Data(4),
                |c| c.read_data(Bytes::from_static(b"abc")),
                Err(Errno::Io),
            ),
            (
                "read without data",
                Expect::Data(4),
                |c| c.ok(),
                Err(Errno::Io),
            ),
            ("read dropped", Expect::Data(4), drop, Err(Errno::Io)),
        ];
        for (name, expect, answer, wanted) in cases {
            let (completion, replies) = completion(expect);
            answer(completion);
            assert_eq!(replies.try_recv(), Ok(wanted), "{name}");
            assert!(replies.try_recv().is_err(), "{name}: a second reply");
        }
    }

    #[test]
    fn a_callback_runs_on_the_thread_that_completes() {
        let (completion, replies) = completion(Expect::Data(3));
        std::thread::spawn(move || completion.read_data(Bytes::from_static(b"xyz")))
            .join()
            .unwrap();
        assert_eq!(replies.recv(), Ok(Ok(Bytes::from_static(b"xyz"))));
    }

    #[test]
    fn expect_follows_the_command() {
        let read = Command::Read {
            offset: 0,
            length: 9,
        };
        assert_eq!(Expect::of(&read), Expect::Data(9));
        for command in [
            Command::Write {
                offset: 0,
                data: Bytes::from_static(b"w"),
            },
            Command::Flush,
            Command::Trim {
                offset: 0,
                length: 1,
            },
            Command::WriteZeroes {
                offset: 0,
                length: 1,
                no_hole: false,
            },
        ] {
            assert_eq!(Expect::of(&command), Expect::Status, "{command:?}");
        }
    }
}
