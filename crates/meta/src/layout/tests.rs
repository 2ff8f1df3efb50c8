//! Unit tests of the geometry: worked examples and every refusal (issue 3 item 1; DRBD
//! semantics §3 for the sizes and the internal/external placement).

use super::*;

const GIB: u64 = 1 << 30;

fn config(placement: Placement, backing_bytes: u64) -> LayoutConfig {
    LayoutConfig::new(placement, backing_bytes, 1)
}

#[test]
fn internal_one_gib_one_peer_worked_example() {
    let layout = Layout::compute(&config(Placement::Internal, GIB)).expect("valid");
    // 1 GiB at 4 KiB per bit is 262144 bits = 32 KiB of bitmap; + 4 KiB superblock + 32 KiB ring.
    assert_eq!(layout.metadata_bytes(), 4096 + 32768 + 32768);
    assert_eq!(layout.data_bytes(), GIB - 69632);
    assert_eq!(
        layout.superblock(),
        Region {
            offset_bytes: GIB - 4096,
            length_bytes: 4096
        }
    );
    assert_eq!(
        layout.al_ring(),
        Region {
            offset_bytes: GIB - 4096 - 32768,
            length_bytes: 32768
        }
    );
    assert_eq!(layout.bitmaps().offset_bytes, GIB - 69632);
    assert_eq!(layout.bitmap(0).expect("slot 0"), layout.bitmaps());
    assert_eq!(layout.al_ring_blocks(), 8);
    assert_eq!(layout.bitmap_blocks(), (GIB - 69632) / 4096);
}

#[test]
fn external_places_superblock_first_and_keeps_all_data() {
    let placement = Placement::External {
        metadata_bytes: 1 << 20,
    };
    let mut cfg = config(placement, GIB + 100);
    cfg.peer_slots = 2;
    let layout = Layout::compute(&cfg).expect("valid");
    assert_eq!(layout.data_bytes(), GIB, "data rounds down to 4 KiB");
    assert_eq!(layout.superblock().offset_bytes, 0);
    assert_eq!(layout.al_ring().offset_bytes, 4096);
    assert_eq!(layout.bitmap(0).expect("slot 0").offset_bytes, 4096 + 32768);
    assert_eq!(
        layout.bitmap(1).expect("slot 1").offset_bytes,
        4096 + 32768 + 32768
    );
    assert_eq!(
        layout.bitmap(2),
        Err(MetaError::PeerSlotOutOfRange {
            slot: 2,
            peer_slots: 2
        })
    );
}

#[test]
fn metadata_size_matches_drbd_rule_of_thumb() {
    // DRBD: about 36 KiB + size / 32 Ki per peer. Ours at the defaults is the same formula.
    for (backing_bytes, peers) in [(100 * GIB, 1_u8), (GIB, 3), (8 * GIB, 31)] {
        let mut cfg = config(Placement::Internal, backing_bytes);
        cfg.peer_slots = peers;
        let layout = Layout::compute(&cfg).expect("valid");
        let estimate = 36 * 1024 + layout.data_bytes() / 32768 * u64::from(peers);
        let slack = 4096 * u64::from(peers);
        assert!(layout.metadata_bytes() >= estimate && layout.metadata_bytes() <= estimate + slack);
    }
}

/// Each configuration is refused with its error, and the error has a message.
fn check_refusals(cases: Vec<(LayoutConfig, MetaError)>) {
    for (cfg, expected) in cases {
        assert_eq!(Layout::compute(&cfg), Err(expected.clone()), "{cfg:?}");
        assert!(!expected.to_string().is_empty());
    }
}

#[test]
fn refusals_of_peer_slots_and_granularity() {
    let ok = config(Placement::Internal, GIB);
    check_refusals(vec![
        (
            LayoutConfig {
                peer_slots: 0,
                ..ok
            },
            MetaError::PeerSlotsOutOfRange { peer_slots: 0 },
        ),
        (
            LayoutConfig {
                peer_slots: 32,
                ..ok
            },
            MetaError::PeerSlotsOutOfRange { peer_slots: 32 },
        ),
        (
            LayoutConfig {
                bitmap_granularity_bytes: 12288,
                ..ok
            },
            MetaError::GranularityInvalid {
                granularity_bytes: 12288,
            },
        ),
        (
            LayoutConfig {
                bitmap_granularity_bytes: 2048,
                ..ok
            },
            MetaError::GranularityInvalid {
                granularity_bytes: 2048,
            },
        ),
        (
            LayoutConfig {
                bitmap_granularity_bytes: 2 << 20,
                ..ok
            },
            MetaError::GranularityInvalid {
                granularity_bytes: 2 << 20,
            },
        ),
    ]);
}

