//! Byte ranges of a volume, and the out-of-sync bitmap that records which blocks may differ.
//!
//! Invariant: an [`Extent`] never wraps (`offset + length` fits in u64); the bitmap covers the
//! whole volume, one bit per [`OOS_BLOCK_BYTES`], and a set bit is cleared only by an explicit
//! clear (a later issue's resync), never as a side effect.

/// Bytes covered by one out-of-sync bit (DRBD's default bitmap granularity).
pub const OOS_BLOCK_BYTES: u64 = 4096;

/// A byte range `[offset, offset + length)` of one volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First byte.
    pub offset: u64,
    /// Number of bytes.
    pub length: u64,
}

impl Extent {
    /// The range, or None if it would wrap around u64.
    pub fn new(offset: u64, length: u64) -> Option<Extent> {
        offset.checked_add(length)?;
        Some(Extent { offset, length })
    }

    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.length)
    }

    /// Whether the two ranges share at least one byte.
    pub fn overlaps(&self, other: &Extent) -> bool {
        self.length > 0 && other.length > 0 && self.offset < other.end() && other.offset < self.end()
    }
}

/// Which blocks of a volume may differ on one peer.
#[derive(Debug, Clone)]
pub struct OosBitmap {
    words: Vec<u64>,
    blocks: u64,
    set_count: u64,
}

impl OosBitmap {
    /// An all-clear bitmap for a volume of `size_bytes`.
    pub fn new(size_bytes: u64) -> OosBitmap {
        let blocks = size_bytes.div_ceil(OOS_BLOCK_BYTES);
        let words = usize::try_from(blocks.div_ceil(64)).unwrap_or(usize::MAX);
        OosBitmap { words: vec![0; words], blocks, set_count: 0 }
    }

    /// Mark every block touched by `extent` (clamped to the volume).
    pub fn set(&mut self, extent: Extent) {
        if extent.length == 0 {
            return;
        }
        let first = extent.offset / OOS_BLOCK_BYTES;
        let last = ((extent.end() - 1) / OOS_BLOCK_BYTES).min(self.blocks.saturating_sub(1));
        for block in first..=last {
            let (word, bit) = (block / 64, block % 64);
            let Some(slot) = usize::try_from(word).ok().and_then(|w| self.words.get_mut(w)) else {
                return;
            };
            if *slot & (1 << bit) == 0 {
                *slot |= 1 << bit;
                self.set_count += 1;
            }
        }
    }

    /// Bytes marked out of sync (whole blocks).
    pub fn out_of_sync_bytes(&self) -> u64 {
        self.set_count * OOS_BLOCK_BYTES
    }
}
