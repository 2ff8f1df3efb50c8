//! The secondary's side of one peer connection: applies received writes epoch by epoch.
//!
//! Writes of one epoch are issued to the local disk concurrently as they arrive; writes of a
//! later epoch are held until the earlier epoch is closed by its barrier and every one of its
//! writes has finished (and, for a flushing barrier, the flush too). So this disk only ever
//! shows a state the primary's disk went through.
//!
//! Invariants:
//! - Only the front epoch has writes in flight (`issued`); later epochs only hold writes.
//! - Epoch keys `(session, epoch)` strictly increase from front to back.
//! - Acknowledgements are sent only for the current session while connected: a write received
//!   on an old connection is still applied (protocol B promised the primary it would be), but
//!   its ack would name a sequence number of a connection that no longer exists.

use std::collections::VecDeque;

use crate::state::{ConnState, Protocol};
use crate::types::{Action, DiskOp, IoError, IoId, PeerMessage};

#[derive(Debug)]
struct RxEpoch<P> {
    key: (u64, u64),
    issued: u32,
    held: Vec<(u64, u16, DiskOp<P>)>,
    /// Some(flush) once the barrier arrived.
    closed: Option<bool>,
    flush: FlushStage,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlushStage {
    NotStarted,
    Running,
    Done,
}

/// Applies one peer's replicated writes. See the module documentation.
#[derive(Debug)]
pub(crate) struct Receiver<P> {
    peer: u8,
    session: u64,
    connected: bool,
    epochs: VecDeque<RxEpoch<P>>,
}

impl<P: Clone> Receiver<P> {
    pub(crate) fn new(peer: u8) -> Receiver<P> {
        Receiver { peer, session: 0, connected: false, epochs: VecDeque::new() }
    }

    /// A new connection starts: its epochs come after everything still queued.
    pub(crate) fn new_session(&mut self) {
        self.session += 1;
        self.connected = true;
    }

    /// Writes received and not yet written.
    pub(crate) fn pending(&self) -> u64 {
        self.epochs.iter().map(|e| u64::from(e.issued) + e.held.len() as u64).sum()
    }

    fn acks_allowed(&self, key: (u64, u64)) -> bool {
        self.connected && key.0 == self.session
    }

    pub(crate) fn data(&mut self, seq: u64, epoch: u64, volume: u16, op: DiskOp<P>, protocol: Protocol, out: &mut Vec<Action<P>>) -> Result<(), String> {
        let key = (self.session, epoch);
        match self.epochs.back() {
            Some(back) if key < back.key => return Err(format!("write for epoch {epoch} after a later epoch")),
            Some(back) if key == back.key && back.closed.is_some() => {
                return Err(format!("write for epoch {epoch} after its barrier"));
            }
            Some(back) if key == back.key => {}
            _ => self.epochs.push_back(RxEpoch { key, issued: 0, held: Vec::new(), closed: None, flush: FlushStage::NotStarted }),
        }
        if protocol == Protocol::B {
            out.push(Action::SendControl { peer: self.peer, message: PeerMessage::RecvAck { seq } });
        }
        let is_front = self.epochs.len() == 1;
        let peer = self.peer;
        let Some(back) = self.epochs.back_mut() else { return Ok(()) };
        if is_front {
            back.issued += 1;
            out.push(Action::LocalWrite { io: IoId::PeerWrite { peer, seq }, volume, op });
        } else {
            back.held.push((seq, volume, op));
        }
        Ok(())
    }

    pub(crate) fn barrier(&mut self, epoch: u64, flush: bool, out: &mut Vec<Action<P>>) -> Result<(), String> {
        let key = (self.session, epoch);
        match self.epochs.back_mut() {
            Some(back) if key < back.key => return Err(format!("barrier for epoch {epoch} after a later epoch")),
            Some(back) if key == back.key => {
                if back.closed.is_some() {
                    return Err(format!("second barrier for epoch {epoch}"));
                }
                back.closed = Some(flush);
            }
            _ => self.epochs.push_back(RxEpoch { key, issued: 0, held: Vec::new(), closed: Some(flush), flush: FlushStage::NotStarted }),
        }
        self.advance(out);
        Ok(())
    }

    /// A write issued for `seq` finished.
    pub(crate) fn write_done(&mut self, seq: u64, result: Result<(), IoError>, protocol: Protocol, out: &mut Vec<Action<P>>) {
        let Some(front) = self.epochs.front_mut() else { return };
        assert!(front.issued > 0, "a peer write completed that was never issued");
        front.issued -= 1;
        let key = front.key;
        if self.acks_allowed(key) {
            let message = match result {
                Err(_) => Some(PeerMessage::NegAck { seq }),
                Ok(()) if protocol == Protocol::C => Some(PeerMessage::WriteAck { seq }),
                Ok(()) => None,
            };
            if let Some(message) = message {
                out.push(Action::SendControl { peer: self.peer, message });
            }
        }
        self.advance(out);
    }

    /// The flush that ends the front epoch finished.
    pub(crate) fn flush_done(&mut self, epoch: u64, result: Result<(), IoError>, out: &mut Vec<Action<P>>) {
        let Some(front) = self.epochs.front_mut() else { return };
        assert_eq!(front.key.1, epoch, "flush completion for the front epoch");
        front.flush = FlushStage::Done;
        let key = front.key;
        if result.is_err() && self.acks_allowed(key) {
            // Never acknowledge an epoch that is not durable: drop the connection instead, so
            // the primary marks everything unacknowledged out of sync.
            let reason = format!("local flush for epoch {epoch} failed");
            out.push(Action::Disconnect { peer: self.peer, state: ConnState::NetworkFailure, reason });
            self.connected = false;
        }
        self.advance(out);
    }

    /// The connection ended: everything received is still applied in order, unacknowledged.
    pub(crate) fn connection_lost(&mut self, out: &mut Vec<Action<P>>) {
        self.connected = false;
        for epoch in &mut self.epochs {
            epoch.closed.get_or_insert(false);
        }
        self.advance(out);
    }

    /// Retire finished epochs from the front and start the next one's writes.
    fn advance(&mut self, out: &mut Vec<Action<P>>) {
        loop {
            let Some(front) = self.epochs.front_mut() else { return };
            let Some(flush) = front.closed else { return };
            if front.issued > 0 || !front.held.is_empty() {
                return;
            }
            if flush && front.flush != FlushStage::Done {
                if front.flush == FlushStage::NotStarted {
                    front.flush = FlushStage::Running;
                    out.push(Action::LocalFlush { io: IoId::PeerFlush { peer: self.peer, epoch: front.key.1 } });
                }
                return;
            }
            let key = front.key;
            self.epochs.pop_front();
            if self.acks_allowed(key) {
                out.push(Action::SendControl { peer: self.peer, message: PeerMessage::BarrierAck { epoch: key.1 } });
            }
            self.issue_front(out);
        }
    }

    fn issue_front(&mut self, out: &mut Vec<Action<P>>) {
        let peer = self.peer;
        let Some(front) = self.epochs.front_mut() else { return };
        for (seq, volume, op) in front.held.drain(..) {
            front.issued += 1;
            out.push(Action::LocalWrite { io: IoId::PeerWrite { peer, seq }, volume, op });
        }
    }
}
