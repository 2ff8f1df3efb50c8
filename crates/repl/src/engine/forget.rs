//! `forget-peer` (drbdadm's verb): this node drops what it knows about a peer that is not
//! connected. In DRBD it frees the peer's bitmap slot, so that a later connect which would
//! resync by bitmap becomes a full sync; tandem keeps the slot (it is the configured peer's)
//! and marks every block out of sync for it instead, which has the same effect, and forgets
//! the peer's last known disk state (a departed peer counts as unknown again, for quorum too).
//!
//! Invariants:
//! - Refused while the peer is connected ([`StateError::ForgetConnected`]): a connected
//!   peer's bitmap and states are live.
//! - The all-set bitmap and the forgotten departure reach the metadata with the next write
//!   (issued here), so a restart does not bring the old knowledge back.

use super::*;

impl<P: Clone> Engine<P> {
    /// Forgets `peer` (see the module invariants).
    pub fn forget_peer(
        &mut self,
        now: Time,
        peer: u8,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        if self.peers[slot].connection == ConnState::Connected {
            return Err(StateError::ForgetConnected {
                peer: self.peers[slot].config.name.clone(),
            });
        }
        for vslot in 0..self.volumes.len() {
            self.peers[slot].bitmaps[vslot].set_all();
            if let Some(disk) = self.peers[slot].disks.get_mut(vslot) {
                *disk = DiskState::DUnknown;
            }
            self.meta_changed(vslot, out);
        }
        self.update_quorum(now, out);
        Ok(())
    }
}
