//! Tests of a payload that is still arriving: readers see exactly the filled prefix, waiters
//! (threads and tasks) wake as bytes arrive, and a dropped filler aborts.

use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::thread;

use super::*;
use crate::{BufPool, PoolConfig};

fn buffer(len: usize) -> PoolBuf {
    BufPool::new(PoolConfig::default()).take(len).expect("size within the pool's limit")
}

/// Polls a future to completion on this thread, parking between polls.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        thread::park();
    }
}

#[test]
fn readers_see_exactly_the_filled_prefix() {
    let (mut filler, incoming) = Incoming::filling(buffer(10));
    assert_eq!(incoming.arrival(), Arrival::Filling(0));
    assert_eq!(incoming.available(), b"");
    filler.spare()[..4].copy_from_slice(b"abcd");
    assert_eq!(incoming.available(), b"", "nothing is visible before advance");
    filler.advance(4);
    assert_eq!(incoming.available(), b"abcd");
    assert_eq!(incoming.arrival(), Arrival::Filling(4));
    assert_eq!(incoming.as_complete(), None);
    assert_eq!(filler.remaining(), 6);
    filler.spare().copy_from_slice(b"efghij");
    filler.advance(6);
    assert_eq!(incoming.arrival(), Arrival::Complete);
    assert_eq!(incoming.as_complete(), Some(&b"abcdefghij"[..]));
    drop(filler);
    assert_eq!(incoming.arrival(), Arrival::Complete, "dropping a finished filler is no abort");
}

#[test]
fn a_filler_dropped_early_aborts_and_wakes_waiters() {
    let (mut filler, incoming) = Incoming::filling(buffer(8));
    filler.spare()[..3].copy_from_slice(b"xyz");
    filler.advance(3);
    let reader = incoming.clone();
    let waiter = thread::spawn(move || reader.wait_blocking(8).map(<[u8]>::to_vec));
    drop(filler);
    assert_eq!(waiter.join().expect("no panic"), Err(Aborted));
    assert_eq!(incoming.arrival(), Arrival::Aborted);
    assert_eq!(incoming.available(), b"xyz", "what arrived stays readable");
    assert_eq!(incoming.wait_blocking(2), Ok(&b"xyz"[..]), "a prefix that did arrive is still served");
}

#[test]
fn complete_payloads_need_no_filler() {
    let mut buf = buffer(5);
    buf.copy_from_slice(b"hello");
    let incoming = Incoming::complete(buf);
    assert_eq!(incoming.as_complete(), Some(&b"hello"[..]));
    assert_eq!(block_on(incoming.wait(100)), Ok(&b"hello"[..]), "the wanted length is clamped");
    let (_filler, empty) = Incoming::filling(buffer(0));
    assert_eq!(empty.arrival(), Arrival::Complete);
}

#[test]
fn blocking_and_async_waiters_follow_a_filler_on_another_thread() {
    const LEN: usize = 1 << 20;
    let (mut filler, incoming) = Incoming::filling(buffer(LEN));
    let blocking = {
        let incoming = incoming.clone();
        thread::spawn(move || {
            let mut seen = 0;
            let mut checksum = 0u64;
            while seen < LEN {
                let prefix = incoming.wait_blocking(seen + 1).expect("not aborted");
                checksum += prefix[seen..].iter().map(|&b| u64::from(b)).sum::<u64>();
                seen = prefix.len();
            }
            checksum
        })
    };
    let asynchronous = {
        let incoming = incoming.clone();
        thread::spawn(move || {
            block_on(async {
                let mut seen = 0;
                let mut checksum = 0u64;
                while seen < LEN {
                    let prefix = incoming.wait(seen + 1).await.expect("not aborted");
                    checksum += prefix[seen..].iter().map(|&b| u64::from(b)).sum::<u64>();
                    seen = prefix.len();
                }
                checksum
            })
        })
    };
    let mut next = 0u8;
    let mut expected = 0u64;
    while filler.remaining() > 0 {
        let chunk = filler.remaining().min(7919);
        for byte in &mut filler.spare()[..chunk] {
            *byte = next;
            expected += u64::from(next);
            next = next.wrapping_add(13);
        }
        filler.advance(chunk);
    }
    assert_eq!(blocking.join().expect("no panic"), expected);
    assert_eq!(asynchronous.join().expect("no panic"), expected);
}

#[test]
fn work_waits_for_arrival_without_a_thread() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = |ran: &Arc<AtomicUsize>| {
        let ran = Arc::clone(ran);
        Box::new(move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }) as OnArrival
    };
    let (mut filler, incoming) = Incoming::filling(buffer(4));
    incoming.on_arrival(counter(&ran));
    filler.spare()[..2].copy_from_slice(b"ab");
    filler.advance(2);
    assert_eq!(ran.load(Ordering::SeqCst), 0, "not before the payload is complete");
    filler.spare().copy_from_slice(b"cd");
    filler.advance(2);
    assert_eq!(ran.load(Ordering::SeqCst), 1, "run by the filler on completion");
    incoming.on_arrival(counter(&ran));
    assert_eq!(ran.load(Ordering::SeqCst), 2, "run at once when already complete");
    let (filler, aborted) = Incoming::filling(buffer(4));
    aborted.on_arrival(counter(&ran));
    drop(filler);
    assert_eq!(ran.load(Ordering::SeqCst), 3, "run on abort too");
}
