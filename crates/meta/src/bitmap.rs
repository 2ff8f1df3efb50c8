//! One peer's out-of-sync bitmap: one bit per `granularity` bytes of data, set when the block
//! may differ on that peer.
//!
//! The in-memory image is the on-disk image: bit `b` is bit `b % 8` (least significant first) of
//! byte `b / 8`, in 4 KiB pages; page `p` covers blocks `p·32768 .. (p+1)·32768`. The bitmap
//! remembers which pages changed since they were last taken for writeback, so the daemon writes
//! only those ([`Bitmap::take_dirty_pages`]), and which of them had a bit cleared
//! ([`Bitmap::has_cleared_pages`]): only those need the data flushed before they are written.
//!
//! Byte ranges map to blocks asymmetrically, always towards "out of sync":
//! [`Bitmap::set`] marks every block the range touches, even partly; [`Bitmap::clear`] clears
//! only blocks the range covers entirely (the last block, which may be shorter than the
//! granularity, counts as covered when the range reaches the end of the data).
//!
//! Invariants: bits past the last block are always zero (in memory and in every page written or
//! loaded); `set_count` equals the number of set bits; a page whose bits changed is dirty until
//! taken; a page in which a bit was cleared is also marked cleared until taken (cleared pages
//! are a subset of dirty pages).

mod rle;

use std::collections::BTreeSet;
use std::ops::Range;

pub use rle::{RleDecoder, RleEncoder, RLE_CHUNK_BYTES_MAX, RLE_CHUNK_BYTES_MIN, RLE_HEADER_BYTES};

use crate::codec::{to_u64, to_usize};
use crate::layout::{
    bitmap_bytes_per_peer, BITMAP_GRANULARITY_BYTES_MAX, BITMAP_GRANULARITY_BYTES_MIN,
};
use crate::{Layout, MetaError};

/// Bytes of one on-disk bitmap page.
pub const BITMAP_PAGE_BYTES: usize = 4096;
/// Blocks one bitmap page covers.
pub const BITMAP_BLOCKS_PER_PAGE: u64 = 8 * 4096;

const _: () = assert!(BITMAP_BLOCKS_PER_PAGE == 8 * BITMAP_PAGE_BYTES as u64);

/// One peer's out-of-sync bitmap over the data area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    data_bytes: u64,
    granularity_bytes: u32,
    block_count: u64,
    bytes: Vec<u8>,
    set_count: u64,
    dirty_pages: BTreeSet<u64>,
    /// The dirty pages in which a bit was cleared since they were last taken (a subset of
    /// `dirty_pages`): writing them claims blocks are in sync, which the data must back.
    cleared_pages: BTreeSet<u64>,
}

impl Bitmap {
    /// An all-clear bitmap over `data_bytes` at `granularity_bytes` per bit (a power of two,
    /// 4 KiB..=1 MiB). No page is dirty.
    pub fn new(data_bytes: u64, granularity_bytes: u32) -> Result<Bitmap, MetaError> {
        let granularity_range = BITMAP_GRANULARITY_BYTES_MIN..=BITMAP_GRANULARITY_BYTES_MAX;
        if !granularity_bytes.is_power_of_two() || !granularity_range.contains(&granularity_bytes) {
            return Err(MetaError::GranularityInvalid { granularity_bytes });
        }
        let length = bitmap_bytes_per_peer(data_bytes, granularity_bytes);
        let bytes = vec![0; to_usize(length, "bitmap size")?];
        Ok(Bitmap {
            data_bytes,
            granularity_bytes,
            block_count: data_bytes.div_ceil(u64::from(granularity_bytes)),
            bytes,
            set_count: 0,
            dirty_pages: BTreeSet::new(),
            cleared_pages: BTreeSet::new(),
        })
    }

    /// This bitmap over a larger data area (`resize`): the same bits, the new blocks clear,
    /// every page dirty (the grown image belongs at the new layout's offsets). A last block
    /// that was short and set stays set, now covering more: towards "out of sync".
    pub fn grown(&self, data_bytes: u64) -> Result<Bitmap, MetaError> {
        if data_bytes < self.data_bytes {
            return Err(MetaError::DataWouldShrink {
                data_bytes: self.data_bytes,
                new_data_bytes: data_bytes,
            });
        }
        let mut grown = Bitmap::new(data_bytes, self.granularity_bytes)?;
        for run in self.runs() {
            grown.set_blocks(run)?;
        }
        grown.mark_all_pages_dirty();
        debug_assert_eq!(grown.set_count, self.set_count);
        Ok(grown)
    }

