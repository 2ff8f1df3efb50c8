//! Tests of the handshake checks (a table through one `check` helper), the log/`Refuse`
//! sentences, version negotiation symmetry, and the authentication MAC input.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::{
    auth_mac_input, check_hello, truncate_text, HandshakeError, Hello, HelloExpect, HelloNonces,
    Message, NegotiatedVersion, SocketKind, VolumeInfo, AUTH_DOMAIN, STRING_LEN_MAX,
};

/// Node 1's expectation for its connection to node 2 on resource "r0", two volumes.
fn expect_at_node_1() -> HelloExpect {
    HelloExpect {
        version_min: 1,
        version_max: 3,
        resource: "r0".to_owned(),
        local_node: 1,
        peer_node: 2,
        volumes: BTreeMap::from([(0, 1 << 30), (1, 4096)]),
        auth_required: true,
    }
}

/// The `Hello` a correctly configured node 2 sends to node 1.
fn hello_from_node_2() -> Hello {
    let peer = HelloExpect {
        local_node: 2,
        peer_node: 1,
        ..expect_at_node_1()
    };
    peer.to_hello(
        SocketKind::Data,
        HelloNonces {
            session: [7; 16],
            challenge: [9; 32],
        },
    )
}

/// Applies `edit` to node 2's correct `Hello` and checks node 1's verdict.
#[track_caller]
fn check(edit: impl FnOnce(&mut Hello), expected: Result<NegotiatedVersion, HandshakeError>) {
    let mut theirs = hello_from_node_2();
    edit(&mut theirs);
    assert_eq!(check_hello(&expect_at_node_1(), &theirs), expected);
}

fn version(version: u16) -> Result<NegotiatedVersion, HandshakeError> {
    Ok(NegotiatedVersion { version })
}

#[test]
fn check_hello_versions() {
    check(|_| {}, version(3));
    check(|h| h.version_max = 2, version(2));
    check(|h| (h.version_min, h.version_max) = (3, 9), version(3));
    check(|h| (h.version_min, h.version_max) = (0, 1), version(1));
    check(
        |h| (h.version_min, h.version_max) = (4, 5),
        Err(HandshakeError::VersionMismatch {
            ours_min: 1,
            ours_max: 3,
            theirs_min: 4,
            theirs_max: 5,
        }),
    );
    check(
        |h| (h.version_min, h.version_max) = (2, 1),
        Err(HandshakeError::EmptyVersionRange { min: 2, max: 1 }),
    );
}

#[test]
fn check_hello_identity() {
    check(
        |h| h.resource = "r1".to_owned(),
        Err(HandshakeError::ResourceMismatch {
            ours: "r0".to_owned(),
            theirs: "r1".to_owned(),
        }),
    );
    check(
        |h| h.from_node = 3,
        Err(HandshakeError::WrongPeer {
            expected: 2,
            actual: 3,
        }),
    );
    // A node talking to itself through a loop: from and to are both us.
    check(
        |h| h.from_node = 1,
        Err(HandshakeError::WrongPeer {
            expected: 2,
            actual: 1,
        }),
    );
    check(
        |h| h.to_node = 0,
        Err(HandshakeError::NotAddressedToUs {
            local: 1,
            addressed: 0,
        }),
    );
    check(
        |h| h.auth_required = false,
        Err(HandshakeError::AuthMismatch {
            ours: true,
            theirs: false,
        }),
    );
}

