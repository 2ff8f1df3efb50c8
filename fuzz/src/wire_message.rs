//! Fuzz target `wire_message`: every message body decoder of the replication protocol, and
//! the handshake checks run on a decoded `Hello`.
//!
//! Input: a kind index (into [`Kind::ALL`]), a payload length `u32` (used by `Data` and
//! `ResyncReply` and `ReadReply` only), then the message part of the body. The harness builds a
//! valid frame header for it, so every input reaches [`Message::decode`] of a real kind.
//!
//! Properties: decoding never panics; a decoded message re-encodes to exactly the header and
//! body it came from; a `Hello` passes [`check_hello`] against the expectation that mirrors it
//! (unless its version range is empty or it lists a volume twice) with the peer's highest
//! version, fails against a different resource, and every handshake error makes a `Refuse`
//! that encodes.

use std::collections::BTreeMap;

use wire::{
    check_hello, FrameHeader, HandshakeError, Hello, HelloExpect, Kind, Message, BODY_LEN_MAX,
    FRAME_HEADER_LEN,
};

use crate::input::Input;

/// The target's body.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let kinds = Kind::ALL;
    let kind = kinds
        .get(usize::from(input.u8()) % kinds.len())
        .copied()
        .unwrap_or(Kind::Ping);
    let payload_len = if kind.has_payload() {
        input.u32() % (BODY_LEN_MAX / 2)
    } else {
        0
    };
    let body = input.rest();
    let Some(body_len) = u32::try_from(body.len())
        .ok()
        .and_then(|len| len.checked_add(payload_len))
    else {
        return;
    };
    let header = FrameHeader {
        kind: kind.to_wire(),
        flags: 0,
        body_len,
    };
    if header.check().is_err() {
        return;
    }
    let message = match Message::decode(&header, body) {
        Ok(message) => message,
        Err(error) => {
            let _ = error.to_string();
            return;
        }
    };
    let mut encoded = Vec::new();
    let result = message.encode(payload_len, &mut encoded);
    assert!(result.is_ok(), "a decoded message encodes: {result:?}");
    assert_eq!(encoded.get(..FRAME_HEADER_LEN), Some(&header.encode()[..]));
    assert_eq!(
        encoded.get(FRAME_HEADER_LEN..),
        Some(body),
        "decoding is canonical"
    );
    if let Message::Hello(hello) = &message {
        check_hello_properties(hello);
    }
}

/// The expectation that mirrors `hello`: what its sender's peer would have configured.
fn mirror(hello: &Hello) -> HelloExpect {
    HelloExpect {
        version_min: hello.version_min.min(hello.version_max),
        version_max: hello.version_max,
        resource: hello.resource.clone(),
        local_node: hello.to_node,
        peer_node: hello.from_node,
        volumes: hello
            .volumes
            .iter()
            .map(|volume| (volume.number, volume.size_bytes))
            .collect::<BTreeMap<u16, u64>>(),
        auth_required: hello.auth_required,
    }
}

fn check_hello_properties(hello: &Hello) {
    let expect = mirror(hello);
    let duplicate = expect.volumes.len() != hello.volumes.len();
    let verdict = check_hello(&expect, hello);
    match &verdict {
        Ok(version) => {
            assert!(!duplicate, "a duplicate volume is refused");
            assert_eq!(
                version.version, hello.version_max,
                "the highest common version"
            );
        }
        Err(HandshakeError::EmptyVersionRange { .. }) => {
            assert!(hello.version_min > hello.version_max);
        }
        Err(HandshakeError::DuplicateVolume { .. }) => assert!(duplicate),
        Err(other) => panic!("the mirrored expectation refuses its own Hello: {other}"),
    }
    if verdict.is_ok() {
        let mut other = expect.clone();
        other.resource.push('x');
        let refused = check_hello(&other, hello);
        assert!(
            matches!(refused, Err(HandshakeError::ResourceMismatch { .. })),
            "another resource is refused: {refused:?}"
        );
    }
    if let Err(error) = verdict {
        let mut out = Vec::new();
        let result = error.refuse().encode(0, &mut out);
        assert!(result.is_ok(), "a refusal encodes: {result:?}");
    }
}
