//! The replication engine of one resource: the primary's write path and the role rules.
//!
//! Invariants (asserted where they can be):
//! - `in_flight` holds every submitted write that is not yet completed to the client, keyed by
//!   its sequence number; sequence numbers only grow.
//! - Two writes in `in_flight` never overlap on the same volume (`conflicts` holds back the
//!   later one until the earlier completes).
//! - A write is completed at most once, and only when `write_is_done` holds.
//! - `epoch` only grows. After a write completes, the next write opens a new epoch, so no
//!   epoch contains two writes where one was submitted after the other completed.
//! - Each peer's transfer log holds exactly the writes sent to it whose disk write the peer has
//!   not yet confirmed (by write ack or barrier ack); on disconnect they become out of sync.
//! - A write that needs a metadata change (a new current generation identifier, the primary
//!   indicator) is completed only after that change is persisted (`InFlight::meta_version`).
//! - Bits of a peer's bitmap are cleared only by a confirmed resync (or an administrative
//!   `new-current-uuid --clear-bitmap`), never as a side effect.
//! - With an activity log, a client write is issued only once its extents are hot in a durable
//!   transaction, and keeps them until it is complete and confirmed by every peer
//!   (`activity_log.rs`). Writes held for the log (`held`) count as in flight for the overlap
//!   rules.
//!
//! The handshake and bitmap exchange are in `handshake.rs`, the resync in `resync.rs`, the
//! metadata (generation identifiers, persistence) in `persist.rs`, the activity log in
//! `activity_log.rs`, online verify in `verify.rs`, checksum-based resync in `csums.rs`,
//! fencing in `fence.rs`.

mod activity_log;
mod ahead;
mod csums;
mod detach;
mod fence;
mod forget;
mod handshake;
mod lag;
mod leave;
mod outdate;
mod pause;
mod persist;
mod quorum;
mod reconcile;
mod resize;
mod resync;
mod rotate;
mod secondary_log;
mod stats;
mod suspend;
pub(crate) mod verify;

pub use ahead::{Congestion, CongestionPolicy, AHEAD_DWELL_MIN, COOL_DOWN_MAX};
pub use detach::OnIoError;
pub use fence::{fence_outcome, FencePolicy, FENCE_PEER_IS_PRIMARY};
pub use handshake::BITMAP_CHUNK_BYTES_MAX;
pub use lag::{LagBound, LagStatus, LagThrottle, LAG_THROTTLE_STEPS};
pub use pause::SyncPause;
pub use quorum::{OnNoQuorum, QuorumConfig, QuorumRule};
pub use resize::ResizeRequest;
pub use resync::RESYNC_REQUEST_BYTES_MAX;
pub use stats::{LocalStats, PeerStats};
pub use verify::{VERIFY_DIGESTS_BYTES_MAX, VERIFY_REQUEST_BYTES_MAX};

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use meta::{ActivityLog, Bitmap};

use crate::after_split_brain::SplitBrainPolicies;
use crate::extent::Extent;
use crate::liveness::Liveness;
use crate::receiver::Receiver;
use crate::resync_rate::{ResyncRateConfig, ResyncRateController};
use crate::state::{ConnState, DiskState, Protocol, ReplState, Role};
use crate::sync::SyncState;
use crate::types::{
    Action, DiskOp, EngineStatus, Followed, IoError, IoId, Op, PeerMessage, PeerStatus,
    PeerVolumeStatus, Promotion, RequestId, StateError, Time, VolumeStatus, WriteFlags,
};
use crate::uuid::{GenerationIds, HandshakeNodes, NodeId, NodeSet, SyncError};
use crate::{DisconnectReason, PeerViolation};

pub use leave::LEAVE_PERSIST_MAX;

/// Period of the housekeeping in [`Engine::tick`] the driver should keep to.
pub const TICK_INTERVAL: Duration = Duration::from_millis(100);

/// Default bitmap granularity when the driver gives no bitmap for a peer.
pub const BITMAP_GRANULARITY_BYTES_DEFAULT: u32 = 4096;

/// One volume as the driver found it on attach (its metadata).
#[derive(Debug, Clone)]
pub struct VolumeConfig {
    /// Volume number.
    pub number: u16,
    /// Usable size in bytes.
    pub size_bytes: u64,
    /// The generation identifiers from the superblock.
    pub ids: GenerationIds,
    /// The disk state from the superblock flags ([`crate::VolumeMeta::attach_disk_state`]).
    pub disk: DiskState,
    /// One bitmap per peer, loaded from disk; a peer without one gets an all-clear bitmap at
    /// [`BITMAP_GRANULARITY_BYTES_DEFAULT`]. All must cover `size_bytes` at the same
    /// granularity as the peer's.
    pub bitmaps: Vec<PeerBitmap>,
    /// The superblock's primary indicator was set: this node crashed while Primary. The
    /// handshake flag `crashed_primary` is raised (it decides the resync direction). Without
    /// an activity log every block may differ, so every bitmap is set (a full resync towards
    /// every peer); with one, the driver has already marked the recovered hot extents.
    pub crashed_primary: bool,
    /// This node went down uncleanly while not Primary, with more than one peer: the driver
    /// marked the activity log's hot extents (the extents of replicated writes some peer may
    /// not have settled, `engine/secondary_log.rs`) for every peer, and the writes its disk
    /// cache held may be lost. The handshake flag `crashed_secondary` is raised: towards a
    /// peer that did not crash, this node is the target of those blocks.
    pub unclean: bool,
    /// The volume's activity log (`al-updates yes`), new: nothing in flight, starting at the
    /// sequence number after the ring the driver formatted, and covering the whole volume.
    /// None (or a log with `AlUpdates::Disabled`): no log, `al-updates no`.
    pub activity_log: Option<ActivityLog>,
    /// The superblock says this node may lack writes acknowledged under asynchronous
    /// replication ([`crate::VolumeMeta::possibly_stale`]).
    pub possibly_stale: bool,
    /// The peers the superblock records as departed: their disks start Outdated
    /// ([`crate::VolumeMeta::departed`]).
    pub departed: NodeSet,
    /// The Primary the superblock records this node followed last
    /// ([`crate::VolumeMeta::followed`]).
    pub followed: Option<Followed>,
}

impl VolumeConfig {
    /// A freshly created volume: identifiers just created, Inconsistent, clear bitmaps.
    pub fn fresh(number: u16, size_bytes: u64) -> VolumeConfig {
        VolumeConfig {
            number,
            size_bytes,
            ids: GenerationIds::just_created(),
            disk: DiskState::Inconsistent,
            bitmaps: Vec::new(),
            crashed_primary: false,
            unclean: false,
            activity_log: None,
            possibly_stale: false,
            departed: NodeSet::EMPTY,
            followed: None,
        }
    }
}

/// Bitmap pages of one volume for one peer, taken for writing
/// ([`Engine::take_dirty_bitmap_pages`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BitmapPages {
    /// `(page index, 4 KiB image)`, ascending.
    pub pages: Vec<(u64, Vec<u8>)>,
    /// Whether a bit was cleared in one of them since it was last taken. Writing such a page
    /// records blocks as in sync, so the data disk's completed writes must be durable first;
    /// pages whose bits were only set can be written without that.
    pub clears: bool,
}

/// The bitmap of one volume for one peer.
#[derive(Debug, Clone)]
pub struct PeerBitmap {
    /// The peer's node id.
    pub peer: u8,
    /// Its out-of-sync bits.
    pub bitmap: Bitmap,
}

/// Static description of one peer and its connection's settings.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// The peer's node id.
    pub node_id: u8,
    /// The peer's name (for messages).
    pub name: String,
    /// Replication protocol of this connection.
    pub protocol: Protocol,
    /// Writes per epoch before a barrier is forced (`max-epoch-size`).
    pub max_epoch_size: u32,
    /// Idle time before a ping (`ping-int`).
    pub ping_interval: Duration,
    /// How long to wait for a ping answer (`ping-timeout`).
    pub ping_timeout: Duration,
    /// How long a peer may take to answer a request (`timeout`).
    pub timeout: Duration,
    /// Missed timeouts on one write before the peer is dropped (`ko-count`; 0 = never).
    pub ko_count: u32,
    /// `max-buffers` in 4 KiB pages: also the bound of resync data in flight.
    pub max_buffers_pages: u32,
    /// `resync-rate` and the `c-*` options.
    pub resync: ResyncRateConfig,
    /// `after-sb-0pri`, `after-sb-1pri`, `after-sb-2pri`.
    pub split_brain: SplitBrainPolicies,
    /// `csums-alg` is set: as sync target, send the digests of each range with its request,
    /// so that ranges the source has with the same digests move no data.
    pub csums: bool,
    /// `disk-flushes`: acknowledge an epoch only once a flush made it durable (DRBD's
    /// default). Off: acknowledged once written, and a power failure of this node may lose
    /// writes the Primary no longer tracks.
    pub durable_acks: bool,
    /// `on-congestion pull-ahead` and its thresholds; None for `block` (see `ahead.rs`).
    pub congestion: Option<Congestion>,
}

/// Configuration of an engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Our node id.
    pub node_id: u8,
    /// Our volumes, sorted by number.
    pub volumes: Vec<VolumeConfig>,
    /// Our peers.
    pub peers: Vec<PeerConfig>,
    /// Fresh randomness from the driver (a new value on every start): generation identifiers
    /// are derived from it deterministically.
    pub random_seed: u64,
}

