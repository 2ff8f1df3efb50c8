//! A minimal NBD client over a unix socket (fixed newstyle handshake, `NBD_OPT_GO`, simple
//! replies), for what the packaged clients cannot do: hold an export open while the test
//! runs admin commands, read the exact option-reply type of a refusal, and speak to the
//! server byte by byte in the garbage tests.
//!
//! Invariant: every socket read has a timeout, so a silent server fails the test instead of
//! hanging it.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// "NBDMAGIC", the first 8 bytes a server sends.
pub const NBD_MAGIC: u64 = 0x4E42_444D_4147_4943;
/// "IHAVEOPT", the second 8 bytes of the greeting and the prefix of every option.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Magic of an option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_E889_0455_65A9;
/// Magic of a transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of a simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Client flags: fixed newstyle and no zeroes.
pub const CLIENT_FLAGS: u32 = 1 | 2;
/// `NBD_OPT_GO`.
pub const OPT_GO: u32 = 7;
/// `NBD_REP_ACK`.
pub const REP_ACK: u32 = 1;
/// `NBD_REP_INFO`.
pub const REP_INFO: u32 = 3;
/// `NBD_REP_ERR_POLICY`.
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
/// How long any read from the server may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The server refused `NBD_OPT_GO`.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The option reply type, e.g. [`REP_ERR_POLICY`].
    pub reply_type: u32,
    /// The server's message (the reply data as text).
    pub message: String,
}

/// An open export; dropping it closes the connection.
#[derive(Debug)]
pub struct NbdClient {
    stream: UnixStream,
    /// Export size from `NBD_INFO_EXPORT`.
    pub size: u64,
    next_cookie: u64,
}

/// Connects and reads the greeting; returns the stream and the server's handshake flags.
pub fn greet(socket: &Path) -> (UnixStream, u16) {
    let mut stream = UnixStream::connect(socket)
        .unwrap_or_else(|error| panic!("cannot connect to {}: {error}", socket.display()));
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("cannot set a read timeout");
    let magic = read_u64(&mut stream);
    assert_eq!(magic, NBD_MAGIC, "greeting does not start with NBDMAGIC");
    let ihaveopt = read_u64(&mut stream);
    assert_eq!(ihaveopt, IHAVEOPT, "greeting is not newstyle");
    let flags = read_u16(&mut stream);
    (stream, flags)
}

/// Opens `export` with `NBD_OPT_GO`.
pub fn open(socket: &Path, export: &str) -> Result<NbdClient, Refusal> {
    let (mut stream, _flags) = greet(socket);
    let mut hello = CLIENT_FLAGS.to_be_bytes().to_vec();
    let name_length = u32::try_from(export.len()).expect("export name too long");
    let mut data = name_length.to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&0u16.to_be_bytes());
    hello.extend_from_slice(&option_bytes(OPT_GO, &data));
    stream.write_all(&hello).expect("cannot send NBD_OPT_GO");
    let mut size = None;
    loop {
        let (reply_type, data) = read_option_reply(&mut stream, OPT_GO);
        match reply_type {
            REP_ACK => break,
            REP_INFO => {
                // NBD_INFO_EXPORT: u16 type 0, u64 size, u16 flags.
                if data.len() == 12 && data[..2] == [0, 0] {
                    size = Some(u64::from_be_bytes(data[2..10].try_into().expect("8 bytes")));
                }
            }
            error if error & (1 << 31) != 0 => {
                return Err(Refusal {
                    reply_type,
                    message: String::from_utf8_lossy(&data).into_owned(),
                })
            }
            other => panic!("unexpected option reply type {other:#x} to NBD_OPT_GO"),
        }
    }
    let size = size.expect("NBD_OPT_GO was acknowledged without NBD_INFO_EXPORT");
    Ok(NbdClient {
        stream,
        size,
        next_cookie: 1,
    })
}

