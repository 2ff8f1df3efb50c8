//! The seed corpora of the binary targets, built with the crates' own encoders, so every seed
//! is a valid input that reaches deep into its parser (the text targets' seeds are plain files
//! in `fuzz/corpus/`).
//!
//! `cargo test --test corpus` in `fuzz/` writes them with `TANDEM_FUZZ_WRITE_SEEDS=1`.
//! Invariant: every seed is deterministic (no clock, no randomness), so regenerating gives the
//! same files.

use meta::layout::{LayoutConfig, Placement};
use meta::{
    format_ring, ActivityLog, ActivityLogConfig, AlUpdates, Begin, Bitmap, ExtentRange, Layout,
    Superblock,
};
use nbd::protocol::{
    ClientOption, ExportQuery, InfoReply, InfoType, OptionError, OptionReply, OptionReplyBody,
    RequestHeader, SimpleReplyHeader, TransmissionFlags,
};
use wire::{
    CsumRequest, DataHeader, Hello, Message, PeerState, RangeHeader, ResizeStep, ResyncNegReply,
    ResyncReplyHeader, ResyncRequest, SocketKind, SyncUuids, UuidsPurpose, VerifyOutcome,
    VerifyReply, VerifyRequest, VolumeDiskState, VolumeInfo,
};

/// One seed: its target, its file name, its bytes.
pub type Seed = (&'static str, String, Vec<u8>);

/// Every generated seed.
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    seeds.extend(nbd_handshake());
    seeds.extend(nbd_request());
    seeds.extend(nbd_server());
    seeds.extend(wire_stream());
    seeds.extend(wire_message());
    seeds.extend(meta_superblock());
    seeds.extend(meta_activity_log());
    seeds.extend(meta_bitmap());
    seeds
}

fn seed(target: &'static str, name: &str, bytes: Vec<u8>) -> Seed {
    (target, name.to_owned(), bytes)
}

fn query(name: &str) -> ExportQuery {
    ExportQuery {
        name: name.to_owned(),
        items: vec![InfoType::Export, InfoType::BlockSize, InfoType::Name],
    }
}

fn nbd_handshake() -> Vec<Seed> {
    let options = [
        ClientOption::List,
        ClientOption::Info(query("r0/0")),
        ClientOption::StructuredReply,
        ClientOption::Go(query("")),
        ClientOption::ExportName {
            name: "r0".to_owned(),
        },
        ClientOption::Abort,
    ];
    let mut raw = vec![0, 0, 0, 0, 3];
    for option in &options {
        option.encode(&mut raw);
    }
    let mut structured = vec![1, 0, 0, 0, 1];
    for option in &options {
        let mut encoded = Vec::new();
        option.encode(&mut encoded);
        let data = encoded.get(16..).unwrap_or_default();
        structured.extend_from_slice(&option.code().to_be_bytes());
        structured.extend_from_slice(&u16::try_from(data.len()).unwrap_or(0).to_be_bytes());
        structured.extend_from_slice(data);
    }
    let mut replies = vec![2, 0, 0, 0, 3];
    for reply in option_replies() {
        reply.encode(&mut replies);
    }
    vec![
        seed("nbd_handshake", "options-raw", raw),
        seed("nbd_handshake", "options-structured", structured),
        seed("nbd_handshake", "replies", replies),
    ]
}

fn option_replies() -> Vec<OptionReply> {
    let bodies = [
        OptionReplyBody::Server {
            name: "r0".to_owned(),
        },
        OptionReplyBody::Info(InfoReply::Export {
            size: 1 << 30,
            flags: TransmissionFlags(0x016d),
        }),
        OptionReplyBody::Info(InfoReply::Name("r0".to_owned())),
        OptionReplyBody::Info(InfoReply::BlockSize(nbd::protocol::BlockSizes {
            minimum: 1,
            preferred: 4096,
            maximum: 1 << 25,
        })),
        OptionReplyBody::Error {
            error: OptionError::Unsup,
            message: "no".to_owned(),
        },
        OptionReplyBody::Ack,
    ];
    bodies
        .into_iter()
        .map(|body| OptionReply { option: 7, body })
        .collect()
}