    /// An all-clear bitmap for one peer of this layout.
    pub fn for_layout(layout: &Layout) -> Result<Bitmap, MetaError> {
        Bitmap::new(
            layout.data_bytes(),
            layout.config().bitmap_granularity_bytes,
        )
    }

    /// Bytes of data covered.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Bytes of data per bit.
    pub fn granularity_bytes(&self) -> u32 {
        self.granularity_bytes
    }

    /// Number of bits (blocks), the last maybe covering less than the granularity.
    pub fn block_count(&self) -> u64 {
        self.block_count
    }

    /// Number of 4 KiB pages of the on-disk image.
    pub fn page_count(&self) -> u64 {
        to_u64(self.bytes.len() / BITMAP_PAGE_BYTES)
    }

    /// Number of set bits.
    pub fn count_set_blocks(&self) -> u64 {
        self.set_count
    }

    /// Bytes of data marked out of sync (the short last block counts its real size).
    pub fn count_set_bytes(&self) -> u64 {
        let granularity = u64::from(self.granularity_bytes);
        let full = self.set_count * granularity;
        let last = self.block_count.checked_sub(1);
        match last {
            Some(last) if self.is_set(last) => {
                full - (self.block_count * granularity - self.data_bytes)
            }
            _ => full,
        }
    }

    /// Whether block `block` is set (false past the end).
    pub fn is_set(&self, block: u64) -> bool {
        if block >= self.block_count {
            return false;
        }
        let (index, mask) = bit_position(block);
        self.bytes.get(index).is_some_and(|byte| byte & mask != 0)
    }

    /// Marks every block that `[offset_bytes, offset_bytes + length_bytes)` touches; returns
    /// how many were newly set.
    pub fn set(&mut self, offset_bytes: u64, length_bytes: u64) -> Result<u64, MetaError> {
        let end_bytes = self.check_bytes(offset_bytes, length_bytes)?;
        let granularity = u64::from(self.granularity_bytes);
        let blocks = offset_bytes / granularity..end_bytes.div_ceil(granularity);
        Ok(self.update(blocks, true))
    }

    /// Clears the blocks that `[offset_bytes, offset_bytes + length_bytes)` covers entirely;
    /// returns how many were cleared.
    pub fn clear(&mut self, offset_bytes: u64, length_bytes: u64) -> Result<u64, MetaError> {
        let end_bytes = self.check_bytes(offset_bytes, length_bytes)?;
        let granularity = u64::from(self.granularity_bytes);
        let first = offset_bytes.div_ceil(granularity);
        let end = if end_bytes == self.data_bytes {
            self.block_count
        } else {
            end_bytes / granularity
        };
        Ok(if first < end {
            self.update(first..end, false)
        } else {
            0
        })
    }

    /// Sets blocks `blocks`; returns how many were newly set.
    pub fn set_blocks(&mut self, blocks: Range<u64>) -> Result<u64, MetaError> {
        self.check_blocks(&blocks)?;
        Ok(self.update(blocks, true))
    }

    /// Clears blocks `blocks`; returns how many were cleared.
    pub fn clear_blocks(&mut self, blocks: Range<u64>) -> Result<u64, MetaError> {
        self.check_blocks(&blocks)?;
        Ok(self.update(blocks, false))
    }

    /// Sets every block; returns how many were newly set.
    pub fn set_all(&mut self) -> u64 {
        self.update(0..self.block_count, true)
    }

    /// Clears every block; returns how many were cleared.
    pub fn clear_all(&mut self) -> u64 {
        self.update(0..self.block_count, false)
    }

    /// The first set block at or after `from`.
    pub fn next_set(&self, from: u64) -> Option<u64> {
        self.next_with(from, true)
    }

    /// The first clear block at or after `from`.
    pub fn next_clear(&self, from: u64) -> Option<u64> {
        self.next_with(from, false)
    }

    /// The maximal runs of set blocks, ascending.
    pub fn runs(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        let mut cursor = 0;
        std::iter::from_fn(move || {
            let start = self.next_set(cursor)?;
            let end = self.next_clear(start).unwrap_or(self.block_count);
            cursor = end;
            Some(start..end)
        })
    }

