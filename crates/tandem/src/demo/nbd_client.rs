//! A minimal blocking NBD client for the demo: fixed-newstyle handshake with `NBD_OPT_GO`,
//! then pipelined writes and a flush. It exists so that `tandem demo` needs no other program.
//!
//! Invariant: at most `depth` requests are outstanding; every reply's cookie must match one
//! outstanding request and carry error 0, otherwise the workload fails.

use std::collections::HashSet;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc;

const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943; // "NBDMAGIC"
const OPTION_MAGIC: u64 = 0x4948_4156_454f_5054; // "IHAVEOPT"
const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const REQUEST_MAGIC: u32 = 0x2560_9513;
const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
const FLAG_FIXED_NEWSTYLE: u32 = 1;
const FLAG_NO_ZEROES: u32 = 2;
const OPT_GO: u32 = 7;
const REP_ACK: u32 = 1;
const REP_INFO: u32 = 3;
const INFO_EXPORT: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
/// Longest option reply we accept.
const OPTION_REPLY_BYTES_MAX: u32 = 64 * 1024;

fn protocol_error(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// An open export.
pub(crate) struct Client {
    stream: UnixStream,
    /// Size of the export in bytes.
    pub(crate) size: u64,
}

fn read_u16(reader: &mut impl Read) -> io::Result<u16> {
    let mut bytes = [0; 2];
    reader.read_exact(&mut bytes)?;
    Ok(u16::from_be_bytes(bytes))
}

fn read_u32(reader: &mut impl Read) -> io::Result<u32> {
    let mut bytes = [0; 4];
    reader.read_exact(&mut bytes)?;
    Ok(u32::from_be_bytes(bytes))
}

fn read_u64(reader: &mut impl Read) -> io::Result<u64> {
    let mut bytes = [0; 8];
    reader.read_exact(&mut bytes)?;
    Ok(u64::from_be_bytes(bytes))
}

impl Client {
    /// Connect to `socket` and open `export`.
    pub(crate) fn open(socket: &Path, export: &str) -> io::Result<Client> {
        let mut stream = UnixStream::connect(socket)?;
        if read_u64(&mut stream)? != NBD_MAGIC || read_u64(&mut stream)? != OPTION_MAGIC {
            return Err(protocol_error("not an NBD server".into()));
        }
        let _server_flags = read_u16(&mut stream)?;
        stream.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())?;
        let name = export.as_bytes();
        let name_len =
            u32::try_from(name.len()).map_err(|_| protocol_error("export name too long".into()))?;
        let mut option = Vec::new();
        option.extend_from_slice(&OPTION_MAGIC.to_be_bytes());
        option.extend_from_slice(&OPT_GO.to_be_bytes());
        option.extend_from_slice(&(name_len + 6).to_be_bytes());
        option.extend_from_slice(&name_len.to_be_bytes());
        option.extend_from_slice(name);
        option.extend_from_slice(&0u16.to_be_bytes());
        stream.write_all(&option)?;
        let size = Client::read_go_replies(&mut stream)?;
        Ok(Client { stream, size })
    }

    fn read_go_replies(stream: &mut UnixStream) -> io::Result<u64> {
        let mut size = None;
        loop {
            if read_u64(stream)? != REPLY_MAGIC {
                return Err(protocol_error("bad option reply magic".into()));
            }
            let _option = read_u32(stream)?;
            let kind = read_u32(stream)?;
            let length = read_u32(stream)?;
            if length > OPTION_REPLY_BYTES_MAX {
                return Err(protocol_error("option reply too long".into()));
            }
            let mut data = vec![0; length as usize];
            stream.read_exact(&mut data)?;
            match kind {
                REP_ACK => {
                    return size.ok_or_else(|| protocol_error("server sent no export size".into()))
                }
                REP_INFO if data.len() >= 10 && data[..2] == INFO_EXPORT.to_be_bytes() => {
                    let mut bytes = [0; 8];
                    bytes.copy_from_slice(&data[2..10]);
                    size = Some(u64::from_be_bytes(bytes));
                }
                REP_INFO => {}
                error if error & (1 << 31) != 0 => {
                    let text = String::from_utf8_lossy(&data);
                    return Err(protocol_error(format!(
                        "the server refused the export: {text}"
                    )));
                }
                other => return Err(protocol_error(format!("unexpected option reply {other}"))),
            }
        }
    }

    /// Write `count` blocks of `block` bytes from `fill(index, buffer)`, block `index` at
    /// `offset_of(index)`, keeping `depth` requests in flight; `progress(bytes)` after each
    /// reply. Then flush.
    pub(crate) fn write_all_blocks(
        &mut self,
        count: u64,
        block: usize,
        depth: usize,
        offset_of: impl Fn(u64) -> u64 + Send,
        fill: impl Fn(u64, &mut [u8]) + Send,
        progress: impl Fn(u64),
    ) -> io::Result<()> {
        let (slots, freed) = mpsc::sync_channel::<u64>(depth);
        let mut writer = BufWriter::new(self.stream.try_clone()?);
        let mut reader = BufReader::new(self.stream.try_clone()?);
        std::thread::scope(|scope| -> io::Result<()> {
            let sender = scope.spawn(move || -> io::Result<()> {
                let mut buffer = vec![0u8; block];
                for index in 0..count {
                    fill(index, &mut buffer);
                    // Blocks while `depth` requests are outstanding.
                    slots
                        .send(index)
                        .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
                    send_request(&mut writer, CMD_WRITE, index, offset_of(index), &buffer)?;
                    writer.flush()?;
                }
                Ok(())
            });
            let mut outstanding = HashSet::new();
            for _ in 0..count {
                let cookie = read_reply(&mut reader)?;
                // The sender queues an index before sending its request, so the index of any
                // reply is already in the channel.
                while let Ok(index) = freed.try_recv() {
                    outstanding.insert(index);
                }
                if !outstanding.remove(&cookie) {
                    return Err(protocol_error(format!(
                        "reply for unknown request {cookie}"
                    )));
                }
                progress(block as u64);
            }
            sender
                .join()
                .map_err(|_| protocol_error("writer thread failed".into()))?
        })?;
        self.flush()
    }

    fn flush(&mut self) -> io::Result<()> {
        send_request(&mut self.stream, CMD_FLUSH, u64::MAX, 0, &[])?;
        let cookie = read_reply(&mut self.stream)?;
        if cookie != u64::MAX {
            return Err(protocol_error("unexpected reply to flush".into()));
        }
        Ok(())
    }

    /// Say goodbye.
    pub(crate) fn disconnect(mut self) -> io::Result<()> {
        send_request(&mut self.stream, CMD_DISC, 0, 0, &[])
    }
}

fn send_request(
    writer: &mut impl Write,
    kind: u16,
    cookie: u64,
    offset: u64,
    data: &[u8],
) -> io::Result<()> {
    let length =
        u32::try_from(data.len()).map_err(|_| protocol_error("request too long".into()))?;
    let mut header = [0u8; 28];
    header[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    header[6..8].copy_from_slice(&kind.to_be_bytes());
    header[8..16].copy_from_slice(&cookie.to_be_bytes());
    header[16..24].copy_from_slice(&offset.to_be_bytes());
    header[24..28].copy_from_slice(&length.to_be_bytes());
    writer.write_all(&header)?;
    writer.write_all(data)
}

/// Read one simple reply; an error reply is an error.
fn read_reply(reader: &mut impl Read) -> io::Result<u64> {
    if read_u32(reader)? != SIMPLE_REPLY_MAGIC {
        return Err(protocol_error("bad reply magic".into()));
    }
    let error = read_u32(reader)?;
    let cookie = read_u64(reader)?;
    if error != 0 {
        return Err(protocol_error(format!(
            "request {cookie} failed with errno {error}"
        )));
    }
    Ok(cookie)
}
