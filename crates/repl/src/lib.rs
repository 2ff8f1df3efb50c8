//! tandem's replication logic as a deterministic state machine that does no I/O.
//!
//! The [`Engine`] of one resource decides where each write goes, when it completes, how writes
//! are grouped into epochs, how a secondary applies what it receives, and when a peer is
//! considered dead. It never touches a socket, a file or a clock: the driver (the daemon, or a
//! test) feeds it inputs — the time, requests, I/O completions, peer messages — and executes
//! the [`Action`]s it returns.
//!
//! # Call protocol
//! - Every method takes `now` (monotonic, never decreasing) and an output vector; it appends
//!   actions and never removes any.
//! - The driver must execute `Send*` actions for one peer in the order they were produced, on
//!   the peer's socket of the right kind (data or control). It may execute local I/O actions
//!   concurrently and in any order: the engine only issues I/O that may run concurrently.
//! - Every `LocalWrite`/`LocalFlush`/`PersistMeta`/`WriteActivityLog` must be answered by
//!   exactly one [`Engine::local_done`] with the same [`IoId`], every `LocalRead` by exactly one
//!   [`Engine::local_read_done`], every `LocalDigest` by exactly one
//!   [`Engine::local_digest_done`], every `FencePeer` by exactly one
//!   [`Engine::fence_peer_done`] (the handler's exit status); every [`Action::Complete`] is
//!   the one answer to a submitted request.
//! - `P` is the payload type: the daemon uses a reference-counted buffer, tests use anything
//!   cloneable. The engine clones it for the local write and each peer, never looks inside.
//!
//! # Metadata (the driver's obligations)
//! - **Attach:** build each [`VolumeConfig`] from the superblock (identifiers, disk state by
//!   [`VolumeMeta::attach_disk_state`]) and the on-disk bitmaps. If the primary indicator was
//!   set, pass `crashed_primary: true` and write the superblock with the indicator cleared and
//!   `crashed_primary` set before starting.
//! - **Attach with an activity log** (`al-updates yes`): read the ring, `meta::recover` it,
//!   mark what it names (`Recovery::mark_out_of_sync`: the hot extents, or everything when it
//!   cannot tell) in every peer's bitmap, write those bitmap pages and a `meta::format_ring`
//!   image starting at `next_seq`, make them durable, and pass
//!   `VolumeConfig::activity_log: Some(ActivityLog::new(config, next_seq + ring blocks))`. The
//!   engine then does not set every bit for a crashed Primary: only the marked extents resync.
//!   A node that went down uncleanly in any other role (its `in_use` flag was still set) and
//!   has more than one peer marks them the same way (a Secondary keeps the extents of
//!   unsettled replicated writes hot, `engine/secondary_log.rs`) and passes
//!   `VolumeConfig::unclean: true`.
//!   Without a log (`None`, `al-updates no`), a crashed Primary sets every bit at attach: take
//!   those pages ([`Engine::take_dirty_bitmap_pages`]) and write them before anything else, so a
//!   later start with a log does not depend on them.
//! - **`WriteActivityLog`:** write its bitmap pages and make them durable, then its block at
//!   the AL ring region's base + `offset_bytes`, make it durable, and answer; stop at the first
//!   failure and answer the error (the writes waiting for it fail with [`IoError::Io`]).
//!   Metadata writes must reach the disk in the order they were handed out (bitmap pages from
//!   any source, blocks, superblocks): a page handed out earlier is durable before a later
//!   activity-log block is written, and an earlier image never lands over a later one. One
//!   metadata queue per volume executed in order satisfies both.
//! - **Request size with a log:** a client request may span at most `min(al-extents, 48)`
//!   extents of 4 MiB, or it is refused with [`IoError::Invalid`]: keep the largest request at
//!   most `(min(al-extents, 48) − 1) × 4 MiB` (NBD's 32 MiB needs `al-extents` ≥ 9).
//! - **`PersistMeta`:** write the bitmap pages from [`Engine::take_dirty_bitmap_pages`] for
//!   every peer of the volume, then the superblock image of `meta`, make both durable, then
//!   answer. Writes that depend on it (the first write after a peer was lost, the first write
//!   as Primary) are completed only afterwards, and a resync starts only afterwards.
//! - **Bitmap pages** also on disconnect and demotion (`StateChanged`), on clean shutdown,
//!   and every few seconds while a peer is away.
//! - **Randomness:** [`EngineConfig::random_seed`] must be fresh on every start (it seeds new
//!   generation identifiers).
//!
//! # Handshake and resync
//! After [`Engine::peer_connected`] both sides exchange identifiers per volume on the data
//! socket and decide (drbd-semantics.md §2): no sync, a bitmap or full resync in one
//! direction, or StandAlone (split brain the `after-sb-*` policies do not resolve, unrelated
//! data, a Primary that would be overwritten). See `engine/handshake.rs` and
//! `engine/resync.rs`; `sync.rs` has the state diagram. Admin inputs: [`Engine::promote`]
//! (`--force`), [`Engine::new_current_uuid`], [`Engine::set_discard_my_data`],
//! [`Engine::set_connect`], [`Engine::start_verify`] (online verify, `engine/verify.rs`: the
//! driver computes the digests with `verify-alg`, the engine compares them).
//!
//! # Invariants
//! - A write is completed to the client only when its local write finished and every peer
//!   that was sent the write satisfied its connection's protocol (A: handed to the socket,
//!   B: receipt acknowledged, C: write acknowledged), or was disconnected, in which case the
//!   write's blocks are marked out of sync for that peer.
//! - Overlapping writes never run concurrently: a write that overlaps one in flight waits.
//! - A write submitted after another write completed is in a later epoch, so a secondary, which
//!   applies epochs one after the other, only ever shows a state the primary went through.
//! - Every queue is bounded by the driver's in-flight limits; the engine adds no unbounded
//!   work of its own. Resync data in flight is bounded by `max-buffers` on the target (and a
//!   source refuses more than DRBD's largest `max-buffers`). A bitmap is sent in one go: its
//!   RLE chunks take about one byte per run of bits (at worst one byte per bit, for an
//!   alternating pattern; typically a few bytes in all).
//! - A block a client wrote is never overwritten by older resync data (`engine/resync.rs`).
//! - With an activity log, a client write reaches a disk (local or a peer's) only once its
//!   4 MiB extents are hot in a durable transaction, and they stay hot until the write is
//!   complete and every peer wrote it or has its blocks marked out of sync; an extent leaves
//!   the log only after the bitmap pages covering it are durable (`engine/activity_log.rs`).
//!   Writes waiting for the log are client requests, bounded like the others, and at most one
//!   transaction per volume is in flight.

