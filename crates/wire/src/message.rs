//! Typed messages and their body encodings.
//!
//! Invariants:
//! - `Message::decode` accepts exactly the bodies `Message::encode` produces: every field is
//!   read with a bounded reader, trailing bytes and non-canonical booleans are errors, so a
//!   successful decode re-encodes to the same bytes.
//! - `Message::encode` refuses (with a [`WireError`], leaving `out` untouched) any message
//!   `decode` would refuse, and asserts that the frame it wrote passes the header checks.
//! - A `Data` message is only the fixed data header, and a `ResyncReply` only its fixed
//!   header; the payload travels after it, outside this type, so the caller can move it
//!   without a copy.

#[cfg(test)]
mod tests;

use crate::codec::{Reader, Writer};
use crate::kind::{VOLUME_DISK_STATE_LEN, VOLUME_INFO_LEN};
use crate::{
    CsumRequest, FrameHeader, Kind, VerifyReply, VerifyRequest, WireError, BITMAP_CHUNK_LEN_MAX,
    DATA_PAYLOAD_LEN_MAX, FRAME_HEADER_LEN, UUID_SLOTS, VOLUMES_MAX,
};

/// Length of the session id in a `Hello`.
pub const SESSION_LEN: usize = 16;
/// Length of the authentication challenge in a `Hello`.
pub const CHALLENGE_LEN: usize = 32;
/// Length of the MAC in an `AuthResponse`.
pub const MAC_LEN: usize = 32;
/// `DataHeader::flags` bit: the write must be durable on the peer before it is acknowledged.
pub const DATA_FLAG_FUA: u16 = 1 << 0;
/// `DataHeader::flags` bit: the payload is LZ4-compressed (see `compress.rs`).
pub const DATA_FLAG_LZ4: u16 = 1 << 1;
/// `DataHeader::flags` bit: the payload is zstd-compressed (see `compress.rs`).
pub const DATA_FLAG_ZSTD: u16 = 1 << 2;
/// Every `DataHeader::flags` bit this version defines; others are rejected.
pub const DATA_FLAGS_KNOWN: u16 = DATA_FLAG_FUA | DATA_FLAG_LZ4 | DATA_FLAG_ZSTD;
/// `SyncUuids::flags` bit: the sender was connected with `--discard-my-data`.
pub const UUID_FLAG_DISCARD_MY_DATA: u64 = 1 << 0;
/// `SyncUuids::flags` bit: the sender crashed while Primary.
pub const UUID_FLAG_CRASHED_PRIMARY: u64 = 1 << 1;
/// `SyncUuids::flags` bit: the sender is fed by a connected Primary (a third node).
pub const UUID_FLAG_PRIMARY_PEER: u64 = 1 << 2;
/// `SyncUuids::flags` bit: the sender went down uncleanly as a Secondary and may lack writes
/// in the blocks it counts for the receiver.
pub const UUID_FLAG_CRASHED_SECONDARY: u64 = 1 << 3;
/// Every `SyncUuids::flags` bit this version defines; others are rejected.
pub const UUID_FLAGS_KNOWN: u64 = UUID_FLAG_DISCARD_MY_DATA
    | UUID_FLAG_CRASHED_PRIMARY
    | UUID_FLAG_PRIMARY_PEER
    | UUID_FLAG_CRASHED_SECONDARY;

/// Which of the two connections of a peer pair a socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SocketKind {
    /// Bulk traffic: writes, trims, barriers. Wire value 1.
    Data,
    /// Acks, pings, state. Wire value 2.
    Control,
}

impl SocketKind {
    /// The byte carried in a `Hello`.
    pub const fn to_wire(self) -> u8 {
        match self {
            SocketKind::Data => 1,
            SocketKind::Control => 2,
        }
    }

    /// The socket kind for a byte, or [`WireError::InvalidSocketKind`].
    pub const fn from_wire(value: u8) -> Result<SocketKind, WireError> {
        match value {
            1 => Ok(SocketKind::Data),
            2 => Ok(SocketKind::Control),
            _ => Err(WireError::InvalidSocketKind { value }),
        }
    }
}

/// One volume a node serves, as announced in a `Hello`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VolumeInfo {
    /// Volume number within the resource.
    pub number: u16,
    /// Usable size of the volume in bytes.
    pub size_bytes: u64,
}

/// First message on each socket, sent by both sides.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Hello {
    /// Lowest protocol version the sender speaks.
    pub version_min: u16,
    /// Highest protocol version the sender speaks.
    pub version_max: u16,
    /// Which socket of the pair this is.
    pub socket: SocketKind,
    /// Resource name, at most [`crate::STRING_LEN_MAX`] bytes.
    pub resource: String,
    /// Node id of the sender.
    pub from_node: u8,
    /// Node id the sender believes it is talking to.
    pub to_node: u8,
    /// Volumes the sender serves, at most [`VOLUMES_MAX`].
    pub volumes: Vec<VolumeInfo>,
    /// Random id shared by the two sockets of one connection attempt, so the acceptor can pair
    /// them.
    pub session: [u8; SESSION_LEN],
    /// Random challenge the peer must MAC to prove it holds the shared secret.
    pub challenge: [u8; CHALLENGE_LEN],
    /// Whether the sender will run the challenge-response exchange.
    pub auth_required: bool,
}

