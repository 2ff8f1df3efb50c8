//! The simulated network: per directed link, a data and a control channel, each a FIFO
//! "socket" with a bounded send buffer, plus the sender's backlog when the buffer is full.
//!
//! Invariants:
//! - A channel delivers in the order frames were sent: a frame's delivery time is never
//!   earlier than the previous frame's (delay and jitter never reorder).
//! - A frame enters the wire only while the wire holds less than [`SOCKET_BUFFER_BYTES`];
//!   until then it waits in the backlog (a data frame counts as sent, `peer_sent`, only when it
//!   enters the wire). A reader that stops reading therefore fills the buffer, then the
//!   backlog, which the engine's in-flight limits bound.
//! - Frames carry their connection id; the receiver drops frames of a connection that is not
//!   its current one. A blocked (partitioned) direction or a stopped reader holds frames; they
//!   are not lost (TCP retransmits) until their connection is dropped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use repl::{PeerMessage, Time};

use crate::Payload;

/// Bytes a socket's send buffer holds before the sender queues in its backlog.
pub const SOCKET_BUFFER_BYTES: u64 = 256 * 1024;
/// Bytes a frame header counts for.
pub const FRAME_HEADER_BYTES: u64 = 64;

/// Which socket of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Chan {
    /// Data, barriers, handshake, bitmap, resync.
    Data,
    /// Acks, pings, state.
    Control,
}

/// What a frame carries.
#[derive(Debug, Clone)]
pub enum Body {
    /// A peer message.
    Msg(PeerMessage<Payload>),
    /// The sender closed the connection (after the frames before it).
    Close,
}

/// One frame on a channel.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The connection it belongs to.
    pub conn: u64,
    /// When it reaches the receiver (set when it enters the wire).
    pub at: Time,
    /// Its content.
    pub body: Body,
    /// Bytes it occupies.
    pub bytes: u64,
    /// For a replicated write: its sequence number (reported with `peer_sent`).
    pub data_seq: Option<u64>,
}

/// One direction of one socket.
#[derive(Debug, Clone, Default)]
pub struct Channel {
    /// Frames in the socket buffer or on the wire, in order.
    pub wire: VecDeque<Frame>,
    /// Frames the sender could not hand to the socket yet.
    pub backlog: VecDeque<Frame>,
    wire_bytes: u64,
    last_at: Time,
}

impl Channel {
    /// Bytes on the wire and in the backlog.
    pub fn bytes(&self) -> u64 {
        self.wire_bytes + self.backlog.iter().map(|f| f.bytes).sum::<u64>()
    }

    /// Frames on the wire and in the backlog.
    pub fn frames(&self) -> usize {
        self.wire.len() + self.backlog.len()
    }
}

/// Key of a channel: (from node, to node, socket).
pub type ChanKey = (u8, u8, Chan);

/// Every channel and the faults on them.
#[derive(Debug, Clone, Default)]
pub struct Network {
    /// All channels, created on first use.
    pub channels: BTreeMap<ChanKey, Channel>,
    /// Directions `(from, to)` that deliver nothing.
    pub blocked: BTreeSet<(u8, u8)>,
    /// `(reader, from)`: the reader stopped reading what `from` sends.
    pub stopped: BTreeSet<(u8, u8)>,
    /// The data and control sockets of one direction deliver in one order (off: they are
    /// independent streams, and one may overtake the other, as two TCP connections can).
    pub sockets_in_order: bool,
}

impl Network {
    /// Whether frames from `from` to `to` can be delivered now.
    pub fn passes(&self, from: u8, to: u8) -> bool {
        !self.blocked.contains(&(from, to)) && !self.stopped.contains(&(to, from))
    }

    /// The earliest delivery time of the next frame on `key` besides the channel's own order.
    fn floor(&self, key: ChanKey) -> Time {
        if !self.sockets_in_order {
            return Time(0);
        }
        let other = (
            key.0,
            key.1,
            if key.2 == Chan::Data {
                Chan::Control
            } else {
                Chan::Data
            },
        );
        self.channels.get(&other).map_or(Time(0), |c| c.last_at)
    }

    /// Queues a frame; returns it back if it entered the wire at once (with its `at`).
    pub fn send(
        &mut self,
        key: ChanKey,
        mut frame: Frame,
        now: Time,
        delay_ns: u64,
    ) -> Option<(Time, Option<u64>)> {
        let floor = self.floor(key);
        let channel = self.channels.entry(key).or_default();
        if !channel.backlog.is_empty()
            || channel.wire_bytes + frame.bytes > SOCKET_BUFFER_BYTES && !channel.wire.is_empty()
        {
            channel.backlog.push_back(frame);
            return None;
        }
        frame.at = channel
            .last_at
            .max(floor)
            .max(Time(now.0.saturating_add(delay_ns)));
        channel.last_at = frame.at;
        channel.wire_bytes += frame.bytes;
        let entered = (frame.at, frame.data_seq);
        channel.wire.push_back(frame);
        Some(entered)
    }

