//! The on-disk metadata of one volume, open for I/O: superblock, per-peer bitmaps and the
//! activity-log ring at the offsets of a [`meta::Layout`] (the `meta` crate owns the formats;
//! this module reads, writes and syncs them).
//!
//! Internal metadata sits at the end of the backing disk; external metadata in `meta-disk
//! PATH` (the whole file or device) or `meta-disk PATH [IDX]` (the 128 MiB slot IDX).
//!
//! Invariants:
//! - A [`MetaFile`] exists only for metadata that decoded cleanly, belongs to this node id,
//!   matches the backing device's current size and placement, and has a bitmap slot for every
//!   configured peer. Every refusal is a [`MetadataError`] that names the device and what to do;
//!   garbage on disk never panics.
//! - While a [`MetaFile`] lives it holds an exclusive lock on its metadata area (see
//!   `device.rs`), so a second node or an offline command cannot write it concurrently.
//! - All I/O is positioned at layout offsets, in whole 4 KiB pages.

mod device;
mod edit;
mod gi;
mod grow;
mod offline;
mod signature;

pub use edit::{outdate_md, wipe_md};
pub use gi::{read_generations, GiFilter};
pub(crate) use gi::{volume_generations, GiPeer};
pub(crate) use grow::Grow;
#[cfg(test)]
pub(crate) use grow::MoveStep;
pub use offline::{create_md, dump_md, CreateOptions, MdTarget, VolumeDump};

use std::path::PathBuf;

use meta::layout::BLOCK_BYTES;
use meta::{Bitmap, Layout, LayoutConfig, MetaError, Region, Superblock};

use device::{Access, Area};

/// Bytes of one metadata block (superblock, bitmap page, ring transaction).
const BLOCK_LEN: usize = 4096;
/// Pages read or zeroed per I/O call: 256 KiB.
const IO_CHUNK_PAGES: u64 = 64;

const _: () = assert!(BLOCK_LEN as u64 == BLOCK_BYTES);
const _: () = assert!(BLOCK_LEN == meta::bitmap::BITMAP_PAGE_BYTES);

/// Why metadata could not be opened, created, read or written.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// An I/O call on a metadata or backing device failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// Another process (a running tandem node, or `create-md`/`dump-md`) holds the device.
    #[error("{path} is in use by a running tandem node (stop it first)")]
    Locked { path: String },
    /// There is no tandem superblock where the metadata belongs.
    #[error("no tandem metadata {place}{hint}; create it with `tandem create-md <resource>`")]
    Missing { place: String, hint: &'static str },
    /// There is a superblock, but it is damaged or of another format version.
    #[error("unusable tandem metadata in {place}: {source}")]
    Corrupt { place: String, source: MetaError },
    /// The metadata was created for another node id.
    #[error(
        "the metadata on {path} belongs to node-id {on_disk}, but this node has node-id \
         {configured} in the configuration; recreate it with `tandem create-md --force` (this \
         loses its sync state)"
    )]
    NodeIdMismatch {
        path: String,
        on_disk: u8,
        configured: u8,
    },
    /// The metadata was created for another device size or placement.
    #[error(
        "the metadata on {path} does not match the device any more: {source}; a device that grew \
         is resized with `tandem resize`; otherwise `tandem create-md --force` recreates the \
         metadata (and loses its sync state)"
    )]
    LayoutMismatch { path: String, source: MetaError },
    /// `resize` cannot move or grow this metadata.
    #[error("cannot resize the metadata on {path}: {reason}")]
    ResizeRefused { path: String, reason: String },
    /// The configuration and device sizes give no valid metadata layout.
    #[error("{path}: {source}")]
    Layout { path: String, source: MetaError },
    /// A configured peer has no bitmap slot and every slot is taken.
    #[error(
        "the metadata on {path} has no bitmap slot for peer node-id {peer} (all {slots} slots are \
         in use); recreate it with `tandem create-md --force --max-peers N`"
    )]
    NoPeerSlot { path: String, peer: u8, slots: u8 },
    /// `meta-disk PATH [IDX]`: the slot lies past the end of the device.
    #[error(
        "{path}: meta-disk index {index} needs a device of at least {needed_bytes} bytes, it has \
         {size_bytes}"
    )]
    IndexOutOfRange {
        path: String,
        index: u32,
        needed_bytes: u64,
        size_bytes: u64,
    },
    /// `create-md` found metadata and was not told to overwrite it.
    #[error(
        "there is tandem metadata {place} already ({found}); pass --force to overwrite it (its \
         generation identifiers and bitmaps are lost)"
    )]
    Exists { place: String, found: String },
    /// `create-md` found other data where it would write (a file system, a partition table,
    /// DRBD's metadata) and was not told to overwrite it.
    #[error(
        "{place} holds {found}; create-md would overwrite it: check the configured disk, or pass \
         --force to destroy it"
    )]
    ForeignData { place: String, found: String },
    /// The configuration file is invalid.
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    /// The command names a resource or node the configuration cannot serve.
    #[error("{0}")]
    Select(String),
    /// An offline command failed on one volume (`RES/VOL`).
    #[error("{volume}: {source}")]
    Volume {
        volume: String,
        source: Box<MetadataError>,
    },
}