/// The fixed header of a `Data` frame; the payload follows it on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// Sequence number of the write, echoed in its ack.
    pub seq: u64,
    /// Epoch the write belongs to.
    pub epoch: u64,
    /// Volume number.
    pub volume: u16,
    /// Write flags, see [`DATA_FLAG_FUA`]; unknown bits are rejected.
    pub flags: u16,
    /// Byte offset of the write within the volume.
    pub offset: u64,
}

impl DataHeader {
    /// Whether the write is forced unit access.
    pub const fn fua(&self) -> bool {
        self.flags & DATA_FLAG_FUA != 0
    }
}

/// Body of `Trim` and `WriteZeroes`: a byte range of a volume, with no payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RangeHeader {
    /// Sequence number, echoed in the ack.
    pub seq: u64,
    /// Epoch the request belongs to.
    pub epoch: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u32,
}

/// One volume's disk state in a `PeerState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VolumeDiskState {
    /// Volume number.
    pub volume: u16,
    /// Disk state code; opaque to this crate.
    pub disk_state: u8,
}

/// A node's role and per-volume disk states.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeerState {
    /// Role code; opaque to this crate.
    pub role: u8,
    /// Disk state of each volume, at most [`VOLUMES_MAX`].
    pub volumes: Vec<VolumeDiskState>,
}

/// Body of `ResyncRequest`: the sync target asks for a range of the source's disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResyncRequest {
    /// The target's name for the request, echoed in the reply and the ack.
    pub id: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u32,
}

/// The fixed header of a `ResyncReply`; `FrameHeader::payload_len` bytes of data follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResyncReplyHeader {
    /// The request's id.
    pub id: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume (the payload length is its length).
    pub offset: u64,
}

/// Body of `ResyncNegReply`: the source could not read the range asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResyncNegReply {
    /// The request's id.
    pub id: u64,
    /// Volume number.
    pub volume: u16,
    /// Byte offset of the range within the volume.
    pub offset: u64,
    /// Length of the range in bytes.
    pub length: u32,
    /// The source's errno for the failure.
    pub errno: u32,
}

/// Why a `SyncUuids` was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UuidsPurpose {
    /// The sync handshake after a connect, or a new one after a state change such as
    /// `primary --force`: the receiver answers with its own identifiers and both decide.
    /// Wire value 0.
    Handshake,
    /// `new-current-uuid --clear-bitmap`: the receiver takes these identifiers over and
    /// becomes UpToDate without a resync. Wire value 1.
    Adopt,
    /// The sync source starts a resync: the receiver (the target) makes the sender's bitmap
    /// identifier for it its current, and adopts these identifiers when the resync is done.
    /// Wire value 2.
    SyncStart,
    /// A Primary started a new generation while replicating to the receiver: an in-sync
    /// Secondary makes it its current (its old current goes to the bitmap slots of its own
    /// absent peers, or into its history). Wire value 3 (protocol 4).
    Rotate,
    /// The answer to a `Rotate`: the receiver processed it. Wire value 4 (protocol 7).
    RotateSeen,
    /// The sender decided the handshake and keeps the connection (no resync, or a resync
    /// starting): only now does it count towards the receiver's quorum. Wire value 5
    /// (protocol 8).
    Accepted,
}

impl UuidsPurpose {
    /// The byte carried in a `SyncUuids`.
    pub const fn to_wire(self) -> u8 {
        match self {
            UuidsPurpose::Handshake => 0,
            UuidsPurpose::Adopt => 1,
            UuidsPurpose::SyncStart => 2,
            UuidsPurpose::Rotate => 3,
            UuidsPurpose::RotateSeen => 4,
            UuidsPurpose::Accepted => 5,
        }
    }

    /// The purpose for a byte, or [`WireError::InvalidUuidsPurpose`].
    pub const fn from_wire(value: u8) -> Result<UuidsPurpose, WireError> {
        match value {
            0 => Ok(UuidsPurpose::Handshake),
            1 => Ok(UuidsPurpose::Adopt),
            2 => Ok(UuidsPurpose::SyncStart),
            3 => Ok(UuidsPurpose::Rotate),
            4 => Ok(UuidsPurpose::RotateSeen),
            5 => Ok(UuidsPurpose::Accepted),
            _ => Err(WireError::InvalidUuidsPurpose { value }),
        }
    }
}

/// Body of `SyncUuids`: one volume's generation identifiers and what the handshake needs
/// besides them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SyncUuids {
    /// Volume number.
    pub volume: u16,
    /// Why it was sent.
    pub purpose: UuidsPurpose,
    /// The sender's role code; opaque to this crate.
    pub role: u8,
    /// The sender's disk state code; opaque to this crate.
    pub disk_state: u8,
    /// [`UUID_FLAG_DISCARD_MY_DATA`], [`UUID_FLAG_CRASHED_PRIMARY`] and [`UUID_FLAG_PRIMARY_PEER`];
    /// others are rejected.
    pub flags: u64,
    /// Bits set in the sender's bitmap for the receiver (its changes, for `after-sb-*`).
    pub bitmap_bits: u64,
    /// The sender's volume size in bytes (the bitmaps of both sides must cover the same).
    pub size_bytes: u64,
    /// The sender's bytes per bitmap bit.
    pub bitmap_granularity_bytes: u32,
    /// The current identifier.
    pub current: u64,
    /// Bitmap identifiers, one per node id.
    pub bitmap: [u64; UUID_SLOTS],
    /// History identifiers, newest first.
    pub history: [u64; UUID_SLOTS],
    /// The generation the sender's (possibly cut-short) resync as target brings it to; 0 if none.
    pub resync_goal: u64,
    /// The Primary whose writes the sender follows or last followed, [`FOLLOWED_NONE`] if none.
    pub followed_node: u8,
    /// The sequence number of the last write the sender received from that Primary.
    pub followed_seq: u64,
}

