//! A payload that is still arriving: one [`Filler`] fills a pooled buffer front to back while
//! any number of [`Incoming`] handles use the part already filled.
//!
//! This is what lets a large write be forwarded and written while it is still coming in (cut
//! through, rather than store and forward): the NBD reader or the peer receiver fills the
//! buffer as bytes arrive from its socket; the local disk writer and each peer sender wait for
//! the next filled piece, pass it on, and wait again.
//!
//! Invariants:
//! - Bytes below `filled` are never written again; only the one [`Filler`] writes, and only at
//!   or above `filled`. So readers (below `filled`) and the writer (above) never touch the same
//!   byte, and a reader sees every byte of its prefix as written (release/acquire on `filled`).
//! - `filled` only grows, up to `len`. The state goes Filling → Complete (exactly when
//!   `filled == len`) or Filling → Aborted (the filler was dropped early); never back.
//! - The buffer lives as long as the last handle, filler included.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use crate::PoolBuf;

const FILLING: u8 = 0;
const COMPLETE: u8 = 1;
const ABORTED: u8 = 2;

/// The filler went away before the payload was complete (its source connection broke).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the payload stopped arriving before it was complete")
    }
}

impl std::error::Error for Aborted {}

/// How far a payload has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// This many bytes from the start are filled; more are coming.
    Filling(usize),
    /// Every byte is filled.
    Complete,
    /// It will never be complete.
    Aborted,
}

struct Shared {
    /// Start of the buffer; valid for `len` bytes while `_buf` lives.
    ptr: NonNull<u8>,
    len: usize,
    filled: AtomicUsize,
    state: AtomicU8,
    /// Who waits for more bytes; the condvar below waits on the same mutex.
    waiters: Mutex<Waiters>,
    arrived: Condvar,
    /// Owns the memory `ptr` points into; never accessed through a reference after creation.
    _owner: Owner,
}

/// Who waits for how many bytes, and work to start once the payload stops arriving.
///
/// A waiter is woken only once the bytes it asked for are there (or never will be), not on
/// every piece the filler publishes: a socket read is often much smaller than the pieces the
/// disk writer and the peer senders wait for, and each needless wake-up is a context switch.
struct Waiters {
    /// Tasks, each with the fill level it waits for (already clamped to `len`).
    wakers: Vec<(Waker, usize)>,
    /// The least fill level a thread in [`Incoming::wait_blocking`] waits for (`usize::MAX`:
    /// none waits).
    blocking_min: usize,
    on_arrival: Vec<OnArrival>,
    /// Run by the filler after each piece (see [`Incoming::on_piece`]).
    sinks: Vec<OnPiece>,
}

impl Default for Waiters {
    fn default() -> Waiters {
        Waiters {
            wakers: Vec::new(),
            blocking_min: usize::MAX,
            on_arrival: Vec::new(),
            sinks: Vec::new(),
        }
    }
}

