//! `outdate` (drbdadm's verb): a Secondary that is not connected to any peer marks its
//! consistent data Outdated, durably, so that it is not promoted (without `--force`) before a
//! resync from an UpToDate peer. Fence scripts run it on the node they fence.
//!
//! Invariants:
//! - Never on a Primary ([`StateError::IsPrimary`]): a Primary's data is the newest there is.
//! - Never while connected to a peer ([`StateError::OutdateWhileConnected`]): connected, the
//!   disk states follow from the handshake with that peer, and DRBD refuses the same.
//! - Only consistent data (UpToDate, Consistent) becomes Outdated; an Outdated disk stays so
//!   (the verb is idempotent); Inconsistent or Diskless volumes are refused before anything
//!   changes ([`StateError::NotConsistent`]).
//! - The change is in the volume's metadata (`was_up_to_date` cleared), written before the
//!   next metadata version is durable, so it survives a restart.

use super::*;

impl<P: Clone> Engine<P> {
    /// Marks every volume's consistent data Outdated (see the module invariants).
    pub fn outdate(&mut self, now: Time, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        if self.role == Role::Primary {
            return Err(StateError::IsPrimary);
        }
        if let Some(peer) = self
            .peers
            .iter()
            .find(|p| p.connection == ConnState::Connected)
        {
            return Err(StateError::OutdateWhileConnected {
                peer: peer.config.name.clone(),
            });
        }
        let outdatable = |disk: DiskState| {
            matches!(
                disk,
                DiskState::UpToDate | DiskState::Consistent | DiskState::Outdated
            )
        };
        if let Some(volume) = self.volumes.iter().find(|v| !outdatable(v.disk)) {
            return Err(StateError::NotConsistent(volume.disk));
        }
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk != DiskState::Outdated {
                self.volumes[vslot].disk = DiskState::Outdated;
                self.meta_changed(vslot, out);
            }
        }
        self.update_quorum(now, out);
        Ok(())
    }
}
