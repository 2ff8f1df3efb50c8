//! The sync state of one volume towards one peer, from the connect to the end of a resync, as
//! plain data: the engine (`engine/handshake.rs`, `engine/resync.rs`) moves it along.
//!
//! ```text
//!  Off ──connect──► WaitUuids ──both ids known──► Established            (no sync)
//!                                 │            ├► StartingSource ─► Source ─► Established
//!                                 │            └► StartingTarget ─► Target ─► Established
//!                                 └► (split brain, unrelated, conflicts: StandAlone, Off)
//!  any ──disconnect──► Off   (the bitmaps keep every block not yet confirmed)
//!  Established ──verify──► VerifySource / VerifyTarget ──walk done──► Established
//! ```
//!
//! Invariants:
//! - A `Target` requests each block at most once per resync: `cursor` only grows, and a block
//!   is requested only at or after it.
//! - `Source::busy` ranges (`reading`, `awaiting`) never overlap a client write in flight, and
//!   a range is read only once no write to it is still unconfirmed by the target (the engine
//!   checks both before it starts a read, and holds client writes back while a range is busy).
//! - Every map and queue here is bounded by the resync's in-flight limit (`max-buffers`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use meta::RleDecoder;

use crate::engine::verify::{VerifySource, VerifyTarget};
use crate::extent::Extent;
use crate::resync_rate::ResyncRateController;
use crate::state::{DiskState, ReplState, Role};
use crate::types::{ResyncProgress, Time};
use crate::uuid::GenerationIds;

/// How many progress samples are kept for the rate (one per tick: about 3 s).
const RATE_SAMPLES_MAX: usize = 30;

/// Where one volume stands with one peer.
#[derive(Debug)]
pub(crate) enum SyncState {
    /// Not connected.
    Off,
    /// Connected; our identifiers were sent (`sent` is what the peer will compare with), the
    /// peer's are awaited.
    WaitUuids { sent: Box<SentUuids> },
    /// In sync as far as the handshake knows; new writes replicate.
    Established,
    /// Decided to be the sync source: waiting for our sync identifier to be persisted and for
    /// the target's bitmap (WFBitMapS).
    StartingSource(Box<StartingSource>),
    /// Decided to be the sync target: waiting for the source's bitmap and sync identifier, and
    /// for our Inconsistent state to be persisted (WFBitMapT).
    StartingTarget(Box<StartingTarget>),
    /// Sending the resync.
    Source(Box<SourceSync>),
    /// Receiving the resync.
    Target(Box<TargetSync>),
    /// Online verify, this node comparing (`engine/verify.rs`).
    VerifySource(Box<VerifySource>),
    /// Online verify, this node answering.
    VerifyTarget(Box<VerifyTarget>),
}

impl SyncState {
    /// The replication state `status` shows.
    pub(crate) fn repl_state(&self) -> ReplState {
        match self {
            SyncState::Off | SyncState::WaitUuids { .. } => ReplState::Off,
            SyncState::Established => ReplState::Established,
            SyncState::StartingSource(_) => ReplState::WFBitMapS,
            SyncState::StartingTarget(_) => ReplState::WFBitMapT,
            SyncState::Source(_) => ReplState::SyncSource,
            SyncState::Target(_) => ReplState::SyncTarget,
            SyncState::VerifySource(_) => ReplState::VerifyS,
            SyncState::VerifyTarget(_) => ReplState::VerifyT,
        }
    }

    /// The resync's progress, while one runs.
    pub(crate) fn progress(&self) -> Option<ResyncProgress> {
        match self {
            SyncState::Source(source) => Some(source.progress.report(source.busy_bytes())),
            SyncState::Target(target) => Some(target.progress.report(target.in_flight_bytes())),
            SyncState::VerifySource(source) => Some(source.report()),
            SyncState::VerifyTarget(target) => Some(target.report()),
            _ => None,
        }
    }
}

/// The identifiers we sent for this handshake round, as the peer will see them.
#[derive(Debug, Clone)]
pub(crate) struct SentUuids {
    pub(crate) ids: GenerationIds,
    pub(crate) bitmap_bits: u64,
    pub(crate) role: Role,
    pub(crate) disk: DiskState,
    pub(crate) followed: Option<crate::types::Followed>,
}

/// WFBitMapS.
#[derive(Debug)]
pub(crate) struct StartingSource {
    /// The target's bitmap, being received.
    pub(crate) decoder: RleDecoder,
    /// The metadata version holding the new sync identifier; the bitmap and `SyncStart` are
    /// sent once it is persisted.
    pub(crate) meta_version: u64,
    /// `SyncStart` and our bitmap went out.
    pub(crate) announced: bool,
}

/// WFBitMapT.
#[derive(Debug)]
pub(crate) struct StartingTarget {
    /// The source's bitmap, being received.
    pub(crate) decoder: RleDecoder,
    /// The source's identifiers from its `SyncStart`, adopted at the end.
    pub(crate) source_ids: Option<Box<GenerationIds>>,
    /// The metadata version that records us Inconsistent with the sync identifier.
    pub(crate) meta_version: Option<u64>,
}

