//! Tests of the frame header and the streaming decoder: round trips, the pinned byte layout,
//! every header error, corruption detection, and incremental arrival of frames.

use proptest::prelude::*;

use crate::test_support::{arb_kind_number, arb_message_with_payload};
use crate::{
    decode_frame, widen, FrameHeader, Kind, Message, WireError, BODY_LEN_MAX, DATA_HEADER_LEN,
    FRAME_HEADER_LEN, FRAME_MAGIC, MESSAGE_LEN_MAX, RESYNC_REPLY_HEADER_LEN,
};

/// A header that passes every check: a known kind with a body length within its bounds.
fn arb_valid_header() -> impl Strategy<Value = FrameHeader> {
    (
        proptest::sample::select(Kind::ALL.to_vec()),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(kind, index)| {
            let span = kind.body_len_max() - kind.body_len_min() + 1;
            let body_len = kind.body_len_min() + index.index(span);
            FrameHeader {
                kind: kind.to_wire(),
                flags: 0,
                body_len: u32::try_from(body_len).expect("bounded by BODY_LEN_MAX"),
            }
        })
}

/// Header bytes with a correct magic and CRC over arbitrary kind, flags and length.
fn sealed(kind: u16, flags: u16, body_len: u32) -> [u8; FRAME_HEADER_LEN] {
    FrameHeader {
        kind,
        flags,
        body_len,
    }
    .encode()
}

#[test]
fn crc_is_crc32c_castagnoli() {
    // The standard check value of CRC-32C, so the header CRC matches other implementations.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn header_layout_is_pinned() {
    let bytes = FrameHeader {
        kind: 0x0202,
        flags: 0,
        body_len: 8,
    }
    .encode();
    assert_eq!(
        &bytes[..12],
        &[b'T', b'N', b'D', b'M', 0x02, 0x02, 0, 0, 0, 0, 0, 8]
    );
    assert_eq!(bytes[12..], crc32c::crc32c(&bytes[..12]).to_be_bytes());
    assert_eq!(
        u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
        FRAME_MAGIC
    );
}

/// Decodes `bytes` as a header and compares with `expected`.
#[track_caller]
fn check(bytes: [u8; FRAME_HEADER_LEN], expected: Result<FrameHeader, WireError>) {
    assert_eq!(FrameHeader::decode(&bytes), expected);
}

#[test]
fn header_magic_and_crc_errors() {
    let ping = Kind::Ping.to_wire();
    check(
        sealed(ping, 0, 0),
        Ok(FrameHeader {
            kind: ping,
            flags: 0,
            body_len: 0,
        }),
    );
    let mut wrong_magic = sealed(ping, 0, 0);
    wrong_magic[..4].copy_from_slice(b"DRBD");
    check(
        wrong_magic,
        Err(WireError::BadMagic {
            found: u32::from_be_bytes(*b"DRBD"),
        }),
    );
    check([0; FRAME_HEADER_LEN], Err(WireError::BadMagic { found: 0 }));
    let mut wrong_crc = sealed(ping, 0, 0);
    wrong_crc[15] ^= 1;
    let computed = crc32c::crc32c(&wrong_crc[..12]);
    check(
        wrong_crc,
        Err(WireError::HeaderCrcMismatch {
            stored: computed ^ 1,
            computed,
        }),
    );
}

#[test]
fn header_field_errors() {
    let ping = Kind::Ping.to_wire();
    let data = Kind::Data.to_wire();
    check(
        sealed(ping, 0x8000, 0),
        Err(WireError::UnsupportedFlags { flags: 0x8000 }),
    );
    check(sealed(0, 0, 0), Err(WireError::UnknownKind { kind: 0 }));
    check(
        sealed(0x030F, 0, 0),
        Err(WireError::UnknownKind { kind: 0x030F }),
    );
    check(
        sealed(0x0700, 0, 0),
        Err(WireError::UnknownKind { kind: 0x0700 }),
    );
    check(
        sealed(data, 0, BODY_LEN_MAX + 1),
        Err(WireError::BodyTooLong {
            kind: data,
            body_len: u64::from(BODY_LEN_MAX) + 1,
            max: widen(BODY_LEN_MAX),
        }),
    );
    check(
        sealed(data, 0, 27),
        Err(WireError::BodyTooShort {
            kind: data,
            body_len: 27,
            min: DATA_HEADER_LEN,
        }),
    );
    // Non-data kinds are bounded far below the global maximum, before any body is read.
    let hello = Kind::Hello.to_wire();
    check(
        sealed(hello, 0, 956),
        Err(WireError::BodyTooLong {
            kind: hello,
            body_len: 956,
            max: 955,
        }),
    );
    check(
        sealed(ping, 0, 1),
        Err(WireError::BodyTooLong {
            kind: ping,
            body_len: 1,
            max: 0,
        }),
    );
}

