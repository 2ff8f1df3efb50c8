//! Unit tests of the superblock codec: a round trip and one test per refusal (issue 3 item 9:
//! bad checksum, wrong magic or version, truncated, inconsistent metadata are refused).

use super::*;
use crate::codec::{block_crc, store_crc};

fn layout() -> Layout {
    let mut config = LayoutConfig::new(Placement::Internal, 1 << 30, 2);
    config.al_extents = 127;
    Layout::compute(&config).expect("valid layout")
}

fn sample() -> Superblock {
    let mut superblock = Superblock::new(layout(), 0).expect("valid");
    superblock.current_uuid = 0xE54E_3151_3A64_A2EE;
    superblock.history_uuids[0] = 0x35BC_9714_2AF7_A8A4;
    superblock.resync_goal_uuid = 0x0123_4567_89AB_CDEE;
    superblock.flags.consistent = true;
    superblock.flags.primary_indicator = true;
    superblock.peers[1] = PeerSlot {
        node_id: Some(1),
        bitmap_uuid: 0x66E6_7F43_AB59_AB30,
        flags: PeerFlags {
            outdated: true,
            full_sync: false,
        },
    };
    superblock
}

/// A predicate on the error a case must produce.
type ErrorCheck = fn(&MetaError) -> bool;

/// Changes `block` with `edit` and recomputes the checksum, so only the edit is wrong.
fn edited(edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut block = sample().encode().expect("encodes");
    edit(&mut block);
    let crc = block_crc(&block, CRC_OFFSET);
    store_crc(&mut block, CRC_OFFSET, crc);
    block
}

#[test]
fn round_trip_and_fresh_values() {
    let superblock = sample();
    let block = superblock.encode().expect("encodes");
    assert_eq!(block.len(), 4096);
    assert_eq!(&block[..8], b"TNDMMETA");
    assert_eq!(Superblock::decode(&block), Ok(superblock.clone()));
    assert_eq!(superblock.peer_slot_of(1), Some(1));
    assert_eq!(superblock.peer_slot_of(2), None);
    let by_node_id = superblock.bitmap_uuids_by_node_id();
    assert_eq!(
        (by_node_id[1], by_node_id[0], by_node_id[31]),
        (0x66E6_7F43_AB59_AB30, 0, 0)
    );
    let fresh = Superblock::new(layout(), 3).expect("valid");
    assert_eq!(fresh.current_uuid, UUID_JUST_CREATED);
    assert_eq!(fresh.peers, vec![PeerSlot::default(); 2]);
}

/// Each block is refused with the error its check expects.
fn check_refusals(cases: Vec<(&str, Vec<u8>, ErrorCheck)>) {
    for (name, block, check) in cases {
        let error = Superblock::decode(&block).expect_err(name);
        assert!(check(&error), "{name}: {error}");
    }
}

#[test]
fn refusals_of_the_block_each_with_its_own_error() {
    let good = sample().encode().expect("encodes");
    let mut bad_magic = good.clone();
    bad_magic[0] = b'X';
    let mut bad_crc = good.clone();
    bad_crc[2000] ^= 1;
    let cases: Vec<(&str, Vec<u8>, ErrorCheck)> = vec![
        ("truncated", good[..4095].to_vec(), |e| {
            matches!(
                e,
                MetaError::Truncated {
                    needed: 4096,
                    actual: 4095,
                    ..
                }
            )
        }),
        ("zeros", vec![0; 4096], |e| {
            matches!(e, MetaError::NotTandemMetadata { .. })
        }),
        ("magic", bad_magic, |e| {
            matches!(e, MetaError::NotTandemMetadata { .. })
        }),
        ("version", edited(|b| b[11] = 5), |e| {
            matches!(
                e,
                MetaError::UnsupportedVersion {
                    version: 5,
                    supported: 4
                }
            )
        }),
        ("version 1 with a resync goal", edited(|b| b[11] = 1), |e| {
            matches!(e, MetaError::ReservedNotZero { offset: 360, .. })
        }),
        ("checksum", bad_crc, |e| {
            matches!(e, MetaError::ChecksumMismatch { .. })
        }),
        (
            "granularity",
            edited(|b| b[36..40].copy_from_slice(&12288_u32.to_be_bytes())),
            |e| {
                matches!(
                    e,
                    MetaError::SuperblockLayoutInvalid { source }
                        if matches!(**source, MetaError::GranularityInvalid { .. })
                )
            },
        ),
    ];
    check_refusals(cases);
}

