//! Tests of message encoding and decoding: round trips for every kind, totality and
//! canonicity of the decoder on arbitrary and corrupted input, the exact byte layout, and a
//! table of every decode and encode error.

use proptest::collection::vec;
use proptest::prelude::*;

use crate::test_support::{arb_kind_number, arb_message, arb_message_with_payload};
use crate::{
    decode_frame, DataHeader, FrameHeader, Hello, Kind, Message, PeerState, RangeHeader,
    ResyncNegReply, ResyncReplyHeader, ResyncRequest, SocketKind, SyncUuids, UuidsPurpose,
    VolumeDiskState, VolumeInfo, WireError, BITMAP_CHUNK_LEN_MAX, DATA_FLAG_FUA, DATA_HEADER_LEN,
    DATA_PAYLOAD_LEN_MAX, FRAME_HEADER_LEN, MESSAGE_LEN_MAX, RESYNC_REPLY_HEADER_LEN,
    STRING_LEN_MAX, SYNC_UUIDS_LEN, UUID_FLAG_CRASHED_PRIMARY, UUID_SLOTS, VOLUMES_MAX,
};
use crate::{
    CsumRequest, ResizeStep, VerifyOutcome, VerifyReply, VerifyRequest, CSUM_DIGESTS_LEN_MAX,
    VERIFY_DIGESTS_LEN_MAX,
};

/// Encodes a message that must encode.
fn encode(message: &Message, payload_len: u32) -> Vec<u8> {
    let mut out = Vec::new();
    message
        .encode(payload_len, &mut out)
        .expect("valid message encodes");
    out
}

/// Splits an encoded frame into its decoded header and its message part.
fn split(frame: &[u8]) -> (FrameHeader, &[u8]) {
    let (header_bytes, body) = frame
        .split_first_chunk::<FRAME_HEADER_LEN>()
        .expect("has header");
    (
        FrameHeader::decode(header_bytes).expect("valid header"),
        body,
    )
}

/// One message of every kind, in kind order.
fn one_of_each_kind() -> Vec<Message> {
    let mut messages = one_of_each_link_kind();
    messages.extend(one_of_each_resync_kind());
    messages.extend(one_of_each_other_kind());
    messages
}

/// One handshake, data and control message of each kind, in kind order.
fn one_of_each_link_kind() -> Vec<Message> {
    let range = RangeHeader {
        seq: 7,
        epoch: 3,
        volume: 1,
        offset: 4096,
        length: 512,
    };
    vec![
        Message::Hello(hello_sample()),
        Message::AuthResponse { mac: [0xAB; 32] },
        Message::AuthResult { ok: true },
        Message::Refuse {
            reason: "no".to_owned(),
        },
        Message::Data(DataHeader {
            seq: 1,
            epoch: 2,
            volume: 3,
            flags: DATA_FLAG_FUA,
            offset: 4,
        }),
        Message::Trim(range),
        Message::WriteZeroes(range),
        Message::Barrier {
            epoch: 9,
            flush: true,
        },
        Message::Ping,
        Message::PingAck,
        Message::RecvAck { seq: 5 },
        Message::WriteAck { seq: 6 },
        Message::NegAck { seq: 7, errno: 5 },
        Message::BarrierAck { epoch: 9 },
        Message::PeerState(PeerState {
            role: 1,
            volumes: vec![VolumeDiskState {
                volume: 0,
                disk_state: 8,
            }],
        }),
        Message::Disconnect {
            reason: "bye".to_owned(),
        },
        Message::StaleMark { stale: true },
        Message::StaleMarkAck { stale: false },
        Message::Ahead { ahead: true },
        Message::PeerAck {
            epoch: 7,
            nodes: 0b101,
        },
    ]
}

