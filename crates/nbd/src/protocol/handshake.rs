//! Handshake messages of fixed newstyle negotiation: greeting, client flags, options and option
//! replies (proto.md, "Fixed newstyle negotiation", "Option types", "Option reply types").
//!
//! Invariants:
//! - A parsed [`ClientOption`] is fully checked: names are UTF-8, `NBD_OPT_INFO`/`NBD_OPT_GO`
//!   data has exactly the layout the spec gives, options that take no data carry none (except
//!   `NBD_OPT_ABORT`, whose data the spec says to ignore).
//! - Encoders write whole messages, header included, so a message is never half-built.

use super::{
    option, wire_len, TransmissionFlags, WireReader, CLIENT_FLAG_FIXED_NEWSTYLE,
    CLIENT_FLAG_NO_ZEROES, HANDSHAKE_FLAGS, NBD_MAGIC, OPTION_MAGIC, OPTION_REPLY_MAGIC,
};
use crate::NbdError;

/// Length of the server's greeting.
pub const GREETING_LEN: usize = 18;
/// The greeting: `NBDMAGIC`, `IHAVEOPT`, handshake flags `FIXED_NEWSTYLE | NO_ZEROES`.
pub const GREETING: [u8; GREETING_LEN] = greeting();
/// Length of an option header: magic, option code, data length.
pub const OPTION_HEADER_LEN: usize = 16;
/// Length of an option reply header: magic, option code, reply type, data length.
pub const OPTION_REPLY_HEADER_LEN: usize = 20;
/// Zero padding after an `NBD_OPT_EXPORT_NAME` reply unless the client chose `NO_ZEROES`.
pub const EXPORT_NAME_REPLY_ZEROES_LEN: usize = 124;

const _: () = assert!(OPTION_HEADER_LEN == 8 + 4 + 4);
const _: () = assert!(OPTION_REPLY_HEADER_LEN == 8 + 4 + 4 + 4);

const fn greeting() -> [u8; GREETING_LEN] {
    let mut out = [0; GREETING_LEN];
    let nbd_magic = NBD_MAGIC.to_be_bytes();
    let option_magic = OPTION_MAGIC.to_be_bytes();
    let flags = HANDSHAKE_FLAGS.to_be_bytes();
    let mut index = 0;
    while index < 8 {
        out[index] = nbd_magic[index];
        out[8 + index] = option_magic[index];
        index += 1;
    }
    out[16] = flags[0];
    out[17] = flags[1];
    out
}

/// The client's answer to the greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientFlags {
    /// `NBD_FLAG_C_FIXED_NEWSTYLE`.
    pub fixed_newstyle: bool,
    /// `NBD_FLAG_C_NO_ZEROES`: omit the 124 zeroes after an `NBD_OPT_EXPORT_NAME` reply.
    pub no_zeroes: bool,
}

impl ClientFlags {
    /// The 32-bit wire form.
    pub fn to_wire(self) -> [u8; 4] {
        let fixed = if self.fixed_newstyle {
            CLIENT_FLAG_FIXED_NEWSTYLE
        } else {
            0
        };
        let zeroes = if self.no_zeroes {
            CLIENT_FLAG_NO_ZEROES
        } else {
            0
        };
        (fixed | zeroes).to_be_bytes()
    }
}

/// Parses the client flags; unknown bits are an error (the spec requires closing).
pub fn parse_client_flags(bytes: &[u8]) -> Result<ClientFlags, NbdError> {
    let raw = WireReader::new(bytes).u32()?;
    if raw & !(CLIENT_FLAG_FIXED_NEWSTYLE | CLIENT_FLAG_NO_ZEROES) != 0 {
        return Err(NbdError::UnknownClientFlags(raw));
    }
    Ok(ClientFlags {
        fixed_newstyle: raw & CLIENT_FLAG_FIXED_NEWSTYLE != 0,
        no_zeroes: raw & CLIENT_FLAG_NO_ZEROES != 0,
    })
}

/// The fixed part of a client option; `length` bytes of data follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionHeader {
    /// The option code (`NBD_OPT_*`).
    pub option: u32,
    /// Length of the option data.
    pub length: u32,
}

impl OptionHeader {
    /// The wire form.
    pub fn encode(self) -> [u8; OPTION_HEADER_LEN] {
        let mut out = [0; OPTION_HEADER_LEN];
        out[..8].copy_from_slice(&OPTION_MAGIC.to_be_bytes());
        out[8..12].copy_from_slice(&self.option.to_be_bytes());
        out[12..].copy_from_slice(&self.length.to_be_bytes());
        out
    }
}

