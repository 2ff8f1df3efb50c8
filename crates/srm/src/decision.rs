//! What the manager decides ([`Decision`], [`Action`]), the per-interval admission budget
//! of async peers ([`Gate`], [`LagBudget`]) and the measurements each decision cites.
//!
//! Invariants: every decision carries a reason and the measurements behind it; a decision
//! made in `advise` mode has `advisory` set and must not be applied; the order of the
//! decisions in one [`Outcome`] is the order the driver must apply them in (a
//! [`Action::MarkPossiblyStale`] always precedes the switch it protects).

use std::fmt;
use std::time::Duration;

use crate::config::{BufferSettings, Protocol};
use crate::observation::PeerId;

/// One measured value, with its unit, for event logs and `tandem srm status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// A time span.
    Duration(Duration),
    /// A byte count.
    Bytes(u64),
    /// A rate.
    BytesPerSecond(u64),
    /// A share, per mille.
    Permille(u32),
    /// A plain count.
    Count(u64),
    /// A ratio, per mille (1500 is 1.5×).
    Ratio(u32),
}

/// A named measurement behind a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measurement {
    /// What was measured, e.g. `rtt`.
    pub name: &'static str,
    /// Its value.
    pub value: Value,
}

/// What the driver is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Durably mark the peer possibly-stale in the metadata (promotion refused without
    /// `--force`). The driver must finish this before applying any later decision of the
    /// same outcome and before acknowledging any write the peer may miss.
    MarkPossiblyStale,
    /// The peer has every acknowledged write again: clear the possibly-stale mark.
    ClearPossiblyStale,
    /// Replicate to the peer with this protocol from now on.
    SetProtocol(Protocol),
    /// Stop shipping data to the peer and mark it out of sync (DRBD's Ahead/Behind).
    EnterAhead,
    /// Congestion has cleared: resync what was marked out of sync while Ahead.
    LeaveAhead,
    /// Cap the resync towards the peer at this rate.
    SetResyncRate {
        /// The cap.
        bytes_per_s: u64,
    },
    /// Use these buffer settings on the peer's connection.
    SetBuffers(BufferSettings),
    /// Report only (nothing to apply): a switch to protocol A showed the gain it was made
    /// for and is kept. A switch that did not is undone with [`Action::SetProtocol`].
    GainObserved {
        /// The gain predicted when switching, per mille.
        predicted_permille: u32,
        /// The gain measured since, per mille.
        observed_permille: u32,
    },
    /// Advice only: jumbo frames would suit the write pattern (host settings are never changed).
    AdviseMtu {
        /// The interface's current MTU.
        current_bytes: u32,
        /// The MTU the manager suggests.
        suggested_bytes: u32,
    },
}

/// One decision about one peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The peer it is about.
    pub peer: PeerId,
    /// What to do.
    pub action: Action,
    /// True in `advise` mode (and for advice): log it, do not apply it.
    pub advisory: bool,
    /// Why, in a sentence.
    pub reason: String,
    /// The measurements the decision rests on.
    pub measurements: Vec<Measurement>,
}

/// How many more application bytes an async peer may fall behind by until the next
/// observation. `Unlimited` for a peer replicating synchronously (nothing acknowledged can
/// be missing from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// No lag bound applies (synchronous protocol).
    Unlimited,
    /// At most this many more bytes (plus what the peer acknowledges meanwhile); 0 means
    /// writes wait until the peer acknowledges some.
    Bytes(u64),
    /// The oldest unreplicated write is about to pass `srm-max-lag-time`: no write is
    /// admitted until the next observation, whatever is acknowledged meanwhile.
    Closed,
}

/// The lag gate of one peer for the coming interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The peer.
    pub peer: PeerId,
    /// The budget.
    pub admit: Admit,
    /// True in `advise` mode: the driver must not hold writes back.
    pub advisory: bool,
}

/// Everything one observation produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Decisions, in the order they must be applied.
    pub decisions: Vec<Decision>,
    /// One gate per connected peer, by peer id.
    pub gates: Vec<Gate>,
}

/// The driver's running budget for one async peer between two observations: each admitted
/// write takes from it, and a write that does not fit waits for the next observation (or
/// for the peer's acknowledgements, which the next observation reflects).
///
/// Invariant: the bytes admitted since the last [`LagBudget::refill`] never exceed the
/// budget it was given plus the bytes acknowledged since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LagBudget {
    admit: Admit,
}

