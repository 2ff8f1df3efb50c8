//! Message kind numbers, which socket each kind travels on, and the body-length bounds of each.
//!
//! Invariants (checked at compile time below):
//! - every kind number is nonzero and appears once in [`Kind::ALL`];
//! - every kind's `body_len_min <= body_len_max <= BODY_LEN_MAX`;
//! - every kind's message part (the body minus any data payload) fits in [`MESSAGE_LEN_MAX`];
//! - exactly the payload kinds (`Data`, `ResyncReply`, `ReadReply`) have a fixed message part, so
//!   the payload length is `body_len` minus that part.

use crate::{widen, SocketKind, WireError, BODY_LEN_MAX};

/// Longest string on the wire, in bytes (the `u16` length prefix is not counted).
pub const STRING_LEN_MAX: usize = 255;
/// Most entries in a volume list (`Hello::volumes`, `PeerState::volumes`).
pub const VOLUMES_MAX: usize = 64;
/// Length of the fixed data header at the start of a `Data` body.
pub const DATA_HEADER_LEN: usize = 8 + 8 + 8 + 2 + 2;
/// `DATA_HEADER_LEN` in the type of `FrameHeader::body_len`.
pub(crate) const DATA_HEADER_LEN_U32: u32 = 28;
/// Largest write payload one `Data` frame carries.
pub const DATA_PAYLOAD_LEN_MAX: u32 = 64 * 1024 * 1024;
/// Length of the body of `Trim` and `WriteZeroes`.
pub const RANGE_HEADER_LEN: usize = 8 + 8 + 8 + 4 + 2;
/// Upper bound of the message part of any frame: the whole body for every kind without a
/// payload, and the fixed header for `Data` and `ResyncReply`.
pub const MESSAGE_LEN_MAX: usize = 4096;
/// Length of the body of a `ResyncRequest`: id, volume, offset, length.
pub const RESYNC_REQUEST_LEN: usize = 8 + 2 + 8 + 4;
/// Length of the fixed header at the start of a `ResyncReply` body: id, volume, offset.
pub const RESYNC_REPLY_HEADER_LEN: usize = 8 + 2 + 8;
/// `RESYNC_REPLY_HEADER_LEN` in the type of `FrameHeader::body_len`.
pub(crate) const RESYNC_REPLY_HEADER_LEN_U32: u32 = 18;
/// Length of the body of a `ResyncNegReply`: id, volume, offset, length, errno.
pub const RESYNC_NEG_REPLY_LEN: usize = 8 + 2 + 8 + 4 + 4;
/// Length of the body of a `ResyncAck`: id, volume, ok.
pub const RESYNC_ACK_LEN: usize = 8 + 2 + 1;
/// Length of the body of a `ResyncDone`: volume, failed bytes.
pub const RESYNC_DONE_LEN: usize = 2 + 8;
/// Length of the fixed part of a `CsumRequest` body: id, volume, offset, length (the digests
/// follow).
pub const CSUM_REQUEST_HEADER_LEN: usize = 8 + 2 + 8 + 4;
/// Length of the body of a `ResyncInSync`: id, volume.
pub const RESYNC_IN_SYNC_LEN: usize = 8 + 2;
/// Length of the body of a `SyncPause`: volume, paused.
pub const SYNC_PAUSE_LEN: usize = 2 + 1;
/// Length of the body of a `Resize`: volume, size, step.
pub const RESIZE_LEN: usize = 2 + 8 + 1;
/// Length of the body of a `VerifyRequest`: id, volume, offset, length.
pub const VERIFY_REQUEST_LEN: usize = 8 + 2 + 8 + 4;
/// Length of the fixed part of a `VerifyReply` body: id, volume, offset, length, status (the
/// written-block mask and the digests, if any, follow).
pub const VERIFY_REPLY_HEADER_LEN: usize = 8 + 2 + 8 + 4 + 1;
/// Length of the body of a `VerifyDone`: volume, out-of-sync bytes found.
pub const VERIFY_DONE_LEN: usize = 2 + 8;
/// Slots of bitmap identifiers and of history identifiers in a `SyncUuids` (one per node id,
/// and DRBD's history depth).
pub const UUID_SLOTS: usize = 32;
/// Length of the body of a `SyncUuids`: volume, purpose, role, disk state, flags, bitmap
/// bits, size, bitmap granularity, current, bitmap identifiers, history identifiers, resync
/// goal, followed Primary and its last sequence number.
pub const SYNC_UUIDS_LEN: usize =
    2 + 1 + 1 + 1 + 8 + 8 + 8 + 4 + 8 + 8 * UUID_SLOTS + 8 * UUID_SLOTS + 8 + 1 + 8;
