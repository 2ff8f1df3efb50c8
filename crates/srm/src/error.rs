//! The crate's one error type: contradictory manager settings and unreadable /proc text.
//!
//! Invariant: every variant names the setting or file it is about, so the driver can print
//! it as it is (the configuration loader reports contradictions with `file:line:col` itself).

use crate::config::Mode;

/// Everything that can go wrong in this crate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrmError {
    /// A bound's minimum is larger than its maximum.
    #[error("{name}: the minimum {min} is larger than the maximum {max}")]
    BoundsInverted {
        /// The bounded setting, as drbd.conf spells it.
        name: &'static str,
        /// The configured minimum.
        min: u64,
        /// The configured maximum.
        max: u64,
    },
    /// A lag bound is zero while the manager may switch peers to async replication.
    #[error("{name} is 0 with srm {mode}: asynchronous replication would have no room")]
    ZeroLagBound {
        /// `srm-max-lag-bytes` or `srm-max-lag-time`.
        name: &'static str,
        /// The manager's mode.
        mode: Mode,
    },
    /// A return threshold is not below its enter threshold, so there is no hysteresis.
    #[error("{name}: the return threshold {leave} must be below the enter threshold {enter}")]
    NoHysteresis {
        /// The pair of thresholds.
        name: &'static str,
        /// The threshold that switches to async.
        enter: u64,
        /// The threshold that switches back.
        leave: u64,
    },
    /// A setting outside its allowed range.
    #[error("{name} {value} is out of range {min}..={max}")]
    OutOfRange {
        /// The setting.
        name: &'static str,
        /// The configured value.
        value: u64,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
    },
    /// Text read from /proc does not have the expected form.
    #[error("{file}: line {line}: {reason}")]
    Proc {
        /// The file the text came from, e.g. `/proc/stat`.
        file: &'static str,
        /// 1-based line number of the offending line (0 when the text is empty).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}
