//! Generation identifiers ("UUIDs") and the sync-handshake decision (drbd-semantics.md §2).
//!
//! A node's data has a lineage: every time it may start to diverge from a peer, the node
//! creates a new random *current* identifier. The old current is kept as the *bitmap*
//! identifier of every peer that was absent (the point from which that peer's bitmap counts
//! changes), and identifiers that no longer anchor a bitmap move into the *history*. When two
//! nodes connect, [`compare`] reads both sets of identifiers and decides whether to resync,
//! in which direction, using the bitmap or everything, or whether the data diverged (split
//! brain) or was never related.
//!
//! Pure logic: no I/O, no clock; randomness is an argument.
//!
//! # Invariants
//! - Bit 0 of an identifier ([`UUID_PRIMARY`]) records whether the node was Primary when the
//!   identifier was set; every comparison ignores it.
//! - A current identifier of 0 means the same as [`UUID_JUST_CREATED`] (a fresh disk).
//! - [`GenerationIds::new_current`] never produces 0, [`UUID_JUST_CREATED`], or any identifier
//!   the node already holds, so a new generation can never be mistaken for an old one.
//! - [`compare`] is a mirror: `compare(a, b)` seen from `a` is `compare(b, a)` seen from `b`
//!   with Source and Target swapped (checked by a property test). DRBD evaluates "peer" rules
//!   before "self" rules; we evaluate each pair together, so contradictory identifiers
//!   (possible only if identifiers repeat) give the same answer on both sides: a split brain
//!   that needs a human.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::state::Role;

/// Bit 0 of an identifier: set while the node that set it was Primary. Ignored in comparisons.
pub const UUID_PRIMARY: u64 = 1;
/// The current identifier of a disk that was never synced with anyone.
pub const UUID_JUST_CREATED: u64 = 4;
/// Node ids are `0..NODE_SLOTS_MAX`; one bitmap identifier per node id.
pub const NODE_SLOTS_MAX: usize = 32;
/// Number of history identifiers kept (oldest dropped first).
pub const HISTORY_SLOTS_MAX: usize = 32;

const _: () = assert!(NODE_SLOTS_MAX <= 32, "NodeSet is a u32 bit set");
const _: () = assert!(
    HISTORY_SLOTS_MAX >= 2,
    "the handshake log line prints two history slots"
);

/// Everything that can be wrong with the input of the handshake and resync logic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// A node id outside `0..NODE_SLOTS_MAX`.
    #[error("node-id {node_id} is out of range 0..{max}", max = NODE_SLOTS_MAX)]
    NodeIdOutOfRange {
        /// The offending node id.
        node_id: u8,
    },
    /// A handshake between a node and itself.
    #[error("local and peer node-id are both {node_id}")]
    SameNodeId {
        /// The node id both sides claim.
        node_id: u8,
    },
    /// `c-plan-ahead` longer than the controller's plan can hold.
    #[error("c-plan-ahead of {plan_ahead_ms} ms exceeds the maximum of {max_ms} ms")]
    PlanAheadTooLong {
        /// The configured value in milliseconds (saturated).
        plan_ahead_ms: u64,
        /// The longest accepted value in milliseconds.
        max_ms: u64,
    },
    /// A fixed resync rate of zero: the resync would never progress.
    #[error("resync-rate must be at least 1 KiB/s when c-plan-ahead is 0")]
    ZeroResyncRate,
    /// The dynamic controller in delay-target mode with a delay target of zero.
    #[error("c-delay-target must be positive when c-fill-target is 0")]
    ZeroDelayTarget,
    /// A bitmap given for a node that is not a peer of this resource (or given twice).
    #[error(
        "volume {volume}: bitmap for node-id {peer}, which is not a peer (or is listed twice)"
    )]
    BitmapPeerUnknown {
        /// The volume.
        volume: u16,
        /// The node id the bitmap claims.
        peer: u8,
    },
    /// A bitmap that does not cover the volume exactly.
    #[error(
        "volume {volume}: the bitmap for node-id {peer} covers {bitmap_bytes} bytes, the volume \
         has {volume_bytes}"
    )]
    BitmapSizeMismatch {
        /// The volume.
        volume: u16,
        /// The peer the bitmap is for.
        peer: u8,
        /// Bytes the bitmap covers.
        bitmap_bytes: u64,
        /// Bytes of the volume.
        volume_bytes: u64,
    },
    /// `max-buffers` of zero pages: a resync could never request anything.
    #[error("max-buffers must be at least 1 page")]
    ZeroMaxBuffers,
    /// An activity log whose extents do not cover the whole volume.
    #[error(
        "volume {volume}: the activity log covers {extent_count} extents of 4 MiB, the volume has \
         {volume_bytes} bytes"
    )]
    ActivityLogTooSmall {
        /// The volume.
        volume: u16,
        /// Extents the activity log covers.
        extent_count: u64,
        /// Bytes of the volume.
        volume_bytes: u64,
    },
    /// An activity log handed over with a transaction or writes in flight (it must be new).
    #[error("volume {volume}: the activity log has a transaction or writes in flight")]
    ActivityLogInUse {
        /// The volume.
        volume: u16,
    },
}

