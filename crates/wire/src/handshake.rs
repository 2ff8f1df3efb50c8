//! The checks both sides run on the peer's `Hello`, and the byte string the authentication MAC
//! covers.
//!
//! Invariants:
//! - `check_hello` is a pure function of our expectation and their `Hello`; it accepts only if
//!   the version ranges overlap, the resource and both node ids match, both sides agree on
//!   authentication, and the volume sets and sizes are identical. It then picks the highest
//!   common version, the same one the peer picks from the mirrored inputs.
//! - Every rejection is a [`HandshakeError`] whose `Display` is a sentence fit for the log and,
//!   truncated to [`STRING_LEN_MAX`] bytes by [`HandshakeError::refuse`], for `Refuse`.
//! - `auth_mac_input` is injective in (challenge, responder node, resource) and starts with a
//!   fixed domain prefix, so a MAC made for one responder or resource never verifies for another.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::{Hello, Message, SocketKind, VolumeInfo, CHALLENGE_LEN, SESSION_LEN, STRING_LEN_MAX};

/// Domain prefix of every authentication MAC input, versioned so a later scheme cannot be
/// confused with this one.
pub const AUTH_DOMAIN: &[u8] = b"tandem-auth-v1\0";

/// What we expect of the peer's `Hello`: our own configuration for this connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloExpect {
    /// Lowest protocol version we speak.
    pub version_min: u16,
    /// Highest protocol version we speak.
    pub version_max: u16,
    /// Resource this connection serves.
    pub resource: String,
    /// Our node id: the peer's `to_node` must equal it.
    pub local_node: u8,
    /// The peer's node id: the peer's `from_node` must equal it.
    pub peer_node: u8,
    /// Our volumes: number to size in bytes. A map, so numbers are unique by construction.
    pub volumes: BTreeMap<u16, u64>,
    /// Whether we run the challenge-response exchange (we have a shared secret).
    pub auth_required: bool,
}

/// The random values a `Hello` carries; the caller draws them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloNonces {
    /// Shared by both sockets of one connection attempt.
    pub session: [u8; SESSION_LEN],
    /// Fresh per socket; the peer must MAC it.
    pub challenge: [u8; CHALLENGE_LEN],
}

impl HelloExpect {
    /// Our own `Hello` for the given socket: the mirror image of what we expect to receive.
    pub fn to_hello(&self, socket: SocketKind, nonces: HelloNonces) -> Hello {
        Hello {
            version_min: self.version_min,
            version_max: self.version_max,
            socket,
            resource: self.resource.clone(),
            from_node: self.local_node,
            to_node: self.peer_node,
            volumes: self
                .volumes
                .iter()
                .map(|(&number, &size_bytes)| VolumeInfo { number, size_bytes })
                .collect(),
            session: nonces.session,
            challenge: nonces.challenge,
            auth_required: self.auth_required,
        }
    }
}

/// The protocol version both sides will speak: the highest one in both ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NegotiatedVersion {
    /// The version number.
    pub version: u16,
}

/// Why a peer's `Hello` was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The peer's version range is empty (its minimum is above its maximum).
    #[error("the peer announced an empty protocol version range {min}..={max}")]
    EmptyVersionRange {
        /// The peer's minimum.
        min: u16,
        /// The peer's maximum.
        max: u16,
    },
    /// No protocol version is in both ranges.
    #[error(
        "no common protocol version: we speak {ours_min}..={ours_max}, \
         the peer speaks {theirs_min}..={theirs_max}"
    )]
    VersionMismatch {
        /// Our minimum.
        ours_min: u16,
        /// Our maximum.
        ours_max: u16,
        /// The peer's minimum.
        theirs_min: u16,
        /// The peer's maximum.
        theirs_max: u16,
    },
    /// The peer serves a different resource on this connection.
    #[error("the peer is configured for resource {theirs:?}, but this connection is for {ours:?}")]
    ResourceMismatch {
        /// Our resource name.
        ours: String,
        /// The peer's resource name.
        theirs: String,
    },
    /// The peer is not the node we expect on this connection.
    #[error("the peer says it is node {actual}, but this connection is for node {expected}")]
    WrongPeer {
        /// The node id we expect.
        expected: u8,
        /// The node id the peer sent as `from_node`.
        actual: u8,
    },
    /// The peer thinks it is talking to another node.
    #[error("the peer addressed node {addressed}, but we are node {local}")]
    NotAddressedToUs {
        /// Our node id.
        local: u8,
        /// The node id the peer sent as `to_node`.
        addressed: u8,
    },
    /// One side has a shared secret and the other does not.
    #[error(
        "authentication settings differ: {} a shared secret, the peer {}",
        if *.ours { "we use" } else { "we do not use" },
        if *.theirs { "does" } else { "does not" }
    )]
    AuthMismatch {
        /// Whether we require authentication.
        ours: bool,
        /// Whether the peer requires authentication.
        theirs: bool,
    },
    /// The peer listed a volume number twice.
    #[error("the peer listed volume {volume} more than once")]
    DuplicateVolume {
        /// The repeated volume number.
        volume: u16,
    },
    /// The two sides serve different sets of volumes.
    #[error(
        "the volume sets differ: the peer lacks volumes {missing:?} and has unknown volumes \
         {unexpected:?}"
    )]
    VolumeSetMismatch {
        /// Volume numbers we have and the peer does not, ascending.
        missing: Vec<u16>,
        /// Volume numbers the peer has and we do not, ascending.
        unexpected: Vec<u16>,
    },
    /// A volume has different sizes on the two sides.
    #[error("volume {volume} is {ours_bytes} bytes here but {theirs_bytes} bytes on the peer")]
    VolumeSizeMismatch {
        /// The volume number.
        volume: u16,
        /// Its size here.
        ours_bytes: u64,
        /// Its size on the peer.
        theirs_bytes: u64,
    },
}

