//! Inputs, outputs and status values of the replication engine.
//!
//! Everything here is plain data: the driver turns sockets and disks into these values and
//! these values back into I/O.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::after_split_brain::Resolution;
use crate::state::{ConnState, DiskState, Protocol, ReplState, Role};
use crate::uuid::{GenerationIds, NodeId, NodeSet};
use crate::violation::DisconnectReason;

/// Monotonic time in nanoseconds since an arbitrary origin chosen by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The time `duration` later (saturating).
    pub fn after(self, duration: Duration) -> Time {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(nanos))
    }

    /// How long since `earlier` (zero if `earlier` is later).
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// The driver's name for one client request; echoed in [`Action::Complete`].
pub type RequestId = u64;

/// Flags of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteFlags {
    /// Force unit access: durable before completion, locally and (protocol C) on peers.
    pub fua: bool,
}

/// A client operation on a volume.
#[derive(Debug, Clone)]
pub enum Op<P> {
    /// Write `data` (of `length` bytes) at `offset`.
    Write {
        offset: u64,
        length: u64,
        data: P,
        flags: WriteFlags,
    },
    /// Discard a range.
    Trim {
        offset: u64,
        length: u64,
        flags: WriteFlags,
    },
    /// Write zeroes to a range.
    WriteZeroes {
        offset: u64,
        length: u64,
        flags: WriteFlags,
    },
    /// Make every completed write durable, locally and (protocols B and C) on peers.
    Flush,
}

/// A local disk operation the driver must perform.
#[derive(Debug, Clone)]
pub enum DiskOp<P> {
    /// Write `data` (`length` bytes) at `offset`; with `fua`, durably.
    Write {
        offset: u64,
        length: u64,
        data: P,
        fua: bool,
    },
    /// Discard `length` bytes at `offset`.
    Trim { offset: u64, length: u64, fua: bool },
    /// Zero `length` bytes at `offset`.
    WriteZeroes { offset: u64, length: u64, fua: bool },
}

/// Names a local I/O so its completion can be matched to its cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoId {
    /// The local half of a client write with this sequence number.
    Write { seq: u64 },
    /// The local half of a client flush.
    Flush { seq: u64 },
    /// A write received from a peer.
    PeerWrite { peer: u8, seq: u64 },
    /// The flush that ends a peer's epoch.
    PeerFlush { peer: u8, epoch: u64 },
    /// A flush that makes a peer's written epochs durable before they are acknowledged
    /// (`disk-flushes yes`; one at a time, shared by every epoch written before it).
    PeerGroupFlush { peer: u8, tag: u64 },
    /// A [`Action::PersistMeta`] (metadata write, made durable before it is answered).
    Meta { seq: u64 },
    /// A sync source's read of the range a sync target requested (`id` is the target's).
    ResyncRead { peer: u8, id: u64 },
    /// A sync target's write of a range received from its source (`id` is its request's).
    ResyncWrite { peer: u8, id: u64 },
    /// An [`Action::WriteActivityLog`]: activity-log transaction `seq` of `volume`.
    ActivityLog { volume: u16, seq: u64 },
    /// A verify source's digests of its own range `id` ([`Action::LocalDigest`]).
    VerifyRead { peer: u8, id: u64 },
    /// `csums-alg`: a sync target's digests of its own range of request `id`.
    CsumRead { peer: u8, id: u64 },
    /// `csums-alg`: a sync source's digests of the range the target requested as `id`.
    CsumPeerRead { peer: u8, id: u64 },
    /// A verify target's digests of a range the peer asked for (`id` is ours, not the
    /// request's).
    VerifyPeerRead { peer: u8, id: u64 },
    /// A read a Diskless peer asked for (`id` is the peer's), answered with
    /// `local_read_done`.
    ForwardedRead { peer: u8, id: u64 },
}

/// Why a local I/O failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    /// The disk reported an I/O error.
    #[error("I/O error")]
    Io,
    /// The disk is full.
    #[error("no space left on the backing device")]
    NoSpace,
    /// The operation is not supported by the backing device.
    #[error("operation not supported by the backing device")]
    NotSupported,
    /// The request was invalid (out of range).
    #[error("invalid request")]
    Invalid,
    /// The resource cannot accept writes (not Primary, or shutting down).
    #[error("resource is not writable here")]
    NotWritable,
    /// The write's data stopped arriving (its client or peer connection broke) before it
    /// was complete; part of it may have been written.
    #[error("the write's data stopped arriving")]
    Aborted,
}