/// `SyncUuids::followed_node` when the sender followed no Primary.
pub const FOLLOWED_NONE: u8 = u8::MAX;

/// The step byte of a `Resize` (the engine's `ResizeStep`; opaque sizes aside, the meaning is
/// the engine's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResizeStep {
    /// 1: what does your grown device offer?
    Query,
    /// 2: it offers `size_bytes`.
    Offer,
    /// 3 (4 with `assume_clean`): grow to `size_bytes`.
    Apply {
        /// The new area counts as identical on every node.
        assume_clean: bool,
    },
    /// 5: grown to `size_bytes`.
    Applied,
    /// 6: cannot grow, or busy.
    Refused,
}

impl ResizeStep {
    /// The byte carried on the wire.
    pub const fn to_wire(self) -> u8 {
        match self {
            ResizeStep::Query => 1,
            ResizeStep::Offer => 2,
            ResizeStep::Apply {
                assume_clean: false,
            } => 3,
            ResizeStep::Apply { assume_clean: true } => 4,
            ResizeStep::Applied => 5,
            ResizeStep::Refused => 6,
        }
    }

    /// The step for a byte, or [`WireError::InvalidResizeStep`].
    pub const fn from_wire(value: u8) -> Result<ResizeStep, WireError> {
        match value {
            1 => Ok(ResizeStep::Query),
            2 => Ok(ResizeStep::Offer),
            3 => Ok(ResizeStep::Apply {
                assume_clean: false,
            }),
            4 => Ok(ResizeStep::Apply { assume_clean: true }),
            5 => Ok(ResizeStep::Applied),
            6 => Ok(ResizeStep::Refused),
            _ => Err(WireError::InvalidResizeStep { value }),
        }
    }
}

/// One protocol message. See the kind table in the crate documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// Handshake greeting.
    Hello(Hello),
    /// Handshake: MAC over the peer's challenge (see [`crate::auth_mac_input`]).
    AuthResponse {
        /// The MAC, computed by the caller.
        mac: [u8; MAC_LEN],
    },
    /// Handshake: whether the peer's `AuthResponse` verified.
    AuthResult {
        /// True if it verified.
        ok: bool,
    },
    /// Handshake refused; the sender closes the connection after this.
    Refuse {
        /// Human-readable reason, at most [`crate::STRING_LEN_MAX`] bytes.
        reason: String,
    },
    /// A write; `FrameHeader::payload_len` bytes of data follow on the wire.
    Data(DataHeader),
    /// Discard a range.
    Trim(RangeHeader),
    /// Write zeroes over a range.
    WriteZeroes(RangeHeader),
    /// Closes epoch `epoch`.
    Barrier {
        /// The epoch being closed.
        epoch: u64,
        /// Whether the receiver must make the epoch durable before acking.
        flush: bool,
    },
    /// Liveness probe.
    Ping,
    /// Answer to `Ping`.
    PingAck,
    /// The write with this sequence number was received.
    RecvAck {
        /// Sequence number of the write.
        seq: u64,
    },
    /// The write with this sequence number is on the peer's disk.
    WriteAck {
        /// Sequence number of the write.
        seq: u64,
    },
    /// The write with this sequence number failed on the peer.
    NegAck {
        /// Sequence number of the write.
        seq: u64,
        /// The peer's errno for the failure.
        errno: u32,
    },
    /// The epoch is complete on the peer.
    BarrierAck {
        /// The epoch.
        epoch: u64,
    },
    /// Mark yourself possibly stale, or clear the mark (Primary to peer).
    StaleMark {
        /// Mark (true) or clear.
        stale: bool,
    },
    /// The mark (or its clearing) is durable.
    StaleMarkAck {
        /// What was made durable.
        stale: bool,
    },
    /// Writes are no longer shipped to the receiver, only marked out of sync (true: it is
    /// Behind), or they are again (Primary to peer).
    Ahead {
        /// Ahead (true) or shipping again.
        ahead: bool,
    },
    /// Every write of the epochs up to `epoch` is on every peer the sender replicates to
    /// (Primary to peer; DRBD's peer ack).
    PeerAck {
        /// The newest such epoch.
        epoch: u64,
        /// The nodes that hold those writes: bit `n` for node id `n` (the sender and the
        /// peers it replicated them to).
        nodes: u32,
    },
    /// The sender's role and disk states.
    PeerState(PeerState),
    /// Graceful disconnect.
    Disconnect {
        /// Human-readable reason, at most [`crate::STRING_LEN_MAX`] bytes.
        reason: String,
    },
    /// The sync target asks for a range.
    ResyncRequest(ResyncRequest),
    /// The range asked for; `FrameHeader::payload_len` bytes of data follow on the wire.
    ResyncReply(ResyncReplyHeader),
    /// The range asked for could not be read.
    ResyncNegReply(ResyncNegReply),
    /// A Diskless node asks an UpToDate peer for a range its client reads (the layout of a
    /// `ResyncRequest`; `id` is the asker's).
    ReadRequest(ResyncRequest),
    /// The range of a `ReadRequest`; `FrameHeader::payload_len` bytes of data follow.
    ReadReply(ResyncReplyHeader),
    /// The range of a `ReadRequest` could not be read.
    ReadNegReply(ResyncNegReply),
    /// The target wrote the range of reply `id` (`ok`), or failed to.
    ResyncAck {
        /// The request's id.
        id: u64,
        /// Volume number.
        volume: u16,
        /// Whether the target's write succeeded.
        ok: bool,
    },
    /// The target requested and received every block it was missing.
    ResyncDone {
        /// Volume number.
        volume: u16,
        /// Bytes the source could not read or the target could not write; they stay out of
        /// sync.
        failed_bytes: u64,
    },
    /// The sync target asks for a range unless the source's digests of it are these
    /// (`csums-alg`).
    CsumRequest(CsumRequest),
    /// The source's copy of a `CsumRequest`'s range has the target's digests: no data.
    ResyncInSync {
        /// The request's id.
        id: u64,
        /// Volume number.
        volume: u16,
    },
    /// The sender's resync of `volume` is paused (`pause-sync`, `resync-after`) or resumed.
    SyncPause {
        /// Volume number.
        volume: u16,
        /// Paused (true) or resumed.
        paused: bool,
    },
    /// A step of an online resize of `volume`.
    Resize {
        /// Volume number.
        volume: u16,
        /// The size offered, asked for or applied, in bytes (0 where the step has none).
        size_bytes: u64,
        /// Which step.
        step: ResizeStep,
    },
    /// The verify source asks for the digests of a range.
    VerifyRequest(VerifyRequest),
    /// The verify target's digests of a range, or why there are none.
    VerifyReply(VerifyReply),
    /// The verify source walked the whole volume.
    VerifyDone {
        /// Volume number.
        volume: u16,
        /// Bytes the verify found out of sync.
        oos_bytes: u64,
    },
    /// The sender's generation identifiers for one volume (boxed: it is by far the largest
    /// message).
    SyncUuids(Box<SyncUuids>),
    /// One RLE chunk of the sender's bitmap for the receiver (format: `meta::RleEncoder`).
    BitmapChunk {
        /// Volume number.
        volume: u16,
        /// The chunk, 1..=[`BITMAP_CHUNK_LEN_MAX`] bytes; opaque to this crate.
        chunk: Vec<u8>,
    },
}