/// Most RLE bytes one `BitmapChunk` carries (its body is the volume number, then these bytes).
pub const BITMAP_CHUNK_LEN_MAX: usize = MESSAGE_LEN_MAX - 2;

/// Length of a string's length prefix.
pub(crate) const STRING_PREFIX_LEN: usize = 2;
/// Length of a list's count prefix.
pub(crate) const COUNT_PREFIX_LEN: usize = 2;
/// Length of one `VolumeInfo` entry: number, size.
pub(crate) const VOLUME_INFO_LEN: usize = 2 + 8;
/// Length of one `VolumeDiskState` entry: volume, disk state.
pub(crate) const VOLUME_DISK_STATE_LEN: usize = 2 + 1;
/// Length of a `Hello` with an empty resource name and no volumes.
const HELLO_LEN_MIN: usize = 2 + 2 + 1 + 1 + 1 + 1 + 16 + 32 + STRING_PREFIX_LEN + COUNT_PREFIX_LEN;
/// Length of a `Hello` with the longest resource name and the most volumes.
const HELLO_LEN_MAX: usize = HELLO_LEN_MIN + STRING_LEN_MAX + VOLUMES_MAX * VOLUME_INFO_LEN;
/// Length of a `PeerState` with no volumes.
const PEER_STATE_LEN_MIN: usize = 1 + COUNT_PREFIX_LEN;
/// Length of a `PeerState` with the most volumes.
const PEER_STATE_LEN_MAX: usize = PEER_STATE_LEN_MIN + VOLUMES_MAX * VOLUME_DISK_STATE_LEN;
/// Length of a body holding one string (`Refuse`, `Disconnect`).
const REASON_LEN_MAX: usize = STRING_PREFIX_LEN + STRING_LEN_MAX;

