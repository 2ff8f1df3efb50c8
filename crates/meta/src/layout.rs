//! Geometry of the metadata: where the superblock, the activity-log ring and each peer's bitmap
//! sit, and how many bytes of the backing device remain for data.
//!
//! Internal metadata lives at the end of the backing device (the exported size shrinks):
//!
//! ```text
//! backing: [ data ....... | (gap < 4 KiB·k) | bitmap 0 | … | bitmap n-1 | AL ring | superblock ]
//!                                                                            ^ the last 4 KiB-
//!                                                                              aligned block
//! ```
//!
//! External metadata lives in its own file or device, from offset 0:
//!
//! ```text
//! metadata: [ superblock | AL ring | bitmap 0 | … | bitmap n-1 | unused ]
//! ```
//!
//! Invariants: every region starts and ends on a 4 KiB boundary; regions never overlap; the data
//! size is a non-zero multiple of 4 KiB; with internal metadata, data and metadata fit in the
//! backing device and the data size is the largest that does, or `data_bytes_max` (rounded down
//! to 4 KiB) when that is smaller (a size agreed by `resize`); with external metadata the data
//! size is the backing device's, capped the same way. A [`Layout`] only exists for a
//! configuration that passed every check here, so holders never re-check.
//!
//! Growing ([`Layout::grow`]): the new layout of a backing device that got larger, refused when
//! it would shrink the data, or (internal) when the new metadata would overlap the old one, so
//! the old metadata stays intact until the new one is written and made authoritative.

use crate::activity_log::{al_extents_max, AL_EXTENTS_MAX, AL_EXTENTS_MIN, AL_EXTENT_BYTES};
use crate::MetaError;

/// The unit of every metadata region and of the data size: 4 KiB.
pub const BLOCK_BYTES: u64 = 4096;
/// Size of the superblock: one block.
pub const SUPERBLOCK_BYTES: u64 = BLOCK_BYTES;
/// Fewest peer slots a metadata area holds.
pub const PEER_SLOTS_MIN: u8 = 1;
/// Most peer slots a metadata area holds (DRBD 9 allows 32 nodes, so 31 peers).
pub const PEER_SLOTS_MAX: u8 = 31;
/// Finest bitmap granularity: one bit per 4 KiB.
pub const BITMAP_GRANULARITY_BYTES_MIN: u32 = 4096;
/// Coarsest bitmap granularity: one bit per 1 MiB.
pub const BITMAP_GRANULARITY_BYTES_MAX: u32 = 1 << 20;
/// Default bitmap granularity (DRBD's).
pub const BITMAP_GRANULARITY_BYTES_DEFAULT: u32 = 4096;
/// Smallest activity-log ring: two transactions (one may be torn, one must be whole).
pub const AL_RING_BYTES_MIN: u32 = 2 * 4096;
/// Largest activity-log ring: recovery reads the whole ring, so keep it bounded.
pub const AL_RING_BYTES_MAX: u32 = 4 << 20;
/// Default activity-log ring: 8 transactions of 4 KiB.
pub const AL_RING_BYTES_DEFAULT: u32 = 32 * 1024;
/// Default `al-extents` (DRBD's).
pub const AL_EXTENTS_DEFAULT: u32 = 1237;

const _: () = assert!(SUPERBLOCK_BYTES == BLOCK_BYTES);
const _: () = assert!(BITMAP_GRANULARITY_BYTES_MIN.is_power_of_two());
const _: () = assert!(BITMAP_GRANULARITY_BYTES_MAX.is_power_of_two());
const _: () = assert!(BITMAP_GRANULARITY_BYTES_DEFAULT.is_power_of_two());
const _: () =
    assert!(AL_RING_BYTES_MIN.is_multiple_of(4096) && AL_RING_BYTES_MAX.is_multiple_of(4096));
const _: () = assert!(AL_RING_BYTES_DEFAULT.is_multiple_of(4096));
const _: () = assert!(AL_RING_BYTES_MIN <= AL_RING_BYTES_DEFAULT);
const _: () = assert!(AL_RING_BYTES_DEFAULT <= AL_RING_BYTES_MAX);
// One bitmap page (4 KiB of bits) at the finest granularity covers 128 MiB of data.
const _: () = assert!(BLOCK_BYTES * 8 * (BITMAP_GRANULARITY_BYTES_MIN as u64) == 128 << 20);
// An activity-log extent is a whole number of bitmap bits at any granularity.
const _: () = assert!(AL_EXTENT_BYTES.is_multiple_of(BITMAP_GRANULARITY_BYTES_MAX as u64));

