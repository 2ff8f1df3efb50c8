//! Quorum (drbd-semantics.md §6): a partition may write only if the nodes it reaches meet the
//! `quorum` rule, and only while enough UpToDate copies are reachable
//! (`quorum-minimum-redundancy`). A Primary that loses quorum stops completing writes —
//! they wait (`on-no-quorum suspend-io`) or fail (`io-error`) — and resumes when quorum
//! returns; a node without quorum cannot be promoted.
//!
//! Invariants:
//! - While quorum is lost, no client write and no flush completes successfully: a write that
//!   finished everywhere it could is held (suspend-io) or failed (io-error), so the other
//!   partition, which may have quorum and promote, never lacks a write this node acknowledged
//!   after the partition.
//! - A peer is present once connected and past the generation handshake on every volume (a
//!   connection the handshake may still refuse never counts).
//! - Quorum is re-evaluated on every connect, disconnect and tick, and when peers report their
//!   disk states; held writes and flushes are retried as soon as it returns.
//! - Unlike DRBD, a gracefully departed peer is not counted as present (tandem's secondaries
//!   do not yet outdate themselves when they leave), so a two-node resource with
//!   `quorum majority` loses quorum with its peer: safe, but stricter than DRBD.

use serde::{Deserialize, Serialize};

use super::*;

/// A node-count rule (`quorum`, `quorum-minimum-redundancy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum QuorumRule {
    /// No rule.
    #[default]
    Off,
    /// More than half of the resource's nodes.
    Majority,
    /// Every node.
    All,
    /// At least this many.
    Nodes(u8),
}

impl QuorumRule {
    /// Whether `present` of `voters` meets the rule.
    pub fn met(self, present: usize, voters: usize) -> bool {
        match self {
            QuorumRule::Off => true,
            QuorumRule::Majority => present * 2 > voters,
            QuorumRule::All => present >= voters,
            QuorumRule::Nodes(count) => present >= usize::from(count),
        }
    }
}

/// What writes do without quorum (`on-no-quorum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnNoQuorum {
    /// Hold them until quorum returns.
    #[default]
    SuspendIo,
    /// Fail them with EIO.
    IoError,
}

/// The resource's quorum settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QuorumConfig {
    /// `quorum`.
    pub rule: QuorumRule,
    /// `on-no-quorum`.
    pub on_loss: OnNoQuorum,
    /// `quorum-minimum-redundancy`: UpToDate copies (this node's included) that must be
    /// reachable.
    pub minimum_redundancy: QuorumRule,
}

impl<P: Clone> Engine<P> {
    /// Sets the quorum settings (at start and by `adjust`).
    pub fn set_quorum(&mut self, now: Time, config: QuorumConfig, out: &mut Vec<Action<P>>) {
        self.quorum = config;
        self.update_quorum(now, out);
    }

    /// Whether this node has quorum now.
    pub fn has_quorum(&self) -> bool {
        self.quorum_held
    }

    /// What quorum rests on now, in words (for logs).
    pub fn quorum_report(&self) -> String {
        self.quorum_words()
    }

    /// Whether application writes are frozen for want of quorum (`suspended:quorum`) or by
    /// fencing (`suspended:fencing`).
    pub fn io_suspended(&self) -> bool {
        (self.role == Role::Primary && self.quorum_blocks_new_writes()) || self.fencing_freezes()
    }

    /// Why this node has no quorum, in words (for refusals and logs).
    pub(super) fn quorum_words(&self) -> String {
        let (present, voters, copies) = self.quorum_counts();
        format!(
            "{present} of {voters} nodes reachable and {copies} UpToDate copies (quorum {:?}, quorum-minimum-redundancy {:?})",
            self.quorum.rule, self.quorum.minimum_redundancy
        )
    }

    fn quorum_counts(&self) -> (usize, usize, usize) {
        let voters = 1 + self.peers.len();
        // A peer counts once its handshake accepted it: a TCP connection alone proves
        // nothing (the handshake may still find a split brain and drop it).
        let connected = self.peers.iter().filter(|p| {
            p.connection == ConnState::Connected
                && p.syncs.iter().all(|s| !matches!(s, SyncState::Off | SyncState::WaitUuids { .. }))
        });
        let present = 1 + connected.clone().count();
        let local = usize::from(self.volumes.iter().all(|v| v.disk == DiskState::UpToDate));
        let remote = connected.filter(|p| !p.disks.is_empty() && p.disks.iter().all(|d| *d == DiskState::UpToDate)).count();
        (present, voters, local + remote)
    }

    pub(super) fn compute_quorum(&self) -> bool {
        let (present, voters, copies) = self.quorum_counts();
        self.quorum.rule.met(present, voters) && self.quorum.minimum_redundancy.met(copies, voters)
    }

    /// Re-evaluates quorum; on a change, reports it and retries what waited for it.
    pub(super) fn update_quorum(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        let held = self.compute_quorum();
        if held == self.quorum_held {
            return;
        }
        self.quorum_held = held;
        out.push(Action::StateChanged);
        if held {
            self.retry_after_quorum(now, out);
        } else if self.quorum.on_loss == OnNoQuorum::IoError {
            // Writes that only waited for completion fail now rather than later.
            self.retry_after_quorum(now, out);
        }
    }

    pub(super) fn retry_after_quorum(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        let writes: Vec<u64> = self.in_flight.keys().copied().collect();
        for seq in writes {
            self.try_complete_write(now, seq, out);
        }
        let flushes: Vec<u64> = self.flushes.keys().copied().collect();
        for seq in flushes {
            self.try_complete_flush(seq, out);
        }
        self.start_waiting(now, out);
    }

    /// For a write or flush that is otherwise done: hold it (None), or the result to
    /// complete it with (an error without quorum under `io-error`).
    pub(super) fn quorum_verdict(&self, result: Result<(), IoError>) -> Option<Result<(), IoError>> {
        if self.fencing_freezes() {
            // Held until the lost peer is fenced or the administrator resumes (`fence.rs`).
            return None;
        }
        if self.quorum_held || self.role != Role::Primary {
            return Some(result);
        }
        match self.quorum.on_loss {
            OnNoQuorum::SuspendIo => None,
            OnNoQuorum::IoError => Some(Err(IoError::Io)),
        }
    }

    /// Whether a new write must wait for quorum (suspend-io) before it starts.
    pub(super) fn quorum_blocks_new_writes(&self) -> bool {
        !self.quorum_held && self.quorum.on_loss == OnNoQuorum::SuspendIo
    }

    /// Whether a new write must wait before it starts: quorum's suspend-io or fencing's
    /// freeze.
    pub(super) fn new_writes_wait(&self) -> bool {
        self.quorum_blocks_new_writes() || self.fencing_freezes()
    }

    /// Whether a new write is refused at once for lack of quorum (io-error).
    pub(super) fn quorum_refuses_new_writes(&self) -> bool {
        !self.quorum_held && self.quorum.on_loss == OnNoQuorum::IoError
    }
}