impl Message {
    /// The kind of this message.
    pub const fn kind(&self) -> Kind {
        match self {
            Message::Hello(_) => Kind::Hello,
            Message::AuthResponse { .. } => Kind::AuthResponse,
            Message::AuthResult { .. } => Kind::AuthResult,
            Message::Refuse { .. } => Kind::Refuse,
            Message::Data(_) => Kind::Data,
            Message::Trim(_) => Kind::Trim,
            Message::WriteZeroes(_) => Kind::WriteZeroes,
            Message::Barrier { .. } => Kind::Barrier,
            Message::Ping => Kind::Ping,
            Message::PingAck => Kind::PingAck,
            Message::RecvAck { .. } => Kind::RecvAck,
            Message::WriteAck { .. } => Kind::WriteAck,
            Message::NegAck { .. } => Kind::NegAck,
            Message::BarrierAck { .. } => Kind::BarrierAck,
            Message::StaleMark { .. } => Kind::StaleMark,
            Message::StaleMarkAck { .. } => Kind::StaleMarkAck,
            Message::Ahead { .. } => Kind::Ahead,
            Message::PeerAck { .. } => Kind::PeerAck,
            Message::PeerState(_) => Kind::PeerState,
            Message::Disconnect { .. } => Kind::Disconnect,
            Message::ResyncRequest(_) => Kind::ResyncRequest,
            Message::ResyncReply(_) => Kind::ResyncReply,
            Message::ResyncNegReply(_) => Kind::ResyncNegReply,
            Message::ResyncAck { .. } => Kind::ResyncAck,
            Message::ResyncDone { .. } => Kind::ResyncDone,
            Message::CsumRequest(_) => Kind::CsumRequest,
            Message::ResyncInSync { .. } => Kind::ResyncInSync,
            Message::SyncPause { .. } => Kind::SyncPause,
            Message::Resize { .. } => Kind::Resize,
            Message::VerifyRequest(_) => Kind::VerifyRequest,
            Message::VerifyReply(_) => Kind::VerifyReply,
            Message::VerifyDone { .. } => Kind::VerifyDone,
            Message::SyncUuids(_) => Kind::SyncUuids,
            Message::BitmapChunk { .. } => Kind::BitmapChunk,
            Message::ReadRequest(_) => Kind::ReadRequest,
            Message::ReadReply(_) => Kind::ReadReply,
            Message::ReadNegReply(_) => Kind::ReadNegReply,
        }
    }