#[test]
fn refusals_of_fields_each_with_its_own_error() {
    let cases: Vec<(&str, Vec<u8>, ErrorCheck)> = vec![
        (
            "offset past end",
            edited(|b| b[64..72].copy_from_slice(&(1_u64 << 40).to_be_bytes())),
            |e| {
                matches!(
                    e,
                    MetaError::SuperblockLayoutMismatch {
                        field: "superblock offset",
                        ..
                    }
                )
            },
        ),
        ("data size", edited(|b| b[63] ^= 0x10), |e| {
            matches!(
                e,
                MetaError::SuperblockLayoutMismatch {
                    field: "data_bytes",
                    ..
                }
            )
        }),
        ("placement", edited(|b| b[32] = 7), |e| {
            matches!(
                e,
                MetaError::FieldInvalid {
                    field: "placement",
                    ..
                }
            )
        }),
        ("flags", edited(|b| b[48] = 0x80), |e| {
            matches!(e, MetaError::FieldInvalid { field: "flags", .. })
        }),
        ("node id", edited(|b| b[34] = 32), |e| {
            matches!(
                e,
                MetaError::FieldInvalid {
                    field: "node_id",
                    ..
                }
            )
        }),
        ("peer is self", edited(|b| b[384 + 16] = 0), |e| {
            matches!(
                e,
                MetaError::FieldInvalid {
                    field: "peer.node_id",
                    ..
                }
            )
        }),
        (
            "slot past peer_slots",
            edited(|b| b[384 + 2 * 16] = 5),
            |e| {
                matches!(
                    e,
                    MetaError::FieldInvalid {
                        field: "peer slot past peer_slots",
                        ..
                    }
                )
            },
        ),
        ("reserved", edited(|b| b[4000] = 1), |e| {
            matches!(e, MetaError::ReservedNotZero { offset: 4000, .. })
        }),
    ];
    check_refusals(cases);
}

#[test]
fn error_messages_name_the_problem() {
    let mut block = vec![0; 4096];
    block[..8].copy_from_slice(b"NOTMETA!");
    let message = Superblock::decode(&block)
        .expect_err("wrong magic")
        .to_string();
    assert!(message.starts_with("not tandem metadata"), "{message}");
    let message = Superblock::decode(&block[..10])
        .expect_err("short")
        .to_string();
    assert_eq!(message, "superblock is truncated: 10 bytes, need 4096");
}

#[test]
fn encode_refuses_invalid_values() {
    let mut superblock = sample();
    superblock.peers.pop();
    assert!(matches!(
        superblock.encode(),
        Err(MetaError::FieldInvalid {
            field: "peers.len",
            ..
        })
    ));
    let mut superblock = sample();
    superblock.peers[0] = superblock.peers[1];
    assert!(matches!(
        superblock.encode(),
        Err(MetaError::FieldInvalid {
            field: "peer.node_id",
            ..
        })
    ));
    let mut superblock = sample();
    superblock.peers[0].bitmap_uuid = 9;
    assert!(matches!(
        superblock.encode(),
        Err(MetaError::FieldInvalid {
            field: "unused peer slot",
            ..
        })
    ));
    assert!(Superblock::new(layout(), 32).is_err());
}