/// Where the metadata lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// At the end of the backing device; the data size shrinks to make room.
    Internal,
    /// In a separate file or device of `metadata_bytes` bytes; all of the backing device is data.
    External {
        /// Size of the metadata file or device.
        metadata_bytes: u64,
    },
}

/// Everything a layout is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayoutConfig {
    /// Internal or external metadata.
    pub placement: Placement,
    /// Size of the backing device.
    pub backing_bytes: u64,
    /// Number of peer bitmaps (1..=31).
    pub peer_slots: u8,
    /// Bytes of data per bitmap bit (power of two, 4 KiB..=1 MiB).
    pub bitmap_granularity_bytes: u32,
    /// Size of the activity-log ring (multiple of 4 KiB).
    pub al_ring_bytes: u32,
    /// Activity-log cache size (`al-extents`, 7..=65534, and at most what the ring recovers).
    pub al_extents: u32,
    /// A cap on the data size below what the backing device gives (`resize --size`, or the
    /// smallest size every node offers); None: as large as the backing device allows.
    pub data_bytes_max: Option<u64>,
}

impl LayoutConfig {
    /// A configuration with the default granularity, ring size and `al-extents`.
    pub fn new(placement: Placement, backing_bytes: u64, peer_slots: u8) -> LayoutConfig {
        LayoutConfig {
            placement,
            backing_bytes,
            peer_slots,
            bitmap_granularity_bytes: BITMAP_GRANULARITY_BYTES_DEFAULT,
            al_ring_bytes: AL_RING_BYTES_DEFAULT,
            al_extents: AL_EXTENTS_DEFAULT,
            data_bytes_max: None,
        }
    }

    /// Checks every parameter except the sizes.
    fn validate_parameters(&self) -> Result<(), MetaError> {
        if !(PEER_SLOTS_MIN..=PEER_SLOTS_MAX).contains(&self.peer_slots) {
            return Err(MetaError::PeerSlotsOutOfRange {
                peer_slots: self.peer_slots,
            });
        }
        let granularity = self.bitmap_granularity_bytes;
        let granularity_range = BITMAP_GRANULARITY_BYTES_MIN..=BITMAP_GRANULARITY_BYTES_MAX;
        if !granularity.is_power_of_two() || !granularity_range.contains(&granularity) {
            return Err(MetaError::GranularityInvalid {
                granularity_bytes: granularity,
            });
        }
        let ring = self.al_ring_bytes;
        if !ring.is_multiple_of(4096) || !(AL_RING_BYTES_MIN..=AL_RING_BYTES_MAX).contains(&ring) {
            return Err(MetaError::AlRingBytesInvalid {
                al_ring_bytes: ring,
                al_ring_bytes_min: AL_RING_BYTES_MIN,
                al_ring_bytes_max: AL_RING_BYTES_MAX,
            });
        }
        let al_extents = self.al_extents;
        if !(u32::from(AL_EXTENTS_MIN)..=u32::from(AL_EXTENTS_MAX)).contains(&al_extents) {
            return Err(MetaError::AlExtentsOutOfRange { al_extents });
        }
        if let Some(cap) = self.data_bytes_max {
            if cap < BLOCK_BYTES {
                return Err(MetaError::DataCapTooSmall {
                    data_bytes_max: cap,
                });
            }
        }
        let al_extents_max = al_extents_max(ring);
        if al_extents > al_extents_max {
            return Err(MetaError::AlExtentsExceedRing {
                al_extents,
                al_extents_max,
                al_ring_bytes: ring,
            });
        }
        Ok(())
    }

    /// `data_bytes` limited by `data_bytes_max` rounded down to 4 KiB (at least one block, as
    /// `validate_parameters` checked).
    fn cap(&self, data_bytes: u64) -> u64 {
        match self.data_bytes_max {
            Some(cap) => data_bytes.min(cap / BLOCK_BYTES * BLOCK_BYTES),
            None => data_bytes,
        }
    }

