//! Paused resyncs (DRBD's PausedSyncS / PausedSyncT): a resync with a peer may be suspended
//! for three reasons, shown as `resync-suspended:user,peer,dependency`:
//! - **user**: `tandem pause-sync` on this node, until `resume-sync`;
//! - **dependency**: `resync-after` names another volume whose resync has not finished (the
//!   driver works that out across resources and calls [`Engine::set_sync_dependency`]);
//! - **peer**: the peer's resync of the volume is paused for one of the two reasons above
//!   (it told us with `SyncPause`).
//!
//! Invariants:
//! - While a resync is suspended for any reason the sync target issues no new requests; the
//!   requests already sent are answered and written as usual, so nothing in flight is lost
//!   and the bitmap stays exact. Resuming refills the window at once.
//! - The peer always knows our own (user or dependency) pause state while connected: it is
//!   sent at connect when set, and whenever it changes. The peer's reason is forgotten on
//!   disconnect; ours are kept (an administrator's pause outlives a reconnect).

use serde::{Deserialize, Serialize};

use super::*;

/// Why a resync with one peer is suspended (all false: it runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncPause {
    /// `pause-sync` on this node.
    pub user: bool,
    /// The peer paused its side.
    pub peer: bool,
    /// `resync-after`: a volume this one must wait for is still resyncing.
    pub dependency: bool,
}

impl SyncPause {
    /// Whether any reason holds.
    pub fn any(self) -> bool {
        self.user || self.peer || self.dependency
    }

    /// DRBD's `resync-suspended:` value: `no`, or the reasons joined by commas.
    pub fn describe(self) -> String {
        let reasons: Vec<&str> = [
            (self.user, "user"),
            (self.peer, "peer"),
            (self.dependency, "dependency"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect();
        if reasons.is_empty() {
            "no".to_owned()
        } else {
            reasons.join(",")
        }
    }
}

impl<P: Clone> Engine<P> {
    /// `pause-sync` (`paused`) or `resume-sync` towards `peer` (every peer when None), for every
    /// volume. Idempotent; takes effect on a running resync and on any later one.
    pub fn pause_sync(
        &mut self,
        now: Time,
        peer: Option<u8>,
        paused: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slots: Vec<usize> = match peer {
            Some(node) => vec![self.peer_slot(node).ok_or(StateError::NoSuchPeer(node))?],
            None => (0..self.peers.len()).collect(),
        };
        for slot in slots {
            for vslot in 0..self.volumes.len() {
                let before = self.own_pause(slot, vslot);
                self.peers[slot].user_paused[vslot] = paused;
                self.own_pause_changed(now, slot, vslot, before, out);
            }
        }
        out.push(Action::StateChanged);
        Ok(())
    }

    /// `resync-after`: the volume's resync must wait (`paused`) or may run. The driver calls
    /// this whenever the volume it depends on starts or finishes a resync.
    pub fn set_sync_dependency(
        &mut self,
        now: Time,
        volume: u16,
        paused: bool,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        if self.volumes[vslot].after_dependency == paused {
            return;
        }
        let before: Vec<bool> = (0..self.peers.len())
            .map(|slot| self.own_pause(slot, vslot))
            .collect();
        self.volumes[vslot].after_dependency = paused;
        for (slot, before) in before.into_iter().enumerate() {
            self.own_pause_changed(now, slot, vslot, before, out);
        }
        out.push(Action::StateChanged);
    }

    /// Whether any volume has a handshake or resync with a peer that has not finished
    /// (WFBitMap*, Sync*, PausedSync*): what `resync-after` on another volume waits for.
    pub fn resync_running(&self, volume: u16) -> bool {
        let Some(vslot) = self.volume_slot(volume) else {
            return false;
        };
        self.peers.iter().any(|p| {
            matches!(
                p.syncs[vslot],
                SyncState::StartingSource(_)
                    | SyncState::StartingTarget(_)
                    | SyncState::Source(_)
                    | SyncState::Target(_)
            )
        })
    }

    /// Why the resync of `vslot` with the peer in `slot` is suspended.
    pub(super) fn sync_pause(&self, slot: usize, vslot: usize) -> SyncPause {
        let p = &self.peers[slot];
        SyncPause {
            user: p.user_paused[vslot],
            peer: p.peer_paused[vslot],
            dependency: self.volumes[vslot].after_dependency,
        }
    }

    /// The peer paused or resumed its side of a volume's resync.
    pub(super) fn receive_sync_pause(
        &mut self,
        now: Time,
        slot: usize,
        volume: u16,
        paused: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::SyncPauseUnknownVolume { volume })?;
        if self.peers[slot].peer_paused[vslot] != paused {
            self.peers[slot].peer_paused[vslot] = paused;
            out.push(Action::StateChanged);
            if !paused {
                self.issue_requests(now, slot, vslot, out);
            }
        }
        Ok(())
    }

    /// At connect: tell the peer about our pauses that are set.
    pub(super) fn announce_pauses(&self, slot: usize, out: &mut Vec<Action<P>>) {
        let peer = self.peers[slot].config.node_id;
        for vslot in 0..self.volumes.len() {
            if self.own_pause(slot, vslot) {
                let message = PeerMessage::SyncPause {
                    volume: self.volumes[vslot].number,
                    paused: true,
                };
                out.push(Action::SendOnData { peer, message });
            }
        }
    }

    /// Our own reasons (user or dependency) for `vslot` with the peer in `slot`.
    fn own_pause(&self, slot: usize, vslot: usize) -> bool {
        self.peers[slot].user_paused[vslot] || self.volumes[vslot].after_dependency
    }

    /// Tells a connected peer when our own pause state changed, and refills a resumed target.
    fn own_pause_changed(
        &mut self,
        now: Time,
        slot: usize,
        vslot: usize,
        before: bool,
        out: &mut Vec<Action<P>>,
    ) {
        let after = self.own_pause(slot, vslot);
        if after == before || self.peers[slot].connection != ConnState::Connected {
            return;
        }
        let peer = self.peers[slot].config.node_id;
        let message = PeerMessage::SyncPause {
            volume: self.volumes[vslot].number,
            paused: after,
        };
        out.push(Action::SendOnData { peer, message });
        if !after {
            self.issue_requests(now, slot, vslot, out);
        }
    }
}
