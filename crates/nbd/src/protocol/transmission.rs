//! Transmission-phase messages: request headers, simple reply headers, and the decision of what
//! to do with a request ([`Verdict::decide`]).
//!
//! Invariants:
//! - [`Verdict::decide`] is a pure function of the header and the export's limits. A
//!   [`Verdict::Submit`] command lies inside the export (`offset + length ≤ size`, no overflow),
//!   has non-zero length (flush aside), is one the export advertised, carries only flags the
//!   export advertised, and a read or write is no longer than `request_bytes_max`.
//! - A rejected write still has its payload on the wire: [`Verdict::Reject::discard_bytes`]
//!   says how much to skip so the stream stays in sync.
//! - Only `NBD_CMD_WRITE` carries a payload; an unknown command is assumed to carry none.

use super::{command_flag, TransmissionFlags, WireReader, REQUEST_MAGIC, SIMPLE_REPLY_MAGIC};
use crate::{Errno, NbdError};

/// Length of a request header.
pub const REQUEST_HEADER_LEN: usize = 28;
/// Length of a simple reply header.
pub const SIMPLE_REPLY_HEADER_LEN: usize = 16;

const _: () = assert!(REQUEST_HEADER_LEN == 4 + 2 + 2 + 8 + 8 + 4);
const _: () = assert!(SIMPLE_REPLY_HEADER_LEN == 4 + 4 + 8);

/// A request header as sent (magic checked, fields not yet interpreted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// Command type (`NBD_CMD_*`).
    pub kind: u16,
    /// Opaque cookie echoed in the reply.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset: u64,
    /// Length in bytes (of the payload, for a write).
    pub length: u32,
}

impl RequestHeader {
    /// The wire form (the client's side; used by tests).
    pub fn encode(&self) -> [u8; REQUEST_HEADER_LEN] {
        let mut out = [0; REQUEST_HEADER_LEN];
        out[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        out[4..6].copy_from_slice(&self.flags.to_be_bytes());
        out[6..8].copy_from_slice(&self.kind.to_be_bytes());
        out[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        out[16..24].copy_from_slice(&self.offset.to_be_bytes());
        out[24..].copy_from_slice(&self.length.to_be_bytes());
        out
    }
}

/// Parses a request header, checking its magic (a wrong magic ends the connection).
pub fn parse_request_header(bytes: &[u8]) -> Result<RequestHeader, NbdError> {
    let mut reader = WireReader::new(bytes);
    let magic = reader.u32()?;
    if magic != REQUEST_MAGIC {
        return Err(NbdError::BadMagic {
            expected: u64::from(REQUEST_MAGIC),
            found: u64::from(magic),
        });
    }
    Ok(RequestHeader {
        flags: reader.u16()?,
        kind: reader.u16()?,
        cookie: reader.u64()?,
        offset: reader.u64()?,
        length: reader.u32()?,
    })
}

/// The command types this server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    /// `NBD_CMD_READ` (0).
    Read,
    /// `NBD_CMD_WRITE` (1).
    Write,
    /// `NBD_CMD_DISC` (2).
    Disc,
    /// `NBD_CMD_FLUSH` (3).
    Flush,
    /// `NBD_CMD_TRIM` (4).
    Trim,
    /// `NBD_CMD_WRITE_ZEROES` (6).
    WriteZeroes,
}

impl CommandKind {
    /// The wire value.
    pub fn to_wire(self) -> u16 {
        match self {
            CommandKind::Read => 0,
            CommandKind::Write => 1,
            CommandKind::Disc => 2,
            CommandKind::Flush => 3,
            CommandKind::Trim => 4,
            CommandKind::WriteZeroes => 6,
        }
    }

    /// The command for a wire value; None for commands this server does not implement
    /// (`NBD_CMD_CACHE`, `NBD_CMD_BLOCK_STATUS`, anything unknown).
    pub fn from_wire(value: u16) -> Option<CommandKind> {
        match value {
            0 => Some(CommandKind::Read),
            1 => Some(CommandKind::Write),
            2 => Some(CommandKind::Disc),
            3 => Some(CommandKind::Flush),
            4 => Some(CommandKind::Trim),
            6 => Some(CommandKind::WriteZeroes),
            _ => None,
        }
    }
}

/// What a connection's requests are checked against: fixed when the export is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportLimits {
    /// Export size in bytes.
    pub size: u64,
    /// The transmission flags sent to the client.
    pub flags: TransmissionFlags,
    /// Longest read or write payload accepted.
    pub request_bytes_max: u32,
}

