//! Moving one volume's metadata to a grown backing device (`tandem resize`).
//!
//! Internal metadata sits at the end of the backing device, so when the device grows the
//! superblock, the activity-log ring and the bitmaps move to the new end, and the bitmaps grow
//! with the data. The move is crash-safe: whatever moment it stops at, the next attach finds
//! the old metadata (old size) or the new one (new size), never neither. The order:
//!
//! 1. The new bitmaps and the copied ring are written to the new metadata area, then synced.
//!    [`meta::Layout::grow`] guarantees that this area shares no byte with the old metadata,
//!    so the old superblock, ring and bitmaps are still whole and authoritative: the end of
//!    the device holds no superblock yet, and attach finds the old one by searching back
//!    (`device.rs`, "moved metadata").
//! 2. **Commit:** the new superblock is written at the new end, then synced. From here on
//!    attach reads it at the end and uses the new layout. A torn commit write fails its
//!    checksum, so attach falls back to the search and the old metadata (step 1 again).
//! 3. The old metadata is zeroed, then synced. It lies in the new data area (or the gap before
//!    the new metadata), where it would read as different on each node; the caller marks that
//!    range out of sync as well, so a crash before this step is healed by the resync.
//!
//! External metadata keeps its place (superblock at the start of its own device); only the
//! bitmaps grow. When one peer's bitmap keeps its size (the grow stays within the 4 KiB
//! bitmap pages it has), or there is only one peer slot, the new bitmaps cover the old ones
//! byte for byte where they overlap, and the superblock write is the commit. With several
//! slots whose bitmaps would shift, a cut-short rewrite would leave the old layout's later
//! bitmaps overwritten, so that case is refused.
//!
//! Invariant: [`MetaFile::grow`] changes this file's layout only after the commit is durable;
//! on any error before that, the file still describes (and writes to) the old metadata.

use meta::layout::BLOCK_BYTES;
use meta::{Bitmap, GrowTarget, Layout, Placement, Region, Superblock};

use super::{MetaFile, MetadataError, BLOCK_LEN};

/// One write of a metadata move, named for failure injection (a test stops the move before
/// a given step to stand for a crash there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MoveStep {
    /// Writing the grown bitmap of peer slot N at its new offset.
    Bitmap(u8),
    /// Copying the activity-log ring to its new offset.
    Ring,
    /// Syncing everything written before the commit.
    SyncBeforeCommit,
    /// Writing the superblock of the new layout: the commit.
    Commit,
    /// Syncing the commit.
    SyncCommit,
    /// Zeroing the old metadata (internal only).
    ClearOld,
}

/// What [`MetaFile::grow`] writes.
#[derive(Debug)]
pub(crate) struct Grow<'a> {
    /// The layout on the grown device ([`MetaFile::plan_grow`]).
    pub(crate) layout: Layout,
    /// The superblock in force now (on this file's layout).
    pub(crate) superblock: &'a Superblock,
    /// The grown bitmap of each peer slot in use, by slot; other slots are written as zeros.
    pub(crate) bitmaps: &'a [(u8, Bitmap)],
}

impl MetaFile {
    /// The layout of this metadata on the device as it is now, with the data capped at
    /// `data_bytes_max` (the size the nodes agreed on); refused as [`Layout::grow`] refuses.
    pub(crate) fn plan_grow(&self, data_bytes_max: Option<u64>) -> Result<Layout, MetadataError> {
        let (backing_bytes, placement) = self.area.sizes_now()?;
        let target = GrowTarget {
            placement,
            backing_bytes,
            data_bytes_max,
        };
        self.layout
            .grow(&target)
            .map_err(|source| MetadataError::Layout {
                path: self.area.path_text(),
                source,
            })
    }

    /// Every slot's bitmap read from disk and grown to `layout`, with `resync` (an
    /// `(offset, length)` of the new data) marked in the slots in use. For a node that is not
    /// running (and for tests); a running node grows the engine's bitmaps instead.
    #[cfg(test)]
    pub(crate) fn grown_bitmaps(
        &self,
        superblock: &Superblock,
        layout: &Layout,
        resync: Option<(u64, u64)>,
    ) -> Result<Vec<(u8, Bitmap)>, MetadataError> {
        let mut grown = Vec::new();
        for (slot, peer) in (0_u8..).zip(&superblock.peers) {
            if peer.node_id.is_none() {
                continue;
            }
            let mut bitmap = self
                .read_bitmap(slot)?
                .grown(layout.data_bytes())
                .map_err(|source| self.layout_error(source))?;
            if let Some((offset, length)) = resync {
                bitmap
                    .set(offset, length)
                    .map_err(|source| self.layout_error(source))?;
            }
            grown.push((slot, bitmap));
        }
        Ok(grown)
    }

