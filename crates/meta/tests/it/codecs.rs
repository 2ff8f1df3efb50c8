//! Property tests of the superblock and transaction codecs: `decode(encode(x)) == x`, and any
//! byte buffer (random, or a valid block with bytes changed and the checksum fixed up) decodes
//! to a value or an error without panicking (issue 3 item 9).

use meta::activity_log::{context_len, SlotUpdate, Transaction, AL_CONTEXT_SLOTS_PER_TRANSACTION};
use meta::superblock::{HISTORY_UUIDS_LEN, NODE_ID_MAX};
use meta::{FollowedPrimary, Layout, PeerFlags, PeerSlot, Superblock, SuperblockFlags};
use proptest::prelude::*;

use crate::layout_properties::config_strategy;

fn flags_strategy() -> impl Strategy<Value = SuperblockFlags> {
    any::<[bool; 7]>().prop_map(|b| SuperblockFlags {
        consistent: b[0],
        was_up_to_date: b[1],
        primary_indicator: b[2],
        crashed_primary: b[3],
        al_disabled: b[4],
        possibly_stale: b[5],
        in_use: b[6],
    })
}

fn superblock_strategy() -> impl Strategy<Value = Superblock> {
    let layout = config_strategy().prop_filter_map("layout must fit", |c| Layout::compute(&c).ok());
    let peers = proptest::collection::vec(
        (
            proptest::option::of(0..=NODE_ID_MAX),
            any::<u64>(),
            any::<[bool; 2]>(),
        ),
        31,
    );
    (
        layout,
        0..=NODE_ID_MAX,
        flags_strategy(),
        any::<u64>(),
        any::<[u64; HISTORY_UUIDS_LEN]>(),
        any::<u64>(),
        peers,
        proptest::option::of((0..=NODE_ID_MAX, 1..=u64::MAX)),
    )
        .prop_map(
            |(
                layout,
                node_id,
                flags,
                current_uuid,
                history_uuids,
                resync_goal_uuid,
                peers,
                followed,
            )| {
                let followed_primary = followed
                    .filter(|&(primary, _)| primary != node_id)
                    .map(|(node_id, seq)| FollowedPrimary { node_id, seq });
                let mut seen = vec![node_id];
                let peers = peers
                    .into_iter()
                    .take(usize::from(layout.config().peer_slots))
                    .map(|(peer_node, bitmap_uuid, f)| match peer_node {
                        Some(id) if !seen.contains(&id) => {
                            seen.push(id);
                            PeerSlot {
                                node_id: Some(id),
                                bitmap_uuid,
                                flags: PeerFlags {
                                    outdated: f[0],
                                    full_sync: f[1],
                                },
                            }
                        }
                        _ => PeerSlot::default(),
                    })
                    .collect();
                Superblock {
                    layout,
                    node_id,
                    flags,
                    current_uuid,
                    history_uuids,
                    resync_goal_uuid,
                    peers,
                    followed_primary,
                }
            },
        )
}

fn transaction_strategy() -> impl Strategy<Value = Transaction> {
    (7_u16..=65534, any::<u64>(), 0_usize..=48).prop_flat_map(|(al_extents, seq, update_count)| {
        let extent = proptest::option::of(0_u32..u32::MAX);
        let updates = proptest::collection::vec((0..al_extents, extent.clone()), update_count);
        let context = proptest::collection::vec(extent, context_len(al_extents));
        (Just(al_extents), Just(seq), updates, 0..al_extents, context).prop_map(
            |(al_extents, seq, updates, context_start, context)| Transaction {
                seq,
                al_extents,
                updates: updates
                    .into_iter()
                    .map(|(slot, extent)| SlotUpdate { slot, extent })
                    .collect(),
                context_start,
                context,
            },
        )
    })
}

/// Recomputes the crc32c of a block whose checksum field is at `crc_offset`.
fn fix_crc(block: &mut [u8], crc_offset: usize) {
    block[crc_offset..crc_offset + 4].fill(0);
    let crc = crc32c::crc32c(block);
    block[crc_offset..crc_offset + 4].copy_from_slice(&crc.to_be_bytes());
}

proptest! {
    #[test]
    fn superblock_round_trips(superblock in superblock_strategy()) {
        let block = superblock.encode().expect("valid superblock encodes");
        prop_assert_eq!(block.len(), 4096);
        prop_assert_eq!(Superblock::decode(&block).expect("decodes"), superblock);
    }

    #[test]
    fn superblock_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = Superblock::decode(&bytes);
    }

    #[test]
    fn superblock_edits_decode_or_refuse(
        superblock in superblock_strategy(),
        edits in proptest::collection::vec((16_usize..4096, any::<u8>()), 1..4),
    ) {
        let mut block = superblock.encode().expect("encodes");
        for (offset, value) in edits {
            block[offset] = value;
        }
        fix_crc(&mut block, 12);
        if let Ok(decoded) = Superblock::decode(&block) {
            // Whatever decodes is canonical: it encodes back to the same bytes.
            prop_assert_eq!(decoded.encode().expect("re-encodes"), block);
        }
    }

    #[test]
    fn transaction_round_trips(transaction in transaction_strategy()) {
        let block = transaction.encode().expect("valid transaction encodes");
        prop_assert_eq!(block.len(), 4096);
        prop_assert_eq!(Transaction::decode(&block).expect("decodes"), transaction);
    }

    #[test]
    fn transaction_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = Transaction::decode(&bytes);
    }

    #[test]
    fn transaction_edits_decode_or_refuse(
        transaction in transaction_strategy(),
        edits in proptest::collection::vec((8_usize..4096, any::<u8>()), 1..4),
    ) {
        let mut block = transaction.encode().expect("encodes");
        for (offset, value) in edits {
            block[offset] = value;
        }
        fix_crc(&mut block, 4);
        if let Ok(decoded) = Transaction::decode(&block) {
            prop_assert!(decoded.updates.len() <= 48);
            prop_assert!(decoded.context.len() <= AL_CONTEXT_SLOTS_PER_TRANSACTION);
            prop_assert_eq!(decoded.encode().expect("re-encodes"), block);
        }
    }
}
