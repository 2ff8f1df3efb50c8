//! What `tandem dump-md` prints: a serde-serializable summary of decoded metadata (for
//! `--json`) and its human-readable text rendering.
//!
//! Invariants: the dump is a pure function of its inputs (no I/O, no clock); generation
//! identifiers are rendered as 16 upper-case hex digits everywhere, text and JSON alike; a peer
//! without a loaded bitmap shows no counts rather than zero.

use std::fmt::Write as _;

use serde::Serialize;

use crate::activity_log::{FullResyncReason, Recovery, AL_EXTENT_BYTES};
use crate::layout::Placement;
use crate::superblock::{uuid_hex, FollowedPrimary, PeerFlags, Superblock, SuperblockFlags};
use crate::Bitmap;

/// What a dump is made from.
#[derive(Debug, Clone, Copy)]
pub struct DumpSources<'a> {
    /// The decoded superblock.
    pub superblock: &'a Superblock,
    /// The activity-log recovery result, if the ring was read.
    pub activity_log: Option<&'a Recovery>,
    /// Loaded bitmaps by peer slot (may be shorter than the slots, or empty).
    pub bitmaps: &'a [Bitmap],
}

/// Where the metadata regions are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutDump {
    /// "internal" or "external".
    pub placement: &'static str,
    /// Backing device size recorded at creation.
    pub backing_bytes: u64,
    /// Bytes exported as data.
    pub data_bytes: u64,
    /// The data size agreed by a resize, when below what the device gives (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_bytes_max: Option<u64>,
    /// Bytes the metadata occupies.
    pub metadata_bytes: u64,
    /// Size of the external metadata area (None when internal).
    pub metadata_area_bytes: Option<u64>,
    /// Superblock offset.
    pub superblock_offset: u64,
    /// Activity-log ring offset.
    pub al_ring_offset: u64,
    /// Activity-log ring size.
    pub al_ring_bytes: u32,
    /// Activity-log cache size the ring was formatted for.
    pub al_extents: u32,
    /// Offset of peer slot 0's bitmap.
    pub bitmaps_offset: u64,
    /// Bytes of each peer's bitmap.
    pub bitmap_bytes_per_peer: u64,
    /// Bytes of data per bitmap bit.
    pub bitmap_granularity_bytes: u32,
    /// Number of peer slots.
    pub peer_slots: u8,
}

/// One peer slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeerDump {
    /// Slot index.
    pub slot: u8,
    /// The peer's node id (None: unused slot).
    pub node_id: Option<u8>,
    /// Bitmap UUID, 16 hex digits.
    pub bitmap_uuid: String,
    /// Flags about the peer.
    pub flags: PeerFlags,
    /// Blocks marked out of sync, if the bitmap was loaded.
    pub out_of_sync_blocks: Option<u64>,
    /// Bytes marked out of sync, if the bitmap was loaded.
    pub out_of_sync_bytes: Option<u64>,
}

/// The activity log's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActivityLogDump {
    /// Extents hot at the last durable transaction.
    pub hot_extents: u64,
    /// Bytes those extents cover (at most; the last extent may be short).
    pub hot_bytes: u64,
    /// The newest valid transaction.
    pub last_seq: Option<u64>,
    /// Ring blocks that did not hold a valid transaction.
    pub invalid_blocks: u32,
    /// Set when recovery would fall back to a full resync.
    pub full_resync: Option<FullResyncReason>,
}

/// Everything `dump-md` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetaDump {
    /// Superblock format version.
    pub version: u32,
    /// This node's id.
    pub node_id: u8,
    /// Geometry.
    pub layout: LayoutDump,
    /// Node flags.
    pub flags: SuperblockFlags,
    /// Current generation identifier.
    pub current_uuid: String,
    /// Non-empty history identifiers, newest first.
    pub history_uuids: Vec<String>,
    /// The generation a (possibly cut-short) resync as target is bringing this node to.
    pub resync_goal_uuid: Option<String>,
    /// The Primary this node followed last, if it lost one.
    pub followed_primary: Option<FollowedPrimary>,
    /// Every peer slot.
    pub peers: Vec<PeerDump>,
    /// The activity log, if the ring was read.
    pub activity_log: Option<ActivityLogDump>,
}

