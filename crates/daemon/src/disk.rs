//! The backing disk of one volume: a regular file or a block device, accessed with positioned
//! reads and writes on blocking threads.
//!
//! Invariants: every operation is checked against the usable size before it reaches the
//! file; a flush is `fdatasync`, a FUA write is a write followed by `fdatasync` of the file
//! (the file system orders them), so "completed with FUA" means durable.
//!
//! For benchmarks and tests a disk can be throttled (`disk-throttle-latency`): every data
//! write then takes at least that long, on the I/O thread that runs it (a throttled disk's
//! writes never run inline on a network thread).
//!
//! For tests only, faults can be injected (off by default): when the node runs with the
//! environment variable [`DISK_FAULT_ENV`] naming a file, every data read, write, zero and
//! flush of its backing disks fails with EIO while that file exists (metadata I/O is not
//! affected). The system tests use it for `on-io-error`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use bufpool::Incoming;
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

/// The environment variable naming the fault trigger file (tests only, see the module
/// comment).
pub const DISK_FAULT_ENV: &str = "TANDEM_TEST_DISK_FAULT";

/// Why a backing disk could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// The path could not be opened.
    #[error("cannot open backing disk {path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    /// The size could not be determined.
    #[error("cannot determine the size of backing disk {path}: {source}")]
    Size { path: PathBuf, source: std::io::Error },
    /// The disk is smaller than tandem needs.
    #[error("backing disk {path} is too small: {size_bytes} bytes, at least {DISK_BYTES_MIN} needed")]
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
}

