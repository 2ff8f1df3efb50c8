//! Proptest strategies shared by the unit tests: arbitrary valid messages of every kind, with
//! field values spanning the full ranges the protocol allows (strings up to exactly
//! `STRING_LEN_MAX` bytes, lists up to exactly `VOLUMES_MAX` entries).

use proptest::collection::vec;
use proptest::prelude::*;

use crate::{
    truncate_text, CsumRequest, DataHeader, Hello, Kind, Message, PeerState, RangeHeader,
    ResizeStep, ResyncNegReply, ResyncReplyHeader, ResyncRequest, SocketKind, SyncUuids,
    UuidsPurpose, VerifyOutcome, VerifyReply, VerifyRequest, VolumeDiskState, VolumeInfo,
    BITMAP_CHUNK_LEN_MAX, CSUM_DIGESTS_LEN_MAX, DATA_FLAGS_KNOWN, DATA_PAYLOAD_LEN_MAX,
    STRING_LEN_MAX, UUID_FLAGS_KNOWN, UUID_SLOTS, VERIFY_DIGESTS_LEN_MAX, VOLUMES_MAX,
};

/// A string of at most `STRING_LEN_MAX` bytes: short, multi-byte, or exactly at the limit.
pub(crate) fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,24}",
        vec(any::<char>(), 0..200)
            .prop_map(|chars| truncate_text(&chars.into_iter().collect::<String>())),
        Just("r".repeat(STRING_LEN_MAX)),
    ]
}

/// A socket kind.
pub(crate) fn arb_socket() -> impl Strategy<Value = SocketKind> {
    prop_oneof![Just(SocketKind::Data), Just(SocketKind::Control)]
}

/// A `Hello` with any field values the wire format allows (not necessarily a sensible one).
pub(crate) fn arb_hello() -> impl Strategy<Value = Hello> {
    let volume = (any::<u16>(), any::<u64>())
        .prop_map(|(number, size_bytes)| VolumeInfo { number, size_bytes });
    (
        (any::<u16>(), any::<u16>(), arb_socket(), arb_text()),
        (any::<u8>(), any::<u8>(), vec(volume, 0..=VOLUMES_MAX)),
        (any::<[u8; 16]>(), any::<[u8; 32]>(), any::<bool>()),
    )
        .prop_map(
            |(
                (version_min, version_max, socket, resource),
                (from_node, to_node, volumes),
                (session, challenge, auth_required),
            )| Hello {
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
            },
        )
}

/// A data header with only known flag bits.
pub(crate) fn arb_data_header() -> impl Strategy<Value = DataHeader> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u16>(),
        any::<u16>(),
        any::<u64>(),
    )
        .prop_map(|(seq, epoch, volume, flags, offset)| DataHeader {
            seq,
            epoch,
            volume,
            // At most one compression bit: both set is invalid.
            flags: flags
                & DATA_FLAGS_KNOWN
                & !(if flags & 6 == 6 {
                    crate::DATA_FLAG_ZSTD
                } else {
                    0
                }),
            offset,
        })
}

/// A range header.
pub(crate) fn arb_range_header() -> impl Strategy<Value = RangeHeader> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u16>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(seq, epoch, volume, offset, length)| RangeHeader {
            seq,
            epoch,
            volume,
            offset,
            length,
        })
}

/// A peer state with up to `VOLUMES_MAX` volumes.
pub(crate) fn arb_peer_state() -> impl Strategy<Value = PeerState> {
    let volume = (any::<u16>(), any::<u8>())
        .prop_map(|(volume, disk_state)| VolumeDiskState { volume, disk_state });
    (any::<u8>(), vec(volume, 0..=VOLUMES_MAX))
        .prop_map(|(role, volumes)| PeerState { role, volumes })
}

/// Identifiers: mostly small (so collisions and zeros occur), sometimes anything.
fn arb_uuid() -> impl Strategy<Value = u64> {
    prop_oneof![0..8_u64, any::<u64>()]
}