    /// Bytes of metadata for `data_bytes` of data, or None on overflow.
    fn metadata_bytes_for(&self, data_bytes: u64) -> Option<u64> {
        let bitmaps = bitmap_bytes_per_peer(data_bytes, self.bitmap_granularity_bytes)
            .checked_mul(u64::from(self.peer_slots))?;
        SUPERBLOCK_BYTES
            .checked_add(u64::from(self.al_ring_bytes))?
            .checked_add(bitmaps)
    }
}

/// Where a grown layout is computed for ([`Layout::grow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowTarget {
    /// The placement now (an external area may have grown too).
    pub placement: Placement,
    /// The backing device's size now.
    pub backing_bytes: u64,
    /// The data size agreed by the nodes, if smaller than the device gives.
    pub data_bytes_max: Option<u64>,
}

/// A byte range of the backing device (internal) or metadata device (external).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub offset_bytes: u64,
    /// Number of bytes.
    pub length_bytes: u64,
}

impl Region {
    /// One past the last byte.
    pub fn end_bytes(&self) -> u64 {
        self.offset_bytes.saturating_add(self.length_bytes)
    }
}

/// The computed geometry of one volume's metadata. Construct with [`Layout::compute`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    config: LayoutConfig,
    data_bytes: u64,
    superblock: Region,
    al_ring: Region,
    bitmaps: Region,
    bitmap_bytes_per_peer: u64,
}

impl Layout {
    /// Computes the layout, or says which parameter or size is wrong.
    pub fn compute(config: &LayoutConfig) -> Result<Layout, MetaError> {
        config.validate_parameters()?;
        let layout = match config.placement {
            Placement::Internal => Self::compute_internal(config)?,
            Placement::External { metadata_bytes } => {
                Self::compute_external(config, metadata_bytes)?
            }
        };
        if layout.al_extent_count() >= u64::from(u32::MAX) {
            return Err(MetaError::DataTooLarge {
                data_bytes: layout.data_bytes,
            });
        }
        layout.assert_invariants();
        Ok(layout)
    }

