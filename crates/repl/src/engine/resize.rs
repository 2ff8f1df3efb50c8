//! Online resize (`tandem resize`, DRBD's `drbdadm resize`): every node's backing device grew,
//! and the volume grows with them while it stays in use.
//!
//! The node the administrator asked (the initiator) negotiates with every peer, then they all
//! grow, the peers first:
//!
//! ```text
//! initiator                          each peer
//! start_resize ── Resize{Query} ───▶ Action::ResizeOffer → driver → resize_offer
//!              ◀─ Resize{Offer} ───  (the size its grown device gives)
//! all answered: size = min(offers, own offer, --size)
//!              ── Resize{Apply} ───▶ Action::Grow → driver moves the metadata → grown
//!              ◀─ Resize{Applied} ─  (it serves the new size from here on)
//! all applied: Action::Grow → driver → grown; a new handshake resyncs the new area
//! ```
//!
//! Invariants:
//! - The initiator grows last, so no node ever sends a write (or resync data) past the end
//!   of a peer's volume: a peer grows before it answers `Applied`, and only the initiator
//!   takes client writes past the old end before everyone has grown. For that, the initiator
//!   must be the Primary when there is one (a Secondary asked while a peer is Primary refuses:
//!   the Primary, growing first as a peer, would take writes in the new area before the
//!   initiator could receive them). Every node stays writable throughout (writes go to the
//!   old area until its own `grown`).
//! - The sizes are agreed before anyone grows: every offer is collected first, so no node grows
//!   to a size another cannot hold. Shrinking is refused outright.
//! - A resize needs every peer connected (DRBD refuses a resize it cannot agree with every
//!   peer), and no handshake or resync under way; at most one resize per volume at a time.
//! - The new area is marked out of sync for every peer in the grown bitmaps the driver writes
//!   with the metadata move (so a crash right after the move still resyncs it); with
//!   `assume_clean` only the part that the old device held (its old internal metadata) is.
//!   The initiator then starts a handshake with each peer it holds bits for; the usual rules
//!   make the Primary (or the UpToDate side) the source.

use crate::engine::{Engine, PeerBitmap};
use crate::state::{ConnState, DiskState, Role};
use crate::types::{Action, PeerMessage, ResizeStep, StateError, Time};

/// What `resize` asks of [`Engine::start_resize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizeRequest {
    /// The volume to grow.
    pub volume: u16,
    /// What this node's grown backing device gives.
    pub offer_bytes: u64,
    /// `--size`: grow to at most this.
    pub size_max: Option<u64>,
    /// `--assume-clean`: the new area counts as identical on every node.
    pub assume_clean: bool,
    /// `--assume-peer-has-space` (DRBD's name): grow this node alone, without asking any peer;
    /// only while no peer is connected. For a node that missed a resize its peers did (they
    /// then refuse the handshake over the size difference until it grows too).
    pub assume_peer_has_space: bool,
}

/// Where a resize of one volume stands on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Resizing {
    /// This node asked its peers for their offers; `waiting` holds the peer slots yet to
    /// answer, `size_bytes` the smallest size offered so far.
    Asking {
        size_bytes: u64,
        assume_clean: bool,
        waiting: Vec<usize>,
    },
    /// This node told its peers to grow to `size_bytes`; `waiting` as above.
    Applying {
        size_bytes: u64,
        assume_clean: bool,
        waiting: Vec<usize>,
    },
    /// The driver is growing this node's volume; `initiator` is the peer slot that asked,
    /// None when this node is the initiator.
    Growing {
        size_bytes: u64,
        initiator: Option<usize>,
    },
}