fn nbd_request() -> Vec<Seed> {
    let header = |kind: u16, flags: u16, offset: u64, length: u32| RequestHeader {
        flags,
        kind,
        cookie: u64::from(kind) + 1,
        offset,
        length,
    };
    let mut prefix = Vec::new();
    prefix.extend_from_slice(&(1_u64 << 20).to_be_bytes());
    prefix.extend_from_slice(&0x016d_u16.to_be_bytes());
    prefix.extend_from_slice(&65536_u32.to_be_bytes());
    let mut requests = prefix.clone();
    requests.push(0);
    let mut with_replies = prefix;
    with_replies.push(2);
    let list = [
        header(0, 0, 4096, 512),
        header(1, 1, 0, 16),
        header(3, 0, 0, 0),
        header(4, 0, 8192, 4096),
        header(6, 2, 0, 4096),
        header(0, 0, (1 << 20) - 1, 2),
        header(2, 0, 0, 0),
    ];
    for request in list {
        for out in [&mut requests, &mut with_replies] {
            out.extend_from_slice(&request.encode());
            if request.kind == 1 {
                out.extend_from_slice(&[0xAB; 16]);
            }
        }
        let reply = SimpleReplyHeader {
            cookie: request.cookie,
            error: nbd::Errno::from_wire(u32::from(request.kind) * 11 % 23),
        };
        with_replies.extend_from_slice(&reply.encode());
    }
    vec![
        seed("nbd_request", "requests", requests),
        seed("nbd_request", "requests-and-replies", with_replies),
    ]
}

fn nbd_server() -> Vec<Seed> {
    let request = |kind: u16, flags: u16, offset: u64, length: u32| RequestHeader {
        flags,
        kind,
        cookie: u64::from(kind) << 8 | u64::from(flags),
        offset,
        length,
    };
    let mut go = vec![0, 0, 0, 3];
    ClientOption::Info(query("ram")).encode(&mut go);
    ClientOption::Go(query("")).encode(&mut go);
    let mut export_name = vec![0, 0, 0, 1];
    ClientOption::List.encode(&mut export_name);
    ClientOption::ExportName {
        name: "ram".to_owned(),
    }
    .encode(&mut export_name);
    let transmission = [
        request(1, 1, 4096, 64),
        request(0, 0, 4000, 200),
        request(3, 0, 0, 0),
        request(4, 0, 0, 8192),
        request(6, 2, 65536, 4096),
        request(1, 0, 262_100, 100),
        request(0, 0, 0, 65537),
        request(9, 0, 0, 0),
        request(2, 0, 0, 0),
    ];
    for out in [&mut go, &mut export_name] {
        for header in transmission {
            out.extend_from_slice(&header.encode());
            if header.kind == 1 {
                let length = usize::try_from(header.length).unwrap_or(0);
                out.resize(out.len() + length, 0x5A);
            }
        }
    }
    let mut abort = vec![0, 0, 0, 3];
    ClientOption::StartTls.encode(&mut abort);
    ClientOption::Other { option: 99 }.encode(&mut abort);
    ClientOption::Abort.encode(&mut abort);
    vec![
        seed("nbd_server", "go-then-requests", go),
        seed("nbd_server", "export-name-then-requests", export_name),
        seed("nbd_server", "abort", abort),
    ]
}

/// One message of every kind, with the payload length each carries.
pub fn sample_messages() -> Vec<(Message, u32)> {
    let range = RangeHeader {
        seq: 7,
        epoch: 3,
        volume: 0,
        offset: 4096,
        length: 8192,
    };
    let mut messages = vec![
        (Message::Hello(sample_hello()), 0),
        (Message::AuthResponse { mac: [0x5A; 32] }, 0),
        (Message::AuthResult { ok: true }, 0),
        (
            Message::Refuse {
                reason: "wrong resource".to_owned(),
            },
            0,
        ),
        (
            Message::Data(DataHeader {
                seq: 1,
                epoch: 1,
                volume: 0,
                flags: 1,
                offset: 0,
            }),
            8,
        ),
        (Message::Trim(range), 0),
        (Message::WriteZeroes(range), 0),
        (
            Message::Barrier {
                epoch: 3,
                flush: true,
            },
            0,
        ),
        (Message::Ping, 0),
        (Message::PingAck, 0),
        (Message::RecvAck { seq: 1 }, 0),
        (Message::WriteAck { seq: 1 }, 0),
        (Message::NegAck { seq: 2, errno: 5 }, 0),
        (Message::BarrierAck { epoch: 3 }, 0),
        (
            Message::PeerState(PeerState {
                role: 1,
                volumes: vec![VolumeDiskState {
                    volume: 0,
                    disk_state: 8,
                }],
            }),
            0,
        ),
        (
            Message::Disconnect {
                reason: "bye".to_owned(),
            },
            0,
        ),
    ];
    messages.extend(resync_messages());
    messages
}