/// Parses an option header, checking its magic.
pub fn parse_option_header(bytes: &[u8]) -> Result<OptionHeader, NbdError> {
    let mut reader = WireReader::new(bytes);
    let magic = reader.u64()?;
    if magic != OPTION_MAGIC {
        return Err(NbdError::BadMagic {
            expected: OPTION_MAGIC,
            found: magic,
        });
    }
    Ok(OptionHeader {
        option: reader.u32()?,
        length: reader.u32()?,
    })
}

/// An information item a client may request with `NBD_OPT_INFO`/`NBD_OPT_GO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoType {
    /// `NBD_INFO_EXPORT` (0): size and flags.
    Export,
    /// `NBD_INFO_NAME` (1): canonical name.
    Name,
    /// `NBD_INFO_DESCRIPTION` (2): human-readable description.
    Description,
    /// `NBD_INFO_BLOCK_SIZE` (3): size constraints.
    BlockSize,
    /// Any other value (the server must ignore it).
    Other(u16),
}

impl InfoType {
    /// The wire value.
    pub fn to_wire(self) -> u16 {
        match self {
            InfoType::Export => 0,
            InfoType::Name => 1,
            InfoType::Description => 2,
            InfoType::BlockSize => 3,
            InfoType::Other(value) => value,
        }
    }

    /// The item for a wire value.
    pub fn from_wire(value: u16) -> InfoType {
        match value {
            0 => InfoType::Export,
            1 => InfoType::Name,
            2 => InfoType::Description,
            3 => InfoType::BlockSize,
            value => InfoType::Other(value),
        }
    }
}

/// The data of `NBD_OPT_INFO` and `NBD_OPT_GO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportQuery {
    /// Export name; empty means the default export.
    pub name: String,
    /// Information items requested, in the client's order.
    pub items: Vec<InfoType>,
}

/// A client option, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOption {
    /// `NBD_OPT_EXPORT_NAME`: enter transmission on this export (empty: the default).
    ExportName {
        /// The export's name.
        name: String,
    },
    /// `NBD_OPT_ABORT`.
    Abort,
    /// `NBD_OPT_LIST`.
    List,
    /// `NBD_OPT_STARTTLS`.
    StartTls,
    /// `NBD_OPT_INFO`.
    Info(ExportQuery),
    /// `NBD_OPT_GO`.
    Go(ExportQuery),
    /// `NBD_OPT_STRUCTURED_REPLY`.
    StructuredReply,
    /// Any option this server does not implement (its data is not kept).
    Other {
        /// The option code.
        option: u32,
    },
}

impl ClientOption {
    /// The option code.
    pub fn code(&self) -> u32 {
        match self {
            ClientOption::ExportName { .. } => option::EXPORT_NAME,
            ClientOption::Abort => option::ABORT,
            ClientOption::List => option::LIST,
            ClientOption::StartTls => option::STARTTLS,
            ClientOption::Info(_) => option::INFO,
            ClientOption::Go(_) => option::GO,
            ClientOption::StructuredReply => option::STRUCTURED_REPLY,
            ClientOption::Other { option } => *option,
        }
    }

    /// Appends the whole option, header included (the client's side; used by tests).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header_at = out.len();
        out.extend_from_slice(
            &OptionHeader {
                option: self.code(),
                length: 0,
            }
            .encode(),
        );
        match self {
            ClientOption::ExportName { name } => out.extend_from_slice(name.as_bytes()),
            ClientOption::Info(query) | ClientOption::Go(query) => encode_query(query, out),
            _ => {}
        }
        let length = wire_len(out.len() - header_at - OPTION_HEADER_LEN);
        out[header_at + 12..header_at + 16].copy_from_slice(&length.to_be_bytes());
    }
}

fn encode_query(query: &ExportQuery, out: &mut Vec<u8>) {
    out.extend_from_slice(&wire_len(query.name.len()).to_be_bytes());
    out.extend_from_slice(query.name.as_bytes());
    let count = u16::try_from(query.items.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    for item in query.items.iter().take(usize::from(count)) {
        out.extend_from_slice(&item.to_wire().to_be_bytes());
    }
}

/// Parses an option's data, given the code from its header.
pub fn parse_option(code: u32, data: &[u8]) -> Result<ClientOption, NbdError> {
    let parsed = match code {
        option::EXPORT_NAME => ClientOption::ExportName { name: utf8(data)? },
        option::ABORT => ClientOption::Abort,
        option::LIST => no_data(code, data, ClientOption::List)?,
        option::STARTTLS => no_data(code, data, ClientOption::StartTls)?,
        option::INFO => ClientOption::Info(parse_query(code, data)?),
        option::GO => ClientOption::Go(parse_query(code, data)?),
        option::STRUCTURED_REPLY => no_data(code, data, ClientOption::StructuredReply)?,
        option => ClientOption::Other { option },
    };
    Ok(parsed)
}

fn utf8(bytes: &[u8]) -> Result<String, NbdError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| NbdError::NotUtf8)
}

