//! Fencing (drbd-semantics.md §1, `fencing`; DRBD's `fence-peer` handler): a Primary that
//! loses a peer whose disk was UpToDate makes sure that peer cannot be promoted with data
//! older than its own before it goes on as if alone.
//!
//! The engine decides; the driver runs the handler. [`Action::FencePeer`] asks for one run of
//! `fence-peer` against a peer, and [`Engine::fence_peer_done`] brings back its exit status:
//!
//! | status | meaning (DRBD's) | peer-disk afterwards |
//! |---|---|---|
//! | 3 | the peer is Inconsistent already | Inconsistent |
//! | 4 | the peer was outdated | Outdated |
//! | 5 | the peer is unreachable (taken as down) | Outdated |
//! | 7 | the peer was STONITHed | Outdated |
//! | 6 | the peer is Primary itself | (failure; a Secondary outdates its own disk) |
//! | any other, a timeout, a signal | failure | DUnknown |
//!
//! - `resource-only`: the handler runs; I/O goes on meanwhile.
//! - `resource-and-stonith`: from the moment the peer is lost, new writes wait and writes
//!   otherwise done are not completed (`suspended:fencing`) until the handler succeeds or the
//!   administrator runs `resume-io`; a failure keeps them frozen.
//! - Promotion of a node with a peer that is neither connected nor fenced runs the handler
//!   first and is refused until it succeeded (`--force` promotes anyway, as DRBD does).
//!
//! Status 6 is a failure. A Secondary (asking before a promotion) then outdates its own
//! UpToDate disks, as DRBD does: the peer is active, so this node's data is about to fall
//! behind, and a later promotion needs `--force`. A Primary cannot outdate its own disk
//! (DRBD refuses that state change too): its I/O stays frozen (resource-and-stonith).
//! A peer that comes back before the handler answered lifts its freeze at once (the
//! handshake decides about its data, as for any reconnect); the late answer is ignored.
//!
//! Invariants:
//! - At most one `fence-peer` run per peer at a time: a peer in [`FenceState::Running`] is
//!   never asked for again until its answer arrived.
//! - While any peer's fencing freezes I/O, no client write or flush of this Primary completes
//!   successfully and no new one starts (the same holding point as quorum's suspend-io), so
//!   a write the lost peer lacks is acknowledged only once the peer cannot be promoted.

use serde::{Deserialize, Serialize};

use super::*;

/// `fencing` of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FencePolicy {
    /// No fencing (`dont-care`, DRBD's default).
    #[default]
    DontCare,
    /// Run `fence-peer`; I/O goes on meanwhile.
    ResourceOnly,
    /// Freeze I/O and run `fence-peer`; resume on success or `resume-io`.
    ResourceAndStonith,
}

impl std::fmt::Display for FencePolicy {
    /// DRBD's word for the policy.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FencePolicy::DontCare => "dont-care",
            FencePolicy::ResourceOnly => "resource-only",
            FencePolicy::ResourceAndStonith => "resource-and-stonith",
        })
    }
}

/// Where fencing of one peer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum FenceState {
    /// Nothing known or needed (connected, or never lost while Primary).
    #[default]
    Idle,
    /// `fence-peer` runs for the peer. `freezes`: it holds I/O (resource-and-stonith, not
    /// yet resumed by the administrator); `peer_back`: the peer reconnected meanwhile, so
    /// the answer no longer matters.
    Running { freezes: bool, peer_back: bool },
    /// The handler made sure the peer cannot be promoted; it shows this disk state while it
    /// is away.
    Fenced(DiskState),
    /// The handler failed with `status`; `freezes`: I/O is held until `resume-io`.
    Failed { status: i32, freezes: bool },
}

impl FenceState {
    fn freezes(self) -> bool {
        matches!(
            self,
            FenceState::Running { freezes: true, .. } | FenceState::Failed { freezes: true, .. }
        )
    }
}

/// `fence-peer`'s exit status for "the peer is Primary": a Secondary outdates itself.
pub const FENCE_PEER_IS_PRIMARY: i32 = 6;

