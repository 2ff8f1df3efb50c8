//! Finding and holding one volume's metadata area: which file, at which offset, under which
//! lock, and reading its superblock.
//!
//! Invariants:
//! - An [`Area`] holds an open-file-description lock (`F_OFD_SETLK`) on its metadata bytes for
//!   as long as it lives: exclusive for [`Access::Write`], shared for [`Access::Read`]. A second
//!   opener (another node, `create-md` or `dump-md` while a node runs) is refused at once with
//!   [`MetadataError::Locked`]. The lock is on the area's own descriptor only, so the daemon's
//!   separate descriptor for the data disk is unaffected, and two volumes using different
//!   `meta-disk PATH [IDX]` slots of one device do not conflict.
//! - Every offset handed to [`Area::read_at`]/[`Area::write_at`] is relative to the area's
//!   start (`base_bytes`), i.e. a [`meta::Layout`] offset; I/O is positioned, never seeking.
//! - **Moved metadata** (`resize`): with internal metadata, when the end of the backing device
//!   holds no usable superblock (the device grew and `resize` has not moved the metadata yet,
//!   or a move was cut short before its commit), [`Area::read_superblock`] searches backwards
//!   for the newest superblock that sits where its own layout puts it, at most
//!   [`MOVED_SEARCH_BYTES_MAX`] from the end. Found, the area takes on the size that superblock
//!   was written for (`backing_bytes`), and the volume attaches at its old size; the device's
//!   real size stays in `device_bytes` for the next `resize`. External metadata records the
//!   sizes in its superblock at the start, so a grown device is adopted the same way.
//! - **Data before metadata** (external areas): [`Area::sync_backing`] makes the data disk's
//!   completed writes durable, and the metadata writer calls it before every metadata write.
//!   With internal metadata the area's own `fdatasync` covers the data (one file).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use meta::layout::SUPERBLOCK_BYTES;
use meta::{MetaError, Placement, Superblock};

use super::MetadataError;
use crate::disk::device_size;

/// Size of one `meta-disk PATH [IDX]` slot (DRBD's fixed 128 MiB external areas).
pub(super) const INDEXED_AREA_BYTES: u64 = 128 << 20;
/// How far back from the end of a grown backing device the superblock written for its old
/// size is searched (a device that grew by more, and restarted before `resize`, must be
/// shrunk back or have its metadata recreated).
pub(super) const MOVED_SEARCH_BYTES_MAX: u64 = 16 << 30;
/// Bytes read per step of that search.
const MOVED_SEARCH_CHUNK_LEN: usize = 256 << 10;
const _: () = assert!(MOVED_SEARCH_CHUNK_LEN.is_multiple_of(super::BLOCK_LEN));

/// How an area is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// Read and write, under an exclusive lock.
    Write,
    /// Read only, under a shared lock.
    Read,
}

/// An open, locked metadata area.
#[derive(Debug)]
pub(super) struct Area {
    file: File,
    path: PathBuf,
    /// Where the area starts in `file` (non-zero only for `meta-disk PATH [IDX]`).
    base_bytes: u64,
    /// Internal or external, with the external area's size.
    pub(super) placement: Placement,
    /// Size of the backing (data) device the metadata was laid out for: the device's size,
    /// or the smaller size the superblock records when the device grew since (`resize`).
    pub(super) backing_bytes: u64,
    /// Size of the backing (data) device now.
    pub(super) device_bytes: u64,
    /// The placement as the metadata device is now (an external area may have grown too).
    pub(super) placement_now: Placement,
    /// The `[IDX]` of an indexed external area.
    index: Option<u32>,
    /// External areas: a read-only descriptor of the data disk, for [`Area::sync_backing`].
    backing: Option<File>,
}