fn resync_messages() -> Vec<(Message, u32)> {
    let mut messages = vec![
        (
            Message::ResyncRequest(ResyncRequest {
                id: 9,
                volume: 0,
                offset: 0,
                length: 4096,
            }),
            0,
        ),
        (
            Message::ResyncReply(ResyncReplyHeader {
                id: 9,
                volume: 0,
                offset: 0,
            }),
            8,
        ),
        (
            Message::ResyncNegReply(ResyncNegReply {
                id: 9,
                volume: 0,
                offset: 0,
                length: 4096,
                errno: 5,
            }),
            0,
        ),
    ];
    messages.extend(read_messages());
    messages.extend([
        (
            Message::ResyncAck {
                id: 9,
                volume: 0,
                ok: true,
            },
            0,
        ),
        (
            Message::ResyncDone {
                volume: 0,
                failed_bytes: 0,
            },
            0,
        ),
        (
            Message::CsumRequest(CsumRequest {
                id: 10,
                volume: 0,
                offset: 0,
                length: 8192,
                digests: vec![1, 2, 3, 4, 5, 6, 7, 8],
            }),
            0,
        ),
        (Message::ResyncInSync { id: 10, volume: 0 }, 0),
    ]);
    messages.extend(verify_and_setup_messages());
    messages
}

fn read_messages() -> Vec<(Message, u32)> {
    vec![
        (
            Message::ReadRequest(ResyncRequest {
                id: 3,
                volume: 0,
                offset: 8192,
                length: 4096,
            }),
            0,
        ),
        (
            Message::ReadReply(ResyncReplyHeader {
                id: 3,
                volume: 0,
                offset: 8192,
            }),
            8,
        ),
        (
            Message::ReadNegReply(ResyncNegReply {
                id: 3,
                volume: 0,
                offset: 8192,
                length: 4096,
                errno: 5,
            }),
            0,
        ),
    ]
}

fn verify_and_setup_messages() -> Vec<(Message, u32)> {
    let uuids = SyncUuids {
        volume: 0,
        purpose: UuidsPurpose::Handshake,
        role: 1,
        disk_state: 8,
        flags: 2,
        bitmap_bits: 16,
        size_bytes: 1 << 30,
        bitmap_granularity_bytes: 4096,
        current: 0x1234_5678_9ABC_DEF0,
        bitmap: [0; 32],
        history: [0x1111; 32],
        resync_goal: 0x2222,
        followed_node: 1,
        followed_seq: 0x3333,
    };
    vec![
        (
            Message::VerifyRequest(VerifyRequest {
                id: 11,
                volume: 0,
                offset: 0,
                length: 8192,
            }),
            0,
        ),
        (
            Message::VerifyReply(VerifyReply {
                id: 11,
                volume: 0,
                offset: 0,
                length: 8192,
                outcome: VerifyOutcome::Digests {
                    written_blocks: 1,
                    digests: vec![9; 8],
                },
            }),
            0,
        ),
        (
            Message::VerifyDone {
                volume: 0,
                oos_bytes: 4096,
            },
            0,
        ),
        (Message::SyncUuids(Box::new(uuids)), 0),
        (
            Message::Resize {
                volume: 0,
                size_bytes: 2 << 30,
                step: ResizeStep::Apply {
                    assume_clean: false,
                },
            },
            0,
        ),
        (
            Message::BitmapChunk {
                volume: 0,
                chunk: vec![
                    1, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 3, 4,
                ],
            },
            0,
        ),
    ]
}

