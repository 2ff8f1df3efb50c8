//! Tests of the online-verify bodies: the exact byte layout of each kind, every decode and
//! encode error, and round trips of both statuses with digests up to the exact maximum.

use proptest::prelude::*;

use crate::test_support::arb_verify_message;
use crate::{
    FrameHeader, Kind, Message, SocketKind, VerifyOutcome, VerifyReply, VerifyRequest, WireError,
    FRAME_HEADER_LEN, MESSAGE_LEN_MAX, VERIFY_DIGESTS_LEN_MAX, VERIFY_DONE_LEN,
    VERIFY_REPLY_HEADER_LEN, VERIFY_REQUEST_LEN,
};

fn encode(message: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(0, &mut out).expect("valid message encodes");
    out
}

fn digests(digests: Vec<u8>) -> VerifyOutcome {
    VerifyOutcome::Digests {
        written_blocks: 0,
        digests,
    }
}

fn reply(outcome: VerifyOutcome) -> Message {
    Message::VerifyReply(VerifyReply {
        id: 0x0102,
        volume: 3,
        offset: 0x4000,
        length: 0x2000,
        outcome,
    })
}

/// The fixed part every reply sample starts with: id, volume, offset, length.
fn reply_fields() -> Vec<u8> {
    let mut bytes = 0x0102_u64.to_be_bytes().to_vec();
    bytes.extend_from_slice(&3_u16.to_be_bytes());
    bytes.extend_from_slice(&0x4000_u64.to_be_bytes());
    bytes.extend_from_slice(&0x2000_u32.to_be_bytes());
    bytes
}

#[track_caller]
fn check_decode(kind: Kind, body: &[u8], expected: Result<Message, WireError>) {
    let body_len = u32::try_from(body.len()).expect("small");
    let header = FrameHeader {
        kind: kind.to_wire(),
        flags: 0,
        body_len,
    };
    assert_eq!(Message::decode(&header, body), expected);
}

#[test]
fn layouts_are_pinned() {
    let request = Message::VerifyRequest(VerifyRequest {
        id: 0x0102,
        volume: 3,
        offset: 0x4000,
        length: 0x2000,
    });
    let frame = encode(&request);
    assert_eq!(&frame[4..6], &[0x03, 0x10]);
    assert_eq!(&frame[FRAME_HEADER_LEN..], reply_fields().as_slice());
    assert_eq!(frame.len(), FRAME_HEADER_LEN + VERIFY_REQUEST_LEN);

    let cases = [
        (
            VerifyOutcome::Digests {
                written_blocks: 0x8000_0005,
                digests: vec![0xAA, 0xBB],
            },
            vec![0, 0x80, 0, 0, 5, 0xAA, 0xBB],
        ),
        (VerifyOutcome::ReadFailed, vec![1]),
    ];
    for (outcome, tail) in cases {
        let frame = encode(&reply(outcome.clone()));
        assert_eq!(&frame[4..6], &[0x03, 0x11]);
        let mut expected = reply_fields();
        expected.extend_from_slice(&tail);
        assert_eq!(
            &frame[FRAME_HEADER_LEN..],
            expected.as_slice(),
            "{outcome:?}"
        );
    }

    let done = encode(&Message::VerifyDone {
        volume: 1,
        oos_bytes: 0x3000,
    });
    assert_eq!(&done[4..6], &[0x03, 0x12]);
    let mut expected = vec![0, 1];
    expected.extend_from_slice(&0x3000_u64.to_be_bytes());
    assert_eq!(&done[FRAME_HEADER_LEN..], expected.as_slice());
    assert_eq!(expected.len(), VERIFY_DONE_LEN);
}

