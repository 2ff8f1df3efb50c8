//! The network edge of a peer listener: who may open a connection, how many unauthenticated
//! handshakes may be in progress at once, and how refusals reach the log without flooding it
//! (issue 27, item 6; docs/SECURITY.md states the threat model).
//!
//! This module only keeps books: it does no I/O and reads no clock (time is an argument), so
//! its rules are tested without sockets. `peer::listen` drives it.
//!
//! Invariants:
//! - [`SourceFilter`] admits an address only if it is the configured address of a peer of the
//!   resource (IPv4-mapped IPv6 addresses compare as their IPv4 form). The listener checks it
//!   right after `accept`, before it reads a byte or starts TLS.
//! - [`HandshakeSlots`] never holds more than its capacity. A new connection is always given a
//!   slot; when they are all taken, the holder of the oldest slot among the least advanced
//!   ([`Stage`]) is handed back to be closed at once. An idle connection never advances, so a
//!   flood of idle connections only ever evicts itself, and a real peer, whose `Hello` follows
//!   its connect at once, gets in.
//! - [`RefusalLog`] keeps at most [`REFUSAL_ADDRESSES_MAX`] addresses (then one bucket for all
//!   others) and a reason of at most [`REFUSAL_REASON_BYTES_MAX`] bytes each: at most one line
//!   per address and interval is logged, and the refusals it held back are counted, never lost.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Unauthenticated handshakes a listener lets run at once. A handshake of a real peer takes
/// a few round trips; each peer has two sockets, and a resource has at most a few peers.
pub(crate) const HANDSHAKES_IN_PROGRESS_MAX: usize = 8;
/// The interval within which refusals from one address are logged once.
pub(crate) const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// Addresses whose refusals are counted separately; refusals from any more share one count.
pub(crate) const REFUSAL_ADDRESSES_MAX: usize = 64;
/// The longest reason kept per address (a reason may quote a name the peer sent).
pub(crate) const REFUSAL_REASON_BYTES_MAX: usize = 200;

const _: () = assert!(HANDSHAKES_IN_PROGRESS_MAX > 0);
const _: () = assert!(REFUSAL_ADDRESSES_MAX > 0);

/// Whether two addresses name the same host: an IPv4-mapped IPv6 address (as a dual-stack
/// listener reports an IPv4 client) equals its IPv4 form.
pub(crate) fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// The addresses a listener accepts connections from: the configured addresses of the
/// resource's peers (DRBD accepts a connection only from a configured peer address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceFilter {
    allowed: Vec<IpAddr>,
}

impl SourceFilter {
    /// A filter that admits exactly `peers` (the port is not part of the check: a peer
    /// connects from an ephemeral port).
    pub(crate) fn new(peers: impl IntoIterator<Item = IpAddr>) -> SourceFilter {
        let mut allowed: Vec<IpAddr> = peers.into_iter().map(|ip| ip.to_canonical()).collect();
        allowed.sort_unstable();
        allowed.dedup();
        SourceFilter { allowed }
    }

    /// Whether a connection from `source` may proceed to the handshake.
    pub(crate) fn allows(&self, source: IpAddr) -> bool {
        self.allowed.contains(&source.to_canonical())
    }
}

/// How far an unauthenticated handshake got; a later stage is evicted only when no slot is
/// at an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Accepted; nothing valid received yet (with TLS: its handshake not finished).
    Connected,
    /// A `Hello` from a configured peer, from that peer's address, passed its checks; the
    /// challenge-response (if any) is still to come.
    Introduced,
}

/// Names one admitted handshake in [`HandshakeSlots`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

/// What [`HandshakeSlots::admit`] did.
#[derive(Debug)]
pub(crate) struct Admitted<H> {
    /// The new handshake's slot.
    pub(crate) ticket: Ticket,
    /// The handle of the handshake that lost its slot to make room; its connection must be
    /// closed at once.
    pub(crate) evicted: Option<H>,
}

#[derive(Debug)]
struct Slot<H> {
    ticket: u64,
    stage: Stage,
    handle: H,
}

/// The unauthenticated handshakes of one listener, each with a handle (how to stop it).
///
/// Call protocol: [`admit`](Self::admit) on every accepted connection (and close the evicted
/// one), [`advance`](Self::advance) as it gets further, [`release`](Self::release) when it
/// ends, whatever the outcome.
#[derive(Debug)]
pub(crate) struct HandshakeSlots<H> {
    capacity: usize,
    /// In admission order, so the first of a stage is its oldest.
    slots: Vec<Slot<H>>,
    next_ticket: u64,
}

impl<H> HandshakeSlots<H> {
    pub(crate) fn new(capacity: usize) -> HandshakeSlots<H> {
        assert!(capacity > 0, "a listener needs at least one handshake slot");
        HandshakeSlots {
            capacity,
            slots: Vec::with_capacity(capacity),
            next_ticket: 0,
        }
    }

    /// Give a new handshake a slot, evicting the oldest of the least advanced when all are
    /// taken.
    pub(crate) fn admit(&mut self, handle: H) -> Admitted<H> {
        let evicted = if self.slots.len() >= self.capacity {
            self.evict()
        } else {
            None
        };
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.slots.push(Slot {
            ticket,
            stage: Stage::Connected,
            handle,
        });
        assert!(
            self.slots.len() <= self.capacity,
            "handshake slots over capacity"
        );
        Admitted {
            ticket: Ticket(ticket),
            evicted,
        }
    }