    /// Decodes the message part of a frame.
    ///
    /// `body` must be exactly `header.message_len()` bytes: the whole body for every kind but
    /// `Data` and `ResyncReply`, and only the fixed header for those two, whose
    /// `header.payload_len()` payload bytes the caller reads separately.
    pub fn decode(header: &FrameHeader, body: &[u8]) -> Result<Message, WireError> {
        let kind = header.check()?;
        let expected = header.message_len();
        if body.len() != expected {
            return Err(WireError::BodySliceMismatch {
                kind: kind.to_wire(),
                expected,
                actual: body.len(),
            });
        }
        let mut reader = Reader::new(body);
        let message = Message::decode_fields(kind, &mut reader)?;
        reader.finish(kind.to_wire())?;
        Ok(message)
    }

    /// Appends the frame header and the message part to `out`.
    ///
    /// For `Data` and `ResyncReply`, the header's `body_len` includes `payload_len`, and the
    /// caller sends exactly that many payload bytes after the bytes appended here. For every other
    /// kind `payload_len` must be 0. On error `out` is left as it was.
    pub fn encode(&self, payload_len: u32, out: &mut Vec<u8>) -> Result<(), WireError> {
        let start = out.len();
        let result = self.encode_frame(payload_len, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    /// `encode` without the cleanup on error.
    fn encode_frame(&self, payload_len: u32, out: &mut Vec<u8>) -> Result<(), WireError> {
        let kind = self.kind();
        check_payload_len(kind, payload_len)?;
        let start = out.len();
        out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
        self.encode_fields(&mut Writer::new(out))?;
        let message_len = out.len() - start - FRAME_HEADER_LEN;
        let body_len = u32::try_from(message_len)
            .ok()
            .and_then(|len| len.checked_add(payload_len))
            .ok_or(WireError::BodyTooLong {
                kind: kind.to_wire(),
                body_len: u64::try_from(message_len)
                    .unwrap_or(u64::MAX)
                    .saturating_add(u64::from(payload_len)),
                max: kind.body_len_max(),
            })?;
        let header = FrameHeader {
            kind: kind.to_wire(),
            flags: 0,
            body_len,
        };
        // The writer enforces the same limits the reader does, so a frame that fails the
        // receiver's checks here is a bug in this crate, not bad input.
        assert_eq!(header.check(), Ok(kind));
        assert_eq!(header.message_len(), message_len);
        // In bounds: FRAME_HEADER_LEN placeholder bytes were pushed at `start` above.
        out[start..start + FRAME_HEADER_LEN].copy_from_slice(&header.encode());
        Ok(())
    }

    /// Reads the fields of a message of the given kind.
    fn decode_fields(kind: Kind, reader: &mut Reader<'_>) -> Result<Message, WireError> {
        let message = match kind {
            Kind::Hello => Message::Hello(Hello::decode(reader)?),
            Kind::AuthResponse => Message::AuthResponse {
                mac: reader.array("auth_response.mac")?,
            },
            Kind::AuthResult => Message::AuthResult {
                ok: reader.bool("auth_result.ok")?,
            },
            Kind::Refuse => Message::Refuse {
                reason: reader.string("refuse.reason")?,
            },
            Kind::Data => Message::Data(DataHeader::decode(reader)?),
            Kind::Trim => Message::Trim(RangeHeader::decode(reader, "trim")?),
            Kind::WriteZeroes => Message::WriteZeroes(RangeHeader::decode(reader, "write_zeroes")?),
            Kind::Barrier => Message::Barrier {
                epoch: reader.u64("barrier.epoch")?,
                flush: reader.bool("barrier.flush")?,
            },
            Kind::Ping => Message::Ping,
            Kind::PingAck => Message::PingAck,
            Kind::RecvAck => Message::RecvAck {
                seq: reader.u64("recv_ack.seq")?,
            },
            Kind::WriteAck => Message::WriteAck {
                seq: reader.u64("write_ack.seq")?,
            },
            Kind::NegAck => Message::NegAck {
                seq: reader.u64("neg_ack.seq")?,
                errno: reader.u32("neg_ack.errno")?,
            },
            Kind::BarrierAck => Message::BarrierAck {
                epoch: reader.u64("barrier_ack.epoch")?,
            },
            Kind::StaleMark => Message::StaleMark {
                stale: reader.bool("stale_mark.stale")?,
            },
            Kind::StaleMarkAck => Message::StaleMarkAck {
                stale: reader.bool("stale_mark_ack.stale")?,
            },
            Kind::Ahead => Message::Ahead {
                ahead: reader.bool("ahead.ahead")?,
            },
            Kind::PeerAck => Message::PeerAck {
                epoch: reader.u64("peer_ack.epoch")?,
                nodes: reader.u32("peer_ack.nodes")?,
            },
            Kind::PeerState => Message::PeerState(PeerState::decode(reader)?),
            Kind::Disconnect => Message::Disconnect {
                reason: reader.string("disconnect.reason")?,
            },
            _ => Message::decode_sync_fields(kind, reader)?,
        };
        Ok(message)
    }

    /// Reads the fields of a resync, verify, generation-identifier or bitmap message.
    fn decode_sync_fields(kind: Kind, reader: &mut Reader<'_>) -> Result<Message, WireError> {
        let message = match kind {
            Kind::ResyncRequest | Kind::ReadRequest => {
                let request = Message::decode_resync_request(reader)?;
                if kind == Kind::ReadRequest {
                    Message::ReadRequest(request)
                } else {
                    Message::ResyncRequest(request)
                }
            }
            Kind::ResyncReply | Kind::ReadReply => {
                let reply = ResyncReplyHeader {
                    id: reader.u64("resync_reply.id")?,
                    volume: reader.u16("resync_reply.volume")?,
                    offset: reader.u64("resync_reply.offset")?,
                };
                if kind == Kind::ReadReply {
                    Message::ReadReply(reply)
                } else {
                    Message::ResyncReply(reply)
                }
            }
            Kind::ResyncNegReply | Kind::ReadNegReply => {
                let reply = Message::decode_resync_neg_reply(reader)?;
                if kind == Kind::ReadNegReply {
                    Message::ReadNegReply(reply)
                } else {
                    Message::ResyncNegReply(reply)
                }
            }
            Kind::ResyncAck => Message::ResyncAck {
                id: reader.u64("resync_ack.id")?,
                volume: reader.u16("resync_ack.volume")?,
                ok: reader.bool("resync_ack.ok")?,
            },
            Kind::ResyncDone => Message::ResyncDone {
                volume: reader.u16("resync_done.volume")?,
                failed_bytes: reader.u64("resync_done.failed_bytes")?,
            },
            Kind::CsumRequest => Message::CsumRequest(CsumRequest::decode(reader)?),
            Kind::ResyncInSync => Message::ResyncInSync {
                id: reader.u64("resync_in_sync.id")?,
                volume: reader.u16("resync_in_sync.volume")?,
            },
            Kind::SyncPause => Message::SyncPause {
                volume: reader.u16("sync_pause.volume")?,
                paused: reader.bool("sync_pause.paused")?,
            },
            Kind::Resize => Message::Resize {
                volume: reader.u16("resize.volume")?,
                size_bytes: reader.u64("resize.size_bytes")?,
                step: ResizeStep::from_wire(reader.u8("resize.step")?)?,
            },
            Kind::VerifyRequest => Message::VerifyRequest(VerifyRequest::decode(reader)?),
            Kind::VerifyReply => Message::VerifyReply(VerifyReply::decode(reader)?),
            Kind::VerifyDone => Message::VerifyDone {
                volume: reader.u16("verify_done.volume")?,
                oos_bytes: reader.u64("verify_done.oos_bytes")?,
            },
            Kind::SyncUuids => Message::SyncUuids(Box::new(SyncUuids::decode(reader)?)),
            Kind::BitmapChunk => Message::BitmapChunk {
                volume: reader.u16("bitmap_chunk.volume")?,
                chunk: reader.rest().to_vec(),
            },
            other => {
                return Err(WireError::UnknownKind {
                    kind: other.to_wire(),
                })
            }
        };
        Ok(message)
    }

    /// Reads a `ResyncRequest` or `ReadRequest` body.
    fn decode_resync_request(reader: &mut Reader<'_>) -> Result<ResyncRequest, WireError> {
        Ok(ResyncRequest {
            id: reader.u64("resync_request.id")?,
            volume: reader.u16("resync_request.volume")?,
            offset: reader.u64("resync_request.offset")?,
            length: reader.u32("resync_request.length")?,
        })
    }

    /// Reads a `ResyncNegReply` or `ReadNegReply` body.
    fn decode_resync_neg_reply(reader: &mut Reader<'_>) -> Result<ResyncNegReply, WireError> {
        Ok(ResyncNegReply {
            id: reader.u64("resync_neg_reply.id")?,
            volume: reader.u16("resync_neg_reply.volume")?,
            offset: reader.u64("resync_neg_reply.offset")?,
            length: reader.u32("resync_neg_reply.length")?,
            errno: reader.u32("resync_neg_reply.errno")?,
        })
    }

    /// Writes the fields of this message, in the order `decode_fields` reads them.
    fn encode_fields(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        match self {
            Message::Hello(hello) => hello.encode(writer)?,
            Message::AuthResponse { mac } => writer.bytes(mac),
            Message::AuthResult { ok } => writer.bool(*ok),
            Message::Refuse { reason } => writer.string("refuse.reason", reason)?,
            Message::Data(data) => data.encode(writer)?,
            Message::Trim(range) | Message::WriteZeroes(range) => range.encode(writer),
            Message::Barrier { epoch, flush } => {
                writer.u64(*epoch);
                writer.bool(*flush);
            }
            Message::Ping | Message::PingAck => {}
            Message::RecvAck { seq } | Message::WriteAck { seq } => writer.u64(*seq),
            Message::NegAck { seq, errno } => {
                writer.u64(*seq);
                writer.u32(*errno);
            }
            Message::BarrierAck { epoch } => writer.u64(*epoch),
            Message::PeerAck { epoch, nodes } => {
                writer.u64(*epoch);
                writer.u32(*nodes);
            }
            Message::StaleMark { stale } | Message::StaleMarkAck { stale } => writer.bool(*stale),
            Message::Ahead { ahead } => writer.bool(*ahead),
            Message::PeerState(state) => state.encode(writer)?,
            Message::Disconnect { reason } => writer.string("disconnect.reason", reason)?,
            _ => self.encode_sync_fields(writer)?,
        }
        Ok(())
    }

    /// Writes the fields of a resync, verify, generation-identifier or bitmap message, in the order
    /// `decode_sync_fields` reads them.
    fn encode_sync_fields(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        match self {
            Message::ResyncRequest(request) | Message::ReadRequest(request) => {
                writer.u64(request.id);
                writer.u16(request.volume);
                writer.u64(request.offset);
                writer.u32(request.length);
            }
            Message::ResyncReply(reply) | Message::ReadReply(reply) => {
                writer.u64(reply.id);
                writer.u16(reply.volume);
                writer.u64(reply.offset);
            }
            Message::ResyncNegReply(reply) | Message::ReadNegReply(reply) => {
                writer.u64(reply.id);
                writer.u16(reply.volume);
                writer.u64(reply.offset);
                writer.u32(reply.length);
                writer.u32(reply.errno);
            }
            Message::ResyncAck { id, volume, ok } => {
                writer.u64(*id);
                writer.u16(*volume);
                writer.bool(*ok);
            }
            Message::ResyncDone {
                volume,
                failed_bytes,
            } => {
                writer.u16(*volume);
                writer.u64(*failed_bytes);
            }
            Message::CsumRequest(request) => request.encode(writer)?,
            Message::ResyncInSync { id, volume } => {
                writer.u64(*id);
                writer.u16(*volume);
            }
            Message::SyncPause { volume, paused } => {
                writer.u16(*volume);
                writer.bool(*paused);
            }
            Message::Resize {
                volume,
                size_bytes,
                step,
            } => {
                writer.u16(*volume);
                writer.u64(*size_bytes);
                writer.u8(step.to_wire());
            }
            Message::VerifyRequest(request) => request.encode(writer),
            Message::VerifyReply(reply) => reply.encode(writer)?,
            Message::VerifyDone { volume, oos_bytes } => {
                writer.u16(*volume);
                writer.u64(*oos_bytes);
            }
            Message::SyncUuids(uuids) => uuids.encode(writer)?,
            Message::BitmapChunk { volume, chunk } => {
                if chunk.is_empty() || chunk.len() > BITMAP_CHUNK_LEN_MAX {
                    return Err(WireError::BitmapChunkLength {
                        len: chunk.len(),
                        max: BITMAP_CHUNK_LEN_MAX,
                    });
                }
                writer.u16(*volume);
                writer.bytes(chunk);
            }
            // The other kinds are written by `encode_fields`, which never calls this for them.
            _ => unreachable!("encode_sync_fields called for {:?}", self.kind()),
        }
        Ok(())
    }
}

/// Refuses a payload on a kind without one, and an over-long payload.
fn check_payload_len(kind: Kind, payload_len: u32) -> Result<(), WireError> {
    if kind.has_payload() {
        if payload_len > DATA_PAYLOAD_LEN_MAX {
            return Err(WireError::PayloadTooLong {
                payload_len,
                max: DATA_PAYLOAD_LEN_MAX,
            });
        }
    } else if payload_len != 0 {
        return Err(WireError::PayloadNotAllowed {
            kind: kind.to_wire(),
            payload_len,
        });
    }
    Ok(())
}

impl Hello {
    /// Reads a `Hello` body; the field order here is the wire order.
    fn decode(reader: &mut Reader<'_>) -> Result<Hello, WireError> {
        let version_min = reader.u16("hello.version_min")?;
        let version_max = reader.u16("hello.version_max")?;
        let socket = SocketKind::from_wire(reader.u8("hello.socket")?)?;
        let from_node = reader.u8("hello.from_node")?;
        let to_node = reader.u8("hello.to_node")?;
        let auth_required = reader.bool("hello.auth_required")?;
        let session = reader.array("hello.session")?;
        let challenge = reader.array("hello.challenge")?;
        let resource = reader.string("hello.resource")?;
        let count = reader.count("hello.volumes", VOLUMES_MAX, VOLUME_INFO_LEN)?;
        let mut volumes = Vec::with_capacity(count);
        for _ in 0..count {
            volumes.push(VolumeInfo {
                number: reader.u16("hello.volumes.number")?,
                size_bytes: reader.u64("hello.volumes.size_bytes")?,
            });
        }
        Ok(Hello {
            version_min,
            version_max,
            socket,
            resource,
            from_node,
            to_node,
            volumes,
            session,
            challenge,
            auth_required,
        })
    }

    /// Writes a `Hello` body in the order `decode` reads it.
    fn encode(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        writer.u16(self.version_min);
        writer.u16(self.version_max);
        writer.u8(self.socket.to_wire());
        writer.u8(self.from_node);
        writer.u8(self.to_node);
        writer.bool(self.auth_required);
        writer.bytes(&self.session);
        writer.bytes(&self.challenge);
        writer.string("hello.resource", &self.resource)?;
        writer.count("hello.volumes", self.volumes.len(), VOLUMES_MAX)?;
        for volume in &self.volumes {
            writer.u16(volume.number);
            writer.u64(volume.size_bytes);
        }
        Ok(())
    }
}

impl DataHeader {
    /// Reads a data header; unknown flag bits are an error.
    fn decode(reader: &mut Reader<'_>) -> Result<DataHeader, WireError> {
        let seq = reader.u64("data.seq")?;
        let epoch = reader.u64("data.epoch")?;
        let offset = reader.u64("data.offset")?;
        let volume = reader.u16("data.volume")?;
        let flags = reader.u16("data.flags")?;
        if flags & !DATA_FLAGS_KNOWN != 0 {
            return Err(WireError::UnknownDataFlags { flags });
        }
        crate::compress::Compression::from_flags(flags)?;
        Ok(DataHeader {
            seq,
            epoch,
            volume,
            flags,
            offset,
        })
    }

    /// Writes a data header in the order `decode` reads it.
    fn encode(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        if self.flags & !DATA_FLAGS_KNOWN != 0 {
            return Err(WireError::UnknownDataFlags { flags: self.flags });
        }
        crate::compress::Compression::from_flags(self.flags)?;
        writer.u64(self.seq);
        writer.u64(self.epoch);
        writer.u64(self.offset);
        writer.u16(self.volume);
        writer.u16(self.flags);
        Ok(())
    }
}

impl RangeHeader {
    /// Reads a range header. `field` names the message in errors; the header check has
    /// already fixed the body length, so a short read cannot happen here in practice.
    fn decode(reader: &mut Reader<'_>, field: &'static str) -> Result<RangeHeader, WireError> {
        Ok(RangeHeader {
            seq: reader.u64(field)?,
            epoch: reader.u64(field)?,
            offset: reader.u64(field)?,
            length: reader.u32(field)?,
            volume: reader.u16(field)?,
        })
    }

    /// Writes a range header in the order `decode` reads it.
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u64(self.seq);
        writer.u64(self.epoch);
        writer.u64(self.offset);
        writer.u32(self.length);
        writer.u16(self.volume);
    }
}

impl PeerState {
    /// Reads a `PeerState` body.
    fn decode(reader: &mut Reader<'_>) -> Result<PeerState, WireError> {
        let role = reader.u8("peer_state.role")?;
        let count = reader.count("peer_state.volumes", VOLUMES_MAX, VOLUME_DISK_STATE_LEN)?;
        let mut volumes = Vec::with_capacity(count);
        for _ in 0..count {
            volumes.push(VolumeDiskState {
                volume: reader.u16("peer_state.volumes.volume")?,
                disk_state: reader.u8("peer_state.volumes.disk_state")?,
            });
        }
        Ok(PeerState { role, volumes })
    }