impl IoError {
    /// Whether the backing device failed the I/O, so that `on-io-error` applies and a
    /// replicated write that failed leaves this disk without it: every error (EIO and ENOSPC
    /// alike) except a payload that stopped arriving ([`IoError::Aborted`]: the connection
    /// or client broke, not the disk) and a refusal before any I/O ([`IoError::NotWritable`]).
    pub fn is_disk_error(self) -> bool {
        !matches!(self, IoError::Aborted | IoError::NotWritable)
    }
}

/// A step of an online resize (`engine/resize.rs`), in a [`PeerMessage::Resize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeStep {
    /// The node resizing asks for the size the receiver's grown device offers.
    Query,
    /// The answer to `Query`: `size_bytes` is what this device offers (0: it cannot grow).
    Offer,
    /// Grow to `size_bytes`; with `assume_clean`, the new area counts as identical.
    Apply { assume_clean: bool },
    /// The sender grew to `size_bytes`.
    Applied,
    /// The sender could not grow, or is busy.
    Refused,
}

/// A decoded message from a peer, as the engine sees it.
#[derive(Debug, Clone)]
pub enum PeerMessage<P> {
    /// A replicated write (its payload may still be arriving: see the driver's payload type).
    Data {
        seq: u64,
        epoch: u64,
        volume: u16,
        offset: u64,
        op: DiskOp<P>,
    },
    /// End of epoch `epoch`; with `flush`, make it durable before acknowledging.
    Barrier { epoch: u64, flush: bool },
    /// Keep-alive request.
    Ping,
    /// Keep-alive answer.
    PingAck,
    /// The peer received write `seq` (protocol B).
    RecvAck { seq: u64 },
    /// The peer wrote `seq` to its disk (protocol C).
    WriteAck { seq: u64 },
    /// The peer failed to write `seq`.
    NegAck { seq: u64 },
    /// The peer finished epoch `epoch`.
    BarrierAck { epoch: u64 },
    /// Every write of the epochs up to `epoch` is on every peer the sending Primary
    /// replicates to, so it is no longer one the receiver must reconcile with its other
    /// Secondaries if that Primary is lost (`engine/reconcile.rs`; DRBD's peer ack).
    /// `nodes` has bit `n` set for each node id `n` that holds them (the Primary and the peers
    /// it replicated them to); the receiver marks them for its other peers.
    PeerAck { epoch: u64, nodes: u32 },
    /// The peer's role and disk states changed.
    State {
        role: Role,
        disks: Vec<(u16, DiskState)>,
    },
    /// The peer's generation identifiers for one volume (data socket).
    SyncUuids(Box<UuidsMessage>),
    /// One RLE chunk (`meta::RleEncoder` format) of the peer's bitmap for us (data socket).
    BitmapChunk { volume: u16, chunk: Vec<u8> },
    /// The sync target asks for `length` bytes at `offset` (data socket).
    ResyncRequest {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// The sync source's data for request `id` (data socket; wire: header plus payload).
    ResyncReply {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
        data: P,
    },
    /// The sync source could not read the range of request `id` (data socket).
    ResyncNegReply {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// A Diskless node asks for `length` bytes at `offset` for its client (data socket).
    ReadRequest {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// The data of read request `id` (data socket; wire: header plus payload).
    ReadReply {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
        data: P,
    },
    /// The range of read request `id` could not be read here (data socket).
    ReadNegReply {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// The sync target wrote (`ok`) or failed to write the range of reply `id` (data socket).
    ResyncAck { id: u64, volume: u16, ok: bool },
    /// The sync target has every block it lacked, except `failed_bytes` (data socket).
    ResyncDone { volume: u16, failed_bytes: u64 },
    /// `csums-alg`: a resync request with the target's digests of the range (data socket);
    /// answered by `ResyncReply` (the data) or `ResyncInSync` (same digests, no data).
    CsumRequest {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
        digests: Vec<u8>,
    },
    /// The range of `CsumRequest` `id` has the same digests on the source: no data (data
    /// socket).
    ResyncInSync { id: u64, volume: u16 },
    /// Our own resync of `volume` with the receiver is paused (`pause-sync`, `resync-after`)
    /// or resumed (`engine/pause.rs`).
    SyncPause { volume: u16, paused: bool },
    /// A step of an online resize of `volume` (`engine/resize.rs`).
    Resize {
        volume: u16,
        size_bytes: u64,
        step: ResizeStep,
    },
    /// Mark this node possibly stale (asynchronous replication follows) or clear the mark
    /// (`engine/lag.rs`); answered by `StaleMarkAck` once durable.
    StaleMark { stale: bool },
    /// The mark (or its clearing) is durable.
    StaleMarkAck { stale: bool },
    /// The Primary no longer ships writes to the receiver, only marks them out of sync
    /// (pull-ahead: the receiver is Behind), or ships them again (`engine/ahead.rs`).
    Ahead { ahead: bool },
    /// The verify source asks for the digests of `length` bytes at `offset` (data socket).
    VerifyRequest {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// The verify target's answer to request `id` (data socket).
    VerifyReply {
        id: u64,
        volume: u16,
        offset: u64,
        length: u64,
        outcome: VerifyOutcome,
    },
    /// The verify source walked the whole volume and found `oos_bytes` out of sync (data
    /// socket).
    VerifyDone { volume: u16, oos_bytes: u64 },
}

/// Which of a connection's digest algorithms an [`Action::LocalDigest`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestAlg {
    /// `verify-alg` (online verify).
    Verify,
    /// `csums-alg` (checksum-based resync).
    Csums,
}

/// What a verify target says about a range ([`PeerMessage::VerifyReply`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyOutcome {
    /// Wire status 0.
    Digests {
        /// Bit `i`: block `i` of the range was being written on the target while it was
        /// digested, so its digest is not judged.
        written_blocks: u32,
        /// One digest per bitmap block of the range, concatenated (all of one length).
        digests: Vec<u8>,
    },
    /// The target could not read the range (or its digests broke the driver contract). Wire
    /// status 1.
    ReadFailed,
}

/// Why generation identifiers are sent ([`PeerMessage::SyncUuids`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UuidsPurpose {
    /// The sync handshake: after a connect, or again after a local change such as
    /// `primary --force`. The receiver answers with its own (if it has not sent them for this
    /// round) and both sides decide with [`crate::compare`]. Wire value 0.
    Handshake,
    /// `new-current-uuid --clear-bitmap`: the receiver takes these identifiers over and
    /// becomes UpToDate without a resync. Wire value 1.
    Adopt,
    /// The sync source starts the resync: `ids.bitmap[target]` is the new sync identifier,
    /// which the target makes its current, and `ids` are what the target adopts when the
    /// resync finishes. Wire value 2.
    SyncStart,
    /// A Primary started a new generation (a peer went away) while replicating to the
    /// receiver. A Secondary in sync with it (Established, UpToDate) makes the new current its
    /// own, as DRBD's Secondaries do, so that two Secondaries fed by one Primary keep equal
    /// generations and never resync between themselves over its writes; a sync target of
    /// the Primary takes the new identifiers as the ones it adopts when done. Wire value 3.
    Rotate,
    /// The answer to a Primary's [`UuidsPurpose::Rotate`]: the receiver processed it (adopted
    /// it, or set it aside). A Primary that rotated because a peer was lost with writes in
    /// flight completes those writes only once every peer that has them answered, so that
    /// a peer holding them never shares a generation with the lost one that lacks them
    /// (`rotate.rs`). Wire value 4 (protocol 7).
    RotateSeen,
    /// The sender decided the handshake of this volume and keeps the connection (no resync,
    /// or one starting). A peer counts towards quorum only once it accepted every volume:
    /// a handshake that one side decides while the other refuses it (a Secondary that
    /// already follows another Primary drops this one) must never lend a Primary quorum
    /// (`quorum.rs`). Wire value 5 (protocol 8).
    Accepted,
}

/// The body of [`PeerMessage::SyncUuids`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UuidsMessage {
    /// Volume number.
    pub volume: u16,
    /// Why they were sent.
    pub purpose: UuidsPurpose,
    /// The sender's role.
    pub role: Role,
    /// The sender's disk state.
    pub disk: DiskState,
    /// The sender's identifiers, with the handshake flags (`discard-my-data`,
    /// crashed-primary).
    pub ids: GenerationIds,
    /// Bits set in the sender's bitmap for the receiver.
    pub bitmap_bits: u64,
    /// The sender's volume size in bytes.
    pub size_bytes: u64,
    /// The sender's bytes per bitmap bit.
    pub bitmap_granularity_bytes: u32,
    /// The Primary whose writes the sender follows, or followed last (`reconcile.rs`).
    pub followed: Option<Followed>,
}

/// A Primary a Secondary follows or followed, and how far: its writes carry sequence numbers
/// that increase in the order every peer receives them, so of two Secondaries that followed
/// one Primary on one generation, the one that received the later write holds every write
/// the other received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Followed {
    /// The Primary's node id.
    pub node: u8,
    /// The sequence number of the last write received from it.
    pub seq: u64,
}

