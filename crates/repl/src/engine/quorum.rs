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
//! - A peer is present once connected, past the generation handshake on every volume, and
//!   the peer said it accepted each ([`UuidsPurpose::Accepted`]): a connection either side's
//!   handshake may still refuse never counts (a Secondary that follows another Primary drops
//!   a second one on its handshake, after that one may have decided already).
//! - A peer this node resyncs counts only once it said its disk is no longer UpToDate
//!   (`resyncs_promotable_peer`): until the `SyncStart` reaches it, it could be promoted
//!   without the blocks the resync brings, held writes among them.
//! - Quorum is re-evaluated on every connect, disconnect and tick, and when peers report their
//!   disk states; held writes and flushes are retried as soon as it returns.
//! - **Last man standing**, as in DRBD: an absent peer known to be Outdated or Inconsistent
//!   (it departed gracefully, `leave.rs`, or `fence-peer` outdated it) cannot be promoted.
//!   When every absent peer is known so, no other partition can write, and the voters are
//!   just the nodes present: a Primary whose peers all left gracefully keeps quorum alone.
//!   One absent peer in an unknown state puts every node back among the voters, and a node
//!   that loses quorum forgets what it knew of absent peers (`forget_departed`): the
//!   knowledge is trusted only while quorum held without a break since.
//! - A Secondary's vote carries one Primary at a time (`vote_taken`): a peer already Primary
//!   when it connects is refused while the vote went to another Primary since.
//! - What a node knows of departed peers is in its metadata (each peer slot's `outdated`
//!   flag, DRBD's `MDF_PEER_OUTDATED`; `leave.rs`), so it survives a restart.
//!
//! Limitations (no cluster-wide two-phase commit: each node decides from its direct peers):
//! - A Primary that disconnects from a Secondary does not ask it to outdate itself (DRBD does,
//!   by a two-phase state change), so it loses that peer's vote; only a departing Secondary
//!   outdates itself.
//! - A peer that answers a promotion's ping and loses its link before the new Primary's
//!   `State` reaches it may still lend its vote to the old Primary (a window of one message);
//!   so may one that restarted (the vote is kept in memory only).

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

