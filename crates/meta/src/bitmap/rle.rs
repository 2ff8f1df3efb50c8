//! Run-length encoding of a bitmap for the exchange on connect, in chunks of bounded size.
//!
//! Chunk layout (big-endian header, then LEB128 varints):
//!
//! | offset | size | field               | meaning                                          |
//! |-------:|-----:|---------------------|--------------------------------------------------|
//! | 0      | 1    | `version`           | [`RLE_VERSION`]                                  |
//! | 1      | 4    | `granularity_bytes` | sender's granularity                             |
//! | 5      | 8    | `block_count`       | sender's number of blocks                        |
//! | 13     | 8    | `start_block`       | first block this chunk describes                 |
//! | 21     | …    | runs                | run lengths, alternating clear, set, clear, …    |
//!
//! The first run is a clear run and may be zero (a chunk that starts on a set block); every
//! other run is at least one block. Chunks follow each other without gaps; the last one ends at
//! `block_count`.
//!
//! Invariants (a hostile peer's bytes): decoding never panics and never allocates; a chunk is
//! fully validated before any bit is set, so a rejected chunk changes nothing; no run reaches
//! past `block_count`; a chunk longer than [`RLE_CHUNK_BYTES_MAX`] is refused unread.

use crate::codec::{Reader, Writer};
use crate::{Bitmap, MetaError};

/// The chunk format version.
pub const RLE_VERSION: u8 = 1;
/// Bytes of the chunk header.
pub const RLE_HEADER_BYTES: usize = 21;
/// Smallest chunk size limit an encoder accepts: the header plus two maximal varints, so every
/// chunk makes progress.
pub const RLE_CHUNK_BYTES_MIN: usize = 64;
/// Largest chunk a decoder accepts (and an encoder produces).
pub const RLE_CHUNK_BYTES_MAX: usize = 1 << 20;
/// Longest LEB128 encoding of a u64.
const VARINT_BYTES_MAX: usize = 10;
const WHAT: &str = "bitmap RLE chunk";

const _: () = assert!(RLE_HEADER_BYTES + 2 * VARINT_BYTES_MAX <= RLE_CHUNK_BYTES_MIN);
const _: () = assert!(RLE_CHUNK_BYTES_MIN <= RLE_CHUNK_BYTES_MAX);

/// Yields the chunks of one bitmap, each at most `chunk_bytes_max` bytes. An empty bitmap has
/// no chunks.
#[derive(Debug, Clone)]
pub struct RleEncoder<'a> {
    bitmap: &'a Bitmap,
    cursor: u64,
    chunk_bytes_max: usize,
}

impl Bitmap {
    /// An encoder of this bitmap in chunks of at most `chunk_bytes_max` bytes.
    pub fn rle_chunks(&self, chunk_bytes_max: usize) -> Result<RleEncoder<'_>, MetaError> {
        if !(RLE_CHUNK_BYTES_MIN..=RLE_CHUNK_BYTES_MAX).contains(&chunk_bytes_max) {
            return Err(MetaError::RleChunkBytesMaxTooSmall {
                chunk_bytes_max,
                chunk_bytes_min: RLE_CHUNK_BYTES_MIN,
            });
        }
        Ok(RleEncoder {
            bitmap: self,
            cursor: 0,
            chunk_bytes_max,
        })
    }
}

impl Iterator for RleEncoder<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        let block_count = self.bitmap.block_count();
        if self.cursor >= block_count {
            return None;
        }
        let start = self.cursor;
        let mut writer = Writer::with_capacity(self.chunk_bytes_max.min(4096));
        writer.u8(RLE_VERSION);
        writer.u32(self.bitmap.granularity_bytes());
        writer.u64(block_count);
        writer.u64(start);
        let mut set_run = false;
        while self.cursor < block_count {
            let run_end = if set_run {
                self.bitmap.next_clear(self.cursor)
            } else {
                self.bitmap.next_set(self.cursor)
            }
            .unwrap_or(block_count);
            let mut varint = [0; VARINT_BYTES_MAX];
            let length = encode_varint(run_end - self.cursor, &mut varint);
            if writer.len() + length > self.chunk_bytes_max {
                break;
            }
            writer.bytes(varint.get(..length).unwrap_or_default());
            self.cursor = run_end;
            set_run = !set_run;
        }
        assert!(self.cursor > start, "RLE chunk made no progress");
        Some(writer.finish())
    }
}

/// Applies a sequence of chunks to a bitmap by OR (the receiving side of the exchange).
///
/// On an error the exchange is broken (the caller disconnects); chunks already applied only
/// marked more blocks out of sync, which is safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RleDecoder {
    granularity_bytes: u32,
    block_count: u64,
    cursor: u64,
}

