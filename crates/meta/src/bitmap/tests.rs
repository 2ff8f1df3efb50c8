//! Unit tests of the bitmap: the partial-block rules of set and clear, byte counts with a short
//! last block, dirty-page tracking and page loading (issue 3 item 1, "dirty bitmap per peer").

use super::*;

const KIB: u64 = 1024;

#[test]
fn set_touches_partial_blocks_clear_needs_full_cover() {
    // (offset, length, blocks newly set by set(), blocks cleared from all-set by clear())
    let cases: [(u64, u64, u64, u64); 7] = [
        (0, 4 * KIB, 1, 1),
        (0, 1, 1, 0),
        (4095, 2, 2, 0),
        (2 * KIB, 8 * KIB, 3, 1),
        (4 * KIB, 8 * KIB, 2, 2),
        (0, 0, 0, 0),
        (100 * KIB, 0, 0, 0),
    ];
    for (offset, length, set, cleared) in cases {
        let mut bitmap = Bitmap::new(1 << 20, 4096).expect("valid");
        assert_eq!(bitmap.set(offset, length), Ok(set), "set {offset}+{length}");
        let mut full = Bitmap::new(1 << 20, 4096).expect("valid");
        full.set_all();
        assert_eq!(
            full.clear(offset, length),
            Ok(cleared),
            "clear {offset}+{length}"
        );
        assert_eq!(full.count_set_blocks(), 256 - cleared);
    }
}

#[test]
fn short_last_block_counts_real_bytes_and_clears_to_the_end() {
    // 10 KiB of data at 8 KiB per bit: block 1 covers only 2 KiB.
    let mut bitmap = Bitmap::new(12 * KIB, 8192).expect("valid");
    assert_eq!(bitmap.block_count(), 2);
    assert_eq!(bitmap.set(11 * KIB, KIB), Ok(1));
    assert_eq!(bitmap.count_set_bytes(), 4 * KIB);
    assert_eq!(
        bitmap.clear(8 * KIB, 4 * KIB),
        Ok(1),
        "covers to the data end"
    );
    bitmap.set_all();
    assert_eq!(bitmap.count_set_bytes(), 12 * KIB);
    assert_eq!(
        bitmap.set(12 * KIB, 1),
        Err(MetaError::RangeOutOfBounds {
            offset_bytes: 12 * KIB,
            length_bytes: 1,
            data_bytes: 12 * KIB
        })
    );
    assert!(bitmap.set(u64::MAX, 2).is_err(), "wrapping range");
}

#[test]
fn cursor_and_runs() {
    let mut bitmap = Bitmap::new(1 << 30, 4096).expect("valid");
    for range in [3..5, 64..200, 1000..1001, 262_143..262_144] {
        assert_eq!(
            bitmap.set_blocks(range.clone()),
            Ok(range.end - range.start)
        );
    }
    let runs: Vec<_> = bitmap.runs().collect();
    assert_eq!(runs, vec![3..5, 64..200, 1000..1001, 262_143..262_144]);
    assert_eq!(bitmap.next_set(0), Some(3));
    assert_eq!(bitmap.next_set(5), Some(64));
    assert_eq!(bitmap.next_set(1001), Some(262_143));
    assert_eq!(bitmap.next_clear(64), Some(200));
    assert_eq!(bitmap.next_set(262_144), None);
    assert_eq!(bitmap.count_set_blocks(), 2 + 136 + 1 + 1);
}

#[test]
fn dirty_pages_follow_changes() {
    let mut bitmap = Bitmap::new(1 << 30, 4096).expect("valid");
    assert_eq!(bitmap.page_count(), 8);
    assert_eq!(bitmap.dirty_page_count(), 0);
    bitmap.set_blocks(32767..32769).expect("in range");
    bitmap
        .set_blocks(5 * 32768..5 * 32768 + 1)
        .expect("in range");
    let pages: Vec<u64> = bitmap
        .take_dirty_pages()
        .map(|(page, image)| {
            assert_eq!(image.len(), 4096);
            page
        })
        .collect();
    assert_eq!(pages, vec![0, 1, 5]);
    assert_eq!(bitmap.dirty_page_count(), 0);
    assert_eq!(
        bitmap.set_blocks(32767..32768),
        Ok(0),
        "already set: nothing changes"
    );
    assert_eq!(bitmap.dirty_page_count(), 0);
    bitmap.set_blocks(1..2).expect("in range");
    assert_eq!(
        bitmap.clear_blocks(3..4),
        Ok(0),
        "clearing a clear bit changes nothing"
    );
    assert_eq!(bitmap.dirty_page_count(), 1);
    bitmap
        .set_blocks(7 * 32768..7 * 32768 + 1)
        .expect("in range");
    // Extent 0 (4 MiB = 1024 blocks) lives in page 0 only.
    let in_extent: Vec<u64> = bitmap
        .take_dirty_pages_in(0, 4 << 20)
        .expect("in range")
        .map(|(p, _)| p)
        .collect();
    assert_eq!(in_extent, vec![0]);
    assert_eq!(
        bitmap
            .take_dirty_pages()
            .map(|(p, _)| p)
            .collect::<Vec<_>>(),
        vec![7]
    );
}

