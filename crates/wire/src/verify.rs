//! Bodies of the online-verify kinds (`VerifyRequest`, `VerifyReply`, `VerifyDone`): the
//! verify source asks for the digests of a range, the verify target answers with one digest
//! per bitmap block, and the source ends the walk with what it found.
//!
//! Invariants:
//! - A `VerifyReply` carries a written-block mask and digests exactly when its status is
//!   [`VerifyOutcome::Digests`], and then 1..=[`VERIFY_DIGESTS_LEN_MAX`] bytes of digests, so
//!   the whole body fits in [`crate::MESSAGE_LEN_MAX`]; a read failure carries nothing after
//!   the status, so each reply has exactly one encoding.
//! - The digests are opaque here: their algorithm (`verify-alg`) and block size are the
//!   caller's, and the bytes are the per-block digests concatenated.

#[cfg(test)]
mod tests;

use crate::codec::{Reader, Writer};
use crate::kind::VERIFY_REPLY_HEADER_LEN;
use crate::{WireError, MESSAGE_LEN_MAX};

/// Length of the written-block mask in front of the digests.
const WRITTEN_BLOCKS_LEN: usize = 4;
/// Most digest bytes one `VerifyReply` carries: what is left of [`MESSAGE_LEN_MAX`] after its
/// fixed header and the written-block mask.
pub const VERIFY_DIGESTS_LEN_MAX: usize =
    MESSAGE_LEN_MAX - VERIFY_REPLY_HEADER_LEN - WRITTEN_BLOCKS_LEN;

/// Bytes of a SHA-512 digest, the longest `verify-alg` tandem expects.
const SHA512_LEN: usize = 64;
/// 128 KiB of 4 KiB bitmap blocks: the most blocks one verify request covers.
const BLOCKS_PER_REQUEST_MAX: usize = 32;

// A full request's SHA-512 digests fit in one reply.
const _: () = assert!(BLOCKS_PER_REQUEST_MAX * SHA512_LEN <= VERIFY_DIGESTS_LEN_MAX);

/// Body of `VerifyRequest`: the verify source asks for the digests of a range of the target's
/// disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerifyRequest {
    /// The source's name for the request, echoed in the reply.
    pub id: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u32,
}

/// What the verify target has to say about a range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VerifyOutcome {
    /// Status byte 0, then `written_blocks: u32`, then the digests.
    Digests {
        /// Bit `i`: block `i` of the range was being written on the target while it was
        /// read, so its digest proves nothing.
        written_blocks: u32,
        /// One digest per bitmap block of the range, concatenated
        /// (1..=[`VERIFY_DIGESTS_LEN_MAX`] bytes).
        digests: Vec<u8>,
    },
    /// The target could not read the range. Status byte 1, nothing after it.
    ReadFailed,
}

impl VerifyOutcome {
    /// The status byte carried in a `VerifyReply`.
    pub const fn status(&self) -> u8 {
        match self {
            VerifyOutcome::Digests { .. } => 0,
            VerifyOutcome::ReadFailed => 1,
        }
    }
}

/// Body of `VerifyReply`: the target's answer to request `id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifyReply {
    /// The request's id.
    pub id: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u32,
    /// The digests, or why there are none.
    pub outcome: VerifyOutcome,
}

impl VerifyRequest {
    /// Reads a `VerifyRequest` body; the field order here is the wire order.
    pub(crate) fn decode(reader: &mut Reader<'_>) -> Result<VerifyRequest, WireError> {
        Ok(VerifyRequest {
            id: reader.u64("verify_request.id")?,
            volume: reader.u16("verify_request.volume")?,
            offset: reader.u64("verify_request.offset")?,
            length: reader.u32("verify_request.length")?,
        })
    }

    /// Writes a `VerifyRequest` body in the order `decode` reads it.
    pub(crate) fn encode(&self, writer: &mut Writer<'_>) {
        writer.u64(self.id);
        writer.u16(self.volume);
        writer.u64(self.offset);
        writer.u32(self.length);
    }
}

impl VerifyReply {
    /// Reads a `VerifyReply` body: unknown statuses, empty digests, and bytes after a read
    /// failure are errors.
    pub(crate) fn decode(reader: &mut Reader<'_>) -> Result<VerifyReply, WireError> {
        let id = reader.u64("verify_reply.id")?;
        let volume = reader.u16("verify_reply.volume")?;
        let offset = reader.u64("verify_reply.offset")?;
        let length = reader.u32("verify_reply.length")?;
        let outcome = match reader.u8("verify_reply.status")? {
            0 => {
                let written_blocks = reader.u32("verify_reply.written_blocks")?;
                let digests = reader.rest();
                check_digests_len(digests.len())?;
                VerifyOutcome::Digests {
                    written_blocks,
                    digests: digests.to_vec(),
                }
            }
            // Any byte after this status is left for `Reader::finish` to refuse.
            1 => VerifyOutcome::ReadFailed,
            value => return Err(WireError::InvalidVerifyStatus { value }),
        };
        Ok(VerifyReply {
            id,
            volume,
            offset,
            length,
            outcome,
        })
    }

    /// Writes a `VerifyReply` body in the order `decode` reads it; refuses what it refuses.
    pub(crate) fn encode(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        if let VerifyOutcome::Digests { digests, .. } = &self.outcome {
            check_digests_len(digests.len())?;
        }
        writer.u64(self.id);
        writer.u16(self.volume);
        writer.u64(self.offset);
        writer.u32(self.length);
        writer.u8(self.outcome.status());
        if let VerifyOutcome::Digests {
            written_blocks,
            digests,
        } = &self.outcome
        {
            writer.u32(*written_blocks);
            writer.bytes(digests);
        }
        Ok(())
    }
}

/// Refuses an empty or over-long digest field.
fn check_digests_len(len: usize) -> Result<(), WireError> {
    if len == 0 || len > VERIFY_DIGESTS_LEN_MAX {
        return Err(WireError::VerifyDigestsLength {
            len,
            max: VERIFY_DIGESTS_LEN_MAX,
        });
    }
    Ok(())
}