fn no_data(code: u32, data: &[u8], parsed: ClientOption) -> Result<ClientOption, NbdError> {
    if data.is_empty() {
        Ok(parsed)
    } else {
        Err(NbdError::MalformedOption {
            option: code,
            reason: "this option takes no data",
        })
    }
}

fn parse_query(code: u32, data: &[u8]) -> Result<ExportQuery, NbdError> {
    let malformed = |reason| NbdError::MalformedOption {
        option: code,
        reason,
    };
    let mut reader = WireReader::new(data);
    let name_len = reader
        .length()
        .map_err(|_| malformed("shorter than a name length"))?;
    if name_len > reader.remaining().saturating_sub(2) {
        return Err(malformed("name length exceeds the option data"));
    }
    let name = reader.string(name_len)?;
    let count = reader
        .u16()
        .map_err(|_| malformed("missing information request count"))?;
    if reader.remaining() != usize::from(count) * 2 {
        return Err(malformed(
            "information request count does not match the data length",
        ));
    }
    let mut items = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        items.push(InfoType::from_wire(reader.u16()?));
    }
    Ok(ExportQuery { name, items })
}

/// An option error reply type (`NBD_REP_ERR_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionError {
    /// `NBD_REP_ERR_UNSUP`: option not supported.
    Unsup,
    /// `NBD_REP_ERR_POLICY`: refused by server policy.
    Policy,
    /// `NBD_REP_ERR_INVALID`: syntactically or semantically invalid.
    Invalid,
    /// `NBD_REP_ERR_PLATFORM`: not available on this platform.
    Platform,
    /// `NBD_REP_ERR_TLS_REQD`: TLS required first.
    TlsReqd,
    /// `NBD_REP_ERR_UNKNOWN`: no such export.
    Unknown,
    /// `NBD_REP_ERR_SHUTDOWN`: server shutting down.
    Shutdown,
    /// `NBD_REP_ERR_BLOCK_SIZE_REQD`: block size negotiation required.
    BlockSizeReqd,
    /// `NBD_REP_ERR_TOO_BIG`: request or reply too large.
    TooBig,
}

const OPTION_ERRORS: [OptionError; 9] = [
    OptionError::Unsup,
    OptionError::Policy,
    OptionError::Invalid,
    OptionError::Platform,
    OptionError::TlsReqd,
    OptionError::Unknown,
    OptionError::Shutdown,
    OptionError::BlockSizeReqd,
    OptionError::TooBig,
];

/// Bit 31 marks every option error reply type.
const REPLY_ERROR_BIT: u32 = 1 << 31;

impl OptionError {
    /// The reply type on the wire: `2^31 + n`.
    pub fn to_wire(self) -> u32 {
        let index = OPTION_ERRORS
            .iter()
            .position(|&error| error == self)
            .unwrap_or(0);
        REPLY_ERROR_BIT + 1 + wire_len(index)
    }

    /// The error for a reply type, if it is a known error type.
    pub fn from_wire(value: u32) -> Option<OptionError> {
        let index = value.checked_sub(REPLY_ERROR_BIT + 1)?;
        OPTION_ERRORS.get(usize::try_from(index).ok()?).copied()
    }
}

/// Size constraints sent in `NBD_INFO_BLOCK_SIZE` (proto.md, "Size constraints").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSizes {
    /// Minimum block size: a power of two ≤ 64 KiB.
    pub minimum: u32,
    /// Preferred block size: a power of two ≥ max(minimum, 512).
    pub preferred: u32,
    /// Maximum payload: ≥ preferred.
    pub maximum: u32,
}

/// An `NBD_REP_INFO` item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoReply {
    /// `NBD_INFO_EXPORT`.
    Export {
        /// Export size in bytes.
        size: u64,
        /// Transmission flags.
        flags: TransmissionFlags,
    },
    /// `NBD_INFO_NAME`.
    Name(String),
    /// `NBD_INFO_BLOCK_SIZE`.
    BlockSize(BlockSizes),
}

/// What an option reply says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptionReplyBody {
    /// `NBD_REP_ACK`.
    Ack,
    /// `NBD_REP_SERVER`: one export of a list.
    Server {
        /// The export's name.
        name: String,
    },
    /// `NBD_REP_INFO`.
    Info(InfoReply),
    /// An error reply with a message for humans (may be empty).
    Error {
        /// The error type.
        error: OptionError,
        /// Message shown to the user.
        message: String,
    },
}

/// One option reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionReply {
    /// The option code being answered.
    pub option: u32,
    /// The reply.
    pub body: OptionReplyBody,
}

const REPLY_ACK: u32 = 1;
const REPLY_SERVER: u32 = 2;
const REPLY_INFO: u32 = 3;