/// A request that passed every check, ready for the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Read `length` (> 0) bytes at `offset`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Byte count.
        length: u32,
    },
    /// Write the `length` (> 0) payload bytes that follow the header at `offset`.
    Write {
        /// Byte offset.
        offset: u64,
        /// Payload length.
        length: u32,
    },
    /// Flush.
    Flush,
    /// Discard `length` (> 0) bytes at `offset`.
    Trim {
        /// Byte offset.
        offset: u64,
        /// Byte count.
        length: u32,
    },
    /// Zero `length` (> 0) bytes at `offset`.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Byte count.
        length: u32,
        /// The client forbids creating a hole.
        no_hole: bool,
    },
}

/// Why the server answers a request with an error without submitting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// A command type this server does not implement.
    UnknownCommand(u16),
    /// Flags that are unknown, not valid for the command, or not advertised.
    InvalidFlags(u16),
    /// A command the export did not advertise (flush, trim or write-zeroes).
    NotAdvertised(CommandKind),
    /// A write, trim or write-zeroes on a read-only export.
    ReadOnly(CommandKind),
    /// A read or write longer than `request_bytes_max`.
    TooLong(u32),
    /// `offset + length` is past the end of the export (or overflows).
    OutOfBounds(CommandKind),
    /// The buffer pool could not supply a payload buffer.
    BufferUnavailable,
}

impl Rejection {
    /// The error value the client gets (proto.md, "Error values").
    pub fn errno(self) -> Errno {
        match self {
            Rejection::UnknownCommand(_)
            | Rejection::InvalidFlags(_)
            | Rejection::NotAdvertised(_)
            | Rejection::TooLong(_) => Errno::Inval,
            Rejection::ReadOnly(_) => Errno::Perm,
            // Writes past the end are ENOSPC; reads and trims past the end are EINVAL.
            Rejection::OutOfBounds(CommandKind::Write | CommandKind::WriteZeroes) => Errno::NoSpc,
            Rejection::OutOfBounds(_) => Errno::Inval,
            Rejection::BufferUnavailable => Errno::Io,
        }
    }
}

/// What the server does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Hand the command to the export (for a write, after reading its payload).
    Submit {
        /// The checked command.
        command: Admitted,
        /// `NBD_CMD_FLAG_FUA` was set (and advertised).
        fua: bool,
    },
    /// A valid zero-length read, write, trim or write-zeroes: reply success without
    /// submitting (the spec leaves the behaviour open; success is the useful answer).
    Empty,
    /// Reply with `rejection.errno()` without submitting, after skipping `discard_bytes` of
    /// payload.
    Reject {
        /// Why.
        rejection: Rejection,
        /// Payload bytes still on the wire for this request.
        discard_bytes: u32,
    },
    /// `NBD_CMD_DISC`: finish outstanding requests, then close.
    Disconnect,
}

impl Verdict {
    /// Decides what to do with `header` on an export with `limits`.
    pub fn decide(header: &RequestHeader, limits: &ExportLimits) -> Verdict {
        let Some(kind) = CommandKind::from_wire(header.kind) else {
            return Verdict::Reject {
                rejection: Rejection::UnknownCommand(header.kind),
                discard_bytes: 0,
            };
        };
        if kind == CommandKind::Disc {
            return Verdict::Disconnect;
        }
        let discard_bytes = if kind == CommandKind::Write {
            header.length
        } else {
            0
        };
        match check(kind, header, limits) {
            Err(rejection) => Verdict::Reject {
                rejection,
                discard_bytes,
            },
            Ok(()) if header.length == 0 && kind != CommandKind::Flush => Verdict::Empty,
            Ok(()) => Verdict::Submit {
                command: admitted(kind, header),
                fua: header.flags & command_flag::FUA != 0,
            },
        }
    }
}

fn check(
    kind: CommandKind,
    header: &RequestHeader,
    limits: &ExportLimits,
) -> Result<(), Rejection> {
    check_flags(kind, header.flags, limits.flags)?;
    check_writable(kind, limits.flags)?;
    check_advertised(kind, limits.flags)?;
    check_length(kind, header.length, limits.request_bytes_max)?;
    check_bounds(kind, header, limits.size)
}

