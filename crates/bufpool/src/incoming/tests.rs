//! Tests of a payload that is still arriving: readers see exactly the filled prefix, waiters
//! (threads and tasks) wake as bytes arrive, and a dropped filler aborts.

use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::thread;

use super::*;
use crate::{BufPool, PoolConfig};

fn buffer(len: usize) -> PoolBuf {
    BufPool::new(PoolConfig::default())
        .take(len)
        .expect("size within the pool's limit")
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
    assert_eq!(
        incoming.available(),
        b"",
        "nothing is visible before advance"
    );
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
    assert_eq!(
        incoming.arrival(),
        Arrival::Complete,
        "dropping a finished filler is no abort"
    );
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
    assert_eq!(
        incoming.wait_blocking(2),
        Ok(&b"xyz"[..]),
        "a prefix that did arrive is still served"
    );
}

#[test]
fn complete_payloads_need_no_filler() {
    let mut buf = buffer(5);
    buf.copy_from_slice(b"hello");
    let incoming = Incoming::complete(buf);
    assert_eq!(incoming.as_complete(), Some(&b"hello"[..]));
    assert_eq!(
        block_on(incoming.wait(100)),
        Ok(&b"hello"[..]),
        "the wanted length is clamped"
    );
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
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "not before the payload is complete"
    );
    filler.spare().copy_from_slice(b"cd");
    filler.advance(2);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "run by the filler on completion"
    );
    incoming.on_arrival(counter(&ran));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        2,
        "run at once when already complete"
    );
    let (filler, aborted) = Incoming::filling(buffer(4));
    aborted.on_arrival(counter(&ran));
    drop(filler);
    assert_eq!(ran.load(Ordering::SeqCst), 3, "run on abort too");
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct CountWakes(std::sync::atomic::AtomicUsize);

impl Wake for CountWakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_task_is_woken_only_once_the_bytes_it_waits_for_are_there() {
    let (mut filler, incoming) = Incoming::filling(buffer(100));
    let counter = Arc::new(CountWakes::default());
    let waker = Waker::from(Arc::clone(&counter));
    let mut context = Context::from_waker(&waker);
    let mut wait = std::pin::pin!(incoming.wait(50));
    assert!(wait.as_mut().poll(&mut context).is_pending());
    for _ in 0..4 {
        filler.advance(10);
    }
    assert_eq!(
        counter.0.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "40 of the 50 bytes: no wake-up"
    );
    filler.advance(10);
    assert_eq!(
        counter.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "50 bytes: woken once"
    );
    assert_eq!(
        wait.as_mut().poll(&mut context).map(|r| r.map(<[u8]>::len)),
        Poll::Ready(Ok(50))
    );
    // A wait past the end is clamped to the length: woken by completion.
    let mut rest = std::pin::pin!(incoming.wait(1000));
    assert!(rest.as_mut().poll(&mut context).is_pending());
    filler.advance(40);
    assert_eq!(
        counter.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "90 of 100: still waiting"
    );
    filler.advance(10);
    assert_eq!(counter.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(
        rest.as_mut().poll(&mut context).map(|r| r.map(<[u8]>::len)),
        Poll::Ready(Ok(100))
    );
}

#[test]
fn a_waiting_task_is_woken_by_an_abort() {
    let (mut filler, incoming) = Incoming::filling(buffer(100));
    let counter = Arc::new(CountWakes::default());
    let waker = Waker::from(Arc::clone(&counter));
    let mut context = Context::from_waker(&waker);
    let mut wait = std::pin::pin!(incoming.wait(100));
    assert!(wait.as_mut().poll(&mut context).is_pending());
    filler.advance(10);
    drop(filler);
    assert_eq!(counter.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(wait.as_mut().poll(&mut context), Poll::Ready(Err(Aborted)));
}

/// What a sink saw: the length of each piece, and how the payload ended.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    pieces: Vec<usize>,
    end: Option<Result<Vec<u8>, Aborted>>,
}

/// A sink that records every call, and is done at the end of the payload.
fn recording_sink(seen: &Arc<std::sync::Mutex<Seen>>) -> OnPiece {
    let seen = Arc::clone(seen);
    Box::new(move |piece| {
        let mut seen = seen.lock().expect("not poisoned");
        match piece {
            Piece::Filled(bytes) => {
                seen.pieces.push(bytes.len());
                false
            }
            Piece::Complete(bytes) => {
                seen.end = Some(Ok(bytes.to_vec()));
                true
            }
            Piece::Aborted => {
                seen.end = Some(Err(Aborted));
                true
            }
        }
    })
}

#[test]
fn a_sink_runs_on_the_filler_after_every_piece_until_the_end() {
    let (mut filler, incoming) = Incoming::filling(buffer(6));
    filler.spare()[..2].copy_from_slice(b"ab");
    filler.advance(2);
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    assert!(
        incoming.on_piece(recording_sink(&seen)).is_ok(),
        "still filling: registered"
    );
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        Seen::default(),
        "registering runs nothing"
    );
    filler.spare()[..3].copy_from_slice(b"cde");
    filler.advance(3);
    filler.spare()[..1].copy_from_slice(b"f");
    filler.advance(1);
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        Seen {
            pieces: vec![5],
            end: Some(Ok(b"abcdef".to_vec()))
        }
    );
    assert!(
        incoming.on_piece(recording_sink(&seen)).is_err(),
        "complete: the sink is handed back"
    );
}