impl RleDecoder {
    /// A decoder for chunks describing a bitmap of `bitmap`'s geometry.
    pub fn new(bitmap: &Bitmap) -> RleDecoder {
        RleDecoder {
            granularity_bytes: bitmap.granularity_bytes(),
            block_count: bitmap.block_count(),
            cursor: 0,
        }
    }

    /// Whether every block has been received.
    pub fn is_complete(&self) -> bool {
        self.cursor == self.block_count
    }

    /// Blocks described so far.
    pub fn blocks_received(&self) -> u64 {
        self.cursor
    }

    /// Validates `chunk` and ORs its set runs into `bitmap`; returns how many blocks were newly
    /// set.
    pub fn apply(&mut self, chunk: &[u8], bitmap: &mut Bitmap) -> Result<u64, MetaError> {
        if bitmap.block_count() != self.block_count
            || bitmap.granularity_bytes() != self.granularity_bytes
        {
            return Err(MetaError::BitmapGeometryMismatch {
                expected_blocks: self.block_count,
                found_blocks: bitmap.block_count(),
            });
        }
        let (end, _) = self.walk(chunk, |_| Ok(0))?;
        let (_, newly_set) = self.walk(chunk, |run| bitmap.set_blocks(run))?;
        self.cursor = end;
        Ok(newly_set)
    }

    /// Parses `chunk`, calling `on_set_run` for each set run; returns where the chunk ends.
    fn walk(
        &self,
        chunk: &[u8],
        mut on_set_run: impl FnMut(std::ops::Range<u64>) -> Result<u64, MetaError>,
    ) -> Result<(u64, u64), MetaError> {
        self.check_header(chunk)?;
        let runs = chunk.get(RLE_HEADER_BYTES..).unwrap_or_default();
        let (mut position, mut block, mut set_run, mut newly_set) = (0, self.cursor, false, 0);
        while position < runs.len() {
            let (length, used) = decode_varint(runs.get(position..).unwrap_or_default())?;
            position += used;
            if length == 0 && (set_run || block != self.cursor) {
                return Err(invalid("zero-length run"));
            }
            let end = block
                .checked_add(length)
                .filter(|&end| end <= self.block_count)
                .ok_or(invalid("run past the last block"))?;
            if set_run {
                newly_set += on_set_run(block..end)?;
            }
            block = end;
            set_run = !set_run;
        }
        if block == self.cursor {
            return Err(invalid("chunk describes no block"));
        }
        Ok((block, newly_set))
    }

    fn check_header(&self, chunk: &[u8]) -> Result<(), MetaError> {
        if chunk.len() > RLE_CHUNK_BYTES_MAX {
            return Err(invalid("chunk longer than the limit"));
        }
        let mut reader = Reader::new(chunk, WHAT);
        if reader.u8()? != RLE_VERSION {
            return Err(invalid("unknown version"));
        }
        if reader.u32()? != self.granularity_bytes {
            return Err(invalid("granularity differs from ours"));
        }
        let block_count = reader.u64()?;
        if block_count != self.block_count {
            return Err(MetaError::BitmapGeometryMismatch {
                expected_blocks: self.block_count,
                found_blocks: block_count,
            });
        }
        let start_block = reader.u64()?;
        if start_block != self.cursor {
            return Err(MetaError::RleOutOfOrder {
                expected: self.cursor,
                found: start_block,
            });
        }
        Ok(())
    }
}

fn invalid(reason: &'static str) -> MetaError {
    MetaError::RleInvalid { reason }
}

/// Writes `value` as LEB128 into `out`; returns the bytes used.
fn encode_varint(mut value: u64, out: &mut [u8; VARINT_BYTES_MAX]) -> usize {
    for (index, byte) in out.iter_mut().enumerate() {
        let low = u8::try_from(value & 0x7F).unwrap_or(0);
        value >>= 7;
        if value == 0 {
            *byte = low;
            return index + 1;
        }
        *byte = low | 0x80;
    }
    VARINT_BYTES_MAX
}

/// Reads one LEB128 value; returns it and the bytes used.
fn decode_varint(bytes: &[u8]) -> Result<(u64, usize), MetaError> {
    let mut value: u64 = 0;
    for (index, &byte) in bytes.iter().take(VARINT_BYTES_MAX).enumerate() {
        let shift = u32::try_from(index * 7).unwrap_or(u32::MAX);
        let low = u64::from(byte & 0x7F);
        if index == VARINT_BYTES_MAX - 1 && low > 1 {
            return Err(invalid("varint overflows u64"));
        }
        value |= low << shift;
        if byte & 0x80 == 0 {
            return Ok((value, index + 1));
        }
    }
    Err(invalid("truncated or over-long varint"))
}

#[cfg(test)]
mod tests;