/// A validated node id (`< NODE_SLOTS_MAX`), usable as a bitmap slot index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(u8);

impl NodeId {
    /// The node id `id`, if it fits a bitmap slot.
    pub fn new(id: u8) -> Result<NodeId, SyncError> {
        if usize::from(id) < NODE_SLOTS_MAX {
            Ok(NodeId(id))
        } else {
            Err(SyncError::NodeIdOutOfRange { node_id: id })
        }
    }

    /// The number.
    pub fn get(self) -> u8 {
        self.0
    }

    fn slot(self) -> usize {
        usize::from(self.0)
    }
}

/// A set of node ids (fixed capacity: one bit per slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct NodeSet(u32);

impl NodeSet {
    /// The empty set.
    pub const EMPTY: NodeSet = NodeSet(0);
    /// Every node.
    pub const ALL: NodeSet = NodeSet(u32::MAX);

    /// This set plus `node`.
    #[must_use]
    pub fn with(self, node: NodeId) -> NodeSet {
        NodeSet(self.0 | (1u32 << node.0))
    }

    /// Whether `node` is in the set.
    pub fn contains(self, node: NodeId) -> bool {
        self.0 & (1u32 << node.0) != 0
    }

    /// The members in ascending order.
    pub fn iter(self) -> impl Iterator<Item = NodeId> {
        (0..NODE_SLOTS_MAX)
            .filter_map(|slot| u8::try_from(slot).ok())
            .map(NodeId)
            .filter(move |node| self.contains(*node))
    }
}

/// Which end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// This node ("self" in DRBD's log).
    Local,
    /// The other node.
    Peer,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Local => Side::Peer,
            Side::Peer => Side::Local,
        }
    }
}

/// Flags exchanged with the identifiers that change the handshake's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GenerationFlags {
    /// The node was Primary when it went down without a clean demotion: the activity log's
    /// hot extents were marked out of sync on attach, and must be copied to its peers.
    pub crashed_primary: bool,
    /// The administrator asked to discard this node's data on connect
    /// (`connect --discard-my-data`): it loses any split-brain resolution.
    pub discard_my_data: bool,
    /// Sent, never stored: the sender is Established with a connected Primary (a third node)
    /// on this volume, so that Primary's writes reach it. Two Secondaries fed by one Primary
    /// never resync between themselves over equal generations (`settle_equal_current`).
    #[serde(default)]
    pub primary_peer: bool,
    /// The node went down uncleanly while Secondary with more than one peer, and has not
    /// been resynced since: its bitmaps hold its hot extents, where its disk may lack writes
    /// its peers have. Kept in memory only; cleared when a resync as target adopts its
    /// source's identifiers.
    #[serde(default)]
    pub crashed_secondary: bool,
}

impl GenerationFlags {
    /// Bit of `discard_my_data` in [`GenerationFlags::bits`].
    pub const DISCARD_MY_DATA: u64 = 1;
    /// Bit of `crashed_primary` in [`GenerationFlags::bits`].
    pub const CRASHED_PRIMARY: u64 = 2;
    /// Bit of `primary_peer` in [`GenerationFlags::bits`].
    pub const PRIMARY_PEER: u64 = 4;
    /// Bit of `crashed_secondary` in [`GenerationFlags::bits`].
    pub const CRASHED_SECONDARY: u64 = 8;

    /// The flags as a bit mask (for the log line and the wire).
    pub fn bits(self) -> u64 {
        let discard = if self.discard_my_data {
            Self::DISCARD_MY_DATA
        } else {
            0
        };
        let crashed = if self.crashed_primary {
            Self::CRASHED_PRIMARY
        } else {
            0
        };
        let fed = if self.primary_peer {
            Self::PRIMARY_PEER
        } else {
            0
        };
        let crashed_secondary = if self.crashed_secondary {
            Self::CRASHED_SECONDARY
        } else {
            0
        };
        discard | crashed | fed | crashed_secondary
    }

