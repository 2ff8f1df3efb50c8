//! Per-peer settings of the replication link that change while it runs (`adjust` and the
//! Selective Replication Manager): the data socket's send buffer (`sndbuf-size`), the async
//! buffer (`async-buffer`, issue 5) and its compression (`async-buffer-compress`: every write
//! payload of the link that shrinks is sent compressed, see `wire::compress`).
//!
//! The async buffer lets a write under protocol A complete once its frame is queued for the
//! peer, rather than once the socket took it, as long as the frames queued that way stay
//! under `async-buffer` bytes: a burst is absorbed in memory instead of waiting for a full
//! socket buffer on a long link. Beyond the capacity a write waits for the socket as before
//! (backpressure). The engine's lag bound still counts every such write as unconfirmed, so
//! the buffer never lets the backlog pass `srm-max-lag-bytes` / `srm-max-lag-time` (the
//! configuration refuses a buffer larger than the lag bound).
//!
//! Invariants:
//! - `queued` is the sum of the lengths of the frames admitted and not yet handed to the
//!   socket; it never passes the capacity in force when each frame was admitted.
//! - A link's frames are released by its sender; a link that dies drops its buffer with its
//!   queue, so nothing stays counted across connections.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// The live settings of one peer's link.
#[derive(Debug)]
pub(crate) struct LinkTuning {
    /// `sndbuf-size` in bytes (0: the kernel's auto-tuning).
    sndbuf_bytes: AtomicU64,
    /// `async-buffer` in bytes (0: none).
    async_buffer_bytes: AtomicU64,
    /// `async-buffer-compress`: 0 none, 1 lz4, 2 zstd.
    compression: AtomicU8,
}

impl LinkTuning {
    pub(crate) fn new(net: &config::NetOptions) -> Arc<LinkTuning> {
        Arc::new(LinkTuning {
            sndbuf_bytes: AtomicU64::new(net.sndbuf_size_bytes),
            async_buffer_bytes: AtomicU64::new(net.async_buffer_bytes),
            compression: AtomicU8::new(compression_code(net.async_buffer_compress)),
        })
    }

    /// How write payloads of the link are compressed (None: plain).
    pub(crate) fn compression(&self) -> Option<wire::Compression> {
        match self.compression.load(Ordering::Relaxed) {
            1 => Some(wire::Compression::Lz4),
            2 => Some(wire::Compression::Zstd),
            _ => None,
        }
    }

    /// A new `async-buffer-compress`, for the frames sent from now on.
    pub(crate) fn set_compression(&self, compress: config::AsyncBufferCompress) {
        self.compression
            .store(compression_code(compress), Ordering::Relaxed);
    }

    pub(crate) fn sndbuf_bytes(&self) -> u64 {
        self.sndbuf_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn async_buffer_bytes(&self) -> u64 {
        self.async_buffer_bytes.load(Ordering::Relaxed)
    }

    /// A new `sndbuf-size`; applied to the running socket by [`apply_sndbuf`].
    pub(crate) fn set_sndbuf_bytes(&self, bytes: u64) {
        self.sndbuf_bytes.store(bytes, Ordering::Relaxed);
    }

    /// A new `async-buffer` capacity; frames already admitted stay admitted.
    pub(crate) fn set_async_buffer_bytes(&self, bytes: u64) {
        self.async_buffer_bytes.store(bytes, Ordering::Relaxed);
    }
}

fn compression_code(compress: config::AsyncBufferCompress) -> u8 {
    match compress {
        config::AsyncBufferCompress::None => 0,
        config::AsyncBufferCompress::Lz4 => 1,
        config::AsyncBufferCompress::Zstd => 2,
    }
}

/// Sets the send buffer of the socket behind `socket` (0 leaves the kernel's choice).
pub(crate) fn apply_sndbuf(socket: &OwnedFd, bytes: u64) -> std::io::Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    socket2::SockRef::from(&socket.as_fd())
        .set_send_buffer_size(usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// `SIOCOUTQNSD`: bytes in a TCP socket's send queue not yet sent (Linux).
const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// What the kernel knows about the TCP connection behind `socket` (for the manager and
/// `srm status`); None if it cannot be read.
pub(crate) fn tcp_info(socket: &OwnedFd) -> Option<srm::TcpInfo> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain old data; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut length = libc::socklen_t::try_from(std::mem::size_of::<libc::tcp_info>()).ok()?;
    let fd = socket.as_raw_fd();
    // SAFETY: the pointer and length describe `info`, which lives across the call; the kernel
    // writes at most `length` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::addr_of_mut!(info).cast(),
            &mut length,
        )
    };
    if rc != 0 {
        return None;
    }
    let mut not_sent: libc::c_int = 0;
    // SAFETY: SIOCOUTQNSD writes one int through the pointer, which points at `not_sent`.
    let rc = unsafe { libc::ioctl(fd, SIOCOUTQNSD, std::ptr::addr_of_mut!(not_sent)) };
    Some(srm::TcpInfo {
        rtt: std::time::Duration::from_micros(u64::from(info.tcpi_rtt)),
        rtt_variance: std::time::Duration::from_micros(u64::from(info.tcpi_rttvar)),
        retransmits_total: u64::from(info.tcpi_total_retrans),
        congestion_window_segments: info.tcpi_snd_cwnd,
        unacked_segments: info.tcpi_unacked,
        not_sent_bytes: if rc == 0 {
            u64::try_from(not_sent).unwrap_or(0)
        } else {
            0
        },
    })
}

