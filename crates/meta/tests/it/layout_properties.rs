//! Properties of [`meta::Layout::compute`] over random configurations: regions aligned and
//! disjoint, internal data maximal (issue 3 item 1: "the exported size shrinks accordingly").

use meta::layout::{LayoutConfig, Placement, BLOCK_BYTES};
use meta::{Layout, MetaError};
use proptest::prelude::*;

pub fn config_strategy() -> impl Strategy<Value = LayoutConfig> {
    (
        any::<bool>(),
        (1_u64 << 14)..(1_u64 << 42),
        1_u8..=31,
        12_u32..=20,
        2_u32..=16,
        7_u32..=65534,
        0_u64..(1 << 20),
    )
        .prop_map(
            |(internal, backing_bytes, peer_slots, shift, ring_blocks, al_extents, extra)| {
                let al_extents =
                    al_extents.min(meta::activity_log::al_extents_max(ring_blocks * 4096));
                let mut config = LayoutConfig {
                    placement: Placement::Internal,
                    backing_bytes,
                    peer_slots,
                    bitmap_granularity_bytes: 1 << shift,
                    al_ring_bytes: ring_blocks * 4096,
                    al_extents,
                    data_bytes_max: None,
                };
                if !internal {
                    config.placement = Placement::External {
                        metadata_bytes: u64::MAX,
                    };
                    let needed =
                        Layout::compute(&config).map_or(0, |layout| layout.metadata_bytes());
                    config.placement = Placement::External {
                        metadata_bytes: needed + extra,
                    };
                }
                config
            },
        )
}

proptest! {
    #[test]
    fn regions_are_aligned_disjoint_and_data_is_maximal(config in config_strategy()) {
        let layout = match Layout::compute(&config) {
            Ok(layout) => layout,
            Err(MetaError::BackingTooSmall { .. }) => return Ok(()),
            Err(other) => return Err(TestCaseError::fail(format!("{other}"))),
        };
        let mut regions = vec![layout.superblock(), layout.al_ring()];
        for slot in 0..config.peer_slots {
            regions.push(layout.bitmap(slot).expect("slot exists"));
        }
        regions.sort_by_key(|region| region.offset_bytes);
        for pair in regions.windows(2) {
            prop_assert!(pair[0].end_bytes() <= pair[1].offset_bytes);
        }
        for region in &regions {
            prop_assert_eq!(region.offset_bytes % BLOCK_BYTES, 0);
        }
        prop_assert_eq!(layout.data_bytes() % BLOCK_BYTES, 0);
        let granularity = u64::from(config.bitmap_granularity_bytes);
        prop_assert!(layout.bitmap_bytes_per_peer() * 8 * granularity >= layout.data_bytes());
        match config.placement {
            Placement::Internal => {
                prop_assert!(layout.data_bytes() <= regions[0].offset_bytes);
                prop_assert!(regions.last().expect("regions").end_bytes() <= config.backing_bytes);
                // One more data block would not fit with its metadata.
                let bigger = layout.data_bytes() + BLOCK_BYTES;
                let bitmap =
                    meta::layout::bitmap_bytes_per_peer(bigger, config.bitmap_granularity_bytes);
                let needed = bigger
                    + 4096
                    + u64::from(config.al_ring_bytes)
                    + bitmap * u64::from(config.peer_slots);
                prop_assert!(needed > config.backing_bytes / BLOCK_BYTES * BLOCK_BYTES);
            }
            Placement::External { metadata_bytes } => {
                let whole_blocks = config.backing_bytes / BLOCK_BYTES * BLOCK_BYTES;
                prop_assert_eq!(layout.data_bytes(), whole_blocks);
                prop_assert!(regions.last().expect("regions").end_bytes() <= metadata_bytes);
                let mut smaller = config;
                smaller.placement =
                    Placement::External { metadata_bytes: layout.metadata_bytes() - 1 };
                let refused = matches!(
                    Layout::compute(&smaller),
                    Err(MetaError::MetadataAreaTooSmall { .. })
                );
                prop_assert!(refused);
            }
        }
    }
}