    /// The flags in `bits`; unknown bits are ignored.
    pub fn from_bits(bits: u64) -> GenerationFlags {
        GenerationFlags {
            crashed_primary: bits & Self::CRASHED_PRIMARY != 0,
            discard_my_data: bits & Self::DISCARD_MY_DATA != 0,
            primary_peer: bits & Self::PRIMARY_PEER != 0,
            crashed_secondary: bits & Self::CRASHED_SECONDARY != 0,
        }
    }
}

/// One node's generation identifiers for one volume, as stored in its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerationIds {
    /// The identifier of the data as it is now.
    pub current: u64,
    /// Per node id: the generation from which that peer's bitmap counts changes; 0 if the
    /// peer is in sync (or never existed). The slot of the node itself is unused.
    pub bitmap: [u64; NODE_SLOTS_MAX],
    /// Earlier generations, newest first; 0 marks an empty slot.
    pub history: [u64; HISTORY_SLOTS_MAX],
    /// Flags that take part in the handshake.
    pub flags: GenerationFlags,
    /// While this node is a sync target, or Inconsistent after one was cut short: the
    /// source's current generation, the data the resync is bringing it to (0 otherwise).
    /// The target may already hold writes of that generation which no node outside its
    /// lineage has, so only a node whose identifiers include it may resync it, by any rule
    /// (`engine::handshake`, `keep_resync_goal`).
    pub resync_goal: u64,
}

/// The arguments of [`GenerationIds::new_current`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewCurrent {
    /// Fresh randomness from the driver.
    pub random: u64,
    /// The node's role now (sets [`UUID_PRIMARY`] on the new identifier).
    pub role: Role,
    /// Peers that are not connected: their bitmaps start counting from the old generation.
    pub absent_peers: NodeSet,
}

/// The arguments of [`GenerationIds::adopt_source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adoption {
    /// This node's id.
    pub local: NodeId,
    /// The id of the sync source whose identifiers are adopted.
    pub source: NodeId,
    /// This node's role now.
    pub role: Role,
}

/// An identifier without its made-by-a-Primary bit (the bit never tells generations apart).
pub(crate) fn without_primary(uuid: u64) -> u64 {
    uuid & !UUID_PRIMARY
}

fn with_role(uuid: u64, role: Role) -> u64 {
    match role {
        Role::Primary => uuid | UUID_PRIMARY,
        Role::Secondary | Role::Unknown => without_primary(uuid),
    }
}

/// The current identifier as compared: primary bit cleared, 0 read as just created.
fn comparable_current(uuid: u64) -> u64 {
    match without_primary(uuid) {
        0 => UUID_JUST_CREATED,
        other => other,
    }
}

impl GenerationIds {
    /// The identifiers of a freshly created disk.
    pub fn just_created() -> GenerationIds {
        GenerationIds {
            current: UUID_JUST_CREATED,
            bitmap: [0; NODE_SLOTS_MAX],
            history: [0; HISTORY_SLOTS_MAX],
            flags: GenerationFlags::default(),
            resync_goal: 0,
        }
    }

    /// Whether the disk was never synced with anyone.
    pub fn is_just_created(&self) -> bool {
        comparable_current(self.current) == UUID_JUST_CREATED
    }

    /// The bitmap identifier kept for `peer`.
    pub fn bitmap_uuid(&self, peer: NodeId) -> u64 {
        self.bitmap[peer.slot()]
    }

    /// Names `generation` as the one `peer`'s bitmap counts changes from, if no identifier
    /// does yet: the peer may still be on a generation this node left without it.
    pub fn keep_bitmap_uuid(&mut self, peer: NodeId, generation: u64) {
        let slot = &mut self.bitmap[peer.slot()];
        if *slot == 0 {
            *slot = generation;
        }
    }

    /// Sets or clears [`UUID_PRIMARY`] on the current identifier.
    ///
    /// The bit is how a bitmap identifier later tells whether this node was Primary when its
    /// peer left, which `discard-younger-primary` and `discard-older-primary` read. So the
    /// engine calls this on demotion, and on promotion only when every peer is connected; a
    /// promotion with peers absent is marked by the `new_current` of its first write (with
    /// `role: Primary`), which must see the old generation still unmarked.
    pub fn mark_role(&mut self, role: Role) {
        self.current = with_role(self.current, role);
    }