/// A range of one resync request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Requested {
    pub(crate) extent: Extent,
    /// When it was requested (target) or received (source).
    pub(crate) since: Time,
}

/// SyncSource.
#[derive(Debug)]
pub(crate) struct SourceSync {
    /// Requests received and not yet started (a write to the range is still unconfirmed).
    pub(crate) queued: VecDeque<(u64, Requested)>,
    /// Local reads in flight.
    pub(crate) reading: BTreeMap<u64, Requested>,
    /// Replies sent, waiting for the target's ack.
    pub(crate) awaiting: BTreeMap<u64, Requested>,
    /// `csums-alg`: the target's digests of queued and reading requests, until compared with
    /// ours (`engine/csums.rs`).
    pub(crate) csums: BTreeMap<u64, Vec<u8>>,
    pub(crate) progress: Progress,
}

impl SourceSync {
    pub(crate) fn new(total_bytes: u64, now: Time) -> SourceSync {
        SourceSync {
            queued: VecDeque::new(),
            reading: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            csums: BTreeMap::new(),
            progress: Progress::new(total_bytes, now),
        }
    }

    /// Whether a read or an unacknowledged reply covers part of `extent`: a client write to
    /// it must wait.
    pub(crate) fn is_busy(&self, extent: &Extent) -> bool {
        self.reading
            .values()
            .chain(self.awaiting.values())
            .any(|r| r.extent.overlaps(extent))
    }

    /// Bytes requested and not yet acknowledged.
    pub(crate) fn busy_bytes(&self) -> u64 {
        let queued = self.queued.iter().map(|(_, r)| r.extent.length);
        let busy = self
            .reading
            .values()
            .chain(self.awaiting.values())
            .map(|r| r.extent.length);
        queued.chain(busy).sum()
    }

    /// Whether `id` is known in any stage.
    pub(crate) fn knows(&self, id: u64) -> bool {
        self.reading.contains_key(&id)
            || self.awaiting.contains_key(&id)
            || self.queued.iter().any(|(queued, _)| *queued == id)
    }
}

/// SyncTarget.
#[derive(Debug)]
pub(crate) struct TargetSync {
    /// The source's identifiers, adopted when the resync succeeds.
    pub(crate) source_ids: Box<GenerationIds>,
    /// The next block to consider for a request.
    pub(crate) cursor: u64,
    /// Requests sent and not answered.
    pub(crate) requests: BTreeMap<u64, Requested>,
    /// Replies received whose local write has not finished.
    pub(crate) writing: BTreeMap<u64, Requested>,
    /// Paces the requests: the tick's budget, and refills of its window between ticks.
    pub(crate) controller: ResyncRateController,
    /// Reply bytes received since the last tick (for the controller).
    pub(crate) answered_since_tick: u64,
    /// The latest request round trip.
    pub(crate) round_trip: Option<Duration>,
    /// Replicated writes arrived since the last tick (application I/O for `c-min-rate`).
    pub(crate) application_active: bool,
    pub(crate) progress: Progress,
}

impl TargetSync {
    /// Bytes requested and not yet written.
    pub(crate) fn in_flight_bytes(&self) -> u64 {
        self.requests
            .values()
            .chain(self.writing.values())
            .map(|r| r.extent.length)
            .sum()
    }
}

/// Byte counts of a resync and a short history of them for the rate.
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    pub(crate) total_bytes: u64,
    pub(crate) done_bytes: u64,
    pub(crate) failed_bytes: u64,
    samples: VecDeque<(Time, u64)>,
}

impl Progress {
    pub(crate) fn new(total_bytes: u64, now: Time) -> Progress {
        Progress {
            total_bytes,
            done_bytes: 0,
            failed_bytes: 0,
            samples: VecDeque::from([(now, 0)]),
        }
    }

    /// Records a sample (once per tick).
    pub(crate) fn sample(&mut self, now: Time) {
        if self.samples.len() == RATE_SAMPLES_MAX {
            self.samples.pop_front();
        }
        self.samples.push_back((now, self.done_bytes));
    }

    fn rate_bytes_per_s(&self) -> u64 {
        let (Some(first), Some(last)) = (self.samples.front(), self.samples.back()) else {
            return 0;
        };
        let nanos = last.0 .0.saturating_sub(first.0 .0);
        if nanos == 0 {
            return 0;
        }
        let bytes = u128::from(last.1.saturating_sub(first.1));
        u64::try_from(bytes * 1_000_000_000 / u128::from(nanos)).unwrap_or(u64::MAX)
    }

    pub(crate) fn report(&self, in_flight_bytes: u64) -> ResyncProgress {
        ResyncProgress {
            total_bytes: self.total_bytes,
            done_bytes: self.done_bytes,
            failed_bytes: self.failed_bytes,
            in_flight_bytes,
            rate_bytes_per_s: self.rate_bytes_per_s(),
        }
    }
}