#[test]
fn check_hello_volumes() {
    check(
        |h| {
            h.volumes.push(VolumeInfo {
                number: 0,
                size_bytes: 1 << 30,
            })
        },
        Err(HandshakeError::DuplicateVolume { volume: 0 }),
    );
    check(
        |h| h.volumes.retain(|v| v.number != 1),
        Err(HandshakeError::VolumeSetMismatch {
            missing: vec![1],
            unexpected: vec![],
        }),
    );
    check(
        |h| {
            h.volumes.push(VolumeInfo {
                number: 7,
                size_bytes: 1,
            })
        },
        Err(HandshakeError::VolumeSetMismatch {
            missing: vec![],
            unexpected: vec![7],
        }),
    );
    check(
        |h| h.volumes[1].number = 5,
        Err(HandshakeError::VolumeSetMismatch {
            missing: vec![1],
            unexpected: vec![5],
        }),
    );
    check(
        |h| h.volumes[1].size_bytes = 8192,
        Err(HandshakeError::VolumeSizeMismatch {
            volume: 1,
            ours_bytes: 4096,
            theirs_bytes: 8192,
        }),
    );
    // A diskless peer (`disk none;`) announces size 0, which matches any size.
    check(
        |h| h.volumes[1].size_bytes = crate::DISKLESS_VOLUME_BYTES,
        version(3),
    );
    // Volume order on the wire does not matter.
    check(|h| h.volumes.reverse(), version(3));
    // The socket kind and nonces are the caller's business, not the configuration check's.
    check(
        |h| (h.socket, h.session) = (SocketKind::Control, [0; 16]),
        version(3),
    );
}

#[test]
fn version_and_identity_errors_read_as_sentences() {
    let cases = [
        (
            HandshakeError::VersionMismatch {
                ours_min: 1,
                ours_max: 3,
                theirs_min: 4,
                theirs_max: 5,
            },
            "no common protocol version: we speak 1..=3, the peer speaks 4..=5",
        ),
        (
            HandshakeError::EmptyVersionRange { min: 2, max: 1 },
            "the peer announced an empty protocol version range 2..=1",
        ),
        (
            HandshakeError::ResourceMismatch {
                ours: "r0".to_owned(),
                theirs: "r\n1".to_owned(),
            },
            "the peer is configured for resource \"r\\n1\", but this connection is for \"r0\"",
        ),
        (
            HandshakeError::WrongPeer {
                expected: 2,
                actual: 3,
            },
            "the peer says it is node 3, but this connection is for node 2",
        ),
        (
            HandshakeError::NotAddressedToUs {
                local: 1,
                addressed: 0,
            },
            "the peer addressed node 0, but we are node 1",
        ),
    ];
    check_sentences(&cases);
}

#[test]
fn volume_and_auth_errors_read_as_sentences() {
    let cases = [
        (
            HandshakeError::AuthMismatch {
                ours: true,
                theirs: false,
            },
            "authentication settings differ: we use a shared secret, the peer does not",
        ),
        (
            HandshakeError::AuthMismatch {
                ours: false,
                theirs: true,
            },
            "authentication settings differ: we do not use a shared secret, the peer does",
        ),
        (
            HandshakeError::DuplicateVolume { volume: 4 },
            "the peer listed volume 4 more than once",
        ),
        (
            HandshakeError::VolumeSetMismatch {
                missing: vec![1, 2],
                unexpected: vec![9],
            },
            "the volume sets differ: the peer lacks volumes [1, 2] and has unknown volumes [9]",
        ),
        (
            HandshakeError::VolumeSizeMismatch {
                volume: 1,
                ours_bytes: 4096,
                theirs_bytes: 8192,
            },
            "volume 1 is 4096 bytes here but 8192 bytes on the peer",
        ),
    ];
    check_sentences(&cases);
}

/// Each error's `Display` must be exactly the given sentence.
#[track_caller]
fn check_sentences(cases: &[(HandshakeError, &str)]) {
    for (error, sentence) in cases {
        assert_eq!(error.to_string(), *sentence);
    }
}

#[test]
fn refuse_fits_the_wire_even_for_long_sentences() {
    let error = HandshakeError::VolumeSetMismatch {
        missing: (0..64).map(|n| 1000 + n).collect(),
        unexpected: (0..64).map(|n| 2000 + n).collect(),
    };
    assert!(error.to_string().len() > STRING_LEN_MAX);
    let refuse = error.refuse();
    let Message::Refuse { reason } = &refuse else {
        panic!("not a refuse: {refuse:?}")
    };
    assert_eq!(reason.len(), STRING_LEN_MAX);
    assert!(error.to_string().starts_with(reason.as_str()));
    let mut out = Vec::new();
    assert_eq!(refuse.encode(0, &mut out), Ok(()));
}