    /// Starts a new generation.
    ///
    /// DRBD does this on the first write after a Primary lost a peer, on the first write after
    /// a promotion without every peer connected, and for `new-current-uuid`. Every absent peer
    /// whose bitmap identifier is 0 gets the old current: its bitmap counts changes from here.
    /// An absent peer that already has a bitmap identifier keeps it, because its bitmap has
    /// been accumulating changes since that older generation, which is what it still holds.
    /// If no bitmap slot took the old current, it goes into the history so a peer still at
    /// that generation is recognised as an ancestor (full sync) rather than unrelated.
    pub fn new_current(&mut self, change: NewCurrent) {
        let fresh = self.fresh_uuid(change.random);
        self.rotate_to(with_role(fresh, change.role), change.absent_peers);
    }

    /// Takes a Primary's new current identifier as a Secondary in sync with it
    /// ([`crate::UuidsPurpose::Rotate`]): the old current is kept exactly as
    /// [`GenerationIds::new_current`] keeps it (bitmap slots of `absent_peers` that are 0, else
    /// the history), so this node's bitmaps for its own absent peers count from it. Nothing
    /// changes if `current` is already ours.
    pub fn adopt_current(&mut self, current: u64, absent_peers: NodeSet) {
        if without_primary(current) == without_primary(self.current) {
            return;
        }
        self.rotate_to(current, absent_peers);
    }

    fn rotate_to(&mut self, current: u64, absent_peers: NodeSet) {
        let old = self.current;
        let mut kept = false;
        for peer in absent_peers.iter() {
            let slot = &mut self.bitmap[peer.slot()];
            if *slot == 0 {
                *slot = old;
                kept = true;
            }
        }
        if !kept {
            self.push_history(old);
        }
        self.current = current;
        // A node that starts or takes a generation of its own is nobody's sync target.
        self.resync_goal = 0;
    }

    /// Forgets `peer`'s bitmap identifier; the identifier moves into the history.
    ///
    /// DRBD does this when a resync with this node as source finished (the peer now has
    /// everything) and when `new-current-uuid --clear-bitmap` declares all peers in sync.
    pub fn clear_bitmap_uuid(&mut self, peer: NodeId) {
        let old = std::mem::take(&mut self.bitmap[peer.slot()]);
        self.push_history(old);
    }

    /// Starts a resync as its source: `peer`'s bitmap identifier becomes a fresh identifier
    /// (returned), which the target makes its current (DRBD's sync UUID). The previous bitmap
    /// identifier moves into the history.
    ///
    /// So an interrupted resync resumes on the next connect by the bitmap rules (the target's
    /// current is our bitmap identifier for it), whatever rule started it (full sync, split
    /// brain resolution, crashed primary), instead of being decided again.
    pub fn new_sync_uuid(&mut self, peer: NodeId, random: u64) -> u64 {
        let sync = self.fresh_uuid(random);
        let old = std::mem::replace(&mut self.bitmap[peer.slot()], sync);
        self.push_history(old);
        sync
    }

    /// Takes over the sync source's identifiers when a resync as target finished.
    ///
    /// The data is now the source's, so the current identifier and the history are the
    /// source's. This node's old current is dropped, not kept as history: after a split-brain
    /// resolution it names discarded data, and a third node still holding that data must be
    /// seen as diverged, never as an ancestor. Bitmap identifiers for third nodes are the
    /// source's; the engine must merge the source's bitmaps for them (or full-sync them).
    /// The slot for the source is 0 (in sync), and the crashed-primary and discard-my-data
    /// flags are cleared: both have been dealt with.
    pub fn adopt_source(&mut self, source: &GenerationIds, adoption: Adoption) {
        self.current = with_role(source.current, adoption.role);
        self.history = source.history;
        self.bitmap = source.bitmap;
        self.bitmap[adoption.local.slot()] = 0;
        self.bitmap[adoption.source.slot()] = 0;
        self.flags = GenerationFlags::default();
        self.resync_goal = 0;
    }

    /// As a sync target: records the generations the source's data descends from (its
    /// bitmap identifiers and history, not its current) in our history. A target holds part
    /// of the source's data, application writes of the source's generation included, so a
    /// node still on one of those older generations is behind it: the history rules then
    /// make this Inconsistent node the would-be source, which is refused, instead of calling
    /// the two unrelated and overwriting those writes by a full sync. Our own current (the
    /// sync identifier, in the source's bitmap slot for us) is skipped. The source's current
    /// becomes our [`GenerationIds::resync_goal`].
    pub fn learn_source_ancestors(&mut self, source: &GenerationIds) {
        self.resync_goal = source.current;
        let own = without_primary(self.current);
        let ancestors = source.history.iter().rev().chain(source.bitmap.iter());
        for &uuid in ancestors {
            if without_primary(uuid) != own {
                self.push_history(uuid);
            }
        }
    }

