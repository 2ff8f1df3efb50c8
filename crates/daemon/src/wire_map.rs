//! Translation between the engine's [`PeerMessage`]s and `wire` [`Message`]s, for the
//! messages without a write payload (the payload-carrying ones are framed in `peer.rs`,
//! which streams their bytes).
//!
//! Invariant: a code the engine does not know (role, disk state, flags) is a protocol error
//! that ends the link; it is never mapped to a guess.

use repl::{
    DiskState, Followed, GenerationFlags, GenerationIds, PeerMessage, Role, UuidsMessage,
    UuidsPurpose,
};
use wire::Message;

use crate::peer::LinkError;
use crate::resource::Payload;

/// errno sent with a negative acknowledgement or reply (EIO).
const ERRNO_IO: u32 = 5;

/// A control-socket message as a wire message; `None` for one that belongs on the data socket.
pub(crate) fn control_to_wire(message: PeerMessage<Payload>) -> Option<Message> {
    Some(match message {
        PeerMessage::Ping => Message::Ping,
        PeerMessage::PingAck => Message::PingAck,
        PeerMessage::RecvAck { seq } => Message::RecvAck { seq },
        PeerMessage::WriteAck { seq } => Message::WriteAck { seq },
        PeerMessage::NegAck { seq } => Message::NegAck {
            seq,
            errno: ERRNO_IO,
        },
        PeerMessage::BarrierAck { epoch } => Message::BarrierAck { epoch },
        PeerMessage::StaleMark { stale } => Message::StaleMark { stale },
        PeerMessage::StaleMarkAck { stale } => Message::StaleMarkAck { stale },
        PeerMessage::Ahead { ahead } => Message::Ahead { ahead },
        PeerMessage::PeerAck { epoch, nodes } => Message::PeerAck { epoch, nodes },
        PeerMessage::State { role, disks } => Message::PeerState(wire::PeerState {
            role: role.code(),
            volumes: disks
                .into_iter()
                .map(|(volume, d)| wire::VolumeDiskState {
                    volume,
                    disk_state: d.code(),
                })
                .collect(),
        }),
        _ => return None,
    })
}

/// A control-socket wire message as an engine message.
pub(crate) fn control_from_wire(message: Message) -> Result<PeerMessage<Payload>, LinkError> {
    Ok(match message {
        Message::Ping => PeerMessage::Ping,
        Message::PingAck => PeerMessage::PingAck,
        Message::RecvAck { seq } => PeerMessage::RecvAck { seq },
        Message::WriteAck { seq } => PeerMessage::WriteAck { seq },
        Message::NegAck { seq, .. } => PeerMessage::NegAck { seq },
        Message::BarrierAck { epoch } => PeerMessage::BarrierAck { epoch },
        Message::StaleMark { stale } => PeerMessage::StaleMark { stale },
        Message::StaleMarkAck { stale } => PeerMessage::StaleMarkAck { stale },
        Message::Ahead { ahead } => PeerMessage::Ahead { ahead },
        Message::PeerAck { epoch, nodes } => PeerMessage::PeerAck { epoch, nodes },
        Message::PeerState(state) => {
            let role = role_of(state.role)?;
            let disks = state
                .volumes
                .into_iter()
                .map(|v| Ok((v.volume, disk_of(v.disk_state)?)))
                .collect::<Result<_, LinkError>>()?;
            PeerMessage::State { role, disks }
        }
        Message::Disconnect { reason } => return Err(LinkError::PeerDisconnected(reason)),
        other => {
            return Err(LinkError::Protocol(format!(
                "unexpected {:?} on the control socket",
                other.kind()
            )))
        }
    })
}

/// A data-socket sync message without payload (handshake, bitmap, resync control) as a wire
/// message; `None` for anything else.
pub(crate) fn sync_to_wire(message: PeerMessage<Payload>) -> Result<Option<Message>, LinkError> {
    Ok(Some(match message {
        PeerMessage::SyncUuids(uuids) => Message::SyncUuids(Box::new(uuids_to_wire(&uuids))),
        PeerMessage::BitmapChunk { volume, chunk } => Message::BitmapChunk { volume, chunk },
        PeerMessage::ResyncAck { id, volume, ok } => Message::ResyncAck { id, volume, ok },
        PeerMessage::ResyncDone {
            volume,
            failed_bytes,
        } => Message::ResyncDone {
            volume,
            failed_bytes,
        },
        PeerMessage::ResyncInSync { id, volume } => Message::ResyncInSync { id, volume },
        PeerMessage::SyncPause { volume, paused } => Message::SyncPause { volume, paused },
        PeerMessage::Resize {
            volume,
            size_bytes,
            step,
        } => Message::Resize {
            volume,
            size_bytes,
            step: resize_step_to_wire(step),
        },
        PeerMessage::VerifyDone { volume, oos_bytes } => Message::VerifyDone { volume, oos_bytes },
        other => return range_to_wire(other),
    }))
}

