//! The crate's codec error: every way a frame can fail to decode, or a message fail to encode.
//!
//! Invariant: decoding never panics; each malformed input maps to exactly one variant here.
//! Field names in variants are `"message.field"` strings so a log line names the culprit.

/// A frame or message that cannot be decoded, or a message that cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The header does not start with the frame magic: the stream is out of sync or the peer
    /// is not a tandem node.
    #[error("bad frame magic {found:#010x}, expected \"TNDM\"")]
    BadMagic {
        /// The four bytes found where the magic belongs, as a big-endian number.
        found: u32,
    },
    /// The header checksum does not match the header bytes: the header was corrupted.
    #[error("frame header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    HeaderCrcMismatch {
        /// The checksum carried in the header.
        stored: u32,
        /// The checksum of the header bytes as received.
        computed: u32,
    },
    /// The header carries flag bits this version does not define.
    #[error("frame header has unsupported flags {flags:#06x}")]
    UnsupportedFlags {
        /// The flags found.
        flags: u16,
    },
    /// The kind number is not one this version knows.
    #[error("unknown message kind {kind:#06x}")]
    UnknownKind {
        /// The kind number found.
        kind: u16,
    },
    /// The body length is below the smallest body this kind can have.
    #[error("body of {body_len} bytes is too short for kind {kind:#06x} (minimum {min})")]
    BodyTooShort {
        /// The kind number.
        kind: u16,
        /// The body length from the header.
        body_len: u32,
        /// The smallest body length this kind allows.
        min: usize,
    },
    /// The body length is above the largest body this kind can have (or above the global
    /// maximum).
    #[error("body of {body_len} bytes is too long for kind {kind:#06x} (maximum {max})")]
    BodyTooLong {
        /// The kind number.
        kind: u16,
        /// The body length from the header, or the length the encoder would have written.
        body_len: u64,
        /// The largest body length this kind allows.
        max: usize,
    },
    /// The body slice handed to the decoder is not as long as the header says it should be.
    #[error("body slice of {actual} bytes for kind {kind:#06x}, header says {expected}")]
    BodySliceMismatch {
        /// The kind number.
        kind: u16,
        /// The message length the header implies.
        expected: usize,
        /// The length of the slice passed in.
        actual: usize,
    },
    /// The body ended in the middle of a field.
    #[error("body ends inside field {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// Bytes were left over after the last field of the message.
    #[error("{count} unexpected bytes after the end of a {kind:#06x} message")]
    TrailingBytes {
        /// The kind number.
        kind: u16,
        /// How many bytes were left.
        count: usize,
    },
    /// A string is longer than the protocol allows.
    #[error("string field {field} is {len} bytes long (maximum {max})")]
    StringTooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The maximum length.
        max: usize,
    },
    /// A string field is not valid UTF-8.
    #[error("string field {field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A boolean field holds a byte other than 0 or 1.
    #[error("boolean field {field} holds {value}, expected 0 or 1")]
    InvalidBool {
        /// The field.
        field: &'static str,
        /// The byte found.
        value: u8,
    },
    /// The socket kind in a `Hello` is neither data nor control.
    #[error("invalid socket kind {value} in hello")]
    InvalidSocketKind {
        /// The byte found.
        value: u8,
    },
    /// A list has more entries than the protocol allows, or than the body has room for.
    #[error("list field {field} has {count} entries (maximum {max})")]
    TooManyEntries {
        /// The field.
        field: &'static str,
        /// The count found or given.
        count: usize,
        /// The maximum the protocol, or the remaining body, allows.
        max: usize,
    },
    /// A data header carries flag bits this version does not define.
    #[error("data header has unknown flags {flags:#06x}")]
    UnknownDataFlags {
        /// The flags found or given.
        flags: u16,
    },
    /// A compressed payload is malformed.
    #[error("bad compressed payload: {reason}")]
    BadCompressedPayload {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The encoder was asked for a data payload larger than the protocol allows.
    #[error("data payload of {payload_len} bytes is too long (maximum {max})")]
    PayloadTooLong {
        /// The requested payload length.
        payload_len: u32,
        /// The maximum payload length.
        max: u32,
    },
    /// The encoder was asked for a payload on a kind that carries none.
    #[error("kind {kind:#06x} carries no payload, but {payload_len} payload bytes were given")]
    PayloadNotAllowed {
        /// The kind number.
        kind: u16,
        /// The requested payload length.
        payload_len: u32,
    },
    /// The step byte of a `Resize` is not one this version defines.
    #[error("invalid step {value} in resize")]
    InvalidResizeStep {
        /// The byte found.
        value: u8,
    },
    /// The purpose byte of a `SyncUuids` is not one this version defines.
    #[error("invalid purpose {value} in sync_uuids")]
    InvalidUuidsPurpose {
        /// The byte found.
        value: u8,
    },
    /// A `SyncUuids` carries flag bits this version does not define.
    #[error("sync_uuids has unknown flags {flags:#x}")]
    UnknownUuidFlags {
        /// The flags found or given.
        flags: u64,
    },
    /// The status byte of a `VerifyReply` is not one this version defines.
    #[error("invalid status {value} in verify_reply")]
    InvalidVerifyStatus {
        /// The byte found.
        value: u8,
    },
    /// A `VerifyReply` with status "digests" carries no digests, or more than a frame allows.
    #[error("verify digests of {len} bytes (must be 1..={max})")]
    VerifyDigestsLength {
        /// The digests' length.
        len: usize,
        /// The longest digests allowed.
        max: usize,
    },
    /// A `CsumRequest` carries no digests, or more than a frame allows.
    #[error("csum request digests of {len} bytes (must be 1..={max})")]
    CsumDigestsLength {
        /// The digests' length.
        len: usize,
        /// The longest digests allowed.
        max: usize,
    },
    /// The encoder was given a bitmap chunk that is empty or longer than a frame allows.
    #[error("bitmap chunk of {len} bytes (must be 1..={max})")]
    BitmapChunkLength {
        /// The chunk's length.
        len: usize,
        /// The longest chunk allowed.
        max: usize,
    },
}
