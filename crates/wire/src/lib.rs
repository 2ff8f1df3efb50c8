//! Codec of tandem's peer-to-peer replication protocol: frame headers, message bodies and the
//! checks both sides run on the handshake.
//!
//! **Boundary:** this crate does no I/O. It never touches sockets, files, clocks or randomness;
//! callers hand it bytes and get typed values back (and the other way round). Nonces such as the
//! session id and the authentication challenge are arguments, and the HMAC itself is computed by
//! the caller ([`auth_mac_input`] only builds the bytes to authenticate).
//!
//! # Connections
//!
//! Each peer pair talks over two TCP connections: the **data** socket carries bulk traffic
//! (writes, trims, barriers) and the **control** socket carries acknowledgements, pings and
//! state, so that an ack or a ping never waits behind megabytes of write payload. Both sockets
//! start with the handshake messages. [`Kind::allowed_on`] says which socket a kind belongs to.
//!
//! # Handshake
//!
//! On each socket the initiator (the node that dialled) sends `Hello` and the acceptor answers
//! with its own `Hello` (or `Refuse`); each `Hello` carries a fresh challenge. With a shared
//! secret the challenge-response follows, in this order:
//!
//! 1. initiator → acceptor: `AuthResponse` (its MAC of the acceptor's challenge);
//! 2. the acceptor verifies it. If it is wrong: acceptor → initiator `AuthResult { ok: false }`
//!    and the connection ends; the acceptor never sends its own MAC to an unproven peer;
//! 3. otherwise acceptor → initiator: `AuthResponse` (its MAC of the initiator's challenge),
//!    then `AuthResult { ok: true }`;
//! 4. initiator → acceptor: `AuthResult` (whether the acceptor's MAC verified).
//!
//! The MAC input is [`auth_mac_input`] (domain, responder node id, challenge, resource). An
//! initiator reading `AuthResult { ok: false }` where it expects step 3 knows its MAC was
//! refused. Acceptors before issue 27 sent their `AuthResponse` before verifying (the same
//! frames, in the same order on the wire), so both orders interoperate within one protocol
//! version.
//!
//! # Frames
//!
//! Every message is one frame: a fixed [`FRAME_HEADER_LEN`]-byte [`FrameHeader`] followed by
//! `body_len` body bytes. All integers are big-endian.
//!
//! | offset | size | field        | meaning                                              |
//! |-------:|-----:|--------------|------------------------------------------------------|
//! | 0      | 4    | `magic`      | [`FRAME_MAGIC`], `"TNDM"`                            |
//! | 4      | 2    | `kind`       | message kind, see the table below                    |
//! | 6      | 2    | `flags`      | 0; any other value is rejected                       |
//! | 8      | 4    | `body_len`   | body bytes that follow, at most [`BODY_LEN_MAX`]     |
//! | 12     | 4    | `header_crc` | CRC-32C of bytes 0..12                               |
//!
//! A `Data` frame's body is a fixed [`DATA_HEADER_LEN`]-byte [`DataHeader`] followed by the
//! write payload; a `ResyncReply` frame's body is a fixed [`RESYNC_REPLY_HEADER_LEN`]-byte
//! [`ResyncReplyHeader`] followed by the data read. The payload is not part of the decoded
//! [`Message`]: the receiver reads it straight into its own aligned buffer
//! ([`FrameHeader::payload_len`] says how long it is), and the sender writes it after the bytes
//! produced by [`Message::encode`].
//!
//! Strings are a `u16` byte length followed by UTF-8 bytes, at most [`STRING_LEN_MAX`] bytes.
//! Lists are a `u16` count followed by the entries, at most [`VOLUMES_MAX`] entries.
//! Booleans are one byte, 0 or 1.
//!
//! # Kinds
//!
//! Kind numbers are grouped by socket in blocks of 256, so new kinds slot in without
//! renumbering. Kind 0 is never valid, so a zeroed buffer never decodes.
//!
//! | kind | name | socket | body |
//! | ---: | --- | --- | --- |
//! | `0x0001` | `Hello` | both | versions, socket, nodes, auth flag, nonces, resource, volumes |
//! | `0x0002` | `AuthResponse` | both | `mac: [u8; 32]` |
//! | `0x0003` | `AuthResult` | both | `ok: bool` |
//! | `0x0004` | `Refuse` | both | `reason: string` |
//! | `0x0100` | `Data` | data | [`DataHeader`] (28 bytes), then the payload |
//! | `0x0101` | `Trim` | data | [`RangeHeader`] (30 bytes) |
//! | `0x0102` | `WriteZeroes` | data | [`RangeHeader`] (30 bytes) |
//! | `0x0103` | `Barrier` | data | `epoch: u64, flush: bool` |
//! | `0x0200` | `Ping` | control | empty |
//! | `0x0201` | `PingAck` | control | empty |
//! | `0x0202` | `RecvAck` | control | `seq: u64` |
//! | `0x0203` | `WriteAck` | control | `seq: u64` |
//! | `0x0204` | `NegAck` | control | `seq: u64, errno: u32` |
//! | `0x0205` | `BarrierAck` | control | `epoch: u64` |
//! | `0x0206` | `PeerState` | control | `role: u8`, list of `(volume: u16, disk_state: u8)` |
//! | `0x0207` | `Disconnect` | control | `reason: string` |
//! | `0x0208` | `StaleMark` | control | `stale: u8` (from the Primary: you may be stale) |
//! | `0x0209` | `StaleMarkAck` | control | `stale: u8` (the mark or its clearing is durable) |
//! | `0x020A` | `Ahead` | control | `ahead: u8` (from the Primary: you are Behind, or no longer) |
//! | `0x020B` | `PeerAck` | control | `epoch: u64, nodes: u32` (epochs to it are on these nodes) |
//! | `0x0300` | `ResyncRequest` | data | `id: u64, volume: u16, offset: u64, length: u32` |
//! | `0x0301` | `ResyncReply` | data | `id: u64, volume: u16, offset: u64`, then the payload |
//! | `0x0302` | `ResyncNegReply` | data | as `ResyncRequest`, then `errno: u32` |
//! | `0x0303` | `ResyncAck` | data | `id: u64, volume: u16, ok: bool` |
//! | `0x0304` | `ResyncDone` | data | `volume: u16, failed_bytes: u64` |
//! | `0x0305` | `CsumRequest` | data | as `ResyncRequest`, then the digest bytes¹ |
//! | `0x0306` | `ResyncInSync` | data | `id: u64, volume: u16` |
//! | `0x0307` | `SyncPause` | data | `volume: u16, paused: u8` |
//! | `0x0310` | `VerifyRequest` | data | `id: u64, volume: u16, offset: u64, length: u32` |
//! | `0x0311` | `VerifyReply` | data | as `ResyncRequest`, then `status: u8` and the digests |
//! | `0x0312` | `VerifyDone` | data | `volume: u16, oos_bytes: u64` |
//! | `0x0500` | `ReadRequest` | data | as `ResyncRequest` (a Diskless node's client read) |
//! | `0x0501` | `ReadReply` | data | as `ResyncReply`, then the payload |
//! | `0x0502` | `ReadNegReply` | data | as `ResyncNegReply` |
//! | `0x0600` | `Resize` | data | `volume: u16, size_bytes: u64, step: u8` ([`ResizeStep`]) |
//! | `0x0400` | `SyncUuids` | data | [`SyncUuids`] ([`SYNC_UUIDS_LEN`] bytes) |
//! | `0x0401` | `BitmapChunk` | data | `volume: u16`, then 1..=[`BITMAP_CHUNK_LEN_MAX`] RLE bytes |
//!
//! ¹ 1..=[`CSUM_DIGESTS_LEN_MAX`] bytes.
//!
//! `0x0300..0x030f` is the resync, `0x0310..0x031f` online verify, `0x04xx` the connection set-up
//! (generation identifiers, bitmap exchange). Both travel on the **data** socket, in both
//! directions: the identifiers must precede the first write after a connect, the bitmap the first
//! resync request, and a resync reply must be ordered with the writes to the same blocks
//! ([`Kind::allowed_on`]). None of them is big (a `BitmapChunk` is at most [`MESSAGE_LEN_MAX`]
//! bytes), so they never hold up a write for long.
//!
//! `SyncUuids` body, in order: `volume: u16`, `purpose: u8` (0 handshake, 1 adopt, 2 sync
//! start, 3 rotate, 4 rotate seen, 5 accepted), `role: u8`, `disk_state: u8`, `flags: u64` (bit 0
//! discard-my-data, bit 1 crashed-primary, bit 2 primary-peer, bit 3 crashed-secondary; others
//! rejected),
//! `bitmap_bits: u64`, `size_bytes: u64`, `bitmap_granularity_bytes: u32`, `current: u64`,
//! `bitmap: [u64; 32]`, `history: [u64; 32]`, `resync_goal: u64`, `followed_node: u8` (255:
//! none), `followed_seq: u64`.
//!
//! `VerifyReply` status: 0 digests (then `written_blocks: u32`, bit `i` set if block `i` of
//! the range was being written while it was read, then 1..=[`VERIFY_DIGESTS_LEN_MAX`] bytes:
//! one digest per bitmap block of the range, concatenated), 1 read failed (nothing follows).
//!
//! To add a kind: add a [`Kind`] variant with its number and body bounds, a [`Message`]
//! variant, one arm in each of the encode and decode dispatchers, and a case in the round-trip
//! strategy of the tests. An older peer answers an unknown kind with
//! [`WireError::UnknownKind`], so new kinds must only be sent once the negotiated
//! [`NegotiatedVersion`] allows them.
//!
//! # Invariants
//!
//! - Decoding is total: any byte string yields a value or a [`WireError`], never a panic.
//! - Decoding is bounded: `body_len` is checked against the kind's bounds before the body is
//!   read, no decode allocates more than the body it was given, and list counts are checked
//!   against both [`VOLUMES_MAX`] and the bytes actually present before allocating.
//! - Decoding is canonical: if `decode(bytes)` succeeds, encoding the result gives back exactly
//!   `bytes`. So a corrupted frame can never turn silently into a different valid frame unless
//!   the corruption itself is a valid encoding, and the header CRC rules that out for headers.
//! - Every non-data message body fits in [`MESSAGE_LEN_MAX`] bytes, so a control-socket reader
//!   needs at most `FRAME_HEADER_LEN + MESSAGE_LEN_MAX` bytes of buffer per message.