/// [`sync_to_wire`] for the requests and replies about a block range.
fn range_to_wire(message: PeerMessage<Payload>) -> Result<Option<Message>, LinkError> {
    Ok(Some(match message {
        PeerMessage::ResyncRequest {
            id,
            volume,
            offset,
            length,
        } => Message::ResyncRequest(request_to_wire(id, volume, offset, length)?),
        PeerMessage::ResyncNegReply {
            id,
            volume,
            offset,
            length,
        } => Message::ResyncNegReply(neg_reply_to_wire(id, volume, offset, length)?),
        PeerMessage::ReadRequest {
            id,
            volume,
            offset,
            length,
        } => Message::ReadRequest(request_to_wire(id, volume, offset, length)?),
        PeerMessage::ReadNegReply {
            id,
            volume,
            offset,
            length,
        } => Message::ReadNegReply(neg_reply_to_wire(id, volume, offset, length)?),
        PeerMessage::CsumRequest {
            id,
            volume,
            offset,
            length,
            digests,
        } => Message::CsumRequest(wire::CsumRequest {
            id,
            volume,
            offset,
            length: length32(length)?,
            digests,
        }),
        PeerMessage::VerifyRequest {
            id,
            volume,
            offset,
            length,
        } => Message::VerifyRequest(wire::VerifyRequest {
            id,
            volume,
            offset,
            length: length32(length)?,
        }),
        PeerMessage::VerifyReply {
            id,
            volume,
            offset,
            length,
            outcome,
        } => {
            let outcome = verify_outcome_to_wire(outcome);
            Message::VerifyReply(wire::VerifyReply {
                id,
                volume,
                offset,
                length: length32(length)?,
                outcome,
            })
        }
        _ => return Ok(None),
    }))
}

/// A data-socket sync wire message without payload as an engine message; `None` for a kind
/// that is not one.
pub(crate) fn sync_from_wire(message: &Message) -> Result<Option<PeerMessage<Payload>>, LinkError> {
    Ok(Some(match message {
        Message::SyncUuids(uuids) => PeerMessage::SyncUuids(Box::new(uuids_from_wire(uuids)?)),
        Message::BitmapChunk { volume, chunk } => PeerMessage::BitmapChunk {
            volume: *volume,
            chunk: chunk.clone(),
        },
        Message::ResyncAck { id, volume, ok } => PeerMessage::ResyncAck {
            id: *id,
            volume: *volume,
            ok: *ok,
        },
        Message::ResyncDone {
            volume,
            failed_bytes,
        } => PeerMessage::ResyncDone {
            volume: *volume,
            failed_bytes: *failed_bytes,
        },
        Message::ResyncInSync { id, volume } => PeerMessage::ResyncInSync {
            id: *id,
            volume: *volume,
        },
        Message::SyncPause { volume, paused } => PeerMessage::SyncPause {
            volume: *volume,
            paused: *paused,
        },
        Message::Resize {
            volume,
            size_bytes,
            step,
        } => PeerMessage::Resize {
            volume: *volume,
            size_bytes: *size_bytes,
            step: resize_step_from_wire(*step),
        },
        Message::VerifyDone { volume, oos_bytes } => PeerMessage::VerifyDone {
            volume: *volume,
            oos_bytes: *oos_bytes,
        },
        other => return range_from_wire(other),
    }))
}

/// [`sync_from_wire`] for the requests and replies about a block range.
fn range_from_wire(message: &Message) -> Result<Option<PeerMessage<Payload>>, LinkError> {
    Ok(Some(match message {
        Message::ResyncRequest(r) => PeerMessage::ResyncRequest {
            id: r.id,
            volume: r.volume,
            offset: r.offset,
            length: u64::from(r.length),
        },
        Message::ResyncNegReply(r) => PeerMessage::ResyncNegReply {
            id: r.id,
            volume: r.volume,
            offset: r.offset,
            length: u64::from(r.length),
        },
        Message::ReadRequest(r) => PeerMessage::ReadRequest {
            id: r.id,
            volume: r.volume,
            offset: r.offset,
            length: u64::from(r.length),
        },
        Message::ReadNegReply(r) => PeerMessage::ReadNegReply {
            id: r.id,
            volume: r.volume,
            offset: r.offset,
            length: u64::from(r.length),
        },
        Message::CsumRequest(r) => PeerMessage::CsumRequest {
            id: r.id,
            volume: r.volume,
            offset: r.offset,
            length: u64::from(r.length),
            digests: r.digests.clone(),
        },
        Message::VerifyRequest(r) => PeerMessage::VerifyRequest {
            id: r.id,
            volume: r.volume,
            offset: r.offset,
            length: u64::from(r.length),
        },
        Message::VerifyReply(r) => {
            let outcome = verify_outcome_from_wire(&r.outcome);
            PeerMessage::VerifyReply {
                id: r.id,
                volume: r.volume,
                offset: r.offset,
                length: u64::from(r.length),
                outcome,
            }
        }
        _ => return Ok(None),
    }))
}