/// The frames of one link admitted to the async buffer.
#[derive(Debug)]
pub(crate) struct AsyncBuffer {
    tuning: Arc<LinkTuning>,
    queued: AtomicU64,
}

impl AsyncBuffer {
    pub(crate) fn new(tuning: Arc<LinkTuning>) -> Arc<AsyncBuffer> {
        Arc::new(AsyncBuffer {
            tuning,
            queued: AtomicU64::new(0),
        })
    }

    /// Admits a frame of `bytes` if it fits; the caller then completes it as sent.
    pub(crate) fn try_admit(&self, bytes: u64) -> bool {
        let capacity = self.tuning.async_buffer_bytes();
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                let total = queued.checked_add(bytes)?;
                (total <= capacity).then_some(total)
            })
            .is_ok()
    }

    /// A frame admitted earlier reached the socket.
    pub(crate) fn release(&self, bytes: u64) {
        let released = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                Some(queued.saturating_sub(bytes))
            });
        debug_assert!(
            released.is_ok_and(|before| before >= bytes),
            "released more than admitted"
        );
    }

    /// How the link's write payloads are compressed now.
    pub(crate) fn compression(&self) -> Option<wire::Compression> {
        self.tuning.compression()
    }

    /// Bytes admitted and not yet in the socket.
    pub(crate) fn queued_bytes(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(capacity: u64) -> (Arc<LinkTuning>, Arc<AsyncBuffer>) {
        let net = config::NetOptions {
            async_buffer_bytes: capacity,
            ..config::NetOptions::default()
        };
        let tuning = LinkTuning::new(&net);
        (Arc::clone(&tuning), AsyncBuffer::new(tuning))
    }

    #[test]
    fn admits_up_to_the_capacity_and_frees_on_release() {
        let (_, buffer) = buffer(8192);
        assert!(buffer.try_admit(4096));
        assert!(buffer.try_admit(4096));
        assert!(!buffer.try_admit(1), "full");
        assert_eq!(buffer.queued_bytes(), 8192);
        buffer.release(4096);
        assert!(buffer.try_admit(4096));
        assert!(!buffer.try_admit(4096));
    }

    #[test]
    fn no_buffer_admits_nothing_and_a_live_change_applies_to_new_frames() {
        let (tuning, buffer) = buffer(0);
        assert!(!buffer.try_admit(1));
        tuning.set_async_buffer_bytes(1 << 20);
        assert!(buffer.try_admit(1 << 20));
        tuning.set_async_buffer_bytes(4096);
        assert!(
            !buffer.try_admit(1),
            "a lower capacity holds new frames back"
        );
        buffer.release(1 << 20);
        assert_eq!(buffer.queued_bytes(), 0);
        assert!(buffer.try_admit(4096));
    }

    #[test]
    fn a_frame_larger_than_the_capacity_is_never_admitted() {
        let (_, buffer) = buffer(4096);
        assert!(!buffer.try_admit(u64::MAX));
        assert!(!buffer.try_admit(8192));
        assert_eq!(buffer.queued_bytes(), 0);
    }
}