impl Area {
    /// Open and lock the metadata area of a volume with backing disk `disk`.
    pub(super) fn open(
        disk: &Path,
        meta_disk: &config::MetaDisk,
        access: Access,
    ) -> Result<Area, MetadataError> {
        match meta_disk {
            config::MetaDisk::Internal => {
                let file = open_file(disk, access)?;
                let backing_bytes = size_of(&file, disk)?;
                lock(&file, disk, 0, 0, access)?;
                Ok(Area {
                    file,
                    path: disk.to_path_buf(),
                    base_bytes: 0,
                    placement: Placement::Internal,
                    backing_bytes,
                    device_bytes: backing_bytes,
                    placement_now: Placement::Internal,
                    index: None,
                    backing: None,
                })
            }
            config::MetaDisk::External { path, index } => {
                Area::open_external(disk, path, *index, access)
            }
        }
    }

    fn open_external(
        disk: &Path,
        path: &Path,
        index: Option<u32>,
        access: Access,
    ) -> Result<Area, MetadataError> {
        let backing = open_file(disk, Access::Read)?;
        let backing_bytes = size_of(&backing, disk)?;
        let file = open_file(path, access)?;
        let size_bytes = size_of(&file, path)?;
        let (base_bytes, metadata_bytes) = match index {
            None => (0, size_bytes),
            Some(index) => {
                let base_bytes = u64::from(index) * INDEXED_AREA_BYTES;
                let needed_bytes = base_bytes + INDEXED_AREA_BYTES;
                if size_bytes < needed_bytes {
                    return Err(MetadataError::IndexOutOfRange {
                        path: display(path),
                        index,
                        needed_bytes,
                        size_bytes,
                    });
                }
                (base_bytes, INDEXED_AREA_BYTES)
            }
        };
        let lock_bytes = if index.is_some() { metadata_bytes } else { 0 };
        lock(&file, path, base_bytes, lock_bytes, access)?;
        let placement = Placement::External { metadata_bytes };
        Ok(Area {
            file,
            path: path.to_path_buf(),
            base_bytes,
            placement,
            backing_bytes,
            device_bytes: backing_bytes,
            placement_now: placement,
            index,
            backing: Some(backing),
        })
    }

    /// The device sizes as they are now (they may have grown since the area was opened):
    /// the backing device's size and the placement with the external area's size.
    pub(super) fn sizes_now(&self) -> Result<(u64, Placement), MetadataError> {
        match self.placement_now {
            Placement::Internal => Ok((size_of(&self.file, &self.path)?, Placement::Internal)),
            Placement::External { metadata_bytes } => {
                let backing = self
                    .backing
                    .as_ref()
                    .map(|file| size_of(file, &self.path))
                    .transpose()?;
                let metadata_bytes = match self.index {
                    Some(_) => metadata_bytes,
                    None => size_of(&self.file, &self.path)?,
                };
                Ok((
                    backing.unwrap_or(self.device_bytes),
                    Placement::External { metadata_bytes },
                ))
            }
        }
    }

    /// The path as text, for messages.
    pub(super) fn path_text(&self) -> String {
        display(&self.path)
    }

    /// Where on the device the metadata is, for messages: "at the end of /dev/x", "at the
    /// start of /dev/y", "in slot 2 (offset 256 MiB) of /dev/y".
    pub(super) fn describe(&self) -> String {
        let path = self.path_text();
        match (self.placement, self.index) {
            (Placement::Internal, _) => format!("at the end of {path}"),
            (Placement::External { .. }, None) => format!("at the start of {path}"),
            (Placement::External { .. }, Some(index)) => {
                format!(
                    "in slot {index} (offset {} MiB) of {path}",
                    self.base_bytes >> 20
                )
            }
        }
    }

    /// The superblock's offset within the area, as placement and device size give it.
    pub(super) fn superblock_offset(&self) -> Option<u64> {
        match self.placement {
            Placement::Internal => (self.backing_bytes / SUPERBLOCK_BYTES * SUPERBLOCK_BYTES)
                .checked_sub(SUPERBLOCK_BYTES),
            Placement::External { .. } => Some(0),
        }
    }

    /// The raw superblock block, or None if the device is too small to hold one.
    pub(super) fn read_superblock_block(&self) -> Result<Option<Vec<u8>>, MetadataError> {
        let Some(offset) = self.superblock_offset() else {
            return Ok(None);
        };
        let mut block = vec![0; super::BLOCK_LEN];
        match self
            .file
            .read_exact_at(&mut block, self.base_bytes + offset)
        {
            Ok(()) => Ok(Some(block)),
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(source) => Err(MetadataError::Io {
                what: format!("cannot read the superblock {}", self.describe()),
                source,
            }),
        }
    }