    fn evict(&mut self) -> Option<H> {
        let (index, _) = self
            .slots
            .iter()
            .enumerate()
            .min_by_key(|(_, slot)| (slot.stage, slot.ticket))?;
        Some(self.slots.remove(index).handle)
    }

    /// The handshake `ticket` reached `stage` (a stage is never taken back).
    pub(crate) fn advance(&mut self, ticket: Ticket, stage: Stage) {
        if let Some(slot) = self.slots.iter_mut().find(|slot| slot.ticket == ticket.0) {
            slot.stage = slot.stage.max(stage);
        }
    }

    /// The handshake `ticket` ended; its handle, unless it was evicted before.
    pub(crate) fn release(&mut self, ticket: Ticket) -> Option<H> {
        let index = self.slots.iter().position(|slot| slot.ticket == ticket.0)?;
        Some(self.slots.remove(index).handle)
    }

    /// Handshakes in progress.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

/// Whether a refusal is logged now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Log it; `suppressed_before` refusals from the same source were held back in the
    /// window that just ended without a summary.
    Log { suppressed_before: u64 },
    /// Counted, to be reported by [`RefusalLog::expire`].
    Suppress,
}

/// Refusals held back from one source during one interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The address, or `None` for the bucket of every address beyond the table's capacity.
    pub(crate) source: Option<IpAddr>,
    /// How many were held back.
    pub(crate) suppressed: u64,
    /// The reason of the last one.
    pub(crate) last_reason: String,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    suppressed: u64,
    last_reason: String,
}

impl Window {
    fn new(started: Instant) -> Window {
        Window {
            started,
            suppressed: 0,
            last_reason: String::new(),
        }
    }

    /// Count a refusal against this window; whether it is the first of a new window.
    fn note(&mut self, reason: &str, now: Instant, interval: Duration) -> Refusal {
        if now.saturating_duration_since(self.started) >= interval {
            let suppressed_before = self.suppressed;
            *self = Window::new(now);
            return Refusal::Log { suppressed_before };
        }
        self.suppressed = self.suppressed.saturating_add(1);
        self.last_reason = shortened(reason);
        Refusal::Suppress
    }

    fn ended(&self, now: Instant, interval: Duration) -> bool {
        now.saturating_duration_since(self.started) >= interval
    }
}

/// `reason` cut to [`REFUSAL_REASON_BYTES_MAX`] bytes at a character boundary.
fn shortened(reason: &str) -> String {
    let mut end = reason.len().min(REFUSAL_REASON_BYTES_MAX);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason.get(..end).unwrap_or_default().to_owned()
}

/// Rate limit for the log lines of refused connections: the first refusal from an address is
/// logged, further ones within the interval are counted and summarized once it ends.
///
/// Call protocol: [`note`](Self::note) on every refusal and log when told; call
/// [`expire`](Self::expire) regularly (more often than the interval) and log its summaries.
#[derive(Debug)]
pub(crate) struct RefusalLog {
    interval: Duration,
    capacity: usize,
    windows: BTreeMap<IpAddr, Window>,
    /// One window for every address that found the table full.
    others: Option<Window>,
}

impl RefusalLog {
    pub(crate) fn new(interval: Duration, capacity: usize) -> RefusalLog {
        assert!(capacity > 0, "a refusal log needs room for one address");
        RefusalLog {
            interval,
            capacity,
            windows: BTreeMap::new(),
            others: None,
        }
    }

    /// A connection from `source` was refused for `reason` at `now`.
    pub(crate) fn note(&mut self, source: IpAddr, reason: &str, now: Instant) -> Refusal {
        let source = source.to_canonical();
        let interval = self.interval;
        if let Some(window) = self.windows.get_mut(&source) {
            return window.note(reason, now, interval);
        }
        if self.windows.len() < self.capacity {
            self.windows.insert(source, Window::new(now));
            return Refusal::Log {
                suppressed_before: 0,
            };
        }
        match &mut self.others {
            Some(window) => window.note(reason, now, interval),
            None => {
                self.others = Some(Window::new(now));
                Refusal::Log {
                    suppressed_before: 0,
                }
            }
        }
    }

    /// Close the windows that ended by `now`: a window that held refusals back yields their
    /// summary and starts again (a steady flood gives one line per interval); a quiet one is
    /// forgotten.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<Summary> {
        let interval = self.interval;
        let mut summaries = Vec::new();
        let mut close = |source: Option<IpAddr>, window: &mut Window| -> bool {
            if !window.ended(now, interval) {
                return true;
            }
            if window.suppressed == 0 {
                return false;
            }
            let last_reason = std::mem::take(&mut window.last_reason);
            summaries.push(Summary {
                source,
                suppressed: window.suppressed,
                last_reason,
            });
            *window = Window::new(now);
            true
        };
        self.windows
            .retain(|source, window| close(Some(*source), window));
        if let Some(window) = &mut self.others {
            if !close(None, window) {
                self.others = None;
            }
        }
        assert!(
            self.windows.len() <= self.capacity,
            "refusal log over capacity"
        );
        summaries
    }

    /// Addresses with a window open.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.windows.len()
    }
}
