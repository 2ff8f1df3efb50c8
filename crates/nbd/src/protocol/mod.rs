//! Sans-IO NBD protocol: wire constants, and parse/encode of every message the server sends or
//! receives, as typed values.
//!
//! Nothing here touches a socket, a clock or the export: functions take bytes and return values
//! (or take values and append bytes), so the server driver and the tests use the same code.
//!
//! Invariants:
//! - Parsers never panic and never read past the slice they are given; a short slice is
//!   [`NbdError::Truncated`](crate::NbdError::Truncated). Property tests feed them arbitrary
//!   bytes.
//! - Every encoder has a parser, and `parse(encode(v)) == v` for every value (property-tested),
//!   so the two directions cannot drift apart.
//! - All integers on the wire are big-endian (proto.md, "Conventions").

mod handshake;
mod transmission;

#[cfg(test)]
mod tests;

pub use handshake::{
    encode_export_name_reply, parse_client_flags, parse_option, parse_option_header,
    parse_option_reply, BlockSizes, ClientFlags, ClientOption, ExportQuery, InfoReply, InfoType,
    OptionError, OptionHeader, OptionReply, OptionReplyBody, EXPORT_NAME_REPLY_ZEROES_LEN,
    GREETING, GREETING_LEN, OPTION_HEADER_LEN, OPTION_REPLY_HEADER_LEN,
};
pub use transmission::{
    parse_request_header, parse_simple_reply_header, Admitted, CommandKind, ExportLimits,
    Rejection, RequestHeader, SimpleReplyHeader, Verdict, REQUEST_HEADER_LEN,
    SIMPLE_REPLY_HEADER_LEN,
};

use crate::NbdError;

/// `NBDMAGIC`: first eight bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: second greeting word, and the prefix of every client option.
pub const OPTION_MAGIC: u64 = 0x4948_4156_454f_5054;
/// Prefix of every option reply.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Prefix of every transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Prefix of every simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flag `NBD_FLAG_FIXED_NEWSTYLE`.
pub const HANDSHAKE_FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag `NBD_FLAG_NO_ZEROES`.
pub const HANDSHAKE_FLAG_NO_ZEROES: u16 = 1 << 1;
/// The handshake flags this server sends.
pub const HANDSHAKE_FLAGS: u16 = HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES;

/// Client flag `NBD_FLAG_C_FIXED_NEWSTYLE`.
pub const CLIENT_FLAG_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag `NBD_FLAG_C_NO_ZEROES`.
pub const CLIENT_FLAG_NO_ZEROES: u32 = 1 << 1;

/// Option codes (`NBD_OPT_*`).
pub mod option {
    /// `NBD_OPT_EXPORT_NAME`.
    pub const EXPORT_NAME: u32 = 1;
    /// `NBD_OPT_ABORT`.
    pub const ABORT: u32 = 2;
    /// `NBD_OPT_LIST`.
    pub const LIST: u32 = 3;
    /// `NBD_OPT_STARTTLS`.
    pub const STARTTLS: u32 = 5;
    /// `NBD_OPT_INFO`.
    pub const INFO: u32 = 6;
    /// `NBD_OPT_GO`.
    pub const GO: u32 = 7;
    /// `NBD_OPT_STRUCTURED_REPLY`.
    pub const STRUCTURED_REPLY: u32 = 8;
}

/// Command flags (`NBD_CMD_FLAG_*`).
pub mod command_flag {
    /// `NBD_CMD_FLAG_FUA`: reply only once the command's writes are durable.
    pub const FUA: u16 = 1 << 0;
    /// `NBD_CMD_FLAG_NO_HOLE`: write-zeroes must allocate.
    pub const NO_HOLE: u16 = 1 << 1;
    /// `NBD_CMD_FLAG_DF`: do not fragment a structured read reply (never advertised here).
    pub const DF: u16 = 1 << 2;
    /// `NBD_CMD_FLAG_REQ_ONE`: block status with one extent (never advertised here).
    pub const REQ_ONE: u16 = 1 << 3;
    /// `NBD_CMD_FLAG_FAST_ZERO`: fail write-zeroes unless fast (never advertised here).
    pub const FAST_ZERO: u16 = 1 << 4;
}

/// The 16-bit transmission flags sent with an export's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TransmissionFlags(pub u16);

impl TransmissionFlags {
    /// `NBD_FLAG_HAS_FLAGS`: always set.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// `NBD_FLAG_READ_ONLY`.
    pub const READ_ONLY: u16 = 1 << 1;
    /// `NBD_FLAG_SEND_FLUSH`.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// `NBD_FLAG_SEND_FUA`.
    pub const SEND_FUA: u16 = 1 << 3;
    /// `NBD_FLAG_SEND_TRIM`.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// `NBD_FLAG_SEND_WRITE_ZEROES`.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// `NBD_FLAG_CAN_MULTI_CONN`.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;

    /// The flags advertising exactly what `info` says the export can do.
    pub fn from_info(info: &crate::ExportInfo) -> TransmissionFlags {
        let pairs = [
            (info.read_only, Self::READ_ONLY),
            (info.can_flush, Self::SEND_FLUSH),
            (info.can_fua, Self::SEND_FUA),
            (info.can_trim, Self::SEND_TRIM),
            (info.can_write_zeroes, Self::SEND_WRITE_ZEROES),
            (info.can_multi_conn, Self::CAN_MULTI_CONN),
        ];
        let bits = pairs
            .iter()
            .filter(|(enabled, _)| *enabled)
            .fold(Self::HAS_FLAGS, |bits, (_, flag)| bits | flag);
        TransmissionFlags(bits)
    }

    /// True if every bit of `flag` is set.
    pub fn contains(self, flag: u16) -> bool {
        self.0 & flag == flag
    }
}

/// A bounds-checked big-endian reader over a byte slice (the parsers' only way to read).
struct WireReader<'a> {
    bytes: &'a [u8],
}

impl<'a> WireReader<'a> {
    fn new(bytes: &'a [u8]) -> WireReader<'a> {
        WireReader { bytes }
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], NbdError> {
        if self.bytes.len() < len {
            return Err(NbdError::Truncated {
                needed: len,
                available: self.bytes.len(),
            });
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], NbdError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    fn u16(&mut self) -> Result<u16, NbdError> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<u32, NbdError> {
        self.array().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Result<u64, NbdError> {
        self.array().map(u64::from_be_bytes)
    }

    /// A u32 length field as a usize.
    fn length(&mut self) -> Result<usize, NbdError> {
        let value = self.u32()?;
        usize::try_from(value).map_err(|_| NbdError::Truncated {
            needed: usize::MAX,
            available: self.bytes.len(),
        })
    }

    /// A string of `len` bytes that must be UTF-8.
    fn string(&mut self, len: usize) -> Result<String, NbdError> {
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| NbdError::NotUtf8)
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    fn remaining(&self) -> usize {
        self.bytes.len()
    }
}

/// `len` as a wire u32; lengths this crate encodes are bounded far below 4 GiB (option data is
/// capped, names come from the registry), so saturation would only corrupt a debug message.
fn wire_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}