/// One resync message of each kind, in kind order.
fn one_of_each_resync_kind() -> Vec<Message> {
    vec![
        Message::ResyncRequest(ResyncRequest {
            id: 1,
            volume: 0,
            offset: 8192,
            length: 4096,
        }),
        Message::ResyncReply(ResyncReplyHeader {
            id: 1,
            volume: 0,
            offset: 8192,
        }),
        Message::ResyncNegReply(ResyncNegReply {
            id: 2,
            volume: 0,
            offset: 0,
            length: 4096,
            errno: 5,
        }),
        Message::ResyncAck {
            id: 1,
            volume: 0,
            ok: true,
        },
        Message::ResyncDone {
            volume: 0,
            failed_bytes: 0,
        },
        Message::CsumRequest(CsumRequest {
            id: 4,
            volume: 0,
            offset: 4096,
            length: 8192,
            digests: vec![1; 16],
        }),
        Message::ResyncInSync { id: 4, volume: 0 },
        Message::SyncPause {
            volume: 1,
            paused: true,
        },
    ]
}

/// One verify, set-up, read and resize message of each kind, in kind order.
fn one_of_each_other_kind() -> Vec<Message> {
    vec![
        Message::VerifyRequest(VerifyRequest {
            id: 3,
            volume: 0,
            offset: 0,
            length: 131_072,
        }),
        Message::VerifyReply(VerifyReply {
            id: 3,
            volume: 0,
            offset: 0,
            length: 131_072,
            outcome: VerifyOutcome::Digests {
                written_blocks: 1 << 31,
                digests: vec![7; 32 * 8],
            },
        }),
        Message::VerifyDone {
            volume: 0,
            oos_bytes: 12_288,
        },
        Message::SyncUuids(Box::new(uuids_sample())),
        Message::BitmapChunk {
            volume: 0,
            chunk: vec![1, 2, 3],
        },
        Message::ReadRequest(ResyncRequest {
            id: 9,
            volume: 0,
            offset: 8192,
            length: 4096,
        }),
        Message::ReadReply(ResyncReplyHeader {
            id: 9,
            volume: 0,
            offset: 8192,
        }),
        Message::ReadNegReply(ResyncNegReply {
            id: 9,
            volume: 0,
            offset: 8192,
            length: 4096,
            errno: 5,
        }),
        Message::Resize {
            volume: 1,
            size_bytes: 1 << 31,
            step: ResizeStep::Apply { assume_clean: true },
        },
    ]
}

/// Every `Resize` step survives a round trip with its byte; other step bytes are refused.
#[test]
fn resize_steps_round_trip_and_unknown_steps_are_refused() {
    let steps = [
        ResizeStep::Query,
        ResizeStep::Offer,
        ResizeStep::Apply {
            assume_clean: false,
        },
        ResizeStep::Apply { assume_clean: true },
        ResizeStep::Applied,
        ResizeStep::Refused,
    ];
    for (byte, step) in (1_u8..).zip(steps) {
        assert_eq!(step.to_wire(), byte);
        let message = Message::Resize {
            volume: 3,
            size_bytes: 5 << 30,
            step,
        };
        let frame = encode(&message, 0);
        let (header, body) = split(&frame);
        assert_eq!(body.len(), crate::RESIZE_LEN);
        assert_eq!(Message::decode(&header, body), Ok(message));
    }
    for byte in [0, 7, 0xFF] {
        assert_eq!(
            ResizeStep::from_wire(byte),
            Err(WireError::InvalidResizeStep { value: byte })
        );
    }
}

fn uuids_sample() -> SyncUuids {
    let mut uuids = SyncUuids {
        volume: 1,
        purpose: UuidsPurpose::Handshake,
        role: 2,
        disk_state: 9,
        flags: UUID_FLAG_CRASHED_PRIMARY,
        bitmap_bits: 17,
        size_bytes: 1 << 30,
        bitmap_granularity_bytes: 4096,
        current: 0xABCD,
        bitmap: [0; UUID_SLOTS],
        history: [0; UUID_SLOTS],
        resync_goal: 0x30,
        followed_node: 2,
        followed_seq: 0x4000,
    };
    uuids.bitmap[1] = 0x10;
    uuids.history[0] = 0x20;
    uuids
}

fn hello_sample() -> Hello {
    Hello {
        version_min: 1,
        version_max: 1,
        socket: SocketKind::Control,
        resource: "r0".to_owned(),
        from_node: 0,
        to_node: 1,
        volumes: vec![VolumeInfo {
            number: 0,
            size_bytes: 1 << 30,
        }],
        session: [1; 16],
        challenge: [2; 32],
        auth_required: true,
    }
}