/// What the driver persists for one volume ([`Action::PersistMeta`]): the superblock fields
/// that the engine changes.
///
/// Mapping to `meta::Superblock`: `current_uuid`/`history_uuids`/`resync_goal_uuid` =
/// `ids.current`/`ids.history`/`ids.resync_goal`; each peer slot's `bitmap_uuid` =
/// `ids.bitmap[node id]`; `flags.consistent` = [`VolumeMeta::consistent`]; `flags.was_up_to_date` =
/// [`VolumeMeta::was_up_to_date`]; `flags.primary_indicator` = `primary`;
/// `flags.crashed_primary` = `ids.flags.crashed_primary`; each peer slot's `flags.outdated` =
/// whether its node is in [`VolumeMeta::departed`]; `followed_primary` = [`VolumeMeta::followed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMeta {
    /// The generation identifiers (flags included).
    pub ids: GenerationIds,
    /// The disk state.
    pub disk: DiskState,
    /// Whether this node is Primary (found set on restart: the Primary crashed).
    pub primary: bool,
    /// Replicated to asynchronously: may lack acknowledged writes (`engine/lag.rs`).
    pub possibly_stale: bool,
    /// Absent peers last known Outdated (they departed gracefully, or were outdated before
    /// they left): they cannot be promoted without connecting first, so quorum leaves them
    /// out, across a restart too (DRBD's `MDF_PEER_OUTDATED`; `engine/leave.rs`).
    pub departed: NodeSet,
    /// The Primary this node followed last, once it lost one (`engine/reconcile.rs`): which
    /// of two Secondaries received its later write decides their reconciliation, across a
    /// restart too.
    pub followed: Option<Followed>,
}