    /// Whether these identifiers descend from the generation `ancestor` without being it:
    /// `ancestor` is among the bitmap identifiers or the history, and not the current.
    pub fn descends_from(&self, ancestor: u64) -> bool {
        let bare = without_primary(ancestor);
        if bare == 0
            || bare == UUID_JUST_CREATED
            || comparable_current(self.current) == comparable_current(ancestor)
        {
            return false;
        }
        self.bitmap
            .iter()
            .chain(&self.history)
            .any(|&uuid| uuid != 0 && without_primary(uuid) == bare)
    }

    /// Puts `uuid` at the front of the history, unless it is empty, a fresh-disk marker, or
    /// already there. The oldest entry falls off.
    fn push_history(&mut self, uuid: u64) {
        let bare = without_primary(uuid);
        if bare == 0 || bare == UUID_JUST_CREATED || self.in_history(bare) {
            return;
        }
        self.history.copy_within(0..HISTORY_SLOTS_MAX - 1, 1);
        self.history[0] = uuid;
    }

    fn in_history(&self, bare: u64) -> bool {
        self.history
            .iter()
            .any(|&h| h != 0 && without_primary(h) == bare)
    }

    /// Whether this node's data includes the generation `uuid`: it is the current, a bitmap
    /// identifier or in the history.
    pub fn includes(&self, uuid: u64) -> bool {
        let bare = without_primary(uuid);
        bare != 0 && self.knows(bare)
    }

    /// Whether `bare` equals any identifier this node holds.
    fn knows(&self, bare: u64) -> bool {
        let held = std::iter::once(&self.current)
            .chain(&self.bitmap)
            .chain(&self.history);
        held.copied().any(|uuid| without_primary(uuid) == bare)
    }

    /// `random` without the primary bit, moved off reserved and already held values.
    ///
    /// Terminates: each step changes the candidate, and fewer than `1 + NODE_SLOTS_MAX +
    /// HISTORY_SLOTS_MAX + 2` values are excluded.
    fn fresh_uuid(&self, random: u64) -> u64 {
        let mut candidate = without_primary(random);
        while candidate == 0 || candidate == UUID_JUST_CREATED || self.knows(candidate) {
            candidate = candidate.wrapping_add(2);
        }
        candidate
    }
}

/// The two node ids of a handshake (distinct by construction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeNodes {
    local: NodeId,
    peer: NodeId,
}

impl HandshakeNodes {
    /// The ids of this node and its peer; they must differ.
    pub fn new(local: NodeId, peer: NodeId) -> Result<HandshakeNodes, SyncError> {
        if local == peer {
            return Err(SyncError::SameNodeId {
                node_id: local.get(),
            });
        }
        Ok(HandshakeNodes { local, peer })
    }

    /// This node's id.
    pub fn local(self) -> NodeId {
        self.local
    }

    /// The peer's id.
    pub fn peer(self) -> NodeId {
        self.peer
    }

    /// The same pair seen from the peer.
    pub fn mirrored(self) -> HandshakeNodes {
        HandshakeNodes {
            local: self.peer,
            peer: self.local,
        }
    }
}

/// How much a resync moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transfer {
    /// Only the blocks set in the bitmap.
    Bitmap,
    /// Every block.
    Full,
}

/// What the handshake decided, from this node's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncDecision {
    /// Both hold the same data.
    NoSync,
    /// This node sends its data to the peer.
    Source(Transfer),
    /// This node receives the peer's data.
    Target(Transfer),
    /// Both changed data since their last common generation.
    SplitBrain {
        /// Both diverged from the same generation, so the after-sb policies may pick a
        /// victim and a bitmap resync repairs it; otherwise only a human can.
        auto_recoverable: bool,
    },
    /// No common generation at all: refuse to connect.
    Unrelated,
}

impl SyncDecision {
    /// The same decision seen from the peer.
    pub fn mirrored(self) -> SyncDecision {
        match self {
            SyncDecision::Source(transfer) => SyncDecision::Target(transfer),
            SyncDecision::Target(transfer) => SyncDecision::Source(transfer),
            symmetric => symmetric,
        }
    }

    /// A short name for logs.
    pub fn name(self) -> &'static str {
        match self {
            SyncDecision::NoSync => "no-sync",
            SyncDecision::Source(Transfer::Bitmap) => "sync-source-bitmap",
            SyncDecision::Source(Transfer::Full) => "sync-source-full",
            SyncDecision::Target(Transfer::Bitmap) => "sync-target-bitmap",
            SyncDecision::Target(Transfer::Full) => "sync-target-full",
            SyncDecision::SplitBrain {
                auto_recoverable: true,
            } => "split-brain-auto-recover",
            SyncDecision::SplitBrain {
                auto_recoverable: false,
            } => "split-brain-disconnect",
            SyncDecision::Unrelated => "unrelated-data",
        }
    }
}

