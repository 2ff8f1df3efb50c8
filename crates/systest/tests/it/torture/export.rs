//! The transmission phase of one NBD connection, spoken by the torture harness itself:
//! pipelined writes, the FUA flag, and a server that may vanish (SIGKILL) or answer late
//! (a partition), all reported as values instead of panics, so a writer thread can record
//! what happened to each write and end cleanly.
//!
//! The handshake is `nbd_client::open`'s; this module takes the socket over after it.
//!
//! Invariant: every read has a timeout ([`Export::open`]), so a silent server ends a writer
//! with an error instead of hanging the trial.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::cluster::RESOURCE;
use crate::nbd_client::{self, REQUEST_MAGIC, SIMPLE_REPLY_MAGIC};

/// `NBD_CMD_WRITE`.
const COMMAND_WRITE: u16 = 1;
/// `NBD_CMD_DISC`.
const COMMAND_DISCONNECT: u16 = 2;
/// `NBD_CMD_FLAG_FUA`: reply only once the write is durable.
const FLAG_FUA: u16 = 1;

/// One simple reply: which request it answers and its errno (0: success).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub cookie: u64,
    pub errno: u32,
}

/// An open export after the handshake.
#[derive(Debug)]
pub struct Export {
    stream: UnixStream,
}

impl Export {
    /// Opens [`RESOURCE`] on `socket` (panics if the node refuses: that is a harness error,
    /// the export must be up); every later read waits at most `reply_timeout`.
    pub fn open(socket: &Path, reply_timeout: Duration) -> Export {
        let client = nbd_client::open(socket, RESOURCE).unwrap_or_else(|refusal| {
            panic!("{} refused the export: {refusal:?}", socket.display())
        });
        let stream = client.into_stream();
        stream
            .set_read_timeout(Some(reply_timeout))
            .expect("cannot set a read timeout");
        Export { stream }
    }

    /// Sends one write request and its data; `fua` sets `NBD_CMD_FLAG_FUA`.
    pub fn send_write(
        &mut self,
        cookie: u64,
        offset: u64,
        data: &[u8],
        fua: bool,
    ) -> io::Result<()> {
        let length = u32::try_from(data.len()).expect("a test write is small");
        let flags = if fua { FLAG_FUA } else { 0 };
        let mut request = header(flags, COMMAND_WRITE, cookie, offset, length);
        request.extend_from_slice(data);
        self.stream.write_all(&request)
    }

    /// Reads the next simple reply (replies may come in any order). A closed connection, a
    /// timeout or a reply that is not a simple reply is an error.
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        let mut bytes = [0u8; 16];
        self.stream.read_exact(&mut bytes)?;
        let magic = u32::from_be_bytes(bytes[0..4].try_into().expect("4 bytes"));
        if magic != SIMPLE_REPLY_MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("reply magic {magic:#x} is not a simple reply"),
            ));
        }
        let errno = u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes"));
        let cookie = u64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes"));
        Ok(Reply { cookie, errno })
    }

    /// Writes `data` at `offset` and waits for its reply (queue depth 1).
    pub fn write(&mut self, cookie: u64, offset: u64, data: &[u8], fua: bool) -> io::Result<u32> {
        self.send_write(cookie, offset, data, fua)?;
        let reply = self.read_reply()?;
        if reply.cookie != cookie {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "reply for cookie {} while {cookie} was the only one in flight",
                    reply.cookie
                ),
            ));
        }
        Ok(reply.errno)
    }

    /// Sends `NBD_CMD_DISC` (if the connection still stands) and closes the socket.
    pub fn disconnect(mut self) {
        let _ = self
            .stream
            .write_all(&header(0, COMMAND_DISCONNECT, 0, 0, 0));
    }
}

/// The 28 bytes of a request header.
fn header(flags: u16, command: u16, cookie: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(28 + 4096);
    bytes.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    bytes.extend_from_slice(&flags.to_be_bytes());
    bytes.extend_from_slice(&command.to_be_bytes());
    bytes.extend_from_slice(&cookie.to_be_bytes());
    bytes.extend_from_slice(&offset.to_be_bytes());
    bytes.extend_from_slice(&length.to_be_bytes());
    bytes
}
