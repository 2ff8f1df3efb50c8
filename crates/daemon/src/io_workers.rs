//! A small, fixed pool of threads that perform blocking disk I/O for one resource.
//!
//! Why not `spawn_blocking` per request: each call allocates a task and wakes a thread, and at
//! high queue depth it grows to hundreds of threads that contend for the backing file's lock.
//! A few long-lived threads draining one queue pick up queued work without sleeping under load
//! and keep buffered writes from fighting each other.
//!
//! Invariants: the queue is bounded by the callers' in-flight limits (NBD requests, received
//! payloads); jobs run in FIFO order per thread but concurrently across threads — the engine
//! only issues I/O that may run concurrently. Dropping the pool lets the threads finish the
//! queued jobs and exit.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// One unit of blocking work.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// The I/O threads of one resource.
#[derive(Debug)]
pub(crate) struct IoWorkers {
    queue: Sender<Job>,
}

/// Threads per resource: buffered writes to one file serialise in the kernel anyway, so a few
/// threads give all the concurrency there is while a read or a flush is in progress.
pub(crate) const IO_THREADS: usize = 3;
/// Threads of a resource with an `io direct` disk: each direct write holds its thread for a
/// device round trip, and direct writes to one file run concurrently in the kernel, so the
/// threads bound the requests in flight at the device.
pub(crate) const IO_THREADS_DIRECT: usize = 8;
const _: () = assert!(IO_THREADS_DIRECT >= IO_THREADS);

impl IoWorkers {
    /// Start `threads` threads ([`IO_THREADS`], or [`IO_THREADS_DIRECT`] for a resource with
    /// an `io direct` disk), named after the resource.
    pub(crate) fn start(name: &str, threads: usize) -> std::io::Result<IoWorkers> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for index in 0..threads {
            let receiver = Arc::clone(&receiver);
            std::thread::Builder::new()
                .name(format!("io-{name}-{index}"))
                .spawn(move || work(&receiver))?;
        }
        Ok(IoWorkers { queue: sender })
    }

    /// Queue a job. If the threads are gone (only at shutdown) the job runs on the caller.
    pub(crate) fn run(&self, job: Job) {
        if let Err(mpsc::SendError(job)) = self.queue.send(job) {
            job();
        }
    }
}

fn work(receiver: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let receiver = receiver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            receiver.recv()
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}