#[test]
fn truncate_text_cuts_at_character_boundaries() {
    assert_eq!(truncate_text("short"), "short");
    let accents = "é".repeat(200);
    let cut = truncate_text(&accents);
    assert_eq!(cut.len(), 254, "255 would split a two-byte character");
    assert!(accents.starts_with(&cut));
}

#[test]
fn to_hello_mirrors_the_expectation() {
    let nonces = HelloNonces {
        session: [1; 16],
        challenge: [2; 32],
    };
    let hello = expect_at_node_1().to_hello(SocketKind::Control, nonces);
    assert_eq!((hello.from_node, hello.to_node), (1, 2));
    assert_eq!(
        hello.volumes,
        vec![
            VolumeInfo {
                number: 0,
                size_bytes: 1 << 30
            },
            VolumeInfo {
                number: 1,
                size_bytes: 4096
            },
        ]
    );
    assert_eq!(
        (hello.session, hello.challenge),
        (nonces.session, nonces.challenge)
    );
    assert_eq!(hello.socket, SocketKind::Control);
}

#[test]
fn auth_mac_input_layout_is_pinned() {
    let input = auth_mac_input(&[0xCC; 32], 2, "r0");
    let mut expected = b"tandem-auth-v1\0".to_vec();
    expected.push(2);
    expected.extend_from_slice(&[0xCC; 32]);
    expected.extend_from_slice(b"r0");
    assert_eq!(input, expected);
    assert!(input.starts_with(AUTH_DOMAIN));
}

#[test]
fn reflected_challenge_gives_a_different_mac_input() {
    // Node 1 challenges node 2. An attacker bounces that challenge back to node 1 on a second
    // connection; node 1 answers as responder 1, which is not what node 1 expects from node 2.
    let challenge = [0x5A; 32];
    let expected_from_node_2 = auth_mac_input(&challenge, 2, "r0");
    let reflected_answer_of_node_1 = auth_mac_input(&challenge, 1, "r0");
    assert_ne!(expected_from_node_2, reflected_answer_of_node_1);
    assert_ne!(expected_from_node_2, auth_mac_input(&challenge, 2, "r1"));
}

proptest! {
    /// Both sides of a pair with overlapping ranges pick the same version, and it is the
    /// highest in both ranges.
    #[test]
    fn negotiation_is_symmetric(a in (0..8_u16, 0..8_u16), b in (0..8_u16, 0..8_u16)) {
        let ours = HelloExpect {
            version_min: a.0.min(a.1),
            version_max: a.0.max(a.1),
            ..expect_at_node_1()
        };
        let peer = HelloExpect {
            version_min: b.0.min(b.1),
            version_max: b.0.max(b.1),
            local_node: 2,
            peer_node: 1,
            ..expect_at_node_1()
        };
        let nonces = HelloNonces { session: [0; 16], challenge: [0; 32] };
        let at_ours = check_hello(&ours, &peer.to_hello(SocketKind::Data, nonces));
        let at_peer = check_hello(&peer, &ours.to_hello(SocketKind::Data, nonces));
        prop_assert_eq!(at_ours.is_ok(), at_peer.is_ok());
        if let (Ok(x), Ok(y)) = (at_ours, at_peer) {
            prop_assert_eq!(x, y);
            prop_assert_eq!(x.version, ours.version_max.min(peer.version_max));
            prop_assert!(x.version >= ours.version_min.max(peer.version_min));
        }
    }

    /// Distinct (challenge, responder, resource) triples give distinct MAC inputs.
    #[test]
    fn auth_mac_input_is_injective(
        a in (any::<[u8; 32]>(), any::<u8>(), "\\PC{0,8}"),
        b in (any::<[u8; 32]>(), any::<u8>(), "\\PC{0,8}"),
    ) {
        let same_triple = a == b;
        let same_input = auth_mac_input(&a.0, a.1, &a.2) == auth_mac_input(&b.0, b.1, &b.2);
        prop_assert_eq!(same_triple, same_input);
    }
}
