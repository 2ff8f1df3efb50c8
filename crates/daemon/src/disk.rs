//! The backing disk of one volume: a regular file or a block device, accessed with positioned
//! reads and writes on blocking threads.
//!
//! Invariants: every operation is checked against the usable size before it reaches the
//! file; a flush is `fdatasync`, a FUA write is a write followed by `fdatasync` of the file
//! (the file system orders them), so "completed with FUA" means durable.
//!
//! With `disk { io direct; }` (tandem only) the data file is opened with `O_DIRECT` and data
//! I/O bypasses the page cache. The kernel then wants offsets, lengths and buffer addresses
//! aligned to the device's logical block size; tandem aligns to [`DIRECT_ALIGN_BYTES`], which
//! covers every logical block size in use (512 and 4096). Requests that are aligned, in pool
//! buffers (aligned by `bufpool`), go straight to the device. Any other request (an NBD client
//! may send 512-byte I/O, or a buffer is not a pool buffer) goes through an aligned bounce
//! buffer: a read reads the whole blocks around the range and copies the part asked for; a
//! write that covers blocks only partly reads those blocks, patches them and writes them back
//! (read-modify-write).
//!
//! Why read-modify-write on the same fd, not a second, buffered fd for odd requests: mixing
//! the page cache and `O_DIRECT` on one file is coherent only while the two never run at the
//! same time on the same page. The kernel writes back and invalidates cached pages around a
//! direct write, but when a buffered write dirties the page concurrently the invalidation
//! fails ("Page cache invalidation failure on direct I/O") and the stale cached page is later
//! written back over the direct write, reverting sectors no buffered request ever touched.
//! With one `O_DIRECT` fd there is no cached copy of the data area to go stale.
//!
//! Invariant (direct): a read-modify-write holds the disk's gate exclusively, every other data
//! operation holds it shared. Two requests that write different sectors of one 4 KiB block
//! (both legal and not overlapping, so the engine lets them run concurrently) would otherwise
//! both read the old block and the second write-back would undo the first; the same holds for
//! a whole-block direct write racing a read-modify-write of that block. Unaligned requests are
//! rare (partition tables, a client with a 512-byte block size), so serialising them costs
//! nothing measurable; aligned I/O only takes an uncontended shared lock.
//!
//! `O_DIRECT` makes no promise of durability: the data may sit in the device's volatile cache
//! and a file's block allocation in the journal. A flush is therefore still `fdatasync`, and a
//! FUA write is still a write followed by `fdatasync`, exactly as when buffered. With internal
//! metadata the metadata fd's `fdatasync` still covers the data written through this fd:
//! `fdatasync` syncs the inode (file systems) or the device (block devices), whichever fd
//! it is called on.
//!
//! Metadata (internal or external) is not read or written through this type: `MetaFile` keeps
//! its own buffered fd with explicit syncs (`md-flushes`). The data area and the metadata
//! area never share a 4 KiB page (the usable size is rounded down to [`DISK_ALIGN_BYTES`] and
//! the bounce path never reaches past it), so the page cache of the metadata fd never holds
//! a copy of a data block. After `resize` moves internal metadata, the old metadata pages
//! become data; a direct read writes back any dirty cached page in its range before reading
//! and a direct write invalidates the range, so the stale cached copies are never read.
//!
//! For benchmarks and tests a disk can be throttled (`disk-throttle-latency`): every data
//! write then takes at least that long, on the I/O thread that runs it (a throttled disk's
//! writes never run inline on a network thread; nor do a direct disk's, see
//! [`Disk::waits_for_device`]).
//!
//! For tests only, faults can be injected (off by default): when the node runs with the
//! environment variable [`DISK_FAULT_ENV`] naming a file, every data read, write, zero and
//! flush of its backing disks fails with EIO while that file exists (metadata I/O is not
//! affected). The system tests use it for `on-io-error`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use bufpool::{BufPool, Incoming};
use config::DiskIo;
use repl::IoError;

/// Smallest backing device tandem accepts.
pub const DISK_BYTES_MIN: u64 = 1024 * 1024;
/// A payload still arriving is written in pieces of at least this much (except the last).
const WRITE_PIECE_BYTES_MIN: usize = 128 * 1024;
/// Data is written to the backing file in aligned pieces of at most this much.
///
/// The kernel sizes a new page-cache folio by the length of the write that creates it, and
/// ext4 (with large folios, Linux 6.x) walks every 4 KiB buffer of a folio on each write into
/// it: after 1 MiB writes, a 4 KiB write into the same range costs a walk over 256 buffers.
/// Measured on a cold cache after writing 1 GiB with 1 MiB writes: 4 KiB QD32 random writes
/// ran at about 50k IOPS with whole-request writes, 95k with 64 KiB pieces and 111k with
/// 32 KiB (140k with no large folios at all); sequential 1 MiB writes showed no difference
/// within the noise. A piece costs one more system call, 32 per MiB.
const WRITE_CHUNK_BYTES: u64 = 32 * 1024;
/// Usable sizes are rounded down to this.
pub const DISK_ALIGN_BYTES: u64 = 4096;
/// With `io direct`, I/O whose offset, length and buffer address are multiples of this goes
/// straight to the device; other I/O goes through a bounce buffer (see the module comment).
pub const DIRECT_ALIGN_BYTES: u64 = 4096;
/// The bounce path reads and writes at most this much at a time.
const BOUNCE_WINDOW_BYTES: u64 = 1024 * 1024;
/// Bounce buffer memory a direct disk keeps for reuse.
const BOUNCE_RETAINED_BYTES: usize = 4 * 1024 * 1024;