impl<P: Clone> Engine<P> {
    /// `resize`: grows the volume to the smallest of what this node's grown device offers,
    /// `--size` and what every peer offers. Refused for a volume this node has no disk for,
    /// when a peer is not connected (with `assume_peer_has_space`: when one is), while a
    /// handshake, resync or another resize runs, and when the size would not grow. The
    /// outcome is taken with [`Engine::take_resize_outcome`].
    pub fn start_resize(
        &mut self,
        request: ResizeRequest,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let ResizeRequest {
            volume,
            offer_bytes,
            size_max,
            assume_clean,
            assume_peer_has_space,
        } = request;
        let vslot = self
            .volume_slot(volume)
            .ok_or_else(|| StateError::Resize(format!("no volume {volume}")))?;
        self.refuse_if_diskless()?;
        if self.resizes.contains_key(&volume) {
            return Err(StateError::Resize(format!(
                "a resize of volume {volume} is already under way"
            )));
        }
        self.refuse_unless_peers_connected(assume_peer_has_space)?;
        self.refuse_if_syncing()?;
        let primary_peer = self
            .peers
            .iter()
            .find(|p| p.connection == ConnState::Connected && p.role == Role::Primary);
        if let (Some(peer), false) = (primary_peer, self.role == Role::Primary) {
            let name = &peer.config.name;
            return Err(StateError::Resize(format!(
                "peer {name} is Primary: run resize there (the Primary grows last, so that no \
                 write reaches past a peer's end)"
            )));
        }
        let size_bytes = size_max.map_or(offer_bytes, |max| max.min(offer_bytes));
        self.refuse_size(vslot, size_bytes, "this node's backing device")?;
        let waiting: Vec<usize> = match assume_peer_has_space {
            true => Vec::new(),
            false => (0..self.peers.len()).collect(),
        };
        if waiting.is_empty() {
            self.grow_here(vslot, size_bytes, assume_clean, None, out);
            return Ok(());
        }
        for &slot in &waiting {
            self.send_resize(slot, volume, 0, ResizeStep::Query, out);
        }
        self.resizes.insert(
            volume,
            Resizing::Asking {
                size_bytes,
                assume_clean,
                waiting,
            },
        );
        Ok(())
    }