#[test]
fn samples_cover_every_kind_in_order() {
    let kinds: Vec<Kind> = one_of_each_kind().iter().map(Message::kind).collect();
    assert_eq!(kinds, Kind::ALL.to_vec());
    for message in one_of_each_kind() {
        let frame = encode(&message, 0);
        let (header, body) = split(&frame);
        assert_eq!(header.kind, message.kind().to_wire());
        assert_eq!(Message::decode(&header, body), Ok(message));
    }
}

#[test]
fn data_frame_layout_is_pinned() {
    let message = Message::Data(DataHeader {
        seq: 1,
        epoch: 2,
        volume: 3,
        flags: DATA_FLAG_FUA,
        offset: 4,
    });
    let frame = encode(&message, 4096);
    let crc = crc32c::crc32c(&frame[..12]).to_be_bytes();
    let mut expected = vec![b'T', b'N', b'D', b'M', 0x01, 0x00, 0, 0, 0, 0, 0x10, 0x1C];
    expected.extend_from_slice(&crc);
    expected.extend_from_slice(&1_u64.to_be_bytes()); // seq
    expected.extend_from_slice(&2_u64.to_be_bytes()); // epoch
    expected.extend_from_slice(&4_u64.to_be_bytes()); // offset
    expected.extend_from_slice(&[0, 3, 0, 1]); // volume, flags
    assert_eq!(frame, expected);
    assert_eq!(frame.len(), FRAME_HEADER_LEN + DATA_HEADER_LEN);
    let (header, _) = split(&frame);
    assert_eq!(header.payload_len(), 4096);
    assert_eq!(header.message_len(), DATA_HEADER_LEN);
}

#[test]
fn resync_reply_layout_is_pinned() {
    let message = Message::ResyncReply(ResyncReplyHeader {
        id: 0x0102,
        volume: 7,
        offset: 0x3000,
    });
    let frame = encode(&message, 4096);
    let (header, body) = split(&frame);
    assert_eq!(header.kind, 0x0301);
    assert_eq!(header.body_len, 18 + 4096);
    assert_eq!(header.payload_len(), 4096);
    let mut expected = 0x0102_u64.to_be_bytes().to_vec();
    expected.extend_from_slice(&7_u16.to_be_bytes());
    expected.extend_from_slice(&0x3000_u64.to_be_bytes());
    assert_eq!(body, expected.as_slice());
    assert_eq!(body.len(), RESYNC_REPLY_HEADER_LEN);
}

#[test]
fn sync_uuids_layout_is_pinned() {
    let frame = encode(&Message::SyncUuids(Box::new(uuids_sample())), 0);
    let (header, body) = split(&frame);
    assert_eq!(header.kind, 0x0400);
    assert_eq!(body.len(), SYNC_UUIDS_LEN);
    let mut expected = vec![0, 1, 0, 2, 9];
    expected.extend_from_slice(&2_u64.to_be_bytes()); // flags
    expected.extend_from_slice(&17_u64.to_be_bytes()); // bitmap bits
    expected.extend_from_slice(&(1_u64 << 30).to_be_bytes()); // size
    expected.extend_from_slice(&4096_u32.to_be_bytes()); // bitmap granularity
    expected.extend_from_slice(&0xABCD_u64.to_be_bytes()); // current
    for slot in 0..UUID_SLOTS {
        expected.extend_from_slice(&(if slot == 1 { 0x10_u64 } else { 0 }).to_be_bytes());
    }
    for slot in 0..UUID_SLOTS {
        expected.extend_from_slice(&(if slot == 0 { 0x20_u64 } else { 0 }).to_be_bytes());
    }
    expected.extend_from_slice(&0x30_u64.to_be_bytes()); // resync goal
    expected.push(2); // followed node
    expected.extend_from_slice(&0x4000_u64.to_be_bytes()); // followed seq
    assert_eq!(body, expected.as_slice());
}

