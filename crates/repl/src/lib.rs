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
//! - Every `LocalWrite`/`LocalFlush`/`PersistMeta` must be answered by exactly one
//!   [`Engine::local_done`] with the same [`IoId`], every `LocalRead` by exactly one
//!   [`Engine::local_read_done`], every `LocalDigest` by exactly one
//!   [`Engine::local_digest_done`]; every [`Action::Complete`] is the one answer to a
//!   submitted request.
//! - `P` is the payload type: the daemon uses a reference-counted buffer, tests use anything
//!   cloneable. The engine clones it for the local write and each peer, never looks inside.
//!
//! # Metadata (the driver's obligations)
//! - **Attach:** build each [`VolumeConfig`] from the superblock (identifiers, disk state by
//!   [`VolumeMeta::attach_disk_state`]) and the on-disk bitmaps. If the primary indicator was
//!   set, pass `crashed_primary: true` and write the superblock with the indicator cleared and
//!   `crashed_primary` set before starting. There is no activity log yet: a crashed Primary
//!   resyncs every block to its peers.
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

pub use after_split_brain::{
    resolve_split_brain, younger_primary, AfterSb0Pri, AfterSb1Pri, AfterSb2Pri, Resolution,
    SideFacts, SplitBrainFacts, SplitBrainPolicies,
};
pub use engine::{
    Engine, EngineConfig, PeerBitmap, PeerConfig, VolumeConfig, BITMAP_CHUNK_BYTES_MAX,
    BITMAP_GRANULARITY_BYTES_DEFAULT, RESYNC_REQUEST_BYTES_MAX, TICK_INTERVAL,
    VERIFY_DIGESTS_BYTES_MAX, VERIFY_REQUEST_BYTES_MAX,
};
pub use extent::Extent;
pub use resync_rate::{
    ResyncRateConfig, ResyncRateController, ResyncTick, PLAN_AHEAD_MAX, PLAN_STEP, PLAN_STEPS_MAX,
};
pub use state::{ConnState, DiskState, Protocol, ReplState, Role};
pub use types::{
    Action, DigestAlg, DiskOp, EngineStatus, IoError, IoId, Op, PeerMessage, PeerStatus, PeerVolumeStatus,
    RequestId, ResyncProgress, StateError, Time, UuidsMessage, UuidsPurpose, VerifyOutcome,
    VolumeMeta, VolumeStatus, WriteFlags,
};
pub use uuid::{
    compare, Adoption, GenerationFlags, GenerationIds, Handshake, HandshakeLog, HandshakeNodes,
    NewCurrent, NodeId, NodeSet, Rule, Side, SyncDecision, SyncError, Transfer,
    HISTORY_SLOTS_MAX, NODE_SLOTS_MAX, UUID_JUST_CREATED, UUID_PRIMARY,
};

#[cfg(test)]
mod tests;