impl VolumeMeta {
    /// Writes the superblock fields the engine owns into `superblock` (the mapping in the
    /// type's documentation); the driver then writes the superblock. One place, so the
    /// daemon and the simulator persist the same thing.
    pub fn apply_to(&self, superblock: &mut meta::Superblock) {
        superblock.current_uuid = self.ids.current;
        superblock.history_uuids = self.ids.history;
        superblock.resync_goal_uuid = self.ids.resync_goal;
        for slot in &mut superblock.peers {
            if let Some(uuid) = slot
                .node_id
                .and_then(|node| self.ids.bitmap.get(usize::from(node)))
            {
                slot.bitmap_uuid = *uuid;
            }
            if let Some(node) = slot.node_id.and_then(|node| NodeId::new(node).ok()) {
                slot.flags.outdated = self.departed.contains(node);
            }
        }
        superblock.flags.consistent = self.consistent();
        superblock.flags.was_up_to_date = self.was_up_to_date();
        superblock.flags.primary_indicator = self.primary;
        superblock.flags.crashed_primary = self.ids.flags.crashed_primary;
        superblock.flags.possibly_stale = self.possibly_stale;
        superblock.followed_primary = self.followed.map(|f| meta::FollowedPrimary {
            node_id: f.node,
            seq: f.seq,
        });
    }

    /// The followed Primary `superblock` records (the reverse of [`VolumeMeta::apply_to`]),
    /// for [`crate::VolumeConfig::followed`].
    pub fn followed_in(superblock: &meta::Superblock) -> Option<Followed> {
        superblock.followed_primary.map(|f| Followed {
            node: f.node_id,
            seq: f.seq,
        })
    }

    /// The departed peers `superblock` records (the reverse of [`VolumeMeta::apply_to`]'s
    /// per-peer `outdated` flags), for [`crate::VolumeConfig::departed`].
    pub fn departed_in(superblock: &meta::Superblock) -> NodeSet {
        superblock
            .peers
            .iter()
            .filter(|slot| slot.flags.outdated)
            .filter_map(|slot| slot.node_id.and_then(|node| NodeId::new(node).ok()))
            .fold(NodeSet::EMPTY, NodeSet::with)
    }