fn check_flags(
    kind: CommandKind,
    flags: u16,
    advertised: TransmissionFlags,
) -> Result<(), Rejection> {
    // FUA is valid on every command once advertised (proto.md, "Command flags").
    let fua = if advertised.contains(TransmissionFlags::SEND_FUA) {
        command_flag::FUA
    } else {
        0
    };
    let no_hole = if kind == CommandKind::WriteZeroes {
        command_flag::NO_HOLE
    } else {
        0
    };
    if flags & !(fua | no_hole) != 0 {
        return Err(Rejection::InvalidFlags(flags));
    }
    Ok(())
}

fn check_advertised(kind: CommandKind, advertised: TransmissionFlags) -> Result<(), Rejection> {
    let needed = match kind {
        CommandKind::Flush => TransmissionFlags::SEND_FLUSH,
        CommandKind::Trim => TransmissionFlags::SEND_TRIM,
        CommandKind::WriteZeroes => TransmissionFlags::SEND_WRITE_ZEROES,
        CommandKind::Read | CommandKind::Write | CommandKind::Disc => return Ok(()),
    };
    if advertised.contains(needed) {
        Ok(())
    } else {
        Err(Rejection::NotAdvertised(kind))
    }
}

fn check_writable(kind: CommandKind, advertised: TransmissionFlags) -> Result<(), Rejection> {
    let writes = matches!(
        kind,
        CommandKind::Write | CommandKind::Trim | CommandKind::WriteZeroes
    );
    if writes && advertised.contains(TransmissionFlags::READ_ONLY) {
        return Err(Rejection::ReadOnly(kind));
    }
    Ok(())
}

fn check_length(kind: CommandKind, length: u32, request_bytes_max: u32) -> Result<(), Rejection> {
    // Trim and write-zeroes carry no payload, so their length is not capped (proto.md, "Size
    // constraints": the server SHOULD NOT disconnect and may pass them on).
    let has_payload = matches!(kind, CommandKind::Read | CommandKind::Write);
    if has_payload && length > request_bytes_max {
        return Err(Rejection::TooLong(length));
    }
    Ok(())
}

fn check_bounds(kind: CommandKind, header: &RequestHeader, size: u64) -> Result<(), Rejection> {
    // Flush's offset and length are reserved; clients send zero and the server ignores them.
    if kind == CommandKind::Flush {
        return Ok(());
    }
    match header.offset.checked_add(u64::from(header.length)) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Rejection::OutOfBounds(kind)),
    }
}

fn admitted(kind: CommandKind, header: &RequestHeader) -> Admitted {
    let (offset, length) = (header.offset, header.length);
    match kind {
        CommandKind::Read => Admitted::Read { offset, length },
        CommandKind::Write => Admitted::Write { offset, length },
        CommandKind::Trim => Admitted::Trim { offset, length },
        CommandKind::WriteZeroes => Admitted::WriteZeroes {
            offset,
            length,
            no_hole: header.flags & command_flag::NO_HOLE != 0,
        },
        // Disc never reaches here (decide returns early); flush is the remaining case.
        CommandKind::Flush | CommandKind::Disc => Admitted::Flush,
    }
}

/// A simple reply header; for a successful read, the data follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimpleReplyHeader {
    /// The request's cookie.
    pub cookie: u64,
    /// None on success.
    pub error: Option<Errno>,
}

impl SimpleReplyHeader {
    /// The wire form.
    pub fn encode(&self) -> [u8; SIMPLE_REPLY_HEADER_LEN] {
        let mut out = [0; SIMPLE_REPLY_HEADER_LEN];
        out[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        let error = self.error.map_or(0, Errno::to_wire);
        out[4..8].copy_from_slice(&error.to_be_bytes());
        out[8..].copy_from_slice(&self.cookie.to_be_bytes());
        out
    }
}

/// Parses a simple reply header (the client's side; used by tests).
pub fn parse_simple_reply_header(bytes: &[u8]) -> Result<SimpleReplyHeader, NbdError> {
    let mut reader = WireReader::new(bytes);
    let magic = reader.u32()?;
    if magic != SIMPLE_REPLY_MAGIC {
        return Err(NbdError::BadMagic {
            expected: u64::from(SIMPLE_REPLY_MAGIC),
            found: u64::from(magic),
        });
    }
    let error = match reader.u32()? {
        0 => None,
        value => Some(Errno::from_wire(value).ok_or(NbdError::UnknownErrno(value))?),
    };
    Ok(SimpleReplyHeader {
        cookie: reader.u64()?,
        error,
    })
}