/// A block range's length as the wire's `u32`.
fn length32(length: u64) -> Result<u32, LinkError> {
    u32::try_from(length)
        .map_err(|_| LinkError::Protocol(format!("resync range of {length} bytes is too long")))
}

/// A resync or read request's body.
fn request_to_wire(
    id: u64,
    volume: u16,
    offset: u64,
    length: u64,
) -> Result<wire::ResyncRequest, LinkError> {
    Ok(wire::ResyncRequest {
        id,
        volume,
        offset,
        length: length32(length)?,
    })
}

/// A resync or read negative reply's body (the errno is always EIO).
fn neg_reply_to_wire(
    id: u64,
    volume: u16,
    offset: u64,
    length: u64,
) -> Result<wire::ResyncNegReply, LinkError> {
    Ok(wire::ResyncNegReply {
        id,
        volume,
        offset,
        length: length32(length)?,
        errno: ERRNO_IO,
    })
}

fn verify_outcome_to_wire(outcome: repl::VerifyOutcome) -> wire::VerifyOutcome {
    match outcome {
        repl::VerifyOutcome::Digests {
            written_blocks,
            digests,
        } => wire::VerifyOutcome::Digests {
            written_blocks,
            digests,
        },
        repl::VerifyOutcome::ReadFailed => wire::VerifyOutcome::ReadFailed,
    }
}

fn verify_outcome_from_wire(outcome: &wire::VerifyOutcome) -> repl::VerifyOutcome {
    match outcome {
        wire::VerifyOutcome::Digests {
            written_blocks,
            digests,
        } => repl::VerifyOutcome::Digests {
            written_blocks: *written_blocks,
            digests: digests.clone(),
        },
        wire::VerifyOutcome::ReadFailed => repl::VerifyOutcome::ReadFailed,
    }
}

fn resize_step_to_wire(step: repl::ResizeStep) -> wire::ResizeStep {
    match step {
        repl::ResizeStep::Query => wire::ResizeStep::Query,
        repl::ResizeStep::Offer => wire::ResizeStep::Offer,
        repl::ResizeStep::Apply { assume_clean } => wire::ResizeStep::Apply { assume_clean },
        repl::ResizeStep::Applied => wire::ResizeStep::Applied,
        repl::ResizeStep::Refused => wire::ResizeStep::Refused,
    }
}

fn resize_step_from_wire(step: wire::ResizeStep) -> repl::ResizeStep {
    match step {
        wire::ResizeStep::Query => repl::ResizeStep::Query,
        wire::ResizeStep::Offer => repl::ResizeStep::Offer,
        wire::ResizeStep::Apply { assume_clean } => repl::ResizeStep::Apply { assume_clean },
        wire::ResizeStep::Applied => repl::ResizeStep::Applied,
        wire::ResizeStep::Refused => repl::ResizeStep::Refused,
    }
}

fn uuids_to_wire(uuids: &UuidsMessage) -> wire::SyncUuids {
    let purpose = match uuids.purpose {
        UuidsPurpose::Handshake => wire::UuidsPurpose::Handshake,
        UuidsPurpose::Adopt => wire::UuidsPurpose::Adopt,
        UuidsPurpose::SyncStart => wire::UuidsPurpose::SyncStart,
        UuidsPurpose::Rotate => wire::UuidsPurpose::Rotate,
        UuidsPurpose::RotateSeen => wire::UuidsPurpose::RotateSeen,
        UuidsPurpose::Accepted => wire::UuidsPurpose::Accepted,
    };
    wire::SyncUuids {
        volume: uuids.volume,
        purpose,
        role: uuids.role.code(),
        disk_state: uuids.disk.code(),
        flags: uuids.ids.flags.bits(),
        bitmap_bits: uuids.bitmap_bits,
        size_bytes: uuids.size_bytes,
        bitmap_granularity_bytes: uuids.bitmap_granularity_bytes,
        current: uuids.ids.current,
        bitmap: uuids.ids.bitmap,
        history: uuids.ids.history,
        resync_goal: uuids.ids.resync_goal,
        followed_node: uuids.followed.map_or(wire::FOLLOWED_NONE, |f| f.node),
        followed_seq: uuids.followed.map_or(0, |f| f.seq),
    }
}