impl fmt::Display for SyncDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The rule of [`compare`] that decided, in evaluation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Both disks are fresh: nothing to copy.
    BothJustCreated,
    /// This disk is fresh: full sync from the peer.
    JustCreatedSelf,
    /// The peer's disk is fresh: full sync to it.
    JustCreatedPeer,
    /// Same current generation, no crash: nothing to copy.
    EqualCurrent,
    /// Same current generation, this node crashed as Primary: it sends its hot extents.
    CrashedPrimarySelf,
    /// Same current generation, the peer crashed as Primary: it sends its hot extents.
    CrashedPrimaryPeer,
    /// Same current generation, both crashed as Primary: the lower node id is the source.
    CrashedPrimaryBoth,
    /// Same current generation, a crashed Primary on either side, and one side is Primary
    /// now: that side is the source (DRBD's rule 41). A crashed Primary's unacknowledged hot
    /// extents never overwrite the data of the Primary that took over (`engine::handshake`).
    CurrentPrimary,
    /// The peer's bitmap for us starts at our current: we lack the peer's bitmap.
    BitmapPeer,
    /// Our bitmap for the peer starts at its current: it lacks our bitmap.
    BitmapSelf,
    /// Both bitmap rules hold at once (identifiers repeat): treated as a split brain.
    BitmapContradiction,
    /// Our current is in the peer's history: full sync from the peer.
    HistoryPeer,
    /// The peer's current is in our history: full sync to the peer.
    HistorySelf,
    /// Both history rules hold at once (identifiers repeat): treated as a split brain.
    HistoryContradiction,
    /// Both bitmaps start at the same generation: split brain, policies may recover.
    BitmapBoth,
    /// The histories share a generation: split brain, disconnect.
    HistoryBoth,
    /// Nothing shared.
    UnrelatedData,
    /// A resync to an Inconsistent side whose resync goal (the generation its cut-short
    /// resync was bringing it to) the source never held: split brain, disconnect
    /// (`engine::handshake`).
    UnknownResyncGoal,
}

impl Rule {
    /// The same rule seen from the peer.
    pub fn mirrored(self) -> Rule {
        match self {
            Rule::JustCreatedSelf => Rule::JustCreatedPeer,
            Rule::JustCreatedPeer => Rule::JustCreatedSelf,
            Rule::CrashedPrimarySelf => Rule::CrashedPrimaryPeer,
            Rule::CrashedPrimaryPeer => Rule::CrashedPrimarySelf,
            Rule::BitmapPeer => Rule::BitmapSelf,
            Rule::BitmapSelf => Rule::BitmapPeer,
            Rule::HistoryPeer => Rule::HistorySelf,
            Rule::HistorySelf => Rule::HistoryPeer,
            symmetric => symmetric,
        }
    }

    /// The rule's name for logs (DRBD's where DRBD has one).
    pub fn name(self) -> &'static str {
        match self {
            Rule::BothJustCreated => "both-just-created",
            Rule::JustCreatedSelf => "just-created-self",
            Rule::JustCreatedPeer => "just-created-peer",
            Rule::EqualCurrent => "equal-current",
            Rule::CrashedPrimarySelf => "crashed-primary-self",
            Rule::CrashedPrimaryPeer => "crashed-primary-peer",
            Rule::CrashedPrimaryBoth => "crashed-primary-both",
            Rule::CurrentPrimary => "current-primary",
            Rule::BitmapPeer => "bitmap-peer",
            Rule::BitmapSelf => "bitmap-self",
            Rule::BitmapContradiction => "bitmap-contradiction",
            Rule::HistoryPeer => "history-peer",
            Rule::HistorySelf => "history-self",
            Rule::HistoryContradiction => "history-contradiction",
            Rule::BitmapBoth => "bitmap-both",
            Rule::HistoryBoth => "history-both",
            Rule::UnrelatedData => "unrelated-data",
            Rule::UnknownResyncGoal => "unknown-resync-goal",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of [`compare`]: the decision and the rule that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handshake {
    /// What to do.
    pub decision: SyncDecision,
    /// Why.
    pub rule: Rule,
}

impl Handshake {
    /// The same result seen from the peer.
    pub fn mirrored(self) -> Handshake {
        Handshake {
            decision: self.decision.mirrored(),
            rule: self.rule.mirrored(),
        }
    }
}

impl fmt::Display for Handshake {
    /// `uuid_compare()=<decision> by rule=<rule>`, the line DRBD logs after the two
    /// [`HandshakeLog`] lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uuid_compare()={} by rule={}", self.decision, self.rule)
    }
}

/// Decides the resync between this node (`local`) and `peer`, by drbd-semantics.md §2's
/// rules in order; the first that applies decides.
pub fn compare(local: &GenerationIds, peer: &GenerationIds, nodes: HandshakeNodes) -> Handshake {
    let view = View { local, peer, nodes };
    view.just_created()
        .or_else(|| view.equal_current())
        .or_else(|| view.bitmap_rules())
        .or_else(|| view.history_rules())
        .or_else(|| view.split_brain())
        .unwrap_or(Handshake {
            decision: SyncDecision::Unrelated,
            rule: Rule::UnrelatedData,
        })
}

/// Both sides' identifiers, as seen from `local`.
struct View<'a> {
    local: &'a GenerationIds,
    peer: &'a GenerationIds,
    nodes: HandshakeNodes,
}

