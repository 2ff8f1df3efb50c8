//! The metadata of a running volume: turns the engine's [`repl::VolumeMeta`] and dirty bitmap
//! pages into superblock and bitmap writes on the volume's [`MetaFile`], and the superblock and
//! bitmaps found at start-up into the engine's [`VolumeConfig`].
//!
//! Invariants:
//! - Every metadata write of a volume happens under one mutex, and the dirty bitmap pages are
//!   taken from the engine inside it: an older image of a page never overwrites a newer one.
//! - A superblock is written after the bitmap pages taken with it, and both are durable
//!   (`fdatasync`) before [`MetaStore::write`] returns; the engine completes what depends on
//!   them only after that (meta crate, write-ordering rules 2 and 3).

use std::sync::Mutex;

use meta::Superblock;
use repl::{GenerationFlags, GenerationIds, IoError, PeerBitmap, VolumeConfig, VolumeMeta};

use crate::metadata::{MetaFile, MetadataError};

/// Bitmap pages of one peer: `(page index, 4 KiB image)`.
pub(crate) type Pages = Vec<(u64, Vec<u8>)>;

/// The open metadata of one volume.
pub(crate) struct MetaStore {
    file: MetaFile,
    /// The superblock as last written; its lock serializes every metadata write.
    written: Mutex<Superblock>,
}

impl std::fmt::Debug for MetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaStore").finish_non_exhaustive()
    }
}

impl MetaStore {
    pub(crate) fn new(file: MetaFile, superblock: Superblock) -> MetaStore {
        MetaStore { file, written: Mutex::new(superblock) }
    }

    /// Bytes of data the volume exports.
    pub(crate) fn data_bytes(&self) -> u64 {
        self.file.layout().data_bytes()
    }

    /// Write the bitmap pages `take_pages` returns (called under the write lock), then, if
    /// given, the superblock fields of `meta`; make them durable.
    pub(crate) fn write(&self, take_pages: impl FnOnce() -> Vec<(u8, Pages)>, meta: Option<&VolumeMeta>) -> Result<(), IoError> {
        let mut superblock = self.written.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut wrote = false;
        for (peer, pages) in take_pages() {
            if pages.is_empty() {
                continue;
            }
            let Some(slot) = superblock.peer_slot_of(peer) else { continue };
            self.file.write_bitmap_pages(slot, &pages).map_err(io_error)?;
            wrote = true;
        }
        if let Some(meta) = meta {
            let mut updated = superblock.clone();
            apply(meta, &mut updated);
            self.file.write_superblock(&updated).map_err(meta_error)?;
            *superblock = updated;
            wrote = true;
        }
        if wrote {
            self.file.sync().map_err(io_error)?;
        }
        Ok(())
    }

    /// The engine's start-up view of the volume: identifiers, disk state and every peer's
    /// bitmap. A primary indicator found set means this node crashed as Primary: the
    /// superblock is rewritten with the indicator cleared and `crashed_primary` set before
    /// anything runs.
    pub(crate) fn volume_config(&self, number: u16, peers: &[u8]) -> Result<VolumeConfig, MetadataError> {
        let mut superblock = self.written.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let crashed_primary = superblock.flags.primary_indicator || superblock.flags.crashed_primary;
        if superblock.flags.primary_indicator {
            superblock.flags.primary_indicator = false;
            superblock.flags.crashed_primary = true;
            self.file.write_superblock(&superblock)?;
            self.file.sync().map_err(|source| MetadataError::Io { what: "sync after crash recovery".into(), source })?;
        }
        let mut bitmaps = Vec::new();
        for &peer in peers {
            let Some(slot) = superblock.peer_slot_of(peer) else { continue };
            bitmaps.push(PeerBitmap { peer, bitmap: self.file.read_bitmap(slot)? });
        }
        let ids = GenerationIds {
            current: superblock.current_uuid,
            bitmap: superblock.bitmap_uuids_by_node_id(),
            history: superblock.history_uuids,
            flags: GenerationFlags { crashed_primary, discard_my_data: false },
        };
        let disk = VolumeMeta::attach_disk_state(superblock.flags.consistent, superblock.flags.was_up_to_date);
        Ok(VolumeConfig { number, size_bytes: self.data_bytes(), ids, disk, bitmaps, crashed_primary })
    }
}

/// The superblock fields the engine owns (see [`repl::VolumeMeta`]).
fn apply(meta: &VolumeMeta, superblock: &mut Superblock) {
    superblock.current_uuid = meta.ids.current;
    superblock.history_uuids = meta.ids.history;
    for slot in &mut superblock.peers {
        if let Some(uuid) = slot.node_id.and_then(|node| meta.ids.bitmap.get(usize::from(node))) {
            slot.bitmap_uuid = *uuid;
        }
    }
    superblock.flags.consistent = meta.consistent();
    superblock.flags.was_up_to_date = meta.was_up_to_date();
    superblock.flags.primary_indicator = meta.primary;
    superblock.flags.crashed_primary = meta.ids.flags.crashed_primary;
}

fn io_error(error: std::io::Error) -> IoError {
    tracing::error!("metadata write failed: {error}");
    if error.raw_os_error() == Some(libc::ENOSPC) {
        IoError::NoSpace
    } else {
        IoError::Io
    }
}

fn meta_error(error: MetadataError) -> IoError {
    tracing::error!("metadata write failed: {error}");
    IoError::Io
}
