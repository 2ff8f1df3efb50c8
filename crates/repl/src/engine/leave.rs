//! Graceful departure (drbd-semantics.md §6, "gracefully departed peers count as
//! Outdated"): a Secondary that the administrator disconnects from a Primary (`disconnect`,
//! `down`) knows it is about to miss writes, so it outdates its own disks and tells the
//! Primary so before it goes. The Primary then knows the departed peer cannot be promoted,
//! and quorum no longer needs it (`quorum.rs`): a lone Primary whose every absent peer left
//! this way keeps quorum (DRBD's "last man standing").
//!
//! The departure happens only where it matters, as in DRBD: the connection is established,
//! this node is Secondary and the peer Primary, and the resource uses quorum or the
//! connection uses fencing. Otherwise a disconnect changes no disk state.
//!
//! Sequence on the departing Secondary:
//! 1. every UpToDate or Consistent disk becomes Outdated and its metadata is written; the
//!    connection is `Disconnecting` (nothing more is taken from the peer);
//! 2. once every one of those metadata writes is durable, the new disk states go to the
//!    Primary on the control socket, then the goodbye (the driver sends it after everything
//!    queued before); the connection is StandAlone (Connecting if `connect` was asked for
//!    meanwhile: a disconnect and connect in quick succession still outdates this node,
//!    which the next handshake resyncs).
//!
//! What a node knows of departed peers survives its restart (DRBD's `MDF_PEER_OUTDATED`):
//! each volume's metadata records the absent peers last known Outdated
//! ([`crate::VolumeMeta::departed`], the superblock's per-peer `outdated` flag), written when
//! that set changes (a disconnect, quorum lost, a connect), and a restarted node starts with
//! those peers' disks Outdated, so a lone node whose peers all departed has quorum again.
//!
//! Invariants:
//! - A peer recorded as departed is unrecorded durably before this node's handshake with it
//!   goes out ([`Engine::send_held_handshakes`]): only that handshake can make the peer
//!   UpToDate through this node (by a resync or by finding nothing to resync), so the record
//!   on disk never claims Outdated for a peer that may since have become UpToDate through us.
//! - The Primary hears "Outdated" only after that state is durable here: a power loss during
//!   the departure brings this node back Outdated, or back UpToDate with the Primary never
//!   having counted it as Outdated. So a node the Primary left out of its quorum can never
//!   come back believing it is UpToDate.
//! - A metadata write that fails (the disk is Failed then) or does not finish within
//!   [`LEAVE_PERSIST_MAX`] still ends the departure, without the announcement: the Primary
//!   then sees an unknown peer, which is stricter, never weaker.
//! - A peer's last known disk state survives the disconnect only when it is Outdated or
//!   Inconsistent (`kept_after_loss`): states that cannot promote, and that the peer leaves
//!   only by reconnecting. Everything else becomes DUnknown, and so does the disk of a peer
//!   that was this node's sync target: it may hold every block already and finish the
//!   resync on its own side after the link is gone.

use super::*;
use crate::types::UuidsMessage;

/// A departure waits at most this long for its metadata write.
pub const LEAVE_PERSIST_MAX: Duration = Duration::from_secs(10);

/// Why the administrator's departure drops the connection.
const LEAVE_REASON: &str = "disconnected by the administrator";

/// A departure from a Primary waiting for this node's Outdated disks to be durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Leaving {
    /// Per volume slot changed, the metadata version that records the Outdated disk.
    versions: Vec<(usize, u64)>,
    /// When the departure started.
    since: Time,
    /// `connect` was asked for meanwhile: the connection is retried once the departure is
    /// done (Connecting) rather than left StandAlone.
    pub(super) reconnect: bool,
}

/// A handshake held until the metadata no longer records the peer as departed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HeldHandshake {
    /// The peer's handshake, if it came meanwhile: answered once ours is sent.
    pub(super) theirs: Option<Box<UuidsMessage>>,
}

/// The disk state of a peer that is kept when its connection ends (see the module
/// invariants); None: it becomes DUnknown.
pub(super) fn kept_after_loss(disk: DiskState) -> Option<DiskState> {
    matches!(disk, DiskState::Outdated | DiskState::Inconsistent).then_some(disk)
}

/// Whether every one of a peer's last known disks is one that is kept across a disconnect
/// (so the peer cannot be promoted without reconnecting first).
pub(super) fn kept_after_loss_all(disks: &[DiskState]) -> bool {
    !disks.is_empty() && disks.iter().all(|d| kept_after_loss(*d).is_some())
}

impl<P: Clone> Engine<P> {
    /// Whether an administrative disconnect from the peer in `slot` is a departure that
    /// outdates this node (see the module documentation).
    pub(super) fn departure_outdates(&self, slot: usize) -> bool {
        let p = &self.peers[slot];
        p.connection == ConnState::Connected
            && self.role == Role::Secondary
            && p.role == Role::Primary
            && (self.quorum.rule != QuorumRule::Off || p.fence_policy != FencePolicy::DontCare)
    }