/// Which socket each kind may use: the resync and set-up kinds only on the data socket.
#[test]
fn sockets_of_the_resync_and_setup_kinds() {
    let data_only = [
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
    for kind in data_only {
        assert!(kind.allowed_on(SocketKind::Data), "{kind:?}");
        assert!(!kind.allowed_on(SocketKind::Control), "{kind:?}");
    }
    let with_payload: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.has_payload()).collect();
    assert_eq!(
        with_payload,
        vec![Kind::Data, Kind::ResyncReply, Kind::ReadReply]
    );
}

#[test]
fn resync_and_setup_decode_errors() {
    let uuids = Kind::SyncUuids.to_wire();
    let body = |edit: fn(&mut Vec<u8>)| {
        let frame = encode(&Message::SyncUuids(Box::new(uuids_sample())), 0);
        let mut body = frame[FRAME_HEADER_LEN..].to_vec();
        edit(&mut body);
        body
    };
    let len = u32::try_from(SYNC_UUIDS_LEN).expect("small");
    check_decode(
        uuids,
        len,
        &body(|b| b[2] = 6),
        Err(WireError::InvalidUuidsPurpose { value: 6 }),
    );
    check_decode(
        uuids,
        len,
        &body(|b| b[5] = 0x80),
        Err(WireError::UnknownUuidFlags {
            flags: 0x8000_0000_0000_0002,
        }),
    );
    check_decode(
        uuids,
        len,
        &body(|b| b[12] = 16),
        Err(WireError::UnknownUuidFlags { flags: 16 }),
    );
    check_decode(
        uuids,
        len - 1,
        &body(|b| {
            b.pop();
        }),
        Err(WireError::BodyTooShort {
            kind: uuids,
            body_len: len - 1,
            min: SYNC_UUIDS_LEN,
        }),
    );
    check_decode(
        Kind::ResyncAck.to_wire(),
        11,
        &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 3],
        Err(WireError::InvalidBool {
            field: "resync_ack.ok",
            value: 3,
        }),
    );
    let chunk = Kind::BitmapChunk.to_wire();
    check_decode(
        chunk,
        2,
        &[0, 1],
        Err(WireError::BodyTooShort {
            kind: chunk,
            body_len: 2,
            min: 3,
        }),
    );
    check_decode(
        chunk,
        4,
        &[0, 1, 9, 8],
        Ok(Message::BitmapChunk {
            volume: 1,
            chunk: vec![9, 8],
        }),
    );
    let too_long = u32::try_from(MESSAGE_LEN_MAX + 1).expect("small");
    check_decode(
        chunk,
        too_long,
        &vec![0; MESSAGE_LEN_MAX + 1],
        Err(WireError::BodyTooLong {
            kind: chunk,
            body_len: u64::from(too_long),
            max: MESSAGE_LEN_MAX,
        }),
    );
    // For ResyncReply the slice is the fixed header only, never the payload.
    check_decode(
        Kind::ResyncReply.to_wire(),
        18 + 4,
        &[0; 22],
        Err(WireError::BodySliceMismatch {
            kind: Kind::ResyncReply.to_wire(),
            expected: 18,
            actual: 22,
        }),
    );
}

#[test]
fn encode_refuses_bad_resync_and_setup_messages() {
    for chunk in [Vec::new(), vec![0; BITMAP_CHUNK_LEN_MAX + 1]] {
        let len = chunk.len();
        check_encode_error(
            Message::BitmapChunk { volume: 0, chunk },
            0,
            WireError::BitmapChunkLength {
                len,
                max: BITMAP_CHUNK_LEN_MAX,
            },
        );
    }
    check_encode_error(
        Message::SyncUuids(Box::new(SyncUuids {
            flags: 16,
            ..uuids_sample()
        })),
        0,
        WireError::UnknownUuidFlags { flags: 16 },
    );
    check_encode_error(
        Message::ResyncReply(ResyncReplyHeader {
            id: 0,
            volume: 0,
            offset: 0,
        }),
        DATA_PAYLOAD_LEN_MAX + 1,
        WireError::PayloadTooLong {
            payload_len: DATA_PAYLOAD_LEN_MAX + 1,
            max: DATA_PAYLOAD_LEN_MAX,
        },
    );
    check_encode_error(
        Message::ResyncDone {
            volume: 0,
            failed_bytes: 0,
        },
        1,
        WireError::PayloadNotAllowed {
            kind: Kind::ResyncDone.to_wire(),
            payload_len: 1,
        },
    );
}