const _: () = assert!(DIRECT_ALIGN_BYTES as usize == bufpool::ALIGNMENT);
const _: () = assert!(DISK_ALIGN_BYTES.is_multiple_of(DIRECT_ALIGN_BYTES));
const _: () = assert!(BOUNCE_WINDOW_BYTES.is_multiple_of(DIRECT_ALIGN_BYTES));
const _: () = assert!(BOUNCE_WINDOW_BYTES as usize <= bufpool::BUFFER_BYTES_MAX);
const _: () = assert!(WRITE_PIECE_BYTES_MIN as u64 >= DIRECT_ALIGN_BYTES);

/// The environment variable naming the fault trigger file (tests only, see the module
/// comment).
pub const DISK_FAULT_ENV: &str = "TANDEM_TEST_DISK_FAULT";

/// Why a backing disk could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The path could not be opened.
    #[error("cannot open backing disk {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The size could not be determined.
    #[error("cannot determine the size of backing disk {path}: {source}")]
    Size {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `io direct` was asked for, but the file system or device refuses `O_DIRECT` (tmpfs on
    /// kernels before 6.6, some FUSE file systems).
    #[error(
        "backing disk {path}: `io direct` (O_DIRECT) is not supported there ({source}); set `io \
         buffered;` in its disk section or move it to a file system with direct I/O"
    )]
    DirectUnsupported {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The disk is smaller than tandem needs.
    #[error(
        "backing disk {path} is too small: {size_bytes} bytes, at least {DISK_BYTES_MIN} needed"
    )]
    TooSmall { path: PathBuf, size_bytes: u64 },
}

/// An open backing disk.
#[derive(Debug)]
pub struct Disk {
    file: File,
    path: PathBuf,
    /// Usable size; grows (never shrinks) with `resize` ([`Disk::grow_to`]).
    size_bytes: std::sync::atomic::AtomicU64,
    /// Least time one data write takes (zero: not throttled).
    throttle: std::time::Duration,
    /// While this file exists, data I/O fails with EIO ([`DISK_FAULT_ENV`]; tests only).
    fault_trigger: Option<PathBuf>,
    /// The engine detached the volume (failed or by `detach`): no more I/O goes here.
    detached: std::sync::atomic::AtomicBool,
    /// How data I/O reaches the device (`disk { io ...; }`).
    access: Access,
    /// How many times the disk was synced (flushes and FUA writes).
    syncs: std::sync::atomic::AtomicU64,
}

/// How data I/O reaches the device.
#[derive(Debug)]
enum Access {
    /// Through the page cache.
    Buffered,
    /// `O_DIRECT`, unaligned requests through bounce buffers.
    Direct(Direct),
}

/// The state a direct disk needs for unaligned requests.
#[derive(Debug)]
struct Direct {
    /// Held exclusively by a read-modify-write, shared by all other data I/O (see the module
    /// comment for why).
    gate: RwLock<()>,
    /// Aligned bounce buffers.
    bounce: Arc<BufPool>,
}

/// How an operation holds a direct disk's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Whole blocks only: runs alongside other I/O.
    Shared,
    /// Rewrites part of a block: runs alone.
    Exclusive,
}

impl Hold {
    /// What a write or zeroing of `length` bytes at `offset` needs.
    fn for_write(offset: u64, length: u64) -> Hold {
        if offset.is_multiple_of(DIRECT_ALIGN_BYTES) && length.is_multiple_of(DIRECT_ALIGN_BYTES) {
            Hold::Shared
        } else {
            Hold::Exclusive
        }
    }
}

/// An aligned stretch of the disk around (part of) a request, for the bounce path.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// Aligned start on the disk.
    start: u64,
    /// Aligned length, at most [`BOUNCE_WINDOW_BYTES`].
    bytes: usize,
    /// Where the request's part begins inside the window.
    skip: usize,
    /// How much of the request the window carries.
    carried: usize,
}

impl Window {
    /// The window that carries the request's bytes from `at` on, `remaining` of them.
    fn at(at: u64, remaining: u64) -> Window {
        let start = at / DIRECT_ALIGN_BYTES * DIRECT_ALIGN_BYTES;
        let end = at
            .saturating_add(remaining)
            .div_ceil(DIRECT_ALIGN_BYTES)
            .saturating_mul(DIRECT_ALIGN_BYTES);
        let end = end.min(start + BOUNCE_WINDOW_BYTES);
        // Both differences are below BOUNCE_WINDOW_BYTES, which fits a usize (asserted above).
        let bytes = usize::try_from(end - start).unwrap_or(0);
        let skip = usize::try_from(at - start).unwrap_or(0);
        let carried = usize::try_from(remaining)
            .unwrap_or(usize::MAX)
            .min(bytes - skip);
        Window {
            start,
            bytes,
            skip,
            carried,
        }
    }
}

/// Whether `offset`, `length` and the address of `memory` suit `O_DIRECT`.
fn is_aligned(offset: u64, memory: *const u8, length: usize) -> bool {
    let align = DIRECT_ALIGN_BYTES as usize;
    offset.is_multiple_of(DIRECT_ALIGN_BYTES)
        && length.is_multiple_of(align)
        && memory.addr().is_multiple_of(align)
}

