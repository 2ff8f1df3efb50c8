//! The superblock: the 4 KiB block that says "this is tandem metadata", records the layout it
//! was created with, this node's identity and flags, and the generation identifiers.
//!
//! Byte layout (big-endian):
//!
//! | offset | size     | field                      | meaning                                   |
//! |-------:|---------:|----------------------------|-------------------------------------------|
//! | 0      | 8        | `magic`                    | [`SUPERBLOCK_MAGIC`], `"TNDMMETA"`        |
//! | 8      | 4        | `version`                  | [`SUPERBLOCK_VERSION`]                    |
//! | 12     | 4        | `crc`                      | crc32c of the block, this field as zero   |
//! | 16     | 8        | `backing_bytes`            | backing device size at creation           |
//! | 24     | 8        | `metadata_bytes`           | external area size (0 when internal)      |
//! | 32     | 1        | `placement`                | 0 internal, 1 external                    |
//! | 33     | 1        | `peer_slots`               | 1..=31                                    |
//! | 34     | 1        | `node_id`                  | this node, 0..=31                         |
//! | 35     | 1        | reserved                   | zero                                      |
//! | 36     | 4        | `bitmap_granularity_bytes` | bytes per bitmap bit                      |
//! | 40     | 4        | `al_ring_bytes`            | activity-log ring size                    |
//! | 44     | 4        | `al_extents`               | cache size the ring was formatted for     |
//! | 48     | 4        | `flags`                    | [`SuperblockFlags`] bits                  |
//! | 52     | 4        | reserved                   | zero                                      |
//! | 56     | 8        | `data_bytes`               | exported size                             |
//! | 64     | 8 × 4    | offsets                    | superblock, AL ring, bitmaps; bitmap size |
//! | 96     | 8        | `current_uuid`             | current generation identifier             |
//! | 104    | 8 × 32   | `history_uuids`            | newest first, 0 = empty                   |
//! | 360    | 8        | `resync_goal_uuid`         | a sync target's goal generation, 0 = none |
//! | 368    | 8        | `data_bytes_max`           | agreed data size cap, 0 = none (v3)       |
//! | 376    | 8        | reserved                   | zero                                      |
//! | 384    | 16 × 31  | peer slots                 | one per peer, laid out below              |
//! | 880    | 1        | `followed_primary` node    | the Primary last followed (v4)            |
//! | 881    | 7        | reserved                   | zero                                      |
//! | 888    | 8        | `followed_primary` seq     | its last write received, > 0 (v4)         |
//! | 896    | 3200     | reserved                   | zero                                      |
//!
//! A peer slot is the node id (u8, 0xFF when unused), 3 reserved bytes, the flags (u32) and
//! the bitmap uuid (u64).
//!
//! Invariants: `decode(encode(s)) == s` and decode accepts only canonical blocks (reserved bytes
//! zero, unused peer slots all zero with node id 0xFF, no unknown flag bits); the stored offsets
//! always equal the layout recomputed from the stored parameters, so a decoded superblock carries
//! a valid [`Layout`]; decode checks the length, the magic, the version, the checksum and then
//! the fields, so "not tandem metadata" and "newer version" are reported before "corrupt".
//! Version 1 (before `resync_goal_uuid`) is read too, with that field reserved (zero); so is
//! version 2 (before `data_bytes_max`), and version 3 (before `followed_primary`). A superblock
//! is written with the lowest version that holds its fields: version 4 only while it records a
//! followed Primary, version 3 only once a `resize` capped the data size, so metadata that
//! never used them stays readable by older builds.

use crate::codec::{block_crc, store_crc, Reader, Writer};
use crate::layout::{Layout, LayoutConfig, Placement, PEER_SLOTS_MAX, SUPERBLOCK_BYTES};
use crate::MetaError;

