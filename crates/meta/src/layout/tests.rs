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

#[test]
fn refusals() {
    let ok = config(Placement::Internal, GIB);
    let cases: Vec<(LayoutConfig, MetaError)> = vec![
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
    ];
    for (cfg, expected) in cases {
        assert_eq!(Layout::compute(&cfg), Err(expected.clone()), "{cfg:?}");
        assert!(!expected.to_string().is_empty());
    }
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
