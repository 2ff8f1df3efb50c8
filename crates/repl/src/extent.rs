//! Byte ranges of a volume. (Which blocks differ on a peer is a `meta::Bitmap`.)
//!
//! Invariant: an [`Extent`] built by [`Extent::new`] never wraps (`offset + length` fits in
//! u64).

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
        self.length > 0
            && other.length > 0
            && self.offset < other.end()
            && other.offset < self.end()
    }
}