/// First eight bytes of the superblock.
pub const SUPERBLOCK_MAGIC: [u8; 8] = *b"TNDMMETA";
/// The newest superblock format version this build writes and reads.
pub const SUPERBLOCK_VERSION: u32 = 4;
/// The version written for a data size cap without a followed Primary.
const SUPERBLOCK_VERSION_CAPPED: u32 = 3;
/// The version written when no field of version 3 or 4 is in use (see the module comment).
const SUPERBLOCK_VERSION_UNCAPPED: u32 = 2;
/// The oldest format version this build reads (version 1 has no `resync_goal_uuid`).
pub const SUPERBLOCK_VERSION_MIN: u32 = 1;
/// Number of history generation identifiers kept.
pub const HISTORY_UUIDS_LEN: usize = 32;
/// Highest node id (DRBD 9 allows 32 nodes).
pub const NODE_ID_MAX: u8 = 31;
/// Current UUID of metadata that was just created (DRBD's `UUID_JUST_CREATED`).
pub const UUID_JUST_CREATED: u64 = 4;
/// Bit 0 of a generation identifier: set while the node that made it was Primary.
pub const UUID_PRIMARY_BIT: u64 = 1;

const SUPERBLOCK_LEN: usize = 4096;
const CRC_OFFSET: usize = 12;
const RESYNC_GOAL_OFFSET: usize = 360;
const DATA_CAP_OFFSET: usize = 368;
const PEERS_OFFSET: usize = 384;
const PEER_SLOT_BYTES: usize = 16;
const FOLLOWED_OFFSET: usize = 880;
const NODE_ID_UNUSED: u8 = 0xFF;
const WHAT: &str = "superblock";

const _: () = assert!(SUPERBLOCK_LEN as u64 == SUPERBLOCK_BYTES);
const _: () = assert!(104 + HISTORY_UUIDS_LEN * 8 <= RESYNC_GOAL_OFFSET);
const _: () = assert!(RESYNC_GOAL_OFFSET + 8 <= DATA_CAP_OFFSET);
const _: () = assert!(DATA_CAP_OFFSET + 8 <= PEERS_OFFSET);
const _: () = assert!(PEERS_OFFSET + PEER_SLOTS_MAX as usize * PEER_SLOT_BYTES <= FOLLOWED_OFFSET);
const _: () = assert!(FOLLOWED_OFFSET + 16 <= SUPERBLOCK_LEN);
const _: () = assert!(UUID_JUST_CREATED & UUID_PRIMARY_BIT == 0);

/// Whether `uuid` carries the primary bit.
pub fn uuid_is_primary(uuid: u64) -> bool {
    uuid & UUID_PRIMARY_BIT != 0
}

/// `uuid` with the primary bit set.
pub fn uuid_set_primary(uuid: u64) -> u64 {
    uuid | UUID_PRIMARY_BIT
}

/// `uuid` with the primary bit cleared (the form compared between nodes).
pub fn uuid_clear_primary(uuid: u64) -> u64 {
    uuid & !UUID_PRIMARY_BIT
}

/// `uuid` as 16 upper-case hex digits, as DRBD prints it (`E54E31513A64A2EE`).
pub fn uuid_hex(uuid: u64) -> String {
    format!("{uuid:016X}")
}

/// The node's flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SuperblockFlags {
    /// The data is consistent (not in the middle of a resync as target).
    pub consistent: bool,
    /// The data was UpToDate when last known.
    pub was_up_to_date: bool,
    /// Set while this node is Primary; found set on restart, it means the primary crashed.
    pub primary_indicator: bool,
    /// A crash of this node as Primary was detected and not yet resolved by a resync.
    pub crashed_primary: bool,
    /// `al-updates no`: the activity log is not maintained.
    pub al_disabled: bool,
    /// A Primary replicated to this node asynchronously (the Selective Replication Manager)
    /// and it has not caught up: it may lack acknowledged writes; promotion needs `--force`.
    pub possibly_stale: bool,
    /// Set while a node has the volume attached, cleared by a clean stop once the bitmaps are
    /// written: found set at attach, the node went down uncleanly, and bits it marked in
    /// memory for absent peers (as a Secondary, without the activity log) may be lost.
    pub in_use: bool,
}

impl SuperblockFlags {
    const BITS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

    fn to_bits(self) -> u32 {
        let values = [
            self.consistent,
            self.was_up_to_date,
            self.primary_indicator,
            self.crashed_primary,
            self.al_disabled,
            self.possibly_stale,
            self.in_use,
        ];
        Self::BITS
            .iter()
            .zip(values)
            .filter(|(_, on)| *on)
            .map(|(bit, _)| bit)
            .sum()
    }

