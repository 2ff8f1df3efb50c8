//! linkemu: a userspace link emulator for tandem's tests and benchmarks (issue 5 item 6).
//!
//! This machine has no netem, so tandem peers that must see a slow or broken network talk
//! through a TCP relay instead: it listens on one address, forwards every accepted connection
//! to a target address, and shapes both directions with a [`Link`]: one-way delay, jitter that
//! never reorders, a bandwidth limit shared by the relay's connections, a bounded queue that
//! turns into TCP backpressure, and partitions that hold data or reset connections.
//!
//! Delay is a timestamp, not a wait: each chunk read at `t` is released at `t + delay (±
//! jitter)`, so a 20 ms link with a large queue still carries full bandwidth (a long fat pipe,
//! not stop-and-wait). The binary `tandem-linkemu` wraps [`Relay`] with a command line and a
//! JSON-lines control socket ([`control`]).
//!
//! Invariants:
//! - Bytes leave each direction of each connection in the order they came in, intact.
//! - Memory is bounded: each connection holds at most its queue bound per direction, and the
//!   kernel buffers what the relay has not read yet in a fixed receive buffer
//!   ([`RECEIVE_BUFFER_BYTES`]), so a shaped link cannot hide a burst in an autotuned one.
//! - The timing rules ([`pace`]) are pure and seeded; only the relay shell reads the clock.

pub mod control;
pub mod link;
pub mod pace;
pub mod parse;
mod pipe;
mod relay;
mod timer;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use link::{
    Direction, Link, OnPartition, Partition, Shape, DELAY_LIMIT, QUEUE_DEFAULT_BYTES,
    QUEUE_LIMIT_BYTES,
};
pub use pipe::{CHUNK_BYTES_MAX, RECEIVE_BUFFER_BYTES};
pub use relay::{Relay, RelayHandle, Stats};

/// Everything that can go wrong in linkemu.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// A delay or jitter is above [`DELAY_LIMIT`].
    #[error("{direction:?} {what} {value:?} is longer than the limit of \
        {limit:?}", limit = DELAY_LIMIT)]
    DelayTooLong {
        /// The direction whose shape is wrong.
        direction: Direction,
        /// "delay" or "jitter".
        what: &'static str,
        /// The value given.
        value: Duration,
    },
    /// A bandwidth limit of zero bytes per second (use no limit, or a partition).
    #[error("{direction:?} rate is 0 bytes/s; use a partition to stop traffic")]
    RateZero {
        /// The direction whose shape is wrong.
        direction: Direction,
    },
    /// A queue bound of zero or above [`QUEUE_LIMIT_BYTES`].
    #[error("{direction:?} queue bound of {bytes} bytes is outside \
        1..={limit}", limit = QUEUE_LIMIT_BYTES)]
    QueueBound {
        /// The direction whose shape is wrong.
        direction: Direction,
        /// The value given.
        bytes: u64,
    },
    /// A duration, size or rate that does not parse.
    #[error("bad {kind} {input:?}: expected {expected}")]
    Parse {
        /// "duration", "size" or "rate".
        kind: &'static str,
        /// The text given.
        input: String,
        /// What would have been accepted.
        expected: &'static str,
    },
    /// The relay cannot listen on its address.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The timer thread cannot be started.
    #[error("cannot start the timer thread: {0}")]
    Thread(std::io::Error),
    /// The control socket cannot be created.
    #[error("cannot listen on the control socket {path}: {source}")]
    Control {
        /// The socket's path.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A control request that is not valid JSON of the expected shape, or has a bad value.
    #[error("bad control request: {0}")]
    Request(String),
    /// A control request names a pair the process does not have.
    #[error("no pair {pair}: this process relays {pairs} pair(s), numbered from 0")]
    NoSuchPair {
        /// The index asked for.
        pair: usize,
        /// How many pairs there are.
        pairs: usize,
    },
}