    /// Read and decode the superblock: [`MetadataError::Missing`] when there is no tandem
    /// metadata, [`MetadataError::Corrupt`] when there is but it cannot be used. A superblock
    /// written for a smaller device (see the module comment) is found and adopted.
    pub(super) fn read_superblock(&mut self) -> Result<Superblock, MetadataError> {
        let at_end = self.read_superblock_here();
        let superblock = match (at_end, self.placement) {
            (Ok(superblock), _) => superblock,
            (Err(error), Placement::Internal) => match self.find_moved_superblock()? {
                Some(superblock) => {
                    let was = superblock.layout.config().backing_bytes;
                    tracing::warn!(
                        "{}: the metadata is where the device ended at {was} bytes; it has {} \
                         now: attaching at the old size (run `tandem resize` once every node's \
                         device grew)",
                        self.path_text(),
                        self.device_bytes
                    );
                    superblock
                }
                None => return Err(error),
            },
            (Err(error), Placement::External { .. }) => return Err(error),
        };
        self.adopt_smaller(&superblock);
        Ok(superblock)
    }

    fn read_superblock_here(&self) -> Result<Superblock, MetadataError> {
        let Some(block) = self.read_superblock_block()? else {
            return Err(self.missing());
        };
        match Superblock::decode(&block) {
            Ok(superblock) => Ok(superblock),
            Err(MetaError::NotTandemMetadata { .. }) => Err(self.missing()),
            Err(source) => Err(MetadataError::Corrupt {
                place: format!("the superblock {}", self.describe()),
                source,
            }),
        }
    }

    /// Takes on the sizes a superblock was written for when the devices grew since; a device
    /// that shrank is left to the layout check to refuse.
    fn adopt_smaller(&mut self, superblock: &Superblock) {
        let recorded = superblock.layout.config();
        if recorded.backing_bytes < self.device_bytes {
            self.backing_bytes = recorded.backing_bytes;
        }
        if let (
            Placement::External {
                metadata_bytes: was,
            },
            Placement::External {
                metadata_bytes: now,
            },
        ) = (recorded.placement, self.placement_now)
        {
            if was < now {
                self.placement = recorded.placement;
            }
        }
    }

    /// Internal metadata: the newest superblock before the end of a grown device, i.e. the
    /// first one found going backwards that sits where its own layout puts it.
    fn find_moved_superblock(&self) -> Result<Option<Superblock>, MetadataError> {
        let Some(end) = self.superblock_offset() else {
            return Ok(None);
        };
        let floor = end.saturating_sub(MOVED_SEARCH_BYTES_MAX);
        let mut chunk = vec![0; MOVED_SEARCH_CHUNK_LEN];
        let chunk_bytes = u64::try_from(MOVED_SEARCH_CHUNK_LEN).unwrap_or(SUPERBLOCK_BYTES);
        let mut high = end;
        while high > floor {
            let low = high.saturating_sub(chunk_bytes).max(floor);
            let length = usize::try_from(high - low)
                .unwrap_or(chunk.len())
                .min(chunk.len());
            let window = chunk.get_mut(..length).unwrap_or_default();
            self.read_at(low, window, "backing device (searching for moved metadata)")?;
            for (index, block) in window.chunks_exact(super::BLOCK_LEN).enumerate().rev() {
                let offset = low + u64::try_from(index).unwrap_or_default() * SUPERBLOCK_BYTES;
                if let Some(superblock) = superblock_placed_at(block, offset) {
                    return Ok(Some(superblock));
                }
            }
            high = low;
        }
        Ok(None)
    }

    fn missing(&self) -> MetadataError {
        let hint = match self.placement {
            Placement::Internal => {
                " (none at the end of the device, nor where it was before the device grew, up to \
                 16 GiB back)"
            }
            Placement::External { .. } => "",
        };
        MetadataError::Missing {
            place: self.describe(),
            hint,
        }
    }