/// What the configuration says about one volume's metadata.
#[derive(Debug, Clone)]
pub(crate) struct MetaSpec {
    /// The backing (data) disk.
    pub(crate) disk: PathBuf,
    /// Where the metadata lives.
    pub(crate) meta_disk: config::MetaDisk,
    /// This node's id.
    pub(crate) node_id: u8,
    /// Node ids of the configured peers.
    pub(crate) peers: Vec<u8>,
    /// The configured activity-log size (`al-extents`).
    pub(crate) al_extents: u32,
}

/// The open, locked metadata of one volume.
#[derive(Debug)]
pub(crate) struct MetaFile {
    area: Area,
    /// The on-disk geometry, with the configured `al-extents`.
    layout: Layout,
}

impl MetaFile {
    /// Open, lock, read and check the metadata of `spec`. A configured peer without a bitmap
    /// slot gets a free one (its bitmap zeroed, the superblock rewritten and synced).
    pub(crate) fn open(spec: &MetaSpec) -> Result<(MetaFile, Superblock), MetadataError> {
        let mut area = Area::open(&spec.disk, &spec.meta_disk, Access::Write)?;
        let mut superblock = area.read_superblock()?;
        if superblock.node_id != spec.node_id {
            return Err(MetadataError::NodeIdMismatch {
                path: area.path_text(),
                on_disk: superblock.node_id,
                configured: spec.node_id,
            });
        }
        let layout = configured_layout(&area, &superblock, spec.al_extents)?;
        let file = MetaFile { area, layout };
        file.assign_peer_slots(&mut superblock, &spec.peers)?;
        Ok((file, superblock))
    }

    /// A file over a freshly computed layout (for `create-md`; nothing is read).
    fn over(area: Area, layout: Layout) -> MetaFile {
        MetaFile { area, layout }
    }

    /// The geometry; `data_bytes()` is the size the volume exports.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Give every configured peer without a slot a free one; write the superblock if any.
    fn assign_peer_slots(
        &self,
        superblock: &mut Superblock,
        peers: &[u8],
    ) -> Result<(), MetadataError> {
        let mut sorted = peers.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut assigned = false;
        for peer in sorted {
            if superblock.peer_slot_of(peer).is_some() {
                continue;
            }
            let slots = self.layout.config().peer_slots;
            let free = superblock
                .peers
                .iter()
                .position(|slot| slot.node_id.is_none());
            let Some((index, slot)) =
                free.and_then(|index| Some((index, superblock.peers.get_mut(index)?)))
            else {
                return Err(MetadataError::NoPeerSlot {
                    path: self.area.path_text(),
                    peer,
                    slots,
                });
            };
            slot.node_id = Some(peer);
            let index = u8::try_from(index).map_err(|_| MetadataError::NoPeerSlot {
                path: self.area.path_text(),
                peer,
                slots,
            })?;
            let region = self
                .layout
                .bitmap(index)
                .map_err(|source| self.layout_error(source))?;
            self.zero(region)
                .map_err(|source| self.io("cannot clear a bitmap", source))?;
            assigned = true;
        }
        if assigned {
            self.sync()
                .map_err(|source| self.io("cannot sync", source))?;
            self.write_superblock(superblock)?;
            self.sync()
                .map_err(|source| self.io("cannot sync", source))?;
        }
        Ok(())
    }