mod codec;
mod compress;
mod csums;
mod error;
mod frame;
mod handshake;
mod kind;
mod message;
#[cfg(test)]
mod test_support;
mod verify;

pub use compress::{compress, decompress, uncompressed_len, Compression, COMPRESSED_PREFIX_LEN};
pub use csums::{CsumRequest, CSUM_DIGESTS_LEN_MAX};
pub use error::WireError;
pub use frame::{decode_frame, Frame, FrameHeader, BODY_LEN_MAX, FRAME_HEADER_LEN, FRAME_MAGIC};
pub use handshake::{
    auth_mac_input, check_hello, truncate_text, HandshakeError, HelloExpect, HelloNonces,
    NegotiatedVersion, AUTH_DOMAIN, DISKLESS_VOLUME_BYTES,
};
pub use kind::{
    Kind, BITMAP_CHUNK_LEN_MAX, CSUM_REQUEST_HEADER_LEN, DATA_HEADER_LEN, DATA_PAYLOAD_LEN_MAX,
    MESSAGE_LEN_MAX, RANGE_HEADER_LEN, RESIZE_LEN, RESYNC_ACK_LEN, RESYNC_DONE_LEN,
    RESYNC_IN_SYNC_LEN, RESYNC_NEG_REPLY_LEN, RESYNC_REPLY_HEADER_LEN, RESYNC_REQUEST_LEN,
    STRING_LEN_MAX, SYNC_PAUSE_LEN, SYNC_UUIDS_LEN, UUID_SLOTS, VERIFY_DONE_LEN,
    VERIFY_REPLY_HEADER_LEN, VERIFY_REQUEST_LEN, VOLUMES_MAX,
};
pub use message::{
    DataHeader, Hello, Message, PeerState, RangeHeader, ResizeStep, ResyncNegReply,
    ResyncReplyHeader, ResyncRequest, SocketKind, SyncUuids, UuidsPurpose, VolumeDiskState,
    VolumeInfo, CHALLENGE_LEN, DATA_FLAGS_KNOWN, DATA_FLAG_FUA, DATA_FLAG_LZ4, DATA_FLAG_ZSTD,
    FOLLOWED_NONE, MAC_LEN, SESSION_LEN, UUID_FLAGS_KNOWN, UUID_FLAG_CRASHED_PRIMARY,
    UUID_FLAG_CRASHED_SECONDARY, UUID_FLAG_DISCARD_MY_DATA, UUID_FLAG_PRIMARY_PEER,
};
pub use verify::{VerifyOutcome, VerifyReply, VerifyRequest, VERIFY_DIGESTS_LEN_MAX};

/// The protocol version this build speaks. Peers negotiate the highest version both support.
/// Version 5 added `ReadRequest`, `ReadReply` and `ReadNegReply` (reads of a Diskless node);
/// version 6 `Ahead` (a pulled-ahead Primary tells its peer it is Behind); version 7 the
/// `SyncUuids` purpose `RotateSeen`; version 8 the `SyncUuids` field `resync_goal` and the
/// purpose `Accepted`; version 9 `PeerAck`, the `SyncUuids` fields `followed_node` and
/// `followed_seq`, and its flag crashed-secondary; version 10 `Resize` (online resize);
/// version 11 the `PeerAck` field `nodes`.
pub const PROTOCOL_VERSION: u16 = 11;

/// Widens a wire `u32` length to `usize`.
///
/// Lossless because tandem only builds for targets whose `usize` has at least 32 bits (asserted
/// below); this is the one place the crate converts with `as`.
const fn widen(n: u32) -> usize {
    n as usize
}

const _: () = assert!(usize::BITS >= 32);
const _: () = assert!(PROTOCOL_VERSION >= 1);