#[test]
fn hello_layout_is_pinned() {
    let frame = encode(&Message::Hello(hello_sample()), 0);
    let (_, body) = split(&frame);
    let mut expected = vec![0, 1, 0, 1, 2, 0, 1, 1];
    expected.extend_from_slice(&[1; 16]);
    expected.extend_from_slice(&[2; 32]);
    expected.extend_from_slice(&[0, 2, b'r', b'0', 0, 1, 0, 0]);
    expected.extend_from_slice(&(1_u64 << 30).to_be_bytes());
    assert_eq!(body, expected.as_slice());
}

#[test]
fn largest_messages_hit_the_kind_maxima_exactly() {
    let volumes = (0..VOLUMES_MAX)
        .map(|n| VolumeInfo {
            number: u16::try_from(n).expect("small"),
            size_bytes: u64::MAX,
        })
        .collect();
    let hello = Hello {
        resource: "x".repeat(STRING_LEN_MAX),
        volumes,
        ..hello_sample()
    };
    let states = vec![
        VolumeDiskState {
            volume: 1,
            disk_state: 2
        };
        VOLUMES_MAX
    ];
    let cases = [
        (Message::Hello(hello), 0),
        (
            Message::PeerState(PeerState {
                role: 0,
                volumes: states,
            }),
            0,
        ),
        (
            Message::Refuse {
                reason: "é".repeat(127) + "x",
            },
            0,
        ),
        (
            Message::Data(DataHeader {
                seq: 0,
                epoch: 0,
                volume: 0,
                flags: 0,
                offset: 0,
            }),
            DATA_PAYLOAD_LEN_MAX,
        ),
        (
            Message::BitmapChunk {
                volume: 0,
                chunk: vec![0xFF; BITMAP_CHUNK_LEN_MAX],
            },
            0,
        ),
        (
            Message::ResyncReply(ResyncReplyHeader {
                id: 0,
                volume: 0,
                offset: 0,
            }),
            DATA_PAYLOAD_LEN_MAX,
        ),
        (
            Message::CsumRequest(CsumRequest {
                id: u64::MAX,
                volume: u16::MAX,
                offset: u64::MAX,
                length: u32::MAX,
                digests: vec![0xFF; CSUM_DIGESTS_LEN_MAX],
            }),
            0,
        ),
        (
            Message::VerifyReply(VerifyReply {
                id: u64::MAX,
                volume: u16::MAX,
                offset: u64::MAX,
                length: u32::MAX,
                outcome: VerifyOutcome::Digests {
                    written_blocks: u32::MAX,
                    digests: vec![0xFF; VERIFY_DIGESTS_LEN_MAX],
                },
            }),
            0,
        ),
    ];
    for (message, payload_len) in cases {
        let frame = encode(&message, payload_len);
        let (header, body) = split(&frame);
        assert_eq!(crate::widen(header.body_len), message.kind().body_len_max());
        assert!(body.len() <= MESSAGE_LEN_MAX);
        assert_eq!(Message::decode(&header, body), Ok(message));
    }
}

/// Decodes a message part under a header built from `kind` and `body_len` and compares.
#[track_caller]
fn check_decode(kind: u16, body_len: u32, body: &[u8], expected: Result<Message, WireError>) {
    let header = FrameHeader {
        kind,
        flags: 0,
        body_len,
    };
    assert_eq!(Message::decode(&header, body), expected);
}

/// A valid `Hello` body with `edit` applied to its bytes.
fn hello_body(edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let frame = encode(&Message::Hello(hello_sample()), 0);
    let mut body = frame[FRAME_HEADER_LEN..].to_vec();
    edit(&mut body);
    body
}

/// Decodes `body` as a `Hello`, with `body_len` taken from the body itself.
#[track_caller]
fn check_hello_body(body: Vec<u8>, expected: WireError) {
    let body_len = u32::try_from(body.len()).expect("small");
    check_decode(Kind::Hello.to_wire(), body_len, &body, Err(expected));
}