impl Disk {
    /// Open `path` for reading and writing, buffered or with `O_DIRECT` as `io` says, and
    /// find its usable size. A direct open is probed with one aligned read, so a file system
    /// that accepts `O_DIRECT` at open but refuses direct reads is caught here, not at the
    /// first client request.
    pub fn open(path: &Path, io: DiskIo) -> Result<Disk, DiskError> {
        let flags = match io {
            DiskIo::Buffered => 0,
            DiskIo::Direct => libc::O_DIRECT,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(flags)
            .open(path)
            .map_err(|source| open_error(path, io, source))?;
        let access = match io {
            DiskIo::Buffered => Access::Buffered,
            DiskIo::Direct => Access::Direct(Direct {
                gate: RwLock::new(()),
                bounce: BufPool::new(bufpool::PoolConfig {
                    retained_bytes_max: BOUNCE_RETAINED_BYTES,
                }),
            }),
        };
        if let Access::Direct(direct) = &access {
            probe_direct(&file, direct).map_err(|source| open_error(path, io, source))?;
        }
        let size_bytes = device_size(&file).map_err(|source| DiskError::Size {
            path: path.to_path_buf(),
            source,
        })?;
        let size_bytes = size_bytes / DISK_ALIGN_BYTES * DISK_ALIGN_BYTES;
        if size_bytes < DISK_BYTES_MIN {
            return Err(DiskError::TooSmall {
                path: path.to_path_buf(),
                size_bytes,
            });
        }
        let fault_trigger = std::env::var_os(DISK_FAULT_ENV).map(PathBuf::from);
        if let Some(trigger) = &fault_trigger {
            tracing::warn!(
                "{}: I/O fails while {} exists ({DISK_FAULT_ENV}, tests only)",
                path.display(),
                trigger.display()
            );
        }
        let size_bytes = std::sync::atomic::AtomicU64::new(size_bytes);
        let (detached, syncs) = (
            std::sync::atomic::AtomicBool::new(false),
            std::sync::atomic::AtomicU64::new(0),
        );
        Ok(Disk {
            file,
            path: path.to_path_buf(),
            size_bytes,
            throttle: std::time::Duration::ZERO,
            fault_trigger,
            detached,
            access,
            syncs,
        })
    }

    /// Open `path` with its usable size cut to `data_bytes` (the part before internal
    /// metadata); the metadata region is then out of every client's and peer's reach.
    pub fn open_limited(path: &Path, data_bytes: u64, io: DiskIo) -> Result<Disk, DiskError> {
        let disk = Disk::open(path, io)?;
        let limited = data_bytes / DISK_ALIGN_BYTES * DISK_ALIGN_BYTES;
        if limited > disk.size_bytes() {
            return Err(DiskError::TooSmall {
                path: path.to_path_buf(),
                size_bytes: disk.size_bytes(),
            });
        }
        disk.size_bytes
            .store(limited, std::sync::atomic::Ordering::Release);
        Ok(disk)
    }

    /// Widens the usable size to `data_bytes` (`resize`, once the metadata moved): refused if
    /// the device is smaller or the size would shrink.
    pub fn grow_to(&self, data_bytes: u64) -> Result<(), DiskError> {
        let device_bytes = device_size(&self.file).map_err(|source| DiskError::Size {
            path: self.path.clone(),
            source,
        })?;
        let current = self.size_bytes();
        if data_bytes > device_bytes
            || data_bytes < current
            || !data_bytes.is_multiple_of(DISK_ALIGN_BYTES)
        {
            return Err(DiskError::TooSmall {
                path: self.path.clone(),
                size_bytes: device_bytes,
            });
        }
        self.size_bytes
            .store(data_bytes, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Makes every data write take at least `latency` (benchmarks and tests only).
    pub fn set_throttle(&mut self, latency: std::time::Duration) {
        self.throttle = latency;
    }

    /// Whether writes are throttled.
    pub fn is_throttled(&self) -> bool {
        !self.throttle.is_zero()
    }

    /// Whether a write waits for the device itself: throttled, or `io direct` (no page cache
    /// to absorb it). Such writes never run on a network thread (inline or as the payload
    /// arrives): they would hold up receiving for a device round trip each.
    pub fn waits_for_device(&self) -> bool {
        self.is_throttled() || matches!(self.access, Access::Direct(_))
    }

    /// Waits out the rest of the throttle for a write that started at `started`.
    fn throttle_since(&self, started: std::time::Instant) {
        if let Some(rest) = self.throttle.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }

    /// Marks the disk detached (`repl::Action::Detached`): reads go to a peer, flushes skip it.
    pub fn set_detached(&self, detached: bool) {
        self.detached
            .store(detached, std::sync::atomic::Ordering::Release);
    }

    /// Whether the engine detached this disk.
    pub fn is_detached(&self) -> bool {
        self.detached.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Usable size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How it was opened (`io buffered` or `io direct`); fixed until the node restarts.
    pub fn io(&self) -> DiskIo {
        match self.access {
            Access::Buffered => DiskIo::Buffered,
            Access::Direct(_) => DiskIo::Direct,
        }
    }

    /// How many times the disk was synced (`fdatasync`) so far: flushes and FUA writes.
    #[cfg(test)]
    pub fn sync_count(&self) -> u64 {
        self.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// An injected fault ([`DISK_FAULT_ENV`]), if one is on.
    fn injected_fault(&self) -> Result<(), IoError> {
        match &self.fault_trigger {
            Some(trigger) if trigger.exists() => Err(IoError::Io),
            _ => Ok(()),
        }
    }

    fn check(&self, offset: u64, length: u64) -> Result<(), IoError> {
        self.injected_fault()?;
        match offset.checked_add(length) {
            Some(end) if end <= self.size_bytes() => Ok(()),
            _ => Err(IoError::Invalid),
        }
    }

    /// Read exactly `buf.len()` bytes at `offset`.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        self.check(offset, buf.len() as u64)?;
        match &self.access {
            Access::Buffered => self.file.read_exact_at(buf, offset).map_err(map_io),
            Access::Direct(direct) => self.gated(Hold::Shared, || {
                if is_aligned(offset, buf.as_ptr(), buf.len()) {
                    self.file.read_exact_at(buf, offset).map_err(map_io)
                } else {
                    self.read_bounced(direct, offset, buf)
                }
            }),
        }
    }

    /// Runs `work` holding a direct disk's gate as `hold` says (a buffered disk has none).
    fn gated<T>(&self, hold: Hold, work: impl FnOnce() -> T) -> T {
        let Access::Direct(direct) = &self.access else {
            return work();
        };
        match hold {
            Hold::Shared => {
                let _shared = direct.gate.read().unwrap_or_else(PoisonError::into_inner);
                work()
            }
            Hold::Exclusive => {
                let _exclusive = direct.gate.write().unwrap_or_else(PoisonError::into_inner);
                work()
            }
        }
    }

    /// Reads `buf.len()` bytes at `offset` through aligned bounce windows.
    fn read_bounced(&self, direct: &Direct, offset: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let mut done = 0;
        while done < buf.len() {
            let window = Window::at(offset + done as u64, (buf.len() - done) as u64);
            let mut bounce = direct.bounce.take(window.bytes).ok_or(IoError::Invalid)?;
            self.file
                .read_exact_at(&mut bounce, window.start)
                .map_err(map_io)?;
            buf[done..done + window.carried]
                .copy_from_slice(&bounce[window.skip..window.skip + window.carried]);
            done += window.carried;
        }
        Ok(())
    }

    /// Writes `data` at `offset` through aligned bounce windows; the blocks the data covers
    /// only partly are read first (read-modify-write). The caller holds the gate exclusively
    /// if any block is covered only partly ([`Hold::for_write`]).
    fn write_bounced(&self, direct: &Direct, data: &[u8], offset: u64) -> Result<(), IoError> {
        let block = DIRECT_ALIGN_BYTES as usize;
        let mut done = 0;
        while done < data.len() {
            let window = Window::at(offset + done as u64, (data.len() - done) as u64);
            let mut bounce = direct.bounce.take(window.bytes).ok_or(IoError::Invalid)?;
            let end = window.skip + window.carried;
            let head = window.skip / block * block;
            let tail = end / block * block;
            if window.skip != head {
                self.file
                    .read_exact_at(&mut bounce[head..head + block], window.start + head as u64)
                    .map_err(map_io)?;
            }
            // A write inside one block has its head and tail in that block: read it once.
            if end != tail && !(tail == head && window.skip != head) {
                self.file
                    .read_exact_at(&mut bounce[tail..tail + block], window.start + tail as u64)
                    .map_err(map_io)?;
            }
            bounce[window.skip..end].copy_from_slice(&data[done..done + window.carried]);
            self.file
                .write_all_at(&bounce, window.start)
                .map_err(map_io)?;
            done += window.carried;
        }
        Ok(())
    }

    /// Writes `data` at `offset`, holding a direct disk's gate as the range needs.
    fn store(&self, data: &[u8], offset: u64) -> Result<(), IoError> {
        self.gated(Hold::for_write(offset, data.len() as u64), || {
            self.store_held(data, offset)
        })
    }

    /// Writes `data` at `offset`; the caller holds the gate as [`Hold::for_write`] says.
    fn store_held(&self, data: &[u8], offset: u64) -> Result<(), IoError> {
        match &self.access {
            Access::Buffered => self.write_chunked(data, offset),
            Access::Direct(_) if is_aligned(offset, data.as_ptr(), data.len()) => {
                self.file.write_all_at(data, offset).map_err(map_io)
            }
            Access::Direct(direct) => self.write_bounced(direct, data, offset),
        }
    }

    /// Where a piece of a still-arriving payload at `offset` may end, with `written` bytes
    /// written and `available` filled: everything when buffered; with `io direct`, whole
    /// blocks only (so the pieces stay aligned), and nothing before the end if the payload
    /// starts mid-block.
    fn piece_end(&self, offset: u64, written: usize, available: usize) -> usize {
        match self.access {
            Access::Buffered => available,
            Access::Direct(_) if !offset.is_multiple_of(DIRECT_ALIGN_BYTES) => written,
            Access::Direct(_) => {
                let block = DIRECT_ALIGN_BYTES as usize;
                written + (available - written) / block * block
            }
        }
    }

    /// Write `data` at `offset`; with `fua`, durably.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        self.check(offset, data.len() as u64)?;
        let started = std::time::Instant::now();
        self.store(data, offset)?;
        self.throttle_since(started);
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Write a payload that may still be arriving at `offset`, piece by piece as it fills
    /// (so the disk write overlaps the network receive); with `fua`, durably at the end.
    /// Aborted if the payload stops arriving; the part before that may have been written.
    pub fn write_incoming(&self, offset: u64, data: &Incoming, fua: bool) -> Result<(), IoError> {
        if let Some(bytes) = data.as_complete() {
            return self.write(offset, bytes, fua);
        }
        self.check(offset, data.len() as u64)?;
        let started = std::time::Instant::now();
        let mut written = 0;
        while written < data.len() {
            // A payload that needs the whole of itself for its first piece (direct, starts
            // mid-block) waits for all of it, not for one piece at a time.
            let want = match self.piece_end(offset, written, data.len()) {
                end if end == written => data.len(),
                _ => written.saturating_add(WRITE_PIECE_BYTES_MIN),
            };
            let available = data.wait_blocking(want).map_err(|_| IoError::Aborted)?;
            let end = if available.len() == data.len() {
                available.len()
            } else {
                self.piece_end(offset, written, available.len())
            };
            self.store(&available[written..end], offset + written as u64)?;
            written = end;
        }
        self.throttle_since(started);
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Start writing a payload of `length` bytes at `offset` piece by piece as it arrives, on
    /// the thread that receives it ([`bufpool::Incoming::on_piece`]); see [`PieceWriter`].
    pub fn piece_writer(
        &self,
        offset: u64,
        length: u64,
        fua: bool,
    ) -> Result<PieceWriter, IoError> {
        if self.is_detached() {
            // A write that raced with the detach: refused, so the peer marks it for us.
            return Err(IoError::Io);
        }
        self.check(offset, length)?;
        Ok(PieceWriter {
            offset,
            written: 0,
            fua,
        })
    }

    /// Writes `data` at `offset` in pieces that never cross a [`WRITE_CHUNK_BYTES`] boundary
    /// (see there why; buffered only: a direct write creates no page-cache folios).
    fn write_chunked(&self, data: &[u8], offset: u64) -> Result<(), IoError> {
        let mut done = 0;
        while done < data.len() {
            let at = offset + done as u64;
            let room =
                usize::try_from(WRITE_CHUNK_BYTES - at % WRITE_CHUNK_BYTES).unwrap_or(usize::MAX);
            let end = done + room.min(data.len() - done);
            self.file
                .write_all_at(&data[done..end], at)
                .map_err(map_io)?;
            done = end;
        }
        Ok(())
    }

    /// Make every completed write durable. With `io direct` too: `O_DIRECT` bypasses the page
    /// cache, not the device's volatile cache or the file system's journal.
    pub fn flush(&self) -> Result<(), IoError> {
        self.injected_fault()?;
        self.syncs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.file.sync_data().map_err(map_io)
    }

    /// Zero a range (punching a hole when `trim` and the file system can).
    pub fn zero(&self, offset: u64, length: u64, trim: bool, fua: bool) -> Result<(), IoError> {
        self.check(offset, length)?;
        let mode = if trim {
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        } else {
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE
        };
        // A partial block is zeroed by the file system through the page cache, or by the
        // fallback's read-modify-write: either way it must not race other I/O of its block.
        self.gated(Hold::for_write(offset, length), || {
            match self.fallocate(mode, offset, length) {
                Ok(()) => Ok(()),
                Err(_) => self.write_zeroes(offset, length),
            }
        })?;
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    fn fallocate(&self, mode: i32, offset: u64, length: u64) -> Result<(), IoError> {
        let offset = libc::off_t::try_from(offset).map_err(|_| IoError::Invalid)?;
        let length = libc::off_t::try_from(length).map_err(|_| IoError::Invalid)?;
        // SAFETY: fallocate on a valid, open file descriptor with plain integer arguments.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset, length) };
        if rc == 0 {
            Ok(())
        } else {
            Err(IoError::NotSupported)
        }
    }

    /// Writes zeroes over a range; the caller holds the gate as [`Hold::for_write`] says.
    fn write_zeroes(&self, offset: u64, length: u64) -> Result<(), IoError> {
        const CHUNK: u64 = 1 << 20;
        let zeroes = vec![0u8; CHUNK.min(length) as usize];
        let mut done = 0;
        while done < length {
            let n = (length - done).min(CHUNK) as usize;
            self.store_held(&zeroes[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }
}

/// A write that follows its payload as it arrives, driven by the payload's filler: each call
/// writes what arrived since the last one once that is at least a piece (the rest at the
/// end). Unlike [`Disk::write_incoming`] nothing waits for the payload.
#[derive(Debug)]
pub struct PieceWriter {
    offset: u64,
    written: usize,
    fua: bool,
}

impl PieceWriter {
    /// Feed the payload's state; Some(result) once the write is over (complete, failed or
    /// aborted), None while it waits for more.
    pub fn feed(&mut self, disk: &Disk, piece: bufpool::Piece<'_>) -> Option<Result<(), IoError>> {
        let (available, complete) = match piece {
            bufpool::Piece::Filled(bytes) => (bytes, false),
            bufpool::Piece::Complete(bytes) => (bytes, true),
            bufpool::Piece::Aborted => return Some(Err(IoError::Aborted)),
        };
        if !complete && available.len() < self.written.saturating_add(WRITE_PIECE_BYTES_MIN) {
            return None;
        }
        let end = if complete {
            available.len()
        } else {
            disk.piece_end(self.offset, self.written, available.len())
        };
        if !complete && end == self.written {
            // Direct and starting mid-block: all of it is written at the end.
            return None;
        }
        let fresh = available.get(self.written..end).unwrap_or_default();
        if let Err(error) = disk
            .injected_fault()
            .and_then(|()| disk.store(fresh, self.offset + self.written as u64))
        {
            return Some(Err(error));
        }
        self.written = end;
        if !complete {
            return None;
        }
        Some(if self.fua { disk.flush() } else { Ok(()) })
    }
}

/// The error of a failed open or direct probe: EINVAL with `io direct` is the file system
/// refusing `O_DIRECT` (tmpfs before Linux 6.6), said in terms of the option.
fn open_error(path: &Path, io: DiskIo, source: std::io::Error) -> DiskError {
    match (io, source.raw_os_error()) {
        (DiskIo::Direct, Some(libc::EINVAL)) => DiskError::DirectUnsupported {
            path: path.to_path_buf(),
            source,
        },
        _ => DiskError::Open {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Reads the first block of a file opened with `O_DIRECT`: refused with EINVAL where the file
/// system accepts the flag at open but not the I/O.
fn probe_direct(file: &File, direct: &Direct) -> std::io::Result<()> {
    let mut block = direct
        .bounce
        .take(DIRECT_ALIGN_BYTES as usize)
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?;
    file.read_at(&mut block, 0).map(|_| ())
}

fn map_io(error: std::io::Error) -> IoError {
    match error.raw_os_error() {
        Some(libc::ENOSPC) => IoError::NoSpace,
        Some(libc::EOPNOTSUPP) => IoError::NotSupported,
        Some(libc::EINVAL) => IoError::Invalid,
        _ => IoError::Io,
    }
}

/// Size of a regular file, or of a block device by BLKGETSIZE64.
pub(crate) fn device_size(file: &File) -> std::io::Result<u64> {
    let metadata = file.metadata()?;
    if !metadata.file_type().is_block_device() {
        return Ok(metadata.len());
    }
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: the ioctl writes one u64 into `size`, which lives for the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if rc == 0 {
        Ok(size)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttled_disk_takes_at_least_its_latency_per_write() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let mut disk = Disk::open(file.path(), DiskIo::Buffered).expect("open");
        assert!(!disk.is_throttled());
        disk.set_throttle(std::time::Duration::from_millis(20));
        assert!(disk.is_throttled());
        let started = std::time::Instant::now();
        disk.write(0, &[7; 4096], false).expect("write");
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(20),
            "{:?}",
            started.elapsed()
        );
        let mut back = [0; 4096];
        disk.read(0, &mut back).expect("read");
        assert_eq!(back, [7; 4096], "the data is written all the same");
    }

    #[test]
    fn a_write_across_chunk_boundaries_lands_byte_for_byte() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path(), DiskIo::Buffered).expect("open");
        let chunk = WRITE_CHUNK_BYTES as usize;
        // Starts 512 bytes before a boundary, spans three more, ends mid-chunk.
        let offset = chunk - 512;
        let data: Vec<u8> = (0..3 * chunk + 1000).map(|i| (i % 251) as u8 + 1).collect();
        disk.write(offset as u64, &data, false).expect("write");
        let mut back = vec![0xEE; data.len() + 2 * 4096];
        disk.read((offset - 4096) as u64, &mut back).expect("read");
        assert!(
            back[..4096].iter().all(|&b| b == 0),
            "nothing before the write changed"
        );
        assert!(
            back[4096..4096 + data.len()] == data[..],
            "every byte where it belongs"
        );
        assert!(
            back[4096 + data.len()..].iter().all(|&b| b == 0),
            "nothing after the write changed"
        );
    }

    #[test]
    fn a_piece_writer_writes_whole_pieces_as_they_arrive_and_the_rest_at_the_end() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path(), DiskIo::Buffered).expect("open");
        let data: Vec<u8> = (0..WRITE_PIECE_BYTES_MIN + 5000)
            .map(|i| (i % 253) as u8 + 1)
            .collect();
        let offset = 8192;
        let mut writer = disk
            .piece_writer(offset, data.len() as u64, false)
            .expect("in range");
        let on_disk = |len: usize| {
            let mut back = vec![0; len];
            disk.read(offset, &mut back).expect("read");
            back
        };
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Filled(&data[..1000])),
            None
        );
        assert!(
            on_disk(1000).iter().all(|&b| b == 0),
            "less than a piece waits"
        );
        assert_eq!(
            writer.feed(
                &disk,
                bufpool::Piece::Filled(&data[..WRITE_PIECE_BYTES_MIN])
            ),
            None
        );
        assert_eq!(
            on_disk(WRITE_PIECE_BYTES_MIN),
            data[..WRITE_PIECE_BYTES_MIN],
            "a whole piece is written"
        );
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Complete(&data)),
            Some(Ok(()))
        );
        assert_eq!(on_disk(data.len()), data, "the rest is written at the end");
    }

    #[test]
    fn a_piece_writer_reports_an_abort_and_refuses_a_range_past_the_end() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path(), DiskIo::Buffered).expect("open");
        assert_eq!(
            disk.piece_writer(DISK_BYTES_MIN - 4096, 8192, false).err(),
            Some(IoError::Invalid)
        );
        let mut writer = disk.piece_writer(0, 8192, true).expect("in range");
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Aborted),
            Some(Err(IoError::Aborted))
        );
        disk.set_detached(true);
        assert_eq!(
            disk.piece_writer(0, 4096, false).err(),
            Some(IoError::Io),
            "a detached disk takes no writes"
        );
    }

    /// A temp file of `bytes` opened with `io direct`. The temp directory is tried first; if
    /// its file system refuses `O_DIRECT` (tmpfs before Linux 6.6), the crate's directory.
    fn direct_disk(bytes: u64) -> (tempfile::NamedTempFile, Disk) {
        let dirs = [
            std::env::temp_dir(),
            PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        ];
        for dir in dirs {
            let file = tempfile::NamedTempFile::new_in(&dir).expect("temp file");
            file.as_file().set_len(bytes).expect("size");
            match Disk::open(file.path(), DiskIo::Direct) {
                Ok(disk) => return (file, disk),
                Err(DiskError::DirectUnsupported { .. }) => continue,
                Err(error) => panic!("cannot open {}: {error}", file.path().display()),
            }
        }
        panic!("no directory here supports O_DIRECT");
    }

    fn open_flags(disk: &Disk) -> i32 {
        // SAFETY: F_GETFL on a valid, open file descriptor takes no further argument.
        unsafe { libc::fcntl(disk.file.as_raw_fd(), libc::F_GETFL) }
    }

    #[test]
    fn a_direct_disk_uses_o_direct_and_still_syncs_for_flush_and_fua() {
        let (_file, disk) = direct_disk(DISK_BYTES_MIN);
        assert_eq!(disk.io(), DiskIo::Direct);
        assert_ne!(open_flags(&disk) & libc::O_DIRECT, 0, "the fd is O_DIRECT");
        let data = vec![0x5A; 8192];
        disk.write(4096, &data, false).expect("write");
        assert_eq!(disk.sync_count(), 0, "a plain write does not sync");
        disk.write(16384, &data, true).expect("FUA write");
        assert_eq!(
            disk.sync_count(),
            1,
            "O_DIRECT is no durability: a FUA write still syncs"
        );
        disk.flush().expect("flush");
        assert_eq!(disk.sync_count(), 2, "a flush is still fdatasync");
        let mut writer = disk.piece_writer(65536, 4096, true).expect("in range");
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Complete(&data[..4096])),
            Some(Ok(()))
        );
        assert_eq!(
            disk.sync_count(),
            3,
            "a FUA write through the piece writer syncs"
        );
        let mut back = vec![0; 8192];
        disk.read(16384, &mut back).expect("read");
        assert_eq!(back, data);
    }

    #[test]
    fn a_buffered_disk_does_not_use_o_direct() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path(), DiskIo::Buffered).expect("open");
        assert_eq!(disk.io(), DiskIo::Buffered);
        assert_eq!(open_flags(&disk) & libc::O_DIRECT, 0);
        disk.write(0, &[1; 4096], true).expect("FUA write");
        assert_eq!(disk.sync_count(), 1);
    }

    /// Every (offset, length) is written from a plain Vec (any address) and then from an
    /// aligned pool buffer, and checked against a model of the disk after each write.
    #[test]
    fn a_direct_disk_reads_and_writes_unaligned_ranges_byte_for_byte() {
        let bytes = 4 * DISK_BYTES_MIN;
        let (_file, disk) = direct_disk(bytes);
        let pool = BufPool::new(bufpool::PoolConfig::default());
        let mut model = vec![0u8; bytes as usize];
        let cases: &[(u64, usize)] = &[
            (0, 4096),                             // aligned: straight to the device
            (512, 512),                            // one sector inside a block
            (4096 - 512, 1024),                    // two sectors across a block boundary
            (8192 + 100, 7),                       // bytes, not sectors
            (12288, 512),                          // aligned start, partial length
            (20480 + 512, 4096),                   // unaligned start, block-sized length
            (3000, 1024 * 1024 + 5000),            // spans more than one bounce window
            (2 * 1024 * 1024, 1024 * 1024 + 4096), // aligned, more than a window
            (bytes - 512, 512),                    // the last sector of the disk
        ];
        for (round, &(offset, length)) in cases.iter().enumerate() {
            let fill = |i: usize| ((i * 7 + round * 13) % 251) as u8 + 1;
            let data: Vec<u8> = (0..length).map(fill).collect();
            disk.write(offset, &data, false).expect("write from a Vec");
            let at = offset as usize;
            model[at..at + length].copy_from_slice(&data);
            let mut pooled = pool.take(length).expect("pool buffer");
            pooled.copy_from_slice(&data);
            pooled.reverse();
            disk.write(offset, &pooled, false)
                .expect("write from a pool buffer");
            model[at..at + length].copy_from_slice(&pooled);
            let mut back = vec![0; length + 1024];
            let from = offset.saturating_sub(512).min(bytes - back.len() as u64);
            disk.read(from, &mut back).expect("read");
            assert!(
                back[..] == model[from as usize..from as usize + back.len()],
                "case {round}: {offset}+{length}"
            );
        }
        let mut whole = vec![0; bytes as usize];
        disk.read(0, &mut whole).expect("read everything");
        assert!(whole == model, "nothing outside the writes changed");
    }

    /// Writes of different sectors of the same blocks from several threads at once (not
    /// overlapping, so the engine lets them run concurrently): every one must land, which a
    /// read-modify-write without the exclusive gate would break.
    #[test]
    fn concurrent_sector_writes_into_shared_blocks_of_a_direct_disk_all_land() {
        let (_file, disk) = direct_disk(DISK_BYTES_MIN);
        let disk = Arc::new(disk);
        let blocks = 16u64;
        let threads: Vec<_> = (0..8u8)
            .map(|sector| {
                let disk = Arc::clone(&disk);
                std::thread::spawn(move || {
                    for round in 0..50u8 {
                        for block in 0..blocks {
                            let data = [sector.wrapping_mul(31).wrapping_add(round); 512];
                            disk.write(block * 4096 + u64::from(sector) * 512, &data, false)
                                .expect("write");
                            // Whole-block traffic next door keeps the shared side busy.
                            disk.write(
                                blocks * 4096 + u64::from(sector) * 4096,
                                &[round; 4096],
                                false,
                            )
                            .expect("write");
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer");
        }
        let mut back = vec![0; (blocks * 4096) as usize];
        disk.read(0, &mut back).expect("read");
        for (index, sector) in back.chunks(512).enumerate() {
            let expected = ((index % 8) as u8).wrapping_mul(31).wrapping_add(49);
            assert!(
                sector.iter().all(|&b| b == expected),
                "sector {index} lost its last write"
            );
        }
    }

    #[test]
    fn a_direct_piece_writer_keeps_pieces_aligned_and_waits_when_starting_mid_block() {
        let (_file, disk) = direct_disk(DISK_BYTES_MIN);
        let data: Vec<u8> = (0..WRITE_PIECE_BYTES_MIN + 5000)
            .map(|i| (i % 253) as u8 + 1)
            .collect();
        let on_disk = |offset: u64, len: usize| {
            let mut back = vec![0; len];
            disk.read(offset, &mut back).expect("read");
            back
        };
        // Aligned start: whole blocks as they arrive, the rest at the end.
        let mut writer = disk
            .piece_writer(8192, data.len() as u64, false)
            .expect("in range");
        let arrived = WRITE_PIECE_BYTES_MIN + 1000;
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Filled(&data[..arrived])),
            None
        );
        let aligned = arrived / 4096 * 4096;
        assert_eq!(
            on_disk(8192, aligned),
            data[..aligned],
            "whole blocks are written"
        );
        assert!(
            on_disk(8192 + aligned as u64, 4096).iter().all(|&b| b == 0),
            "a partial block waits"
        );
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Complete(&data)),
            Some(Ok(()))
        );
        assert_eq!(on_disk(8192, data.len()), data);
        // Mid-block start: nothing until the payload is complete.
        let offset = 4 * WRITE_PIECE_BYTES_MIN as u64 + 512;
        let mut writer = disk
            .piece_writer(offset, data.len() as u64, false)
            .expect("in range");
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Filled(&data[..arrived])),
            None
        );
        assert!(
            on_disk(offset, arrived).iter().all(|&b| b == 0),
            "nothing is written early"
        );
        assert_eq!(
            writer.feed(&disk, bufpool::Piece::Complete(&data)),
            Some(Ok(()))
        );
        assert_eq!(on_disk(offset, data.len()), data);
    }

    #[test]
    fn zeroing_unaligned_ranges_of_a_direct_disk_keeps_the_neighbours() {
        let (_file, disk) = direct_disk(DISK_BYTES_MIN);
        disk.write(0, &vec![9; 65536], false).expect("write");
        for (offset, length, trim) in [
            (512, 1024, false),
            (8192 + 100, 5000, true),
            (32768, 8192, false),
        ] {
            disk.zero(offset, length, trim, false).expect("zero");
        }
        let mut back = vec![0; 65536];
        disk.read(0, &mut back).expect("read");
        for (index, &byte) in back.iter().enumerate() {
            let zeroed = [(512, 1536), (8292, 13292), (32768, 40960)]
                .iter()
                .any(|&(a, b)| (a..b).contains(&index));
            assert_eq!(byte, if zeroed { 0 } else { 9 }, "byte {index}");
        }
    }

    /// This machine's tmpfs may accept O_DIRECT (Linux 6.6 and later), so the EINVAL an older
    /// tmpfs returns at open is fed to the mapping directly.
    #[test]
    fn einval_opening_a_direct_disk_names_the_option_and_the_path() {
        let path = Path::new("/dev/shm/r0.img");
        let errno = std::io::Error::from_raw_os_error;
        let cases = [
            (
                DiskIo::Direct,
                libc::EINVAL,
                "backing disk /dev/shm/r0.img: `io direct` (O_DIRECT) is not supported there",
            ),
            (
                DiskIo::Buffered,
                libc::EINVAL,
                "cannot open backing disk /dev/shm/r0.img",
            ),
            (
                DiskIo::Direct,
                libc::ENOENT,
                "cannot open backing disk /dev/shm/r0.img",
            ),
        ];
        for (io, code, expected) in cases {
            let message = open_error(path, io, errno(code)).to_string();
            assert!(
                message.starts_with(expected),
                "{io:?} errno {code}: {message}"
            );
        }
        let message = open_error(path, DiskIo::Direct, errno(libc::EINVAL)).to_string();
        assert!(message.contains("set `io buffered;`"), "{message}");
    }
}
