//! Tests of the checksum-based resync kinds: byte layout, decode and encode errors, and round
//! trips with digests up to the exact maximum.

use proptest::prelude::*;

use crate::test_support::arb_csum_digests;
use crate::{
    CsumRequest, FrameHeader, Kind, Message, SocketKind, WireError, CSUM_DIGESTS_LEN_MAX,
    CSUM_REQUEST_HEADER_LEN, FRAME_HEADER_LEN, MESSAGE_LEN_MAX, RESYNC_IN_SYNC_LEN,
};

fn encode(message: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(0, &mut out).expect("valid message encodes");
    out
}

fn request(digests: Vec<u8>) -> Message {
    Message::CsumRequest(CsumRequest {
        id: 0x0102,
        volume: 3,
        offset: 0x4000,
        length: 0x2000,
        digests,
    })
}

#[track_caller]
fn check_decode(kind: Kind, body: &[u8], expected: Result<Message, WireError>) {
    let header = FrameHeader {
        kind: kind.to_wire(),
        flags: 0,
        body_len: u32::try_from(body.len()).expect("small"),
    };
    assert_eq!(Message::decode(&header, body), expected);
}

fn request_fields() -> Vec<u8> {
    let mut bytes = 0x0102_u64.to_be_bytes().to_vec();
    bytes.extend_from_slice(&3_u16.to_be_bytes());
    bytes.extend_from_slice(&0x4000_u64.to_be_bytes());
    bytes.extend_from_slice(&0x2000_u32.to_be_bytes());
    bytes
}

#[test]
fn layouts_are_pinned() {
    let frame = encode(&request(vec![0xAA, 0xBB]));
    assert_eq!(&frame[4..6], &[0x03, 0x05]);
    let mut expected = request_fields();
    expected.extend_from_slice(&[0xAA, 0xBB]);
    assert_eq!(&frame[FRAME_HEADER_LEN..], expected.as_slice());
    assert_eq!(frame.len(), FRAME_HEADER_LEN + CSUM_REQUEST_HEADER_LEN + 2);

    let frame = encode(&Message::ResyncInSync { id: 7, volume: 2 });
    assert_eq!(&frame[4..6], &[0x03, 0x06]);
    let mut expected = 7_u64.to_be_bytes().to_vec();
    expected.extend_from_slice(&[0, 2]);
    assert_eq!(&frame[FRAME_HEADER_LEN..], expected.as_slice());
    assert_eq!(expected.len(), RESYNC_IN_SYNC_LEN);

    for kind in [Kind::CsumRequest, Kind::ResyncInSync] {
        assert!(kind.allowed_on(SocketKind::Data), "{kind:?}");
        assert!(!kind.allowed_on(SocketKind::Control), "{kind:?}");
    }
    assert_eq!(
        CSUM_REQUEST_HEADER_LEN + CSUM_DIGESTS_LEN_MAX,
        MESSAGE_LEN_MAX
    );
}

#[test]
fn decode_and_encode_errors() {
    let kind = Kind::CsumRequest.to_wire();
    check_decode(
        Kind::CsumRequest,
        &request_fields(),
        Err(WireError::BodyTooShort {
            kind,
            body_len: 22,
            min: CSUM_REQUEST_HEADER_LEN + 1,
        }),
    );
    let mut too_long = request_fields();
    too_long.resize(MESSAGE_LEN_MAX + 1, 0);
    check_decode(
        Kind::CsumRequest,
        &too_long,
        Err(WireError::BodyTooLong {
            kind,
            body_len: u64::try_from(MESSAGE_LEN_MAX + 1).expect("small"),
            max: MESSAGE_LEN_MAX,
        }),
    );
    check_decode(
        Kind::ResyncInSync,
        &[0; 11],
        Err(WireError::BodyTooLong {
            kind: Kind::ResyncInSync.to_wire(),
            body_len: 11,
            max: RESYNC_IN_SYNC_LEN,
        }),
    );
    for len in [0, CSUM_DIGESTS_LEN_MAX + 1] {
        let mut out = vec![0xEE; 2];
        assert_eq!(
            request(vec![0; len]).encode(0, &mut out),
            Err(WireError::CsumDigestsLength {
                len,
                max: CSUM_DIGESTS_LEN_MAX,
            })
        );
        assert_eq!(out, vec![0xEE; 2]);
    }
}

proptest! {
    /// A `CsumRequest` survives encode and decode with digests up to the exact maximum.
    #[test]
    fn round_trip(digests in arb_csum_digests(), id in any::<u64>()) {
        let request = CsumRequest { id, volume: 1, offset: 0, length: 4096, digests };
        let message = Message::CsumRequest(request);
        let frame = encode(&message);
        let decoded = crate::decode_frame(&frame)?.expect("complete frame");
        prop_assert_eq!(decoded.consumed, frame.len());
        prop_assert_eq!(decoded.message, message);
    }
}
