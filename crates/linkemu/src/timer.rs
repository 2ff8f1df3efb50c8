//! A sub-millisecond timer for the relay's release times.
//!
//! tokio's timer wheel rounds every deadline up to the next millisecond, which would add up to
//! 1 ms to a 2 ms link. This timer keeps deadlines in a sorted map and one thread waits on a
//! condition variable until the earliest one (the kernel's timer slack, about 50 µs, is the
//! error), then wakes the waiting futures through oneshot channels.
//!
//! Invariants:
//! - Every registered deadline is fired (its sender used or dropped) no earlier than the
//!   deadline, or when the timer stops; a waiter whose future was dropped is fired harmlessly.
//! - The thread exits when the last [`Timer`] clone is dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::oneshot;

use crate::LinkError;

#[derive(Debug, Default)]
struct Pending {
    /// Deadline and registration number (for unique keys) to the waiter's sender.
    due: BTreeMap<(Instant, u64), oneshot::Sender<()>>,
    registered: u64,
    stopping: bool,
}

#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding this lock aborts the process (panic = "abort"), so poisoning
        // cannot leave a half-updated map behind.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stops the thread when the last clone of a [`Timer`] goes away.
#[derive(Debug)]
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.lock().stopping = true;
        self.0.changed.notify_one();
    }
}

/// A handle to the timer thread; clones share it.
#[derive(Debug, Clone)]
pub struct Timer {
    shared: Arc<Shared>,
    _stop: Arc<StopOnDrop>,
}

impl Timer {
    /// Starts the timer thread.
    pub fn start() -> Result<Timer, LinkError> {
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("linkemu-timer".into())
            .spawn(move || run(&thread_shared))
            .map_err(LinkError::Thread)?;
        let stop = Arc::new(StopOnDrop(Arc::clone(&shared)));
        Ok(Timer {
            shared,
            _stop: stop,
        })
    }

    /// Completes at `deadline` (at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        if deadline <= Instant::now() {
            return;
        }
        let (sender, receiver) = oneshot::channel();
        {
            let mut pending = self.shared.lock();
            if pending.stopping {
                return;
            }
            pending.registered += 1;
            let key = (deadline, pending.registered);
            let earliest = pending.due.keys().next().is_none_or(|first| key < *first);
            pending.due.insert(key, sender);
            if earliest {
                self.shared.changed.notify_one();
            }
        }
        // An error means the timer stopped; the relay is shutting down then.
        let _ = receiver.await;
    }
}

fn run(shared: &Shared) {
    let mut pending = shared.lock();
    loop {
        if pending.stopping {
            return;
        }
        let now = Instant::now();
        while let Some(entry) = pending.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            // The waiter may have gone away; that is fine.
            let _ = entry.remove().send(());
        }
        pending = match pending.due.keys().next() {
            Some(&(deadline, _)) => {
                let wait = deadline.saturating_duration_since(now);
                shared
                    .changed
                    .wait_timeout(pending, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => shared
                .changed
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}
