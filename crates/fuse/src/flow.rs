//! Flow of requests between the FUSE threads and the export: a limit on requests in flight,
//! and the thread that finishes them.
//!
//! Invariants:
//! - At most `in_flight_max` requests are between submission and reply; a FUSE thread that
//!   would exceed it waits, so the kernel stops getting answers and queues (backpressure).
//! - An export completes requests on its own threads, possibly while holding its own locks.
//!   The completion callback therefore only queues the result; the reply to the kernel, any
//!   follow-up request and the release of the export handle happen on the completer thread,
//!   which holds no lock of the export. (The daemon calls completions under its engine lock;
//!   dropping its last export handle there, or submitting, would deadlock.)

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// A counting limit on requests in flight.
#[derive(Debug)]
pub(crate) struct Limiter {
    in_flight: Mutex<usize>,
    freed: Condvar,
    in_flight_max: usize,
}

/// One request's place under the limit; released on drop.
#[derive(Debug)]
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
}

impl Limiter {
    /// A limit of `in_flight_max` requests (at least one).
    pub(crate) fn new(in_flight_max: usize) -> Arc<Limiter> {
        Arc::new(Limiter {
            in_flight: Mutex::new(0),
            freed: Condvar::new(),
            in_flight_max: in_flight_max.max(1),
        })
    }

    fn count(&self) -> MutexGuard<'_, usize> {
        // Nothing panics while holding this lock (panic = "abort" besides), so a poisoned
        // lock still holds a valid count.
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until a request may start.
    pub(crate) fn acquire(self: &Arc<Self>) -> Permit {
        let mut count = self.count();
        while *count >= self.in_flight_max {
            count = self
                .freed
                .wait(count)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        *count += 1;
        Permit {
            limiter: Arc::clone(self),
        }
    }

    /// The limit.
    pub(crate) fn in_flight_max(&self) -> usize {
        self.in_flight_max
    }

    /// Requests in flight now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        *self.count()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut count = self.limiter.count();
        *count = count.saturating_sub(1);
        self.limiter.freed.notify_one();
    }
}

/// Work to run on the completer thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// The completer thread's queue. The thread ends when every clone is gone; each pending
/// completion holds a clone, so a job is never refused.
#[derive(Debug, Clone)]
pub(crate) struct Completer {
    jobs: Sender<Job>,
}

impl Completer {
    /// Starts the completer thread.
    pub(crate) fn start() -> std::io::Result<Completer> {
        let (jobs, receiver) = channel::<Job>();
        std::thread::Builder::new()
            .name("tandem-fuse-done".into())
            .spawn(move || {
                while let Ok(job) = receiver.recv() {
                    job();
                }
            })?;
        Ok(Completer { jobs })
    }

    /// Queues `job`.
    pub(crate) fn run(&self, job: Job) {
        if let Err(refused) = self.jobs.send(job) {
            // The thread only ends once every sender is gone, and `self` is one: unreachable.
            // Run it here rather than drop a reply.
            (refused.0)();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_limiter_blocks_at_the_limit_and_wakes_on_release() {
        let limiter = Limiter::new(2);
        let first = limiter.acquire();
        let _second = limiter.acquire();
        assert_eq!(limiter.in_flight(), 2);
        let (sender, receiver) = mpsc::channel();
        let waiting = Arc::clone(&limiter);
        let thread = std::thread::spawn(move || {
            let permit = waiting.acquire();
            sender.send(()).unwrap();
            drop(permit);
        });
        // The third waits: nothing arrives while both permits are held.
        assert!(receiver.recv_timeout(Duration::from_millis(100)).is_err());
        drop(first);
        receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiter was not woken");
        thread.join().unwrap();
        assert_eq!(limiter.in_flight(), 1);
    }

    #[test]
    fn the_completer_runs_jobs_in_order() {
        let completer = Completer::start().unwrap();
        let (sender, receiver) = mpsc::channel();
        for index in 0..10 {
            let sender = sender.clone();
            completer.run(Box::new(move || sender.send(index).unwrap()));
        }
        let got: Vec<i32> = (0..10)
            .map(|_| receiver.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }
}