    /// Moves the metadata to `grow.layout` in the crash-safe order of the module comment and
    /// returns the superblock now in force. `before_write` runs before each step; an error
    /// from it stops the move there (production passes `|_| Ok(())`).
    pub(crate) fn grow(
        &mut self,
        grow: &Grow<'_>,
        before_write: &mut dyn FnMut(MoveStep) -> std::io::Result<()>,
    ) -> Result<Superblock, MetadataError> {
        let old = self.layout;
        let new = grow.layout;
        assert!(new.data_bytes() >= old.data_bytes(), "a grow never shrinks");
        self.refuse_unsafe_external(&new)?;
        let place = self.area.describe();
        let io = |what: &str, source| MetadataError::Io {
            what: format!("resize: cannot {what} {place}"),
            source,
        };
        self.write_grown_bitmaps(grow, before_write)
            .map_err(|e| io("write the grown bitmaps", e))?;
        if old.al_ring() != new.al_ring() {
            before_write(MoveStep::Ring).map_err(|e| io("copy the activity log", e))?;
            let ring = self.read_al_ring()?;
            self.area
                .write_at(new.al_ring().offset_bytes, &ring)
                .map_err(|e| io("copy the activity log", e))?;
        }
        before_write(MoveStep::SyncBeforeCommit).map_err(|e| io("sync", e))?;
        self.area.sync().map_err(|e| io("sync", e))?;
        let mut superblock = grow.superblock.clone();
        superblock.layout = new;
        let block = superblock
            .encode()
            .map_err(|source| self.layout_error(source))?;
        before_write(MoveStep::Commit).map_err(|e| io("write the new superblock", e))?;
        self.area
            .write_at(new.superblock().offset_bytes, &block)
            .map_err(|e| io("write the new superblock", e))?;
        before_write(MoveStep::SyncCommit).map_err(|e| io("sync the new superblock", e))?;
        self.area
            .sync()
            .map_err(|e| io("sync the new superblock", e))?;
        // Committed: from here on this file is the new metadata.
        self.layout = new;
        self.area.backing_bytes = new.config().backing_bytes;
        self.area.device_bytes = new.config().backing_bytes;
        self.area.placement = new.config().placement;
        self.area.placement_now = new.config().placement;
        if old.config().placement == Placement::Internal && old != new {
            before_write(MoveStep::ClearOld).map_err(|e| io("clear the old metadata", e))?;
            self.zero(old_metadata(&old))
                .map_err(|e| io("clear the old metadata", e))?;
            self.area.sync().map_err(|e| io("sync", e))?;
        }
        Ok(superblock)
    }

    /// Writes every slot's grown bitmap (zeros for slots not in use) at the new offsets.
    fn write_grown_bitmaps(
        &self,
        grow: &Grow<'_>,
        before_write: &mut dyn FnMut(MoveStep) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let new = grow.layout;
        for slot in 0..new.config().peer_slots {
            before_write(MoveStep::Bitmap(slot))?;
            let region = new.bitmap(slot).map_err(super::invalid_input)?;
            let Some((_, bitmap)) = grow.bitmaps.iter().find(|(s, _)| *s == slot) else {
                self.zero(region)?;
                continue;
            };
            if bitmap.data_bytes() != new.data_bytes() {
                return Err(super::invalid_input(meta::MetaError::DataWouldShrink {
                    data_bytes: new.data_bytes(),
                    new_data_bytes: bitmap.data_bytes(),
                }));
            }
            for page in 0..bitmap.page_count() {
                let image = bitmap.page(page).unwrap_or(&[0; BLOCK_LEN]);
                self.area
                    .write_at(region.offset_bytes + page * BLOCK_BYTES, image)?;
            }
        }
        Ok(())
    }

    /// External metadata with several slots whose bitmaps would shift: refused (see the
    /// module comment).
    fn refuse_unsafe_external(&self, new: &Layout) -> Result<(), MetadataError> {
        let shifts = new.bitmap_bytes_per_peer() != self.layout.bitmap_bytes_per_peer();
        let external = matches!(self.layout.config().placement, Placement::External { .. });
        if external && shifts && new.config().peer_slots > 1 {
            return Err(MetadataError::ResizeRefused {
                path: self.area.path_text(),
                reason: format!(
                    "its {} peer bitmaps would each grow from {} to {} bytes and shift within the \
                     metadata area, which cannot be done crash-safely in place; recreate the \
                     external metadata for the new size (create-md --force) and resync, or grow \
                     by less than the bitmaps' next 4 KiB page",
                    new.config().peer_slots,
                    self.layout.bitmap_bytes_per_peer(),
                    new.bitmap_bytes_per_peer()
                ),
            });
        }
        Ok(())
    }
}

/// The old internal metadata area: bitmaps, ring and superblock.
fn old_metadata(old: &Layout) -> Region {
    Region {
        offset_bytes: old.bitmaps().offset_bytes,
        length_bytes: old.superblock().end_bytes() - old.bitmaps().offset_bytes,
    }
}