#[test]
fn check_layout_names_the_changed_parameter() {
    let superblock = sample();
    assert_eq!(superblock.check_layout(&layout()), Ok(()));
    let mut config = *layout().config();
    config.al_extents = 1237;
    assert_eq!(
        superblock.check_layout(&Layout::compute(&config).expect("valid")),
        Ok(()),
        "al-extents may change"
    );
    config.backing_bytes += 1 << 20;
    let grown = Layout::compute(&config).expect("valid");
    assert!(matches!(
        superblock.check_layout(&grown),
        Err(MetaError::LayoutMismatch {
            field: "backing size",
            ..
        })
    ));
    config.backing_bytes -= 1 << 20;
    config.peer_slots = 3;
    let more_peers = Layout::compute(&config).expect("valid");
    assert!(matches!(
        superblock.check_layout(&more_peers),
        Err(MetaError::LayoutMismatch {
            field: "peer slots",
            on_disk: 2,
            configured: 3
        })
    ));
}

#[test]
fn uuid_helpers() {
    let cases = [
        (0_u64, "0000000000000000"),
        (UUID_JUST_CREATED, "0000000000000004"),
        (0xE54E_3151_3A64_A2EE, "E54E31513A64A2EE"),
    ];
    for (uuid, hex) in cases {
        assert_eq!(uuid_hex(uuid), hex);
    }
    assert!(uuid_is_primary(uuid_set_primary(0x10)));
    assert!(!uuid_is_primary(uuid_clear_primary(0x11)));
    assert_eq!(uuid_clear_primary(uuid_set_primary(0x10)), 0x10);
}

#[test]
fn fields_land_where_the_table_says() {
    let block = sample().encode().expect("encodes");
    let u64_at =
        |offset: usize| u64::from_be_bytes(block[offset..offset + 8].try_into().expect("8 bytes"));
    assert_eq!(
        u32::from_be_bytes(block[8..12].try_into().expect("4 bytes")),
        SUPERBLOCK_VERSION_UNCAPPED,
        "no data size cap: version 2"
    );
    assert_eq!(u64_at(16), 1 << 30, "backing_bytes");
    assert_eq!(
        (block[32], block[33], block[34]),
        (0, 2, 0),
        "placement, peer_slots, node_id"
    );
    assert_eq!(
        u32::from_be_bytes(block[48..52].try_into().expect("4 bytes")),
        0b101,
        "flags"
    );
    assert_eq!(u64_at(56), layout().data_bytes());
    assert_eq!(u64_at(96), 0xE54E_3151_3A64_A2EE, "current uuid");
    assert_eq!(u64_at(104), 0x35BC_9714_2AF7_A8A4, "history[0]");
    assert_eq!(u64_at(360), 0x0123_4567_89AB_CDEE, "resync goal");
    assert_eq!(block[384], 0xFF, "slot 0 unused");
    assert_eq!(
        (block[384 + 16], u64_at(384 + 24)),
        (1, 0x66E6_7F43_AB59_AB30),
        "slot 1"
    );
    assert_eq!(block[384 + 2 * 16], 0xFF, "slot 2 (past peer_slots) unused");
}

/// Version 1 metadata (before the resync goal) is read, with no goal; it is written back as
/// version 2 (no data size cap, so version 3 is not needed).
#[test]
fn version_1_is_read_without_a_resync_goal() {
    let mut superblock = sample();
    superblock.resync_goal_uuid = 0;
    let mut block = superblock.encode().expect("encodes");
    block[11] = 1;
    let crc = block_crc(&block, CRC_OFFSET);
    store_crc(&mut block, CRC_OFFSET, crc);
    let decoded = Superblock::decode(&block).expect("version 1 decodes");
    assert_eq!(decoded, superblock);
    let again = decoded.encode().expect("encodes");
    assert_eq!(
        u32::from_be_bytes(again[8..12].try_into().expect("4 bytes")),
        SUPERBLOCK_VERSION_UNCAPPED
    );
}

