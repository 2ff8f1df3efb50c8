//! The properties of an emulated link: per-direction delay, jitter, bandwidth and queue bound,
//! and the partition state.
//!
//! Invariants:
//! - A [`Link`] that passed [`Link::check`] has every delay and jitter ≤ [`DELAY_LIMIT`], every
//!   rate ≥ 1 byte/s and every queue bound in `1..=QUEUE_LIMIT_BYTES`; the relay accepts no
//!   other (`RelayHandle::set` and `Relay::start` check first).
//! - "Forward" is always the direction from the accepted client to the target, "reverse" the
//!   direction back; the names never depend on which tandem node connected.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::LinkError;

/// Largest one-way delay or jitter a link accepts.
pub const DELAY_LIMIT: Duration = Duration::from_secs(60);
/// Largest queue bound a direction accepts, in bytes (16 GiB).
pub const QUEUE_LIMIT_BYTES: u64 = 16 << 30;
/// Queue bound of [`Shape::default`], in bytes (64 MiB: a 20 ms link at 25 Gbit/s).
pub const QUEUE_DEFAULT_BYTES: u64 = 64 << 20;

/// One direction of a relayed connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the accepted client to the target.
    Forward,
    /// From the target back to the client.
    Reverse,
}

impl Direction {
    /// Both directions, forward first.
    pub const ALL: [Direction; 2] = [Direction::Forward, Direction::Reverse];

    /// 0 for forward, 1 for reverse: the index of per-direction arrays.
    pub fn index(self) -> usize {
        match self {
            Direction::Forward => 0,
            Direction::Reverse => 1,
        }
    }
}

/// Which directions are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Partition {
    /// The link is whole.
    #[default]
    None,
    /// Nothing passes either way.
    Both,
    /// Client-to-target traffic is cut; the reverse direction still flows.
    Forward,
    /// Target-to-client traffic is cut; the forward direction still flows.
    Reverse,
}

impl Partition {
    /// Whether data travelling in `direction` is cut.
    pub fn cuts(self, direction: Direction) -> bool {
        match self {
            Partition::None => false,
            Partition::Both => true,
            Partition::Forward => direction == Direction::Forward,
            Partition::Reverse => direction == Direction::Reverse,
        }
    }
}

/// What a partition does to TCP connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnPartition {
    /// Data is held in the relay's queues (up to their bound, then TCP backpressure) and
    /// delivered, in order, when the partition heals. Like a cable pulled and plugged back
    /// before TCP gives up.
    #[default]
    Hold,
    /// Every connection is reset (RST on both sides) and new ones are reset on accept while
    /// the partition lasts. Like a peer that crashed or a firewall that rejects.
    Reset,
}

/// The properties of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// One-way delay added to every byte, measured from when the relay read it.
    pub delay: Duration,
    /// Uniform jitter: each chunk's delay is `delay ± jitter` (never below zero), but a chunk
    /// is never released before the one read before it, so jitter only stretches gaps.
    pub jitter: Duration,
    /// Bandwidth limit shared by all connections of the relay in this direction; `None` is
    /// unlimited.
    pub rate_bytes_per_s: Option<u64>,
    /// Bytes each connection may hold in this direction (read, not yet written). When full,
    /// the relay stops reading, so TCP backpressure reaches the sender.
    pub queue_bytes_max: u64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            rate_bytes_per_s: None,
            queue_bytes_max: QUEUE_DEFAULT_BYTES,
        }
    }
}

/// Everything about an emulated link. `Link::default()` is a transparent relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Link {
    /// Client-to-target properties.
    pub forward: Shape,
    /// Target-to-client properties.
    pub reverse: Shape,
    /// Which directions are cut.
    pub partition: Partition,
    /// Whether a partition holds data or resets connections.
    pub on_partition: OnPartition,
    /// Seed of the jitter generator; one seed gives one sequence of jitter draws per
    /// connection and direction.
    pub jitter_seed: u64,
}

impl Link {
    /// A link with the same `shape` both ways.
    pub fn symmetric(shape: Shape) -> Link {
        Link {
            forward: shape,
            reverse: shape,
            ..Link::default()
        }
    }

    /// The properties of `direction`.
    pub fn shape(&self, direction: Direction) -> &Shape {
        match direction {
            Direction::Forward => &self.forward,
            Direction::Reverse => &self.reverse,
        }
    }

    /// The properties of `direction`, for changing them.
    pub fn shape_mut(&mut self, direction: Direction) -> &mut Shape {
        match direction {
            Direction::Forward => &mut self.forward,
            Direction::Reverse => &mut self.reverse,
        }
    }

    /// Whether connections must be reset and new ones refused right now.
    pub fn refuses(&self) -> bool {
        self.partition != Partition::None && self.on_partition == OnPartition::Reset
    }

    /// Whether data in `direction` must wait in the queue right now.
    pub fn holds(&self, direction: Direction) -> bool {
        self.partition.cuts(direction)
    }

    /// Checks every limit; see the module invariants.
    pub fn check(&self) -> Result<(), LinkError> {
        Direction::ALL
            .iter()
            .try_for_each(|&direction| check_shape(direction, self.shape(direction)))
    }
}

fn check_shape(direction: Direction, shape: &Shape) -> Result<(), LinkError> {
    let too_long = |what: &'static str, value: Duration| LinkError::DelayTooLong {
        direction,
        what,
        value,
    };
    if shape.delay > DELAY_LIMIT {
        return Err(too_long("delay", shape.delay));
    }
    if shape.jitter > DELAY_LIMIT {
        return Err(too_long("jitter", shape.jitter));
    }
    if shape.rate_bytes_per_s == Some(0) {
        return Err(LinkError::RateZero { direction });
    }
    if shape.queue_bytes_max == 0 || shape.queue_bytes_max > QUEUE_LIMIT_BYTES {
        return Err(LinkError::QueueBound {
            direction,
            bytes: shape.queue_bytes_max,
        });
    }
    Ok(())
}