#[test]
fn hello_decode_errors() {
    // Offsets: socket 4, auth_required 7, resource length 56..58, resource 58..60,
    // volume count 60..62, volumes 62..72.
    check_hello_body(
        hello_body(|b| b[4] = 0),
        WireError::InvalidSocketKind { value: 0 },
    );
    check_hello_body(
        hello_body(|b| b[4] = 3),
        WireError::InvalidSocketKind { value: 3 },
    );
    check_hello_body(
        hello_body(|b| b[7] = 2),
        WireError::InvalidBool {
            field: "hello.auth_required",
            value: 2,
        },
    );
    check_hello_body(
        hello_body(|b| b[58] = 0xFF),
        WireError::InvalidUtf8 {
            field: "hello.resource",
        },
    );
    check_hello_body(
        hello_body(|b| b[56..58].copy_from_slice(&256_u16.to_be_bytes())),
        WireError::StringTooLong {
            field: "hello.resource",
            len: 256,
            max: STRING_LEN_MAX,
        },
    );
    check_hello_body(
        hello_body(|b| b[56..58].copy_from_slice(&200_u16.to_be_bytes())),
        WireError::Truncated {
            field: "hello.resource",
        },
    );
    check_hello_body(
        hello_body(|b| b[60..62].copy_from_slice(&65_u16.to_be_bytes())),
        WireError::TooManyEntries {
            field: "hello.volumes",
            count: 65,
            max: VOLUMES_MAX,
        },
    );
    check_hello_body(
        hello_body(|b| b[60..62].copy_from_slice(&2_u16.to_be_bytes())),
        WireError::Truncated {
            field: "hello.volumes",
        },
    );
    check_hello_body(
        hello_body(|b| b[60..62].copy_from_slice(&0_u16.to_be_bytes())),
        WireError::TrailingBytes {
            kind: Kind::Hello.to_wire(),
            count: 10,
        },
    );
    check_hello_body(
        hello_body(|b| b.push(0)),
        WireError::TrailingBytes {
            kind: Kind::Hello.to_wire(),
            count: 1,
        },
    );
}

#[test]
fn data_decode_errors() {
    let data = |flags: u16| {
        let mut body = [0_u8; DATA_HEADER_LEN];
        body[26..].copy_from_slice(&flags.to_be_bytes());
        body
    };
    let data_kind = Kind::Data.to_wire();
    check_decode(
        data_kind,
        28,
        &data(0x8000),
        Err(WireError::UnknownDataFlags { flags: 0x8000 }),
    );
    check_decode(
        data_kind,
        28,
        &data(0x0008),
        Err(WireError::UnknownDataFlags { flags: 0x0008 }),
    );
    check_decode(
        data_kind,
        28,
        &data(0x0006),
        Err(WireError::UnknownDataFlags { flags: 0x0006 }),
    );
    check_decode(
        data_kind,
        28 + 512,
        &data(1),
        Ok(Message::Data(DataHeader {
            seq: 0,
            epoch: 0,
            volume: 0,
            flags: 1,
            offset: 0,
        })),
    );
    // For Data the slice is the data header only, never the payload.
    check_decode(
        data_kind,
        28 + 4,
        &[0; 32],
        Err(WireError::BodySliceMismatch {
            kind: data_kind,
            expected: 28,
            actual: 32,
        }),
    );
}

#[test]
fn fixed_kind_decode_errors() {
    let barrier = Kind::Barrier.to_wire();
    let mut flush_two = [0_u8; 9];
    flush_two[8] = 2;
    check_decode(
        barrier,
        9,
        &flush_two,
        Err(WireError::InvalidBool {
            field: "barrier.flush",
            value: 2,
        }),
    );
    check_decode(
        Kind::AuthResult.to_wire(),
        1,
        &[7],
        Err(WireError::InvalidBool {
            field: "auth_result.ok",
            value: 7,
        }),
    );
    check_decode(
        Kind::Ping.to_wire(),
        1,
        &[0],
        Err(WireError::BodyTooLong {
            kind: Kind::Ping.to_wire(),
            body_len: 1,
            max: 0,
        }),
    );
    check_decode(
        Kind::RecvAck.to_wire(),
        7,
        &[0; 7],
        Err(WireError::BodyTooShort {
            kind: Kind::RecvAck.to_wire(),
            body_len: 7,
            min: 8,
        }),
    );
    check_decode(0, 0, &[], Err(WireError::UnknownKind { kind: 0 }));
    check_decode(0x030F, 0, &[], Err(WireError::UnknownKind { kind: 0x030F }));
    check_decode(
        Kind::NegAck.to_wire(),
        12,
        &[0; 11],
        Err(WireError::BodySliceMismatch {
            kind: Kind::NegAck.to_wire(),
            expected: 12,
            actual: 11,
        }),
    );
    let flagged = FrameHeader {
        kind: Kind::Ping.to_wire(),
        flags: 1,
        body_len: 0,
    };
    assert_eq!(
        Message::decode(&flagged, &[]),
        Err(WireError::UnsupportedFlags { flags: 1 })
    );
}

