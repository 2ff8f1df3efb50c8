//! The client side of the admin socket: connect, send one request line, read reply lines.
//!
//! Invariants:
//! - At most one request is sent per connection (the protocol's rule).
//! - No reply line longer than `admin::LINE_BYTES_MAX` is buffered: reads stop one byte past
//!   the bound and `admin::decode_line` refuses the line.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use admin::{Reply, Request, LINE_BYTES_MAX};

use crate::error::CliError;

/// File name of the admin socket inside the run directory.
pub const SOCKET_FILE_NAME: &str = "admin.sock";

/// A connection to a node's admin socket on which one request has been sent.
#[derive(Debug)]
pub struct Session {
    socket: PathBuf,
    reader: BufReader<UnixStream>,
}

impl Session {
    /// Connects to the node whose admin socket is in `run_dir` and sends `request`.
    pub fn open(run_dir: &Path, request: &Request) -> Result<Self, CliError> {
        let socket = run_dir.join(SOCKET_FILE_NAME);
        let mut stream = UnixStream::connect(&socket)
            .map_err(|source| connect_error(run_dir, &socket, source))?;
        stream
            .write_all(&admin::encode_line(request))
            .map_err(|source| CliError::Socket {
                context: "cannot send a request to",
                socket: socket.clone(),
                source,
            })?;
        Ok(Self {
            socket,
            reader: BufReader::new(stream),
        })
    }

    /// Like [`Session::open`], but `None` when no node runs at `run_dir` (the verbs that
    /// then work on the metadata directly).
    pub fn open_if_running(run_dir: &Path, request: &Request) -> Result<Option<Self>, CliError> {
        match Self::open(run_dir, request) {
            Ok(session) => Ok(Some(session)),
            Err(CliError::NoNode { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The next reply, or `None` when the node has closed the connection.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, CliError> {
        let mut line = Vec::new();
        let bound = u64::try_from(LINE_BYTES_MAX + 1).unwrap_or(u64::MAX);
        let read = (&mut self.reader)
            .take(bound)
            .read_until(b'\n', &mut line)
            .map_err(|source| CliError::Socket {
                context: "cannot read a reply from",
                socket: self.socket.clone(),
                source,
            })?;
        if read == 0 {
            return Ok(None);
        }
        Ok(Some(admin::decode_line(&line)?))
    }

    /// The single reply to a one-shot request.
    pub fn reply(mut self) -> Result<Reply, CliError> {
        self.next_reply()?.ok_or(CliError::NoReply)
    }
}

/// A missing socket, or one nobody accepts on, means no node runs there; anything else
/// (permissions, say) is reported as it is.
fn connect_error(run_dir: &Path, socket: &Path, source: io::Error) -> CliError {
    let reason = match source.kind() {
        io::ErrorKind::NotFound => Some("not found"),
        io::ErrorKind::ConnectionRefused => Some("refuses connections"),
        _ => None,
    };
    match reason {
        Some(reason) => CliError::NoNode {
            run_dir: run_dir.to_path_buf(),
            socket: socket.to_path_buf(),
            reason,
        },
        None => CliError::Socket {
            context: "cannot connect to",
            socket: socket.to_path_buf(),
            source,
        },
    }
}

/// The kind of a reply, for error messages.
pub fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Ok { .. } => "ok",
        Reply::Error { .. } => "error",
        Reply::Status(_) => "status",
        Reply::Generations { .. } => "generations",
        Reply::Event { .. } => "event",
    }
}
