//! Why a `tandem` command failed. Every variant exits with status 1; clap handles usage
//! errors (status 2) before any of these can happen.

use std::io;
use std::path::PathBuf;

/// A failed `tandem` command; its Display is the whole message printed after `tandem: `.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No node listens on the admin socket: the socket file is missing, or nobody accepts
    /// connections on it (a node that stopped without removing it).
    #[error(
        "no node running at {} (admin socket {} {reason}); start one with 'tandem node'",
        run_dir.display(),
        socket.display()
    )]
    NoNode {
        /// The run directory that was searched.
        run_dir: PathBuf,
        /// The admin socket path inside it.
        socket: PathBuf,
        /// `not found` or `refuses connections`.
        reason: &'static str,
    },
    /// Connecting to, writing to or reading from the admin socket failed otherwise.
    #[error("{context} {}: {source}", socket.display())]
    Socket {
        /// What was being done, e.g. `cannot connect to`.
        context: &'static str,
        /// The admin socket path.
        socket: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The node sent a line that is not a valid reply.
    #[error("bad reply from the node: {0}")]
    Protocol(#[from] admin::AdminError),
    /// The node closed the connection before answering.
    #[error("the node closed the connection without answering")]
    NoReply,
    /// The node answered with a reply of the wrong kind for the request.
    #[error("the node answered a {request} request with an unexpected {reply} reply")]
    UnexpectedReply {
        /// The request's kind, e.g. `status`.
        request: &'static str,
        /// The reply's kind, e.g. `event`.
        reply: &'static str,
    },
    /// The node refused or failed the request; the text is the node's.
    #[error("{0}")]
    Refused(String),
    /// Reading standard input failed (`events --poll`).
    #[error("cannot read standard input: {0}")]
    Stdin(io::Error),
    /// `events --poll` read something other than `n` on standard input.
    #[error("events --poll: expected 'n' (print the state again) on standard input, got '{0}'")]
    PollInput(String),
    /// The man pages or completions could not be written.
    #[error("generate-docs: {}: {source}", path.display())]
    Docs {
        /// The file or directory being written.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Writing to standard output failed (other than the reader going away).
    #[error("cannot write to standard output: {0}")]
    Stdout(io::Error),
    /// The node daemon stopped with an error.
    #[error("{0}")]
    Node(#[from] daemon::DaemonError),
    /// `tandem dump` could not load or print the configuration.
    #[error("{0}")]
    Dump(String),
    /// `tandem tls-keygen` could not make or write the certificate.
    #[error("tls-keygen: {0}")]
    TlsKeygen(String),
    /// `tandem demo` failed.
    #[error("{0}")]
    Demo(#[from] crate::demo::DemoError),
}