    /// Sets every block set in `other` (the bitmap exchange on connect); returns how many were
    /// newly set. Both must have the same geometry.
    pub fn or_with(&mut self, other: &Bitmap) -> Result<u64, MetaError> {
        if other.block_count != self.block_count
            || other.granularity_bytes != self.granularity_bytes
        {
            return Err(MetaError::BitmapGeometryMismatch {
                expected_blocks: self.block_count,
                found_blocks: other.block_count,
            });
        }
        let mut newly_set = 0;
        for (page, (mine, theirs)) in self
            .bytes
            .chunks_exact_mut(BITMAP_PAGE_BYTES)
            .zip(other.bytes.chunks_exact(BITMAP_PAGE_BYTES))
            .enumerate()
        {
            let mut changed = 0;
            for (byte, other_byte) in mine.iter_mut().zip(theirs) {
                changed += u64::from((other_byte & !*byte).count_ones());
                *byte |= other_byte;
            }
            if changed > 0 {
                self.dirty_pages.insert(to_u64(page));
            }
            newly_set += changed;
        }
        self.set_count += newly_set;
        Ok(newly_set)
    }

    /// The image of page `page`, if it exists.
    pub fn page(&self, page: u64) -> Option<&[u8]> {
        let start = usize::try_from(page).ok()?.checked_mul(BITMAP_PAGE_BYTES)?;
        self.bytes.get(start..start.checked_add(BITMAP_PAGE_BYTES)?)
    }

    /// Number of pages changed since they were last taken.
    pub fn dirty_page_count(&self) -> usize {
        self.dirty_pages.len()
    }

    /// Whether a bit was cleared in a page not taken since (by [`Bitmap::take_dirty_pages`] or
    /// [`Bitmap::take_dirty_pages_in`]). Writing such a page records blocks as in sync, so the
    /// data written there must be durable first; a page whose bits were only set promises
    /// nothing about data.
    pub fn has_cleared_pages(&self) -> bool {
        !self.cleared_pages.is_empty()
    }

    /// Marks every page dirty (so a fresh metadata area gets every page written).
    pub fn mark_all_pages_dirty(&mut self) {
        self.dirty_pages = (0..self.page_count()).collect();
    }

    /// Takes every changed page for writeback, ascending: `(page index, 4 KiB image)`. The
    /// pages count as clean afterwards; if the write fails the metadata is unusable (the daemon
    /// detaches), so there is no "put back".
    pub fn take_dirty_pages(&mut self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let pages = std::mem::take(&mut self.dirty_pages);
        self.cleared_pages.clear();
        let bitmap: &Bitmap = self;
        pages
            .into_iter()
            .filter_map(move |page| Some((page, bitmap.page(page)?)))
    }

    /// Takes the changed pages holding bits of `[offset_bytes, offset_bytes + length_bytes)`,
    /// as [`Bitmap::take_dirty_pages`] does (used for an extent leaving the activity log).
    pub fn take_dirty_pages_in(
        &mut self,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<impl Iterator<Item = (u64, &[u8])> + '_, MetaError> {
        let end_bytes = self.check_bytes(offset_bytes, length_bytes)?;
        let granularity = u64::from(self.granularity_bytes);
        let first_page = offset_bytes / granularity / BITMAP_BLOCKS_PER_PAGE;
        let end_page = end_bytes
            .div_ceil(granularity)
            .div_ceil(BITMAP_BLOCKS_PER_PAGE);
        let pages: Vec<u64> = self
            .dirty_pages
            .range(first_page..end_page)
            .copied()
            .collect();
        for page in &pages {
            self.dirty_pages.remove(page);
            self.cleared_pages.remove(page);
        }
        let bitmap: &Bitmap = self;
        Ok(pages
            .into_iter()
            .filter_map(move |page| Some((page, bitmap.page(page)?))))
    }

    /// Replaces page `page` with an image read from disk. The page is clean afterwards.
    pub fn load_page(&mut self, page: u64, image: &[u8]) -> Result<(), MetaError> {
        if image.len() != BITMAP_PAGE_BYTES {
            return Err(MetaError::PageLengthInvalid {
                length: image.len(),
            });
        }
        let page_count = self.page_count();
        if page >= page_count {
            return Err(MetaError::PageOutOfRange { page, page_count });
        }
        let first_block = page * BITMAP_BLOCKS_PER_PAGE;
        let valid_bits = self
            .block_count
            .saturating_sub(first_block)
            .min(BITMAP_BLOCKS_PER_PAGE);
        if count_bits(image) != count_bits_below(image, valid_bits) {
            return Err(MetaError::BitmapPaddingNotZero { page });
        }
        let start = to_usize(page, "bitmap page")? * BITMAP_PAGE_BYTES;
        let target = self
            .bytes
            .get_mut(start..start + BITMAP_PAGE_BYTES)
            .ok_or(MetaError::PageOutOfRange { page, page_count })?;
        let before = count_bits(target);
        target.copy_from_slice(image);
        self.set_count = self.set_count - before + count_bits(image);
        self.dirty_pages.remove(&page);
        self.cleared_pages.remove(&page);
        Ok(())
    }

