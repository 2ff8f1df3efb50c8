//! The manager's settings ([`SrmConfig`]), their defaults and their validation.
//!
//! Invariant: a [`crate::Manager`] only ever holds a configuration that passed
//! [`SrmConfig::validate`]: lag bounds are non-zero when the manager may act, every return
//! threshold lies strictly below its enter threshold (hysteresis), every minimum is at most
//! its maximum, and shares lie in their ranges. The defaults and why they are what they are
//! are in the crate documentation.

use std::fmt;
use std::time::Duration;

use crate::error::SrmError;

/// `srm off|advise|on`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The manager decides nothing.
    #[default]
    Off,
    /// The manager decides, every decision is marked advisory and the driver only logs it.
    Advise,
    /// The driver applies the decisions.
    On,
}

impl fmt::Display for Mode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Off => "off",
            Self::Advise => "advise",
            Self::On => "on",
        })
    }
}

/// DRBD's replication protocols.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// Complete once written locally and handed to the send queue (asynchronous).
    A,
    /// Complete once written locally and received by the peer.
    B,
    /// Complete once written locally and on the peer's disk.
    #[default]
    C,
}

impl fmt::Display for Protocol {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
        })
    }
}

/// An inclusive range the manager moves a setting within.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Smallest value the manager may set.
    pub min: u64,
    /// Largest value the manager may set.
    pub max: u64,
}

impl Bounds {
    /// `value` moved into the range.
    pub fn clamp(self, value: u64) -> u64 {
        value.clamp(self.min, self.max.max(self.min))
    }
}

/// The three buffer settings the manager tunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSettings {
    /// `max-buffers`, in 4 KiB pages.
    pub max_buffers_pages: u64,
    /// `max-epoch-size`, in writes.
    pub max_epoch_size: u64,
    /// `sndbuf-size`, in bytes (0 would let the kernel tune it; the manager never sets 0).
    pub sndbuf_bytes: u64,
}

/// Where the manager may move each buffer setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferBounds {
    /// Range of `max-buffers` (pages).
    pub max_buffers_pages: Bounds,
    /// Range of `max-epoch-size` (writes).
    pub max_epoch_size: Bounds,
    /// Range of `sndbuf-size` (bytes).
    pub sndbuf_bytes: Bounds,
}

impl BufferBounds {
    /// `settings` with each value moved into its range.
    pub fn clamp(&self, settings: BufferSettings) -> BufferSettings {
        BufferSettings {
            max_buffers_pages: self.max_buffers_pages.clamp(settings.max_buffers_pages),
            max_epoch_size: self.max_epoch_size.clamp(settings.max_epoch_size),
            sndbuf_bytes: self.sndbuf_bytes.clamp(settings.sndbuf_bytes),
        }
    }
}

/// Default lag bound in bytes (see the crate documentation for why).
pub const LAG_BYTES_DEFAULT: u64 = 64 << 20;
/// Default lag bound in time.
pub const LAG_TIME_DEFAULT: Duration = Duration::from_secs(2);
/// Default interval between observations.
pub const INTERVAL_DEFAULT: Duration = Duration::from_millis(500);
/// Shortest interval the manager accepts.
pub const INTERVAL_MIN: Duration = Duration::from_millis(100);
/// Longest interval the manager accepts.
pub const INTERVAL_MAX: Duration = Duration::from_secs(60);
/// Default network latency at or above which a peer goes async.
pub const LATENCY_ENTER_DEFAULT: Duration = Duration::from_millis(5);
/// Default network latency at or below which an async peer returns.
pub const LATENCY_RETURN_DEFAULT: Duration = Duration::from_millis(2);
/// Default send-queue fill at or above which a peer goes async.
pub const FILL_ENTER_PERMILLE_DEFAULT: u32 = 800;
/// Default send-queue fill at or below which an async peer returns.
pub const FILL_RETURN_PERMILLE_DEFAULT: u32 = 300;
/// Default minimum time between two protocol switches of one peer.
pub const MIN_DWELL_DEFAULT: Duration = Duration::from_secs(10);
/// Most consecutive intervals a switch may be made to wait for.
pub const INTERVALS_MAX: u32 = 100;
/// Default gain (completion-time ratio sync / async, per mille) the model must predict,
/// every interval of the enter streak, before a peer goes async: 1.5×.
pub const GAIN_ENTER_PERMILLE_DEFAULT: u32 = 1500;
/// Default gain a switch must show once made (throughput or completion time, per mille)
/// to be kept: 1.2×.
pub const GAIN_KEEP_PERMILLE_DEFAULT: u32 = 1200;
/// Default number of intervals with writes a switch is judged on.
pub const VERIFY_INTERVALS_DEFAULT: u32 = 3;
/// Largest gain the settings may ask for (100×).
pub const GAIN_PERMILLE_MAX: u32 = 100_000;
/// Default backlog share (of either lag bound) at which admission starts to slow down.
pub const THROTTLE_START_PERMILLE_DEFAULT: u32 = 500;

