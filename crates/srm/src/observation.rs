//! What the driver measures once per `srm-interval` and hands to [`crate::Manager::observe`].
//!
//! Invariants: every field carries its unit in its name or type; fractions are per mille
//! (0..=1000, larger values are read as 1000); `Option` means "not measured" and never
//! counts as a good or a bad sign. Nothing here is computed from a clock: `now` is the
//! driver's monotonic time of the sample.

use std::time::Duration;

/// A peer's node id.
pub type PeerId = u8;

/// One sample of the whole node: the host, every peer and the write pattern.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// Monotonic time of the sample (any fixed origin; only differences matter).
    pub now: Duration,
    /// Host-wide measurements.
    pub system: SystemObservation,
    /// One entry per configured peer.
    pub peers: Vec<PeerObservation>,
    /// Application writes of the resource during the last interval.
    pub writes: WritePattern,
}

/// Host-wide measurements (from /proc, see [`crate::procfs`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SystemObservation {
    /// Share of CPU time not idle (and not waiting for I/O) over the interval.
    pub cpu_busy_permille: u32,
    /// Share of CPU time stolen by the hypervisor over the interval.
    pub cpu_steal_permille: u32,
    /// One-minute load average, in hundredths.
    pub load_average_hundredths: u32,
    /// Online CPUs (to read the load average against).
    pub cpu_count: u32,
    /// `MemAvailable` as a share of `MemTotal`.
    pub memory_available_permille: u32,
    /// /proc/pressure/memory, where the kernel has it.
    pub memory_pressure: Option<Pressure>,
    /// /proc/pressure/cpu, where the kernel has it.
    pub cpu_pressure: Option<Pressure>,
    /// Mean latency of this node's backing-disk writes over the interval.
    pub local_write_latency: Duration,
}

/// The `some` line of a pressure-stall file: the share of time at least one task stalled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pressure {
    /// `avg10`, in hundredths of a percent (basis points, 0..=10000).
    pub some_avg10_basis_points: u32,
    /// `avg60`, in basis points.
    pub some_avg60_basis_points: u32,
}

/// Measurements of one peer's replication link.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerObservation {
    /// The peer's node id.
    pub peer: PeerId,
    /// False while the peer is not connected; the manager then leaves it alone.
    pub connected: bool,
    /// Round-trip time of the last pings.
    pub rtt: Option<Duration>,
    /// Mean time from sending a write to its acknowledgement, over recent writes.
    pub ack_latency_mean: Option<Duration>,
    /// The fastest write ack of the interval (the least queued write: close to the link's
    /// round trip plus the peer's disk even at high queue depths).
    pub ack_latency_min: Option<Duration>,
    /// 99th percentile of the same.
    pub ack_latency_p99: Option<Duration>,
    /// The peer's own backing-disk write latency, if it reports one.
    pub peer_write_latency: Option<Duration>,
    /// Application data acknowledged by the peer per second.
    pub goodput_bytes_per_s: u64,
    /// TCP_INFO of the data socket.
    pub tcp: Option<TcpInfo>,
    /// Bytes queued for the peer as a share of the queue's limit (socket buffer + queue).
    pub send_queue_fill_permille: u32,
    /// Bytes of writes already completed to the client that the peer has not acknowledged
    /// yet: the data a failover to this peer would lose. Zero under protocols B and C once
    /// the last write sent asynchronously is acknowledged; under protocol A it is the data
    /// in flight (what `congestion-fill` measures).
    pub unreplicated_bytes: u64,
    /// Age of the oldest of those bytes.
    pub oldest_unreplicated_age: Duration,
    /// Bytes marked out of sync for the peer (its bitmap), waiting for a resync.
    pub out_of_sync_bytes: u64,
    /// The resync towards (or from) this peer, if one runs.
    pub resync: Option<ResyncObservation>,
    /// Known capacity of the link, if the administrator or a probe knows it.
    pub link_capacity_bytes_per_s: Option<u64>,
    /// MTU of the interface the replication traffic leaves by.
    pub interface_mtu_bytes: Option<u32>,
}

/// The fields of the kernel's `struct tcp_info` the manager reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed round-trip time.
    pub rtt: Duration,
    /// Its mean deviation.
    pub rtt_variance: Duration,
    /// Segments retransmitted since the connection started.
    pub retransmits_total: u64,
    /// Congestion window, in segments.
    pub congestion_window_segments: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked_segments: u32,
    /// Bytes in the socket not yet sent.
    pub not_sent_bytes: u64,
}

/// A running resync.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResyncObservation {
    /// Resync bytes moved per second over the interval.
    pub rate_bytes_per_s: u64,
    /// Bytes still to resync.
    pub bytes_left: u64,
}

/// Write-size classes of [`WritePattern::size_histogram`] by their smallest size: class `i`
/// holds writes of at least `WRITE_SIZE_CLASSES_BYTES[i]` bytes and less than the next
/// class's bound (so 4 KiB writes land in class 0, 64 KiB ones in class 3, 1 MiB in class 5).
pub const WRITE_SIZE_CLASSES_BYTES: [u64; 6] = [0, 8 << 10, 32 << 10, 64 << 10, 256 << 10, 1 << 20];

/// The class of [`WRITE_SIZE_CLASSES_BYTES`] a write of `bytes` belongs to.
pub fn size_class(bytes: u64) -> usize {
    WRITE_SIZE_CLASSES_BYTES
        .iter()
        .rposition(|lower| bytes >= *lower)
        .unwrap_or(0)
}

/// Writes whose size is at least this count as "large" (streaming, MTU advice).
pub const LARGE_WRITE_BYTES_MIN: u64 = 64 << 10;

/// One class of the write-size histogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SizeClass {
    /// Writes in this class during the interval.
    pub writes: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Application writes during the interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WritePattern {
    /// Bytes written per second.
    pub bytes_per_s: u64,
    /// Writes per second.
    pub writes_per_s: u64,
    /// Writes by size class (see [`WRITE_SIZE_CLASSES_BYTES`]).
    pub size_histogram: [SizeClass; 6],
    /// Share of writes that started where the previous one ended.
    pub sequential_permille: u32,
    /// Mean time from a client write's submission to its completion, over the writes
    /// completed in the interval (`None`: not measured, or nothing completed).
    pub completion_latency_mean: Option<Duration>,
}

impl WritePattern {
    /// Share of the bytes written by writes of at least [`LARGE_WRITE_BYTES_MIN`], per mille;
    /// `None` when nothing was written.
    pub fn large_bytes_permille(&self) -> Option<u32> {
        let total: u64 = self.size_histogram.iter().map(|class| class.bytes).sum();
        let large: u64 = WRITE_SIZE_CLASSES_BYTES
            .iter()
            .zip(&self.size_histogram)
            .filter(|(lower, _)| **lower >= LARGE_WRITE_BYTES_MIN)
            .map(|(_, class)| class.bytes)
            .sum();
        permille_of(large, total)
    }

    /// Mean write size in bytes; `None` when nothing was written.
    pub fn mean_write_bytes(&self) -> Option<u64> {
        self.bytes_per_s.checked_div(self.writes_per_s)
    }
}

/// `part / whole` in per mille (at most 1000); `None` when `whole` is zero.
pub(crate) fn permille_of(part: u64, whole: u64) -> Option<u32> {
    if whole == 0 {
        return None;
    }
    let scaled = u128::from(part.min(whole)) * 1000 / u128::from(whole);
    Some(u32::try_from(scaled).unwrap_or(1000))
}

const _: () = assert!(WRITE_SIZE_CLASSES_BYTES[3] == LARGE_WRITE_BYTES_MIN);