impl LagBudget {
    /// A budget for the coming interval.
    pub fn new(admit: Admit) -> Self {
        Self { admit }
    }

    /// Replaces the budget with a fresh one from the latest gate.
    pub fn refill(&mut self, admit: Admit) {
        self.admit = admit;
    }

    /// Takes `bytes` from the budget if they fit; returns whether the write may proceed.
    pub fn try_admit(&mut self, bytes: u64) -> bool {
        match &mut self.admit {
            Admit::Unlimited => true,
            Admit::Bytes(left) if *left >= bytes => {
                *left -= bytes;
                true
            }
            Admit::Bytes(_) | Admit::Closed => false,
        }
    }

    /// The peer acknowledged `bytes` of the backlog the budget was computed against (or of
    /// writes admitted since): they may be admitted again. A closed gate stays closed.
    pub fn acknowledged(&mut self, bytes: u64) {
        if let Admit::Bytes(left) = &mut self.admit {
            *left = left.saturating_add(bytes);
        }
    }

    /// What is left.
    pub fn remaining(&self) -> Admit {
        self.admit
    }
}

impl fmt::Display for Value {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Duration(duration) => {
                let micros = duration.as_micros();
                write!(formatter, "{}.{}ms", micros / 1000, (micros % 1000) / 100)
            }
            Self::Bytes(bytes) => write!(formatter, "{}", binary(bytes, "B")),
            Self::BytesPerSecond(rate) => write!(formatter, "{}", binary(rate, "B/s")),
            Self::Permille(share) => write!(formatter, "{}.{}%", share / 10, share % 10),
            Self::Count(count) => write!(formatter, "{count}"),
            Self::Ratio(ratio) => write!(formatter, "{}.{:02}x", ratio / 1000, (ratio % 1000) / 10),
        }
    }
}

/// `value` in the largest binary unit it reaches, with one decimal: `64.0MiB`.
fn binary(value: u64, unit: &str) -> String {
    const PREFIXES: [(&str, u32); 4] = [("Gi", 30), ("Mi", 20), ("Ki", 10), ("", 0)];
    let (prefix, shift) = PREFIXES
        .iter()
        .copied()
        .find(|(_, shift)| value >> shift > 0)
        .unwrap_or(("", 0));
    if shift == 0 {
        return format!("{value}{unit}");
    }
    let whole = value >> shift;
    let tenth = ((value - (whole << shift)) * 10) >> shift;
    format!("{whole}.{tenth}{prefix}{unit}")
}

impl fmt::Display for Measurement {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}={}", self.name, self.value)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MarkPossiblyStale => formatter.write_str("mark possibly-stale"),
            Self::ClearPossiblyStale => formatter.write_str("clear possibly-stale"),
            Self::SetProtocol(protocol) => write!(formatter, "protocol {protocol}"),
            Self::EnterAhead => formatter.write_str("pull ahead"),
            Self::LeaveAhead => formatter.write_str("leave ahead and resync"),
            Self::SetResyncRate { bytes_per_s } => {
                write!(
                    formatter,
                    "resync rate {}",
                    Value::BytesPerSecond(*bytes_per_s)
                )
            }
            Self::SetBuffers(buffers) => write!(
                formatter,
                "max-buffers {} max-epoch-size {} sndbuf-size {}",
                buffers.max_buffers_pages, buffers.max_epoch_size, buffers.sndbuf_bytes
            ),
            Self::GainObserved {
                predicted_permille,
                observed_permille,
            } => write!(
                formatter,
                "keep protocol A (gain {} observed, {} predicted)",
                Value::Ratio(*observed_permille),
                Value::Ratio(*predicted_permille)
            ),
            Self::AdviseMtu {
                current_bytes,
                suggested_bytes,
            } => {
                write!(
                    formatter,
                    "advise MTU {suggested_bytes} (now {current_bytes})"
                )
            }
        }
    }
}

/// `peer 1: protocol A (advisory): reason [rtt=20.0ms ...]`, one line for the event log.
impl fmt::Display for Decision {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "peer {}: {}", self.peer, self.action)?;
        if self.advisory {
            formatter.write_str(" (advisory)")?;
        }
        write!(formatter, ": {} [", self.reason)?;
        for (index, measurement) in self.measurements.iter().enumerate() {
            if index > 0 {
                formatter.write_str(" ")?;
            }
            write!(formatter, "{measurement}")?;
        }
        formatter.write_str("]")
    }
}