/// A `SyncUuids` with any field values the wire format allows.
pub(crate) fn arb_sync_uuids() -> impl Strategy<Value = SyncUuids> {
    let purpose = prop_oneof![
        Just(UuidsPurpose::Handshake),
        Just(UuidsPurpose::Adopt),
        Just(UuidsPurpose::SyncStart),
        Just(UuidsPurpose::Rotate),
        Just(UuidsPurpose::RotateSeen),
        Just(UuidsPurpose::Accepted),
    ];
    let slots = || vec(arb_uuid(), UUID_SLOTS);
    (
        (
            any::<u16>(),
            purpose,
            any::<u8>(),
            any::<u8>(),
            any::<u64>(),
        ),
        (any::<u64>(), arb_uuid(), slots(), slots()),
    )
        .prop_map(
            |((volume, purpose, role, disk_state, flags), (bits, current, bitmap, history))| {
                let mut uuids = SyncUuids {
                    volume,
                    purpose,
                    role,
                    disk_state,
                    flags: flags & UUID_FLAGS_KNOWN,
                    bitmap_bits: bits,
                    size_bytes: bits.rotate_left(17),
                    bitmap_granularity_bytes: 4096,
                    current,
                    bitmap: [0; UUID_SLOTS],
                    history: [0; UUID_SLOTS],
                    resync_goal: current.rotate_left(9),
                    followed_node: role,
                    followed_seq: bits.rotate_left(5),
                };
                uuids.bitmap.copy_from_slice(&bitmap);
                uuids.history.copy_from_slice(&history);
                uuids
            },
        )
}

/// The digests of a `CsumRequest`: any allowed length, often the exact maximum.
pub(crate) fn arb_csum_digests() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        vec(any::<u8>(), 1..=CSUM_DIGESTS_LEN_MAX),
        Just(vec![0x3C; CSUM_DIGESTS_LEN_MAX]),
    ]
}

/// Any valid resync message.
pub(crate) fn arb_resync_message() -> impl Strategy<Value = Message> {
    let ids = (any::<u64>(), any::<u16>(), any::<u64>());
    prop_oneof![
        (ids, any::<u32>()).prop_map(|((id, volume, offset), length)| {
            Message::ResyncRequest(ResyncRequest {
                id,
                volume,
                offset,
                length,
            })
        }),
        ids.prop_map(|(id, volume, offset)| {
            Message::ResyncReply(ResyncReplyHeader { id, volume, offset })
        }),
        (ids, any::<u32>()).prop_map(|((id, volume, offset), length)| {
            Message::ReadRequest(ResyncRequest {
                id,
                volume,
                offset,
                length,
            })
        }),
        ids.prop_map(|(id, volume, offset)| {
            Message::ReadReply(ResyncReplyHeader { id, volume, offset })
        }),
        (ids, any::<u32>(), any::<u32>()).prop_map(|((id, volume, offset), length, errno)| {
            Message::ReadNegReply(ResyncNegReply {
                id,
                volume,
                offset,
                length,
                errno,
            })
        }),
        (ids, any::<u32>(), any::<u32>()).prop_map(|((id, volume, offset), length, errno)| {
            Message::ResyncNegReply(ResyncNegReply {
                id,
                volume,
                offset,
                length,
                errno,
            })
        }),
        (any::<u64>(), any::<u16>(), any::<bool>())
            .prop_map(|(id, volume, ok)| Message::ResyncAck { id, volume, ok }),
        (any::<u16>(), any::<u64>()).prop_map(|(volume, failed_bytes)| Message::ResyncDone {
            volume,
            failed_bytes
        }),
        (ids, any::<u32>(), arb_csum_digests()).prop_map(
            |((id, volume, offset), length, digests)| {
                Message::CsumRequest(CsumRequest {
                    id,
                    volume,
                    offset,
                    length,
                    digests,
                })
            }
        ),
        (any::<u64>(), any::<u16>()).prop_map(|(id, volume)| Message::ResyncInSync { id, volume }),
        (any::<u16>(), any::<bool>())
            .prop_map(|(volume, paused)| Message::SyncPause { volume, paused }),
        (any::<u16>(), any::<u64>(), 1_u8..=6).prop_map(|(volume, size_bytes, step)| {
            Message::Resize {
                volume,
                size_bytes,
                step: ResizeStep::from_wire(step).unwrap_or(ResizeStep::Query),
            }
        }),
        arb_sync_uuids().prop_map(|uuids| Message::SyncUuids(Box::new(uuids))),
        (any::<u16>(), vec(any::<u8>(), 1..=BITMAP_CHUNK_LEN_MAX))
            .prop_map(|(volume, chunk)| Message::BitmapChunk { volume, chunk }),
    ]
}