/// The bytes of one option: IHAVEOPT, option, length, data.
pub fn option_bytes(option: u32, data: &[u8]) -> Vec<u8> {
    let mut bytes = IHAVEOPT.to_be_bytes().to_vec();
    bytes.extend_from_slice(&option.to_be_bytes());
    let length = u32::try_from(data.len()).expect("option data too long");
    bytes.extend_from_slice(&length.to_be_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn read_option_reply(stream: &mut UnixStream, option: u32) -> (u32, Vec<u8>) {
    let magic = read_u64(stream);
    assert_eq!(
        magic, OPTION_REPLY_MAGIC,
        "bad option reply magic {magic:#x}"
    );
    let replied_option = read_u32(stream);
    assert_eq!(replied_option, option, "reply names the wrong option");
    let reply_type = read_u32(stream);
    let length = read_u32(stream);
    assert!(
        length <= 64 * 1024,
        "option reply of {length} bytes is unreasonable"
    );
    let mut data = vec![0; usize::try_from(length).expect("u32 fits usize")];
    stream
        .read_exact(&mut data)
        .expect("cannot read option reply data");
    (reply_type, data)
}

impl NbdClient {
    /// Writes `data` at `offset` and waits for the (simple) reply; returns the NBD errno.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> u32 {
        let length = u32::try_from(data.len()).expect("write too long");
        let cookie = self.send_request(1, offset, length);
        self.stream.write_all(data).expect("cannot send write data");
        self.read_simple_reply(cookie)
    }

    /// How long to wait for each reply from now on (10 s unless changed), for writes that
    /// are meant to wait, e.g. for quorum to return.
    pub fn set_reply_timeout(&mut self, timeout: Duration) {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("cannot set a read timeout");
    }

    /// Sends `NBD_CMD_FLUSH` and waits for the reply; returns the NBD errno. Under protocol
    /// C a flush completes only once every connected peer acknowledged the writes before it.
    pub fn flush(&mut self) -> u32 {
        let cookie = self.send_request(3, 0, 0);
        self.read_simple_reply(cookie)
    }

    /// Reads `length` bytes at `offset`; panics on an error reply.
    pub fn read(&mut self, offset: u64, length: u32) -> Vec<u8> {
        let cookie = self.send_request(0, offset, length);
        let errno = self.read_simple_reply(cookie);
        assert_eq!(errno, 0, "NBD read at {offset} failed with errno {errno}");
        let mut data = vec![0; usize::try_from(length).expect("u32 fits usize")];
        self.stream
            .read_exact(&mut data)
            .expect("cannot read NBD read data");
        data
    }

    /// Sends a write request of `length` bytes but only the first `data.len()` bytes of its
    /// payload (for the tests of a client that goes away mid-write).
    pub fn start_write(&mut self, offset: u64, length: u32, data: &[u8]) {
        self.send_request(1, offset, length);
        self.stream.write_all(data).expect("cannot send write data");
    }

    /// Sends raw bytes in the transmission phase (for the garbage tests).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The socket after the handshake, for a test that speaks the transmission phase itself
    /// (pipelined requests, FUA, a server that may vanish: the torture harness). The next
    /// request cookie is the caller's to choose; the read timeout stays as set.
    pub fn into_stream(self) -> UnixStream {
        self.stream
    }

    /// Sends `NBD_CMD_DISC` and closes the connection.
    pub fn disconnect(mut self) {
        let _ = self.send_request(2, 0, 0);
    }

    fn send_request(&mut self, command: u16, offset: u64, length: u32) -> u64 {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let mut header = REQUEST_MAGIC.to_be_bytes().to_vec();
        header.extend_from_slice(&0u16.to_be_bytes());
        header.extend_from_slice(&command.to_be_bytes());
        header.extend_from_slice(&cookie.to_be_bytes());
        header.extend_from_slice(&offset.to_be_bytes());
        header.extend_from_slice(&length.to_be_bytes());
        self.stream
            .write_all(&header)
            .expect("cannot send an NBD request");
        cookie
    }

    fn read_simple_reply(&mut self, cookie: u64) -> u32 {
        let magic = read_u32(&mut self.stream);
        assert_eq!(magic, SIMPLE_REPLY_MAGIC, "bad reply magic {magic:#x}");
        let errno = read_u32(&mut self.stream);
        let replied_cookie = read_u64(&mut self.stream);
        assert_eq!(replied_cookie, cookie, "reply for the wrong request");
        errno
    }
}

fn read_u16(stream: &mut UnixStream) -> u16 {
    let mut bytes = [0; 2];
    stream
        .read_exact(&mut bytes)
        .expect("cannot read from the NBD server");
    u16::from_be_bytes(bytes)
}

fn read_u32(stream: &mut UnixStream) -> u32 {
    let mut bytes = [0; 4];
    stream
        .read_exact(&mut bytes)
        .expect("cannot read from the NBD server");
    u32::from_be_bytes(bytes)
}

fn read_u64(stream: &mut UnixStream) -> u64 {
    let mut bytes = [0; 8];
    stream
        .read_exact(&mut bytes)
        .expect("cannot read from the NBD server");
    u64::from_be_bytes(bytes)
}