fn sample_hello() -> Hello {
    Hello {
        version_min: 1,
        version_max: 1,
        socket: SocketKind::Data,
        resource: "r0".to_owned(),
        from_node: 0,
        to_node: 1,
        volumes: vec![
            VolumeInfo {
                number: 0,
                size_bytes: 1 << 30,
            },
            VolumeInfo {
                number: 1,
                size_bytes: 1 << 20,
            },
        ],
        session: [1; 16],
        challenge: [2; 32],
        auth_required: true,
    }
}

/// `message` as a frame, with `payload_len` bytes of payload after it.
fn frame(message: &Message, payload_len: u32) -> Vec<u8> {
    let mut out = Vec::new();
    if message.encode(payload_len, &mut out).is_err() {
        return Vec::new();
    }
    let payload = usize::try_from(payload_len).unwrap_or(0);
    out.resize(out.len() + payload, 0xCD);
    out
}

fn wire_stream() -> Vec<Seed> {
    let messages = sample_messages();
    let mut handshake = vec![0];
    let mut traffic = vec![0];
    for (index, (message, payload_len)) in messages.iter().enumerate() {
        let out = if index < 4 {
            &mut handshake
        } else {
            &mut traffic
        };
        out.extend_from_slice(&frame(message, *payload_len));
    }
    vec![
        seed("wire_stream", "handshake", handshake),
        seed("wire_stream", "traffic", traffic),
    ]
}

fn wire_message() -> Vec<Seed> {
    let kinds = wire::Kind::ALL;
    let mut seeds = Vec::new();
    for (message, payload_len) in sample_messages() {
        let mut encoded = Vec::new();
        if message.encode(payload_len, &mut encoded).is_err() {
            continue;
        }
        let kind = message.kind();
        let Some(index) = kinds.iter().position(|&candidate| candidate == kind) else {
            continue;
        };
        let mut bytes = vec![u8::try_from(index).unwrap_or(0)];
        if kind.has_payload() {
            bytes.extend_from_slice(&payload_len.to_be_bytes());
        }
        bytes.extend_from_slice(encoded.get(wire::FRAME_HEADER_LEN..).unwrap_or_default());
        seeds.push(seed("wire_message", &format!("{kind:?}"), bytes));
    }
    seeds
}

fn sample_superblock(
    placement: Placement,
    peer_slots: u8,
    data_bytes_max: Option<u64>,
) -> Option<Vec<u8>> {
    let config = LayoutConfig {
        data_bytes_max,
        ..LayoutConfig::new(placement, 1 << 30, peer_slots)
    };
    let layout = Layout::compute(&config).ok()?;
    let mut superblock = Superblock::new(layout, 0).ok()?;
    superblock.current_uuid = 0x0123_4567_89AB_CDEF;
    superblock.history_uuids[0] = 0x0FED_CBA9_8765_4321;
    superblock.resync_goal_uuid = 0x0246_8ACE_1357_9BDF;
    superblock.flags.primary_indicator = true;
    if let Some(peer) = superblock.peers.first_mut() {
        peer.node_id = Some(1);
        peer.bitmap_uuid = 0x0123_4567_89AB_CDEF;
    }
    superblock.encode().ok()
}

fn meta_superblock() -> Vec<Seed> {
    let mut seeds = Vec::new();
    let external = Placement::External {
        metadata_bytes: 8 << 20,
    };
    for (name, placement, slots, cap) in [
        ("internal", Placement::Internal, 1, None),
        ("external", external, 3, None),
        // Version 3: a data size cap agreed by a resize.
        ("internal-capped", Placement::Internal, 1, Some(512 << 20)),
    ] {
        if let Some(block) = sample_superblock(placement, slots, cap) {
            let mut bytes = vec![0];
            bytes.extend_from_slice(&trim_zeros(&block));
            seeds.push(seed("meta_superblock", name, bytes));
        }
    }
    let mut layout = vec![4, 1];
    layout.extend_from_slice(&(64_u64 << 20).to_be_bytes());
    layout.extend_from_slice(&(1_u64 << 30).to_be_bytes());
    layout.extend_from_slice(&[2, 1]);
    layout.extend_from_slice(&65536_u32.to_be_bytes());
    layout.extend_from_slice(&8192_u32.to_be_bytes());
    layout.extend_from_slice(&7_u32.to_be_bytes());
    seeds.push(seed("meta_superblock", "layout-config", layout));
    seeds
}