/// A client write in flight.
#[derive(Debug)]
struct InFlight {
    request: RequestId,
    epoch: u64,
    volume: u16,
    extent: Extent,
    local: Stage,
    /// One per peer slot: how far the write got on that peer.
    peers: Vec<PeerStage>,
    /// The metadata version that must be persisted before the write completes (0: none).
    meta_version: u64,
    /// When the local write was issued (for the local write latency).
    started: Time,
    /// Bit `slot` set: the peer in that slot wrote it (its `WriteAck`); what a Diskless
    /// volume's write completes on (`detach.rs`).
    written_on: u64,
    /// Peer slots that must answer a rotation before the write completes, each with the
    /// count of rotations sent to it that must be answered (`rotate.rs`). Empty nearly always.
    rotation_answers: Vec<(usize, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pending,
    Done(Result<(), IoError>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerStage {
    /// Not sent (the peer was not connected); its blocks are marked out of sync.
    Skipped,
    /// Queued for the socket.
    Queued { since: Time },
    /// In the socket (protocol A is satisfied).
    Sent { since: Time },
    /// Receipt acknowledged (protocol B is satisfied).
    Received { since: Time },
    /// Written on the peer, or failed there and marked out of sync (protocol C is satisfied).
    Settled,
}

/// A flush in flight.
#[derive(Debug)]
struct FlushInFlight {
    request: RequestId,
    epoch: u64,
    local: Stage,
    /// Peers whose barrier ack we wait for.
    waiting_for: Vec<u8>,
    /// A Diskless volume's data is only on the peers: every connected peer's barrier ack is
    /// waited for (whatever the protocol), and the flush succeeds only if at least one peer
    /// acknowledged it (`detach.rs`).
    needs_peers: bool,
    /// A peer acknowledged the flush's barrier.
    acked: bool,
}

/// A write waiting for an overlapping write to complete.
#[derive(Debug)]
struct Waiting<P> {
    request: RequestId,
    volume: u16,
    op: Op<P>,
}

/// An entry of a peer's transfer log.
#[derive(Debug, Clone, Copy)]
struct Sent {
    seq: u64,
    /// When it was handed to the peer's queue (the lag's age).
    since: Time,
    epoch: u64,
    volume: u16,
    extent: Extent,
}

/// Everything about one peer.
#[derive(Debug)]
struct Peer<P> {
    config: PeerConfig,
    node: NodeId,
    /// This node and the peer (distinct).
    nodes: HandshakeNodes,
    connection: ConnState,
    role: Role,
    disks: Vec<DiskState>,
    last_error: Option<String>,
    liveness: Liveness,
    transfer_log: VecDeque<Sent>,
    receiver: Receiver<P>,
    /// Per volume slot: which blocks may differ on the peer.
    bitmaps: Vec<Bitmap>,
    /// Per volume slot: handshake and resync state.
    syncs: Vec<SyncState>,
    sent_bytes: Vec<u64>,
    received_bytes: Vec<u64>,
    /// `connect --discard-my-data`: used by the next handshake, then cleared; also cleared
    /// when a resync from any peer starts to replace this node's data (`sync_start`).
    discard_my_data: bool,
    /// A validated controller, cloned for each resync.
    rate: ResyncRateController,
    /// Per volume slot: what the latest online verify found.
    verify_counts: Vec<verify::VerifyCounts>,
    /// Per volume slot: `pause-sync` towards this peer (`engine/pause.rs`).
    user_paused: Vec<bool>,
    /// Per volume slot: the peer paused its side of the resync.
    peer_paused: Vec<bool>,
    /// The protocol in effect (`engine/lag.rs`); `config.protocol` is the configured one.
    protocol: Protocol,
    /// The protocol last asked for by [`Engine::set_protocol`].
    wanted_protocol: Protocol,
    async_state: lag::AsyncState,
    lag_bound: Option<LagBound>,
    /// Bytes the lag throttle lets in before the next confirmation (`engine/lag.rs`).
    lag_credit: u64,
    /// How fast the peer confirms its backlog (`engine/lag.rs`).
    drain: lag::DrainMeter,
    /// A `StaleMarkAck` to send once this metadata version is durable (secondary side).
    stale_ack: Option<(bool, u64)>,
    /// Confirmations since the driver last took them (`engine/stats.rs`).
    stats: PeerStats,
    /// Pull-ahead episodes (`ahead.rs`).
    ahead: ahead::AheadTrack,
    /// Per volume slot: the peer has no disk of its own (`disk none;`: it announced size 0),
    /// so no bitmap is kept for it (DRBD's `--bitmap=no`). Set and cleared by handshakes.
    bitmap_free: Vec<bool>,
    /// `fencing` of the connection and where fencing of the peer stands (`fence.rs`).
    fence_policy: FencePolicy,
    fence: fence::FenceState,
    /// An administrative departure from this Primary peer under way (`leave.rs`).
    leaving: Option<leave::Leaving>,
    /// Per volume slot: the identifiers the peer last sent while connected (handshake, or a
    /// Secondary's rotation notice); cleared on disconnect (`rotate.rs`, left behind).
    known_ids: Vec<Option<Box<GenerationIds>>>,
    /// Rotations sent to the peer and answers received this connection (`rotate.rs`).
    rotations: rotate::RotationCount,
    /// Per volume slot: the current this node left by the oldest rotation the peer has not
    /// answered (0: none), which the peer may still be on (`rotate.rs`, unanswered).
    rotated_from: Vec<u64>,
    /// Per volume slot: the peer accepted this connection's handshake
    /// ([`UuidsPurpose::Accepted`]); cleared on connect and disconnect (`quorum.rs`).
    accepted: Vec<bool>,
    /// Per volume slot: the peer said, this connection (since its last handshake), that its
    /// disk there is not UpToDate, so it cannot be promoted without `--force`; never cleared
    /// by a later UpToDate report within the round. A peer this node resyncs counts toward
    /// quorum only once this is set (`quorum.rs`); cleared on connect and disconnect.
    unpromotable: Vec<bool>,
    /// Per volume: our handshake waits until the metadata no longer records this peer as
    /// departed (`leave.rs`); with the peer's handshake if it came meanwhile.
    handshake_held: Vec<Option<leave::HeldHandshake>>,
    /// Per volume slot: replicated writes received from this peer (our Primary) that no peer
    /// ack covers yet (`reconcile.rs`).
    unsettled: Vec<reconcile::Unsettled>,
    /// As Primary: the newest epoch this peer acknowledged this connection (`reconcile.rs`).
    acked_epoch: u64,
    /// Per volume slot: the peer lost the Primary this node still follows and holds bits for
    /// it; this node asks it for a new handshake once it loses that Primary too
    /// (`reconcile.rs`). Cleared on connect and disconnect.
    reconcile_owed: Vec<bool>,
    /// As a Secondary: the activity-log extents pinned for this peer's unsettled writes and
    /// the messages waiting for them (`secondary_log.rs`).
    log: secondary_log::PeerLog<P>,
    /// The sequence number of the last write received from this peer in this connection.
    last_seq: u64,
}

impl<P> Peer<P> {
    /// Connected, with the generation handshake decided on every volume (no longer `Off`
    /// or waiting for the peer's identifiers).
    fn handshake_decided(&self) -> bool {
        self.connection == ConnState::Connected
            && self
                .syncs
                .iter()
                .all(|s| !matches!(s, SyncState::Off | SyncState::WaitUuids { .. }))
    }
}

/// Local state of one volume.
#[derive(Debug)]
struct Volume {
    number: u16,
    size_bytes: u64,
    disk: DiskState,
    /// `on-io-error` of this volume.
    on_io_error: OnIoError,
    ids: GenerationIds,
    written_bytes: u64,
    meta: persist::MetaIo,
    /// The activity log (None: `al-updates no`).
    log: Option<activity_log::VolumeLog>,
    /// Bitmap pages handed to the driver to write.
    bm_writes: u64,
    /// `resync-after`: the volume it depends on is still resyncing.
    after_dependency: bool,
    /// A Primary replicated to this node asynchronously: it may lack acknowledged writes
    /// (`engine/lag.rs`); promotion needs `--force`.
    possibly_stale: bool,
    /// Peers that may hold data of the current generation: connected at some time since it
    /// was made (all peers after a restart, not knowing). A Primary that writes while such a
    /// peer is away starts a new generation first, even if a bitmap identifier for the peer
    /// is already set (by an unfinished resync, say): otherwise the peer could take the
    /// generation as unchanged since it left, and a split brain would go unseen.
    shared_with: NodeSet,
    /// A new generation this Primary owes since it lost a peer or wrote with one absent
    /// while without quorum: it starts when quorum returns, before any held write completes
    /// (`persist.rs`, `rotate_when_quorum_returns`).
    rotation_owed: bool,
    /// As Primary: the identifiers from before a new generation that no completed write and
    /// no peer has seen yet; a demotion goes back to them (`persist.rs`,
    /// `revert_unused_generation`).
    unused_generation: Option<Box<GenerationIds>>,
}

/// The replication engine of one resource. See the crate documentation for the call protocol.
#[derive(Debug)]
pub struct Engine<P> {
    node_id: u8,
    node: NodeId,
    role: Role,
    open_count: u32,
    volumes: Vec<Volume>,
    peers: Vec<Peer<P>>,
    next_seq: u64,
    epoch: u64,
    epoch_writes: u32,
    /// A write of the current epoch completed: the next write opens a new epoch.
    epoch_must_close: bool,
    in_flight: BTreeMap<u64, InFlight>,
    flushes: BTreeMap<u64, FlushInFlight>,
    waiting: VecDeque<Waiting<P>>,
    /// Admitted client writes waiting for the activity log, in admission order.
    held: VecDeque<activity_log::Held<P>>,
    /// Started client writes holding activity-log extents.
    reservations: activity_log::Reservations,
    lower_pending: u64,
    /// splitmix64 state for new generation identifiers.
    random: u64,
    /// Our next resync request id (as a sync target).
    next_request_id: u64,
    /// The latest time an input carried (for status: the lag's age).
    clock: Time,
    /// The node whose `StaleMark` marked this one possibly stale, since this start.
    marked_by: Option<u8>,
    /// `quorum`, `on-no-quorum`, `quorum-minimum-redundancy` (`engine/quorum.rs`).
    quorum: QuorumConfig,
    /// Whether the quorum rules are met now.
    quorum_held: bool,
    /// When a promotion pinged the peers it would count (`quorum.rs`,
    /// `confirm_promotion_quorum`).
    promotion_asked: Option<Time>,
    /// After `secondary --force`: every write and flush that completes fails with EIO, until
    /// the next promotion (`quorum.rs`, `demote_forced`).
    failing_pending: bool,
    /// `suspend-io`: new client writes wait until `resume-io` (`suspended:user`).
    user_suspended: bool,
    /// The disk states last sent to the connected peers (`State`); a change is sent at the
    /// next tick, so peers (and their quorum) see it without a reconnect.
    disks_announced: Vec<(u16, DiskState)>,
    /// Local write times since the driver last took them.
    local_stats: LocalStats,
    /// `on-io-error` (`engine/detach.rs`).
    /// Client reads of Diskless volumes waiting for a peer, by read id (`detach.rs`).
    forwarded_reads: BTreeMap<u64, detach::ForwardedRead>,
    /// Reads Diskless peers asked us for, being read: (peer, their id) to the range.
    pending_forwarded_serves: BTreeMap<(u8, u64), (u16, Extent)>,
    /// The next read id.
    next_read_id: u64,
    /// As Primary: the newest epoch announced in a peer ack (`reconcile.rs`).
    peer_ack_sent: u64,
    /// Demoted, the peer acks go on until every closed epoch is settled: the Secondaries
    /// keep extents hot for its writes until then (`secondary_log.rs`).
    peer_ack_owed: bool,
    /// The Primary this node followed when it lost it, and how far (`reconcile.rs`).
    lost_primary: Option<Followed>,
    /// As Secondary under a quorum rule: the Primary this node's vote went to last, not seen
    /// Secondary since (`quorum.rs`, `vote_taken`).
    vote: Option<u8>,
    /// Went down uncleanly as a Secondary (`crashed_secondary`) and no handshake with a peer
    /// was decided since: not promoted without `--force` (`quorum.rs`, `note_decided_handshakes`).
    unclean_unmet: bool,
    /// Replicated writes that failed on this node's disk, answered (NegAck) once the
    /// metadata saying this disk lacks them is durable (`detach.rs`); bounded by the
    /// receivers' budget, as each is still pending there.
    failed_peer_writes: Vec<detach::FailedPeerWrite>,
    /// Resizes under way, by volume number (`resize.rs`).
    resizes: BTreeMap<u16, resize::Resizing>,
    /// How the resizes this node started ended, until taken (`resize.rs`).
    resize_outcomes: BTreeMap<u16, Result<u64, String>>,
}

impl<P: Clone> Engine<P> {
    /// A Secondary engine with every peer disconnected, each volume as its metadata says.
    /// Refuses invalid node ids, resync settings, and bitmaps that do not fit their volume or
    /// name no peer.
    pub fn new(config: EngineConfig) -> Result<Engine<P>, SyncError> {
        let node = NodeId::new(config.node_id)?;
        let mut peers = Vec::with_capacity(config.peers.len());
        for peer in &config.peers {
            peers.push(new_peer(node, peer, &config.volumes)?);
        }
        let lost_primary = config.volumes.iter().find_map(|v| v.followed);
        let volumes = config
            .volumes
            .into_iter()
            .enumerate()
            .map(|(vslot, v)| attach_volume(vslot, v, &mut peers))
            .collect::<Result<_, _>>()?;
        let mut engine = Engine {
            node_id: config.node_id,
            node,
            role: Role::Secondary,
            open_count: 0,
            volumes,
            peers,
            next_seq: 1,
            epoch: 1,
            epoch_writes: 0,
            epoch_must_close: false,
            in_flight: BTreeMap::new(),
            flushes: BTreeMap::new(),
            waiting: VecDeque::new(),
            failing_pending: false,
            user_suspended: false,
            held: VecDeque::new(),
            reservations: BTreeMap::new(),
            lower_pending: 0,
            random: config.random_seed,
            next_request_id: 1,
            clock: Time(0),
            marked_by: None,
            quorum: QuorumConfig::default(),
            quorum_held: true,
            promotion_asked: None,
            disks_announced: Vec::new(),
            local_stats: LocalStats::default(),
            forwarded_reads: BTreeMap::new(),
            pending_forwarded_serves: BTreeMap::new(),
            next_read_id: 1,
            peer_ack_sent: 0,
            peer_ack_owed: false,
            lost_primary,
            vote: None,
            unclean_unmet: false,
            failed_peer_writes: Vec::new(),
            resizes: BTreeMap::new(),
            resize_outcomes: BTreeMap::new(),
        };
        engine.disks_announced = engine.disk_list();
        engine.unclean_unmet = engine.volumes.iter().any(|v| v.ids.flags.crashed_secondary);
        Ok(engine)
    }

    /// Our role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Whether the driver should try to (re)connect to `peer`.
    pub fn wants_connection(&self, peer: u8) -> bool {
        self.peer_slot(peer)
            .is_some_and(|slot| self.peers[slot].connection != ConnState::StandAlone)
    }

    /// The name of a connected Primary peer, if any (for refusing to open on a Secondary).
    pub fn primary_peer(&self) -> Option<&str> {
        let peer = self
            .peers
            .iter()
            .find(|p| p.connection == ConnState::Connected && p.role == Role::Primary);
        peer.map(|p| p.config.name.as_str())
    }

    fn peer_slot(&self, peer: u8) -> Option<usize> {
        self.peers.iter().position(|p| p.config.node_id == peer)
    }

    fn volume_slot(&self, volume: u16) -> Option<usize> {
        self.volumes.iter().position(|v| v.number == volume)
    }

    // ----- client requests -------------------------------------------------------------

    /// A client request on `volume`. The engine answers it with exactly one `Complete`.
    pub fn submit(
        &mut self,
        now: Time,
        request: RequestId,
        volume: u16,
        op: Op<P>,
        out: &mut Vec<Action<P>>,
    ) {
        self.clock = self.clock.max(now);
        if self.role != Role::Primary {
            out.push(Action::Complete {
                request,
                result: Err(IoError::NotWritable),
            });
            return;
        }
        let Some(slot) = self.volume_slot(volume) else {
            out.push(Action::Complete {
                request,
                result: Err(IoError::Invalid),
            });
            return;
        };
        if self.quorum_refuses_new_writes() {
            out.push(Action::Complete {
                request,
                result: Err(IoError::Io),
            });
            return;
        }
        if let Op::Flush = op {
            self.start_flush(request, out);
            return;
        }
        let Some(extent) = op_extent(&op).filter(|e| e.end() <= self.volumes[slot].size_bytes)
        else {
            out.push(Action::Complete {
                request,
                result: Err(IoError::Invalid),
            });
            return;
        };
        if self.conflicts(volume, extent, self.waiting.len())
            || self.lag_blocks(now, extent.length)
            || self.new_writes_wait()
        {
            self.waiting.push_back(Waiting {
                request,
                volume,
                op,
            });
            return;
        }
        self.spend_lag_credit(extent.length);
        self.admit_write(now, request, volume, op, out);
    }

    /// Whether `extent` overlaps a write in flight, one held for the activity log, or one of
    /// the first `waiting_before` waiting writes (which must go first).
    fn conflicts(&self, volume: u16, extent: Extent, waiting_before: usize) -> bool {
        let in_flight = self
            .in_flight
            .values()
            .any(|w| w.volume == volume && w.extent.overlaps(&extent));
        in_flight
            || self.held.iter().any(|h| h.overlaps(volume, &extent))
            || self.resync_busy(volume, &extent)
            || self.waiting.iter().take(waiting_before).any(|w| {
                w.volume == volume && op_extent(&w.op).is_some_and(|e| e.overlaps(&extent))
            })
    }

    /// Issues a write locally and to the peers; returns its sequence number (None: refused).
    fn start_write(
        &mut self,
        now: Time,
        request: RequestId,
        volume: u16,
        op: Op<P>,
        out: &mut Vec<Action<P>>,
    ) -> Option<u64> {
        let Some((disk_op, extent)) = to_disk_op(op) else {
            out.push(Action::Complete {
                request,
                result: Err(IoError::Invalid),
            });
            return None;
        };
        self.close_epoch_if_due(out);
        // A peer going Ahead counts as absent for this write already.
        self.check_congestion(now, volume, extent.length, out);
        let vslot = self.volume_slot(volume).unwrap_or(0);
        // A Diskless volume that reaches no peer writes nothing anywhere (the write fails):
        // no new generation, so a peer that comes back is not taken for stale.
        let reaches_nobody = self.volumes[vslot].disk == DiskState::Diskless
            && !self.peers.iter().any(replicates_to);
        let meta_version = if reaches_nobody {
            0
        } else {
            self.new_generation_if_needed(vslot, out)
        };
        assert!(
            !self.resync_busy(volume, &extent),
            "a client write overlaps a resync read or its unconfirmed reply"
        );
        self.verify_note_write(volume, extent);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.epoch_writes += 1;
        self.volumes[vslot].written_bytes += extent.length;
        let sent = Sent {
            seq,
            since: now,
            epoch: self.epoch,
            volume,
            extent,
        };
        let stages = self.send_to_peers(now, sent, vslot, &disk_op, out);
        // A Diskless volume writes nothing locally: its peers alone decide (`detach.rs`).
        let diskless = self.volumes[vslot].disk == DiskState::Diskless;
        let local = if diskless {
            Stage::Done(Err(IoError::Io))
        } else {
            Stage::Pending
        };
        let write = InFlight {
            request,
            epoch: self.epoch,
            volume,
            extent,
            local,
            peers: stages,
            meta_version,
            started: now,
            written_on: 0,
            rotation_answers: Vec::new(),
        };
        assert!(
            self.in_flight.insert(seq, write).is_none(),
            "sequence numbers are unique"
        );
        if !diskless {
            self.lower_pending += 1;
            out.push(Action::LocalWrite {
                io: IoId::Write { seq },
                volume,
                op: disk_op,
            });
        }
        Some(seq)
    }

    /// Closes the epoch if it must close or a peer's `max-epoch-size` is reached.
    fn close_epoch_if_due(&mut self, out: &mut Vec<Action<P>>) {
        let epoch_full = self
            .peers
            .iter()
            .any(|p| self.epoch_writes >= p.config.max_epoch_size);
        if self.epoch_must_close || epoch_full {
            self.close_epoch(false, out);
        }
    }

    /// Sends a write to every peer (see [`send_to_peer`]); its stage at each, in peer order.
    fn send_to_peers(
        &mut self,
        now: Time,
        sent: Sent,
        vslot: usize,
        disk_op: &DiskOp<P>,
        out: &mut Vec<Action<P>>,
    ) -> Vec<PeerStage> {
        let mut stages = Vec::with_capacity(self.peers.len());
        for peer in &mut self.peers {
            stages.push(send_to_peer(peer, now, sent, vslot, disk_op, out));
        }
        stages
    }

    /// End the current epoch: every connected peer gets a barrier for it.
    fn close_epoch(&mut self, flush: bool, out: &mut Vec<Action<P>>) {
        for peer in self
            .peers
            .iter()
            .filter(|p| p.connection == ConnState::Connected)
        {
            out.push(Action::SendBarrier {
                peer: peer.config.node_id,
                epoch: self.epoch,
                flush,
            });
        }
        self.epoch += 1;
        self.epoch_writes = 0;
        self.epoch_must_close = false;
    }

    fn start_flush(&mut self, request: RequestId, out: &mut Vec<Action<P>>) {
        let epoch = self.epoch;
        self.close_epoch(true, out);
        let needs_peers = self.volumes.iter().any(|v| v.disk == DiskState::Diskless);
        let waiting_for: Vec<u8> = self
            .peers
            .iter()
            .filter(|p| {
                p.connection == ConnState::Connected
                    && (p.protocol != Protocol::A || needs_peers)
                    && !is_diskless(p)
            })
            .map(|p| p.config.node_id)
            .collect();
        let seq = self.next_seq;
        self.next_seq += 1;
        self.flushes.insert(
            seq,
            FlushInFlight {
                request,
                epoch,
                local: Stage::Pending,
                waiting_for,
                needs_peers,
                acked: false,
            },
        );
        self.lower_pending += 1;
        out.push(Action::LocalFlush {
            io: IoId::Flush { seq },
        });
    }

    // ----- completions ------------------------------------------------------------------

    /// A local I/O requested by a `LocalWrite`, `LocalFlush`, `PersistMeta` or
    /// `WriteActivityLog` action finished. (A `LocalRead` is answered by
    /// [`Engine::local_read_done`].)
    pub fn local_done(
        &mut self,
        now: Time,
        io: IoId,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        self.local_done_inner(now, io, result, out);
        self.start_resync_reads(out);
    }

    fn local_done_inner(
        &mut self,
        now: Time,
        io: IoId,
        result: Result<(), IoError>,
        out: &mut Vec<Action<P>>,
    ) {
        match io {
            IoId::Write { seq } => {
                self.lower_pending = self.lower_pending.saturating_sub(1);
                if let Some(write) = self.in_flight.get_mut(&seq) {
                    assert_eq!(
                        write.local,
                        Stage::Pending,
                        "one completion per local write"
                    );
                    write.local = Stage::Done(result);
                    let (started, volume) = (write.started, write.volume);
                    self.note_local_write(now, started);
                    if result.is_err_and(IoError::is_disk_error) {
                        // A disk error, ENOSPC as EIO (not an aborted payload): under a detaching
                        // policy the volume is Diskless now, and this write is judged by its peers.
                        let vslot = self.volume_slot(volume).unwrap_or(0);
                        if !self.local_io_failed(now, vslot, out) {
                            self.resync_peers_of_failed_write(now, seq, vslot, out);
                        }
                    }
                    self.try_complete_write(now, seq, out);
                }
            }
            IoId::Flush { seq } => {
                self.lower_pending = self.lower_pending.saturating_sub(1);
                if let Some(flush) = self.flushes.get_mut(&seq) {
                    flush.local = Stage::Done(result);
                    self.try_complete_flush(seq, out);
                }
            }
            IoId::PeerWrite { peer, seq } => {
                let Some(slot) = self.peer_slot(peer) else {
                    return;
                };
                match result {
                    // Recorded durably before the NegAck goes out.
                    Err(error) if error.is_disk_error() => {
                        self.replicated_write_failed(now, slot, seq, error, out)
                    }
                    _ => {
                        self.peers[slot].receiver.write_done(seq, result, out);
                    }
                }
            }
            IoId::PeerGroupFlush { peer, tag } => {
                if let Some(slot) = self.peer_slot(peer) {
                    self.peers[slot].receiver.group_flush_done(tag, result, out);
                }
            }
            IoId::PeerFlush { peer, epoch } => {
                if let Some(slot) = self.peer_slot(peer) {
                    self.peers[slot].receiver.flush_done(epoch, result, out);
                }
            }
            IoId::Meta { seq } => {
                self.persist_done(now, seq, result, out);
                self.answer_failed_peer_writes(now, out);
            }
            IoId::ResyncWrite { peer, id } => self.resync_write_done(now, peer, id, result, out),
            IoId::ActivityLog { volume, seq } => {
                self.transaction_done(now, volume, seq, result, out)
            }
            // Answered through `local_read_done`; a driver that sends it here has nothing to
            // complete.
            IoId::ResyncRead { .. } | IoId::ForwardedRead { .. } => {}
            // Answered through `local_digest_done`.
            IoId::VerifyRead { .. }
            | IoId::VerifyPeerRead { .. }
            | IoId::CsumRead { .. }
            | IoId::CsumPeerRead { .. } => {}
        }
    }

    fn try_complete_write(&mut self, now: Time, seq: u64, out: &mut Vec<Action<P>>) {
        let Some(write) = self.in_flight.get(&seq) else {
            return;
        };
        let vslot = self.volume_slot(write.volume).unwrap_or(0);
        let diskless = self.volumes[vslot].disk == DiskState::Diskless;
        let diskless_result = if diskless {
            self.diskless_write_result(write)
        } else {
            None
        };
        if diskless && diskless_result.is_none() {
            return;
        }
        if !self.write_is_done(write) || self.quorum_verdict(Ok(())).is_none() {
            // Not done, or done but held until quorum returns (suspend-io).
            return;
        }
        let Some(write) = self.in_flight.remove(&seq) else {
            return;
        };
        let result = match (diskless_result, write.local) {
            (Some(result), _) => result,
            (None, Stage::Done(result)) => result,
            (None, Stage::Pending) => unreachable!("write_is_done requires the local write"),
        };
        let result = if write.meta_version > 0 && self.volumes[vslot].meta.failed {
            Err(IoError::Io)
        } else {
            result
        };
        let result = self.quorum_verdict(result).unwrap_or(Err(IoError::Io));
        if write.epoch == self.epoch {
            self.epoch_must_close = true;
        }
        if result.is_err() {
            // The local disk holds an unknown part of this write while peers may hold all of
            // it: the blocks may differ everywhere.
            self.peers
                .iter_mut()
                .for_each(|peer| mark(&mut peer.bitmaps[vslot], write.extent));
        }
        if result.is_ok() {
            // A completed write uses the generation: no demotion may take it back.
            self.volumes[vslot].unused_generation = None;
        }
        out.push(Action::Complete {
            request: write.request,
            result,
        });
        self.release_if_done(now, seq, out);
        self.start_waiting(now, out);
    }

    fn write_is_done(&self, write: &InFlight) -> bool {
        if write.local == Stage::Pending {
            return false;
        }
        let vslot = self.volume_slot(write.volume).unwrap_or(0);
        if !self.is_persisted(vslot, write.meta_version) || !self.rotations_answered(write) {
            return false;
        }
        write.peers.iter().zip(&self.peers).all(|(stage, peer)| {
            matches!(
                (stage, peer.protocol),
                (PeerStage::Skipped | PeerStage::Settled, _)
                    | (PeerStage::Received { .. }, Protocol::A | Protocol::B)
                    | (PeerStage::Sent { .. }, Protocol::A)
            )
        })
    }

    fn start_waiting(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        if self.new_writes_wait() {
            return;
        }
        let mut index = 0;
        while index < self.waiting.len() {
            let waiting = &self.waiting[index];
            let extent = op_extent(&waiting.op);
            if extent.is_some_and(|e| self.lag_blocks(now, e.length)) {
                // The lag bound holds every later write too, so the oldest goes first.
                break;
            }
            let blocked = extent.is_some_and(|e| self.conflicts(waiting.volume, e, index));
            if blocked {
                index += 1;
                continue;
            }
            if let Some(waiting) = self.waiting.remove(index) {
                self.spend_lag_credit(extent.map_or(0, |e| e.length));
                self.admit_write(now, waiting.request, waiting.volume, waiting.op, out);
            }
        }
    }

    fn try_complete_flush(&mut self, seq: u64, out: &mut Vec<Action<P>>) {
        let Some(flush) = self.flushes.get(&seq) else {
            return;
        };
        let Stage::Done(result) = flush.local else {
            return;
        };
        if !flush.waiting_for.is_empty() {
            return;
        }
        // With a Diskless volume, a flush no peer acknowledged made nothing durable.
        let result = if flush.needs_peers && !flush.acked {
            Err(IoError::Io)
        } else {
            result
        };
        let Some(result) = self.quorum_verdict(result) else {
            return;
        };
        let request = flush.request;
        self.flushes.remove(&seq);
        out.push(Action::Complete { request, result });
    }

    // ----- peers ------------------------------------------------------------------------

    /// The driver finished the handshake with `peer`.
    pub fn peer_connected(&mut self, now: Time, peer: u8, out: &mut Vec<Action<P>>) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let p = &mut self.peers[slot];
        p.connection = ConnState::Connected;
        p.last_error = None;
        p.liveness = Liveness::connected(now);
        p.receiver.new_session();
        p.last_seq = 0;
        p.rotations = rotate::RotationCount::default();
        p.rotated_from.fill(0);
        p.accepted.fill(false);
        p.unpromotable.fill(false);
        self.reset_settled_on_connect(slot);
        let message = PeerMessage::State {
            role: self.role,
            disks: self.disk_list(),
        };
        out.push(Action::SendControl { peer, message });
        // Connected, it no longer counts as departed: the record goes before the handshake.
        self.record_departures(out);
        for vslot in 0..self.volumes.len() {
            self.send_handshake(slot, vslot, out);
        }
        self.announce_pauses(slot, out);
        self.reset_async_on_connect(slot, out);
        self.update_quorum(now, out);
        self.fence_on_connect(now, slot, out);
        out.push(Action::StateChanged);
    }

    fn disk_list(&self) -> Vec<(u16, DiskState)> {
        self.volumes.iter().map(|v| (v.number, v.disk)).collect()
    }

    /// The connection to `peer` ended (`state` says how: NetworkFailure, ProtocolError, ...).
    /// `reason` is kept as the peer's last error; the driver's own text (a closed socket, a
    /// failed frame) becomes a [`DisconnectReason::Policy`].
    pub fn peer_disconnected(
        &mut self,
        now: Time,
        peer: u8,
        state: ConnState,
        reason: impl Into<DisconnectReason>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        let volumes: Vec<u16> = self.volumes.iter().map(|v| v.number).collect();
        let p = &mut self.peers[slot];
        let was_connected = p.connection == ConnState::Connected;
        // A departure under way (`leave.rs`) ends StandAlone: no reconnect meanwhile.
        if p.connection != ConnState::StandAlone && p.leaving.is_none() {
            p.connection = if state == ConnState::StandAlone {
                state
            } else {
                ConnState::Connecting
            };
        }
        p.last_error = Some(format!("{state}: {}", reason.into()));
        self.resize_peer_lost(slot);
        self.remember_lost_primary(slot, out);
        let p = &mut self.peers[slot];
        p.role = Role::Unknown;
        let up_to_date = was_connected && p.disks.contains(&DiskState::UpToDate);
        for (disk, sync) in p.disks.iter_mut().zip(&p.syncs) {
            // Our sync target may have all it needs already, and turn UpToDate on its own
            // when the last block lands: nothing known of it is kept (sim seed 18318).
            let our_target = matches!(sync, SyncState::Source(_) | SyncState::StartingSource(_));
            *disk = leave::kept_after_loss(*disk)
                .filter(|_| !our_target)
                .unwrap_or(DiskState::DUnknown);
        }
        p.ahead.connection_lost();
        // Before anything completes for want of this peer: quorum may be gone, and the peer
        // may need fencing.
        self.update_quorum(now, out);
        self.fence_on_loss(slot, up_to_date, out);
        let p = &mut self.peers[slot];
        // The bitmaps keep every block whose resync was not confirmed: the next connect
        // resumes from them.
        p.syncs.iter_mut().for_each(|sync| *sync = SyncState::Off);
        p.peer_paused.fill(false);
        p.known_ids.fill(None);
        p.accepted.fill(false);
        p.unpromotable.fill(false);
        p.handshake_held.fill(None);
        p.drain = lag::DrainMeter::default();
        let mut drained = vec![false; volumes.len()];
        let mut drained_seqs = Vec::with_capacity(p.transfer_log.len());
        for sent in p.transfer_log.drain(..) {
            let vslot = volumes.iter().position(|&v| v == sent.volume).unwrap_or(0);
            mark(&mut p.bitmaps[vslot], sent.extent);
            drained[vslot] = true;
            drained_seqs.push(sent.seq);
        }
        p.receiver.connection_lost(out);
        self.fail_forwarded_reads(slot, out);
        self.keep_unanswered_generation(slot, out);
        self.generation_after_loss(slot, &drained, out);
        self.reconcile_after_loss(now, slot, out);
        self.stop_waiting_for_rotation_answers(now, slot, out);
        self.outdate_if_left_behind(now, out);
        self.resync_stranded_from_primary(now, out);
        self.settle_peer_in_flight(now, slot, out);
        for seq in drained_seqs {
            self.release_if_done(now, seq, out);
        }
        // The unsettled writes are bits now (`reconcile_after_loss`; an extent the log evicts
        // takes its bitmap pages to disk first): their extents may go cold.
        self.unpin(now, slot, None, out);
        self.start_waiting(now, out);
        self.record_departures(out);
        if was_connected {
            out.push(Action::StateChanged);
        }
    }

    /// A lost Primary peer that sent writes is remembered with its last write (see
    /// [`Engine::peer_disconnected`]).
    fn remember_lost_primary(&mut self, slot: usize, out: &mut Vec<Action<P>>) {
        let p = &mut self.peers[slot];
        if p.role == Role::Primary && p.last_seq > 0 {
            let lost = Some(Followed {
                node: p.config.node_id,
                seq: p.last_seq,
            });
            if self.lost_primary != lost {
                // Kept in the metadata: a restart must not forget which of two Secondaries
                // received the later write (the handshake's row 20, `reconcile.rs`).
                self.lost_primary = lost;
                for vslot in 0..self.volumes.len() {
                    self.meta_changed(vslot, out);
                }
            }
        }
    }

    /// After a disconnect: every write and flush waiting on the peer stops waiting.
    fn settle_peer_in_flight(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        let peer = self.peers[slot].config.node_id;
        let mut ready = Vec::new();
        for (&seq, write) in &mut self.in_flight {
            if !matches!(write.peers[slot], PeerStage::Skipped | PeerStage::Settled) {
                write.peers[slot] = PeerStage::Settled;
                ready.push(seq);
            }
        }
        for seq in ready {
            self.try_complete_write(now, seq, out);
        }
        let flushes: Vec<u64> = self.flushes.keys().copied().collect();
        for seq in flushes {
            if let Some(flush) = self.flushes.get_mut(&seq) {
                flush.waiting_for.retain(|&p| p != peer);
            }
            self.try_complete_flush(seq, out);
        }
    }

    /// The data frame `seq` for `peer` was handed to its socket.
    pub fn peer_sent(&mut self, now: Time, peer: u8, seq: u64, out: &mut Vec<Action<P>>) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        if let Some(write) = self.in_flight.get_mut(&seq) {
            if let PeerStage::Queued { since } = write.peers[slot] {
                write.peers[slot] = PeerStage::Sent { since };
            }
        }
        self.try_complete_write(now, seq, out);
    }

    /// A message from `peer` arrived. A message that breaks the protocol disconnects the peer.
    pub fn peer_message(
        &mut self,
        now: Time,
        peer: u8,
        message: PeerMessage<P>,
        out: &mut Vec<Action<P>>,
    ) {
        let Some(slot) = self.peer_slot(peer) else {
            return;
        };
        if self.peers[slot].connection != ConnState::Connected {
            return;
        }
        self.peers[slot].liveness.heard_from(now);
        self.clock = self.clock.max(now);
        if let Err(reason) = self.receive_in_order(now, slot, message, out) {
            out.push(Action::Disconnect {
                peer,
                state: ConnState::ProtocolError,
                reason: reason.clone().into(),
            });
            self.peer_disconnected(now, peer, ConnState::ProtocolError, reason, out);
        } else if !self.waiting.is_empty() || self.peers[slot].async_state != lag::AsyncState::Sync
        {
            // Confirmations shrink the lag: writes held by its bound may start, a mark may
            // be cleared.
            self.drain_check(slot, out);
            self.start_waiting(now, out);
        }
        self.start_resync_reads(out);
    }

    /// Drops the connection to the peer in `slot` with `state` (StandAlone: no reconnect until
    /// the administrator connects again).
    fn drop_peer(
        &mut self,
        now: Time,
        slot: usize,
        state: ConnState,
        reason: impl Into<DisconnectReason>,
        out: &mut Vec<Action<P>>,
    ) {
        let peer = self.peers[slot].config.node_id;
        let reason = reason.into();
        out.push(Action::Disconnect {
            peer,
            state,
            reason: reason.clone(),
        });
        self.peer_disconnected(now, peer, state, reason, out);
    }

    fn dispatch(
        &mut self,
        now: Time,
        slot: usize,
        message: PeerMessage<P>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        let peer = self.peers[slot].config.node_id;
        match message {
            PeerMessage::Data {
                seq,
                epoch,
                volume,
                offset,
                op,
            } => self.receive_data(slot, seq, epoch, volume, offset, op, out),
            PeerMessage::Barrier { epoch, flush } => {
                if self.role == Role::Primary {
                    return Err(PeerViolation::BarrierWhilePrimary);
                }
                self.peers[slot].receiver.barrier(epoch, flush, out)
            }
            PeerMessage::Ping => {
                out.push(Action::SendControl {
                    peer,
                    message: PeerMessage::PingAck,
                });
                Ok(())
            }
            PeerMessage::PingAck => {
                if let Some(rtt) = self.peers[slot].liveness.ping_answered(now) {
                    self.note_rtt(slot, rtt);
                }
                Ok(())
            }
            PeerMessage::RecvAck { seq } => {
                self.acked(now, slot, seq, PeerStage::Received { since: now }, out)
            }
            PeerMessage::WriteAck { seq } => {
                if let Some(write) = self.in_flight.get_mut(&seq) {
                    write.written_on |= 1u64 << slot.min(63);
                }
                self.acked(now, slot, seq, PeerStage::Settled, out)
            }
            PeerMessage::NegAck { seq } => {
                self.mark_out_of_sync(slot, seq);
                self.acked(now, slot, seq, PeerStage::Settled, out)
            }
            PeerMessage::BarrierAck { epoch } => self.barrier_acked(now, slot, epoch, out),
            PeerMessage::PeerAck { epoch, nodes } => {
                self.receive_peer_ack(now, slot, epoch, nodes, out);
                Ok(())
            }
            PeerMessage::State { role, disks } => self.receive_state(now, slot, role, disks, out),
            PeerMessage::SyncUuids(message) => {
                self.end_verify_for_handshake(slot, &message, out);
                self.receive_uuids(now, slot, *message, out)
            }
            PeerMessage::BitmapChunk { volume, chunk } => {
                self.receive_bitmap_chunk(now, slot, volume, &chunk, out)
            }
            PeerMessage::StaleMark { stale } => self.receive_stale_mark(slot, stale, out),
            PeerMessage::StaleMarkAck { stale } => self.receive_stale_ack(now, slot, stale, out),
            PeerMessage::Ahead { ahead } => {
                self.receive_ahead(slot, ahead, out);
                Ok(())
            }
            message => self.dispatch_resync(now, slot, message, out),
        }
    }

    /// [`Engine::dispatch`] for the resync messages.
    fn dispatch_resync(
        &mut self,
        now: Time,
        slot: usize,
        message: PeerMessage<P>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        match message {
            PeerMessage::ResyncRequest {
                id,
                volume,
                offset,
                length,
            } => self.receive_resync_request(now, slot, id, volume, Extent { offset, length }),
            PeerMessage::ResyncReply {
                id,
                volume,
                offset,
                length,
                data,
            } => self.receive_resync_reply(
                now,
                slot,
                id,
                volume,
                Extent { offset, length },
                data,
                out,
            ),
            PeerMessage::ResyncNegReply {
                id,
                volume,
                offset,
                length,
            } => {
                self.receive_resync_neg_reply(now, slot, id, volume, Extent { offset, length }, out)
            }
            PeerMessage::ResyncAck { id, volume, ok } => {
                self.receive_resync_ack(now, slot, id, volume, ok, out)
            }
            PeerMessage::ResyncDone {
                volume,
                failed_bytes,
            } => self.receive_resync_done(slot, volume, failed_bytes, out),
            PeerMessage::CsumRequest {
                id,
                volume,
                offset,
                length,
                digests,
            } => {
                self.receive_csum_request(now, slot, id, volume, Extent { offset, length }, digests)
            }
            PeerMessage::ResyncInSync { id, volume } => {
                self.receive_resync_in_sync(now, slot, id, volume, out)
            }
            PeerMessage::SyncPause { volume, paused } => {
                self.receive_sync_pause(now, slot, volume, paused, out)
            }
            message => self.dispatch_verify_read_resize(now, slot, message, out),
        }
    }

    /// [`Engine::dispatch`] for the online-verify, read and resize messages.
    fn dispatch_verify_read_resize(
        &mut self,
        now: Time,
        slot: usize,
        message: PeerMessage<P>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        match message {
            PeerMessage::Resize {
                volume,
                size_bytes,
                step,
            } => {
                self.receive_resize(slot, volume, size_bytes, step, out);
                Ok(())
            }
            PeerMessage::VerifyRequest {
                id,
                volume,
                offset,
                length,
            } => self.receive_verify_request(now, slot, id, volume, Extent { offset, length }, out),
            PeerMessage::VerifyReply {
                id,
                volume,
                offset,
                length,
                outcome,
            } => self.receive_verify_reply(
                now,
                slot,
                id,
                volume,
                Extent { offset, length },
                outcome,
                out,
            ),
            PeerMessage::VerifyDone { volume, oos_bytes } => {
                self.receive_verify_done(slot, volume, oos_bytes, out)
            }
            PeerMessage::ReadRequest {
                id,
                volume,
                offset,
                length,
            } => self.receive_read_request(slot, id, volume, Extent { offset, length }, out),
            PeerMessage::ReadReply {
                id,
                volume,
                offset,
                length,
                data,
            } => {
                self.receive_read_reply(slot, id, volume, Extent { offset, length }, Ok(data), out)
            }
            PeerMessage::ReadNegReply {
                id,
                volume,
                offset,
                length,
            } => self.receive_read_reply(
                slot,
                id,
                volume,
                Extent { offset, length },
                Err(IoError::Io),
                out,
            ),
            _ => unreachable!("dispatch and dispatch_resync handle the other messages"),
        }
    }

    /// A peer's role and disk states ([`PeerMessage::State`]).
    fn receive_state(
        &mut self,
        now: Time,
        slot: usize,
        role: Role,
        disks: Vec<(u16, DiskState)>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if let Some(reason) = self.second_primary(slot, role) {
            self.drop_peer(now, slot, ConnState::Unconnected, reason, out);
            return Ok(());
        }
        let result = self.peer_state(slot, role, disks, out);
        // A sync target saying it is no longer UpToDate may now lend its vote.
        self.update_quorum(now, out);
        if role == Role::Primary {
            self.stop_secondary_resyncs(now, slot, out);
            // A peer promoted while this node is a cut-off sync target.
            self.resync_stranded_from_primary(now, out);
            // A peer promoted while this node is Outdated beside it.
            self.resync_outdated_from_primary(slot, out);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn receive_data(
        &mut self,
        slot: usize,
        seq: u64,
        epoch: u64,
        volume: u16,
        offset: u64,
        op: DiskOp<P>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if self.role == Role::Primary {
            return Err(PeerViolation::WriteWhilePrimary);
        }
        let vslot = self
            .volume_slot(volume)
            .ok_or(PeerViolation::WriteUnknownVolume { volume })?;
        let length = disk_op_length(&op);
        // A diskless volume has no size of its own: the write fails on the missing disk and
        // is NegAcked (a Primary sends writes before the handshake told it we are diskless).
        let diskless = self.volumes[vslot].disk == DiskState::Diskless;
        let extent = Extent::new(offset, length)
            .filter(|e| diskless || e.end() <= self.volumes[vslot].size_bytes);
        if extent.is_none() {
            return Err(PeerViolation::WriteBeyondEnd {
                volume,
                offset,
                length,
            });
        }
        let Some(extent) = extent else { return Ok(()) };
        if !diskless {
            self.verify_note_write(volume, extent);
            self.mark_for_absent_peers(slot, vslot, extent);
            self.note_unsettled(slot, vslot, epoch, extent);
        }
        // A Primary's write changes the data a pending `--discard-my-data` towards another
        // peer was decided on: that split brain is a new one, for the administrator again
        // (else this write, acknowledged with this copy, could be discarded with it).
        for (other, p) in self.peers.iter_mut().enumerate() {
            p.discard_my_data &= other == slot;
        }
        // Counted on receipt: a received write is always written (or NegAcked) in order.
        self.volumes[vslot].written_bytes += length;
        let p = &mut self.peers[slot];
        p.last_seq = p.last_seq.max(seq);
        p.received_bytes[vslot] += length;
        if let SyncState::Target(target) = &mut p.syncs[vslot] {
            target.application_active = true;
        }
        let protocol = p.config.protocol;
        p.receiver
            .data(seq, epoch, volume, extent, op, protocol, out)
    }

    fn acked(
        &mut self,
        now: Time,
        slot: usize,
        seq: u64,
        stage: PeerStage,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if stage == PeerStage::Settled {
            // The entry stays in the transfer log until the barrier ack says the write is
            // durable on the peer: if the connection drops first, it is marked out of sync.
            // Transfer logs are ordered by sequence number (`send_to_peer` asserts it).
            let log = &self.peers[slot].transfer_log;
            let sent = log
                .binary_search_by_key(&seq, |s| s.seq)
                .ok()
                .and_then(|index| log.get(index))
                .map(|s| (s.since, s.extent.length));
            if let Some((since, length)) = sent {
                self.note_ack(now, slot, since, length);
            }
        }
        let Some(write) = self.in_flight.get_mut(&seq) else {
            // Acks for writes already completed (protocol A/B) are normal; acks for sequence
            // numbers never sent are not.
            self.release_if_done(now, seq, out);
            return if seq < self.next_seq {
                Ok(())
            } else {
                Err(PeerViolation::AckUnknownWrite { seq })
            };
        };
        match (write.peers[slot], stage) {
            (PeerStage::Skipped, _) => return Err(PeerViolation::AckUnsentWrite { seq }),
            (PeerStage::Settled, _) => {}
            (_, PeerStage::Settled) => write.peers[slot] = PeerStage::Settled,
            (PeerStage::Queued { .. } | PeerStage::Sent { .. }, received) => {
                write.peers[slot] = received
            }
            _ => {}
        }
        self.try_complete_write(now, seq, out);
        Ok(())
    }

    fn mark_out_of_sync(&mut self, slot: usize, seq: u64) {
        let found = self.in_flight.get(&seq).map(|w| (w.volume, w.extent));
        let found = found.or_else(|| {
            let sent = self.peers[slot]
                .transfer_log
                .iter()
                .find(|s| s.seq == seq)?;
            Some((sent.volume, sent.extent))
        });
        if let Some((volume, extent)) = found {
            let vslot = self.volume_slot(volume).unwrap_or(0);
            if !self.peers[slot].bitmap_free[vslot] {
                mark(&mut self.peers[slot].bitmaps[vslot], extent);
            }
        }
    }

    fn barrier_acked(
        &mut self,
        now: Time,
        slot: usize,
        epoch: u64,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        if epoch >= self.epoch {
            return Err(PeerViolation::BarrierAckOpenEpoch { epoch });
        }
        let peer = self.peers[slot].config.node_id;
        let confirmed: Vec<u64> = self.peers[slot]
            .transfer_log
            .iter()
            .filter(|s| s.epoch <= epoch)
            .map(|s| s.seq)
            .collect();
        let confirmed_bytes: u64 = self.peers[slot]
            .transfer_log
            .iter()
            .filter(|s| s.epoch <= epoch)
            .map(|s| s.extent.length)
            .sum();
        self.peers[slot].transfer_log.retain(|s| s.epoch > epoch);
        self.earn_lag_credit(now, slot, confirmed_bytes);
        let ready: Vec<u64> = self
            .flushes
            .iter()
            .filter(|(_, f)| f.epoch <= epoch)
            .map(|(&s, _)| s)
            .collect();
        for seq in ready {
            if let Some(flush) = self.flushes.get_mut(&seq) {
                flush.acked |= flush.waiting_for.contains(&peer);
                flush.waiting_for.retain(|&p| p != peer);
            }
            self.try_complete_flush(seq, out);
        }
        for seq in confirmed {
            self.release_if_done(now, seq, out);
        }
        self.note_barrier_ack(slot, epoch, out);
        Ok(())
    }

    fn peer_state(
        &mut self,
        slot: usize,
        role: Role,
        disks: Vec<(u16, DiskState)>,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), PeerViolation> {
        // Two Primaries meeting at connect are judged by the handshake, which compares the
        // generation identifiers first (a split brain is reported, not just refused); once
        // the handshake is done, a peer that turns Primary beside us is a protocol error.
        let handshaken = self.peers[slot].handshake_decided();
        if role == Role::Primary && self.role == Role::Primary && handshaken {
            return Err(PeerViolation::BothPrimary);
        }
        let p = &mut self.peers[slot];
        p.role = role;
        for (volume, disk) in disks {
            if let Some(vslot) = self.volumes.iter().position(|v| v.number == volume) {
                p.disks[vslot] = disk;
                p.unpromotable[vslot] |= disk != DiskState::UpToDate;
            }
        }
        out.push(Action::StateChanged);
        Ok(())
    }

    /// Why a peer that says it is `role` cannot be followed, if it cannot: a Secondary
    /// follows one Primary. A second one (an old Primary that regained quorum through this
    /// node after a failover elsewhere, say) would make this node the meeting point of two
    /// diverging data sets: its handshake could even start a second resync into a disk that
    /// is already the target of the first. The connection to it is dropped and retried; it
    /// succeeds once the other Primary is gone or Secondary (a split brain between the two is
    /// then found by their own handshake).
    fn second_primary(&self, slot: usize, role: Role) -> Option<String> {
        if role != Role::Primary || self.role == Role::Primary {
            return None;
        }
        if let Some(reason) = self.vote_taken(slot) {
            return Some(reason);
        }
        let other = self.peers.iter().enumerate().find(|(other, p)| {
            *other != slot && p.connection == ConnState::Connected && p.role == Role::Primary
        })?;
        Some(format!(
            "{} is Primary while this node already follows the Primary {}: a Secondary follows \
             one Primary",
            self.peers[slot].config.name, other.1.config.name
        ))
    }

    // ----- time -------------------------------------------------------------------------

    /// Housekeeping; call about every [`TICK_INTERVAL`]. Sends pings, drops dead peers, and
    /// closes an idle epoch so that its barrier can release the transfer logs.
    pub fn tick(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        self.clock = self.clock.max(now);
        if self.epoch_writes > 0 && self.in_flight.is_empty() {
            self.close_epoch(false, out);
        }
        for slot in 0..self.peers.len() {
            if self.peers[slot].connection != ConnState::Connected {
                continue;
            }
            self.resync_tick(now, slot, out);
            self.verify_tick(now, slot, out);
            self.ahead_tick(now, slot, out);
            let oldest = self.oldest_unacked(slot);
            let peer = &mut self.peers[slot];
            let verdict = peer.liveness.check(now, &peer.config, oldest);
            match verdict {
                Ok(true) => out.push(Action::SendControl {
                    peer: peer.config.node_id,
                    message: PeerMessage::Ping,
                }),
                Ok(false) => {}
                Err((state, reason)) => {
                    let id = peer.config.node_id;
                    out.push(Action::Disconnect {
                        peer: id,
                        state,
                        reason: reason.clone().into(),
                    });
                    self.peer_disconnected(now, id, state, reason, out);
                }
            }
        }
        for slot in 0..self.peers.len() {
            self.drain_check(slot, out);
        }
        self.finish_leaving(now, out);
        self.pins_tick(now, out);
        self.announce_settled(true, out);
        self.announce_disks(out);
        self.update_quorum(now, out);
        // The lag bound's age may have passed, or confirmations freed room.
        self.start_waiting(now, out);
        self.start_resync_reads(out);
    }

    /// When the oldest write still waiting for this peer was sent.
    fn oldest_unacked(&self, slot: usize) -> Option<Time> {
        self.in_flight.values().find_map(|w| match w.peers[slot] {
            PeerStage::Queued { since }
            | PeerStage::Sent { since }
            | PeerStage::Received { since } => Some(since),
            PeerStage::Skipped | PeerStage::Settled => None,
        })
    }

    // ----- roles and administration ----------------------------------------------------

    /// Become Primary. Refused while a connected peer is Primary.
    ///
    /// [`Promotion::Forced`] (`primary --force`): a disk that is not UpToDate (a just-created
    /// or Outdated one, not a sync target mid-resync) becomes UpToDate with a new current
    /// generation identifier, so it is the source of a full sync; connected peers get a new
    /// handshake at once. Every volume's primary indicator is persisted before the first
    /// write as Primary completes.
    pub fn promote(
        &mut self,
        promotion: Promotion,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let force = promotion == Promotion::Forced;
        if let Some(peer) = self.primary_peer() {
            return Err(StateError::PeerIsPrimary {
                peer: peer.to_string(),
            });
        }
        if !force && self.volumes.iter().any(|v| v.possibly_stale) {
            return Err(StateError::PossiblyStale);
        }
        if !force && self.unclean_unmet {
            return Err(StateError::UncleanSinceRestart);
        }
        // As in DRBD, the victim of a split brain is never the Primary: promoted, this node
        // would serve data the administrator already gave up on.
        if let Some(peer) = self
            .peers
            .iter()
            .find(|p| p.discard_my_data)
            .filter(|_| !force)
        {
            return Err(StateError::DataToBeDiscarded {
                peer: peer.config.name.clone(),
            });
        }
        if !self.compute_quorum() {
            return Err(StateError::NoQuorum(self.quorum_words()));
        }
        self.refuse_while_handshaking()?;
        for (vslot, volume) in self.volumes.iter().enumerate() {
            match volume.disk {
                DiskState::UpToDate => {}
                disk if !force => return Err(StateError::NotUpToDate(disk)),
                DiskState::Inconsistent | DiskState::Outdated | DiskState::Consistent
                    if !self.is_sync_target(vslot) => {}
                disk => return Err(StateError::CannotForce(disk)),
            }
        }
        self.confirm_promotion_quorum(out)?;
        self.fence_before_promotion(force, out)?;
        // The promotion saw quorum (`compute_quorum`); the state writes are judged by must
        // say so too, or the first write under `on-no-quorum io-error` fails with EIO.
        let now = self.clock;
        self.update_quorum(now, out);
        self.failing_pending = false;
        let was_primary = self.role == Role::Primary;
        self.set_role(Role::Primary, out);
        self.resume_async_on_promote(out);
        for vslot in 0..self.volumes.len() {
            // Forced: this node's data is the data now, whatever it may lack.
            self.volumes[vslot].possibly_stale = false;
            if self.volumes[vslot].disk != DiskState::UpToDate {
                self.force_up_to_date(vslot, out);
            } else if !was_primary {
                self.distrust_shared_with(vslot);
                self.mark_role_if_all_present(vslot);
                self.meta_changed(vslot, out);
            }
        }
        Ok(())
    }

    /// A handshake under way decides with the role and identifiers this node sent: a
    /// promotion now could make a Primary the target of a resync (DRBD refuses state changes
    /// in such transient states too).
    fn refuse_while_handshaking(&self) -> Result<(), StateError> {
        let handshaking = self.peers.iter().find(|p| {
            p.connection == ConnState::Connected
                && p.syncs.iter().any(|s| {
                    matches!(
                        s,
                        SyncState::WaitUuids { .. }
                            | SyncState::StartingSource(_)
                            | SyncState::StartingTarget(_)
                    )
                })
        });
        match handshaking {
            Some(peer) => Err(StateError::SyncInProgress {
                peer: peer.config.name.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Become Secondary. Refused while the export is open.
    pub fn demote(&mut self, out: &mut Vec<Action<P>>) -> Result<(), StateError> {
        if self.open_count > 0 {
            return Err(StateError::DeviceInUse {
                count: self.open_count,
            });
        }
        let was_primary = self.role == Role::Primary;
        if was_primary {
            self.close_epoch(false, out);
            self.peer_ack_owed = true;
        }
        self.set_role(Role::Secondary, out);
        // Nothing held completed: a generation owed for want of quorum is owed no more.
        self.volumes
            .iter_mut()
            .for_each(|v| v.rotation_owed = false);
        self.revert_unused_generations(out);
        self.fence_on_demote();
        self.leave_async_on_demote(out);
        if was_primary {
            // The primary indicator goes; the driver writes the dirty bitmap pages with it.
            for vslot in 0..self.volumes.len() {
                self.volumes[vslot].ids.mark_role(Role::Secondary);
                self.meta_changed(vslot, out);
            }
        }
        Ok(())
    }

    /// Tells every connected peer our disk states if they changed since the last `State`.
    fn announce_disks(&mut self, out: &mut Vec<Action<P>>) {
        if self.leaving_pending() {
            // Disks outdated by a departure are announced once durable (`leave.rs`).
            return;
        }
        let disks = self.disk_list();
        if disks == self.disks_announced {
            return;
        }
        for peer in self
            .peers
            .iter()
            .filter(|p| p.connection == ConnState::Connected)
        {
            let message = PeerMessage::State {
                role: self.role,
                disks: disks.clone(),
            };
            out.push(Action::SendControl {
                peer: peer.config.node_id,
                message,
            });
        }
        self.disks_announced = disks;
    }

    fn set_role(&mut self, role: Role, out: &mut Vec<Action<P>>) {
        if self.role == role {
            return;
        }
        self.role = role;
        if role == Role::Primary {
            self.vote = None;
        }
        let disks = self.disk_list();
        for peer in self
            .peers
            .iter()
            .filter(|p| p.connection == ConnState::Connected)
        {
            let message = PeerMessage::State {
                role,
                disks: disks.clone(),
            };
            out.push(Action::SendControl {
                peer: peer.config.node_id,
                message,
            });
        }
        out.push(Action::StateChanged);
    }

    /// A client opened (`true`) or closed (`false`) the export for writing.
    pub fn export_opened(&mut self, opened: bool) {
        self.open_count = if opened {
            self.open_count + 1
        } else {
            self.open_count.saturating_sub(1)
        };
    }

    /// Whether a client has the export open.
    pub fn is_open(&self) -> bool {
        self.open_count > 0
    }

    /// Stop (`false`: StandAlone) or resume (`true`) connecting to `peer`.
    pub fn set_connect(
        &mut self,
        now: Time,
        peer: u8,
        connect: bool,
        out: &mut Vec<Action<P>>,
    ) -> Result<(), StateError> {
        let slot = self.peer_slot(peer).ok_or(StateError::NoSuchPeer(peer))?;
        if connect {
            if let Some(leaving) = &mut self.peers[slot].leaving {
                leaving.reconnect = true;
                return Ok(());
            }
            if self.peers[slot].connection == ConnState::StandAlone {
                self.peers[slot].connection = ConnState::Connecting;
                out.push(Action::StateChanged);
            }
            return Ok(());
        }
        if self.peers[slot].leaving.is_some() {
            // A departure is under way; it ends StandAlone by itself.
            return Ok(());
        }
        if self.departure_outdates(slot) {
            self.begin_leaving(now, slot, out);
            return Ok(());
        }
        if self.peers[slot].connection == ConnState::Connected {
            let reason = "disconnected by the administrator".to_string();
            out.push(Action::Disconnect {
                peer,
                state: ConnState::StandAlone,
                reason: reason.clone().into(),
            });
            self.peer_disconnected(now, peer, ConnState::StandAlone, reason, out);
        }
        self.peers[slot].connection = ConnState::StandAlone;
        self.peers[slot].last_error = None;
        out.push(Action::StateChanged);
        Ok(())
    }

    /// Everything status shows.
    pub fn status(&self) -> EngineStatus {
        let in_flight = u64::try_from(self.in_flight.len() + self.held_count()).unwrap_or(u64::MAX);
        let volumes = self
            .volumes
            .iter()
            .map(|v| VolumeStatus {
                volume: v.number,
                disk: v.disk,
                size_bytes: v.size_bytes,
                written_bytes: v.written_bytes,
                upper_pending: in_flight,
                lower_pending: self.lower_pending,
                al_writes: v.log.as_ref().map_or(0, |log| log.written),
                bm_writes: v.bm_writes,
                possibly_stale: v.possibly_stale,
                unclean_since_restart: self.unclean_unmet,
            })
            .collect();
        let peers = (0..self.peers.len())
            .map(|slot| self.peer_status(slot))
            .collect();
        EngineStatus {
            node_id: self.node_id,
            role: self.role,
            volumes,
            peers,
        }
    }

    fn peer_status(&self, slot: usize) -> PeerStatus {
        let p = &self.peers[slot];
        let connected = p.connection == ConnState::Connected;
        let unacked = self
            .in_flight
            .values()
            .filter(|w| !matches!(w.peers[slot], PeerStage::Skipped | PeerStage::Settled))
            .count();
        let volumes = self
            .volumes
            .iter()
            .enumerate()
            .map(|(vslot, v)| {
                let out_of_sync_bytes = p.bitmaps[vslot].count_set_bytes();
                let known = self.fenced_disk(slot).unwrap_or(p.disks[vslot]);
                let sync = &p.syncs[vslot];
                let peer_disk = match sync {
                    SyncState::StartingSource(_) | SyncState::Source(_) => DiskState::Inconsistent,
                    SyncState::Established
                        if out_of_sync_bytes > 0 && known == DiskState::UpToDate =>
                    {
                        DiskState::Outdated
                    }
                    _ => known,
                };
                let pause = self.sync_pause(slot, vslot);
                let replication = match sync.repl_state() {
                    ReplState::Established if p.ahead.is_ahead() => ReplState::Ahead,
                    ReplState::Established if p.ahead.behind => ReplState::Behind,
                    ReplState::SyncSource if pause.any() => ReplState::PausedSyncS,
                    ReplState::SyncTarget if pause.any() => ReplState::PausedSyncT,
                    state => state,
                };
                PeerVolumeStatus {
                    volume: v.number,
                    replication,
                    resync_suspended: pause,
                    peer_disk,
                    sent_bytes: p.sent_bytes[vslot],
                    received_bytes: p.received_bytes[vslot],
                    out_of_sync_bytes,
                    pending: p.receiver.pending() + p.log.deferred_writes(),
                    resync: sync.progress(),
                    verify_oos_bytes: p.verify_counts[vslot].oos_bytes,
                    verify_skipped_bytes: p.verify_counts[vslot].skipped_bytes,
                }
            })
            .collect();
        PeerStatus {
            node_id: p.config.node_id,
            connection: p.connection,
            role: if connected { p.role } else { Role::Unknown },
            protocol: p.protocol,
            lag: self.lag_status(self.clock, slot),
            last_error: p.last_error.clone(),
            unacked: unacked as u64,
            volumes,
        }
    }
}

/// Whether a write goes to this peer now: connected (its handshake identifiers precede the
/// write on the data socket), not Primary itself, and not left behind by pull-ahead.
/// A peer whose every volume is Diskless (a tiebreaker, or detached) stores nothing: it is
/// left behind like an absent peer (its blocks are marked out of sync for it, so a later
/// attach resyncs them).
fn replicates_to<P>(peer: &Peer<P>) -> bool {
    peer.connection == ConnState::Connected
        && peer.role != Role::Primary
        && !peer.ahead.is_ahead()
        && !is_diskless(peer)
}

/// The peer announced that it has no disk for any volume (`disk none;`, or detached).
fn is_diskless<P>(peer: &Peer<P>) -> bool {
    !peer.disks.is_empty() && peer.disks.iter().all(|d| *d == DiskState::Diskless)
}

/// Marks `extent` out of sync in `bitmap`. The extent was checked against the volume, whose
/// size the bitmap covers, so the range error cannot happen.
fn mark(bitmap: &mut Bitmap, extent: Extent) {
    let marked = bitmap.set(extent.offset, extent.length);
    assert!(marked.is_ok(), "a checked extent lies within its bitmap");
}

/// A peer as configured: disconnected, with all-clear bitmaps (replaced by the driver's).
fn new_peer<P: Clone>(
    local: NodeId,
    config: &PeerConfig,
    volumes: &[VolumeConfig],
) -> Result<Peer<P>, SyncError> {
    let node = NodeId::new(config.node_id)?;
    let nodes = HandshakeNodes::new(local, node)?;
    if config.max_buffers_pages == 0 {
        return Err(SyncError::ZeroMaxBuffers);
    }
    let rate = ResyncRateController::new(config.resync)?;
    let mut bitmaps = Vec::with_capacity(volumes.len());
    for volume in volumes {
        bitmaps.push(peer_bitmap(config, volume)?);
    }
    let count = volumes.len();
    Ok(Peer {
        config: config.clone(),
        node,
        nodes,
        liveness: Liveness::default(),
        receiver: Receiver::new(config.node_id, config.durable_acks),
        connection: ConnState::Connecting,
        role: Role::Unknown,
        disks: vec![DiskState::DUnknown; count],
        last_error: None,
        transfer_log: VecDeque::new(),
        bitmaps,
        syncs: (0..count).map(|_| SyncState::Off).collect(),
        sent_bytes: vec![0; count],
        received_bytes: vec![0; count],
        discard_my_data: false,
        rate,
        verify_counts: vec![verify::VerifyCounts::default(); count],
        user_paused: vec![false; count],
        peer_paused: vec![false; count],
        protocol: config.protocol,
        wanted_protocol: config.protocol,
        async_state: lag::AsyncState::default(),
        lag_bound: None,
        lag_credit: 0,
        drain: lag::DrainMeter::default(),
        stale_ack: None,
        stats: PeerStats::default(),
        ahead: ahead::AheadTrack::default(),
        bitmap_free: vec![false; count],
        fence_policy: FencePolicy::default(),
        fence: fence::FenceState::default(),
        leaving: None,
        known_ids: vec![None; count],
        rotations: rotate::RotationCount::default(),
        rotated_from: vec![0; count],
        accepted: vec![false; count],
        unpromotable: vec![false; count],
        handshake_held: vec![None; count],
        unsettled: (0..count)
            .map(|_| reconcile::Unsettled::default())
            .collect(),
        acked_epoch: 0,
        reconcile_owed: vec![false; count],
        log: secondary_log::PeerLog::new(count),
        last_seq: 0,
    })
}

/// The peer's bitmap of `volume`: the driver's, or all clear; its size must be the volume's.
fn peer_bitmap(config: &PeerConfig, volume: &VolumeConfig) -> Result<Bitmap, SyncError> {
    let given = volume
        .bitmaps
        .iter()
        .find(|b| b.peer == config.node_id)
        .map(|b| b.bitmap.clone());
    let bitmap = match given {
        Some(bitmap) => bitmap,
        None => Bitmap::new(volume.size_bytes, BITMAP_GRANULARITY_BYTES_DEFAULT).map_err(|_| {
            SyncError::BitmapSizeMismatch {
                volume: volume.number,
                peer: config.node_id,
                bitmap_bytes: 0,
                volume_bytes: volume.size_bytes,
            }
        })?,
    };
    if bitmap.data_bytes() != volume.size_bytes {
        let (volume, peer, bitmap_bytes, volume_bytes) = (
            volume.number,
            config.node_id,
            bitmap.data_bytes(),
            volume.size_bytes,
        );
        return Err(SyncError::BitmapSizeMismatch {
            volume,
            peer,
            bitmap_bytes,
            volume_bytes,
        });
    }
    Ok(bitmap)
}

/// The volume as attached; a crashed Primary without an activity log marks every block out of
/// sync for every peer (with one, the driver marked the recovered hot extents).
fn attach_volume<P>(
    vslot: usize,
    config: VolumeConfig,
    peers: &mut [Peer<P>],
) -> Result<Volume, SyncError> {
    for given in &config.bitmaps {
        let known = peers.iter().any(|p| p.config.node_id == given.peer);
        let twice = config
            .bitmaps
            .iter()
            .filter(|b| b.peer == given.peer)
            .count()
            > 1;
        if !known || twice {
            return Err(SyncError::BitmapPeerUnknown {
                volume: config.number,
                peer: given.peer,
            });
        }
    }
    let log =
        activity_log::VolumeLog::attach(config.number, config.size_bytes, config.activity_log)?;
    let mut ids = config.ids;
    if config.crashed_primary {
        ids.flags.crashed_primary = true;
    }
    ids.flags.crashed_secondary = config.unclean && !ids.flags.crashed_primary;
    for peer in peers
        .iter_mut()
        .filter(|p| config.departed.contains(p.node))
    {
        if let Some(disk) = peer.disks.get_mut(vslot) {
            *disk = DiskState::Outdated;
        }
    }
    if ids.flags.crashed_primary && log.is_none() {
        for peer in peers.iter_mut() {
            if let Some(bitmap) = peer.bitmaps.get_mut(vslot) {
                bitmap.set_all();
            }
        }
    }
    Ok(Volume {
        number: config.number,
        size_bytes: config.size_bytes,
        disk: config.disk,
        on_io_error: OnIoError::default(),
        ids,
        written_bytes: 0,
        meta: persist::MetaIo::loaded(config.departed),
        log,
        bm_writes: 0,
        after_dependency: false,
        possibly_stale: config.possibly_stale,
        shared_with: NodeSet::ALL,
        rotation_owed: false,
        unused_generation: None,
    })
}

/// Send one write to one peer if it is connected; otherwise mark its blocks out of sync.
fn send_to_peer<P: Clone>(
    peer: &mut Peer<P>,
    now: Time,
    sent: Sent,
    vslot: usize,
    op: &DiskOp<P>,
    out: &mut Vec<Action<P>>,
) -> PeerStage {
    if !replicates_to(peer) || peer.disks[vslot] == DiskState::Diskless {
        if !peer.bitmap_free[vslot] {
            mark(&mut peer.bitmaps[vslot], sent.extent);
        }
        return PeerStage::Skipped;
    }
    peer.sent_bytes[vslot] += sent.extent.length;
    assert!(
        peer.transfer_log
            .back()
            .is_none_or(|last| last.seq < sent.seq),
        "a transfer log is ordered by sequence number"
    );
    peer.transfer_log.push_back(sent);
    out.push(Action::SendData {
        peer: peer.config.node_id,
        seq: sent.seq,
        epoch: sent.epoch,
        volume: sent.volume,
        op: op.clone(),
    });
    PeerStage::Queued { since: now }
}

/// The byte range an operation touches (None for flush or a wrapping range).
fn op_extent<P>(op: &Op<P>) -> Option<Extent> {
    match op {
        Op::Write { offset, length, .. }
        | Op::Trim { offset, length, .. }
        | Op::WriteZeroes { offset, length, .. } => Extent::new(*offset, *length),
        Op::Flush => None,
    }
}

fn to_disk_op<P>(op: Op<P>) -> Option<(DiskOp<P>, Extent)> {
    let extent = op_extent(&op)?;
    let fua = |flags: WriteFlags| flags.fua;
    let disk_op = match op {
        Op::Write {
            offset,
            length,
            data,
            flags,
        } => DiskOp::Write {
            offset,
            length,
            data,
            fua: fua(flags),
        },
        Op::Trim {
            offset,
            length,
            flags,
        } => DiskOp::Trim {
            offset,
            length,
            fua: fua(flags),
        },
        Op::WriteZeroes {
            offset,
            length,
            flags,
        } => DiskOp::WriteZeroes {
            offset,
            length,
            fua: fua(flags),
        },
        Op::Flush => return None,
    };
    Some((disk_op, extent))
}

/// Bytes a disk operation covers.
fn disk_op_length<P>(op: &DiskOp<P>) -> u64 {
    match op {
        DiskOp::Write { length, .. }
        | DiskOp::Trim { length, .. }
        | DiskOp::WriteZeroes { length, .. } => *length,
    }
}