/// What a payload's filler hands a sink registered with [`Incoming::on_piece`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// The prefix filled so far; more is coming.
    Filled(&'a [u8]),
    /// The whole payload.
    Complete(&'a [u8]),
    /// It will never be complete.
    Aborted,
}

/// Work the filler does with each piece as it arrives; returns true once it wants no more
/// calls (it must on [`Piece::Complete`] and [`Piece::Aborted`]).
pub type OnPiece = Box<dyn FnMut(Piece<'_>) -> bool + Send>;

/// Work run once a payload is complete or aborted.
pub type OnArrival = Box<dyn FnOnce() + Send>;

/// What keeps an [`Incoming`]'s memory alive.
enum Owner {
    /// A pooled buffer, possibly still being filled.
    Pool(#[allow(dead_code)] PoolBuf),
    /// Bytes that were complete from the start (never written through `ptr`).
    Bytes(#[allow(dead_code)] Bytes),
}

// SAFETY: the raw pointer is into memory owned by `_buf`, which is Send; access to the bytes
// follows the module invariant (one writer above `filled`, readers below it), synchronised by
// the atomics.
unsafe impl Send for Shared {}
// SAFETY: as above: shared access never creates overlapping mutable and shared views.
unsafe impl Sync for Shared {}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Waiters> {
        self.waiters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wake everyone whose wait is over (after `filled` or `state` changed) and, with
    /// `feed_sinks`, hand the piece to the sinks; once the payload stopped arriving, that is
    /// everyone, and the work waiting for that runs too. One lock round per call (two while a
    /// sink wants more).
    fn wake_all(&self, feed_sinks: bool) {
        let (wakers, sinks, work, notify) = {
            let mut waiters = self.lock();
            let done = self.state.load(Ordering::Acquire) != FILLING;
            let filled = if done {
                usize::MAX
            } else {
                self.filled.load(Ordering::Acquire)
            };
            let work = if done {
                std::mem::take(&mut waiters.on_arrival)
            } else {
                Vec::new()
            };
            let mut ready = Vec::new();
            let mut index = 0;
            while index < waiters.wakers.len() {
                if waiters.wakers[index].1 <= filled {
                    ready.push(waiters.wakers.swap_remove(index).0);
                } else {
                    index += 1;
                }
            }
            let notify = waiters.blocking_min <= filled;
            if notify {
                // Every blocked thread wakes and registers again what it still waits for.
                waiters.blocking_min = usize::MAX;
            }
            let sinks = if feed_sinks {
                std::mem::take(&mut waiters.sinks)
            } else {
                Vec::new()
            };
            (ready, sinks, work, notify)
        };
        if notify {
            self.arrived.notify_all();
        }
        wakers.into_iter().for_each(Waker::wake);
        // After the wake-ups, so a woken sender on another thread passes the piece on while
        // a sink writes it here; outside the lock, so a sink may use this payload.
        self.run_sinks(sinks);
        work.into_iter().for_each(|work| work());
    }

    /// Hands the current piece to the sinks registered now (see [`Filler::publish`]).
    fn feed_sinks(&self) {
        let sinks = std::mem::take(&mut self.lock().sinks);
        self.run_sinks(sinks);
    }

    /// Hands the current piece to `sinks` and registers again those that want more.
    fn run_sinks(&self, mut sinks: Vec<OnPiece>) {
        if sinks.is_empty() {
            return;
        }
        let piece = match self.state.load(Ordering::Acquire) {
            COMPLETE => Piece::Complete(self.prefix(self.len)),
            ABORTED => Piece::Aborted,
            _ => Piece::Filled(self.prefix(self.filled.load(Ordering::Acquire))),
        };
        let last = !matches!(piece, Piece::Filled(_));
        sinks.retain_mut(|sink| !sink(piece) && !last);
        if !sinks.is_empty() {
            self.lock().sinks.append(&mut sinks);
        }
    }

    /// The filled prefix, if it holds at least `at_least` bytes (clamped to `len`), or the
    /// payload can never get there.
    fn ready(&self, at_least: usize) -> Option<Result<&[u8], Aborted>> {
        let target = at_least.min(self.len);
        let filled = self.filled.load(Ordering::Acquire);
        if filled >= target {
            return Some(Ok(self.prefix(filled)));
        }
        (self.state.load(Ordering::Acquire) == ABORTED).then_some(Err(Aborted))
    }

    fn prefix(&self, filled: usize) -> &[u8] {
        assert!(filled <= self.len);
        // SAFETY: ptr is valid for len bytes while self lives; bytes below `filled` were
        // written before `filled` was published (release/acquire) and are never written
        // again, so a shared view of them is sound.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), filled) }
    }
}

/// A shared handle on a payload that may still be arriving. Clones are cheap.
#[derive(Clone)]
pub struct Incoming {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming")
            .field("len", &self.shared.len)
            .field("arrival", &self.arrival())
            .finish()
    }
}

/// The one writer of an [`Incoming`] payload. Dropping it before the payload is complete
/// aborts the payload.
pub struct Filler {
    shared: Arc<Shared>,
    /// A piece was published with [`Filler::publish`] and the sinks have not had it yet.
    sinks_owed: bool,
}

impl std::fmt::Debug for Filler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filler")
            .field("len", &self.shared.len)
            .finish()
    }
}

impl Incoming {
    /// An empty payload of `buf.len()` bytes to be filled through the returned [`Filler`].
    pub fn filling(buf: PoolBuf) -> (Filler, Incoming) {
        let shared = Incoming::share(buf, 0);
        (
            Filler {
                shared: Arc::clone(&shared),
                sinks_owed: false,
            },
            Incoming { shared },
        )
    }

    /// A payload that is already complete.
    pub fn complete(buf: PoolBuf) -> Incoming {
        let len = buf.len();
        Incoming {
            shared: Incoming::share(buf, len),
        }
    }

    /// A complete payload made of existing bytes (no copy).
    pub fn from_bytes(bytes: Bytes) -> Incoming {
        let len = bytes.len();
        // The pointer is only ever read through: with filled == len there is no filler.
        let ptr = NonNull::new(bytes.as_ptr().cast_mut()).unwrap_or(NonNull::dangling());
        Incoming {
            shared: Incoming::shared(ptr, len, len, Owner::Bytes(bytes)),
        }
    }

    fn share(mut buf: PoolBuf, filled: usize) -> Arc<Shared> {
        let len = buf.len();
        let ptr = NonNull::new(buf.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Incoming::shared(ptr, len, filled, Owner::Pool(buf))
    }

    fn shared(ptr: NonNull<u8>, len: usize, filled: usize, owner: Owner) -> Arc<Shared> {
        let state = if filled == len { COMPLETE } else { FILLING };
        Arc::new(Shared {
            ptr,
            len,
            filled: AtomicUsize::new(filled),
            state: AtomicU8::new(state),
            waiters: Mutex::new(Waiters::default()),
            arrived: Condvar::new(),
            _owner: owner,
        })
    }

    /// Total length once complete.
    pub fn len(&self) -> usize {
        self.shared.len
    }

    /// Whether the payload has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.shared.len == 0
    }

    /// How far it has arrived.
    pub fn arrival(&self) -> Arrival {
        match self.shared.state.load(Ordering::Acquire) {
            COMPLETE => Arrival::Complete,
            ABORTED => Arrival::Aborted,
            _ => Arrival::Filling(self.shared.filled.load(Ordering::Acquire)),
        }
    }

    /// The bytes filled so far (all of them once complete).
    pub fn available(&self) -> &[u8] {
        self.shared
            .prefix(self.shared.filled.load(Ordering::Acquire))
    }

    /// The whole payload, if it is complete.
    pub fn as_complete(&self) -> Option<&[u8]> {
        (self.shared.state.load(Ordering::Acquire) == COMPLETE).then(|| self.available())
    }

    /// Wait (blocking the thread) until at least `at_least` bytes (clamped to the length) are
    /// filled; returns the filled prefix, or Aborted if they never will be.
    pub fn wait_blocking(&self, at_least: usize) -> Result<&[u8], Aborted> {
        let mut guard = self.shared.lock();
        loop {
            if let Some(result) = self.shared.ready(at_least) {
                return result;
            }
            guard.blocking_min = guard.blocking_min.min(at_least.min(self.shared.len));
            guard = self
                .shared
                .arrived
                .wait(guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// Run `work` once the payload is complete or aborted: now, on this thread, if it
    /// already is; otherwise on the filler's thread when it gets there (so `work` must be
    /// short and must not block). This waits without holding a thread or a task.
    pub fn on_arrival(&self, work: OnArrival) {
        {
            let mut waiters = self.shared.lock();
            // Checked under the lock: the filler changes the state before it takes the lock
            // to run the waiting work, so `work` is either queued in time or run here.
            if self.shared.state.load(Ordering::Acquire) == FILLING {
                waiters.on_arrival.push(work);
                return;
            }
        }
        work();
    }

    /// Run `sink` on the filler's thread after each piece it fills, until the sink says it is
    /// done (at the latest when the payload is complete or aborted). The filler's next read
    /// waits for the sink, so a sink that writes each piece to a disk turns the filler into
    /// the writer: no thread waits for the payload and none is woken per piece. Returns the
    /// sink if the payload already stopped arriving (then nothing will run it).
    pub fn on_piece(&self, sink: OnPiece) -> Result<(), OnPiece> {
        let mut waiters = self.shared.lock();
        // Checked under the lock: the filler changes the state before it takes the lock to
        // run the sinks, so `sink` is either registered in time or handed back here.
        if self.shared.state.load(Ordering::Acquire) != FILLING {
            return Err(sink);
        }
        waiters.sinks.push(sink);
        Ok(())
    }

    /// Like [`Incoming::wait_blocking`], for async tasks.
    pub fn wait(&self, at_least: usize) -> Wait<'_> {
        Wait {
            incoming: self,
            at_least,
        }
    }
}

/// Future of [`Incoming::wait`].
#[derive(Debug)]
pub struct Wait<'a> {
    incoming: &'a Incoming,
    at_least: usize,
}

impl<'a> Future for Wait<'a> {
    type Output = Result<&'a [u8], Aborted>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared: &'a Shared = &self.incoming.shared;
        if let Some(result) = shared.ready(self.at_least) {
            return Poll::Ready(result);
        }
        let mut waiters = shared.lock();
        // Checked again under the lock: the filler publishes before it takes the lock to
        // wake, so no wake-up is lost between the check and the registration.
        if let Some(result) = shared.ready(self.at_least) {
            return Poll::Ready(result);
        }
        let target = self.at_least.min(shared.len);
        match waiters
            .wakers
            .iter_mut()
            .find(|(waker, _)| waker.will_wake(cx.waker()))
        {
            Some((_, waits_for)) => *waits_for = (*waits_for).min(target),
            None => waiters.wakers.push((cx.waker().clone(), target)),
        }
        Poll::Pending
    }
}

impl Filler {
    /// The part not yet filled; write into its start, then [`Filler::advance`].
    pub fn spare(&mut self) -> &mut [u8] {
        let shared = &self.shared;
        let filled = shared.filled.load(Ordering::Relaxed);
        assert!(filled <= shared.len);
        // SAFETY: only this filler writes, and only at or above `filled`; readers only view
        // bytes below `filled` (module invariant), so this mutable view overlaps no other
        // view. The `&mut self` borrow keeps it unique among the filler's own views.
        unsafe {
            std::slice::from_raw_parts_mut(shared.ptr.as_ptr().add(filled), shared.len - filled)
        }
    }

    /// Publish the next `count` bytes of [`Filler::spare`] as filled: wake whoever waits for
    /// them and hand the piece to the sinks ([`Incoming::on_piece`]).
    pub fn advance(&mut self, count: usize) {
        if self.publish_only(count) {
            self.sinks_owed = false;
            self.shared.wake_all(true);
        }
    }

    /// Like [`Filler::advance`], but the sinks get the piece only at the next
    /// [`Filler::pass_to_sinks`] (or when the filler is dropped). For a filler on an async
    /// runtime that lets the tasks this wakes (peer senders) run first: a sink that writes
    /// to a disk would otherwise delay them by the write.
    pub fn publish(&mut self, count: usize) {
        if self.publish_only(count) {
            self.sinks_owed = true;
            self.shared.wake_all(false);
        }
    }

    /// Hands the sinks what [`Filler::publish`] published since they last had a piece.
    pub fn pass_to_sinks(&mut self) {
        if std::mem::take(&mut self.sinks_owed) {
            self.shared.feed_sinks();
        }
    }

    /// Moves `filled` (and the state, at the end) on by `count`; false if `count` is zero.
    fn publish_only(&mut self, count: usize) -> bool {
        let shared = &self.shared;
        let filled = shared.filled.load(Ordering::Relaxed);
        assert!(
            count <= shared.len - filled,
            "advance past the end of the payload"
        );
        if count == 0 {
            return false;
        }
        shared.filled.store(filled + count, Ordering::Release);
        if filled + count == shared.len {
            shared.state.store(COMPLETE, Ordering::Release);
        }
        true
    }

    /// Bytes still to fill.
    pub fn remaining(&self) -> usize {
        self.shared.len - self.shared.filled.load(Ordering::Relaxed)
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        if self.shared.state.load(Ordering::Acquire) == FILLING {
            self.shared.state.store(ABORTED, Ordering::Release);
            self.shared.wake_all(true);
        } else {
            // Complete, with the last piece perhaps still owed to the sinks.
            self.pass_to_sinks();
        }
    }
}

#[cfg(test)]
mod tests;
