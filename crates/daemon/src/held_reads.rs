//! Client reads held by `suspend-io` until `resume-io`. Reads do not pass through the
//! engine (the engine holds the writes), so the driver keeps them here.
//!
//! Invariant: no read is lost between the check and the release. A read checks the flag
//! without the lock (the common case, not suspended, takes no lock); when it sees it set it
//! re-checks under the lock before it queues itself, and [`HeldReads::resume`] clears the
//! flag under that same lock while it takes the queue, so a read is either queued before the
//! queue is taken or sees the flag cleared and goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::resource::Completion;

/// One held client read.
pub(crate) struct HeldRead {
    pub(crate) volume: u16,
    pub(crate) offset: u64,
    pub(crate) length: u32,
    pub(crate) completion: Completion,
}

/// The reads of one resource held by `suspend-io`.
#[derive(Default)]
pub(crate) struct HeldReads {
    suspended: AtomicBool,
    queue: Mutex<Vec<HeldRead>>,
}

impl HeldReads {
    /// Holds `read` while suspended (None); gives it back otherwise.
    pub(crate) fn hold(&self, read: HeldRead) -> Option<HeldRead> {
        if !self.suspended.load(Ordering::Acquire) {
            return Some(read);
        }
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.suspended.load(Ordering::Acquire) {
            return Some(read);
        }
        queue.push(read);
        None
    }

    /// `suspend-io`: reads from now on are held.
    pub(crate) fn suspend(&self) {
        let _queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.suspended.store(true, Ordering::Release);
    }

    /// `resume-io`: no read is held any more; returns the ones that were, oldest first.
    pub(crate) fn resume(&self) -> Vec<HeldRead> {
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.suspended.store(false, Ordering::Release);
        std::mem::take(&mut *queue)
    }
}
