//! The boundary between the NBD server and the rest of tandem: a registry of exports, and an
//! export that executes requests and completes them asynchronously.
//!
//! **Boundary:** the server knows nothing about replication; the daemon implements these traits.
//! Requests arrive already checked (in bounds, advertised, non-empty), so an export only has to
//! execute them and complete each [`Completion`](crate::Completion) exactly once.

use std::sync::Arc;

use crate::Completion;

/// The set of exports a server offers.
pub trait ExportRegistry: Send + Sync + 'static {
    /// Names offered by `NBD_OPT_LIST`.
    fn list(&self) -> Vec<String>;
    /// Open an export by name for this connection (`NBD_OPT_GO` / `NBD_OPT_EXPORT_NAME`).
    /// Dropping the returned Arc closes it; the server drops it only after every reply of the
    /// connection was handled. `NBD_OPT_INFO` opens and drops an export too.
    fn open(&self, name: &str) -> Result<Arc<dyn Export>, OpenError>;
    /// Open an export only to describe it (`NBD_OPT_INFO`): it is dropped at once and serves
    /// no I/O, so a registry may skip what opening for use would do (e.g. a promotion).
    fn open_for_info(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        self.open(name)
    }
    /// The size export `name` has now, if the registry can tell without opening it (an
    /// export that grows online, `resize`); None (the default): as when it was listed.
    fn size_now(&self, _name: &str) -> Option<u64> {
        None
    }
}

/// Why an export could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// No such export (`NBD_REP_ERR_UNKNOWN`).
    Unknown,
    /// Refused by policy (e.g. this node is Secondary); the message goes to the client
    /// (`NBD_REP_ERR_POLICY` with the message as the error string).
    Policy(String),
}

/// What an export is and can do; read once when a connection opens it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportInfo {
    /// Size in bytes.
    pub size: u64,
    /// Writes, trims and write-zeroes are refused with `EPERM`.
    pub read_only: bool,
    /// Supports [`Command::Flush`].
    pub can_flush: bool,
    /// Honours [`Request::fua`].
    pub can_fua: bool,
    /// Supports [`Command::Trim`].
    pub can_trim: bool,
    /// Supports [`Command::WriteZeroes`].
    pub can_write_zeroes: bool,
    /// Flush and FUA are visible across all connections (`NBD_FLAG_CAN_MULTI_CONN`).
    pub can_multi_conn: bool,
}

/// An open export.
pub trait Export: Send + Sync + 'static {
    /// Size and capabilities (called once per connection, at open).
    fn info(&self) -> ExportInfo;
    /// The size now: larger than `info().size` once the export grew online (`resize`). NBD
    /// connections keep the size they opened with (the protocol subset served has no resize
    /// notice); a front end that can show a new size (the FUSE file) asks this.
    fn size_now(&self) -> u64 {
        self.info().size
    }
    /// Start a request; `completion` must be completed exactly once, from any thread, possibly
    /// after this returns. This is called on the connection's reader task: it should not block.
    fn submit(&self, request: Request, completion: Completion);
    /// Writes at least this long are submitted as [`Command::WriteStreaming`] as soon as their
    /// header is parsed, and their payload is filled while the export already works on it
    /// (cut-through). None (the default): every write arrives complete as [`Command::Write`].
    fn streaming_write_bytes_min(&self) -> Option<usize> {
        None
    }
}

/// One checked request.
#[derive(Debug, Clone)]
pub struct Request {
    /// What to do.
    pub command: Command,
    /// Reply only once the command's writes are durable (`NBD_CMD_FLAG_FUA`); only set when the
    /// export advertised `can_fua` (clients may set it on any command, reads included).
    pub fua: bool,
}

/// A command, with its range already checked against the export size (`offset + length ≤
/// size`) and its length non-zero.
#[derive(Debug, Clone)]
pub enum Command {
    /// Read `length` bytes; complete with [`Completion::read_data`] and exactly `length` bytes.
    Read {
        /// Byte offset.
        offset: u64,
        /// Byte count (≤ `request_bytes_max`).
        length: u32,
    },
    /// Write `data` at `offset` (the data lives in a pooled buffer; clone it freely).
    Write {
        /// Byte offset.
        offset: u64,
        /// The payload (≤ `request_bytes_max` bytes).
        data: bytes::Bytes,
    },
    /// Write `data` at `offset` while it is still arriving from the client; only for exports
    /// that ask for it ([`Export::streaming_write_bytes_min`]). If the client goes away before
    /// the payload is complete, `data` ends [`bufpool::Arrival::Aborted`]; the request must
    /// still be completed (the reply is then dropped).
    WriteStreaming {
        /// Byte offset.
        offset: u64,
        /// The payload, filled front to back by the connection's reader.
        data: bufpool::Incoming,
    },
    /// Make every write completed so far durable.
    Flush,
    /// Discard a range (a hint; contents afterwards are unspecified).
    Trim {
        /// Byte offset.
        offset: u64,
        /// Byte count.
        length: u32,
    },
    /// Zero a range.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Byte count.
        length: u32,
        /// The range must stay allocated (no hole punching).
        no_hole: bool,
    },
}