#[test]
fn payload_and_message_lengths_split_the_body() {
    let data = Kind::Data.to_wire();
    let cases = [
        (data, 28 + 4096, 4096, DATA_HEADER_LEN),
        (data, 28, 0, DATA_HEADER_LEN),
        // An unchecked, too-short data header must not underflow.
        (data, 3, 0, 3),
        (Kind::Hello.to_wire(), 100, 0, 100),
        (Kind::Ping.to_wire(), 0, 0, 0),
        (
            Kind::ResyncReply.to_wire(),
            18 + 4096,
            4096,
            RESYNC_REPLY_HEADER_LEN,
        ),
        (Kind::ResyncReply.to_wire(), 18, 0, RESYNC_REPLY_HEADER_LEN),
        (Kind::ResyncReply.to_wire(), 2, 0, 2),
        (Kind::BitmapChunk.to_wire(), 4000, 0, 4000),
        // An unknown kind has no payload.
        (0x0500, 4000, 0, 4000),
    ];
    for (kind, body_len, payload_len, message_len) in cases {
        let header = FrameHeader {
            kind,
            flags: 0,
            body_len,
        };
        assert_eq!(header.payload_len(), payload_len, "{header:?}");
        assert_eq!(header.message_len(), message_len, "{header:?}");
    }
}

#[test]
fn decode_frame_waits_for_header_and_message_part() {
    let mut frame = Vec::new();
    Message::NegAck { seq: 9, errno: 5 }
        .encode(0, &mut frame)
        .expect("encodes");
    for end in 0..frame.len() {
        assert_eq!(
            decode_frame(&frame[..end]),
            Ok(None),
            "prefix of {end} bytes"
        );
    }
    let complete = decode_frame(&frame).expect("valid").expect("complete");
    assert_eq!(complete.message, Message::NegAck { seq: 9, errno: 5 });
    assert_eq!(complete.consumed, frame.len());
}

#[test]
fn decode_frame_leaves_the_data_payload_in_place() {
    let mut stream = Vec::new();
    let data = crate::DataHeader {
        seq: 1,
        epoch: 1,
        volume: 0,
        flags: 0,
        offset: 512,
    };
    Message::Data(data).encode(4, &mut stream).expect("encodes");
    stream.extend_from_slice(b"WXYZ");
    let frame = decode_frame(&stream).expect("valid").expect("complete");
    assert_eq!(frame.message, Message::Data(data));
    assert_eq!(frame.consumed, FRAME_HEADER_LEN + DATA_HEADER_LEN);
    assert_eq!(frame.header.payload_len(), 4);
    assert_eq!(&stream[frame.consumed..], b"WXYZ");
}

#[test]
fn decode_frame_rejects_a_bad_header_without_waiting_for_its_body() {
    // A header claiming a huge Hello is refused as soon as its 16 bytes are in.
    let bytes = sealed(Kind::Hello.to_wire(), 0, 1 << 20);
    assert!(matches!(
        decode_frame(&bytes),
        Err(WireError::BodyTooLong { .. })
    ));
    assert!(Kind::ALL
        .iter()
        .all(|kind| kind.message_len_max() <= MESSAGE_LEN_MAX));
}

proptest! {
    /// Valid headers round-trip.
    #[test]
    fn header_round_trip(header in arb_valid_header()) {
        prop_assert_eq!(FrameHeader::decode(&header.encode()), Ok(header));
    }

    /// Flipping any bits of any single header byte is always an error: the CRC covers the
    /// first 12 bytes and a flip in the CRC itself no longer matches them.
    #[test]
    fn any_corrupted_header_byte_is_an_error(
        header in arb_valid_header(),
        position in 0..FRAME_HEADER_LEN,
        mask in 1..=255_u8,
    ) {
        let mut bytes = header.encode();
        bytes[position] ^= mask;
        let decoded = FrameHeader::decode(&bytes);
        prop_assert!(decoded.is_err(), "corruption at {} decoded as {:?}", position, decoded);
    }

    /// Arbitrary header bytes never panic, and a header that decodes is exactly the bytes it
    /// came from, so no corruption can produce a different valid header silently.
    #[test]
    fn arbitrary_header_bytes_are_total_and_canonical(bytes in any::<[u8; FRAME_HEADER_LEN]>()) {
        if let Ok(header) = FrameHeader::decode(&bytes) {
            prop_assert_eq!(header.encode(), bytes);
        }
    }

    /// With magic and CRC made correct, the field checks alone decide, and accept only
    /// headers within the kind's bounds.
    #[test]
    fn sealed_headers_pass_only_field_checks(
        kind in arb_kind_number(),
        flags in prop_oneof![Just(0_u16), any::<u16>()],
        body_len in prop_oneof![0..2048_u32, any::<u32>()],
    ) {
        let decoded = FrameHeader::decode(&sealed(kind, flags, body_len));
        prop_assert_eq!(decoded.is_ok(), FrameHeader { kind, flags, body_len }.check().is_ok());
        if let Ok(header) = decoded {
            let known = Kind::from_wire(kind).expect("known kind");
            prop_assert_eq!(header, FrameHeader { kind, flags: 0, body_len });
            prop_assert!(widen(body_len) >= known.body_len_min());
            prop_assert!(widen(body_len) <= known.body_len_max());
        }
    }

    /// The streaming decoder never panics on arbitrary input, however it is cut.
    #[test]
    fn decode_frame_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = decode_frame(&bytes);
    }

    /// A valid frame followed by garbage decodes to the frame, and consumes only its bytes.
    #[test]
    fn decode_frame_consumes_exactly_one_frame(
        (message, payload_len) in arb_message_with_payload(),
        tail in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut stream = Vec::new();
        message.encode(payload_len, &mut stream)?;
        let frame_len = stream.len();
        stream.extend_from_slice(&tail);
        let frame = decode_frame(&stream)?.expect("complete");
        prop_assert_eq!(frame.consumed, frame_len);
        prop_assert_eq!(frame.message, message);
    }
}