#[test]
fn refusals_of_the_activity_log_and_sizes() {
    let ok = config(Placement::Internal, GIB);
    check_refusals(vec![
        (
            LayoutConfig {
                al_ring_bytes: 4096,
                ..ok
            },
            MetaError::AlRingBytesInvalid {
                al_ring_bytes: 4096,
                al_ring_bytes_min: AL_RING_BYTES_MIN,
                al_ring_bytes_max: AL_RING_BYTES_MAX,
            },
        ),
        (
            LayoutConfig {
                al_ring_bytes: 10000,
                ..ok
            },
            MetaError::AlRingBytesInvalid {
                al_ring_bytes: 10000,
                al_ring_bytes_min: AL_RING_BYTES_MIN,
                al_ring_bytes_max: AL_RING_BYTES_MAX,
            },
        ),
        (
            LayoutConfig {
                al_extents: 6,
                ..ok
            },
            MetaError::AlExtentsOutOfRange { al_extents: 6 },
        ),
        (
            LayoutConfig {
                al_extents: 65535,
                ..ok
            },
            MetaError::AlExtentsOutOfRange { al_extents: 65535 },
        ),
        (
            LayoutConfig {
                al_extents: 6616,
                ..ok
            },
            MetaError::AlExtentsExceedRing {
                al_extents: 6616,
                al_extents_max: 6615,
                al_ring_bytes: 32768,
            },
        ),
        (
            LayoutConfig {
                backing_bytes: 40 * 1024,
                ..ok
            },
            MetaError::BackingTooSmall {
                backing_bytes: 40 * 1024,
                needed_bytes: 45056,
            },
        ),
        (
            LayoutConfig {
                placement: Placement::External {
                    metadata_bytes: 65536,
                },
                ..ok
            },
            MetaError::MetadataAreaTooSmall {
                available_bytes: 65536,
                needed_bytes: 69632,
            },
        ),
        (
            LayoutConfig {
                placement: Placement::External {
                    metadata_bytes: GIB,
                },
                backing_bytes: 4095,
                ..ok
            },
            MetaError::BackingTooSmall {
                backing_bytes: 4095,
                needed_bytes: 4096,
            },
        ),
    ]);
}

#[test]
fn al_extents_limits_follow_the_ring() {
    // DRBD's documented maximum (6433) fits the default ring; a bigger ring holds more.
    let ok = config(Placement::Internal, GIB);
    assert!(Layout::compute(&LayoutConfig {
        al_extents: 6433,
        ..ok
    })
    .is_ok());
    assert!(Layout::compute(&LayoutConfig {
        al_extents: 7,
        al_ring_bytes: 8192,
        ..ok
    })
    .is_ok());
    let big_ring = LayoutConfig {
        al_extents: 65534,
        al_ring_bytes: 71 * 4096,
        ..ok
    };
    assert!(Layout::compute(&big_ring).is_ok(), "945 x 70 >= 65534");
    let small_ring = LayoutConfig {
        al_ring_bytes: 70 * 4096,
        ..big_ring
    };
    assert!(matches!(
        Layout::compute(&small_ring),
        Err(MetaError::AlExtentsExceedRing { .. })
    ));
}

#[test]
fn smallest_internal_backing_holds_one_data_block() {
    let layout = Layout::compute(&config(Placement::Internal, 45056)).expect("fits exactly");
    assert_eq!(layout.data_bytes(), 4096);
    assert_eq!(layout.bitmaps().offset_bytes, 4096);
}

#[test]
fn huge_devices_do_not_overflow() {
    let cfg = LayoutConfig {
        bitmap_granularity_bytes: 1 << 20,
        ..config(Placement::Internal, u64::MAX)
    };
    // 2^64 bytes is more 4 MiB extents than a u32 names.
    assert!(matches!(
        Layout::compute(&cfg),
        Err(MetaError::DataTooLarge { .. })
    ));
    let cfg = LayoutConfig {
        bitmap_granularity_bytes: 1 << 20,
        ..config(Placement::Internal, 1 << 52)
    };
    let layout = Layout::compute(&cfg).expect("4 PiB at 1 MiB per bit");
    assert!(layout.data_bytes() + layout.metadata_bytes() <= 1 << 52);
}

const MIB: u64 = 1 << 20;