impl MetaDump {
    /// The dump of these sources.
    pub fn new(sources: DumpSources<'_>) -> MetaDump {
        let superblock = sources.superblock;
        MetaDump {
            version: superblock.format_version(),
            node_id: superblock.node_id,
            layout: layout_dump(superblock),
            flags: superblock.flags,
            current_uuid: uuid_hex(superblock.current_uuid),
            history_uuids: superblock
                .history_uuids
                .iter()
                .filter(|&&u| u != 0)
                .map(|&u| uuid_hex(u))
                .collect(),
            resync_goal_uuid: (superblock.resync_goal_uuid != 0)
                .then(|| uuid_hex(superblock.resync_goal_uuid)),
            followed_primary: superblock.followed_primary,
            peers: superblock
                .peers
                .iter()
                .enumerate()
                .map(|(index, peer)| {
                    let bitmap = sources.bitmaps.get(index);
                    PeerDump {
                        slot: u8::try_from(index).unwrap_or(u8::MAX),
                        node_id: peer.node_id,
                        bitmap_uuid: uuid_hex(peer.bitmap_uuid),
                        flags: peer.flags,
                        out_of_sync_blocks: bitmap.map(Bitmap::count_set_blocks),
                        out_of_sync_bytes: bitmap.map(Bitmap::count_set_bytes),
                    }
                })
                .collect(),
            activity_log: sources.activity_log.map(|recovery| ActivityLogDump {
                hot_extents: crate::codec::to_u64(recovery.hot_extents.len()),
                hot_bytes: crate::codec::to_u64(recovery.hot_extents.len()) * AL_EXTENT_BYTES,
                last_seq: recovery.last_seq,
                invalid_blocks: recovery.invalid_blocks,
                full_resync: recovery.full_resync,
            }),
        }
    }

    /// The human-readable, multi-line rendering (ends with a newline).
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let layout = &self.layout;
        let _ = writeln!(
            out,
            "tandem metadata, version {}, node-id {}",
            self.version, self.node_id
        );
        let area = layout
            .metadata_area_bytes
            .map_or(String::new(), |bytes| format!(", area {bytes} bytes"));
        let _ = writeln!(out, "placement:      {}{area}", layout.placement);
        let _ = writeln!(out, "backing size:   {} bytes", layout.backing_bytes);
        let _ = writeln!(out, "data size:      {} bytes", layout.data_bytes);
        if let Some(cap) = layout.data_bytes_max {
            let _ = writeln!(out, "data size cap:  {cap} bytes (agreed by resize)");
        }
        let _ = writeln!(out, "metadata size:  {} bytes", layout.metadata_bytes);
        let _ = writeln!(out, "superblock:     @{}", layout.superblock_offset);
        let _ = writeln!(
            out,
            "activity log:   @{}, {} bytes ({} transactions), al-extents {}",
            layout.al_ring_offset,
            layout.al_ring_bytes,
            layout.al_ring_bytes / 4096,
            layout.al_extents
        );
        let _ = writeln!(
            out,
            "bitmaps:        @{}, {} peer slots x {} bytes, {} bytes per bit",
            layout.bitmaps_offset,
            layout.peer_slots,
            layout.bitmap_bytes_per_peer,
            layout.bitmap_granularity_bytes
        );
        let _ = writeln!(out, "flags:          {}", render_flags(&self.flags));
        let _ = writeln!(out, "current uuid:   {}", self.current_uuid);
        let history = if self.history_uuids.is_empty() {
            "-".to_string()
        } else {
            self.history_uuids.join(":")
        };
        let _ = writeln!(out, "history uuids:  {history}");
        let _ = writeln!(
            out,
            "resync goal:    {}",
            self.resync_goal_uuid.as_deref().unwrap_or("-")
        );
        if let Some(followed) = self.followed_primary {
            let _ = writeln!(
                out,
                "followed:       node {} up to write {}",
                followed.node_id, followed.seq
            );
        }
        for peer in &self.peers {
            let _ = writeln!(out, "{}", render_peer(peer));
        }
        if let Some(al) = &self.activity_log {
            let _ = writeln!(out, "{}", render_activity_log(al));
        }
        out
    }
}