/// The kind number of a frame. See the table in the crate documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Kind {
    /// Handshake: who we are, what we serve, which versions we speak.
    Hello = 0x0001,
    /// Handshake: the MAC over the peer's challenge.
    AuthResponse = 0x0002,
    /// Handshake: whether the peer's MAC verified.
    AuthResult = 0x0003,
    /// Handshake: the reason for refusing the connection, sent just before closing it.
    Refuse = 0x0004,
    /// Data socket: a write, followed by its payload.
    Data = 0x0100,
    /// Data socket: discard a range.
    Trim = 0x0101,
    /// Data socket: write zeroes over a range.
    WriteZeroes = 0x0102,
    /// Data socket: closes an epoch.
    Barrier = 0x0103,
    /// Control socket: liveness probe.
    Ping = 0x0200,
    /// Control socket: answer to a ping.
    PingAck = 0x0201,
    /// Control socket: a write was received (protocol B).
    RecvAck = 0x0202,
    /// Control socket: a write is on the peer's disk (protocol C).
    WriteAck = 0x0203,
    /// Control socket: a write failed on the peer.
    NegAck = 0x0204,
    /// Control socket: an epoch is complete on the peer.
    BarrierAck = 0x0205,
    /// Control socket: the peer's role and disk states.
    PeerState = 0x0206,
    /// Control socket: graceful disconnect.
    Disconnect = 0x0207,
    /// Control socket (Primary to peer): mark yourself possibly stale (asynchronous
    /// replication follows) or clear the mark.
    StaleMark = 0x0208,
    /// Control socket: the mark (or its clearing) is durable.
    StaleMarkAck = 0x0209,
    /// Control socket (Primary to peer): writes are no longer shipped to you, only marked out
    /// of sync (pull-ahead: you are Behind), or they are again.
    Ahead = 0x020A,
    /// Control socket (Primary to peer): every write of the epochs up to this one is on
    /// every peer the Primary replicates to (DRBD's peer ack).
    PeerAck = 0x020B,
    /// Data socket (target to source): send me this range of your disk.
    ResyncRequest = 0x0300,
    /// Data socket (source to target): the range asked for, followed by its payload.
    ResyncReply = 0x0301,
    /// Data socket (source to target): the range asked for could not be read.
    ResyncNegReply = 0x0302,
    /// Data socket (target to source): the range of a reply is on the target's disk (or not).
    ResyncAck = 0x0303,
    /// Data socket (target to source): every block of the resync was requested and answered.
    ResyncDone = 0x0304,
    /// Data socket (target to source, `csums-alg`): send me this range unless your digests of
    /// it are these.
    CsumRequest = 0x0305,
    /// Data socket (source to target, `csums-alg`): the range of a `CsumRequest` has those
    /// digests here too; no data follows.
    ResyncInSync = 0x0306,
    /// Data socket (either way): the sender's own resync of a volume is paused (`pause-sync`,
    /// `resync-after`) or resumed; the receiver shows `resync-suspended:peer` meanwhile and a
    /// sync target issues no requests.
    SyncPause = 0x0307,
    /// Data socket (verify source to target): send me the digests of this range.
    VerifyRequest = 0x0310,
    /// Data socket (verify target to source): the digests of a range, or why there are none.
    VerifyReply = 0x0311,
    /// Data socket (verify source to target): the verify walked the whole volume.
    VerifyDone = 0x0312,
    /// Data socket: the sender's generation identifiers for one volume (the sync handshake).
    SyncUuids = 0x0400,
    /// Data socket: one RLE chunk of the sender's out-of-sync bitmap for one volume.
    BitmapChunk = 0x0401,
    /// Data socket (a Diskless node to an UpToDate peer): read this range of your disk for
    /// my client (the body of a `ResyncRequest`).
    ReadRequest = 0x0500,
    /// Data socket: the range of a `ReadRequest`, followed by its payload (the header of a
    /// `ResyncReply`).
    ReadReply = 0x0501,
    /// Data socket: the range of a `ReadRequest` could not be read (the body of a
    /// `ResyncNegReply`).
    ReadNegReply = 0x0502,
    /// Data socket (either way): a step of an online resize of a volume (query, offer, apply,
    /// applied, refused).
    Resize = 0x0600,
}

impl Kind {
    /// Every kind, in kind-number order.
    pub const ALL: [Kind; 37] = [
        Kind::Hello,
        Kind::AuthResponse,
        Kind::AuthResult,
        Kind::Refuse,
        Kind::Data,
        Kind::Trim,
        Kind::WriteZeroes,
        Kind::Barrier,
        Kind::Ping,
        Kind::PingAck,
        Kind::RecvAck,
        Kind::WriteAck,
        Kind::NegAck,
        Kind::BarrierAck,
        Kind::PeerState,
        Kind::Disconnect,
        Kind::StaleMark,
        Kind::StaleMarkAck,
        Kind::Ahead,
        Kind::PeerAck,
        Kind::ResyncRequest,
        Kind::ResyncReply,
        Kind::ResyncNegReply,
        Kind::ResyncAck,
        Kind::ResyncDone,
        Kind::CsumRequest,
        Kind::ResyncInSync,
        Kind::SyncPause,
        Kind::VerifyRequest,
        Kind::VerifyReply,
        Kind::VerifyDone,
        Kind::SyncUuids,
        Kind::BitmapChunk,
        Kind::ReadRequest,
        Kind::ReadReply,
        Kind::ReadNegReply,
        Kind::Resize,
    ];

    /// The kind number carried in the frame header.
    pub const fn to_wire(self) -> u16 {
        // A fieldless `repr(u16)` enum converts to its discriminant losslessly.
        self as u16
    }

    /// The kind with this number, or [`WireError::UnknownKind`].
    pub const fn from_wire(kind: u16) -> Result<Kind, WireError> {
        let mut rest: &[Kind] = &Kind::ALL;
        while let [first, tail @ ..] = rest {
            if first.to_wire() == kind {
                return Ok(*first);
            }
            rest = tail;
        }
        Err(WireError::UnknownKind { kind })
    }

