//! Body of `CsumRequest`, the checksum-based resync request (`csums-alg`): the sync target
//! sends the digests of its own copy of the range it asks for, so that the source can answer
//! `ResyncInSync` instead of the data when its copy has the same digests.
//!
//! Invariant: the digests are 1..=[`CSUM_DIGESTS_LEN_MAX`] bytes, so the whole body fits in
//! [`crate::MESSAGE_LEN_MAX`]; they run to the end of the body, so each request has exactly
//! one encoding. They are opaque here (one digest per bitmap block, with `csums-alg`).

#[cfg(test)]
mod tests;

use crate::codec::{Reader, Writer};
use crate::kind::CSUM_REQUEST_HEADER_LEN;
use crate::{WireError, MESSAGE_LEN_MAX};

/// Most digest bytes one `CsumRequest` carries: what is left of [`MESSAGE_LEN_MAX`] after its
/// fixed header.
pub const CSUM_DIGESTS_LEN_MAX: usize = MESSAGE_LEN_MAX - CSUM_REQUEST_HEADER_LEN;

/// Body of `CsumRequest`: a resync request with the target's digests of the range.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CsumRequest {
    /// The target's name for the request, echoed in the reply and the ack.
    pub id: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u32,
    /// The target's digests of the range, one per bitmap block, concatenated
    /// (1..=[`CSUM_DIGESTS_LEN_MAX`] bytes).
    pub digests: Vec<u8>,
}

impl CsumRequest {
    /// Reads a `CsumRequest` body; empty digests are an error.
    pub(crate) fn decode(reader: &mut Reader<'_>) -> Result<CsumRequest, WireError> {
        let id = reader.u64("csum_request.id")?;
        let volume = reader.u16("csum_request.volume")?;
        let offset = reader.u64("csum_request.offset")?;
        let length = reader.u32("csum_request.length")?;
        let digests = reader.rest();
        check_digests_len(digests.len())?;
        Ok(CsumRequest {
            id,
            volume,
            offset,
            length,
            digests: digests.to_vec(),
        })
    }

    /// Writes a `CsumRequest` body in the order `decode` reads it; refuses what it refuses.
    pub(crate) fn encode(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        check_digests_len(self.digests.len())?;
        writer.u64(self.id);
        writer.u16(self.volume);
        writer.u64(self.offset);
        writer.u32(self.length);
        writer.bytes(&self.digests);
        Ok(())
    }
}

/// Refuses empty or over-long digests.
fn check_digests_len(len: usize) -> Result<(), WireError> {
    if len == 0 || len > CSUM_DIGESTS_LEN_MAX {
        return Err(WireError::CsumDigestsLength {
            len,
            max: CSUM_DIGESTS_LEN_MAX,
        });
    }
    Ok(())
}