    /// Whether the data is consistent (not a resync target, never synced or failed).
    pub fn consistent(&self) -> bool {
        matches!(
            self.disk,
            DiskState::UpToDate | DiskState::Outdated | DiskState::Consistent
        )
    }

    /// Whether the data was UpToDate.
    pub fn was_up_to_date(&self) -> bool {
        self.disk == DiskState::UpToDate
    }

    /// The disk state to attach with, from the superblock flags: consistent and UpToDate →
    /// UpToDate; consistent only → Outdated; otherwise Inconsistent.
    pub fn attach_disk_state(consistent: bool, was_up_to_date: bool) -> DiskState {
        match (consistent, was_up_to_date) {
            (true, true) => DiskState::UpToDate,
            (true, false) => DiskState::Outdated,
            (false, _) => DiskState::Inconsistent,
        }
    }
}

/// What the engine asks the driver to do.
#[derive(Debug, Clone)]
pub enum Action<P> {
    /// Perform a local disk operation; answer with `local_done(io)`.
    LocalWrite {
        io: IoId,
        volume: u16,
        op: DiskOp<P>,
    },
    /// Make all completed local writes durable; answer with `local_done(io)`.
    LocalFlush { io: IoId },
    /// Send a write to a peer on the data socket; report `peer_sent` once it is in the socket.
    SendData {
        peer: u8,
        seq: u64,
        epoch: u64,
        volume: u16,
        op: DiskOp<P>,
    },
    /// Send an epoch boundary on the data socket.
    SendBarrier { peer: u8, epoch: u64, flush: bool },
    /// Send a control message (acks, pings, state) on the control socket.
    SendControl { peer: u8, message: PeerMessage<P> },
    /// Send a handshake, bitmap or resync message on the **data** socket, in order with
    /// `SendData` and `SendBarrier` for the same peer.
    SendOnData { peer: u8, message: PeerMessage<P> },
    /// Read `length` bytes at `offset`; answer with `local_read_done(io)`.
    LocalRead {
        io: IoId,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// Read `length` bytes at `offset` and digest them with the connection's `alg`, one
    /// digest per `block_bytes` block (the last block may be shorter: digest what there is),
    /// and answer with `local_digest_done(io)` with the digests concatenated. Every digest has
    /// the algorithm's length; `length / block_bytes` (rounded up) digests must fit in
    /// [`crate::VERIFY_DIGESTS_BYTES_MAX`], or the range counts as unreadable.
    LocalDigest {
        io: IoId,
        volume: u16,
        offset: u64,
        length: u64,
        block_bytes: u32,
        alg: DigestAlg,
    },
    /// Every metadata write (this, an evicting [`Action::WriteActivityLog`], the driver's
    /// bitmap write-backs) first makes the data disk's completed writes durable: an evicted
    /// extent or a cleared bit is only true once the data behind it is. (Internal metadata
    /// shares the data file's flush; external metadata needs a flush of the data disk first.)
    ///
    /// Write `meta` to the volume's superblock and make it durable (after writing the dirty
    /// bitmap pages: [`crate::Engine::take_dirty_bitmap_pages`]); answer with
    /// `local_done(io)`. At most one is in flight per volume, so they never race.
    PersistMeta {
        io: IoId,
        volume: u16,
        meta: Box<VolumeMeta>,
    },
    /// Write an activity-log transaction of `volume` (`io` is [`IoId::ActivityLog`]), in this
    /// order: every `bitmap_pages` entry `(peer node id, page index, 4 KiB image)` at that
    /// page of the peer's bitmap in the metadata area, made durable; then `block` (4 KiB) at
    /// `offset_bytes` **within the activity-log ring region** (the driver adds the region's
    /// base, `meta::Layout::al_ring`), made durable. Stop at the first failure. Answer with
    /// `local_done(io)`. The client writes waiting for it are issued only after the answer
    /// (and fail with [`IoError::Io`] if it is an error). At most one is in flight per volume.
    ///
    /// `evicts`: the transaction makes an extent cold (this one's evictions, or those of a
    /// transaction that failed). Only then must the data disk's completed writes be made
    /// durable before it, as before a [`Action::PersistMeta`]: a transaction that only adds
    /// hot extents claims nothing about data already written, so it needs no data flush
    /// (with external metadata that flush is the costly part of a sequential stream).
    WriteActivityLog {
        io: IoId,
        volume: u16,
        offset_bytes: u64,
        block: Vec<u8>,
        bitmap_pages: Vec<(u8, u64, Vec<u8>)>,
        evicts: bool,
    },
    /// A split brain was detected with `peer` on `volume`. Run the `initial-split-brain`
    /// handler; if `resolution` is [`Resolution::Disconnect`] (the peer is now StandAlone)
    /// also the `split-brain` handler.
    SplitBrain {
        peer: u8,
        volume: u16,
        resolution: Resolution,
        detail: String,
    },
    /// Online verify found `length` bytes at `offset` differing on `peer`; they are marked out
    /// of sync for it (log it, show it in events).
    VerifyFound {
        peer: u8,
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// The verify of `volume` with `peer` walked the whole volume: `oos_bytes` found out of
    /// sync, `skipped_bytes` not judged (written meanwhile). Write the dirty bitmap pages; run
    /// the `out-of-sync` handler if `oos_bytes` is not 0.
    VerifyFinished {
        peer: u8,
        volume: u16,
        oos_bytes: u64,
        skipped_bytes: u64,
    },
    /// Volume `volume` is Diskless now (`engine/detach.rs`): `failed` after a local I/O error
    /// (log it), otherwise by the administrator's `detach`. Stop local data I/O on it (reads
    /// go to [`crate::Engine::read_source`]); with `call_handler`, run the `local-io-error`
    /// handler.
    Detached {
        volume: u16,
        failed: bool,
        call_handler: bool,
    },
    /// A peer resizing `volume` asks what this node's grown device offers: call
    /// [`crate::Engine::resize_offer`] with the largest data size the backing device gives
    /// now (`u64::MAX` for a volume without a disk of its own), or 0 if it cannot grow.
    ResizeOffer { peer: u8, volume: u16 },
    /// Grow `volume` to `size_bytes` (`engine/resize.rs`): take
    /// [`crate::Engine::grown_bitmaps`] with the range the metadata move must resync (all of
    /// the new area, or with `assume_clean` only what the old device held), move the metadata
    /// to the grown device with them, widen the data disk and the exports, then call
    /// [`crate::Engine::grown`].
    Grow {
        volume: u16,
        size_bytes: u64,
        assume_clean: bool,
    },
    /// Run the `fence-peer` handler against `peer` (with `fencing` set, after this Primary
    /// lost it, or before a promotion without it); answer with `fence_peer_done(peer,
    /// status)` once it exited or was killed after its timeout. At most one per peer is
    /// outstanding.
    FencePeer { peer: u8 },
    /// Close the connection to a peer (the driver reconnects unless it is StandAlone).
    Disconnect {
        peer: u8,
        state: ConnState,
        reason: DisconnectReason,
    },
    /// Answer a client request.
    Complete {
        request: RequestId,
        result: Result<(), IoError>,
    },
    /// Answer a client read of a Diskless volume ([`crate::Engine::read_through_peer`]) with
    /// the data a peer sent, or an error.
    ReadDone {
        request: RequestId,
        result: Result<P, IoError>,
    },
    /// Something changed that status and events show.
    StateChanged,
}

/// Why a state change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// A connected peer is Primary and two primaries are not allowed.
    #[error("peer {peer} is Primary; only one Primary is allowed")]
    PeerIsPrimary { peer: String },
    /// The export is open for writing.
    #[error("the device is held open by {count} client(s)")]
    DeviceInUse { count: u32 },
    /// No such peer in this resource.
    #[error("no peer with node-id {0}")]
    NoSuchPeer(u8),
    /// The local disk is not UpToDate and promotion was not forced.
    #[error("local disk is {0}; refusing to become Primary without --force")]
    NotUpToDate(DiskState),
    /// The local disk cannot be made UpToDate by force (a sync target mid-resync, or no
    /// disk).
    #[error("local disk is {0}; it cannot be forced UpToDate")]
    CannotForce(DiskState),
    /// The request needs a Secondary.
    #[error("this node is Primary; demote it first")]
    IsPrimary,
    /// `invalidate` needs a connected peer with UpToDate data.
    #[error("no connected peer has UpToDate data to resync from")]
    NoSyncSource,
    /// The request needs the peer connected.
    #[error("peer {peer} is not connected")]
    PeerNotConnected { peer: String },
    /// A handshake, resync or verify with a peer is running; the request must wait for it.
    #[error("a handshake, resync or verify with peer {peer} is in progress")]
    SyncInProgress { peer: String },
    /// No peer is connected.
    #[error("no peer is connected")]
    NoConnectedPeer,
    /// Promotion needs quorum.
    #[error(
        "no quorum: {0}; a node without quorum cannot become Primary (set `quorum off` with \
         adjust to override)"
    )]
    NoQuorum(String),
    /// A setting given to `adjust` is out of range.
    #[error("invalid setting: {0}")]
    InvalidSetting(String),
    /// The request needs a disk and this node has none (or it is detached).
    #[error("this node has no disk for the resource (Diskless); attach one first")]
    Diskless,
    /// `attach` needs a Diskless volume.
    #[error("the disk is {0}; only a Diskless (detached) volume can be attached")]
    NotDetached(DiskState),
    /// `attach` on a Primary: its disk would be a sync target under a Primary, which tandem
    /// does not do yet.
    #[error(
        "attach on a Primary is not supported: demote it (the peer serves the data meanwhile) and \
         attach on the Secondary"
    )]
    AttachOnPrimary,
    /// The node went down uncleanly as a Secondary and has not met a peer since: writes its
    /// disk cache held may be lost, and only a peer's handshake tells which.
    #[error(
        "this node went down uncleanly as a Secondary and has not met a peer since: replicated \
         writes its disk cache held may be lost; connect it to a peer first, or promote with \
         --force to accept that"
    )]
    UncleanSinceRestart,
    /// The node may lack writes a Primary acknowledged under asynchronous replication.
    #[error(
        "this node may lack acknowledged writes (it was replicated to asynchronously and has not \
         caught up); promote with --force to accept that"
    )]
    PossiblyStale,
    /// The administrator marked this node's data to be discarded in a split brain with the
    /// peer (`connect --discard-my-data`); a Primary's data cannot be the one discarded.
    #[error(
        "this node's data is to be discarded in its split brain with peer {peer} (connect \
         --discard-my-data); let that resync run first, or promote with --force to keep this data \
         after all"
    )]
    DataToBeDiscarded { peer: String },
    /// `resume-io` with nothing suspended by `suspend-io` or fencing.
    #[error("I/O is not suspended (by suspend-io or fencing)")]
    NotSuspended,
    /// Promotion waits for the peers it counts towards quorum to answer a ping (call again).
    #[error(
        "confirming quorum: the peers it counts were pinged; promotion waits for their answers"
    )]
    ConfirmingPeers,
    /// Promotion waits for `fence-peer` against an absent peer.
    #[error("fencing peer {peer} (the fence-peer handler runs); promotion waits for it")]
    FencingPeer { peer: String },
    /// `fence-peer` could not make sure the absent peer cannot be promoted.
    #[error(
        "the fence-peer handler failed for peer {peer} (status {status}); refusing to become \
         Primary without --force"
    )]
    PeerNotFenced { peer: String, status: i32 },
    /// `resize` cannot start (the reason says why).
    #[error("{0}")]
    Resize(String),
    /// Online verify compares UpToDate data only.
    #[error(
        "verify with peer {peer} needs UpToDate disks on both sides (local {local}, peer \
         {peer_disk})"
    )]
    VerifyNeedsUpToDate {
        peer: String,
        local: DiskState,
        peer_disk: DiskState,
    },
    /// `outdate` while connected: the disk states follow from the connection.
    #[error(
        "connected to peer {peer}; a connected node is not outdated by hand (disconnect first)"
    )]
    OutdateWhileConnected { peer: String },
    /// `forget-peer` of a connected peer.
    #[error("peer {peer} is connected; disconnect it before forgetting it")]
    ForgetConnected { peer: String },
    /// `outdate` of a volume without consistent data.
    #[error(
        "the disk is {0}; only consistent data (UpToDate or Consistent) can be marked Outdated"
    )]
    NotConsistent(DiskState),
}

