//! Why the engine ends a connection: a peer's protocol violation, or a deliberate drop.
//!
//! A [`PeerViolation`] is a message from a peer that the protocol does not allow in the state
//! the connection is in (a replicated write to a Primary, an answer to a request never made, a
//! range beyond the volume, ...). The engine answers every one the same way: it drops the
//! connection with `ProtocolError` and reconnects. Each variant is one cause and carries the
//! values its message names, so a test can assert which violation happened.
//!
//! A [`DisconnectReason`] is what [`crate::Action::Disconnect`] reports: a violation, or a
//! policy decision (split brain, a second Primary, a refused quorum vote, the administrator).
//!
//! # Invariants
//! - The `Display` text of every variant is the message the engine logged before the
//!   violations were typed: logs, the simulator's trace and tests matching on the text read
//!   the same.
//! - A violation never carries a payload or buffer: it is cheap to clone into the action and
//!   into the peer's last error.

use crate::state::ReplState;
use crate::Extent;

/// A message from a peer that breaks the protocol; the connection ends with `ProtocolError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerViolation {
    /// A barrier arrived while this node is Primary (only a Primary sends barriers).
    #[error("barrier received while Primary")]
    BarrierWhilePrimary,
    /// A replicated write arrived while this node is Primary.
    #[error("replicated write received while Primary")]
    WriteWhilePrimary,
    /// A replicated write names a volume this resource does not have.
    #[error("write to unknown volume {volume}")]
    WriteUnknownVolume { volume: u16 },
    /// A replicated write reaches past the end of its volume (or its range overflows).
    #[error("write beyond the end of volume {volume}: offset {offset} length {length}")]
    WriteBeyondEnd {
        volume: u16,
        offset: u64,
        length: u64,
    },
    /// A replicated write for an epoch older than one already received.
    #[error("write for epoch {epoch} after a later epoch")]
    WriteAfterLaterEpoch { epoch: u64 },
    /// A replicated write for an epoch whose barrier already arrived.
    #[error("write for epoch {epoch} after its barrier")]
    WriteAfterBarrier { epoch: u64 },
    /// A barrier for an epoch older than one already received.
    #[error("barrier for epoch {epoch} after a later epoch")]
    BarrierAfterLaterEpoch { epoch: u64 },
    /// A second barrier for the same epoch.
    #[error("second barrier for epoch {epoch}")]
    SecondBarrier { epoch: u64 },
    /// An acknowledgement for a sequence number never sent.
    #[error("ack for unknown write {seq}")]
    AckUnknownWrite { seq: u64 },
    /// An acknowledgement for a write that skipped this peer.
    #[error("ack for write {seq} that was never sent")]
    AckUnsentWrite { seq: u64 },
    /// A barrier acknowledgement for an epoch this node has not closed.
    #[error("barrier ack for epoch {epoch}, which is not closed yet")]
    BarrierAckOpenEpoch { epoch: u64 },
    /// The peer reports Primary while this node is Primary and two are not allowed.
    #[error("both nodes are Primary")]
    BothPrimary,
    /// A possibly-stale Ahead mark was sent to this Primary.
    #[error("a possibly-stale mark sent to a Primary")]
    StaleMarkToPrimary,
    /// More messages wait for this Secondary's activity log than it keeps.
    #[error("more than {limit} messages wait for the activity log")]
    DeferredOverflow { limit: usize },
    /// Generation identifiers for a volume this resource does not have.
    #[error("identifiers for unknown volume {volume}")]
    UuidsUnknownVolume { volume: u16 },
    /// A handshake for a volume whose resync with this peer is running.
    #[error("handshake for volume {volume} during a resync")]
    HandshakeDuringResync { volume: u16 },
    /// A sync start that carries no sync identifier.
    #[error("sync start without a sync identifier")]
    SyncStartWithoutIdentifier,
    /// A sync start for a volume this node is not becoming the sync target of.
    #[error("sync start for volume {volume} while not a sync target")]
    SyncStartNotTarget { volume: u16 },
    /// A second sync start for the same volume.
    #[error("second sync start for volume {volume}")]
    SecondSyncStart { volume: u16 },
    /// Identifiers to adopt while a handshake or resync of the volume is under way.
    #[error("identifiers to adopt for volume {volume} during a handshake or resync")]
    AdoptDuringResync { volume: u16 },
    /// A bitmap chunk for a volume this resource does not have.
    #[error("bitmap for unknown volume {volume}")]
    BitmapUnknownVolume { volume: u16 },
    /// A bitmap chunk while no bitmap exchange of the volume is under way.
    #[error("bitmap chunk for volume {volume} outside a bitmap exchange")]
    BitmapOutsideExchange { volume: u16 },
    /// A bitmap chunk after the whole bitmap arrived.
    #[error("bitmap chunk for volume {volume} after the whole bitmap")]
    BitmapAfterComplete { volume: u16 },
    /// A bitmap chunk that does not decode onto the volume's bitmap.
    #[error("bad bitmap chunk for volume {volume}: {error}")]
    BitmapChunkInvalid { volume: u16, error: meta::MetaError },
    /// A sync pause for a volume this resource does not have.
    #[error("sync pause for unknown volume {volume}")]
    SyncPauseUnknownVolume { volume: u16 },
    /// A resync request for a volume this resource does not have.
    #[error("resync request for unknown volume {volume}")]
    ResyncRequestUnknownVolume { volume: u16 },
    /// A resync request for an empty, too long, unaligned or out-of-volume range.
    #[error("bad resync request {id}: offset {offset} length {length}")]
    ResyncRequestInvalid { id: u64, offset: u64, length: u64 },
    /// A resync request for a volume this node is not the sync source of.
    #[error("resync request for volume {volume} while not its sync source")]
    ResyncRequestNotSource { volume: u16 },
    /// A resync request whose identifier is already in use.
    #[error("resync request {id} twice")]
    ResyncRequestTwice { id: u64 },
    /// Resync requests in flight beyond the largest `max-buffers`.
    #[error("resync requests beyond max-buffers ({limit_bytes} bytes in flight)")]
    ResyncRequestsBeyondMaxBuffers { limit_bytes: u64 },
    /// A resync write acknowledgement for a volume this resource does not have.
    #[error("resync ack for unknown volume {volume}")]
    ResyncAckUnknownVolume { volume: u16 },
    /// A resync write acknowledgement for a volume this node is not the sync source of.
    #[error("resync ack for volume {volume} while not its sync source")]
    ResyncAckNotSource { volume: u16 },
    /// A resync write acknowledgement for a reply never sent.
    #[error("resync ack for unknown reply {id}")]
    ResyncAckUnknownReply { id: u64 },
    /// A resync end for a volume this resource does not have.
    #[error("resync done for unknown volume {volume}")]
    ResyncDoneUnknownVolume { volume: u16 },
    /// A resync end for a volume this node is not the sync source of.
    #[error("resync done for volume {volume} while not its sync source")]
    ResyncDoneNotSource { volume: u16 },
    /// A resync end while requests of the target are still unanswered.
    #[error("resync done for volume {volume} with requests outstanding")]
    ResyncDoneOutstanding { volume: u16 },
    /// Resync data for a volume this resource does not have.
    #[error("resync reply for unknown volume {volume}")]
    ResyncReplyUnknownVolume { volume: u16 },
    /// Resync data for a volume this node is not the sync target of.
    #[error("resync reply for volume {volume} while not its sync target")]
    ResyncReplyNotTarget { volume: u16 },
    /// Resync data for a request never made (or already answered).
    #[error("resync reply for unknown request {id}")]
    ResyncReplyUnknownRequest { id: u64 },
    /// Resync data for another range than the request asked for.
    #[error("resync reply {id} for a range that was not requested")]
    ResyncReplyWrongRange { id: u64 },
    /// A failed resync read for a volume this resource does not have.
    #[error("resync negative reply for unknown volume {volume}")]
    ResyncNegativeReplyUnknownVolume { volume: u16 },
    /// A failed resync read for a volume this node is not the sync target of.
    #[error("resync negative reply for volume {volume} while not its sync target")]
    ResyncNegativeReplyNotTarget { volume: u16 },
    /// A failed resync read for a request never made (or already answered).
    #[error("resync negative reply for unknown request {id}")]
    ResyncNegativeReplyUnknownRequest { id: u64 },
    /// A failed resync read for another range than the request asked for.
    #[error("resync negative reply {id} for a range that was not requested")]
    ResyncNegativeReplyWrongRange { id: u64 },
    /// A checksum-based "in sync" answer for a volume this resource does not have.
    #[error("in-sync answer for unknown volume {volume}")]
    InSyncUnknownVolume { volume: u16 },
    /// An "in sync" answer for a volume this node is not the sync target of.
    #[error("in-sync answer for volume {volume} while not its sync target")]
    InSyncNotTarget { volume: u16 },
    /// An "in sync" answer for a request never made (or already answered).
    #[error("in-sync answer for unknown request {id}")]
    InSyncUnknownRequest { id: u64 },
    /// A forwarded read for a volume this resource does not have.
    #[error("read request for unknown volume {volume}")]
    ReadRequestUnknownVolume { volume: u16 },
    /// A forwarded read that is empty, too long or beyond the volume.
    #[error("read request beyond volume {volume} or too long: {extent:?}")]
    ReadRequestInvalid { volume: u16, extent: Extent },
    /// An answer to a forwarded read this node never sent.
    #[error("read reply {id} answers no read of ours")]
    ReadReplyUnrequested { id: u64 },
    /// A verify request whose identifier is already in use.
    #[error("verify request {id} twice")]
    VerifyRequestTwice { id: u64 },
    /// Verify requests in flight beyond the largest `max-buffers`.
    #[error("verify requests beyond max-buffers ({limit_bytes} bytes in flight)")]
    VerifyRequestsBeyondMaxBuffers { limit_bytes: u64 },
    /// A verify request for a volume this resource does not have.
    #[error("verify request for unknown volume {volume}")]
    VerifyRequestUnknownVolume { volume: u16 },
    /// A verify request for an empty, too long, unaligned or out-of-volume range.
    #[error("bad verify request: offset {offset} length {length}")]
    VerifyRequestInvalid { offset: u64, length: u64 },
    /// A verify request while the volume is in another exchange with this peer.
    #[error("verify request during {state} of volume {volume}")]
    VerifyRequestDuring { state: ReplState, volume: u16 },
    /// Verify digests for a volume this resource does not have.
    #[error("verify reply for unknown volume {volume}")]
    VerifyReplyUnknownVolume { volume: u16 },
    /// Verify digests for a volume this node is not verifying.
    #[error("verify reply for volume {volume} while not verifying it")]
    VerifyReplyNotVerifying { volume: u16 },
    /// Verify digests for a request never made, or answered already.
    #[error("verify reply for unknown or answered request {id}")]
    VerifyReplyUnknownRequest { id: u64 },
    /// Verify digests for another range than the request asked for.
    #[error("verify reply {id} for a range that was not requested")]
    VerifyReplyWrongRange { id: u64 },
    /// Verify digests whose size does not fit the range they answer.
    #[error("verify reply {id} with {digest_bytes} digest bytes for {length} bytes")]
    VerifyReplyDigestBytes {
        id: u64,
        digest_bytes: usize,
        length: u64,
    },
    /// Verify digests of another size than ours for the same range.
    #[error(
        "verify digests of {remote_bytes} bytes for a range we digest in {local_bytes}: \
         verify-alg or bitmap block size differ"
    )]
    VerifyDigestsDiffer {
        remote_bytes: usize,
        local_bytes: usize,
    },
    /// A verify end for a volume this resource does not have.
    #[error("verify done for unknown volume {volume}")]
    VerifyDoneUnknownVolume { volume: u16 },
    /// A verify end while requests of the source are still unanswered.
    #[error("verify done for volume {volume} with requests unanswered")]
    VerifyDoneUnanswered { volume: u16 },
    /// A verify end while the volume is in another exchange with this peer.
    #[error("verify done for volume {volume} during {state}")]
    VerifyDoneDuring { volume: u16, state: ReplState },
}

/// Why the engine ends a connection ([`crate::Action::Disconnect`]); `Display` gives the text
/// to log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DisconnectReason {
    /// The peer broke the protocol.
    #[error("{0}")]
    Violation(PeerViolation),
    /// A deliberate drop: split brain, a second Primary, a refused quorum vote, the
    /// administrator, an rr-conflict, a resync that must wait, a failed local flush, ...
    /// These reasons are still text; they are to be typed next, like [`PeerViolation`].
    #[error("{0}")]
    Policy(String),
}

impl From<PeerViolation> for DisconnectReason {
    fn from(violation: PeerViolation) -> Self {
        DisconnectReason::Violation(violation)
    }
}

impl From<String> for DisconnectReason {
    fn from(reason: String) -> Self {
        DisconnectReason::Policy(reason)
    }
}

impl From<&str> for DisconnectReason {
    fn from(reason: &str) -> Self {
        DisconnectReason::Policy(reason.to_string())
    }
}

#[cfg(test)]
mod tests;