    fn from_bits(bits: u32) -> Result<SuperblockFlags, MetaError> {
        let known: u32 = Self::BITS.iter().sum();
        if bits & !known != 0 {
            return Err(invalid("flags", u64::from(bits)));
        }
        Ok(SuperblockFlags {
            consistent: bits & 1 != 0,
            was_up_to_date: bits & 2 != 0,
            primary_indicator: bits & 4 != 0,
            crashed_primary: bits & 8 != 0,
            al_disabled: bits & 16 != 0,
            possibly_stale: bits & 32 != 0,
            in_use: bits & 64 != 0,
        })
    }
}

/// Flags about one peer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PeerFlags {
    /// The peer's disk is known to be Outdated.
    pub outdated: bool,
    /// The peer needs a full resync (its bitmap counts as all set).
    pub full_sync: bool,
}

impl PeerFlags {
    fn to_bits(self) -> u32 {
        u32::from(self.outdated) | u32::from(self.full_sync) << 1
    }

    fn from_bits(bits: u32) -> Result<PeerFlags, MetaError> {
        if bits & !3 != 0 {
            return Err(invalid("peer.flags", u64::from(bits)));
        }
        Ok(PeerFlags {
            outdated: bits & 1 != 0,
            full_sync: bits & 2 != 0,
        })
    }
}

/// One peer slot: which node it tracks and its generation identifier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerSlot {
    /// The peer's node id, or None for an unused slot (whose other fields are zero).
    pub node_id: Option<u8>,
    /// The bitmap UUID: the current UUID when this peer's bitmap started recording.
    pub bitmap_uuid: u64,
    /// Flags about the peer.
    pub flags: PeerFlags,
}

/// The Primary whose writes this node received last, recorded when it lost that Primary, so
/// that a restart keeps what its reconciliation with the other Secondaries needs (which of
/// two received the later write).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FollowedPrimary {
    /// The Primary's node id (0..=31).
    pub node_id: u8,
    /// The sequence number of the last write received from it (> 0).
    pub seq: u64,
}

/// The decoded superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// The layout the metadata was created with (valid by construction).
    pub layout: Layout,
    /// This node's id (0..=31).
    pub node_id: u8,
    /// This node's flags.
    pub flags: SuperblockFlags,
    /// The current generation identifier.
    pub current_uuid: u64,
    /// Earlier generation identifiers, newest first; 0 = empty.
    pub history_uuids: [u64; HISTORY_UUIDS_LEN],
    /// While this node is (or was, cut short) a sync target: the source's current generation
    /// the resync brings it to; 0 otherwise.
    pub resync_goal_uuid: u64,
    /// One entry per peer slot of the layout (exactly `peer_slots` entries).
    pub peers: Vec<PeerSlot>,
    /// The Primary this node followed last, if it lost one (version 4).
    pub followed_primary: Option<FollowedPrimary>,
}

impl Superblock {
    /// Fresh metadata: current UUID [`UUID_JUST_CREATED`], no history, no flags, unused slots.
    pub fn new(layout: Layout, node_id: u8) -> Result<Superblock, MetaError> {
        let superblock = Superblock {
            layout,
            node_id,
            flags: SuperblockFlags::default(),
            current_uuid: UUID_JUST_CREATED,
            history_uuids: [0; HISTORY_UUIDS_LEN],
            resync_goal_uuid: 0,
            peers: vec![PeerSlot::default(); usize::from(layout.config().peer_slots)],
            followed_primary: None,
        };
        superblock.validate()?;
        Ok(superblock)
    }

    /// Bitmap UUIDs indexed by peer node id (0 where no slot tracks that node), the shape the
    /// generation-identifier comparison uses.
    pub fn bitmap_uuids_by_node_id(&self) -> [u64; NODE_ID_MAX as usize + 1] {
        let mut by_node_id = [0; NODE_ID_MAX as usize + 1];
        for peer in &self.peers {
            let entry = peer
                .node_id
                .and_then(|id| by_node_id.get_mut(usize::from(id)));
            if let Some(entry) = entry {
                *entry = peer.bitmap_uuid;
            }
        }
        by_node_id
    }

    /// The peer slot tracking `node_id`, if any.
    pub fn peer_slot_of(&self, node_id: u8) -> Option<u8> {
        self.peer_slot_index(node_id)
    }