impl OptionReply {
    /// Appends the whole reply, header included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let header_at = out.len();
        out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
        out.extend_from_slice(&self.option.to_be_bytes());
        out.extend_from_slice(&self.reply_type().to_be_bytes());
        out.extend_from_slice(&0_u32.to_be_bytes());
        match &self.body {
            OptionReplyBody::Ack => {}
            OptionReplyBody::Server { name } => {
                out.extend_from_slice(&wire_len(name.len()).to_be_bytes());
                out.extend_from_slice(name.as_bytes());
            }
            OptionReplyBody::Info(info) => encode_info(info, out),
            OptionReplyBody::Error { message, .. } => out.extend_from_slice(message.as_bytes()),
        }
        let length = wire_len(out.len() - header_at - OPTION_REPLY_HEADER_LEN);
        out[header_at + 16..header_at + 20].copy_from_slice(&length.to_be_bytes());
    }

    fn reply_type(&self) -> u32 {
        match &self.body {
            OptionReplyBody::Ack => REPLY_ACK,
            OptionReplyBody::Server { .. } => REPLY_SERVER,
            OptionReplyBody::Info(_) => REPLY_INFO,
            OptionReplyBody::Error { error, .. } => error.to_wire(),
        }
    }
}

fn encode_info(info: &InfoReply, out: &mut Vec<u8>) {
    match info {
        InfoReply::Export { size, flags } => {
            out.extend_from_slice(&InfoType::Export.to_wire().to_be_bytes());
            out.extend_from_slice(&size.to_be_bytes());
            out.extend_from_slice(&flags.0.to_be_bytes());
        }
        InfoReply::Name(name) => {
            out.extend_from_slice(&InfoType::Name.to_wire().to_be_bytes());
            out.extend_from_slice(name.as_bytes());
        }
        InfoReply::BlockSize(sizes) => {
            out.extend_from_slice(&InfoType::BlockSize.to_wire().to_be_bytes());
            for value in [sizes.minimum, sizes.preferred, sizes.maximum] {
                out.extend_from_slice(&value.to_be_bytes());
            }
        }
    }
}

/// Parses one option reply from the start of `bytes`; returns it and the bytes it used (the
/// client's side; used by tests and tools).
pub fn parse_option_reply(bytes: &[u8]) -> Result<(OptionReply, usize), NbdError> {
    let mut reader = WireReader::new(bytes);
    let magic = reader.u64()?;
    if magic != OPTION_REPLY_MAGIC {
        return Err(NbdError::BadMagic {
            expected: OPTION_REPLY_MAGIC,
            found: magic,
        });
    }
    let option = reader.u32()?;
    let reply_type = reader.u32()?;
    let length = reader.length()?;
    let data = reader.take(length)?;
    let body = match reply_type {
        REPLY_ACK if data.is_empty() => OptionReplyBody::Ack,
        REPLY_SERVER => parse_server_reply(data)?,
        REPLY_INFO => OptionReplyBody::Info(parse_info_reply(data)?),
        other => match OptionError::from_wire(other) {
            Some(error) => OptionReplyBody::Error {
                error,
                message: utf8(data)?,
            },
            None => return Err(NbdError::UnknownReplyType(other)),
        },
    };
    Ok((
        OptionReply { option, body },
        OPTION_REPLY_HEADER_LEN + length,
    ))
}

fn parse_server_reply(data: &[u8]) -> Result<OptionReplyBody, NbdError> {
    let mut reader = WireReader::new(data);
    let name_len = reader.length()?;
    let name = reader.string(name_len)?;
    // Bytes after the name are an optional description this parser does not keep.
    reader.rest();
    Ok(OptionReplyBody::Server { name })
}

fn parse_info_reply(data: &[u8]) -> Result<InfoReply, NbdError> {
    let mut reader = WireReader::new(data);
    let kind = reader.u16()?;
    let info = match (InfoType::from_wire(kind), reader.remaining()) {
        (InfoType::Export, 10) => InfoReply::Export {
            size: reader.u64()?,
            flags: TransmissionFlags(reader.u16()?),
        },
        (InfoType::Name, len) => InfoReply::Name(reader.string(len)?),
        (InfoType::BlockSize, 12) => InfoReply::BlockSize(BlockSizes {
            minimum: reader.u32()?,
            preferred: reader.u32()?,
            maximum: reader.u32()?,
        }),
        _ => return Err(NbdError::BadInfoReply(kind)),
    };
    Ok(info)
}

/// Appends the reply to `NBD_OPT_EXPORT_NAME`: size, flags, and 124 zeroes unless the client
/// negotiated `NO_ZEROES`.
pub fn encode_export_name_reply(
    size: u64,
    flags: TransmissionFlags,
    client: ClientFlags,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&flags.0.to_be_bytes());
    if !client.no_zeroes {
        out.extend_from_slice(&[0; EXPORT_NAME_REPLY_ZEROES_LEN]);
    }
}