    /// Starts the departure from the peer in `slot`: outdates this node's disks and waits
    /// for their metadata (step 1 of the module's sequence).
    pub(super) fn begin_leaving(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        let mut versions = Vec::new();
        for vslot in 0..self.volumes.len() {
            if matches!(
                self.volumes[vslot].disk,
                DiskState::UpToDate | DiskState::Consistent
            ) {
                self.volumes[vslot].disk = DiskState::Outdated;
                versions.push((vslot, self.meta_changed(vslot, out)));
            }
        }
        let peer = &mut self.peers[slot];
        peer.connection = ConnState::Disconnecting;
        peer.leaving = Some(Leaving {
            versions,
            since: now,
            reconnect: false,
        });
        out.push(Action::StateChanged);
        self.finish_leaving(now, out);
    }

    /// Ends every departure whose metadata is durable (or failed, or timed out): step 2 of
    /// the module's sequence. Called after each metadata write and on every tick.
    pub(super) fn finish_leaving(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        for slot in 0..self.peers.len() {
            let Some(leaving) = self.peers[slot].leaving.clone() else {
                continue;
            };
            let durable = leaving
                .versions
                .iter()
                .all(|&(vslot, version)| self.is_persisted(vslot, version));
            let timed_out = now.since(leaving.since) >= LEAVE_PERSIST_MAX;
            if !durable && !timed_out {
                continue;
            }
            let failed = leaving
                .versions
                .iter()
                .any(|&(vslot, _)| self.volumes[vslot].meta.failed);
            let peer = self.peers[slot].config.node_id;
            if durable && !failed {
                let message = PeerMessage::State {
                    role: self.role,
                    disks: self.disk_list(),
                };
                out.push(Action::SendControl { peer, message });
            }
            self.peers[slot].leaving = None;
            let reason = LEAVE_REASON.to_string();
            out.push(Action::Disconnect {
                peer,
                state: ConnState::StandAlone,
                reason: reason.clone().into(),
            });
            self.peer_disconnected(now, peer, ConnState::StandAlone, reason, out);
            let p = &mut self.peers[slot];
            p.connection = if leaving.reconnect {
                ConnState::Connecting
            } else {
                ConnState::StandAlone
            };
            p.last_error = None;
            out.push(Action::StateChanged);
        }
        if self.peers.iter().all(|p| p.leaving.is_none()) {
            // The other connected peers hear the Outdated disks too, now that they are durable.
            self.announce_disks(out);
        }
    }

    /// Whether a departure waits for its metadata (disk announcements wait with it).
    pub(super) fn leaving_pending(&self) -> bool {
        self.peers.iter().any(|p| p.leaving.is_some())
    }

    /// The peers volume `vslot`'s metadata records as departed ([`crate::VolumeMeta::departed`]):
    /// absent and last known Outdated. (An absent peer last known Inconsistent is not
    /// recorded, as in DRBD: after a restart it is unknown, which is stricter.)
    pub(super) fn departed(&self, vslot: usize) -> NodeSet {
        self.peers
            .iter()
            .filter(|p| {
                p.connection != ConnState::Connected
                    && p.disks.get(vslot) == Some(&DiskState::Outdated)
            })
            .fold(NodeSet::EMPTY, |set, p| set.with(p.node))
    }

    /// Writes the metadata of every volume whose departed peers changed since its last write.
    pub(super) fn record_departures(&mut self, out: &mut Vec<Action<P>>) {
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk != DiskState::Diskless
                && self.departed(vslot) != self.volumes[vslot].meta.departed_issued
            {
                self.meta_changed(vslot, out);
            }
        }
    }

    /// Whether our handshake for `vslot` with the connected peer in `slot` must wait: the
    /// durable metadata still records the peer as departed (see the module invariants).
    /// Marks it held; [`Engine::send_held_handshakes`] sends it.
    pub(super) fn hold_handshake(&mut self, slot: usize, vslot: usize) -> bool {
        let node = self.peers[slot].node;
        if !self.volumes[vslot].meta.departed_durable.contains(node)
            || self.volumes[vslot].disk == DiskState::Diskless
        {
            return false;
        }
        let held = &mut self.peers[slot].handshake_held[vslot];
        if held.is_none() {
            *held = Some(HeldHandshake::default());
        }
        self.peers[slot].syncs[vslot] = SyncState::Off;
        true
    }

    /// A metadata write of `vslot` finished: the handshakes it held go out, and the peers'
    /// handshakes that came meanwhile are answered.
    pub(super) fn send_held_handshakes(
        &mut self,
        now: Time,
        vslot: usize,
        out: &mut Vec<Action<P>>,
    ) {
        for slot in 0..self.peers.len() {
            let node = self.peers[slot].node;
            if self.volumes[vslot].meta.departed_durable.contains(node)
                || self.peers[slot].connection != ConnState::Connected
            {
                continue;
            }
            let Some(held) = self.peers[slot].handshake_held[vslot].take() else {
                continue;
            };
            self.send_handshake(slot, vslot, out);
            if let Some(theirs) = held.theirs {
                if let Err(reason) = self.receive_uuids(now, slot, *theirs, out) {
                    self.drop_peer(now, slot, ConnState::ProtocolError, reason, out);
                }
            }
        }
    }

    /// Whether a graceful departure is still under way (a stopping daemon waits for it).
    pub fn departing(&self) -> bool {
        self.leaving_pending()
    }
}