    /// Whether this kind may be sent on the given socket. Handshake kinds go on both.
    ///
    /// Every resync, generation-identifier and bitmap kind goes on the data socket, so that it
    /// is ordered with the writes: the identifiers precede the first write after a connect,
    /// the bitmap precedes the first resync request, and a resync reply is ordered with the
    /// writes of the same blocks.
    pub const fn allowed_on(self, socket: SocketKind) -> bool {
        match self {
            Kind::Hello | Kind::AuthResponse | Kind::AuthResult | Kind::Refuse => true,
            Kind::Data
            | Kind::Trim
            | Kind::WriteZeroes
            | Kind::Barrier
            | Kind::ResyncRequest
            | Kind::ResyncReply
            | Kind::ResyncNegReply
            | Kind::ResyncAck
            | Kind::ResyncDone
            | Kind::CsumRequest
            | Kind::ResyncInSync
            | Kind::SyncPause
            | Kind::VerifyRequest
            | Kind::VerifyReply
            | Kind::VerifyDone
            | Kind::SyncUuids
            | Kind::BitmapChunk
            | Kind::ReadRequest
            | Kind::ReadReply
            | Kind::ReadNegReply
            | Kind::Resize => matches!(socket, SocketKind::Data),
            Kind::Ping
            | Kind::PingAck
            | Kind::RecvAck
            | Kind::WriteAck
            | Kind::NegAck
            | Kind::BarrierAck
            | Kind::PeerState
            | Kind::Disconnect
            | Kind::StaleMark
            | Kind::StaleMarkAck
            | Kind::Ahead
            | Kind::PeerAck => matches!(socket, SocketKind::Control),
        }
    }

    /// Whether frames of this kind carry a payload after the message part.
    pub const fn has_payload(self) -> bool {
        matches!(self, Kind::Data | Kind::ResyncReply | Kind::ReadReply)
    }

    /// The fixed message part of a payload kind (in the type of `body_len`); 0 for the others.
    pub(crate) const fn payload_header_len(self) -> u32 {
        match self {
            Kind::Data => DATA_HEADER_LEN_U32,
            Kind::ResyncReply | Kind::ReadReply => RESYNC_REPLY_HEADER_LEN_U32,
            _ => 0,
        }
    }

    /// The smallest `body_len` a frame of this kind can have.
    pub const fn body_len_min(self) -> usize {
        match self {
            Kind::Hello => HELLO_LEN_MIN,
            Kind::PeerState => PEER_STATE_LEN_MIN,
            Kind::Refuse | Kind::Disconnect => STRING_PREFIX_LEN,
            Kind::BitmapChunk => 2 + 1,
            Kind::VerifyReply => VERIFY_REPLY_HEADER_LEN,
            Kind::CsumRequest => CSUM_REQUEST_HEADER_LEN + 1,
            _ => self.body_len_fixed(),
        }
    }

    /// The largest `body_len` a frame of this kind can have.
    pub const fn body_len_max(self) -> usize {
        match self {
            Kind::Hello => HELLO_LEN_MAX,
            Kind::PeerState => PEER_STATE_LEN_MAX,
            Kind::Refuse | Kind::Disconnect => REASON_LEN_MAX,
            Kind::Data => DATA_HEADER_LEN + widen(DATA_PAYLOAD_LEN_MAX),
            Kind::ResyncReply | Kind::ReadReply => {
                RESYNC_REPLY_HEADER_LEN + widen(DATA_PAYLOAD_LEN_MAX)
            }
            Kind::BitmapChunk => 2 + BITMAP_CHUNK_LEN_MAX,
            Kind::VerifyReply | Kind::CsumRequest => MESSAGE_LEN_MAX,
            _ => self.body_len_fixed(),
        }
    }

    /// The largest message part (body without payload) of this kind.
    pub const fn message_len_max(self) -> usize {
        if self.has_payload() {
            widen(self.payload_header_len())
        } else {
            self.body_len_max()
        }
    }