/// A data size cap (`resize --size`, or a size smaller than this device gives) is kept at
/// offset 368 in a version 3 block and decodes to the same capped layout; a version 2 block
/// with a non-zero byte there is refused as non-canonical.
#[test]
fn a_data_size_cap_needs_version_3() {
    let mut config = *layout().config();
    config.data_bytes_max = Some(512 << 20);
    let capped = Layout::compute(&config).expect("valid capped layout");
    assert_eq!(capped.data_bytes(), 512 << 20);
    let mut superblock = sample();
    superblock.layout = capped;
    let block = superblock.encode().expect("encodes");
    assert_eq!(
        u32::from_be_bytes(block[8..12].try_into().expect("4 bytes")),
        3
    );
    assert_eq!(
        u64::from_be_bytes(block[368..376].try_into().expect("8 bytes")),
        512 << 20
    );
    assert_eq!(Superblock::decode(&block).expect("decodes"), superblock);
    let mut older = block.clone();
    older[11] = 2;
    let crc = block_crc(&older, CRC_OFFSET);
    store_crc(&mut older, CRC_OFFSET, crc);
    let refused = Superblock::decode(&older).expect_err("a cap in a version 2 block");
    assert!(
        matches!(
            refused,
            MetaError::SuperblockLayoutMismatch { .. } | MetaError::ReservedNotZero { .. }
        ),
        "{refused:?}"
    );
    // Version 3 without a cap is no block the encoder writes (it writes version 2 then): the
    // fuzzer found it decoded and re-encoded as a different block.
    let mut uncapped = block.clone();
    uncapped[368..376].fill(0);
    let crc = block_crc(&uncapped, CRC_OFFSET);
    store_crc(&mut uncapped, CRC_OFFSET, crc);
    let refused = Superblock::decode(&uncapped).expect_err("version 3 with a zero cap");
    assert!(
        matches!(
            refused,
            MetaError::FieldInvalid {
                field: "data_bytes_max",
                ..
            }
        ),
        "{refused:?}"
    );
}

/// The Primary a node followed last (kept across a restart for its reconciliation with the
/// other Secondaries) is a version 4 field at offsets 880 (node id) and 888 (sequence number),
/// with or without a data size cap; version 4 without a record, or with sequence 0, is no
/// block the encoder writes and is refused.
#[test]
fn a_followed_primary_needs_version_4() {
    let mut superblock = sample();
    superblock.followed_primary = Some(FollowedPrimary {
        node_id: 1,
        seq: 0x0102_0304_0506,
    });
    let block = superblock.encode().expect("encodes");
    assert_eq!(
        u32::from_be_bytes(block[8..12].try_into().expect("4 bytes")),
        4
    );
    assert_eq!(block[880], 1);
    assert_eq!(
        u64::from_be_bytes(block[888..896].try_into().expect("8 bytes")),
        0x0102_0304_0506
    );
    assert_eq!(
        u64::from_be_bytes(block[368..376].try_into().expect("8 bytes")),
        0,
        "no cap"
    );
    assert_eq!(Superblock::decode(&block).expect("decodes"), superblock);
    let refit = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut copy = block.clone();
        edit(&mut copy);
        let crc = block_crc(&copy, CRC_OFFSET);
        store_crc(&mut copy, CRC_OFFSET, crc);
        Superblock::decode(&copy)
    };
    let older = refit(&|b| b[11] = 3).expect_err("a record in a version 3 block");
    assert!(
        matches!(
            older,
            MetaError::FieldInvalid { .. } | MetaError::ReservedNotZero { .. }
        ),
        "{older:?}"
    );
    let empty = refit(&|b| b[888..896].fill(0)).expect_err("version 4 with sequence 0");
    assert!(
        matches!(
            empty,
            MetaError::FieldInvalid {
                field: "followed_primary.seq",
                ..
            }
        ),
        "{empty:?}"
    );
    let itself = refit(&|b| b[880] = 0).expect_err("a node does not follow itself");
    assert!(
        matches!(
            itself,
            MetaError::FieldInvalid {
                field: "followed_primary.node_id",
                ..
            }
        ),
        "{itself:?}"
    );
    let reserved = refit(&|b| b[884] = 1).expect_err("reserved bytes beside the node id");
    assert!(
        matches!(reserved, MetaError::ReservedNotZero { .. }),
        "{reserved:?}"
    );
    superblock.followed_primary = None;
    let plain = superblock.encode().expect("encodes");
    assert_eq!(
        u32::from_be_bytes(plain[8..12].try_into().expect("4 bytes")),
        2,
        "no record: version 2"
    );
}