/// A verify outcome: digests of any allowed length (often the exact maximum), or a failure.
pub(crate) fn arb_verify_outcome() -> impl Strategy<Value = VerifyOutcome> {
    let lengths = prop_oneof![1..=VERIFY_DIGESTS_LEN_MAX, Just(VERIFY_DIGESTS_LEN_MAX)];
    prop_oneof![
        3 => (any::<u32>(), lengths.prop_flat_map(|len| vec(any::<u8>(), len))).prop_map(
            |(written_blocks, digests)| VerifyOutcome::Digests {
                written_blocks,
                digests
            }
        ),
        1 => Just(VerifyOutcome::ReadFailed),
    ]
}

/// Any valid online-verify message.
pub(crate) fn arb_verify_message() -> impl Strategy<Value = Message> {
    let range = (any::<u64>(), any::<u16>(), any::<u64>(), any::<u32>());
    prop_oneof![
        range.prop_map(|(id, volume, offset, length)| {
            Message::VerifyRequest(VerifyRequest {
                id,
                volume,
                offset,
                length,
            })
        }),
        (range, arb_verify_outcome()).prop_map(|((id, volume, offset, length), outcome)| {
            Message::VerifyReply(VerifyReply {
                id,
                volume,
                offset,
                length,
                outcome,
            })
        }),
        (any::<u16>(), any::<u64>())
            .prop_map(|(volume, oos_bytes)| Message::VerifyDone { volume, oos_bytes }),
    ]
}

/// Any valid message of any kind; `kinds_covered` in the tests checks every kind appears.
pub(crate) fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        4 => arb_resync_message(),
        2 => arb_verify_message(),
        1 => arb_hello().prop_map(Message::Hello),
        1 => any::<[u8; 32]>().prop_map(|mac| Message::AuthResponse { mac }),
        1 => any::<bool>().prop_map(|ok| Message::AuthResult { ok }),
        1 => arb_text().prop_map(|reason| Message::Refuse { reason }),
        1 => arb_data_header().prop_map(Message::Data),
        1 => arb_range_header().prop_map(Message::Trim),
        1 => arb_range_header().prop_map(Message::WriteZeroes),
        1 => (any::<u64>(), any::<bool>())
            .prop_map(|(epoch, flush)| Message::Barrier { epoch, flush }),
        1 => Just(Message::Ping),
        1 => Just(Message::PingAck),
        1 => any::<u64>().prop_map(|seq| Message::RecvAck { seq }),
        1 => any::<u64>().prop_map(|seq| Message::WriteAck { seq }),
        1 => (any::<u64>(), any::<u32>()).prop_map(|(seq, errno)| Message::NegAck { seq, errno }),
        1 => any::<u64>().prop_map(|epoch| Message::BarrierAck { epoch }),
        1 => any::<bool>().prop_map(|stale| Message::StaleMark { stale }),
        1 => any::<bool>().prop_map(|stale| Message::StaleMarkAck { stale }),
        1 => any::<bool>().prop_map(|ahead| Message::Ahead { ahead }),
        1 => (any::<u64>(), any::<u32>())
            .prop_map(|(epoch, nodes)| Message::PeerAck { epoch, nodes }),
        1 => arb_peer_state().prop_map(Message::PeerState),
        1 => arb_text().prop_map(|reason| Message::Disconnect { reason }),
    ]
}

/// A valid message together with a payload length it may carry: any length up to the maximum
/// for `Data`, 0 for every other kind.
pub(crate) fn arb_message_with_payload() -> impl Strategy<Value = (Message, u32)> {
    let payload_len = prop_oneof![
        Just(0),
        1..=65536_u32,
        0..=DATA_PAYLOAD_LEN_MAX,
        Just(DATA_PAYLOAD_LEN_MAX),
    ];
    (arb_message(), payload_len).prop_map(|(message, payload_len)| {
        let payload_len = if message.kind().has_payload() {
            payload_len
        } else {
            0
        };
        (message, payload_len)
    })
}

/// A kind number: mostly known ones, sometimes anything.
pub(crate) fn arb_kind_number() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => proptest::sample::select(Kind::ALL.to_vec()).prop_map(Kind::to_wire),
        1 => any::<u16>(),
    ]
}