#[test]
fn verify_kinds_use_the_data_socket_and_fit_a_message() {
    for kind in [Kind::VerifyRequest, Kind::VerifyReply, Kind::VerifyDone] {
        assert!(kind.allowed_on(SocketKind::Data), "{kind:?}");
        assert!(!kind.allowed_on(SocketKind::Control), "{kind:?}");
        assert!(!kind.has_payload(), "{kind:?}");
    }
    assert_eq!(Kind::VerifyReply.body_len_max(), MESSAGE_LEN_MAX);
    assert_eq!(
        VERIFY_REPLY_HEADER_LEN + 4 + VERIFY_DIGESTS_LEN_MAX,
        MESSAGE_LEN_MAX
    );
    // 32 blocks of SHA-512 digests: a 128 KiB request of 4 KiB blocks.
    let frame = encode(&reply(digests(vec![1; 32 * 64])));
    assert_eq!(
        frame.len(),
        FRAME_HEADER_LEN + VERIFY_REPLY_HEADER_LEN + 4 + 2048
    );
}

#[test]
fn decode_errors() {
    let with = |tail: &[u8]| {
        let mut body = reply_fields();
        body.extend_from_slice(tail);
        body
    };
    let kind = Kind::VerifyReply.to_wire();
    let cases: [(Vec<u8>, WireError); 6] = [
        (with(&[2]), WireError::InvalidVerifyStatus { value: 2 }),
        (
            with(&[0, 0, 0, 0, 0]),
            WireError::VerifyDigestsLength {
                len: 0,
                max: VERIFY_DIGESTS_LEN_MAX,
            },
        ),
        (
            with(&[0, 0, 0]),
            WireError::Truncated {
                field: "verify_reply.written_blocks",
            },
        ),
        (with(&[1, 9]), WireError::TrailingBytes { kind, count: 1 }),
        (
            with(&[1, 9, 9]),
            WireError::TrailingBytes { kind, count: 2 },
        ),
        (
            reply_fields(),
            WireError::BodyTooShort {
                kind,
                body_len: 22,
                min: VERIFY_REPLY_HEADER_LEN,
            },
        ),
    ];
    for (body, error) in cases {
        check_decode(Kind::VerifyReply, &body, Err(error));
    }
    let too_long = with(&vec![0; 4 + VERIFY_DIGESTS_LEN_MAX + 2]);
    check_decode(
        Kind::VerifyReply,
        &too_long,
        Err(WireError::BodyTooLong {
            kind,
            body_len: u64::try_from(too_long.len()).expect("small"),
            max: MESSAGE_LEN_MAX,
        }),
    );
    check_decode(
        Kind::VerifyReply,
        &with(&[0, 0, 0, 0, 0, 5]),
        Ok(reply(digests(vec![5]))),
    );
    check_decode(
        Kind::VerifyDone,
        &[0; 9],
        Err(WireError::BodyTooShort {
            kind: Kind::VerifyDone.to_wire(),
            body_len: 9,
            min: VERIFY_DONE_LEN,
        }),
    );
}

#[test]
fn encode_refuses_what_decode_refuses() {
    for len in [0, VERIFY_DIGESTS_LEN_MAX + 1] {
        let mut out = vec![0xEE; 3];
        let message = reply(digests(vec![0; len]));
        assert_eq!(
            message.encode(0, &mut out),
            Err(WireError::VerifyDigestsLength {
                len,
                max: VERIFY_DIGESTS_LEN_MAX,
            })
        );
        assert_eq!(out, vec![0xEE; 3], "the buffer is left as it was");
    }
    let mut out = Vec::new();
    assert_eq!(
        reply(VerifyOutcome::ReadFailed).encode(4, &mut out),
        Err(WireError::PayloadNotAllowed {
            kind: Kind::VerifyReply.to_wire(),
            payload_len: 4,
        })
    );
}

proptest! {
    /// Every verify message survives encode and decode, digests up to the exact maximum.
    #[test]
    fn round_trip(message in arb_verify_message()) {
        let frame = encode(&message);
        let streamed = crate::decode_frame(&frame)?.expect("complete frame");
        prop_assert_eq!(streamed.consumed, frame.len());
        prop_assert!(frame.len() <= FRAME_HEADER_LEN + MESSAGE_LEN_MAX);
        prop_assert_eq!(streamed.message, message);
    }
}