    /// Body length of the fixed-size kinds; the minimum for the variable ones.
    const fn body_len_fixed(self) -> usize {
        match self {
            Kind::AuthResponse => 32,
            Kind::AuthResult => 1,
            Kind::Data => DATA_HEADER_LEN,
            Kind::Trim | Kind::WriteZeroes => RANGE_HEADER_LEN,
            Kind::Barrier => 8 + 1,
            Kind::Ping | Kind::PingAck => 0,
            Kind::RecvAck | Kind::WriteAck | Kind::BarrierAck => 8,
            Kind::NegAck | Kind::PeerAck => 8 + 4,
            Kind::StaleMark | Kind::StaleMarkAck | Kind::Ahead => 1,
            Kind::Hello => HELLO_LEN_MIN,
            Kind::PeerState => PEER_STATE_LEN_MIN,
            Kind::Refuse | Kind::Disconnect => STRING_PREFIX_LEN,
            Kind::ResyncRequest | Kind::ReadRequest => RESYNC_REQUEST_LEN,
            Kind::ResyncReply | Kind::ReadReply => RESYNC_REPLY_HEADER_LEN,
            Kind::ResyncNegReply | Kind::ReadNegReply => RESYNC_NEG_REPLY_LEN,
            Kind::ResyncAck => RESYNC_ACK_LEN,
            Kind::ResyncDone => RESYNC_DONE_LEN,
            Kind::CsumRequest => CSUM_REQUEST_HEADER_LEN + 1,
            Kind::ResyncInSync => RESYNC_IN_SYNC_LEN,
            Kind::SyncPause => SYNC_PAUSE_LEN,
            Kind::Resize => RESIZE_LEN,
            Kind::VerifyRequest => VERIFY_REQUEST_LEN,
            Kind::VerifyReply => VERIFY_REPLY_HEADER_LEN,
            Kind::VerifyDone => VERIFY_DONE_LEN,
            Kind::SyncUuids => SYNC_UUIDS_LEN,
            Kind::BitmapChunk => 2 + 1,
        }
    }
}

/// Checks the invariants in the module documentation for every kind.
const fn kinds_are_consistent() -> bool {
    let mut previous: Option<Kind> = None;
    let mut rest: &[Kind] = &Kind::ALL;
    while let [kind, tail @ ..] = rest {
        assert!(kind.to_wire() != 0);
        assert!(kind.body_len_min() <= kind.body_len_max());
        assert!(kind.body_len_max() <= widen(BODY_LEN_MAX));
        assert!(kind.message_len_max() <= MESSAGE_LEN_MAX);
        assert!(kind.has_payload() == (kind.payload_header_len() != 0));
        if kind.has_payload() {
            assert!(widen(kind.payload_header_len()) == kind.body_len_min());
        }
        // Kind numbers are unique because `ALL` is strictly ascending.
        if let Some(previous) = previous {
            assert!(previous.to_wire() < kind.to_wire());
        }
        previous = Some(*kind);
        rest = tail;
    }
    true
}

const _: () = assert!(kinds_are_consistent());
const _: () = assert!(DATA_HEADER_LEN == 28);
const _: () = assert!(widen(DATA_HEADER_LEN_U32) == DATA_HEADER_LEN);
const _: () = assert!(RANGE_HEADER_LEN == 30);
const _: () = assert!(widen(RESYNC_REPLY_HEADER_LEN_U32) == RESYNC_REPLY_HEADER_LEN);
const _: () = assert!(SYNC_UUIDS_LEN == 570);
const _: () = assert!(SYNC_UUIDS_LEN <= MESSAGE_LEN_MAX);
const _: () = assert!(VERIFY_REPLY_HEADER_LEN == 23);
const _: () = assert!(HELLO_LEN_MIN == 60);
const _: () = assert!(HELLO_LEN_MAX == 955);
// A full data frame body (header plus the largest payload) stays within the global bound,
// which the specification fixes at 64 MiB plus 64 bytes of fixed header room.
const _: () = assert!(DATA_HEADER_LEN + widen(DATA_PAYLOAD_LEN_MAX) <= widen(BODY_LEN_MAX));
const _: () = assert!(DATA_HEADER_LEN <= 64);
// String lengths and list counts fit their u16 prefixes.
const _: () = assert!(STRING_LEN_MAX <= u16::MAX as usize);
const _: () = assert!(VOLUMES_MAX <= u16::MAX as usize);