/// What a `fence-peer` exit status says about the peer: the disk state it is known to have
/// now, or None for a failure.
pub fn fence_outcome(status: i32) -> Option<DiskState> {
    match status {
        3 => Some(DiskState::Inconsistent),
        4 | 5 | 7 => Some(DiskState::Outdated),
        _ => None,
    }
}

impl<P: Clone> Engine<P> {
    /// Sets the `fencing` policy of the connection to `peer` (at start and by `adjust`).
    pub fn set_fencing(
        &mut self,
        now: Time,
        peer: u8,
        policy: FencePolicy,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        let was_frozen = self.fencing_freezes();
        self.peers[slot].fence_policy = policy;
        if was_frozen && !self.fencing_freezes() {
            out.push(Action::StateChanged);
            self.retry_after_quorum(now, out);
        }
        Ok(())
    }

    /// The `fencing` policy of the connection to `peer`.
    pub fn fence_policy(&self, peer: u8) -> Option<FencePolicy> {
        self.peer_slot(peer)
            .map(|slot| self.peers[slot].fence_policy)
    }

    /// Whether fencing holds client I/O now (`suspended:fencing`).
    pub fn fencing_freezes(&self) -> bool {
        self.role == Role::Primary
            && self
                .peers
                .iter()
                .any(|p| p.fence.freezes() && p.fence_policy == FencePolicy::ResourceAndStonith)
    }

    /// Whether a `fence-peer` run for `peer` is awaited.
    pub fn fencing_running(&self, peer: u8) -> bool {
        self.peer_slot(peer)
            .is_some_and(|slot| matches!(self.peers[slot].fence, FenceState::Running { .. }))
    }