fn decided(decision: SyncDecision, rule: Rule) -> Option<Handshake> {
    Some(Handshake { decision, rule })
}

/// The generations `ids`'s data descends from: its history and its bitmap identifiers, bare
/// (no primary bit), without the empty ones.
fn ancestors(ids: &GenerationIds) -> impl Iterator<Item = u64> + '_ {
    ids.history
        .iter()
        .chain(&ids.bitmap)
        .map(|&uuid| without_primary(uuid))
        .filter(|&bare| bare != 0)
}

/// Whether `bare` (no primary bit, non-zero) is among `history`.
fn history_holds(history: &[u64; HISTORY_SLOTS_MAX], bare: u64) -> bool {
    history
        .iter()
        .any(|&uuid| uuid != 0 && without_primary(uuid) == bare)
}

impl View<'_> {
    fn just_created(&self) -> Option<Handshake> {
        match (self.local.is_just_created(), self.peer.is_just_created()) {
            (true, true) => decided(SyncDecision::NoSync, Rule::BothJustCreated),
            (true, false) => decided(SyncDecision::Target(Transfer::Full), Rule::JustCreatedSelf),
            (false, true) => decided(SyncDecision::Source(Transfer::Full), Rule::JustCreatedPeer),
            (false, false) => None,
        }
    }

    /// Same current generation. Our interpretation of the crashed-primary case: a node that
    /// crashed as Primary may have written blocks in its hot activity-log extents that never
    /// reached the peer (and, without a new generation, nobody counted them). On attach it
    /// marked those extents out of sync in its bitmaps, so it is the source of a bitmap
    /// resync. If both crashed as Primary (two primaries), both bitmaps are merged on connect
    /// and either direction repairs the union; the lower node id is the source so both sides
    /// agree.
    fn equal_current(&self) -> Option<Handshake> {
        if comparable_current(self.local.current) != comparable_current(self.peer.current) {
            return None;
        }
        let bitmap = Transfer::Bitmap;
        let crashed = (
            self.local.flags.crashed_primary,
            self.peer.flags.crashed_primary,
        );
        match crashed {
            (false, false) => decided(SyncDecision::NoSync, Rule::EqualCurrent),
            (true, false) => decided(SyncDecision::Source(bitmap), Rule::CrashedPrimarySelf),
            (false, true) => decided(SyncDecision::Target(bitmap), Rule::CrashedPrimaryPeer),
            (true, true) if self.nodes.local < self.nodes.peer => {
                decided(SyncDecision::Source(bitmap), Rule::CrashedPrimaryBoth)
            }
            (true, true) => decided(SyncDecision::Target(bitmap), Rule::CrashedPrimaryBoth),
        }
    }

    /// bitmap-peer: the peer has been counting its changes for us since our current
    /// generation, so we are behind by exactly its bitmap. bitmap-self: the reverse.
    fn bitmap_rules(&self) -> Option<Handshake> {
        let local_current = comparable_current(self.local.current);
        let peer_current = comparable_current(self.peer.current);
        let peer_bitmap = without_primary(self.peer.bitmap_uuid(self.nodes.local));
        let local_bitmap = without_primary(self.local.bitmap_uuid(self.nodes.peer));
        let behind = peer_bitmap == local_current;
        let ahead = local_bitmap == peer_current;
        match (behind, ahead) {
            (true, true) => decided(
                SyncDecision::SplitBrain {
                    auto_recoverable: false,
                },
                Rule::BitmapContradiction,
            ),
            (true, false) => decided(SyncDecision::Target(Transfer::Bitmap), Rule::BitmapPeer),
            (false, true) => decided(SyncDecision::Source(Transfer::Bitmap), Rule::BitmapSelf),
            (false, false) => None,
        }
    }

    /// history-peer: our current is an ancestor of the peer's data, but no bitmap covers the
    /// difference, so everything is copied from the peer. history-self: the reverse.
    fn history_rules(&self) -> Option<Handshake> {
        let behind = history_holds(&self.peer.history, comparable_current(self.local.current));
        let ahead = history_holds(&self.local.history, comparable_current(self.peer.current));
        match (behind, ahead) {
            (true, true) => decided(
                SyncDecision::SplitBrain {
                    auto_recoverable: false,
                },
                Rule::HistoryContradiction,
            ),
            (true, false) => decided(SyncDecision::Target(Transfer::Full), Rule::HistoryPeer),
            (false, true) => decided(SyncDecision::Source(Transfer::Full), Rule::HistorySelf),
            (false, false) => None,
        }
    }

    /// bitmap-both: both started counting changes for each other at the same generation,
    /// so both wrote since then; one side's changes plus the other's bitmap repair it.
    /// history-both: they share only an older generation; no bitmap covers the divergence.
    ///
    /// A resync source stores a fresh sync identifier in its bitmap slot (the old one goes to
    /// its history) before its `SyncStart` reaches the target; if the link breaks in between,
    /// the two bitmap identifiers no longer match although both still diverged from the same
    /// generation. So one side's bitmap identifier found in the other's history (newest, or
    /// older when the other side started further generations since, as a Primary that writes
    /// after losing a peer it shared its generation with does) counts as bitmap-both too: a
    /// split brain, never "unrelated data" that no resolution can clear (found by the
    /// simulator).
    ///
    /// history-both looks for a shared ancestor among the history and the bitmap
    /// identifiers of either side (a bitmap identifier names a generation the side's data
    /// descends from, for any peer): a node that counted changes for two absent peers from
    /// the generation its peer keeps only in its history diverged from that peer there
    /// (found by the simulator, seed 1819 with `--quorum --nodes 3`).
    fn split_brain(&self) -> Option<Handshake> {
        let local_bitmap = without_primary(self.local.bitmap_uuid(self.nodes.peer));
        let peer_bitmap = without_primary(self.peer.bitmap_uuid(self.nodes.local));
        if local_bitmap != 0 && local_bitmap == peer_bitmap {
            return decided(
                SyncDecision::SplitBrain {
                    auto_recoverable: true,
                },
                Rule::BitmapBoth,
            );
        }
        let both_counting = local_bitmap != 0 && peer_bitmap != 0;
        let lost_sync_start = both_counting
            && (history_holds(&self.peer.history, local_bitmap)
                || history_holds(&self.local.history, peer_bitmap));
        if lost_sync_start {
            return decided(
                SyncDecision::SplitBrain {
                    auto_recoverable: true,
                },
                Rule::BitmapBoth,
            );
        }
        let peer_ancestors: Vec<u64> = ancestors(self.peer).collect();
        let shared = ancestors(self.local).any(|bare| peer_ancestors.contains(&bare));
        if shared {
            return decided(
                SyncDecision::SplitBrain {
                    auto_recoverable: false,
                },
                Rule::HistoryBoth,
            );
        }
        None
    }
}

/// One side's identifiers as DRBD logs them during the handshake:
/// `self CURRENT:BITMAP:HISTORY0:HISTORY1 bits:N flags:F` (identifiers in 16 upper-case hex
/// digits, flags in hex).
#[derive(Debug, Clone, Copy)]
pub struct HandshakeLog<'a> {
    /// Whose identifiers: `self` or `peer`.
    pub side: Side,
    /// The identifiers.
    pub ids: &'a GenerationIds,
    /// The node whose bitmap slot is shown (the other end of the connection).
    pub bitmap_slot: NodeId,
    /// How many bits that bitmap has set.
    pub bits: u64,
}

impl fmt::Display for HandshakeLog<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.side {
            Side::Local => "self",
            Side::Peer => "peer",
        };
        let ids = self.ids;
        write!(
            f,
            "{label} {:016X}:{:016X}:{:016X}:{:016X} bits:{} flags:{:X}",
            ids.current,
            ids.bitmap_uuid(self.bitmap_slot),
            ids.history[0],
            ids.history[1],
            self.bits,
            ids.flags.bits()
        )
    }
}

#[cfg(test)]
mod tests;