/// A snapshot of everything `status` shows for one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineStatus {
    /// Our node id.
    pub node_id: u8,
    /// Our role.
    pub role: Role,
    /// Our volumes.
    pub volumes: Vec<VolumeStatus>,
    /// Our peers.
    pub peers: Vec<PeerStatus>,
}

/// Local state of one volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeStatus {
    /// Volume number.
    pub volume: u16,
    /// Local disk state.
    pub disk: DiskState,
    /// Exported size in bytes.
    pub size_bytes: u64,
    /// Bytes written by clients.
    pub written_bytes: u64,
    /// Client writes in flight.
    pub upper_pending: u64,
    /// Local disk operations in flight.
    pub lower_pending: u64,
    /// Activity-log transactions written (`al-writes`).
    #[serde(default)]
    pub al_writes: u64,
    /// Bitmap pages handed to the driver to write (`bm-writes`): with activity-log
    /// transactions and through [`crate::Engine::take_dirty_bitmap_pages`].
    #[serde(default)]
    pub bm_writes: u64,
    /// Replicated to asynchronously and not caught up: promotion needs `--force`.
    #[serde(default)]
    pub possibly_stale: bool,
    /// Went down uncleanly as a Secondary and met no peer since: promotion needs `--force`
    /// ([`crate::StateError::UncleanSinceRestart`]).
    #[serde(default)]
    pub unclean_since_restart: bool,
}