#[test]
fn variable_kind_decode_errors() {
    let peer_state = Kind::PeerState.to_wire();
    check_decode(
        peer_state,
        3,
        &[1, 0, 1],
        Err(WireError::Truncated {
            field: "peer_state.volumes",
        }),
    );
    check_decode(
        peer_state,
        6,
        &[1, 0, 1, 0, 2, 3],
        Ok(Message::PeerState(PeerState {
            role: 1,
            volumes: vec![VolumeDiskState {
                volume: 2,
                disk_state: 3,
            }],
        })),
    );
    let refuse = Kind::Refuse.to_wire();
    check_decode(
        refuse,
        3,
        &[0, 2, b'a'],
        Err(WireError::Truncated {
            field: "refuse.reason",
        }),
    );
    check_decode(
        refuse,
        4,
        &[0, 1, b'a', b'b'],
        Err(WireError::TrailingBytes {
            kind: refuse,
            count: 1,
        }),
    );
    check_decode(
        Kind::Disconnect.to_wire(),
        3,
        &[0, 1, 0xC3],
        Err(WireError::InvalidUtf8 {
            field: "disconnect.reason",
        }),
    );
}

/// Encodes `message` into a buffer that already holds bytes and expects `expected`, with the
/// buffer unchanged.
#[track_caller]
fn check_encode_error(message: Message, payload_len: u32, expected: WireError) {
    let mut out = vec![0xEE; 5];
    assert_eq!(message.encode(payload_len, &mut out), Err(expected));
    assert_eq!(out, vec![0xEE; 5]);
}

#[test]
fn encode_refuses_what_decode_would_refuse() {
    check_encode_error(
        Message::Refuse {
            reason: "x".repeat(256),
        },
        0,
        WireError::StringTooLong {
            field: "refuse.reason",
            len: 256,
            max: STRING_LEN_MAX,
        },
    );
    check_encode_error(
        Message::Hello(Hello {
            resource: "é".repeat(128),
            ..hello_sample()
        }),
        0,
        WireError::StringTooLong {
            field: "hello.resource",
            len: 256,
            max: STRING_LEN_MAX,
        },
    );
    let volumes = vec![
        VolumeInfo {
            number: 0,
            size_bytes: 0
        };
        VOLUMES_MAX + 1
    ];
    check_encode_error(
        Message::Hello(Hello {
            volumes,
            ..hello_sample()
        }),
        0,
        WireError::TooManyEntries {
            field: "hello.volumes",
            count: 65,
            max: VOLUMES_MAX,
        },
    );
    let states = vec![
        VolumeDiskState {
            volume: 0,
            disk_state: 0
        };
        VOLUMES_MAX + 1
    ];
    check_encode_error(
        Message::PeerState(PeerState {
            role: 0,
            volumes: states,
        }),
        0,
        WireError::TooManyEntries {
            field: "peer_state.volumes",
            count: 65,
            max: VOLUMES_MAX,
        },
    );
}

