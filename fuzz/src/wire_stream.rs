//! Fuzz target `wire_stream`: the replication receive path, [`wire::decode_frame`] cutting
//! frames off the front of a buffer exactly as a peer socket reader does.
//!
//! Input: one mode byte, then the bytes received. Mode bit 0 set: before each decode the
//! harness rewrites the header CRC of the frame at the front, so the fuzzer gets past the CRC
//! and explores the header fields and bodies.
//!
//! Properties: decoding never panics; a decoded frame used no more bytes than it had, its
//! message has the header's kind, its message part is within the kind's bound (and within
//! `MESSAGE_LEN_MAX` for every kind without payload), its payload length is 0 for kinds
//! without payload; re-encoding the message with the header's payload length gives back
//! exactly the bytes consumed (decoding is canonical); `Ok(None)` only while the frame at the
//! front is incomplete.

use wire::{decode_frame, FrameHeader, Kind, FRAME_HEADER_LEN, MESSAGE_LEN_MAX};

/// Frames decoded per input, to bound the work.
const FRAME_COUNT_MAX: usize = 512;
/// Header bytes the CRC covers.
const HEADER_CRC_COVERED_LEN: usize = 12;

/// The target's body.
pub fn run(data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let mut buf = stream.to_vec();
    let mut at = 0;
    for _ in 0..FRAME_COUNT_MAX {
        let Some(front) = buf.get_mut(at..) else {
            return;
        };
        if mode & 1 == 1 {
            fix_header_crc(front);
        }
        let front: &[u8] = front;
        let frame = match decode_frame(front) {
            Ok(Some(frame)) => frame,
            Ok(None) => return check_incomplete(front),
            Err(error) => {
                let _ = error.to_string();
                return;
            }
        };
        assert!(
            frame.consumed <= front.len(),
            "a frame uses only what it has"
        );
        let header = frame.header;
        let kind = frame.message.kind();
        assert_eq!(
            kind.to_wire(),
            header.kind,
            "the message has the header's kind"
        );
        assert_eq!(frame.consumed, FRAME_HEADER_LEN + header.message_len());
        assert!(header.message_len() <= kind.message_len_max());
        if !kind.has_payload() {
            assert_eq!(header.payload_len(), 0);
            assert!(header.message_len() <= MESSAGE_LEN_MAX);
        }
        let mut encoded = Vec::new();
        let result = frame.message.encode(header.payload_len(), &mut encoded);
        assert!(result.is_ok(), "a decoded message encodes: {result:?}");
        assert_eq!(
            encoded.as_slice(),
            front.get(..frame.consumed).unwrap_or_default(),
            "decoding is canonical"
        );
        let payload = usize::try_from(header.payload_len()).unwrap_or(usize::MAX);
        at = at.saturating_add(frame.consumed).saturating_add(payload);
    }
}

/// `Ok(None)` means the header or the message part has not fully arrived.
fn check_incomplete(front: &[u8]) {
    let Some(header_bytes) = front.first_chunk::<FRAME_HEADER_LEN>() else {
        return;
    };
    let header = FrameHeader::decode(header_bytes);
    assert!(header.is_ok(), "an incomplete frame has a valid header");
    if let Ok(header) = header {
        assert!(front.len() < FRAME_HEADER_LEN + header.message_len());
        assert!(Kind::from_wire(header.kind).is_ok());
    }
}

/// Rewrites bytes 12..16 of `front` with the CRC-32C of bytes 0..12, if there are 16 bytes.
fn fix_header_crc(front: &mut [u8]) {
    let Some(header) = front.first_chunk_mut::<FRAME_HEADER_LEN>() else {
        return;
    };
    let (covered, crc) = header.split_at_mut(HEADER_CRC_COVERED_LEN);
    crc.copy_from_slice(&crc32c::crc32c(covered).to_be_bytes());
}
