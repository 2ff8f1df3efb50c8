//! The fixed 16-byte frame header, its checks, and a streaming helper that cuts frames off the
//! front of a receive buffer.
//!
//! Invariants:
//! - A header decodes only if its magic, CRC-32C, flags, kind and body length are all valid,
//!   so a reader knows before reading the body that it is bounded by the kind's maximum.
//! - Decoding is canonical: a header that decodes re-encodes to the same 16 bytes. The CRC
//!   covers every other header byte, so any single corrupted byte (indeed any burst of up to
//!   32 bits) is an error, never a different valid header.
//! - `message_len() + payload_len() == body_len` for every header.

#[cfg(test)]
mod tests;

use crate::{widen, Kind, Message, WireError};

/// Length of the frame header.
pub const FRAME_HEADER_LEN: usize = 16;
/// First four bytes of every frame: `"TNDM"`.
pub const FRAME_MAGIC: u32 = 0x544E_444D;
/// Largest `body_len` of any frame: a 64 MiB data payload plus room for its fixed header.
pub const BODY_LEN_MAX: u32 = 64 * 1024 * 1024 + 64;
/// Header bytes covered by the header CRC: everything before the CRC itself.
const HEADER_CRC_COVERED_LEN: usize = 12;

const _: () = assert!(HEADER_CRC_COVERED_LEN + 4 == FRAME_HEADER_LEN);
const _: () = assert!(u32::from_be_bytes(*b"TNDM") == FRAME_MAGIC);

/// The decoded frame header. The magic and CRC are implied: `encode` writes them and `decode`
/// checks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Message kind number (see [`Kind`]).
    pub kind: u16,
    /// Header flags; must be 0 in this version.
    pub flags: u16,
    /// Number of body bytes after the header, including any data payload.
    pub body_len: u32,
}

impl FrameHeader {
    /// Decodes and checks a header: magic, then CRC, then [`FrameHeader::check`].
    pub fn decode(bytes: &[u8; FRAME_HEADER_LEN]) -> Result<FrameHeader, WireError> {
        let [m0, m1, m2, m3, k0, k1, f0, f1, l0, l1, l2, l3, c0, c1, c2, c3] = *bytes;
        let magic = u32::from_be_bytes([m0, m1, m2, m3]);
        if magic != FRAME_MAGIC {
            return Err(WireError::BadMagic { found: magic });
        }
        let stored = u32::from_be_bytes([c0, c1, c2, c3]);
        let computed = crc32c::crc32c(&[m0, m1, m2, m3, k0, k1, f0, f1, l0, l1, l2, l3]);
        if stored != computed {
            return Err(WireError::HeaderCrcMismatch { stored, computed });
        }
        let header = FrameHeader {
            kind: u16::from_be_bytes([k0, k1]),
            flags: u16::from_be_bytes([f0, f1]),
            body_len: u32::from_be_bytes([l0, l1, l2, l3]),
        };
        header.check()?;
        Ok(header)
    }

    /// Encodes the header with magic and CRC. Writes any field values, valid or not, so tests
    /// can build bad headers; [`Message::encode`] only ever builds checked ones.
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let [m0, m1, m2, m3] = FRAME_MAGIC.to_be_bytes();
        let [k0, k1] = self.kind.to_be_bytes();
        let [f0, f1] = self.flags.to_be_bytes();
        let [l0, l1, l2, l3] = self.body_len.to_be_bytes();
        let covered: [u8; HEADER_CRC_COVERED_LEN] =
            [m0, m1, m2, m3, k0, k1, f0, f1, l0, l1, l2, l3];
        let [c0, c1, c2, c3] = crc32c::crc32c(&covered).to_be_bytes();
        [
            m0, m1, m2, m3, k0, k1, f0, f1, l0, l1, l2, l3, c0, c1, c2, c3,
        ]
    }

    /// Checks the fields: flags are 0, the kind is known, and `body_len` lies within the
    /// global maximum and the kind's bounds. Returns the kind.
    pub fn check(&self) -> Result<Kind, WireError> {
        if self.flags != 0 {
            return Err(WireError::UnsupportedFlags { flags: self.flags });
        }
        if self.body_len > BODY_LEN_MAX {
            return Err(WireError::BodyTooLong {
                kind: self.kind,
                body_len: u64::from(self.body_len),
                max: widen(BODY_LEN_MAX),
            });
        }
        let kind = Kind::from_wire(self.kind)?;
        let body_len = widen(self.body_len);
        if body_len < kind.body_len_min() {
            return Err(WireError::BodyTooShort {
                kind: self.kind,
                body_len: self.body_len,
                min: kind.body_len_min(),
            });
        }
        if body_len > kind.body_len_max() {
            return Err(WireError::BodyTooLong {
                kind: self.kind,
                body_len: u64::from(self.body_len),
                max: kind.body_len_max(),
            });
        }
        Ok(kind)
    }

    /// Payload bytes that follow the message part: `body_len` minus the fixed header for
    /// `Data` and `ResyncReply`, 0 for every other kind (and for an unknown kind, or a header
    /// too short to hold the fixed header).
    pub fn payload_len(&self) -> u32 {
        match Kind::from_wire(self.kind) {
            Ok(kind) if kind.has_payload() => {
                self.body_len.saturating_sub(kind.payload_header_len())
            }
            _ => 0,
        }
    }

    /// Bytes of the body that make up the message: what [`Message::decode`] expects.
    pub fn message_len(&self) -> usize {
        let message_len = widen(self.body_len - self.payload_len());
        assert_eq!(
            message_len + widen(self.payload_len()),
            widen(self.body_len)
        );
        message_len
    }
}

/// A frame cut off the front of a receive buffer by [`decode_frame`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The checked header.
    pub header: FrameHeader,
    /// The decoded message.
    pub message: Message,
    /// Bytes of the buffer the header and message took; drop them before the next call.
    /// For `Data`, `header.payload_len()` payload bytes follow and are not counted here.
    pub consumed: usize,
}

/// Decodes the frame at the front of `buf`, if all of it has arrived.
///
/// Returns `Ok(None)` while the header or the message part is incomplete; the caller reads
/// more and calls again. For every kind but `Data` a returned frame is complete. For `Data` the
/// frame's payload (`header.payload_len()` bytes) starts at `buf[consumed..]` and is the
/// caller's to take, since it is meant to go straight into an aligned buffer. A control-socket
/// reader never needs more than `FRAME_HEADER_LEN + MESSAGE_LEN_MAX` buffered bytes to make
/// progress, because the header is checked before waiting for the body.
pub fn decode_frame(buf: &[u8]) -> Result<Option<Frame>, WireError> {
    let Some((header_bytes, rest)) = buf.split_first_chunk::<FRAME_HEADER_LEN>() else {
        return Ok(None);
    };
    let header = FrameHeader::decode(header_bytes)?;
    let message_len = header.message_len();
    let Some(body) = rest.get(..message_len) else {
        return Ok(None);
    };
    let message = Message::decode(&header, body)?;
    Ok(Some(Frame {
        header,
        message,
        consumed: FRAME_HEADER_LEN + message_len,
    }))
}