/// State of one peer connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// Peer node id.
    pub node_id: u8,
    /// Connection state.
    pub connection: ConnState,
    /// Peer's role as last reported.
    pub role: Role,
    /// Replication protocol in effect on this connection.
    pub protocol: Protocol,
    /// Unconfirmed data and the asynchronous-replication state.
    #[serde(default)]
    pub lag: crate::LagStatus,
    /// Why the last connection ended, if it did.
    pub last_error: Option<String>,
    /// Writes sent and not yet acknowledged as the protocol requires.
    pub unacked: u64,
    /// Per volume.
    pub volumes: Vec<PeerVolumeStatus>,
}

/// State of one volume towards one peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerVolumeStatus {
    /// Volume number.
    pub volume: u16,
    /// Replication state.
    pub replication: ReplState,
    /// The peer's disk state as we know it.
    pub peer_disk: DiskState,
    /// Bytes sent to the peer.
    pub sent_bytes: u64,
    /// Bytes received from the peer.
    pub received_bytes: u64,
    /// Bytes that may differ on the peer.
    pub out_of_sync_bytes: u64,
    /// Writes received from the peer not yet written.
    pub pending: u64,
    /// The running resync (SyncSource / SyncTarget) or verify (VerifyS / VerifyT), if any.
    pub resync: Option<ResyncProgress>,
    /// Why a resync with this peer is (or would be) suspended.
    #[serde(default)]
    pub resync_suspended: crate::SyncPause,
    /// Bytes the latest (or running) online verify found out of sync.
    #[serde(default)]
    pub verify_oos_bytes: u64,
    /// Bytes the latest (or running) online verify could not judge (written meanwhile).
    #[serde(default)]
    pub verify_skipped_bytes: u64,
}