/// `bytes` without its trailing zeros (the targets pad them back).
fn trim_zeros(bytes: &[u8]) -> Vec<u8> {
    let end = bytes
        .iter()
        .rposition(|&byte| byte != 0)
        .map_or(0, |at| at + 1);
    bytes.get(..end).unwrap_or_default().to_vec()
}

/// A two-block ring of seven slots holding extents 3 and 5 (hot), after a format.
fn sample_ring() -> Option<Vec<u8>> {
    let mut ring = format_ring(2, 7, 0).ok()?;
    let config = ActivityLogConfig {
        al_extents: 7,
        al_ring_blocks: 2,
        extent_count: 64,
        updates: AlUpdates::Enabled,
    };
    let mut log = ActivityLog::new(config, 2).ok()?;
    for extent in [3, 5] {
        let range = ExtentRange::covering(extent * (4 << 20), 4096).ok()?;
        let Ok(Begin::NeedsTransaction(write)) = log.begin_write(range) else {
            return None;
        };
        let block = write.encode().ok()?;
        let start = usize::try_from(write.ring_offset_bytes()).ok()?;
        ring.get_mut(start..start + block.len())?
            .copy_from_slice(&block);
        log.transaction_written(write.transaction.seq).ok()?;
    }
    Some(ring)
}

fn meta_activity_log() -> Vec<Seed> {
    let mut seeds = Vec::new();
    if let Some(ring) = sample_ring() {
        let mut compact = vec![2];
        for block in ring.chunks(4096) {
            let trimmed = trim_zeros(block);
            compact.extend_from_slice(&u16::try_from(trimmed.len()).unwrap_or(0).to_be_bytes());
            compact.extend_from_slice(&trimmed);
        }
        seeds.push(seed("meta_activity_log", "ring-hot-3-5", compact));
    }
    let mut format = vec![16];
    format.extend_from_slice(&8_u32.to_be_bytes());
    format.extend_from_slice(&1237_u16.to_be_bytes());
    format.extend_from_slice(&100_u64.to_be_bytes());
    seeds.push(seed("meta_activity_log", "format", format));
    seeds
}

fn meta_bitmap() -> Vec<Seed> {
    let mut seeds = Vec::new();
    let data_bytes: u32 = 300 * 4096 + 100;
    let Ok(mut bitmap) = Bitmap::new(u64::from(data_bytes), 4096) else {
        return seeds;
    };
    for (offset, length) in [(0, 4096), (8192, 40960), (200 * 4096, 90 * 4096)] {
        let _ = bitmap.set(offset, length);
    }
    // The target adds one to the size it reads, so a zero size cannot happen.
    let size_field = (data_bytes - 1).to_be_bytes();
    let mut chunks = vec![0];
    chunks.extend_from_slice(&size_field);
    chunks.push(0);
    if let Ok(encoder) = bitmap.rle_chunks(64) {
        for chunk in encoder {
            chunks.extend_from_slice(&u16::try_from(chunk.len()).unwrap_or(0).to_be_bytes());
            chunks.extend_from_slice(&chunk);
        }
    }
    chunks.extend_from_slice(&200_u16.to_be_bytes());
    seeds.push(seed("meta_bitmap", "rle-chunks", chunks));
    let mut pages = vec![0];
    pages.extend_from_slice(&size_field);
    pages.push(2);
    pages.push(0);
    let image = trim_zeros(bitmap.page(0).unwrap_or_default());
    pages.extend_from_slice(&u16::try_from(image.len()).unwrap_or(0).to_be_bytes());
    pages.extend_from_slice(&image);
    seeds.push(seed("meta_bitmap", "pages", pages));
    seeds
}
