//! The pure timing rules of the emulator: when a chunk read at a given time may be released
//! (delay and jitter without reordering), and when the shared bandwidth allows it out (a token
//! bucket). No clock and no I/O here: times are nanoseconds since the relay started, passed in.
//!
//! Invariants:
//! - [`Schedule::release_ns`] never returns a time earlier than the previous one it returned,
//!   nor earlier than the read time: bytes leave in the order they came in.
//! - Over any interval, a [`Bucket`] lets out at most `burst + rate × interval` bytes, where
//!   burst is [`burst_bytes`] of the rate: a reservation larger than the credit returns the
//!   time its debt is repaid, and later reservations queue behind it.

use std::time::Duration;

use crate::link::Shape;

/// Nanoseconds in a second.
const NANOS_PER_S: u64 = 1_000_000_000;
/// How much of its rate a bucket may save up, in milliseconds of traffic.
pub const BURST_MS: u64 = 10;

/// A `Duration` in nanoseconds, saturating (the link limits keep real values far below).
pub fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// A small deterministic generator (SplitMix64): one seed, one sequence.
#[derive(Debug, Clone)]
pub struct SplitMix {
    state: u64,
}

impl SplitMix {
    /// A generator whose sequence depends only on `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix { state: seed }
    }

    /// The next value of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Release times of one direction of one connection.
#[derive(Debug, Clone)]
pub struct Schedule {
    rng: SplitMix,
    last_release_ns: u64,
}

impl Schedule {
    /// A schedule drawing its jitter from `seed`.
    pub fn new(seed: u64) -> Schedule {
        Schedule {
            rng: SplitMix::new(seed),
            last_release_ns: 0,
        }
    }

    /// When a chunk read at `read_ns` may be released under `shape`: read time + delay ±
    /// jitter, but never before the chunk read before it.
    pub fn release_ns(&mut self, read_ns: u64, shape: &Shape) -> u64 {
        let delay_ns = nanos(shape.delay);
        let jitter_ns = nanos(shape.jitter);
        let mut delayed_ns = read_ns.saturating_add(delay_ns);
        if jitter_ns > 0 {
            // A draw in 0..=2j, shifted to -j..=+j; the modulo bias is below 2^-20 for any
            // jitter under the link limit.
            let span = jitter_ns.saturating_mul(2).saturating_add(1);
            let draw = self.rng.next_u64() % span;
            delayed_ns = if draw >= jitter_ns {
                delayed_ns.saturating_add(draw - jitter_ns)
            } else {
                delayed_ns.saturating_sub(jitter_ns - draw).max(read_ns)
            };
        }
        self.last_release_ns = self.last_release_ns.max(delayed_ns);
        self.last_release_ns
    }
}

/// The burst a bucket of `rate_bytes_per_s` may save up: [`BURST_MS`] of traffic, at least
/// one byte.
pub fn burst_bytes(rate_bytes_per_s: u64) -> u64 {
    (rate_bytes_per_s / (1000 / BURST_MS)).max(1)
}

/// A token bucket in integer arithmetic. Tokens are counted in byte-nanoseconds per second
/// (bytes × 10⁹) so a refill over any number of nanoseconds is exact.
#[derive(Debug, Clone, Default)]
pub struct Bucket {
    /// Saved credit, negative while a reservation is being repaid.
    tokens: i128,
    updated_ns: u64,
    /// The rate the tokens were counted at; a change of rate restarts with a full bucket.
    rate_bytes_per_s: Option<u64>,
}

impl Bucket {
    /// Reserves `bytes` at `now_ns` and returns when they may be sent (`now_ns` if at once).
    /// With `rate_bytes_per_s == None` everything passes at once.
    pub fn reserve(&mut self, now_ns: u64, bytes: u64, rate_bytes_per_s: Option<u64>) -> u64 {
        let scale = i128::from(NANOS_PER_S);
        let Some(rate) = rate_bytes_per_s else {
            self.rate_bytes_per_s = None;
            return now_ns;
        };
        let burst = i128::from(burst_bytes(rate)) * scale;
        if self.rate_bytes_per_s != Some(rate) {
            self.rate_bytes_per_s = Some(rate);
            self.tokens = burst;
            self.updated_ns = now_ns;
        }
        let elapsed_ns = now_ns.saturating_sub(self.updated_ns);
        self.tokens = (self.tokens + i128::from(elapsed_ns) * i128::from(rate)).min(burst);
        self.updated_ns = self.updated_ns.max(now_ns);
        self.tokens -= i128::from(bytes) * scale;
        if self.tokens >= 0 {
            return now_ns;
        }
        let rate_wide = i128::from(rate);
        let wait_ns = (-self.tokens + rate_wide - 1) / rate_wide;
        now_ns.saturating_add(u64::try_from(wait_ns).unwrap_or(u64::MAX))
    }
}