    /// Checks a byte range against the data area; returns its end.
    fn check_bytes(&self, offset_bytes: u64, length_bytes: u64) -> Result<u64, MetaError> {
        offset_bytes
            .checked_add(length_bytes)
            .filter(|&end| end <= self.data_bytes)
            .ok_or(MetaError::RangeOutOfBounds {
                offset_bytes,
                length_bytes,
                data_bytes: self.data_bytes,
            })
    }

    fn check_blocks(&self, blocks: &Range<u64>) -> Result<(), MetaError> {
        if blocks.start > blocks.end || blocks.end > self.block_count {
            let granularity = u64::from(self.granularity_bytes);
            return Err(MetaError::RangeOutOfBounds {
                offset_bytes: blocks.start.saturating_mul(granularity),
                length_bytes: blocks
                    .end
                    .saturating_sub(blocks.start)
                    .saturating_mul(granularity),
                data_bytes: self.data_bytes,
            });
        }
        Ok(())
    }

    /// Sets or clears `blocks` (already checked), page by page; returns how many bits changed.
    fn update(&mut self, blocks: Range<u64>, set: bool) -> u64 {
        assert!(
            blocks.end <= self.block_count,
            "bitmap update past the last block"
        );
        let mut changed_total = 0;
        let mut start = blocks.start;
        while start < blocks.end {
            let page = start / BITMAP_BLOCKS_PER_PAGE;
            let end = ((page + 1) * BITMAP_BLOCKS_PER_PAGE).min(blocks.end);
            let changed = self.update_within_page(start..end, set);
            if changed > 0 {
                self.dirty_pages.insert(page);
                if !set {
                    self.cleared_pages.insert(page);
                }
            }
            changed_total += changed;
            start = end;
        }
        if set {
            self.set_count += changed_total;
        } else {
            self.set_count -= changed_total;
        }
        changed_total
    }

    fn update_within_page(&mut self, blocks: Range<u64>, set: bool) -> u64 {
        let mut changed = 0;
        let mut block = blocks.start;
        while block < blocks.end {
            if block.is_multiple_of(8) && block + 8 <= blocks.end {
                let whole = byte_index(block)..byte_index(blocks.end);
                let fill = if set { 0xFF } else { 0 };
                for byte in self.bytes.get_mut(whole.clone()).unwrap_or_default() {
                    changed += u64::from((*byte ^ fill).count_ones());
                    *byte = fill;
                }
                block = to_u64(whole.end) * 8;
                continue;
            }
            let (index, mask) = bit_position(block);
            if let Some(byte) = self.bytes.get_mut(index) {
                if (*byte & mask != 0) != set {
                    *byte ^= mask;
                    changed += 1;
                }
            }
            block += 1;
        }
        changed
    }

    fn next_with(&self, from: u64, want: bool) -> Option<u64> {
        let mut block = from;
        let skip_word = if want { 0 } else { u64::MAX };
        while block < self.block_count {
            if block.is_multiple_of(64) && block + 64 <= self.block_count {
                let index = byte_index(block);
                let word = self.bytes.get(index..index + 8)?;
                let word = u64::from_le_bytes(word.try_into().ok()?);
                if word == skip_word {
                    block += 64;
                    continue;
                }
                let offset = if want {
                    word.trailing_zeros()
                } else {
                    (!word).trailing_zeros()
                };
                return Some(block + u64::from(offset));
            }
            if self.is_set(block) == want {
                return Some(block);
            }
            block += 1;
        }
        None
    }
}

/// Byte index of `block` (the caller has checked `block` against the bitmap, whose length fits
/// in memory, so the conversion cannot fail).
fn byte_index(block: u64) -> usize {
    usize::try_from(block / 8).unwrap_or(usize::MAX)
}

fn bit_position(block: u64) -> (usize, u8) {
    let shift = u32::try_from(block % 8).unwrap_or(0);
    (byte_index(block), 1_u8 << shift)
}

fn count_bits(bytes: &[u8]) -> u64 {
    bytes.iter().map(|byte| u64::from(byte.count_ones())).sum()
}

/// Set bits among the first `bits` bits of `bytes`.
fn count_bits_below(bytes: &[u8], bits: u64) -> u64 {
    let whole = byte_index(bits).min(bytes.len());
    let mut count = count_bits(bytes.get(..whole).unwrap_or_default());
    let remainder = u32::try_from(bits % 8).unwrap_or(0);
    if remainder > 0 {
        if let Some(byte) = bytes.get(whole) {
            count += u64::from((byte & ((1_u8 << remainder) - 1)).count_ones());
        }
    }
    count
}

#[cfg(test)]
mod tests;
