//! Integration test of the wire crate through its public API only: a sender encodes a stream of
//! frames (data frames with real payloads among them), the stream arrives in arbitrary chunks,
//! and a receiver built the way the daemon's socket readers are built recovers every message
//! and every payload byte, in order.

use proptest::collection::vec;
use proptest::prelude::*;
use wire::{
    decode_frame, DataHeader, Message, RangeHeader, ResyncReplyHeader, WireError, DATA_FLAG_FUA,
};

/// One item the sender puts on the wire: a message and, for data, its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    message: Message,
    payload: Vec<u8>,
}

fn arb_sent() -> impl Strategy<Value = Sent> {
    let range = (
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
        });
    let message = prop_oneof![
        (
            any::<u64>(),
            any::<u64>(),
            any::<u16>(),
            any::<bool>(),
            any::<u64>()
        )
            .prop_map(|(seq, epoch, volume, fua, offset)| {
                let flags = if fua { DATA_FLAG_FUA } else { 0 };
                Message::Data(DataHeader {
                    seq,
                    epoch,
                    volume,
                    flags,
                    offset,
                })
            }),
        (any::<u64>(), any::<u16>(), any::<u64>()).prop_map(|(id, volume, offset)| {
            Message::ResyncReply(ResyncReplyHeader { id, volume, offset })
        }),
        (any::<u64>(), any::<u16>(), any::<bool>())
            .prop_map(|(id, volume, ok)| Message::ResyncAck { id, volume, ok }),
        range.clone().prop_map(Message::Trim),
        range.prop_map(Message::WriteZeroes),
        (any::<u64>(), any::<bool>()).prop_map(|(epoch, flush)| Message::Barrier { epoch, flush }),
        any::<u64>().prop_map(|seq| Message::WriteAck { seq }),
        Just(Message::Ping),
        "\\PC{0,40}".prop_map(|reason| Message::Disconnect { reason }),
    ];
    (message, vec(any::<u8>(), 0..600)).prop_map(|(message, payload)| {
        let payload = if message.kind().has_payload() {
            payload
        } else {
            Vec::new()
        };
        Sent { message, payload }
    })
}

/// Encodes every item, payloads included, into one byte stream.
fn send(items: &[Sent]) -> Vec<u8> {
    let mut stream = Vec::new();
    for item in items {
        let payload_len = u32::try_from(item.payload.len()).expect("small payload");
        item.message
            .encode(payload_len, &mut stream)
            .expect("valid message");
        stream.extend_from_slice(&item.payload);
    }
    stream
}

/// A receiver that buffers what arrives and takes whole frames (and payloads) off the front.
#[derive(Default)]
struct Receiver {
    buffer: Vec<u8>,
    /// A data frame whose payload has not fully arrived yet.
    pending: Option<(Message, usize)>,
    received: Vec<Sent>,
}

impl Receiver {
    fn arrive(&mut self, chunk: &[u8]) -> Result<(), WireError> {
        self.buffer.extend_from_slice(chunk);
        loop {
            if let Some((message, payload_len)) = self.pending.take() {
                if self.buffer.len() < payload_len {
                    self.pending = Some((message, payload_len));
                    return Ok(());
                }
                let payload = self.buffer.drain(..payload_len).collect();
                self.received.push(Sent { message, payload });
                continue;
            }
            let Some(frame) = decode_frame(&self.buffer)? else {
                return Ok(());
            };
            self.buffer.drain(..frame.consumed);
            let payload_len = usize::try_from(frame.header.payload_len()).expect("fits");
            self.pending = Some((frame.message, payload_len));
        }
    }
}

proptest! {
    #[test]
    fn stream_survives_arbitrary_chunking(
        items in vec(arb_sent(), 0..20),
        cuts in vec(1..200_usize, 0..64),
    ) {
        let stream = send(&items);
        let mut receiver = Receiver::default();
        let mut rest = stream.as_slice();
        for cut in cuts {
            let (chunk, tail) = rest.split_at(cut.min(rest.len()));
            receiver.arrive(chunk)?;
            rest = tail;
        }
        receiver.arrive(rest)?;
        prop_assert!(receiver.buffer.is_empty());
        prop_assert!(receiver.pending.is_none());
        prop_assert_eq!(receiver.received, items);
    }
}

#[test]
fn desynchronised_stream_is_an_error_not_a_guess() {
    let items = [
        Sent {
            message: Message::Ping,
            payload: Vec::new(),
        },
        Sent {
            message: Message::WriteAck { seq: 1 },
            payload: Vec::new(),
        },
    ];
    let stream = send(&items);
    // Starting one byte late, the receiver sees no magic and must say so.
    let mut receiver = Receiver::default();
    assert!(matches!(
        receiver.arrive(&stream[1..]),
        Err(WireError::BadMagic { .. })
    ));
}