    /// Why client I/O is suspended, DRBD's words (`fencing`, `quorum`); empty: it is not.
    pub fn suspend_reasons(&self) -> Vec<&'static str> {
        let mut reasons = Vec::new();
        if self.user_suspended() {
            reasons.push("user");
        }
        if self.fencing_freezes() {
            reasons.push("fencing");
        }
        if self.role == Role::Primary && self.quorum_blocks_new_writes() {
            reasons.push("quorum");
        }
        reasons
    }

    /// The `fence-peer` run for `peer` ended with `status` (its exit code, 128 + a signal,
    /// or negative when it could not run or was killed after its timeout).
    pub fn fence_peer_done(&mut self, now: Time, peer: u8, status: i32, out: &mut Vec<Action<P>>) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let FenceState::Running { freezes, peer_back } = self.peers[slot].fence else {
            return;
        };
        self.peers[slot].fence = match (peer_back, fence_outcome(status)) {
            (true, _) => FenceState::Idle,
            (false, Some(disk)) => FenceState::Fenced(disk),
            (false, None) => FenceState::Failed { status, freezes },
        };
        if !peer_back && status == FENCE_PEER_IS_PRIMARY && self.role != Role::Primary {
            self.outdate_self(now, out);
        }
        out.push(Action::StateChanged);
        self.retry_after_unfreeze(now, out);
    }

    /// `fence-peer` said the peer is Primary: every UpToDate disk of this Secondary becomes
    /// Outdated (durably, and announced to the peers still connected).
    fn outdate_self(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk == DiskState::UpToDate {
                self.volumes[vslot].disk = DiskState::Outdated;
                self.meta_changed(vslot, out);
            }
        }
        self.announce_disks(out);
        self.update_quorum(now, out);
    }

    /// `resume-io`: client I/O held by `suspend-io` or by fencing goes on (the peers stay
    /// unfenced).
    pub fn resume_io(&mut self, now: Time, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        if !self.fencing_freezes() && !self.user_suspended() {
            return Err(StateError::NotSuspended);
        }
        self.resume_user_io(now, out);
        self.unfreeze(now, out);
        Ok(())
    }

    /// Lifts every peer's freeze (their handler runs go on).
    fn unfreeze(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        let was_frozen = self.fencing_freezes();
        for peer in &mut self.peers {
            peer.fence = match peer.fence {
                FenceState::Running { peer_back, .. } => FenceState::Running {
                    freezes: false,
                    peer_back,
                },
                FenceState::Failed { status, .. } => FenceState::Failed {
                    status,
                    freezes: false,
                },
                state => state,
            };
        }
        if was_frozen {
            out.push(Action::StateChanged);
            self.retry_after_unfreeze(now, out);
        }
    }

    fn retry_after_unfreeze(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        if !self.fencing_freezes() {
            self.retry_after_quorum(now, out);
        }
    }

    /// A Primary lost the peer in `slot`, whose disk was UpToDate (`up_to_date`): fence it.
    /// Called before anything completes for want of the peer.
    pub(super) fn fence_on_loss(
        &mut self,
        slot: usize,
        up_to_date: bool,
        out: &mut Vec<Action<P>>,
    ) {
        let policy = self.peers[slot].fence_policy;
        if self.role != Role::Primary || policy == FencePolicy::DontCare || !up_to_date {
            return;
        }
        let freezes = policy == FencePolicy::ResourceAndStonith;
        self.start_fencing(slot, freezes, out);
    }

    fn start_fencing(&mut self, slot: usize, freezes: bool, out: &mut Vec<Action<P>>) {
        let peer = self.peers[slot].config.node_id;
        match self.peers[slot].fence {
            // One run per peer: the one under way answers for this loss too.
            FenceState::Running { freezes: was, .. } => {
                self.peers[slot].fence = FenceState::Running {
                    freezes: was || freezes,
                    peer_back: false,
                };
            }
            FenceState::Idle | FenceState::Fenced(_) | FenceState::Failed { .. } => {
                self.peers[slot].fence = FenceState::Running {
                    freezes,
                    peer_back: false,
                };
                out.push(Action::FencePeer { peer });
            }
        }
        out.push(Action::StateChanged);
    }

    /// The peer in `slot` connected: whatever fencing said about it is past; its freeze
    /// lifts (a run under way finishes, its answer ignored).
    pub(super) fn fence_on_connect(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        let was_frozen = self.fencing_freezes();
        let fence = &mut self.peers[slot].fence;
        *fence = match *fence {
            FenceState::Running { .. } => FenceState::Running {
                freezes: false,
                peer_back: true,
            },
            _ => FenceState::Idle,
        };
        if was_frozen {
            out.push(Action::StateChanged);
            self.retry_after_unfreeze(now, out);
        }
    }

    /// The node became Secondary: a failed fence of a lost peer mattered only for the
    /// Primary's frozen I/O, so the next promotion asks the handler again.
    pub(super) fn fence_on_demote(&mut self) {
        for peer in &mut self.peers {
            if let FenceState::Failed { .. } = peer.fence {
                peer.fence = FenceState::Idle;
            }
        }
    }

    /// The disk state status shows for an away peer that fencing settled.
    pub(super) fn fenced_disk(&self, slot: usize) -> Option<DiskState> {
        match self.peers[slot].fence {
            FenceState::Fenced(disk) if self.peers[slot].connection != ConnState::Connected => {
                Some(disk)
            }
            _ => None,
        }
    }

    /// Before a promotion: every peer with fencing that is neither connected nor fenced must
    /// be fenced first. Starts `fence-peer` for those not yet asked (the caller retries once
    /// it answered); a failed answer is reported once, and the next attempt asks again.
    /// `force` skips all of this (DRBD's `primary --force` risks the split brain).
    pub(super) fn fence_before_promotion(
        &mut self,
        force: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        if force || self.role == Role::Primary {
            return Ok(());
        }
        let mut pending = None;
        for slot in 0..self.peers.len() {
            let p = &self.peers[slot];
            if p.fence_policy == FencePolicy::DontCare || p.connection == ConnState::Connected {
                continue;
            }
            if leave::kept_after_loss_all(&p.disks) {
                // Known Outdated (it departed gracefully): nothing to fence.
                continue;
            }
            match p.fence {
                FenceState::Fenced(_) => {}
                FenceState::Running { .. } => pending = Some(p.config.name.clone()),
                FenceState::Failed { status, .. } => {
                    let peer = p.config.name.clone();
                    self.peers[slot].fence = FenceState::Idle;
                    return Err(StateError::PeerNotFenced { peer, status });
                }
                FenceState::Idle => {
                    pending = Some(p.config.name.clone());
                    self.start_fencing(slot, false, out);
                }
            }
        }
        match pending {
            Some(peer) => Err(StateError::FencingPeer { peer }),
            None => Ok(()),
        }
    }
}