fn uuids_from_wire(uuids: &wire::SyncUuids) -> Result<UuidsMessage, LinkError> {
    let purpose = match uuids.purpose {
        wire::UuidsPurpose::Handshake => UuidsPurpose::Handshake,
        wire::UuidsPurpose::Adopt => UuidsPurpose::Adopt,
        wire::UuidsPurpose::SyncStart => UuidsPurpose::SyncStart,
        wire::UuidsPurpose::Rotate => UuidsPurpose::Rotate,
        wire::UuidsPurpose::RotateSeen => UuidsPurpose::RotateSeen,
        wire::UuidsPurpose::Accepted => UuidsPurpose::Accepted,
    };
    let ids = GenerationIds {
        current: uuids.current,
        bitmap: uuids.bitmap,
        history: uuids.history,
        flags: GenerationFlags::from_bits(uuids.flags),
        resync_goal: uuids.resync_goal,
    };
    Ok(UuidsMessage {
        volume: uuids.volume,
        purpose,
        role: role_of(uuids.role)?,
        disk: disk_of(uuids.disk_state)?,
        ids,
        bitmap_bits: uuids.bitmap_bits,
        size_bytes: uuids.size_bytes,
        bitmap_granularity_bytes: uuids.bitmap_granularity_bytes,
        followed: (uuids.followed_node != wire::FOLLOWED_NONE).then_some(Followed {
            node: uuids.followed_node,
            seq: uuids.followed_seq,
        }),
    })
}

fn role_of(code: u8) -> Result<Role, LinkError> {
    Role::from_code(code).ok_or_else(|| LinkError::Protocol(format!("unknown role code {code}")))
}

fn disk_of(code: u8) -> Result<DiskState, LinkError> {
    DiskState::from_code(code)
        .ok_or_else(|| LinkError::Protocol(format!("unknown disk state code {code}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::SocketKind;

    /// Every engine message without payload maps to a wire kind allowed on the socket the
    /// mapping is for (a message on the wrong socket is a protocol error at the peer).
    #[test]
    fn each_message_maps_to_a_kind_allowed_on_its_socket() {
        let messages: Vec<PeerMessage<Payload>> = vec![
            PeerMessage::Ping,
            PeerMessage::PingAck,
            PeerMessage::RecvAck { seq: 1 },
            PeerMessage::WriteAck { seq: 1 },
            PeerMessage::NegAck { seq: 1 },
            PeerMessage::BarrierAck { epoch: 1 },
            PeerMessage::State {
                role: Role::Secondary,
                disks: vec![(0, DiskState::UpToDate)],
            },
            PeerMessage::StaleMark { stale: true },
            PeerMessage::StaleMarkAck { stale: false },
            PeerMessage::Ahead { ahead: true },
            PeerMessage::PeerAck {
                epoch: 3,
                nodes: 0b11,
            },
            PeerMessage::SyncPause {
                volume: 0,
                paused: true,
            },
            PeerMessage::Resize {
                volume: 0,
                size_bytes: 1 << 30,
                step: repl::ResizeStep::Apply { assume_clean: true },
            },
            PeerMessage::BitmapChunk {
                volume: 0,
                chunk: vec![1],
            },
            PeerMessage::ResyncRequest {
                id: 1,
                volume: 0,
                offset: 0,
                length: 4096,
            },
            PeerMessage::ResyncAck {
                id: 1,
                volume: 0,
                ok: true,
            },
            PeerMessage::ResyncDone {
                volume: 0,
                failed_bytes: 0,
            },
            PeerMessage::ResyncInSync { id: 1, volume: 0 },
            PeerMessage::VerifyRequest {
                id: 1,
                volume: 0,
                offset: 0,
                length: 4096,
            },
            PeerMessage::VerifyDone {
                volume: 0,
                oos_bytes: 0,
            },
        ];
        for message in messages {
            let name = format!("{message:?}");
            let control = control_to_wire(message.clone());
            let sync = sync_to_wire(message).expect("maps");
            assert!(
                control.is_some() != sync.is_some(),
                "{name} maps to exactly one socket"
            );
            if let Some(wire) = control {
                assert!(
                    wire.kind().allowed_on(SocketKind::Control),
                    "{name} on the control socket"
                );
            }
            if let Some(wire) = sync {
                assert!(
                    wire.kind().allowed_on(SocketKind::Data),
                    "{name} on the data socket"
                );
            }
        }
    }
}