/// The manager's settings for one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrmConfig {
    /// `srm`.
    pub mode: Mode,
    /// `srm-interval`: time between observations.
    pub interval: Duration,
    /// The configured `protocol`: what peers run while the network keeps up.
    pub protocol: Protocol,
    /// `srm-max-lag-bytes`: most unreplicated bytes an async peer may have.
    pub max_lag_bytes: u64,
    /// `srm-max-lag-time`: oldest an unreplicated write may grow before writes wait.
    pub max_lag_time: Duration,
    /// `srm-latency-high`: network latency that, sustained, sends a peer async.
    pub latency_enter: Duration,
    /// `srm-latency-low`: network latency that, sustained, brings it back.
    pub latency_return: Duration,
    /// `srm-fill-high`: send-queue fill that, sustained, sends a peer async.
    pub fill_enter_permille: u32,
    /// `srm-fill-low`: send-queue fill that, sustained, brings it back.
    pub fill_return_permille: u32,
    /// Consecutive intervals over the enter thresholds before going async.
    pub enter_intervals: u32,
    /// Consecutive intervals under the return thresholds before returning.
    pub return_intervals: u32,
    /// `srm-min-dwell`: least time between two switches of one peer.
    pub min_dwell: Duration,
    /// `on-congestion pull-ahead` with this `congestion-fill`; `None` for `block`.
    pub congestion_fill_bytes: Option<u64>,
    /// `srm-resync-share`: most of the link capacity resync may use, in percent (1..=100).
    pub resync_share_percent: u32,
    /// `c-min-rate`: resync is never capped below this.
    pub c_min_rate_bytes_per_s: u64,
    /// `c-max-rate`: resync is never allowed above this (0 = no limit).
    pub c_max_rate_bytes_per_s: u64,
    /// The configured buffer settings, where tuning starts.
    pub buffers: BufferSettings,
    /// Where the manager may move the buffer settings.
    pub buffer_bounds: BufferBounds,
    /// CPU busy share at or above which latency measurements are not trusted to go async.
    pub cpu_busy_saturated_permille: u32,
    /// CPU steal share at or above which the same holds.
    pub cpu_steal_saturated_permille: u32,
    /// Memory available share at or below which buffers shrink to their minimum.
    pub memory_available_low_permille: u32,
    /// Least predicted gain (sync completion time over async, per mille) that sends a
    /// peer async; 1000 would mean "no gain needed".
    pub gain_enter_permille: u32,
    /// Least observed gain (per mille) that keeps a switch to async; under it the switch
    /// is undone and further switches back off.
    pub gain_keep_permille: u32,
    /// Intervals with writes over which a switch's observed gain is measured.
    pub verify_intervals: u32,
    /// Share of the lag bound (bytes or time, whichever is nearer) at which the lag
    /// throttle starts to slow admission (see [`crate::ThrottleCurve`]).
    pub throttle_start_permille: u32,
}

impl Default for SrmConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Off,
            interval: INTERVAL_DEFAULT,
            protocol: Protocol::C,
            max_lag_bytes: LAG_BYTES_DEFAULT,
            max_lag_time: LAG_TIME_DEFAULT,
            latency_enter: LATENCY_ENTER_DEFAULT,
            latency_return: LATENCY_RETURN_DEFAULT,
            fill_enter_permille: FILL_ENTER_PERMILLE_DEFAULT,
            fill_return_permille: FILL_RETURN_PERMILLE_DEFAULT,
            enter_intervals: 3,
            return_intervals: 5,
            min_dwell: MIN_DWELL_DEFAULT,
            congestion_fill_bytes: None,
            resync_share_percent: 50,
            c_min_rate_bytes_per_s: 250 << 10,
            c_max_rate_bytes_per_s: 100 << 20,
            buffers: BufferSettings {
                max_buffers_pages: 2048,
                max_epoch_size: 2048,
                sndbuf_bytes: 128 << 10,
            },
            buffer_bounds: BufferBounds {
                max_buffers_pages: Bounds {
                    min: 2048,
                    max: 8192,
                },
                max_epoch_size: Bounds {
                    min: 2048,
                    max: 8192,
                },
                sndbuf_bytes: Bounds {
                    min: 128 << 10,
                    max: 2 << 20,
                },
            },
            cpu_busy_saturated_permille: 950,
            cpu_steal_saturated_permille: 250,
            memory_available_low_permille: 50,
            gain_enter_permille: GAIN_ENTER_PERMILLE_DEFAULT,
            gain_keep_permille: GAIN_KEEP_PERMILLE_DEFAULT,
            verify_intervals: VERIFY_INTERVALS_DEFAULT,
            throttle_start_permille: THROTTLE_START_PERMILLE_DEFAULT,
        }
    }
}

