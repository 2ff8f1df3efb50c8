//! The crate's one error type.
//!
//! Every variant ends at most one connection: the server logs it and closes that client's
//! socket, and never lets it reach the accept loop. Errors that the protocol lets us report to
//! the client (an option the server does not like, a request it refuses) are not errors at
//! all: they become option error replies or NBD errno values, see `errno.rs`.

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum NbdError {
    /// Reading from or writing to the client's socket failed (this includes the client closing
    /// the connection in the middle of a message).
    #[error("connection I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// A message is shorter than its fixed layout.
    #[error("message truncated: needed {needed} bytes, got {available}")]
    Truncated {
        /// Bytes the layout needs.
        needed: usize,
        /// Bytes that were there.
        available: usize,
    },
    /// A message did not start with the magic number its position in the stream requires.
    #[error("bad magic number {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// The magic number the protocol requires here.
        expected: u64,
        /// The value the peer sent.
        found: u64,
    },
    /// The client set handshake flags this server did not offer; the spec requires closing.
    #[error("client sent unknown handshake flags {0:#x}")]
    UnknownClientFlags(u32),
    /// An option's data is longer than the server accepts; the connection is closed.
    #[error("option {option} carries {length} bytes, more than the server accepts")]
    OptionTooLong {
        /// The option's code.
        option: u32,
        /// The length the client announced.
        length: u32,
    },
    /// The client sent more options than one handshake may contain.
    #[error("client sent more than {0} options")]
    TooManyOptions(usize),
    /// An option's data does not match its layout (answered with `NBD_REP_ERR_INVALID`).
    #[error("malformed option {option}: {reason}")]
    MalformedOption {
        /// The option's code.
        option: u32,
        /// What was wrong.
        reason: &'static str,
    },
    /// A string field (export name, message) is not valid UTF-8.
    #[error("string is not UTF-8")]
    NotUtf8,
    /// A reply carried an error value the protocol does not define.
    #[error("unknown NBD error value {0}")]
    UnknownErrno(u32),
    /// An option reply carried a reply type this parser does not know.
    #[error("unknown option reply type {0:#x}")]
    UnknownReplyType(u32),
    /// An `NBD_REP_INFO` reply carried an information type this parser does not know, or a
    /// length that does not fit its type.
    #[error("unknown or malformed information reply type {0}")]
    BadInfoReply(u16),
    /// `NBD_OPT_EXPORT_NAME` named an export that could not be opened; the protocol cannot
    /// report an error there, so the session ends.
    #[error("export {name:?} refused: {reason}")]
    ExportRefused {
        /// The name the client asked for.
        name: String,
        /// Why it was refused.
        reason: String,
    },
    /// The server configuration is unusable.
    #[error("invalid server configuration: {0}")]
    InvalidConfig(&'static str),
    /// The connection's reply writer task ended abnormally.
    #[error("reply writer task failed: {0}")]
    WriterTask(#[from] tokio::task::JoinError),
}