    /// The first bytes (at most `len`) of what `create-md` writes over: the backing device
    /// from its start with internal metadata (the file system there reaches its end), the
    /// area from its start with external metadata.
    pub(super) fn read_head(&self, len: usize) -> Result<Vec<u8>, MetadataError> {
        let size_bytes = match self.placement {
            Placement::Internal => self.backing_bytes,
            Placement::External { metadata_bytes } => metadata_bytes,
        };
        let len = usize::try_from(size_bytes).map_or(len, |size| size.min(len));
        let mut head = vec![0; len];
        self.read_at(0, &mut head, "first bytes")?;
        Ok(head)
    }

    /// Read exactly `buf.len()` bytes at area offset `offset`.
    pub(super) fn read_at(
        &self,
        offset: u64,
        buf: &mut [u8],
        what: &str,
    ) -> Result<(), MetadataError> {
        self.file
            .read_exact_at(buf, self.base_bytes + offset)
            .map_err(|source| MetadataError::Io {
                what: format!("cannot read the {what} {}", self.describe()),
                source,
            })
    }

    /// Write all of `bytes` at area offset `offset`.
    pub(super) fn write_at(&self, offset: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.file.write_all_at(bytes, self.base_bytes + offset)
    }

    /// `fdatasync` of the metadata device.
    pub(super) fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// `fdatasync` of the data disk when the metadata is external (nothing for internal
    /// metadata, whose own sync covers the data): a metadata write that follows may drop an
    /// activity-log extent or clear bitmap bits, which is only true once the data written
    /// there is durable.
    pub(super) fn sync_backing(&self) -> std::io::Result<()> {
        match &self.backing {
            Some(backing) => backing.sync_data(),
            None => Ok(()),
        }
    }
}

/// The superblock in `block` if it is one and internal metadata puts it at `offset`.
fn superblock_placed_at(block: &[u8], offset: u64) -> Option<Superblock> {
    if !block.starts_with(&meta::superblock::SUPERBLOCK_MAGIC) {
        return None;
    }
    let superblock = Superblock::decode(block).ok()?;
    let layout = &superblock.layout;
    let placed = layout.config().placement == Placement::Internal
        && layout.superblock().offset_bytes == offset;
    placed.then_some(superblock)
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

fn open_file(path: &Path, access: Access) -> Result<File, MetadataError> {
    OpenOptions::new()
        .read(true)
        .write(access == Access::Write)
        .open(path)
        .map_err(|source| MetadataError::Io {
            what: format!("cannot open {}", display(path)),
            source,
        })
}

fn size_of(file: &File, path: &Path) -> Result<u64, MetadataError> {
    device_size(file).map_err(|source| MetadataError::Io {
        what: format!("cannot determine the size of {}", display(path)),
        source,
    })
}

/// Take an open-file-description lock on `length_bytes` at `start_bytes` (0 = to the end).
fn lock(
    file: &File,
    path: &Path,
    start_bytes: u64,
    length_bytes: u64,
    access: Access,
) -> Result<(), MetadataError> {
    let io = |source| MetadataError::Io {
        what: format!("cannot lock {}", display(path)),
        source,
    };
    let invalid = || io(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    let kind = match access {
        Access::Write => libc::F_WRLCK,
        Access::Read => libc::F_RDLCK,
    };
    // SAFETY: `flock` is a plain C struct of integers; all-zero is a valid value (and l_pid
    // must be 0 for OFD locks).
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = i16::try_from(kind).map_err(|_| invalid())?;
    request.l_whence = i16::try_from(libc::SEEK_SET).map_err(|_| invalid())?;
    request.l_start = libc::off_t::try_from(start_bytes).map_err(|_| invalid())?;
    request.l_len = libc::off_t::try_from(length_bytes).map_err(|_| invalid())?;
    // SAFETY: fcntl(F_OFD_SETLK) on an open descriptor with a pointer to a live flock struct.
    let rc = unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_OFD_SETLK,
            &request as *const libc::flock,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EAGAIN | libc::EACCES) => Err(MetadataError::Locked {
            path: display(path),
        }),
        _ => Err(io(error)),
    }
}