impl HandshakeError {
    /// The `Refuse` message to send before closing: this error's sentence, truncated to fit.
    pub fn refuse(&self) -> Message {
        Message::Refuse {
            reason: truncate_text(&self.to_string()),
        }
    }
}

/// Checks the peer's `Hello` against our expectation and picks the protocol version.
///
/// Checks run in a fixed order (versions, resource, node ids, authentication, volumes) so both
/// sides of a misconfigured pair usually report the same first problem.
pub fn check_hello(
    ours: &HelloExpect,
    theirs: &Hello,
) -> Result<NegotiatedVersion, HandshakeError> {
    // Our range comes from this build, not from the network; an empty one is a bug.
    assert!(ours.version_min <= ours.version_max);
    let version = negotiate_version(ours, theirs)?;
    if ours.resource != theirs.resource {
        return Err(HandshakeError::ResourceMismatch {
            ours: ours.resource.clone(),
            theirs: theirs.resource.clone(),
        });
    }
    if theirs.from_node != ours.peer_node {
        return Err(HandshakeError::WrongPeer {
            expected: ours.peer_node,
            actual: theirs.from_node,
        });
    }
    if theirs.to_node != ours.local_node {
        return Err(HandshakeError::NotAddressedToUs {
            local: ours.local_node,
            addressed: theirs.to_node,
        });
    }
    if ours.auth_required != theirs.auth_required {
        return Err(HandshakeError::AuthMismatch {
            ours: ours.auth_required,
            theirs: theirs.auth_required,
        });
    }
    check_volumes(&ours.volumes, &theirs.volumes)?;
    Ok(version)
}

/// The highest version in both ranges.
fn negotiate_version(
    ours: &HelloExpect,
    theirs: &Hello,
) -> Result<NegotiatedVersion, HandshakeError> {
    if theirs.version_min > theirs.version_max {
        return Err(HandshakeError::EmptyVersionRange {
            min: theirs.version_min,
            max: theirs.version_max,
        });
    }
    let low = ours.version_min.max(theirs.version_min);
    let high = ours.version_max.min(theirs.version_max);
    if low > high {
        return Err(HandshakeError::VersionMismatch {
            ours_min: ours.version_min,
            ours_max: ours.version_max,
            theirs_min: theirs.version_min,
            theirs_max: theirs.version_max,
        });
    }
    Ok(NegotiatedVersion { version: high })
}

/// The size a diskless volume announces in its Hello: it matches any size.
pub const DISKLESS_VOLUME_BYTES: u64 = 0;

/// Requires the same volume numbers on both sides, each with the same size (unless one side
/// is diskless, [`DISKLESS_VOLUME_BYTES`]).
fn check_volumes(ours: &BTreeMap<u16, u64>, theirs: &[VolumeInfo]) -> Result<(), HandshakeError> {
    let mut theirs_by_number = BTreeMap::new();
    for volume in theirs {
        if theirs_by_number
            .insert(volume.number, volume.size_bytes)
            .is_some()
        {
            return Err(HandshakeError::DuplicateVolume {
                volume: volume.number,
            });
        }
    }
    let missing: Vec<u16> = ours
        .keys()
        .filter(|number| !theirs_by_number.contains_key(number))
        .copied()
        .collect();
    let unexpected: Vec<u16> = theirs_by_number
        .keys()
        .filter(|number| !ours.contains_key(number))
        .copied()
        .collect();
    if !missing.is_empty() || !unexpected.is_empty() {
        return Err(HandshakeError::VolumeSetMismatch {
            missing,
            unexpected,
        });
    }
    // Same key sets, and both maps iterate in ascending order, so the pairs line up.
    for ((&volume, &ours_bytes), (&theirs_volume, &theirs_bytes)) in
        ours.iter().zip(&theirs_by_number)
    {
        assert_eq!(volume, theirs_volume);
        // A diskless side (`disk none;`) announces size 0: it has no size of its own.
        let diskless = theirs_bytes == DISKLESS_VOLUME_BYTES || ours_bytes == DISKLESS_VOLUME_BYTES;
        if theirs_bytes != ours_bytes && !diskless {
            return Err(HandshakeError::VolumeSizeMismatch {
                volume,
                ours_bytes,
                theirs_bytes,
            });
        }
    }
    Ok(())
}

/// The byte string the responder MACs to answer `challenge`.
///
/// Layout: [`AUTH_DOMAIN`], the responder's node id, the 32-byte challenge, then the resource
/// name's UTF-8 bytes. Every field but the last has a fixed length, so the encoding is
/// injective. Binding the responder id defeats reflection: a challenge bounced back to its
/// sender yields a MAC for the wrong responder, which the sender rejects.
pub fn auth_mac_input(
    challenge: &[u8; CHALLENGE_LEN],
    responder_node: u8,
    resource: &str,
) -> Vec<u8> {
    let mut input = Vec::with_capacity(AUTH_DOMAIN.len() + 1 + CHALLENGE_LEN + resource.len());
    input.extend_from_slice(AUTH_DOMAIN);
    input.push(responder_node);
    input.extend_from_slice(challenge);
    input.extend_from_slice(resource.as_bytes());
    input
}

/// `text` cut to at most [`STRING_LEN_MAX`] bytes at a character boundary, for the reason
/// strings of `Refuse` and `Disconnect`.
pub fn truncate_text(text: &str) -> String {
    let mut end = text.len().min(STRING_LEN_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default().to_owned()
}
