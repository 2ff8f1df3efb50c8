//! Disk failure and detach (drbd-semantics.md §2 disk states; DRBD's `on-io-error` and
//! `drbdadm detach`): a volume whose backing disk failed (or was detached by the
//! administrator) becomes Diskless and goes on through its peers.
//!
//! - `on-io-error pass_on`: a local I/O error is passed up to the client (EIO); the disk stays
//!   attached (the engine's behaviour before the policy is set, see [`OnIoError`]).
//! - `detach` (DRBD's default): the volume becomes Diskless at the first local data error;
//!   `call-local-io-error`: the same, and the driver runs the `local-io-error` handler
//!   ([`Action::Detached`]).
//!
//! Invariants:
//! - A write of a Diskless volume completes successfully only once every peer it was sent to
//!   settled it and at least one of them wrote it (its `WriteAck`); otherwise it fails with
//!   EIO. Nothing is acknowledged that is on no disk. This holds for the write whose local
//!   failure caused the detach too: it was sent to the peers with the local write.
//! - A Diskless volume issues no local data I/O (writes, flushes); its peers learn the state at
//!   once and mark what they apply for it (`mark_for_absent_peers`), so it is never a sync
//!   source; the driver serves its reads from an UpToDate peer.
//! - An administrator's detach of a Primary is refused unless an UpToDate peer is connected
//!   (DRBD refuses too): the export would have no data left.

use serde::{Deserialize, Serialize};

use super::*;

/// What a local data I/O error does (`on-io-error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnIoError {
    /// Pass the error up to the client; stay attached. The engine's default, so drivers and
    /// tests that never set a policy see every error; the daemon sets the configured one
    /// (DRBD's default, `detach`).
    #[default]
    PassOn,
    /// Detach: go Diskless and serve through the peers.
    Detach,
    /// Run the `local-io-error` handler, then detach.
    CallLocalIoError,
}

impl<P: Clone> Engine<P> {
    /// Sets the `on-io-error` policy (at start and by `adjust`).
    pub fn set_on_io_error(&mut self, policy: OnIoError) {
        self.on_io_error = policy;
    }

    /// Whether volume `volume` has no disk (never had one, failed, or detached).
    pub fn is_diskless(&self, volume: u16) -> bool {
        self.volume_slot(volume).is_some_and(|vslot| self.volumes[vslot].disk == DiskState::Diskless)
    }

    /// A local data read of `volume` failed (the driver serves client reads itself): under a
    /// detaching policy the volume is detached. Returns whether the volume is Diskless now
    /// (then the driver fetches the data from a peer instead of failing the read).
    pub fn local_read_failed(&mut self, now: Time, volume: u16, out: &mut Vec<Action<P>>) -> bool {
        let Some(vslot) = self.volume_slot(volume) else { return false };
        self.local_io_failed(now, vslot, out)
    }

    /// A connected peer with UpToDate data for `volume` (where a Diskless volume's reads go),
    /// if any; the lowest node id, so the choice is stable.
    pub fn read_source(&self, volume: u16) -> Option<u8> {
        let vslot = self.volume_slot(volume)?;
        self.peers
            .iter()
            .filter(|p| p.connection == ConnState::Connected && p.disks[vslot] == DiskState::UpToDate)
            .map(|p| p.config.node_id)
            .min()
    }

    /// `detach`: the administrator takes every volume's disk away. A Primary needs a
    /// connected UpToDate peer for every volume.
    pub fn detach(&mut self, now: Time, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        if self.role == Role::Primary {
            for volume in &self.volumes {
                if volume.disk != DiskState::Diskless && self.read_source(volume.number).is_none() {
                    return Err(StateError::NoSyncSource);
                }
            }
        }
        for vslot in 0..self.volumes.len() {
            if self.volumes[vslot].disk != DiskState::Diskless {
                self.detach_volume(now, vslot, false, out);
            }
        }
        Ok(())
    }

    /// A local data I/O of `vslot` failed: detach it under a detaching policy. Returns
    /// whether the volume is Diskless now.
    pub(super) fn local_io_failed(&mut self, now: Time, vslot: usize, out: &mut Vec<Action<P>>) -> bool {
        if self.volumes[vslot].disk == DiskState::Diskless {
            return true;
        }
        if self.on_io_error == OnIoError::PassOn {
            return false;
        }
        self.detach_volume(now, vslot, true, out);
        true
    }

    fn detach_volume(&mut self, now: Time, vslot: usize, failed: bool, out: &mut Vec<Action<P>>) {
        let volume = self.volumes[vslot].number;
        self.volumes[vslot].disk = DiskState::Diskless;
        let call_handler = failed && self.on_io_error == OnIoError::CallLocalIoError;
        out.push(Action::Detached { volume, failed, call_handler });
        // The peers mark what they apply for us from the moment they hear it.
        self.announce_disks(out);
        self.update_quorum(now, out);
        // Writes that only waited for the local disk are judged by their peers now.
        let writes: Vec<u64> = self.in_flight.iter().filter(|(_, w)| w.volume == volume).map(|(&seq, _)| seq).collect();
        for seq in writes {
            self.try_complete_write(now, seq, out);
        }
        out.push(Action::StateChanged);
    }

    /// A write just started on a Diskless volume has no local completion to wait for: it may
    /// be done at once (no peer to send it to).
    pub(super) fn complete_if_diskless(&mut self, now: Time, seq: u64, out: &mut Vec<Action<P>>) {
        let diskless = self.in_flight.get(&seq).is_some_and(|w| self.is_diskless(w.volume));
        if diskless {
            self.try_complete_write(now, seq, out);
        }
    }

    /// For a write of a Diskless volume: None while a peer it was sent to has not settled it;
    /// then Ok if at least one peer wrote it, EIO if none did.
    pub(super) fn diskless_write_result(&self, write: &InFlight) -> Option<Result<(), IoError>> {
        let settled = write.peers.iter().all(|stage| matches!(stage, PeerStage::Skipped | PeerStage::Settled));
        if !settled {
            return None;
        }
        Some(if write.written_on != 0 { Ok(()) } else { Err(IoError::Io) })
    }
}