    /// Takes the front frame of a channel if it is due and its direction passes.
    pub fn take_due(&mut self, key: ChanKey, now: Time) -> Option<Frame> {
        if !self.passes(key.0, key.1) {
            return None;
        }
        let channel = self.channels.get_mut(&key)?;
        if channel.wire.front()?.at > now {
            return None;
        }
        let frame = channel.wire.pop_front()?;
        channel.wire_bytes -= frame.bytes;
        Some(frame)
    }

    /// Moves backlog frames into the freed socket buffer; returns `(at, data_seq, conn)` of
    /// each frame that entered the wire.
    pub fn refill(
        &mut self,
        key: ChanKey,
        now: Time,
        delay_ns: u64,
    ) -> Vec<(Time, Option<u64>, u64)> {
        let mut entered = Vec::new();
        let floor = self.floor(key);
        let Some(channel) = self.channels.get_mut(&key) else {
            return entered;
        };
        while let Some(front) = channel.backlog.front() {
            if channel.wire_bytes + front.bytes > SOCKET_BUFFER_BYTES && !channel.wire.is_empty() {
                break;
            }
            let Some(mut frame) = channel.backlog.pop_front() else {
                break;
            };
            frame.at = channel
                .last_at
                .max(floor)
                .max(Time(now.0.saturating_add(delay_ns)));
            channel.last_at = frame.at;
            channel.wire_bytes += frame.bytes;
            entered.push((frame.at, frame.data_seq, frame.conn));
            channel.wire.push_back(frame);
        }
        entered
    }

    /// Drops every frame of connection `conn` (both directions, both sockets).
    pub fn purge(&mut self, conn: u64) {
        for channel in self.channels.values_mut() {
            channel.wire.retain(|f| f.conn != conn);
            channel.backlog.retain(|f| f.conn != conn);
            channel.wire_bytes = channel.wire.iter().map(|f| f.bytes).sum();
        }
    }

    /// Delivery times of every frame on the wire, per channel (to reschedule after a heal).
    pub fn pending_deliveries(&self) -> Vec<(ChanKey, Time)> {
        self.channels
            .iter()
            .flat_map(|(key, c)| c.wire.iter().map(move |f| (*key, f.at)))
            .collect()
    }

    /// Whether any frame of connection `conn` is still queued.
    pub fn carries(&self, conn: u64) -> bool {
        self.channels.values().any(|c| {
            c.wire
                .iter()
                .chain(c.backlog.iter())
                .any(|f| f.conn == conn)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(conn: u64, bytes: u64) -> Frame {
        Frame {
            conn,
            at: Time(0),
            body: Body::Close,
            bytes,
            data_seq: Some(bytes),
        }
    }

    #[test]
    fn delivery_keeps_order_despite_shorter_delays() {
        let mut net = Network::default();
        let key = (0, 1, Chan::Data);
        assert!(net.send(key, frame(1, 10), Time(0), 500).is_some());
        assert!(net.send(key, frame(1, 11), Time(1), 5).is_some());
        assert!(
            net.take_due(key, Time(100)).is_none(),
            "the first is not due, the second must wait"
        );
        assert_eq!(net.take_due(key, Time(500)).map(|f| f.bytes), Some(10));
        assert_eq!(net.take_due(key, Time(500)).map(|f| f.bytes), Some(11));
    }

    #[test]
    fn a_stopped_reader_fills_the_buffer_then_the_backlog() {
        let mut net = Network::default();
        let key = (0, 1, Chan::Data);
        net.stopped.insert((1, 0));
        let mut entered = 0;
        for _ in 0..10 {
            entered += usize::from(
                net.send(key, frame(1, SOCKET_BUFFER_BYTES / 4), Time(0), 1)
                    .is_some(),
            );
        }
        assert_eq!(entered, 4);
        assert!(net.take_due(key, Time(10)).is_none());
        net.stopped.clear();
        assert!(net.take_due(key, Time(10)).is_some());
        assert_eq!(net.refill(key, Time(10), 1).len(), 1);
        net.purge(1);
        assert_eq!(net.channels[&key].frames(), 0);
    }
}
