//! Tests of the violation texts and of the conversions into a [`DisconnectReason`].

use super::{DisconnectReason, PeerViolation};
use crate::state::ReplState;
use crate::Extent;

/// Each violation prints the text the engine logged when it was a string.
#[test]
fn violation_text() {
    let extent = Extent::new(4096, 512).map(|e| (e, format!("{e:?}")));
    let Some((extent, extent_text)) = extent else {
        panic!("a valid extent");
    };
    let check: &[(PeerViolation, &str)] = &[
        (
            PeerViolation::WriteWhilePrimary,
            "replicated write received while Primary",
        ),
        (
            PeerViolation::WriteUnknownVolume { volume: 3 },
            "write to unknown volume 3",
        ),
        (
            PeerViolation::WriteBeyondEnd {
                volume: 1,
                offset: 8192,
                length: 4096,
            },
            "write beyond the end of volume 1: offset 8192 length 4096",
        ),
        (
            PeerViolation::HandshakeDuringResync { volume: 2 },
            "handshake for volume 2 during a resync",
        ),
        (
            PeerViolation::UuidsUnknownVolume { volume: 7 },
            "identifiers for unknown volume 7",
        ),
        (PeerViolation::BothPrimary, "both nodes are Primary"),
        (
            PeerViolation::DeferredOverflow { limit: 65536 },
            "more than 65536 messages wait for the activity log",
        ),
        (
            PeerViolation::VerifyDoneDuring {
                volume: 0,
                state: ReplState::SyncSource,
            },
            "verify done for volume 0 during SyncSource",
        ),
        (
            PeerViolation::VerifyDigestsDiffer {
                remote_bytes: 32,
                local_bytes: 64,
            },
            "verify digests of 32 bytes for a range we digest in 64: verify-alg or bitmap \
             block size differ",
        ),
    ];
    for (violation, text) in check {
        assert_eq!(violation.to_string(), *text, "{violation:?}");
    }
    let invalid = PeerViolation::ReadRequestInvalid { volume: 0, extent };
    assert_eq!(
        invalid.to_string(),
        format!("read request beyond volume 0 or too long: {extent_text}")
    );
}

/// A violation converts into `Violation` and prints the same text.
#[test]
fn from_violation() {
    let violation = PeerViolation::AckUnknownWrite { seq: 9 };
    let reason = DisconnectReason::from(violation.clone());
    assert_eq!(reason, DisconnectReason::Violation(violation));
    assert_eq!(reason.to_string(), "ack for unknown write 9");
}

/// Text converts into `Policy` and prints unchanged.
#[test]
fn from_text() {
    let owned = DisconnectReason::from(String::from("split brain detected"));
    assert_eq!(
        owned,
        DisconnectReason::Policy("split brain detected".into())
    );
    assert_eq!(owned.to_string(), "split brain detected");
    let borrowed = DisconnectReason::from("rr-conflict: a Primary would lose its data");
    assert!(matches!(&borrowed, DisconnectReason::Policy(text) if text.starts_with("rr-conflict")));
    assert_eq!(
        borrowed.to_string(),
        "rr-conflict: a Primary would lose its data"
    );
}