impl SrmConfig {
    /// Checks the settings against each other; the first contradiction found is returned.
    pub fn validate(&self) -> Result<(), SrmError> {
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        in_range(
            "srm-interval",
            millis(self.interval),
            (millis(INTERVAL_MIN), millis(INTERVAL_MAX)),
        )?;
        if self.mode != Mode::Off {
            if self.max_lag_bytes == 0 {
                return Err(SrmError::ZeroLagBound {
                    name: "srm-max-lag-bytes",
                    mode: self.mode,
                });
            }
            if self.max_lag_time.is_zero() {
                return Err(SrmError::ZeroLagBound {
                    name: "srm-max-lag-time",
                    mode: self.mode,
                });
            }
            ordered(
                "srm-interval / srm-max-lag-time",
                millis(self.interval),
                millis(self.max_lag_time),
            )?;
        }
        hysteresis(
            "srm-latency-high / srm-latency-low",
            millis(self.latency_enter),
            millis(self.latency_return),
        )?;
        in_range(
            "srm-fill-high",
            u64::from(self.fill_enter_permille),
            (1, 1000),
        )?;
        hysteresis(
            "srm-fill-high / srm-fill-low",
            u64::from(self.fill_enter_permille),
            u64::from(self.fill_return_permille),
        )?;
        in_range(
            "enter intervals",
            u64::from(self.enter_intervals),
            (1, u64::from(INTERVALS_MAX)),
        )?;
        in_range(
            "return intervals",
            u64::from(self.return_intervals),
            (1, u64::from(INTERVALS_MAX)),
        )?;
        in_range(
            "srm-resync-share",
            u64::from(self.resync_share_percent),
            (1, 100),
        )?;
        self.validate_gain()?;
        if let Some(fill) = self.congestion_fill_bytes {
            in_range("congestion-fill", fill, (1, u64::MAX))?;
        }
        if self.c_max_rate_bytes_per_s != 0 {
            ordered(
                "c-min-rate / c-max-rate",
                self.c_min_rate_bytes_per_s,
                self.c_max_rate_bytes_per_s,
            )?;
        }
        self.validate_buffers()
    }

    fn validate_gain(&self) -> Result<(), SrmError> {
        in_range(
            "srm gain to keep",
            u64::from(self.gain_keep_permille),
            (1000, u64::from(GAIN_PERMILLE_MAX)),
        )?;
        ordered(
            "srm gain to keep / to enter",
            u64::from(self.gain_keep_permille),
            u64::from(self.gain_enter_permille),
        )?;
        in_range(
            "srm gain to enter",
            u64::from(self.gain_enter_permille),
            (1000, u64::from(GAIN_PERMILLE_MAX)),
        )?;
        in_range(
            "verify intervals",
            u64::from(self.verify_intervals),
            (1, u64::from(INTERVALS_MAX)),
        )?;
        in_range(
            "throttle start",
            u64::from(self.throttle_start_permille),
            (0, 999),
        )
    }

    fn validate_buffers(&self) -> Result<(), SrmError> {
        let bounds = &self.buffer_bounds;
        ordered(
            "srm-max-buffers-min / -max",
            bounds.max_buffers_pages.min,
            bounds.max_buffers_pages.max,
        )?;
        ordered(
            "srm-max-epoch-size-min / -max",
            bounds.max_epoch_size.min,
            bounds.max_epoch_size.max,
        )?;
        ordered(
            "srm-sndbuf-size-min / -max",
            bounds.sndbuf_bytes.min,
            bounds.sndbuf_bytes.max,
        )?;
        in_range(
            "srm-sndbuf-size-min",
            bounds.sndbuf_bytes.min,
            (1, u64::MAX),
        )?;
        in_range(
            "srm-max-epoch-size-min",
            bounds.max_epoch_size.min,
            (1, u64::MAX),
        )?;
        in_range(
            "srm-max-buffers-min",
            bounds.max_buffers_pages.min,
            (1, u64::MAX),
        )?;
        in_range(
            "cpu busy saturation",
            u64::from(self.cpu_busy_saturated_permille),
            (1, 1000),
        )?;
        in_range(
            "cpu steal saturation",
            u64::from(self.cpu_steal_saturated_permille),
            (1, 1000),
        )?;
        in_range(
            "memory low",
            u64::from(self.memory_available_low_permille),
            (0, 999),
        )
    }
}

fn in_range(name: &'static str, value: u64, (min, max): (u64, u64)) -> Result<(), SrmError> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(SrmError::OutOfRange {
        name,
        value,
        min,
        max,
    })
}

fn ordered(name: &'static str, min: u64, max: u64) -> Result<(), SrmError> {
    if min <= max {
        return Ok(());
    }
    Err(SrmError::BoundsInverted { name, min, max })
}

fn hysteresis(name: &'static str, enter: u64, leave: u64) -> Result<(), SrmError> {
    if leave < enter {
        return Ok(());
    }
    Err(SrmError::NoHysteresis { name, enter, leave })
}