    /// Whether this node's bitmap for `node_id` is counting changes (its bitmap identifier
    /// is set: the peer was away when a generation started).
    pub fn counts_for(&self, node_id: u8) -> bool {
        self.peers
            .iter()
            .any(|peer| peer.node_id == Some(node_id) && peer.bitmap_uuid != 0)
    }

    fn peer_slot_index(&self, node_id: u8) -> Option<u8> {
        let index = self
            .peers
            .iter()
            .position(|peer| peer.node_id == Some(node_id))?;
        u8::try_from(index).ok()
    }

    /// The format version this superblock is written with: the lowest that holds its fields.
    pub fn format_version(&self) -> u32 {
        match (self.followed_primary, self.layout.config().data_bytes_max) {
            (Some(_), _) => SUPERBLOCK_VERSION,
            (None, Some(_)) => SUPERBLOCK_VERSION_CAPPED,
            (None, None) => SUPERBLOCK_VERSION_UNCAPPED,
        }
    }

    /// The 4 KiB block image, or an error if a field breaks the format's rules.
    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        self.validate()?;
        let config = self.layout.config();
        let mut writer = Writer::with_capacity(SUPERBLOCK_LEN);
        writer.bytes(&SUPERBLOCK_MAGIC);
        writer.u32(self.format_version());
        writer.u32(0);
        writer.u64(config.backing_bytes);
        let (placement, metadata_bytes) = match config.placement {
            Placement::Internal => (0, 0),
            Placement::External { metadata_bytes } => (1, metadata_bytes),
        };
        writer.u64(metadata_bytes);
        writer.u8(placement);
        writer.u8(config.peer_slots);
        writer.u8(self.node_id);
        writer.u8(0);
        writer.u32(config.bitmap_granularity_bytes);
        writer.u32(config.al_ring_bytes);
        writer.u32(config.al_extents);
        writer.u32(self.flags.to_bits());
        writer.u32(0);
        for value in stored_geometry(&self.layout) {
            writer.u64(value.1);
        }
        writer.u64(self.current_uuid);
        for uuid in self.history_uuids {
            writer.u64(uuid);
        }
        writer.zeros(RESYNC_GOAL_OFFSET - writer.len());
        writer.u64(self.resync_goal_uuid);
        writer.u64(config.data_bytes_max.unwrap_or(0));
        writer.zeros(PEERS_OFFSET - writer.len());
        for index in 0..usize::from(PEER_SLOTS_MAX) {
            let peer = self.peers.get(index).copied().unwrap_or_default();
            writer.u8(peer.node_id.unwrap_or(NODE_ID_UNUSED));
            writer.zeros(3);
            writer.u32(peer.flags.to_bits());
            writer.u64(peer.bitmap_uuid);
        }
        if let Some(followed) = self.followed_primary {
            writer.zeros(FOLLOWED_OFFSET - writer.len());
            writer.u8(followed.node_id);
            writer.zeros(7);
            writer.u64(followed.seq);
        }
        let mut block = writer.finish_padded(SUPERBLOCK_LEN);
        let crc = block_crc(&block, CRC_OFFSET);
        store_crc(&mut block, CRC_OFFSET, crc);
        Ok(block)
    }

    /// Decodes a superblock image (at least 4 KiB; bytes past 4 KiB are ignored).
    pub fn decode(bytes: &[u8]) -> Result<Superblock, MetaError> {
        if bytes.len() < SUPERBLOCK_LEN {
            return Err(MetaError::Truncated {
                what: WHAT,
                needed: SUPERBLOCK_LEN,
                actual: bytes.len(),
            });
        }
        let block = bytes.get(..SUPERBLOCK_LEN).unwrap_or(bytes);
        let mut reader = Reader::new(block, WHAT);
        let magic: [u8; 8] = reader.array()?;
        if magic != SUPERBLOCK_MAGIC {
            return Err(MetaError::NotTandemMetadata { found: magic });
        }
        let version = reader.u32()?;
        if !(SUPERBLOCK_VERSION_MIN..=SUPERBLOCK_VERSION).contains(&version) {
            return Err(MetaError::UnsupportedVersion {
                version,
                supported: SUPERBLOCK_VERSION,
            });
        }
        let stored = reader.u32()?;
        let computed = block_crc(block, CRC_OFFSET);
        if stored != computed {
            return Err(MetaError::ChecksumMismatch {
                what: WHAT,
                stored,
                computed,
            });
        }
        let data_bytes_max = data_cap_of(block, version)?;
        let (layout, node_id, flags) = decode_layout(&mut reader, data_bytes_max)?;
        let current_uuid = reader.u64()?;
        let mut history_uuids = [0; HISTORY_UUIDS_LEN];
        for uuid in &mut history_uuids {
            *uuid = reader.u64()?;
        }
        reader.reserved(RESYNC_GOAL_OFFSET - reader.position())?;
        let resync_goal_uuid = if version >= 2 { reader.u64()? } else { 0 };
        if version >= 3 {
            reader.u64()?; // data_bytes_max, read ahead of the layout by data_cap_of
        }
        reader.reserved(PEERS_OFFSET - reader.position())?;
        let peers = decode_peers(&mut reader, layout.config().peer_slots)?;
        reader.reserved(FOLLOWED_OFFSET - reader.position())?;
        let followed_primary = if version >= 4 {
            let node_id = reader.u8()?;
            reader.reserved(7)?;
            let seq = reader.u64()?;
            // Version 4 is written only with a record (`format_version`): anything else is
            // not an encoding this code makes.
            if seq == 0 {
                return Err(invalid("followed_primary.seq", 0));
            }
            Some(FollowedPrimary { node_id, seq })
        } else {
            None
        };
        reader.reserved(SUPERBLOCK_LEN - reader.position())?;
        let superblock = Superblock {
            layout,
            node_id,
            flags,
            current_uuid,
            history_uuids,
            resync_goal_uuid,
            peers,
            followed_primary,
        };
        superblock.validate()?;
        Ok(superblock)
    }

    /// Checks the on-disk layout against the one the current configuration and device sizes
    /// give. `al-extents` is not compared: it may change between runs (format the ring anew).
    pub fn check_layout(&self, configured: &Layout) -> Result<(), MetaError> {
        let (disk, now) = (self.layout.config(), configured.config());
        let pairs = [
            (
                "placement",
                placement_code(disk.placement),
                placement_code(now.placement),
            ),
            (
                "metadata size",
                metadata_bytes(disk.placement),
                metadata_bytes(now.placement),
            ),
            ("backing size", disk.backing_bytes, now.backing_bytes),
            (
                "peer slots",
                u64::from(disk.peer_slots),
                u64::from(now.peer_slots),
            ),
            (
                "bitmap granularity",
                u64::from(disk.bitmap_granularity_bytes),
                u64::from(now.bitmap_granularity_bytes),
            ),
            (
                "activity-log ring size",
                u64::from(disk.al_ring_bytes),
                u64::from(now.al_ring_bytes),
            ),
            (
                "data size cap",
                disk.data_bytes_max.unwrap_or(0),
                now.data_bytes_max.unwrap_or(0),
            ),
            (
                "data size",
                self.layout.data_bytes(),
                configured.data_bytes(),
            ),
        ];
        for (field, on_disk, configured) in pairs {
            if on_disk != configured {
                return Err(MetaError::LayoutMismatch {
                    field,
                    on_disk,
                    configured,
                });
            }
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), MetaError> {
        if self.node_id > NODE_ID_MAX {
            return Err(invalid("node_id", u64::from(self.node_id)));
        }
        if let Some(followed) = self.followed_primary {
            if followed.node_id > NODE_ID_MAX || followed.node_id == self.node_id {
                return Err(invalid(
                    "followed_primary.node_id",
                    u64::from(followed.node_id),
                ));
            }
            if followed.seq == 0 {
                return Err(invalid("followed_primary.seq", 0));
            }
        }
        if self.peers.len() != usize::from(self.layout.config().peer_slots) {
            return Err(invalid("peers.len", crate::codec::to_u64(self.peers.len())));
        }
        let mut seen = [false; NODE_ID_MAX as usize + 1];
        for peer in &self.peers {
            let Some(node_id) = peer.node_id else {
                if *peer != PeerSlot::default() {
                    return Err(invalid("unused peer slot", peer.bitmap_uuid));
                }
                continue;
            };
            let fresh = seen.get_mut(usize::from(node_id)).filter(|seen| !**seen);
            match fresh {
                Some(slot) if node_id != self.node_id => *slot = true,
                _ => return Err(invalid("peer.node_id", u64::from(node_id))),
            }
        }
        Ok(())
    }
}