/// Progress of a resync, for `done:NN.NN` and the rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResyncProgress {
    /// Bytes to move when the resync started (`rs-total`).
    pub total_bytes: u64,
    /// Bytes moved and confirmed so far.
    pub done_bytes: u64,
    /// Bytes that could not be read or written (they stay out of sync).
    pub failed_bytes: u64,
    /// Resync requests in flight, in bytes (`rs-in-flight`).
    pub in_flight_bytes: u64,
    /// Bytes per second moved over the last few seconds.
    pub rate_bytes_per_s: u64,
}

impl ResyncProgress {
    /// Percent done, as `drbdsetup status` prints it (`done:37.50`): 100 when nothing was to
    /// be moved.
    pub fn percent_done(&self) -> f64 {
        if self.total_bytes == 0 {
            return 100.0;
        }
        let done = self
            .done_bytes
            .saturating_add(self.failed_bytes)
            .min(self.total_bytes);
        // In hundredths of a percent, which is all `done:NN.NN` shows: at most 10000.
        let hundredths = u128::from(done) * 10_000 / u128::from(self.total_bytes);
        f64::from(u32::try_from(hundredths).unwrap_or(10_000)) / 100.0
    }
}

/// How [`crate::Engine::promote`] treats a disk that is not UpToDate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotion {
    /// `primary`: refused unless every disk is UpToDate and not possibly stale.
    Normal,
    /// `primary --force`: a disk that is not UpToDate becomes UpToDate on a new generation
    /// (the source of a full sync), and a possibly-stale mark is overridden.
    Forced,
}
