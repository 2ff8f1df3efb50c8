//! Fuzz target `meta_superblock`: the superblock decoder (and, through it, the layout
//! computation from stored parameters), and `dump-md`'s rendering of what it decoded.
//!
//! Input: one mode byte, then the block (zero-padded to 4 KiB unless mode bit 3 is set). Mode
//! bit 0 set: the harness writes the magic and version; bit 1 set: it writes the right CRC,
//! so the fuzzer explores the fields behind the checksum. Bit 2 set: the input is instead a
//! layout configuration given to [`Layout::compute`] directly.
//!
//! Properties: decoding never panics; a decoded superblock of the current version re-encodes
//! to exactly the 4 KiB it came from, one of an older version to a block that decodes to the
//! same superblock (older versions are written back as the current one); its layout matches itself;
//! every peer slot with a node id is found by that id; the `dump-md` text and JSON render. A
//! computed layout has 4 KiB-aligned, non-overlapping regions, per-peer bitmaps inside the bitmap
//! region, and (internal) fits the backing device.

use meta::dump::DumpSources;
use meta::layout::{LayoutConfig, Placement, BLOCK_BYTES};
use meta::superblock::{SUPERBLOCK_MAGIC, SUPERBLOCK_VERSION};
use meta::{Layout, MetaDump, Superblock};

use crate::input::Input;

/// The superblock's size.
const SUPERBLOCK_LEN: usize = 4096;
/// Offset of the CRC field.
const CRC_OFFSET: usize = 12;

/// The target's body.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 4 != 0 {
        return check_layout_config(rest);
    }
    let mut block = rest.to_vec();
    if mode & 8 == 0 && block.len() < SUPERBLOCK_LEN {
        block.resize(SUPERBLOCK_LEN, 0);
    }
    if mode & 1 != 0 {
        write_at(&mut block, 0, &SUPERBLOCK_MAGIC);
        write_at(&mut block, 8, &SUPERBLOCK_VERSION.to_be_bytes());
    }
    if mode & 2 != 0 {
        let crc = crc_with_field_zero(block.get(..SUPERBLOCK_LEN).unwrap_or(&block));
        write_at(&mut block, CRC_OFFSET, &crc.to_be_bytes());
    }
    let superblock = match Superblock::decode(&block) {
        Ok(superblock) => superblock,
        Err(error) => {
            let _ = error.to_string();
            return;
        }
    };
    let encoded = superblock.encode();
    let version = block
        .get(8..12)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes);
    if version == Some(SUPERBLOCK_VERSION) {
        assert_eq!(
            encoded.as_deref().ok(),
            block.get(..SUPERBLOCK_LEN),
            "superblock round trip"
        );
    } else {
        let again = encoded
            .as_deref()
            .ok()
            .and_then(|bytes| Superblock::decode(bytes).ok());
        assert_eq!(
            again.as_ref(),
            Some(&superblock),
            "an older version round trip"
        );
    }
    assert_eq!(superblock.check_layout(&superblock.layout).ok(), Some(()));
    check_regions(&superblock.layout);
    for (index, peer) in superblock.peers.iter().enumerate() {
        if let Some(node_id) = peer.node_id {
            let slot = superblock.peer_slot_of(node_id).map(usize::from);
            assert_eq!(slot, Some(index), "a peer slot is found by its node id");
        }
    }
    let dump = MetaDump::new(DumpSources {
        superblock: &superblock,
        activity_log: None,
        bitmaps: &[],
    });
    assert!(!dump.render_text().is_empty());
    assert!(serde_json::to_string(&dump).is_ok());
}

/// Computes a layout from fuzzed parameters and checks its regions.
fn check_layout_config(bytes: &[u8]) {
    let mut input = Input::new(bytes);
    let placement = match input.u8() & 1 {
        0 => Placement::Internal,
        _ => Placement::External {
            metadata_bytes: input.u64(),
        },
    };
    let mut config = LayoutConfig::new(placement, input.u64(), input.u8());
    if input.bool() {
        config.bitmap_granularity_bytes = input.u32();
        config.al_ring_bytes = input.u32();
        config.al_extents = input.u32();
    }
    if let Ok(layout) = Layout::compute(&config) {
        check_regions(&layout);
    }
}

/// The layout invariants, checked from outside.
fn check_regions(layout: &Layout) {
    let config = layout.config();
    let regions = [layout.superblock(), layout.al_ring(), layout.bitmaps()];
    for region in regions {
        assert!(
            region.offset_bytes.is_multiple_of(BLOCK_BYTES),
            "aligned start"
        );
        assert!(
            region.length_bytes.is_multiple_of(BLOCK_BYTES),
            "aligned length"
        );
        assert!(region
            .offset_bytes
            .checked_add(region.length_bytes)
            .is_some());
    }
    for (index, a) in regions.iter().enumerate() {
        for b in regions.iter().skip(index + 1) {
            let apart = a.end_bytes() <= b.offset_bytes || b.end_bytes() <= a.offset_bytes;
            assert!(apart, "regions never overlap: {a:?} {b:?}");
        }
    }
    let data = layout.data_bytes();
    assert!(
        data > 0 && data.is_multiple_of(BLOCK_BYTES),
        "data size {data}"
    );
    for slot in 0..config.peer_slots {
        let bitmap = layout.bitmap(slot);
        assert!(bitmap.is_ok(), "slot {slot} has a bitmap");
        if let Ok(bitmap) = bitmap {
            assert!(bitmap.offset_bytes >= layout.bitmaps().offset_bytes);
            assert!(bitmap.end_bytes() <= layout.bitmaps().end_bytes());
        }
    }
    let end = regions.iter().map(|region| region.end_bytes()).max();
    match config.placement {
        Placement::Internal => {
            assert!(end.is_some_and(|end| end <= config.backing_bytes));
            assert!(
                data <= layout
                    .bitmaps()
                    .offset_bytes
                    .min(layout.al_ring().offset_bytes)
            );
        }
        Placement::External { metadata_bytes } => {
            assert!(end.is_some_and(|end| end <= metadata_bytes));
            assert!(data <= config.backing_bytes);
        }
    }
}

/// The crc32c of a 4 KiB block with the CRC field taken as zero (the superblock's rule).
pub(crate) fn crc_with_field_zero(block: &[u8]) -> u32 {
    let mut copy = block.to_vec();
    write_at(&mut copy, CRC_OFFSET, &[0; 4]);
    crc32c::crc32c(&copy)
}

/// Writes `bytes` at `offset` of `block`, as far as the block reaches.
pub(crate) fn write_at(block: &mut [u8], offset: usize, bytes: &[u8]) {
    let end = offset.saturating_add(bytes.len()).min(block.len());
    if let Some(target) = block.get_mut(offset..end) {
        let len = target.len();
        target.copy_from_slice(bytes.get(..len).unwrap_or_default());
    }
}
