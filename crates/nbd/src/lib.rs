//! tandem's NBD server: exposes replicated volumes to NBD clients (the kernel, qemu, libnbd).
//!
//! Two layers:
//! - [`protocol`] is sans-IO: it parses and encodes handshake messages, options, requests and
//!   replies as typed values, and decides what to do with each request ([`protocol::Verdict`]).
//! - The server (`serve_*`) drives it on tokio over any byte stream (unix socket or TCP) and
//!   talks to the rest of tandem only through [`ExportRegistry`] and [`Export`].
//!
//! Other frontends (the FUSE export) use the same exports without a connection: they submit
//! [`Request`]s with a [`Completion::callback`], which keeps a completion's guarantees.
//!
//! Per connection, after a fixed-newstyle handshake, one task reads requests and submits them to
//! the export, and one task writes replies in completion order (so replies are out of order and
//! requests are pipelined). Simple replies only: structured replies are declined.
//!
//! Invariants:
//! - Every request except `NBD_CMD_DISC` gets exactly one reply: a [`Completion`] replies once,
//!   and dropping it unanswered replies `EIO`.
//! - At most `in_flight_max_per_connection` requests are between "header read" and "reply
//!   written" per connection; beyond that the server stops reading (backpressure).
//! - The export sees only requests that passed [`protocol::Verdict::decide`]: inside the export,
//!   advertised, non-empty, within `request_bytes_max`.
//! - Bad input ends at most its own connection and never panics; the accept loops never stop
//!   because of one connection.
//! - An export is dropped (closed) only after every reply of its connection was handled.

#![warn(missing_docs, clippy::cast_possible_truncation, clippy::expect_used)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod completion;
mod errno;
mod error;
mod export;
pub mod protocol;
mod server;

pub use completion::{CallbackReply, Completion, Expect};
pub use errno::Errno;
pub use error::NbdError;
pub use export::{Command, Export, ExportInfo, ExportRegistry, OpenError, Request};
pub use server::{serve_connection, serve_tcp, serve_unix, ServerConfig};
