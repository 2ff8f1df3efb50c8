//! What each file operation asks of an export: pure functions from a FUSE operation's
//! arguments (and the export's size and capabilities) to NBD requests or an errno. No I/O.
//!
//! Invariants:
//! - Every request produced is what the NBD server would let through to an export: inside the
//!   export, non-empty, within [`REQUEST_BYTES_MAX`] for data, and only for a capability the
//!   export advertised. An export never sees anything else from the FUSE side either.
//! - A range that reaches past the end of the export is cut at the end, as a block device
//!   does; a read there returns fewer bytes (end of file), a write fewer bytes written.
//! - A punched hole must read back as zeros, so `FALLOC_FL_PUNCH_HOLE` becomes
//!   `WriteZeroes` (which may punch) and never `Trim` (whose contents afterwards are
//!   unspecified).

use std::ops::Range;

use nbd::{Command, Errno, ExportInfo, OpenError};

/// The largest read or write handed to an export in one request, and the mount's
/// `max_write`: 1 MiB, what the kernel allows a FUSE request here (`max_pages_limit` 256).
pub const REQUEST_BYTES_MAX: u32 = 1 << 20;
/// A `fallocate` range is cut into requests of at most this many bytes.
pub const FALLOCATE_CHUNK_BYTES: u32 = 1 << 30;
/// Separates an export name's parts in a file name: `r0/1` (volume 1) is the file `r0:1`.
/// Resource names cannot contain it (DRBD allows letters, digits, `_`, `.` and `-`).
pub const NAME_SEPARATOR: char = ':';

/// The errno (positive, as `libc` defines them) a failed request becomes.
pub fn errno_of(errno: Errno) -> i32 {
    match errno {
        Errno::Perm => libc::EPERM,
        Errno::Io => libc::EIO,
        Errno::NoMem => libc::ENOMEM,
        Errno::Inval => libc::EINVAL,
        Errno::NoSpc => libc::ENOSPC,
        Errno::Overflow => libc::EOVERFLOW,
        Errno::NotSup => libc::EOPNOTSUPP,
        Errno::Shutdown => libc::ESHUTDOWN,
    }
}

/// The errno a refused open becomes: a policy refusal (this node is Secondary, the resource
/// is down) is a permission error, so no caller mistakes it for a missing file or a disk
/// error.
pub fn open_errno(error: &OpenError) -> i32 {
    match error {
        OpenError::Unknown => libc::ENOENT,
        OpenError::Policy(_) => libc::EACCES,
    }
}

/// The file name of an export: its name with every `/` turned into [`NAME_SEPARATOR`].
/// Names that cannot be one file name are an error with the reason.
pub fn file_name(export: &str) -> Result<String, &'static str> {
    if export.is_empty() || export == "." || export == ".." {
        return Err("it is empty, '.' or '..'");
    }
    if export.contains(NAME_SEPARATOR) || export.contains('\0') {
        return Err("it contains ':' or a NUL byte");
    }
    Ok(export.replace('/', &NAME_SEPARATOR.to_string()))
}

/// Whether a write with these open flags must be durable when it completes (`O_DSYNC`;
/// `O_SYNC` includes its bit, and the kernel adds it for `RWF_DSYNC` writes).
pub fn wants_durable(open_flags: i32) -> bool {
    open_flags & libc::O_DSYNC == libc::O_DSYNC
}

/// The part of `offset .. offset + length` inside an export of `size` bytes, or None when
/// nothing of it is.
fn inside(size: u64, offset: u64, length: u64) -> Option<Range<u64>> {
    let end = offset.saturating_add(length).min(size);
    (offset < end).then_some(offset..end)
}

/// The read to submit for `read(offset, length)`: None at or past the end (end of file:
/// reply with no data); `EINVAL` for more than [`REQUEST_BYTES_MAX`].
pub fn read(size: u64, offset: u64, length: u32) -> Result<Option<Command>, i32> {
    if length > REQUEST_BYTES_MAX {
        return Err(libc::EINVAL);
    }
    Ok(
        inside(size, offset, u64::from(length)).map(|range| Command::Read {
            offset: range.start,
            length: byte_count(&range),
        }),
    )
}

/// How many leading bytes of a write of `length` at `offset` to submit: all of it, or what
/// fits before the end (a short write). `ENOSPC` when nothing fits, `EINVAL` for more than
/// [`REQUEST_BYTES_MAX`] or for an empty write (the kernel does not send those).
pub fn write(size: u64, offset: u64, length: usize) -> Result<usize, i32> {
    let length = u32::try_from(length).map_err(|_| libc::EINVAL)?;
    if length == 0 || length > REQUEST_BYTES_MAX {
        return Err(libc::EINVAL);
    }
    match inside(size, offset, u64::from(length)) {
        // The range is at most REQUEST_BYTES_MAX long, so it fits a usize.
        Some(range) => Ok(usize::try_from(range.end - range.start).unwrap_or(0)),
        None => Err(libc::ENOSPC),
    }
}

/// The requests a `fallocate(mode, offset, length)` becomes (empty: nothing to do).
/// - Plain allocation (mode 0 or `KEEP_SIZE`): the export is allocated already; asking to
///   grow it is `EFBIG`.
/// - `PUNCH_HOLE` (always with `KEEP_SIZE`): `WriteZeroes` that may punch, so the range
///   reads back as zeros.
/// - `ZERO_RANGE`: `WriteZeroes` that keeps the range allocated; past the end without
///   `KEEP_SIZE` is `EFBIG`.
/// - Anything else, or zeroing on an export that cannot, is `EOPNOTSUPP`.
pub fn fallocate(
    info: &ExportInfo,
    mode: i32,
    offset: u64,
    length: u64,
) -> Result<Vec<Command>, i32> {
    const KEEP_SIZE: i32 = libc::FALLOC_FL_KEEP_SIZE;
    let grows = offset.saturating_add(length) > info.size && mode & KEEP_SIZE == 0;
    let no_hole = match mode & !KEEP_SIZE {
        0 if grows => return Err(libc::EFBIG),
        0 => return Ok(Vec::new()),
        libc::FALLOC_FL_PUNCH_HOLE if mode & KEEP_SIZE != 0 => false,
        libc::FALLOC_FL_ZERO_RANGE if grows => return Err(libc::EFBIG),
        libc::FALLOC_FL_ZERO_RANGE => true,
        _ => return Err(libc::EOPNOTSUPP),
    };
    if info.read_only {
        return Err(libc::EROFS);
    }
    if !info.can_write_zeroes {
        return Err(libc::EOPNOTSUPP);
    }
    let Some(range) = inside(info.size, offset, length) else {
        return Ok(Vec::new());
    };
    Ok(chunks(range)
        .map(|chunk| Command::WriteZeroes {
            offset: chunk.start,
            length: byte_count(&chunk),
            no_hole,
        })
        .collect())
}

/// `range` cut into pieces of at most [`FALLOCATE_CHUNK_BYTES`].
fn chunks(range: Range<u64>) -> impl Iterator<Item = Range<u64>> {
    let step = u64::from(FALLOCATE_CHUNK_BYTES);
    let end = range.end;
    (range.start..end)
        .step_by(usize::try_from(step).unwrap_or(usize::MAX))
        .map(move |start| start..start.saturating_add(step).min(end))
}

/// The length of a range no longer than `u32::MAX` (every caller's is).
fn byte_count(range: &Range<u64>) -> u32 {
    u32::try_from(range.end - range.start).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