#[test]
fn encode_refuses_bad_payloads() {
    let data = DataHeader {
        seq: 0,
        epoch: 0,
        volume: 0,
        flags: 0,
        offset: 0,
    };
    check_encode_error(
        Message::Data(data),
        DATA_PAYLOAD_LEN_MAX + 1,
        WireError::PayloadTooLong {
            payload_len: DATA_PAYLOAD_LEN_MAX + 1,
            max: DATA_PAYLOAD_LEN_MAX,
        },
    );
    check_encode_error(
        Message::Data(DataHeader {
            flags: 0x10,
            ..data
        }),
        0,
        WireError::UnknownDataFlags { flags: 0x10 },
    );
    check_encode_error(
        Message::Ping,
        1,
        WireError::PayloadNotAllowed {
            kind: Kind::Ping.to_wire(),
            payload_len: 1,
        },
    );
}

#[test]
fn encode_appends_after_existing_bytes() {
    let mut out = b"prefix".to_vec();
    Message::Ping.encode(0, &mut out).expect("ping encodes");
    Message::WriteAck { seq: 3 }
        .encode(0, &mut out)
        .expect("ack encodes");
    assert_eq!(&out[..6], b"prefix");
    let first = decode_frame(&out[6..]).expect("valid").expect("complete");
    assert_eq!(first.message, Message::Ping);
    let second = decode_frame(&out[6 + first.consumed..])
        .expect("valid")
        .expect("complete");
    assert_eq!(second.message, Message::WriteAck { seq: 3 });
    assert_eq!(6 + first.consumed + second.consumed, out.len());
}

proptest! {
    /// Every kind survives encode → header decode → message decode with arbitrary fields.
    #[test]
    fn round_trip_every_kind((message, payload_len) in arb_message_with_payload()) {
        let frame = encode(&message, payload_len);
        let (header, body) = split(&frame);
        prop_assert_eq!(header.kind, message.kind().to_wire());
        prop_assert_eq!(header.payload_len(), payload_len);
        prop_assert_eq!(body.len(), header.message_len());
        prop_assert_eq!(Message::decode(&header, body), Ok(message.clone()));
        let streamed = decode_frame(&frame)?.expect("complete frame");
        prop_assert_eq!(streamed.consumed, frame.len());
        prop_assert_eq!(streamed.message, message);
    }

    /// Arbitrary bodies under arbitrary kinds never panic, and whatever decodes re-encodes to
    /// the very same bytes (the decoder is canonical).
    #[test]
    fn arbitrary_bodies_decode_totally_and_canonically(
        (kind, body) in arb_kind_number().prop_flat_map(|kind| {
            // Mostly bodies near the kind's plausible lengths, so many of them decode.
            let len_min = Kind::from_wire(kind).map_or(0, Kind::body_len_min);
            let len = prop_oneof![3 => len_min..len_min + 80, 1 => 0..1100_usize];
            (Just(kind), len.prop_flat_map(|len| vec(any::<u8>(), len)))
        }),
        payload_len in prop_oneof![Just(0_u32), any::<u32>()],
    ) {
        let body_len = u32::try_from(body.len()).expect("small");
        let is_data = kind == Kind::Data.to_wire();
        let body_len = if is_data { body_len.saturating_add(payload_len) } else { body_len };
        let header = FrameHeader { kind, flags: 0, body_len };
        let part = &body[..body.len().min(header.message_len())];
        if let Ok(message) = Message::decode(&header, part) {
            let frame = encode(&message, header.payload_len());
            prop_assert_eq!(&frame[..FRAME_HEADER_LEN], &header.encode()[..]);
            prop_assert_eq!(&frame[FRAME_HEADER_LEN..], part);
        }
    }

    /// Corrupting any body byte of a valid message gives an error or another message whose
    /// encoding is exactly the corrupted bytes; never a panic, never a silent reinterpretation.
    #[test]
    fn corrupted_bodies_are_rejected_or_canonical(
        message in arb_message(),
        position in any::<prop::sample::Index>(),
        mask in 1..=255_u8,
    ) {
        let frame = encode(&message, 0);
        let (header, body) = split(&frame);
        prop_assume!(!body.is_empty());
        let mut corrupted = body.to_vec();
        corrupted[position.index(body.len())] ^= mask;
        if let Ok(decoded) = Message::decode(&header, &corrupted) {
            prop_assert_ne!(&decoded, &message);
            let again = encode(&decoded, 0);
            prop_assert_eq!(&again[FRAME_HEADER_LEN..], corrupted.as_slice());
        }
    }
}