mod after_split_brain;
mod engine;
mod extent;
mod liveness;
mod receiver;
mod resync_rate;
mod state;
mod sync;
mod types;
mod uuid;
mod violation;

pub use after_split_brain::{
    resolve_split_brain, younger_primary, AfterSb0Pri, AfterSb1Pri, AfterSb2Pri, Resolution,
    SideFacts, SplitBrainFacts, SplitBrainPolicies,
};
pub use engine::{
    fence_outcome, BitmapPages, Congestion, CongestionPolicy, Engine, EngineConfig, FencePolicy,
    LagBound, LagStatus, LagThrottle, LocalStats, OnIoError, OnNoQuorum, PeerBitmap, PeerConfig,
    PeerStats, QuorumConfig, QuorumRule, ResizeRequest, SyncPause, VolumeConfig, AHEAD_DWELL_MIN,
    BITMAP_CHUNK_BYTES_MAX, BITMAP_GRANULARITY_BYTES_DEFAULT, COOL_DOWN_MAX, FENCE_PEER_IS_PRIMARY,
    LAG_THROTTLE_STEPS, LEAVE_PERSIST_MAX, RESYNC_REQUEST_BYTES_MAX, TICK_INTERVAL,
    VERIFY_DIGESTS_BYTES_MAX, VERIFY_REQUEST_BYTES_MAX,
};
pub use extent::Extent;
pub use resync_rate::{
    Allowance, ResyncLoad, ResyncRateConfig, ResyncRateController, ResyncTick, PLAN_AHEAD_MAX,
    PLAN_STEP, PLAN_STEPS_MAX,
};
pub use state::{ConnState, DiskState, Protocol, ReplState, Role};
pub use types::{
    Action, DigestAlg, DiskOp, EngineStatus, Followed, IoError, IoId, Op, PeerMessage, PeerStatus,
    PeerVolumeStatus, Promotion, RequestId, ResizeStep, ResyncProgress, StateError, Time,
    UuidsMessage, UuidsPurpose, VerifyOutcome, VolumeMeta, VolumeStatus, WriteFlags,
};
pub use uuid::{
    compare, Adoption, GenerationFlags, GenerationIds, Handshake, HandshakeLog, HandshakeNodes,
    NewCurrent, NodeId, NodeSet, Rule, Side, SyncDecision, SyncError, Transfer, HISTORY_SLOTS_MAX,
    NODE_SLOTS_MAX, UUID_JUST_CREATED, UUID_PRIMARY,
};
pub use violation::{DisconnectReason, PeerViolation};

#[cfg(test)]
mod tests;