/// `resize` (issue 27 item 5): every grow case as (name, old backing, placement now, new
/// backing, cap, expected new data size or refusal).
#[test]
fn grow_table() {
    type Expect = Result<u64, fn(&MetaError) -> bool>;
    type Case = (&'static str, Layout, Placement, u64, Option<u64>, Expect);
    let internal = Placement::Internal;
    let external = |metadata_bytes| Placement::External { metadata_bytes };
    let old_internal = Layout::compute(&config(internal, GIB)).expect("valid");
    let old_external = Layout::compute(&config(external(MIB), GIB)).expect("valid");
    let natural = |backing| {
        Layout::compute(&config(internal, backing))
            .expect("valid")
            .data_bytes()
    };
    let cases: Vec<Case> = vec![
        (
            "internal doubles",
            old_internal,
            internal,
            2 * GIB,
            None,
            Ok(natural(2 * GIB)),
        ),
        (
            "internal capped",
            old_internal,
            internal,
            2 * GIB,
            Some(GIB + MIB + 100),
            Ok(GIB + MIB),
        ),
        (
            "unchanged is a no-op",
            old_internal,
            internal,
            GIB,
            None,
            Ok(old_internal.data_bytes()),
        ),
        (
            "cap below the data",
            old_internal,
            internal,
            2 * GIB,
            Some(GIB / 2),
            Err(|e| matches!(e, MetaError::DataWouldShrink { .. })),
        ),
        (
            "device shrank",
            old_internal,
            internal,
            GIB - MIB,
            None,
            Err(|e| matches!(e, MetaError::DataWouldShrink { .. })),
        ),
        // 8 KiB more: the new metadata (at the new end) would cover the old superblock.
        (
            "grew too little",
            old_internal,
            internal,
            GIB + 8192,
            None,
            Err(|e| matches!(e, MetaError::GrowOverlapsMetadata { .. })),
        ),
        (
            "placement changed",
            old_internal,
            external(MIB),
            2 * GIB,
            None,
            Err(|e| matches!(e, MetaError::PlacementChanged)),
        ),
        (
            "external grows in place",
            old_external,
            external(MIB),
            2 * GIB,
            None,
            Ok(2 * GIB),
        ),
        (
            "external area too small",
            old_external,
            external(40960),
            2 * GIB,
            None,
            Err(|e| matches!(e, MetaError::MetadataAreaTooSmall { .. })),
        ),
        (
            "cap below one block",
            old_internal,
            internal,
            2 * GIB,
            Some(100),
            Err(|e| matches!(e, MetaError::DataCapTooSmall { .. })),
        ),
    ];
    for (name, old, placement, backing_bytes, data_bytes_max, expect) in cases {
        let target = GrowTarget {
            placement,
            backing_bytes,
            data_bytes_max,
        };
        match (old.grow(&target), expect) {
            (Ok(grown), Ok(data_bytes)) => {
                assert_eq!(grown.data_bytes(), data_bytes, "{name}");
                assert_eq!(grown.config().data_bytes_max, data_bytes_max, "{name}");
                if placement == Placement::Internal && grown != old {
                    assert!(
                        grown.bitmaps().offset_bytes >= old.superblock().end_bytes(),
                        "{name}: the new metadata is clear of the old"
                    );
                }
            }
            (Err(error), Err(expected)) => assert!(expected(&error), "{name}: {error:?}"),
            (got, _) => panic!("{name}: unexpected {got:?}"),
        }
    }
}

/// The smallest internal grow that is accepted leaves the new metadata just clear of the old.
#[test]
fn grow_by_the_metadata_size_is_enough() {
    let old = Layout::compute(&config(Placement::Internal, GIB)).expect("valid");
    let refused = old.grow(&GrowTarget {
        placement: Placement::Internal,
        backing_bytes: GIB + 4096,
        data_bytes_max: None,
    });
    let Err(MetaError::GrowOverlapsMetadata { needed_bytes, .. }) = refused else {
        panic!("a one-block grow must be refused: {refused:?}");
    };
    let grown = old
        .grow(&GrowTarget {
            placement: Placement::Internal,
            backing_bytes: needed_bytes,
            data_bytes_max: None,
        })
        .expect("the suggested size is enough");
    assert!(grown.data_bytes() > old.data_bytes());
}

/// What a grow resyncs: all of the new area, or with `--assume-clean` only the old device's
/// tail (its old metadata), never what the device grew by.
#[test]
fn grow_resync_range_table() {
    let old = Layout::compute(&config(Placement::Internal, GIB)).expect("valid");
    let target = GrowTarget {
        placement: Placement::Internal,
        backing_bytes: 2 * GIB,
        data_bytes_max: None,
    };
    let grown = old.grow(&target).expect("grows");
    let tail = GIB - old.data_bytes();
    assert_eq!(
        old.grow_resync_range(&grown, false),
        Some((old.data_bytes(), grown.data_bytes() - old.data_bytes()))
    );
    assert_eq!(
        old.grow_resync_range(&grown, true),
        Some((old.data_bytes(), tail))
    );
    assert_eq!(
        old.grow_resync_range(&old, false),
        None,
        "no grow, nothing to resync"
    );
    let external = Layout::compute(&config(
        Placement::External {
            metadata_bytes: MIB,
        },
        GIB,
    ))
    .expect("valid");
    let target = GrowTarget {
        placement: Placement::External {
            metadata_bytes: MIB,
        },
        backing_bytes: 2 * GIB,
        data_bytes_max: None,
    };
    let grown = external.grow(&target).expect("grows");
    assert_eq!(
        external.grow_resync_range(&grown, true),
        None,
        "external: the old device was all data"
    );
    assert_eq!(external.grow_resync_range(&grown, false), Some((GIB, GIB)));
}