    fn compute_internal(config: &LayoutConfig) -> Result<Layout, MetaError> {
        let backing_blocks = config.backing_bytes / BLOCK_BYTES;
        let fits = |data_blocks: u64| {
            let data_bytes = data_blocks * BLOCK_BYTES;
            config
                .metadata_bytes_for(data_bytes)
                .and_then(|meta| meta.checked_add(data_bytes))
                .is_some_and(|total| total <= backing_blocks * BLOCK_BYTES)
        };
        if !fits(1) {
            return Err(MetaError::BackingTooSmall {
                backing_bytes: config.backing_bytes,
                needed_bytes: config
                    .metadata_bytes_for(BLOCK_BYTES)
                    .unwrap_or(u64::MAX)
                    .saturating_add(BLOCK_BYTES),
            });
        }
        // Metadata grows with the data, so "fits" is monotone: binary-search the largest size.
        let (mut low, mut high) = (1, backing_blocks);
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if fits(middle) {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        let data_bytes = config.cap(low * BLOCK_BYTES);
        let end = backing_blocks * BLOCK_BYTES;
        let bitmap_bytes_per_peer =
            bitmap_bytes_per_peer(data_bytes, config.bitmap_granularity_bytes);
        let superblock = Region {
            offset_bytes: end - SUPERBLOCK_BYTES,
            length_bytes: SUPERBLOCK_BYTES,
        };
        let ring_bytes = u64::from(config.al_ring_bytes);
        let al_ring = Region {
            offset_bytes: superblock.offset_bytes - ring_bytes,
            length_bytes: ring_bytes,
        };
        let bitmaps_bytes = bitmap_bytes_per_peer * u64::from(config.peer_slots);
        let bitmaps = Region {
            offset_bytes: al_ring.offset_bytes - bitmaps_bytes,
            length_bytes: bitmaps_bytes,
        };
        Ok(Layout {
            config: *config,
            data_bytes,
            superblock,
            al_ring,
            bitmaps,
            bitmap_bytes_per_peer,
        })
    }

    fn compute_external(config: &LayoutConfig, metadata_bytes: u64) -> Result<Layout, MetaError> {
        let data_bytes = config.cap(config.backing_bytes / BLOCK_BYTES * BLOCK_BYTES);
        if data_bytes == 0 {
            return Err(MetaError::BackingTooSmall {
                backing_bytes: config.backing_bytes,
                needed_bytes: BLOCK_BYTES,
            });
        }
        let needed_bytes = config.metadata_bytes_for(data_bytes).unwrap_or(u64::MAX);
        if needed_bytes > metadata_bytes {
            return Err(MetaError::MetadataAreaTooSmall {
                available_bytes: metadata_bytes,
                needed_bytes,
            });
        }
        let bitmap_bytes_per_peer =
            bitmap_bytes_per_peer(data_bytes, config.bitmap_granularity_bytes);
        let superblock = Region {
            offset_bytes: 0,
            length_bytes: SUPERBLOCK_BYTES,
        };
        let al_ring = Region {
            offset_bytes: SUPERBLOCK_BYTES,
            length_bytes: u64::from(config.al_ring_bytes),
        };
        let bitmaps = Region {
            offset_bytes: al_ring.end_bytes(),
            length_bytes: bitmap_bytes_per_peer * u64::from(config.peer_slots),
        };
        Ok(Layout {
            config: *config,
            data_bytes,
            superblock,
            al_ring,
            bitmaps,
            bitmap_bytes_per_peer,
        })
    }

    /// Asserts the geometry invariants of the module comment (a failure is a bug here).
    fn assert_invariants(&self) {
        for region in [self.superblock, self.al_ring, self.bitmaps] {
            assert!(
                region.offset_bytes.is_multiple_of(BLOCK_BYTES),
                "region not 4 KiB aligned"
            );
            assert!(
                region.length_bytes.is_multiple_of(BLOCK_BYTES),
                "region length not 4 KiB aligned"
            );
        }
        assert!(self.data_bytes > 0 && self.data_bytes.is_multiple_of(BLOCK_BYTES));
        assert!(
            self.bitmap_bytes_per_peer * 8 * u64::from(self.config.bitmap_granularity_bytes)
                >= self.data_bytes
        );
        match self.config.placement {
            Placement::Internal => {
                assert!(
                    self.data_bytes <= self.bitmaps.offset_bytes,
                    "data overlaps bitmaps"
                );
                assert!(self.bitmaps.end_bytes() == self.al_ring.offset_bytes);
                assert!(self.al_ring.end_bytes() == self.superblock.offset_bytes);
                assert!(self.superblock.end_bytes() <= self.config.backing_bytes);
            }
            Placement::External { metadata_bytes } => {
                assert!(self.superblock.end_bytes() == self.al_ring.offset_bytes);
                assert!(self.al_ring.end_bytes() == self.bitmaps.offset_bytes);
                assert!(
                    self.bitmaps.end_bytes() <= metadata_bytes,
                    "bitmaps past metadata end"
                );
                assert!(self.data_bytes <= self.config.backing_bytes);
            }
        }
    }

    /// The layout of this metadata on a grown device (`resize`): same parameters, the new
    /// backing size (and, external, the metadata area's size now) and cap. Refused when the
    /// data would shrink, the placement kind changed, or (internal) the new metadata would
    /// overlap the old: the move writes the new metadata while the old is still the
    /// authoritative copy, so they must not share a byte. A grow by less than about the
    /// metadata's size is therefore refused; grow the device further.
    pub fn grow(&self, target: &GrowTarget) -> Result<Layout, MetaError> {
        let same_kind = matches!(
            (self.config.placement, target.placement),
            (Placement::Internal, Placement::Internal)
                | (Placement::External { .. }, Placement::External { .. })
        );
        if !same_kind {
            return Err(MetaError::PlacementChanged);
        }
        let config = LayoutConfig {
            placement: target.placement,
            backing_bytes: target.backing_bytes,
            data_bytes_max: target.data_bytes_max,
            ..self.config
        };
        let grown = Layout::compute(&config)?;
        if grown.data_bytes < self.data_bytes {
            return Err(MetaError::DataWouldShrink {
                data_bytes: self.data_bytes,
                new_data_bytes: grown.data_bytes,
            });
        }
        let old_end = self.superblock.end_bytes();
        let overlaps = grown.bitmaps.offset_bytes < old_end;
        if self.config.placement == Placement::Internal && overlaps && grown != *self {
            return Err(MetaError::GrowOverlapsMetadata {
                backing_bytes: target.backing_bytes,
                needed_bytes: grow_needed_bytes(&config, old_end, grown.metadata_bytes()),
            });
        }
        Ok(grown)
    }

    /// The byte range of the data that a grow from this layout to `grown` must resync (as
    /// `(offset, length)`, None if empty): the whole new area, or with `assume_clean` (the
    /// administrator vouches that what the device grew by reads the same on every node) only
    /// the part of it that belonged to the old device: the old metadata and the gap before
    /// it, which differ between nodes.
    pub fn grow_resync_range(&self, grown: &Layout, assume_clean: bool) -> Option<(u64, u64)> {
        let start = self.data_bytes;
        let end = if assume_clean {
            grown.data_bytes.min(self.config.backing_bytes)
        } else {
            grown.data_bytes
        };
        (end > start).then(|| (start, end - start))
    }

    /// The configuration this layout was computed from.
    pub fn config(&self) -> &LayoutConfig {
        &self.config
    }

    /// Bytes of the backing device exported as data (a multiple of 4 KiB).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Where the superblock is.
    pub fn superblock(&self) -> Region {
        self.superblock
    }

    /// Where the activity-log ring is.
    pub fn al_ring(&self) -> Region {
        self.al_ring
    }

    /// Where all peer bitmaps are, slot 0 first.
    pub fn bitmaps(&self) -> Region {
        self.bitmaps
    }

    /// Bytes of one peer's bitmap on disk (a multiple of 4 KiB).
    pub fn bitmap_bytes_per_peer(&self) -> u64 {
        self.bitmap_bytes_per_peer
    }

    /// Where peer slot `slot`'s bitmap is.
    pub fn bitmap(&self, slot: u8) -> Result<Region, MetaError> {
        if slot >= self.config.peer_slots {
            return Err(MetaError::PeerSlotOutOfRange {
                slot,
                peer_slots: self.config.peer_slots,
            });
        }
        Ok(Region {
            offset_bytes: self.bitmaps.offset_bytes + u64::from(slot) * self.bitmap_bytes_per_peer,
            length_bytes: self.bitmap_bytes_per_peer,
        })
    }

    /// Bytes the metadata occupies: superblock, ring and bitmaps.
    pub fn metadata_bytes(&self) -> u64 {
        SUPERBLOCK_BYTES + self.al_ring.length_bytes + self.bitmaps.length_bytes
    }

    /// Bits in one peer's bitmap: data blocks of the configured granularity, the last maybe
    /// partial.
    pub fn bitmap_blocks(&self) -> u64 {
        self.data_bytes
            .div_ceil(u64::from(self.config.bitmap_granularity_bytes))
    }

    /// Transactions the activity-log ring holds.
    pub fn al_ring_blocks(&self) -> u32 {
        self.config.al_ring_bytes / 4096
    }

    /// Activity-log extents covering the data, the last maybe partial.
    pub fn al_extent_count(&self) -> u64 {
        self.data_bytes.div_ceil(AL_EXTENT_BYTES)
    }
}

/// The smallest backing size whose internal metadata starts at or past `old_end`: the old end
/// plus the metadata the larger device then needs (its bitmaps grow with it, so iterate).
fn grow_needed_bytes(config: &LayoutConfig, old_end: u64, metadata_bytes: u64) -> u64 {
    let mut needed = old_end.saturating_add(metadata_bytes);
    for _ in 0..8 {
        let at_needed = LayoutConfig {
            backing_bytes: needed,
            ..*config
        };
        match Layout::compute(&at_needed) {
            Ok(layout) if layout.bitmaps.offset_bytes < old_end => {
                needed = old_end.saturating_add(layout.metadata_bytes());
            }
            _ => break,
        }
    }
    needed
}

/// Bytes of one peer's on-disk bitmap for `data_bytes` of data at `granularity_bytes` per bit:
/// `ceil(ceil(data / granularity) / 8)` rounded up to 4 KiB.
pub fn bitmap_bytes_per_peer(data_bytes: u64, granularity_bytes: u32) -> u64 {
    let blocks = data_bytes.div_ceil(u64::from(granularity_bytes.max(1)));
    blocks.div_ceil(8).div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}

#[cfg(test)]
mod tests;