fn layout_dump(superblock: &Superblock) -> LayoutDump {
    let layout = &superblock.layout;
    let config = layout.config();
    let (placement, metadata_area_bytes) = match config.placement {
        Placement::Internal => ("internal", None),
        Placement::External { metadata_bytes } => ("external", Some(metadata_bytes)),
    };
    LayoutDump {
        placement,
        backing_bytes: config.backing_bytes,
        data_bytes: layout.data_bytes(),
        data_bytes_max: config.data_bytes_max,
        metadata_bytes: layout.metadata_bytes(),
        metadata_area_bytes,
        superblock_offset: layout.superblock().offset_bytes,
        al_ring_offset: layout.al_ring().offset_bytes,
        al_ring_bytes: config.al_ring_bytes,
        al_extents: config.al_extents,
        bitmaps_offset: layout.bitmaps().offset_bytes,
        bitmap_bytes_per_peer: layout.bitmap_bytes_per_peer(),
        bitmap_granularity_bytes: config.bitmap_granularity_bytes,
        peer_slots: config.peer_slots,
    }
}

fn render_flags(flags: &SuperblockFlags) -> String {
    let names = [
        (flags.consistent, "consistent"),
        (flags.was_up_to_date, "was-up-to-date"),
        (flags.primary_indicator, "primary-indicator"),
        (flags.crashed_primary, "crashed-primary"),
        (flags.al_disabled, "al-disabled"),
        (flags.possibly_stale, "possibly-stale"),
        (flags.in_use, "in-use"),
    ];
    let on: Vec<&str> = names
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
    if on.is_empty() {
        "-".to_string()
    } else {
        on.join(" ")
    }
}

fn render_peer(peer: &PeerDump) -> String {
    let Some(node_id) = peer.node_id else {
        return format!("peer slot {}:    unused", peer.slot);
    };
    let mut flags = Vec::new();
    if peer.flags.outdated {
        flags.push("outdated");
    }
    if peer.flags.full_sync {
        flags.push("full-sync");
    }
    let flags = if flags.is_empty() {
        "-".to_string()
    } else {
        flags.join(" ")
    };
    let counts = match (peer.out_of_sync_blocks, peer.out_of_sync_bytes) {
        (Some(blocks), Some(bytes)) => format!(", out of sync {blocks} blocks ({bytes} bytes)"),
        _ => String::new(),
    };
    format!(
        "peer slot {}:    node-id {node_id}, bitmap uuid {}, flags {flags}{counts}",
        peer.slot, peer.bitmap_uuid
    )
}

fn render_activity_log(al: &ActivityLogDump) -> String {
    let last = al
        .last_seq
        .map_or("none".to_string(), |seq| seq.to_string());
    let state = match al.full_resync {
        None => format!("{} hot extents ({} bytes)", al.hot_extents, al.hot_bytes),
        Some(FullResyncReason::AlDisabled) => "disabled (al-updates no)".to_string(),
        Some(FullResyncReason::NoValidTransaction) => "no valid transaction".to_string(),
        Some(FullResyncReason::WindowIncomplete { missing_seq }) => {
            format!("incomplete (transaction {missing_seq} missing)")
        }
    };
    format!(
        "al state:       {state}, last transaction {last}, {} invalid ring blocks",
        al.invalid_blocks
    )
}

#[cfg(test)]
mod tests;