    /// Read peer slot `slot`'s bitmap.
    pub(crate) fn read_bitmap(&self, slot: u8) -> Result<Bitmap, MetadataError> {
        let region = self
            .layout
            .bitmap(slot)
            .map_err(|source| self.layout_error(source))?;
        let mut bitmap =
            Bitmap::for_layout(&self.layout).map_err(|source| self.layout_error(source))?;
        let what = format!("bitmap of peer slot {slot}");
        let pages = bitmap.page_count();
        let mut first = 0;
        while first < pages {
            let count = IO_CHUNK_PAGES.min(pages - first);
            let mut chunk = vec![0; chunk_len(count)];
            self.area
                .read_at(region.offset_bytes + first * BLOCK_BYTES, &mut chunk, &what)?;
            for (page, image) in (first..).zip(chunk.chunks_exact(BLOCK_LEN)) {
                let place = || format!("the {what} {}", self.area.describe());
                bitmap
                    .load_page(page, image)
                    .map_err(|source| MetadataError::Corrupt {
                        place: place(),
                        source,
                    })?;
            }
            first += count;
        }
        Ok(bitmap)
    }

    /// Write bitmap pages `(page index, 4 KiB image)` of peer slot `slot` (not synced).
    pub(crate) fn write_bitmap_pages(
        &self,
        slot: u8,
        pages: &[(u64, Vec<u8>)],
    ) -> std::io::Result<()> {
        let region = self.layout.bitmap(slot).map_err(invalid_input)?;
        let page_count = region.length_bytes / BLOCK_BYTES;
        for (page, image) in pages {
            if *page >= page_count || image.len() != BLOCK_LEN {
                let message = format!(
                    "bitmap page {page} of {} bytes (slot {slot} has {page_count} pages of \
                     {BLOCK_LEN})",
                    image.len()
                );
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    message,
                ));
            }
            self.area
                .write_at(region.offset_bytes + page * BLOCK_BYTES, image)?;
        }
        Ok(())
    }

    /// Encode and write the superblock (not synced); it must describe this file's geometry.
    pub(crate) fn write_superblock(&self, superblock: &Superblock) -> Result<(), MetadataError> {
        superblock
            .check_layout(&self.layout)
            .map_err(|source| MetadataError::LayoutMismatch {
                path: self.area.path_text(),
                source,
            })?;
        let block = superblock
            .encode()
            .map_err(|source| MetadataError::Corrupt {
                place: format!("the superblock to write {}", self.area.describe()),
                source,
            })?;
        self.area
            .write_at(self.layout.superblock().offset_bytes, &block)
            .map_err(|source| self.io("cannot write the superblock", source))
    }

    /// Make every completed metadata write durable (`fdatasync`).
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.area.sync()
    }

    /// Make every completed write of the data disk durable before a metadata write (a no-op
    /// with internal metadata, see `device.rs`).
    pub(crate) fn sync_backing(&self) -> std::io::Result<()> {
        self.area.sync_backing()
    }

    /// The activity-log ring's bytes.
    pub(crate) fn read_al_ring(&self) -> Result<Vec<u8>, MetadataError> {
        let region = self.layout.al_ring();
        let mut ring = vec![
            0;
            usize::try_from(region.length_bytes).map_err(|_| self.layout_error(
                MetaError::AlRingImageInvalid {
                    ring_bytes: usize::MAX
                }
            ))?
        ];
        self.area
            .read_at(region.offset_bytes, &mut ring, "activity-log ring")?;
        Ok(ring)
    }

    /// Write a whole activity-log ring image (not synced).
    /// Writes one 4 KiB activity-log transaction at `offset_in_ring` (a multiple of 4 KiB
    /// within the ring).
    pub(crate) fn write_al_block(&self, offset_in_ring: u64, block: &[u8]) -> std::io::Result<()> {
        let region = self.layout.al_ring();
        let fits = block.len() == BLOCK_LEN
            && offset_in_ring.is_multiple_of(BLOCK_BYTES)
            && offset_in_ring
                .checked_add(BLOCK_BYTES)
                .is_some_and(|end| end <= region.length_bytes);
        if !fits {
            let message = format!(
                "activity-log block of {} bytes at {offset_in_ring} of a {}-byte ring",
                block.len(),
                region.length_bytes
            );
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                message,
            ));
        }
        self.area
            .write_at(region.offset_bytes + offset_in_ring, block)
    }

    pub(crate) fn write_al_ring(&self, image: &[u8]) -> std::io::Result<()> {
        let region = self.layout.al_ring();
        if u64::try_from(image.len()).ok() != Some(region.length_bytes) {
            let message = format!(
                "activity-log ring image of {} bytes; the ring has {}",
                image.len(),
                region.length_bytes
            );
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                message,
            ));
        }
        self.area.write_at(region.offset_bytes, image)
    }

    /// Write zeros over `region` (not synced).
    fn zero(&self, region: Region) -> std::io::Result<()> {
        let zeros = vec![0; chunk_len(IO_CHUNK_PAGES)];
        let mut done = 0;
        while done < region.length_bytes {
            let pages = ((region.length_bytes - done) / BLOCK_BYTES).min(IO_CHUNK_PAGES);
            if pages == 0 {
                break; // regions are whole pages; a tail shorter than one cannot occur
            }
            let piece = zeros.get(..chunk_len(pages)).unwrap_or(&zeros);
            self.area.write_at(region.offset_bytes + done, piece)?;
            done += pages * BLOCK_BYTES;
        }
        Ok(())
    }

    fn io(&self, what: &str, source: std::io::Error) -> MetadataError {
        MetadataError::Io {
            what: format!("{what} {}", self.area.describe()),
            source,
        }
    }

    fn layout_error(&self, source: MetaError) -> MetadataError {
        MetadataError::Layout {
            path: self.area.path_text(),
            source,
        }
    }
}