#[test]
fn a_sink_hears_of_an_abort_and_one_that_is_done_hears_nothing_more() {
    let (mut filler, incoming) = Incoming::filling(buffer(6));
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    assert!(incoming.on_piece(recording_sink(&seen)).is_ok());
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let quits_early: OnPiece = Box::new(move |_| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        true
    });
    assert!(incoming.on_piece(quits_early).is_ok());
    filler.advance(1);
    filler.advance(1);
    drop(filler);
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        Seen {
            pieces: vec![1, 2],
            end: Some(Err(Aborted))
        }
    );
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a sink that said done is not called again"
    );
    assert!(
        incoming.on_piece(recording_sink(&seen)).is_err(),
        "aborted: the sink is handed back"
    );
}

#[test]
fn a_blocked_thread_sleeps_until_its_bytes_are_there() {
    let (mut filler, incoming) = Incoming::filling(buffer(64));
    let reader = incoming.clone();
    let waiter = thread::spawn(move || reader.wait_blocking(32).map(<[u8]>::len));
    for _ in 0..8 {
        filler.advance(4);
        thread::yield_now();
    }
    let got = waiter.join().expect("no panic").expect("not aborted");
    assert!((32..=64).contains(&got), "woken with {got} bytes");
    filler.advance(32);
}

#[test]
fn a_published_piece_wakes_waiters_first_and_reaches_the_sinks_when_passed_on() {
    let (mut filler, incoming) = Incoming::filling(buffer(6));
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    assert!(incoming.on_piece(recording_sink(&seen)).is_ok());
    let counter = Arc::new(CountWakes::default());
    let waker = Waker::from(Arc::clone(&counter));
    let mut context = Context::from_waker(&waker);
    let mut wait = std::pin::pin!(incoming.wait(2));
    assert!(wait.as_mut().poll(&mut context).is_pending());
    filler.spare()[..2].copy_from_slice(b"ab");
    filler.publish(2);
    assert_eq!(
        counter.0.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the waiting task is woken at once"
    );
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        Seen::default(),
        "the sink has not had the piece yet"
    );
    filler.pass_to_sinks();
    assert_eq!(seen.lock().expect("not poisoned").pieces, vec![2]);
    filler.pass_to_sinks();
    assert_eq!(
        seen.lock().expect("not poisoned").pieces,
        vec![2],
        "a piece is passed on once"
    );
    filler.spare()[..4].copy_from_slice(b"cdef");
    filler.publish(4);
    assert_eq!(
        seen.lock().expect("not poisoned").end,
        None,
        "complete, but not passed on yet"
    );
    drop(filler);
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        Seen {
            pieces: vec![2],
            end: Some(Ok(b"abcdef".to_vec()))
        },
        "a filler dropped with the last piece owed passes it on"
    );
}

#[test]
fn a_filler_dropped_with_a_piece_owed_before_the_end_aborts_its_sinks() {
    let (mut filler, incoming) = Incoming::filling(buffer(6));
    let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
    assert!(incoming.on_piece(recording_sink(&seen)).is_ok());
    filler.publish(3);
    drop(filler);
    assert_eq!(
        *seen.lock().expect("not poisoned"),
        Seen {
            pieces: vec![],
            end: Some(Err(Aborted))
        }
    );
}