#[test]
fn load_page_round_trips_and_refuses_bad_images() {
    let mut source = Bitmap::new(200 * 4096, 4096).expect("valid");
    source.set_blocks(10..150).expect("in range");
    let image = source.page(0).expect("page 0").to_vec();
    let mut target = Bitmap::new(200 * 4096, 4096).expect("valid");
    target.load_page(0, &image).expect("loads");
    assert_eq!(
        target,
        Bitmap {
            dirty_pages: BTreeSet::new(),
            ..source.clone()
        }
    );
    assert_eq!(target.count_set_blocks(), 140);
    assert_eq!(target.dirty_page_count(), 0);
    let mut padding = image.clone();
    padding[25] = 1; // block 200: past the last block (199)
    assert_eq!(
        target.load_page(0, &padding),
        Err(MetaError::BitmapPaddingNotZero { page: 0 })
    );
    assert_eq!(
        target.load_page(1, &image),
        Err(MetaError::PageOutOfRange {
            page: 1,
            page_count: 1
        })
    );
    assert_eq!(
        target.load_page(0, &image[..100]),
        Err(MetaError::PageLengthInvalid { length: 100 })
    );
    assert_eq!(
        target.count_set_blocks(),
        140,
        "refused loads change nothing"
    );
}

#[test]
fn or_with_merges_and_checks_geometry() {
    let mut ours = Bitmap::new(1 << 20, 4096).expect("valid");
    let mut theirs = Bitmap::new(1 << 20, 4096).expect("valid");
    ours.set_blocks(0..10).expect("in range");
    theirs.set_blocks(5..20).expect("in range");
    assert_eq!(ours.or_with(&theirs), Ok(10));
    assert_eq!(ours.runs().collect::<Vec<_>>(), vec![0..20]);
    assert_eq!(ours.count_set_blocks(), 20);
    let other = Bitmap::new(2 << 20, 4096).expect("valid");
    assert!(matches!(
        ours.or_with(&other),
        Err(MetaError::BitmapGeometryMismatch { .. })
    ));
    let coarse = Bitmap::new(1 << 20, 8192).expect("valid");
    assert!(matches!(
        ours.or_with(&coarse),
        Err(MetaError::BitmapGeometryMismatch { .. })
    ));
}

#[test]
fn granularity_checked() {
    for granularity in [0, 1, 2048, 4097, 2 << 20] {
        assert_eq!(
            Bitmap::new(1 << 20, granularity),
            Err(MetaError::GranularityInvalid {
                granularity_bytes: granularity
            })
        );
    }
    let empty = Bitmap::new(0, 4096).expect("an empty data area has an empty bitmap");
    assert_eq!(
        (
            empty.block_count(),
            empty.page_count(),
            empty.count_set_bytes()
        ),
        (0, 0, 0)
    );
}

#[test]
fn only_pages_with_a_cleared_bit_count_as_cleared_until_taken() {
    let mut bitmap = Bitmap::new(1 << 30, 4096).expect("valid");
    bitmap.set_blocks(0..10).expect("in range");
    bitmap
        .set_blocks(3 * 32768..3 * 32768 + 1)
        .expect("in range");
    assert!(
        !bitmap.has_cleared_pages(),
        "setting bits promises nothing about data"
    );
    bitmap.clear_blocks(20..30).expect("in range");
    assert!(
        !bitmap.has_cleared_pages(),
        "clearing clear bits changes nothing"
    );
    bitmap.take_dirty_pages().for_each(drop);
    bitmap.clear_blocks(0..1).expect("in range");
    assert!(bitmap.has_cleared_pages());
    // Taking another extent's pages leaves page 0's clear pending.
    bitmap
        .set_blocks(3 * 32768 + 5..3 * 32768 + 6)
        .expect("in range");
    let other: Vec<u64> = bitmap
        .take_dirty_pages_in(3 * 32768 * 4096, 4 << 20)
        .expect("in range")
        .map(|(p, _)| p)
        .collect();
    assert_eq!(other, vec![3]);
    assert!(bitmap.has_cleared_pages());
    let taken: Vec<u64> = bitmap
        .take_dirty_pages_in(0, 4 << 20)
        .expect("in range")
        .map(|(p, _)| p)
        .collect();
    assert_eq!(taken, vec![0]);
    assert!(!bitmap.has_cleared_pages());
    // A clear that a later set undoes still counts: the page went through a cleared state.
    bitmap.clear_blocks(1..2).expect("in range");
    bitmap.set_blocks(1..2).expect("in range");
    assert!(bitmap.has_cleared_pages());
    bitmap.take_dirty_pages().for_each(drop);
    assert!(!bitmap.has_cleared_pages());
    // Loading a page from disk makes it clean, cleared or not.
    bitmap.clear_blocks(2..3).expect("in range");
    let image = bitmap.page(0).expect("page 0").to_vec();
    bitmap.load_page(0, &image).expect("valid image");
    assert!(!bitmap.has_cleared_pages());
}
