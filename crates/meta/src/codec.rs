//! Bounded big-endian primitives shared by the block codecs: a `Reader` over a byte slice, a
//! `Writer` appending to a `Vec<u8>`, the block checksum and checked integer conversions.
//!
//! Invariants: the reader never reads past its slice (a short read is
//! [`MetaError::Truncated`]); the checksum of a block is the crc32c of the block with its own
//! 4-byte checksum field taken as zero, so the stored value can sit inside the covered bytes.

use crate::MetaError;

/// Reads fields off the front of a byte slice.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`, naming `what` in its errors.
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader {
            bytes,
            position: 0,
            what,
        }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.position
    }

    /// Reads `N` raw bytes.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], MetaError> {
        // Built only on failure: decoding reads every byte of a 4 KiB block through here.
        let truncated = || MetaError::Truncated {
            what: self.what,
            needed: self.position.saturating_add(N),
            actual: self.bytes.len(),
        };
        let rest = self.bytes.get(self.position..).ok_or_else(truncated)?;
        let (head, _) = rest.split_first_chunk::<N>().ok_or_else(truncated)?;
        self.position += N;
        Ok(*head)
    }

    /// Reads one byte.
    pub(crate) fn u8(&mut self) -> Result<u8, MetaError> {
        self.array::<1>().map(u8::from_be_bytes)
    }

    /// Reads a big-endian `u16`.
    pub(crate) fn u16(&mut self) -> Result<u16, MetaError> {
        self.array().map(u16::from_be_bytes)
    }

    /// Reads a big-endian `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32, MetaError> {
        self.array().map(u32::from_be_bytes)
    }

    /// Reads a big-endian `u64`.
    pub(crate) fn u64(&mut self) -> Result<u64, MetaError> {
        self.array().map(u64::from_be_bytes)
    }

    /// Skips `count` bytes that this format version requires to be zero.
    pub(crate) fn reserved(&mut self, count: usize) -> Result<(), MetaError> {
        for _ in 0..count {
            let offset = self.position;
            if self.u8()? != 0 {
                return Err(MetaError::ReservedNotZero {
                    what: self.what,
                    offset,
                });
            }
        }
        Ok(())
    }
}

/// Appends big-endian fields to a buffer.
pub(crate) struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    /// An empty writer with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Writer {
        Writer {
            bytes: Vec::with_capacity(capacity),
        }
    }

    /// Appends raw bytes.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// Appends one byte.
    pub(crate) fn u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    /// Appends a big-endian `u16`.
    pub(crate) fn u16(&mut self, value: u16) {
        self.bytes(&value.to_be_bytes());
    }

    /// Appends a big-endian `u32`.
    pub(crate) fn u32(&mut self, value: u32) {
        self.bytes(&value.to_be_bytes());
    }

    /// Appends a big-endian `u64`.
    pub(crate) fn u64(&mut self, value: u64) {
        self.bytes(&value.to_be_bytes());
    }

    /// Appends `count` zero bytes.
    pub(crate) fn zeros(&mut self, count: usize) {
        self.bytes.resize(self.bytes.len() + count, 0);
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The buffer as written.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.bytes
    }

    /// Pads with zeros to `len` bytes and returns the buffer.
    pub(crate) fn finish_padded(mut self, len: usize) -> Vec<u8> {
        assert!(self.bytes.len() <= len, "encoder wrote past its block");
        self.bytes.resize(len, 0);
        self.bytes
    }
}

/// The crc32c of `block` with the four bytes at `crc_offset` taken as zero.
pub(crate) fn block_crc(block: &[u8], crc_offset: usize) -> u32 {
    let head = block.get(..crc_offset).unwrap_or(block);
    let tail = block.get(crc_offset.saturating_add(4)..).unwrap_or(&[]);
    let crc = crc32c::crc32c(head);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, tail)
}

/// Writes `crc` big-endian at `crc_offset` of `block` (a block the encoder just built).
pub(crate) fn store_crc(block: &mut [u8], crc_offset: usize, crc: u32) {
    if let Some(field) = block.get_mut(crc_offset..crc_offset.saturating_add(4)) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
}

/// `value` as a `usize`, or [`MetaError::TooLargeForMemory`].
pub(crate) fn to_usize(value: u64, what: &'static str) -> Result<usize, MetaError> {
    usize::try_from(value).map_err(|_| MetaError::TooLargeForMemory { what, value })
}

/// `value` as a `u64` (lossless on every platform Rust supports).
pub(crate) fn to_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}
