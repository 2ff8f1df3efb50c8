//! Aligned, recycled I/O buffers: one allocation per request, shared without copying.
//!
//! A request's payload is read straight from its socket into a [`PoolBuf`], frozen into
//! [`bytes::Bytes`], and that one `Bytes` is cloned for the local disk write and for every peer
//! send. When the last clone drops, the memory returns to the pool's free list for its size
//! class (seed 003's lesson: one allocation per request, not one per page).
//!
//! Invariants:
//! - Every buffer's start is aligned to [`ALIGNMENT`] (so it can be used with `O_DIRECT`).
//! - A buffer of class `c` has capacity exactly `CLASS_MIN_BYTES << c`.
//! - The free lists together never hold more than `PoolConfig::retained_bytes_max`; beyond
//!   that, returned buffers are freed. The pool does not bound buffers in use: callers bound
//!   in-flight requests (the NBD server and the peer receiver each have a named limit).

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

mod incoming;
pub use incoming::{Aborted, Arrival, Filler, Incoming, OnArrival, OnPiece, Piece, Wait};

/// Alignment of every buffer, in bytes.
pub const ALIGNMENT: usize = 4096;
/// Capacity of the smallest size class.
pub const CLASS_MIN_BYTES: usize = 4096;
/// Number of size classes: 4 KiB, 8 KiB, ... 64 MiB.
pub const CLASS_COUNT: usize = 15;
/// Largest buffer the pool hands out.
pub const BUFFER_BYTES_MAX: usize = CLASS_MIN_BYTES << (CLASS_COUNT - 1);

const _: () = assert!(BUFFER_BYTES_MAX == 64 * 1024 * 1024);
const _: () = assert!(CLASS_MIN_BYTES.is_multiple_of(ALIGNMENT));

/// Settings of a pool.
#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// Upper bound of memory kept in free lists for reuse.
    pub retained_bytes_max: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            retained_bytes_max: 256 * 1024 * 1024,
        }
    }
}

/// A pool of aligned buffers in power-of-two size classes.
#[derive(Debug)]
pub struct BufPool {
    config: PoolConfig,
    free: Mutex<FreeLists>,
}

#[derive(Debug, Default)]
struct FreeLists {
    classes: [Vec<RawBuf>; CLASS_COUNT],
    retained_bytes: usize,
}

/// One aligned heap allocation of a class's capacity.
#[derive(Debug)]
struct RawBuf {
    ptr: NonNull<u8>,
    class: usize,
}

// SAFETY: RawBuf exclusively owns its allocation; it is plain memory with no thread affinity.
unsafe impl Send for RawBuf {}
// SAFETY: shared access only ever reads through `&[u8]`.
unsafe impl Sync for RawBuf {}

impl RawBuf {
    fn layout(class: usize) -> Layout {
        // The sizes are powers of two ≥ ALIGNMENT and ≤ 64 MiB, so this cannot fail.
        match Layout::from_size_align(class_bytes(class), ALIGNMENT) {
            Ok(layout) => layout,
            Err(_) => unreachable!("size classes are valid layouts"),
        }
    }

    fn allocate(class: usize) -> RawBuf {
        let layout = RawBuf::layout(class);
        // SAFETY: the layout has a non-zero size. Zeroed memory means a buffer never exposes
        // another request's old data through a short read.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        match NonNull::new(ptr) {
            Some(ptr) => RawBuf { ptr, class },
            None => alloc::handle_alloc_error(layout),
        }
    }

    fn as_slice(&self, len: usize) -> &[u8] {
        assert!(len <= class_bytes(self.class));
        // SAFETY: ptr is a live allocation of class_bytes(class) ≥ len bytes, initialised
        // (zeroed at allocation), and we hold a shared borrow of its owner.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    fn as_mut_slice(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= class_bytes(self.class));
        // SAFETY: as in as_slice, and we hold the unique borrow of the owner.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), len) }
    }
}

impl Drop for RawBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated with exactly this layout and is freed once, here.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), RawBuf::layout(self.class)) }
    }
}

fn class_bytes(class: usize) -> usize {
    CLASS_MIN_BYTES << class
}

/// The smallest class whose capacity holds `len` bytes, or None if `len` is too large.
fn class_for(len: usize) -> Option<usize> {
    (0..CLASS_COUNT).find(|&class| class_bytes(class) >= len)
}

impl BufPool {
    /// A new, empty pool.
    pub fn new(config: PoolConfig) -> Arc<BufPool> {
        Arc::new(BufPool {
            config,
            free: Mutex::new(FreeLists::default()),
        })
    }

    /// A buffer of exactly `len` bytes (contents unspecified), or None when `len` exceeds
    /// [`BUFFER_BYTES_MAX`].
    pub fn take(self: &Arc<Self>, len: usize) -> Option<PoolBuf> {
        let class = class_for(len)?;
        let reused = self.lock().and_then(|mut free| {
            let raw = free.classes[class].pop()?;
            free.retained_bytes -= class_bytes(class);
            Some(raw)
        });
        let raw = reused.unwrap_or_else(|| RawBuf::allocate(class));
        Some(PoolBuf {
            raw: Some(raw),
            len,
            pool: Arc::clone(self),
        })
    }

    /// Bytes currently held in free lists (for metrics and tests).
    pub fn retained_bytes(&self) -> usize {
        self.lock().map_or(0, |free| free.retained_bytes)
    }

    fn give_back(&self, raw: RawBuf) {
        let bytes = class_bytes(raw.class);
        if let Some(mut free) = self.lock() {
            if free.retained_bytes + bytes <= self.config.retained_bytes_max {
                free.retained_bytes += bytes;
                free.classes[raw.class].push(raw);
            }
        }
    }

    /// The free lists, or None if a panic poisoned the lock (then the pool degrades to plain
    /// allocation instead of spreading the panic).
    fn lock(&self) -> Option<std::sync::MutexGuard<'_, FreeLists>> {
        self.free.lock().ok()
    }
}

/// A buffer on loan from a [`BufPool`]; returns itself on drop.
#[derive(Debug)]
pub struct PoolBuf {
    /// Always Some until drop.
    raw: Option<RawBuf>,
    len: usize,
    pool: Arc<BufPool>,
}

impl PoolBuf {
    /// Shorten the visible length (the capacity stays with the buffer).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Freeze into shared, immutable bytes. Clones share this one allocation; the last drop
    /// returns it to the pool.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl Deref for PoolBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.raw {
            Some(raw) => raw.as_slice(self.len),
            None => &[],
        }
    }
}

impl DerefMut for PoolBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.raw {
            Some(raw) => raw.as_mut_slice(len),
            None => &mut [],
        }
    }
}

impl AsRef<[u8]> for PoolBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.pool.give_back(raw);
        }
    }
}

#[cfg(test)]
mod tests;