    /// Writes a `PeerState` body in the order `decode` reads it.
    fn encode(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        writer.u8(self.role);
        writer.count("peer_state.volumes", self.volumes.len(), VOLUMES_MAX)?;
        for volume in &self.volumes {
            writer.u16(volume.volume);
            writer.u8(volume.disk_state);
        }
        Ok(())
    }
}

impl SyncUuids {
    /// Reads a `SyncUuids` body; unknown purposes and flag bits are errors.
    fn decode(reader: &mut Reader<'_>) -> Result<SyncUuids, WireError> {
        let volume = reader.u16("sync_uuids.volume")?;
        let purpose = UuidsPurpose::from_wire(reader.u8("sync_uuids.purpose")?)?;
        let role = reader.u8("sync_uuids.role")?;
        let disk_state = reader.u8("sync_uuids.disk_state")?;
        let flags = reader.u64("sync_uuids.flags")?;
        if flags & !UUID_FLAGS_KNOWN != 0 {
            return Err(WireError::UnknownUuidFlags { flags });
        }
        let bitmap_bits = reader.u64("sync_uuids.bitmap_bits")?;
        let size_bytes = reader.u64("sync_uuids.size_bytes")?;
        let bitmap_granularity_bytes = reader.u32("sync_uuids.bitmap_granularity_bytes")?;
        let current = reader.u64("sync_uuids.current")?;
        let mut bitmap = [0; UUID_SLOTS];
        for slot in &mut bitmap {
            *slot = reader.u64("sync_uuids.bitmap")?;
        }
        let mut history = [0; UUID_SLOTS];
        for slot in &mut history {
            *slot = reader.u64("sync_uuids.history")?;
        }
        let resync_goal = reader.u64("sync_uuids.resync_goal")?;
        let followed_node = reader.u8("sync_uuids.followed_node")?;
        let followed_seq = reader.u64("sync_uuids.followed_seq")?;
        Ok(SyncUuids {
            volume,
            purpose,
            role,
            disk_state,
            flags,
            bitmap_bits,
            size_bytes,
            bitmap_granularity_bytes,
            current,
            bitmap,
            history,
            resync_goal,
            followed_node,
            followed_seq,
        })
    }

    /// Writes a `SyncUuids` body in the order `decode` reads it.
    fn encode(&self, writer: &mut Writer<'_>) -> Result<(), WireError> {
        if self.flags & !UUID_FLAGS_KNOWN != 0 {
            return Err(WireError::UnknownUuidFlags { flags: self.flags });
        }
        writer.u16(self.volume);
        writer.u8(self.purpose.to_wire());
        writer.u8(self.role);
        writer.u8(self.disk_state);
        writer.u64(self.flags);
        writer.u64(self.bitmap_bits);
        writer.u64(self.size_bytes);
        writer.u32(self.bitmap_granularity_bytes);
        writer.u64(self.current);
        for uuid in self.bitmap.iter().chain(&self.history) {
            writer.u64(*uuid);
        }
        writer.u64(self.resync_goal);
        writer.u8(self.followed_node);
        writer.u64(self.followed_seq);
        Ok(())
    }
}