    /// Refuses a resize unless every peer is connected (with `assume_peer_has_space`: none is).
    fn refuse_unless_peers_connected(&self, assume_peer_has_space: bool) -> Result<(), StateError> {
        let connected = self
            .peers
            .iter()
            .find(|p| p.connection == ConnState::Connected);
        match (assume_peer_has_space, connected) {
            (true, Some(peer)) => {
                let name = &peer.config.name;
                return Err(StateError::Resize(format!(
                    "--assume-peer-has-space grows this node alone, but peer {name} is connected: \
                     run resize without it"
                )));
            }
            (true, None) => {}
            (false, _) => {
                if let Some(peer) = self
                    .peers
                    .iter()
                    .find(|p| p.connection != ConnState::Connected)
                {
                    return Err(StateError::PeerNotConnected {
                        peer: peer.config.name.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The driver's answer to [`Action::ResizeOffer`]: what this node's device gives now.
    pub fn resize_offer(
        &mut self,
        peer: u8,
        volume: u16,
        offer_bytes: u64,
        out: &mut Vec<Action<P>>,
    ) {
        if let Some(slot) = self.peer_slot(peer) {
            self.send_resize(slot, volume, offer_bytes, ResizeStep::Offer, out);
        }
    }

    /// The bitmaps of `volume` for every peer, grown to `size_bytes`, with `resync` (an
    /// `(offset, length)` of data) marked for every peer with a disk: what the driver writes
    /// with the metadata move and hands back to [`Engine::grown`].
    pub fn grown_bitmaps(
        &self,
        volume: u16,
        size_bytes: u64,
        resync: Option<(u64, u64)>,
    ) -> Result<Vec<PeerBitmap>, String> {
        let vslot = self
            .volume_slot(volume)
            .ok_or_else(|| format!("no volume {volume}"))?;
        let mut grown = Vec::with_capacity(self.peers.len());
        for p in &self.peers {
            let mut bitmap = p.bitmaps[vslot]
                .grown(size_bytes)
                .map_err(|e| e.to_string())?;
            if let (Some((offset, length)), false) = (resync, p.bitmap_free[vslot]) {
                bitmap.set(offset, length).map_err(|e| e.to_string())?;
            }
            grown.push(PeerBitmap {
                peer: p.config.node_id,
                bitmap,
            });
        }
        Ok(grown)
    }

    /// The driver finished [`Action::Grow`]: `Ok` with the bitmaps it wrote (from
    /// [`Engine::grown_bitmaps`]) once the metadata, the data disk and the exports have the
    /// new size, `Err` with the reason it could not.
    pub fn grown(
        &mut self,
        now: Time,
        volume: u16,
        result: Result<Vec<PeerBitmap>, String>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        let Some(Resizing::Growing {
            size_bytes,
            initiator,
        }) = self.resizes.remove(&volume)
        else {
            return;
        };
        let result = result.and_then(|bitmaps| self.install_grown(vslot, size_bytes, bitmaps));
        match (initiator, result) {
            (Some(slot), Ok(())) => {
                self.send_resize(slot, volume, size_bytes, ResizeStep::Applied, out)
            }
            (Some(slot), Err(_)) => self.send_resize(slot, volume, 0, ResizeStep::Refused, out),
            (None, Ok(())) => {
                self.resize_outcomes.insert(volume, Ok(size_bytes));
                self.resync_grown_area(vslot, out);
            }
            (None, Err(reason)) => {
                let peers_grew = if self.peers.is_empty() {
                    ""
                } else {
                    "; the peers grew already: once this node's device is fixed, run resize again \
                     here"
                };
                self.resize_outcomes
                    .insert(volume, Err(format!("{reason}{peers_grew}")));
            }
        }
        self.clock = self.clock.max(now);
        out.push(Action::StateChanged);
    }

    /// How the last resize this node started on `volume` ended, once it has: the new size or
    /// the reason it failed. Taken once.
    pub fn take_resize_outcome(&mut self, volume: u16) -> Option<Result<u64, String>> {
        self.resize_outcomes.remove(&volume)
    }

    /// Whether a resize of `volume` is under way on this node.
    pub fn resizing(&self, volume: u16) -> bool {
        self.resizes.contains_key(&volume)
    }

    /// A [`PeerMessage::Resize`] from the peer in `slot`.
    pub(super) fn receive_resize(
        &mut self,
        slot: usize,
        volume: u16,
        size_bytes: u64,
        step: ResizeStep,
        out: &mut Vec<Action<P>>,
    ) {
        match step {
            ResizeStep::Query => self.resize_queried(slot, volume, out),
            ResizeStep::Offer => self.resize_offered(slot, volume, size_bytes, out),
            ResizeStep::Apply { assume_clean } => {
                self.resize_applying(slot, volume, size_bytes, assume_clean, out)
            }
            ResizeStep::Applied => self.resize_applied(slot, volume, out),
            ResizeStep::Refused => {
                let name = self.peers[slot].config.name.clone();
                self.resize_failed(
                    volume,
                    slot,
                    format!(
                        "peer {name} refused the resize (busy, or its backing device could not be \
                         grown; see its log)"
                    ),
                );
            }
        }
    }

    /// The peer in `slot` was lost: a resize waiting for it fails.
    pub(super) fn resize_peer_lost(&mut self, slot: usize) {
        let name = self.peers[slot].config.name.clone();
        let volumes: Vec<u16> = self.resizes.keys().copied().collect();
        for volume in volumes {
            self.resize_failed(
                volume,
                slot,
                format!("peer {name} disconnected during the resize"),
            );
        }
    }

    fn resize_queried(&mut self, slot: usize, volume: u16, out: &mut Vec<Action<P>>) {
        let busy = self.resizes.contains_key(&volume) || self.volume_slot(volume).is_none();
        if busy {
            self.send_resize(slot, volume, 0, ResizeStep::Refused, out);
            return;
        }
        out.push(Action::ResizeOffer {
            peer: self.peers[slot].config.node_id,
            volume,
        });
    }

    fn resize_offered(
        &mut self,
        slot: usize,
        volume: u16,
        offer_bytes: u64,
        out: &mut Vec<Action<P>>,
    ) {
        if offer_bytes == 0 {
            let name = self.peers[slot].config.name.clone();
            self.resize_failed(
                volume,
                slot,
                format!("peer {name}'s backing device cannot grow (see its log)"),
            );
            return;
        }
        let Some(Resizing::Asking {
            size_bytes,
            assume_clean,
            waiting,
        }) = self.resizes.get_mut(&volume)
        else {
            return;
        };
        if !take(waiting, slot) {
            return;
        }
        *size_bytes = (*size_bytes).min(offer_bytes);
        if !waiting.is_empty() {
            return;
        }
        let (size_bytes, assume_clean) = (*size_bytes, *assume_clean);
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        if let Err(error) = self.refuse_size(
            vslot,
            size_bytes,
            "the smallest backing device of the peers",
        ) {
            self.resizes.remove(&volume);
            self.resize_outcomes.insert(volume, Err(error.to_string()));
            return;
        }
        let waiting: Vec<usize> = (0..self.peers.len()).collect();
        for &slot in &waiting {
            self.send_resize(
                slot,
                volume,
                size_bytes,
                ResizeStep::Apply { assume_clean },
                out,
            );
        }
        self.resizes.insert(
            volume,
            Resizing::Applying {
                size_bytes,
                assume_clean,
                waiting,
            },
        );
    }

    fn resize_applying(
        &mut self,
        slot: usize,
        volume: u16,
        size_bytes: u64,
        assume_clean: bool,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(vslot) = self.volume_slot(volume) else {
            return self.send_resize(slot, volume, 0, ResizeStep::Refused, out);
        };
        // A Primary is only ever the initiator (see the module invariants): promoted since the
        // query, it refuses.
        let free = !self.resizes.contains_key(&volume) && self.role != Role::Primary;
        match self.volumes[vslot].size_bytes.cmp(&size_bytes) {
            std::cmp::Ordering::Equal => {
                self.send_resize(slot, volume, size_bytes, ResizeStep::Applied, out)
            }
            std::cmp::Ordering::Less if free => {
                self.grow_here(vslot, size_bytes, assume_clean, Some(slot), out)
            }
            _ => self.send_resize(slot, volume, 0, ResizeStep::Refused, out),
        }
    }

    fn resize_applied(&mut self, slot: usize, volume: u16, out: &mut Vec<Action<P>>) {
        let Some(Resizing::Applying {
            size_bytes,
            assume_clean,
            waiting,
        }) = self.resizes.get_mut(&volume)
        else {
            return;
        };
        if !take(waiting, slot) || !waiting.is_empty() {
            return;
        }
        let (size_bytes, assume_clean) = (*size_bytes, *assume_clean);
        let Some(vslot) = self.volume_slot(volume) else {
            return;
        };
        self.grow_here(vslot, size_bytes, assume_clean, None, out);
    }

    /// Ends a resize this node started that waits for the peer in `slot`, with `reason`.
    fn resize_failed(&mut self, volume: u16, slot: usize, reason: String) {
        let waits = match self.resizes.get(&volume) {
            Some(Resizing::Asking { waiting, .. } | Resizing::Applying { waiting, .. }) => {
                waiting.contains(&slot)
            }
            _ => false,
        };
        if !waits {
            return;
        }
        let applying = matches!(
            self.resizes.remove(&volume),
            Some(Resizing::Applying { .. })
        );
        let reason = match applying {
            true => format!(
                "{reason}; peers that answered have grown already: once it is fixed, run resize \
                 again"
            ),
            false => reason,
        };
        self.resize_outcomes.insert(volume, Err(reason));
    }

    fn grow_here(
        &mut self,
        vslot: usize,
        size_bytes: u64,
        assume_clean: bool,
        initiator: Option<usize>,
        out: &mut Vec<Action<P>>,
    ) {
        let volume = self.volumes[vslot].number;
        self.resizes.insert(
            volume,
            Resizing::Growing {
                size_bytes,
                initiator,
            },
        );
        out.push(Action::Grow {
            volume,
            size_bytes,
            assume_clean,
        });
    }

    /// Refuses a size that would shrink the volume or leave it as it is.
    fn refuse_size(
        &self,
        vslot: usize,
        size_bytes: u64,
        offered_by: &str,
    ) -> Result<(), StateError> {
        let current = self.volumes[vslot].size_bytes;
        if size_bytes < current {
            return Err(StateError::Resize(format!(
                "{offered_by} gives {size_bytes} bytes, less than the {current} bytes of volume \
                 {}: shrinking is not supported",
                self.volumes[vslot].number
            )));
        }
        if size_bytes == current {
            return Err(StateError::Resize(format!(
                "nothing to grow: {offered_by} gives {size_bytes} bytes, the size volume {} has \
                 (grow the backing devices of every node first)",
                self.volumes[vslot].number
            )));
        }
        Ok(())
    }

    /// Takes on the new size and the grown bitmaps (one per peer, covering exactly
    /// `size_bytes` at the granularity in use), and widens the activity log.
    fn install_grown(
        &mut self,
        vslot: usize,
        size_bytes: u64,
        bitmaps: Vec<PeerBitmap>,
    ) -> Result<(), String> {
        for PeerBitmap { peer, bitmap } in &bitmaps {
            let slot = self
                .peer_slot(*peer)
                .ok_or_else(|| format!("a grown bitmap for unknown peer {peer}"))?;
            let fits = bitmap.data_bytes() == size_bytes
                && bitmap.granularity_bytes()
                    == self.peers[slot].bitmaps[vslot].granularity_bytes();
            if !fits {
                return Err(format!(
                    "the grown bitmap for peer {peer} does not cover {size_bytes} bytes"
                ));
            }
        }
        if bitmaps.len() != self.peers.len() {
            return Err("a grown bitmap is missing".into());
        }
        if let Some(log) = &mut self.volumes[vslot].log {
            log.grow(size_bytes)?;
        }
        for PeerBitmap { peer, bitmap } in bitmaps {
            let Some(slot) = self.peer_slot(peer) else {
                continue;
            };
            // Bits set since the driver took the grown bitmaps are kept too.
            let mut merged = self.peers[slot].bitmaps[vslot]
                .grown(size_bytes)
                .map_err(|e| e.to_string())?;
            merged.or_with(&bitmap).map_err(|e| e.to_string())?;
            self.peers[slot].bitmaps[vslot] = merged;
        }
        let volume = &mut self.volumes[vslot];
        assert!(size_bytes > volume.size_bytes, "a resize only grows");
        volume.size_bytes = size_bytes;
        Ok(())
    }

    /// After the initiator grew: a new handshake with each connected peer it holds bits for,
    /// which resyncs them (as `invalidate-remote` does).
    fn resync_grown_area(&mut self, vslot: usize, out: &mut Vec<Action<P>>) {
        if self.volumes[vslot].disk == DiskState::Diskless {
            return;
        }
        let owed = self.peers.iter().any(|p| {
            p.connection == ConnState::Connected && p.bitmaps[vslot].count_set_blocks() > 0
        });
        if owed {
            self.meta_changed(vslot, out);
            self.rehandshake(vslot, out);
        }
    }

    fn send_resize(
        &mut self,
        slot: usize,
        volume: u16,
        size_bytes: u64,
        step: ResizeStep,
        out: &mut Vec<Action<P>>,
    ) {
        let peer = self.peers[slot].config.node_id;
        out.push(Action::SendOnData {
            peer,
            message: PeerMessage::Resize {
                volume,
                size_bytes,
                step,
            },
        });
    }
}

/// Removes `slot` from `waiting`; whether it was there.
fn take(waiting: &mut Vec<usize>, slot: usize) -> bool {
    let before = waiting.len();
    waiting.retain(|s| *s != slot);
    waiting.len() != before
}