impl Disk {
    /// Open `path` for reading and writing and find its usable size.
    pub fn open(path: &Path) -> Result<Disk, DiskError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|source| DiskError::Open { path: path.to_path_buf(), source })?;
        let size_bytes = device_size(&file).map_err(|source| DiskError::Size { path: path.to_path_buf(), source })?;
        let size_bytes = size_bytes / DISK_ALIGN_BYTES * DISK_ALIGN_BYTES;
        if size_bytes < DISK_BYTES_MIN {
            return Err(DiskError::TooSmall { path: path.to_path_buf(), size_bytes });
        }
        let fault_trigger = std::env::var_os(DISK_FAULT_ENV).map(PathBuf::from);
        if let Some(trigger) = &fault_trigger {
            tracing::warn!("{}: I/O fails while {} exists ({DISK_FAULT_ENV}, tests only)", path.display(), trigger.display());
        }
        Ok(Disk { file, path: path.to_path_buf(), size_bytes: std::sync::atomic::AtomicU64::new(size_bytes), throttle: std::time::Duration::ZERO, fault_trigger, detached: std::sync::atomic::AtomicBool::new(false) })
    }

    /// Open `path` with its usable size cut to `data_bytes` (the part before internal
    /// metadata); the metadata region is then out of every client's and peer's reach.
    pub fn open_limited(path: &Path, data_bytes: u64) -> Result<Disk, DiskError> {
        let disk = Disk::open(path)?;
        let limited = data_bytes / DISK_ALIGN_BYTES * DISK_ALIGN_BYTES;
        if limited > disk.size_bytes() {
            return Err(DiskError::TooSmall { path: path.to_path_buf(), size_bytes: disk.size_bytes() });
        }
        disk.size_bytes.store(limited, std::sync::atomic::Ordering::Release);
        Ok(disk)
    }

    /// Widens the usable size to `data_bytes` (`resize`, once the metadata moved): refused if
    /// the device is smaller or the size would shrink.
    pub fn grow_to(&self, data_bytes: u64) -> Result<(), DiskError> {
        let device_bytes = device_size(&self.file).map_err(|source| DiskError::Size { path: self.path.clone(), source })?;
        let current = self.size_bytes();
        if data_bytes > device_bytes || data_bytes < current || !data_bytes.is_multiple_of(DISK_ALIGN_BYTES) {
            return Err(DiskError::TooSmall { path: self.path.clone(), size_bytes: device_bytes });
        }
        self.size_bytes.store(data_bytes, std::sync::atomic::Ordering::Release);
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

    /// Waits out the rest of the throttle for a write that started at `started`.
    fn throttle_since(&self, started: std::time::Instant) {
        if let Some(rest) = self.throttle.checked_sub(started.elapsed()) {
            std::thread::sleep(rest);
        }
    }

    /// Marks the disk detached (`repl::Action::Detached`): reads go to a peer, flushes skip it.
    pub fn set_detached(&self, detached: bool) {
        self.detached.store(detached, std::sync::atomic::Ordering::Release);
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
        self.file.read_exact_at(buf, offset).map_err(map_io)
    }

    /// Write `data` at `offset`; with `fua`, durably.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoError> {
        self.check(offset, data.len() as u64)?;
        let started = std::time::Instant::now();
        self.write_chunked(data, offset)?;
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
            let want = written.saturating_add(WRITE_PIECE_BYTES_MIN);
            let available = data.wait_blocking(want).map_err(|_| IoError::Aborted)?;
            let piece = &available[written..];
            self.write_chunked(piece, offset + written as u64)?;
            written = available.len();
        }
        self.throttle_since(started);
        if fua {
            self.flush()?;
        }
        Ok(())
    }

    /// Start writing a payload of `length` bytes at `offset` piece by piece as it arrives, on
    /// the thread that receives it ([`bufpool::Incoming::on_piece`]); see [`PieceWriter`].
    pub fn piece_writer(&self, offset: u64, length: u64, fua: bool) -> Result<PieceWriter, IoError> {
        if self.is_detached() {
            // A write that raced with the detach: refused, so the peer marks it for us.
            return Err(IoError::Io);
        }
        self.check(offset, length)?;
        Ok(PieceWriter { offset, written: 0, fua })
    }

    /// Writes `data` at `offset` in pieces that never cross a [`WRITE_CHUNK_BYTES`] boundary
    /// (see there why).
    fn write_chunked(&self, data: &[u8], offset: u64) -> Result<(), IoError> {
        let mut done = 0;
        while done < data.len() {
            let at = offset + done as u64;
            let room = usize::try_from(WRITE_CHUNK_BYTES - at % WRITE_CHUNK_BYTES).unwrap_or(usize::MAX);
            let end = done + room.min(data.len() - done);
            self.file.write_all_at(&data[done..end], at).map_err(map_io)?;
            done = end;
        }
        Ok(())
    }

    /// Make every completed write durable.
    pub fn flush(&self) -> Result<(), IoError> {
        self.injected_fault()?;
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
        if self.fallocate(mode, offset, length).is_err() {
            self.write_zeroes(offset, length)?;
        }
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

    fn write_zeroes(&self, offset: u64, length: u64) -> Result<(), IoError> {
        const CHUNK: u64 = 1 << 20;
        let zeroes = vec![0u8; CHUNK.min(length) as usize];
        let mut done = 0;
        while done < length {
            let n = (length - done).min(CHUNK) as usize;
            self.write_chunked(&zeroes[..n], offset + done)?;
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
        let fresh = available.get(self.written..).unwrap_or_default();
        if let Err(error) = disk.injected_fault().and_then(|()| disk.write_chunked(fresh, self.offset + self.written as u64)) {
            return Some(Err(error));
        }
        self.written = available.len();
        if !complete {
            return None;
        }
        Some(if self.fua { disk.flush() } else { Ok(()) })
    }
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
        let mut disk = Disk::open(file.path()).expect("open");
        assert!(!disk.is_throttled());
        disk.set_throttle(std::time::Duration::from_millis(20));
        assert!(disk.is_throttled());
        let started = std::time::Instant::now();
        disk.write(0, &[7; 4096], false).expect("write");
        assert!(started.elapsed() >= std::time::Duration::from_millis(20), "{:?}", started.elapsed());
        let mut back = [0; 4096];
        disk.read(0, &mut back).expect("read");
        assert_eq!(back, [7; 4096], "the data is written all the same");
    }

    #[test]
    fn a_write_across_chunk_boundaries_lands_byte_for_byte() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path()).expect("open");
        let chunk = WRITE_CHUNK_BYTES as usize;
        // Starts 512 bytes before a boundary, spans three more, ends mid-chunk.
        let offset = chunk - 512;
        let data: Vec<u8> = (0..3 * chunk + 1000).map(|i| (i % 251) as u8 + 1).collect();
        disk.write(offset as u64, &data, false).expect("write");
        let mut back = vec![0xEE; data.len() + 2 * 4096];
        disk.read((offset - 4096) as u64, &mut back).expect("read");
        assert!(back[..4096].iter().all(|&b| b == 0), "nothing before the write changed");
        assert!(back[4096..4096 + data.len()] == data[..], "every byte where it belongs");
        assert!(back[4096 + data.len()..].iter().all(|&b| b == 0), "nothing after the write changed");
    }

    #[test]
    fn a_piece_writer_writes_whole_pieces_as_they_arrive_and_the_rest_at_the_end() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path()).expect("open");
        let data: Vec<u8> = (0..WRITE_PIECE_BYTES_MIN + 5000).map(|i| (i % 253) as u8 + 1).collect();
        let offset = 8192;
        let mut writer = disk.piece_writer(offset, data.len() as u64, false).expect("in range");
        let on_disk = |len: usize| {
            let mut back = vec![0; len];
            disk.read(offset, &mut back).expect("read");
            back
        };
        assert_eq!(writer.feed(&disk, bufpool::Piece::Filled(&data[..1000])), None);
        assert!(on_disk(1000).iter().all(|&b| b == 0), "less than a piece waits");
        assert_eq!(writer.feed(&disk, bufpool::Piece::Filled(&data[..WRITE_PIECE_BYTES_MIN])), None);
        assert_eq!(on_disk(WRITE_PIECE_BYTES_MIN), data[..WRITE_PIECE_BYTES_MIN], "a whole piece is written");
        assert_eq!(writer.feed(&disk, bufpool::Piece::Complete(&data)), Some(Ok(())));
        assert_eq!(on_disk(data.len()), data, "the rest is written at the end");
    }

    #[test]
    fn a_piece_writer_reports_an_abort_and_refuses_a_range_past_the_end() {
        let file = tempfile::NamedTempFile::new().expect("temp file");
        file.as_file().set_len(DISK_BYTES_MIN).expect("size");
        let disk = Disk::open(file.path()).expect("open");
        assert_eq!(disk.piece_writer(DISK_BYTES_MIN - 4096, 8192, false).err(), Some(IoError::Invalid));
        let mut writer = disk.piece_writer(0, 8192, true).expect("in range");
        assert_eq!(writer.feed(&disk, bufpool::Piece::Aborted), Some(Err(IoError::Aborted)));
        disk.set_detached(true);
        assert_eq!(disk.piece_writer(0, 4096, false).err(), Some(IoError::Io), "a detached disk takes no writes");
    }
}