/// The layout the device sizes and configuration give now, checked against the on-disk one.
/// `al-extents` comes from the configuration (it may change between runs; the ring is
/// formatted anew for it), the other parameters from the superblock.
fn configured_layout(
    area: &Area,
    superblock: &Superblock,
    al_extents: u32,
) -> Result<Layout, MetadataError> {
    let on_disk = superblock.layout.config();
    let config = LayoutConfig {
        placement: area.placement,
        backing_bytes: area.backing_bytes,
        al_extents,
        ..*on_disk
    };
    let path = area.path_text();
    let layout = match Layout::compute(&config) {
        Ok(layout) => layout,
        Err(
            source
            @ (MetaError::AlExtentsOutOfRange { .. } | MetaError::AlExtentsExceedRing { .. }),
        ) => {
            return Err(MetadataError::Layout { path, source });
        }
        Err(source) => return Err(MetadataError::LayoutMismatch { path, source }),
    };
    superblock
        .check_layout(&layout)
        .map_err(|source| MetadataError::LayoutMismatch { path, source })?;
    Ok(layout)
}

/// Buffer length for `pages` pages, at most [`IO_CHUNK_PAGES`] (so it always fits a usize).
fn chunk_len(pages: u64) -> usize {
    usize::try_from(pages.min(IO_CHUNK_PAGES)).unwrap_or(1) * BLOCK_LEN
}

fn invalid_input(error: MetaError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, error.to_string())
}

#[cfg(test)]
mod tests;