/// The stored offsets and sizes, in on-disk order.
fn stored_geometry(layout: &Layout) -> [(&'static str, u64); 5] {
    [
        ("data_bytes", layout.data_bytes()),
        ("superblock offset", layout.superblock().offset_bytes),
        ("al_ring offset", layout.al_ring().offset_bytes),
        ("bitmaps offset", layout.bitmaps().offset_bytes),
        ("bitmap_bytes_per_peer", layout.bitmap_bytes_per_peer()),
    ]
}

/// The data size cap of a version 3 or 4 block (None for older versions and for 0): the layout
/// decoded before it depends on it.
fn data_cap_of(block: &[u8], version: u32) -> Result<Option<u64>, MetaError> {
    if version < 3 {
        return Ok(None);
    }
    let bytes = block
        .get(DATA_CAP_OFFSET..DATA_CAP_OFFSET + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .ok_or(MetaError::Truncated {
            what: WHAT,
            needed: DATA_CAP_OFFSET + 8,
            actual: block.len(),
        })?;
    // Version 3 is written only for a capped size (`format_version`): a zero cap there is
    // not an encoding this code makes, so it is refused rather than read as "no cap" (which
    // would write back as version 2, another block). Version 4 may have no cap.
    match u64::from_be_bytes(bytes) {
        0 if version == SUPERBLOCK_VERSION_CAPPED => Err(invalid("data_bytes_max", 0)),
        0 => Ok(None),
        cap => Ok(Some(cap)),
    }
}

fn decode_layout(
    reader: &mut Reader<'_>,
    data_bytes_max: Option<u64>,
) -> Result<(Layout, u8, SuperblockFlags), MetaError> {
    let backing_bytes = reader.u64()?;
    let metadata_bytes = reader.u64()?;
    let placement = match reader.u8()? {
        0 if metadata_bytes == 0 => Placement::Internal,
        0 => return Err(invalid("metadata_bytes", metadata_bytes)),
        1 => Placement::External { metadata_bytes },
        other => return Err(invalid("placement", u64::from(other))),
    };
    let peer_slots = reader.u8()?;
    let node_id = reader.u8()?;
    reader.reserved(1)?;
    let config = LayoutConfig {
        placement,
        backing_bytes,
        peer_slots,
        bitmap_granularity_bytes: reader.u32()?,
        al_ring_bytes: reader.u32()?,
        al_extents: reader.u32()?,
        data_bytes_max,
    };
    let flags = SuperblockFlags::from_bits(reader.u32()?)?;
    reader.reserved(4)?;
    let layout = Layout::compute(&config).map_err(MetaError::inside_superblock)?;
    for (field, computed) in stored_geometry(&layout) {
        let stored = reader.u64()?;
        if stored != computed {
            return Err(MetaError::SuperblockLayoutMismatch {
                field,
                stored,
                computed,
            });
        }
    }
    Ok((layout, node_id, flags))
}

fn decode_peers(reader: &mut Reader<'_>, peer_slots: u8) -> Result<Vec<PeerSlot>, MetaError> {
    let mut peers = Vec::with_capacity(usize::from(peer_slots));
    for index in 0..PEER_SLOTS_MAX {
        let node_id = reader.u8()?;
        reader.reserved(3)?;
        let flags = PeerFlags::from_bits(reader.u32()?)?;
        let bitmap_uuid = reader.u64()?;
        let node_id = (node_id != NODE_ID_UNUSED).then_some(node_id);
        let peer = PeerSlot {
            node_id,
            bitmap_uuid,
            flags,
        };
        if index < peer_slots {
            peers.push(peer);
        } else if peer != PeerSlot::default() {
            return Err(invalid("peer slot past peer_slots", u64::from(index)));
        }
    }
    Ok(peers)
}

fn placement_code(placement: Placement) -> u64 {
    match placement {
        Placement::Internal => 0,
        Placement::External { .. } => 1,
    }
}

fn metadata_bytes(placement: Placement) -> u64 {
    match placement {
        Placement::Internal => 0,
        Placement::External { metadata_bytes } => metadata_bytes,
    }
}

fn invalid(field: &'static str, value: u64) -> MetaError {
    MetaError::FieldInvalid {
        what: WHAT,
        field,
        value,
    }
}

#[cfg(test)]
mod tests;