/// What quorum rests on now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct QuorumCounts {
    /// Nodes reachable, this one included.
    present: usize,
    /// Nodes that vote: every node, or only those present when every absent peer is known
    /// Outdated (last man standing).
    voters: usize,
    /// UpToDate copies reachable, this node's included.
    copies: usize,
    /// Absent peers left out of the voters for being known Outdated.
    outdated_left_out: usize,
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

    /// How many absent peers quorum leaves out of the voters now for being known Outdated
    /// (last man standing); 0 when every node votes.
    pub fn quorum_left_out(&self) -> usize {
        self.quorum_counts().outdated_left_out
    }

    /// What quorum rests on now, in words (for logs).
    pub fn quorum_report(&self) -> String {
        self.quorum_words()
    }

    /// Whether application writes are frozen for want of quorum (`suspended:quorum`) or by
    /// fencing (`suspended:fencing`).
    pub fn io_suspended(&self) -> bool {
        (self.role == Role::Primary && self.quorum_blocks_new_writes())
            || self.fencing_freezes()
            || self.user_suspended()
    }

    /// Why this node has no quorum, in words (for refusals and logs).
    pub(super) fn quorum_words(&self) -> String {
        let counts = self.quorum_counts();
        let left_out = if counts.outdated_left_out > 0 {
            format!(
                ", {} absent Outdated peers left out",
                counts.outdated_left_out
            )
        } else {
            String::new()
        };
        format!(
            "{} of {} nodes reachable and {} UpToDate copies{left_out} (quorum {:?}, \
             quorum-minimum-redundancy {:?})",
            counts.present,
            counts.voters,
            counts.copies,
            self.quorum.rule,
            self.quorum.minimum_redundancy
        )
    }

    /// Whether the peer in `slot` counts as present: connected and accepted by the
    /// handshake (a TCP connection alone proves nothing: the handshake may still find a split
    /// brain and drop it), and not a sync target of this node that may still be promoted.
    fn present(&self, slot: usize) -> bool {
        let p = &self.peers[slot];
        p.handshake_decided()
            && p.accepted.iter().all(|&accepted| accepted)
            && !self.resyncs_promotable_peer(slot)
    }

    /// Whether this node is (becoming) the sync source of the peer in `slot` on a volume the
    /// peer has not yet said is no longer UpToDate.
    ///
    /// Invariant: a peer that lacks what this node's resync will bring it lends no quorum
    /// while it could still be promoted. The target accepts the handshake while UpToDate and
    /// becomes Inconsistent only on the source's `SyncStart`, then says so (`State`; quorum is
    /// re-evaluated at the next tick). A Primary that counted it from `Accepted` on could
    /// regain quorum through it and acknowledge held writes whose blocks only the resync
    /// would carry; if the Primary then failed before the `SyncStart` arrived, the target
    /// stayed UpToDate without them and could be promoted with a third node (sim seed 3530).
    /// Until the target says it is not UpToDate, held writes wait (or fail under
    /// `on-no-quorum io-error`) as without the peer.
    fn resyncs_promotable_peer(&self, slot: usize) -> bool {
        let p = &self.peers[slot];
        p.syncs
            .iter()
            .zip(&p.unpromotable)
            .any(|(sync, &unpromotable)| {
                !unpromotable && matches!(sync, SyncState::StartingSource(_) | SyncState::Source(_))
            })
    }

    /// Quorum is lost: what this node knew of absent peers' Outdated disks may no longer hold
    /// (a departed peer may since have resynced from a node of the partition that has quorum
    /// now), so they count as unknown from here on. While quorum held, no other partition
    /// could make a departed peer UpToDate (its possible sources were either fed by this
    /// node, so a resync between Secondaries waited, or departed Outdated too).
    fn forget_departed(&mut self, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            if self.present(slot) {
                continue;
            }
            for disk in &mut self.peers[slot].disks {
                if leave::kept_after_loss(*disk).is_some() {
                    *disk = DiskState::DUnknown;
                }
            }
        }
        self.record_departures(out);
    }

    /// Whether the absent peer in `slot` is known unable to promote: fenced, or its last known
    /// disks all Outdated or Inconsistent (kept across the disconnect, `leave.rs`).
    pub(super) fn known_outdated(&self, slot: usize) -> bool {
        if let Some(disk) = self.fenced_disk(slot) {
            return leave::kept_after_loss(disk).is_some();
        }
        leave::kept_after_loss_all(&self.peers[slot].disks)
    }

    fn quorum_counts(&self) -> QuorumCounts {
        self.quorum_counts_of(|slot| self.present(slot))
    }

    /// The counts with exactly the peers in the slots `present` selects present.
    fn quorum_counts_of(&self, present: impl Fn(usize) -> bool) -> QuorumCounts {
        let present_slots: Vec<usize> = (0..self.peers.len())
            .filter(|&slot| present(slot))
            .collect();
        let absent = self.peers.len() - present_slots.len();
        let absent_outdated = (0..self.peers.len())
            .filter(|&slot| !present(slot) && self.known_outdated(slot))
            .count();
        let present = 1 + present_slots.len();
        let (voters, outdated_left_out) = if absent_outdated == absent {
            (present, absent)
        } else {
            (1 + self.peers.len(), 0)
        };
        let local = usize::from(self.volumes.iter().all(|v| v.disk == DiskState::UpToDate));
        let remote = present_slots
            .iter()
            .filter(|&&slot| {
                let disks = &self.peers[slot].disks;
                !disks.is_empty() && disks.iter().all(|d| *d == DiskState::UpToDate)
            })
            .count();
        QuorumCounts {
            present,
            voters,
            copies: local + remote,
            outdated_left_out,
        }
    }

    pub(super) fn compute_quorum(&self) -> bool {
        self.quorum_met(self.quorum_counts())
    }

    fn quorum_met(&self, counts: QuorumCounts) -> bool {
        self.quorum.rule.met(counts.present, counts.voters)
            && self
                .quorum
                .minimum_redundancy
                .met(counts.copies, counts.voters)
    }

    /// Neither `quorum` nor `quorum-minimum-redundancy` is set.
    fn quorum_rules_off(&self) -> bool {
        self.quorum.rule == QuorumRule::Off && self.quorum.minimum_redundancy == QuorumRule::Off
    }

    /// A promotion under a quorum rule counts only the peers that answered a ping it sent:
    /// the first call pings every present peer and returns [`StateError::ConfirmingPeers`]; a
    /// later call within the longest `ping-timeout` succeeds once the peers that answered make
    /// quorum, and one after that window starts over.
    ///
    /// Invariant: a node is promoted only with quorum of peers alive after the promotion was
    /// asked for. A link cut but not yet detected dead (ping-int may be seconds) must not lend
    /// its vote: the peer behind it may lend it to the old Primary instead, which then
    /// regains quorum and acknowledges writes the new Primary never gets (sim seed 16699).
    /// DRBD gets this from its cluster-wide two-phase state changes.
    pub(super) fn confirm_promotion_quorum(
        &mut self,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let present: Vec<usize> = (0..self.peers.len())
            .filter(|&slot| self.present(slot))
            .collect();
        if self.quorum_rules_off() || present.is_empty() {
            return Ok(());
        }
        let now = self.clock;
        let window = present
            .iter()
            .map(|&slot| self.peers[slot].config.ping_timeout)
            .max()
            .unwrap_or_default();
        if self
            .promotion_asked
            .is_some_and(|asked| now.since(asked) <= window)
        {
            if self.quorum_met(self.quorum_counts_of(|slot| {
                self.present(slot) && self.peers[slot].liveness.confirmed()
            })) {
                self.promotion_asked = None;
                return Ok(());
            }
            return Err(StateError::ConfirmingPeers);
        }
        self.promotion_asked = Some(now);
        for slot in present {
            self.peers[slot].liveness.ping_to_confirm();
            out.push(Action::SendControl {
                peer: self.peers[slot].config.node_id,
                message: PeerMessage::Ping,
            });
        }
        Err(StateError::ConfirmingPeers)
    }

    /// What decided handshakes settle: a Primary this Secondary follows takes its vote, and
    /// any decided handshake ends what an unclean stop left open (`unclean_unmet`: the
    /// bitmap rules, row 20, decided who has the writes a disk cache may have lost).
    fn note_decided_handshakes(&mut self) {
        if self.peers.iter().any(Peer::handshake_decided) {
            self.unclean_unmet = false;
        }
        if self.role == Role::Primary {
            return;
        }
        let followed = self
            .peers
            .iter()
            .find(|p| p.handshake_decided() && p.role == Role::Primary);
        if let Some(p) = followed {
            self.vote = Some(p.config.node_id);
        }
    }

    /// The Primary the vote went to gives it back once it is Secondary and its handshake
    /// with this node is decided and under way: a crashed Primary back on a generation of
    /// its own has then made this node its sync target (or met it as a split brain), so
    /// this node's identifiers say what an older Primary would have to overwrite.
    fn release_vote(&mut self) {
        let Some(slot) = self.vote.and_then(|node| self.peer_slot(node)) else {
            return;
        };
        let p = &self.peers[slot];
        let settled = p.connection == ConnState::Connected
            && p.role == Role::Secondary
            && p.accepted.iter().all(|&accepted| accepted)
            && p.syncs.iter().all(|s| {
                !matches!(
                    s,
                    SyncState::Off
                        | SyncState::WaitUuids { .. }
                        | SyncState::StartingSource(_)
                        | SyncState::StartingTarget(_)
                )
            });
        if settled {
            self.vote = None;
        }
    }

    /// The peer in `slot` says it is a Secondary fed by a Primary: if this node's vote went
    /// to it, it handed its role on to that Primary, which this node may follow too.
    pub(super) fn vote_handed_on(&mut self, slot: usize) {
        if self.vote == Some(self.peers[slot].config.node_id) {
            self.vote = None;
        }
    }

    /// Why this Secondary lends no vote to the peer in `slot`, which says it is Primary, if
    /// it does not: under a quorum rule, a peer that was already Primary when it reached this
    /// node (not promoted before its eyes) is refused while the vote went to another Primary
    /// since, not seen Secondary again.
    ///
    /// Invariant: a vote carries one Primary at a time. The other Primary was promoted with
    /// it, so this one lost quorum then (it is an old Primary cut off in a minority); lent
    /// to it now, the vote would let it complete held writes the newer Primary's lineage
    /// never gets, and the two partitions' quorums would overlap in this node (sim seed
    /// 10438: the newer Primary crashed before its first write reached this node, the old
    /// one regained quorum here, and a split brain kept neither side's writes whole). DRBD
    /// gets this from the new generation its promotion starts with a peer absent, agreed
    /// cluster-wide; here the refusal lasts until the Primary voted for is seen Secondary
    /// (it restarts, or is demoted) or this node is promoted, so it costs time, not data.
    pub(super) fn vote_taken(&self, slot: usize) -> Option<String> {
        let peer = &self.peers[slot];
        let promoted_before_our_eyes = peer.role == Role::Secondary;
        let voted = self.vote.filter(|&v| v != peer.config.node_id)?;
        if self.quorum_rules_off() || promoted_before_our_eyes {
            return None;
        }
        let voted_name = self
            .peers
            .iter()
            .find(|p| p.config.node_id == voted)
            .map_or_else(|| format!("node{voted}"), |p| p.config.name.clone());
        Some(format!(
            "{} was Primary before it reached this node, whose quorum vote went to {voted_name}'s \
             promotion since: it lends none to another Primary until {voted_name} is seen \
             Secondary",
            peer.config.name
        ))
    }

    /// Re-evaluates quorum; on a change, reports it and retries what waited for it.
    pub(super) fn update_quorum(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        self.release_vote();
        self.note_decided_handshakes();
        let held = self.compute_quorum();
        if held == self.quorum_held {
            return;
        }
        if !held {
            self.forget_departed(out);
        }
        self.quorum_held = held;
        out.push(Action::StateChanged);
        if held {
            self.rotate_when_quorum_returns(out);
            self.retry_after_quorum(now, out);
        } else if self.quorum.on_loss == OnNoQuorum::IoError {
            // Writes that only waited for completion fail now rather than later.
            self.retry_after_quorum(now, out);
        }
    }

    /// `secondary --force` (DRBD's way out for a Primary whose I/O is suspended, for want of
    /// quorum or by fencing): every write and flush held or still in flight fails with EIO
    /// (none of them may be acknowledged: the other partition may have promoted without
    /// them), and so does every later completion of this role; then the node becomes
    /// Secondary even while the export is open (the clients' next writes are refused as on
    /// any Secondary). A node that is not Primary just demotes as usual.
    pub fn demote_forced(&mut self, now: Time, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        if self.role != Role::Primary {
            return self.demote(out);
        }
        self.failing_pending = true;
        for waiting in std::mem::take(&mut self.waiting) {
            out.push(Action::Complete {
                request: waiting.request,
                result: Err(IoError::Io),
            });
        }
        let open = std::mem::replace(&mut self.open_count, 0);
        let demoted = self.demote(out);
        self.open_count = open;
        demoted?;
        self.retry_after_quorum(now, out);
        Ok(())
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
    pub(super) fn quorum_verdict(
        &self,
        result: Result<(), IoError>,
    ) -> Option<Result<(), IoError>> {
        if self.failing_pending {
            // `secondary --force`: nothing held may still be acknowledged.
            return Some(Err(IoError::Io));
        }
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

    /// Whether a new write must wait before it starts: quorum's suspend-io, fencing's
    /// freeze or the administrator's `suspend-io`.
    pub(super) fn new_writes_wait(&self) -> bool {
        self.quorum_blocks_new_writes() || self.fencing_freezes() || self.user_suspended()
    }

    /// Whether a new write is refused at once for lack of quorum (io-error).
    pub(super) fn quorum_refuses_new_writes(&self) -> bool {
        !self.quorum_held && self.quorum.on_loss == OnNoQuorum::IoError
    }
}
