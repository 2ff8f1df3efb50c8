//! The bitmap against a `Vec<bool>` model: random operations, then every bit, the counts, the
//! cursor, the runs and the written-back pages must agree; the RLE exchange round-trips and
//! hostile chunks never panic (issue 3 tests: "bitmap operations").

use std::ops::Range;

use meta::bitmap::{BITMAP_BLOCKS_PER_PAGE, BITMAP_PAGE_BYTES};
use meta::{Bitmap, RleDecoder};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Set { offset: u64, length: u64 },
    Clear { offset: u64, length: u64 },
    SetBlocks(Range<u64>),
    OrWith(Vec<Range<u64>>),
    SetAll,
    ClearAll,
    WriteBack,
}

struct Model {
    bits: Vec<bool>,
    granularity: u64,
    data_bytes: u64,
}

impl Model {
    fn apply(&mut self, op: &Op) {
        let blocks = self.bits.len() as u64;
        match op {
            Op::Set { offset, length } if *length > 0 => {
                let first = offset / self.granularity;
                let end = (offset + length).div_ceil(self.granularity);
                self.fill(first..end, true);
            }
            Op::Clear { offset, length } => {
                let first = offset.div_ceil(self.granularity);
                let end_bytes = offset + length;
                let end = if end_bytes == self.data_bytes {
                    blocks
                } else {
                    end_bytes / self.granularity
                };
                if first < end {
                    self.fill(first..end, false);
                }
            }
            Op::SetBlocks(range) => self.fill(range.clone(), true),
            Op::OrWith(ranges) => ranges
                .iter()
                .for_each(|range| self.fill(range.clone(), true)),
            Op::SetAll => self.fill(0..blocks, true),
            Op::ClearAll => self.fill(0..blocks, false),
            Op::Set { .. } | Op::WriteBack => {}
        }
    }

    fn fill(&mut self, range: Range<u64>, value: bool) {
        for block in range {
            self.bits[block as usize] = value;
        }
    }

    fn runs(&self) -> Vec<Range<u64>> {
        let mut runs = Vec::new();
        let mut start = None;
        for (index, &bit) in self.bits.iter().chain([false].iter()).enumerate() {
            match (bit, start) {
                (true, None) => start = Some(index as u64),
                (false, Some(first)) => {
                    runs.push(first..index as u64);
                    start = None;
                }
                _ => {}
            }
        }
        runs
    }
}

fn op_strategy(data_bytes: u64, granularity: u64) -> impl Strategy<Value = Op> {
    let blocks = data_bytes.div_ceil(granularity);
    let byte_range = (0..=data_bytes).prop_flat_map(move |offset| {
        (
            Just(offset),
            0..=(data_bytes - offset).min(3 * granularity + 7),
        )
    });
    let block_range = (0..=blocks)
        .prop_flat_map(move |start| (Just(start), start..=blocks.min(start + 40_000)))
        .prop_map(|(s, e)| s..e);
    prop_oneof![
        4 => byte_range.clone().prop_map(|(offset, length)| Op::Set { offset, length }),
        3 => byte_range.prop_map(|(offset, length)| Op::Clear { offset, length }),
        2 => block_range.clone().prop_map(Op::SetBlocks),
        1 => proptest::collection::vec(block_range, 0..4).prop_map(Op::OrWith),
        1 => Just(Op::SetAll),
        1 => Just(Op::ClearAll),
        2 => Just(Op::WriteBack),
    ]
}

fn case_strategy() -> impl Strategy<Value = (u64, u64, Vec<Op>)> {
    // Sizes up to 3 pages of bits at 4 KiB, and short last blocks at coarser granularities.
    (1_u64..100_000, 12_u32..=20).prop_flat_map(|(data_blocks_4k, shift)| {
        let data_bytes = data_blocks_4k * 4096;
        let granularity = 1_u64 << shift;
        (
            Just(data_bytes),
            Just(granularity),
            proptest::collection::vec(op_strategy(data_bytes, granularity), 1..12),
        )
    })
}

fn check_against(bitmap: &Bitmap, model: &Model) -> Result<(), TestCaseError> {
    let set = model.bits.iter().filter(|&&b| b).count() as u64;
    prop_assert_eq!(bitmap.count_set_blocks(), set);
    for (block, &bit) in model.bits.iter().enumerate() {
        prop_assert_eq!(bitmap.is_set(block as u64), bit, "block {}", block);
    }
    let bytes: u64 = model
        .bits
        .iter()
        .enumerate()
        .filter(|(_, &b)| b)
        .map(|(i, _)| {
            model
                .granularity
                .min(model.data_bytes - i as u64 * model.granularity)
        })
        .sum();
    prop_assert_eq!(bitmap.count_set_bytes(), bytes);
    prop_assert_eq!(bitmap.runs().collect::<Vec<_>>(), model.runs());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bitmap_matches_model(
        (data_bytes, granularity, ops) in case_strategy(),
        cursor in any::<u64>(),
    ) {
        let mut bitmap = Bitmap::new(data_bytes, granularity as u32).expect("valid");
        let mut model = Model {
            bits: vec![false; data_bytes.div_ceil(granularity) as usize],
            granularity,
            data_bytes,
        };
        let mut on_disk = vec![0_u8; bitmap.page_count() as usize * BITMAP_PAGE_BYTES];
        for op in &ops {
            match op {
                Op::Set { offset, length } => { bitmap.set(*offset, *length).expect("in range"); }
                Op::Clear { offset, length } => {
                    bitmap.clear(*offset, *length).expect("in range");
                }
                Op::SetBlocks(range) => { bitmap.set_blocks(range.clone()).expect("in range"); }
                Op::OrWith(ranges) => {
                    let mut other = Bitmap::new(data_bytes, granularity as u32).expect("valid");
                    for range in ranges {
                        other.set_blocks(range.clone()).expect("in range");
                    }
                    bitmap.or_with(&other).expect("same geometry");
                }
                Op::SetAll => { bitmap.set_all(); }
                Op::ClearAll => { bitmap.clear_all(); }
                Op::WriteBack => {
                    for (page, image) in bitmap.take_dirty_pages() {
                        let start = page as usize * BITMAP_PAGE_BYTES;
                        on_disk[start..start + BITMAP_PAGE_BYTES].copy_from_slice(image);
                    }
                }
            }
            model.apply(op);
            let model_set = model.bits.iter().filter(|&&b| b).count() as u64;
            prop_assert_eq!(bitmap.count_set_blocks(), model_set);
        }
        check_against(&bitmap, &model)?;
        let blocks = model.bits.len() as u64;
        let from = cursor % (blocks + 1);
        let expected = (from..blocks).find(|&b| model.bits[b as usize]);
        prop_assert_eq!(bitmap.next_set(from), expected);
        // Writing back the dirty pages makes the disk image equal to memory; loading it back
        // gives the same bitmap.
        for (page, image) in bitmap.take_dirty_pages() {
            let start = page as usize * BITMAP_PAGE_BYTES;
            on_disk[start..start + BITMAP_PAGE_BYTES].copy_from_slice(image);
        }
        let mut loaded = Bitmap::new(data_bytes, granularity as u32).expect("valid");
        for page in 0..loaded.page_count() {
            let start = page as usize * BITMAP_PAGE_BYTES;
            loaded.load_page(page, &on_disk[start..start + BITMAP_PAGE_BYTES]).expect("valid page");
        }
        check_against(&loaded, &model)?;
        prop_assert_eq!(blocks.div_ceil(BITMAP_BLOCKS_PER_PAGE).max(1), loaded.page_count().max(1));
    }

    #[test]
    fn rle_round_trips_and_ors(
        (data_bytes, granularity, ops) in case_strategy(),
        prior in proptest::collection::vec((0_u64..100_000, 1_u64..50), 0..5),
        chunk_bytes_max in 64_usize..600,
    ) {
        let mut source = Bitmap::new(data_bytes, granularity as u32).expect("valid");
        for op in &ops {
            if let Op::SetBlocks(range) = op {
                source.set_blocks(range.clone()).expect("in range");
            }
        }
        let blocks = source.block_count();
        let mut target = Bitmap::new(data_bytes, granularity as u32).expect("valid");
        for (start, length) in prior {
            let start = start % blocks;
            target.set_blocks(start..(start + length).min(blocks)).expect("in range");
        }
        let mut expected = target.clone();
        expected.or_with(&source).expect("same geometry");
        let mut decoder = RleDecoder::new(&target);
        for chunk in source.rle_chunks(chunk_bytes_max).expect("valid limit") {
            prop_assert!(chunk.len() <= chunk_bytes_max);
            decoder.apply(&chunk, &mut target).expect("valid chunk");
        }
        prop_assert!(decoder.is_complete());
        prop_assert_eq!(target.runs().collect::<Vec<_>>(), expected.runs().collect::<Vec<_>>());
        prop_assert_eq!(target.count_set_blocks(), expected.count_set_blocks());
    }

    #[test]
    fn hostile_rle_never_panics(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        start in 0_u64..5,
        with_header in any::<bool>(),
    ) {
        let mut target = Bitmap::new(1 << 20, 4096).expect("valid");
        let mut chunk = Vec::new();
        if with_header {
            chunk.push(1);
            chunk.extend_from_slice(&4096_u32.to_be_bytes());
            chunk.extend_from_slice(&256_u64.to_be_bytes());
            chunk.extend_from_slice(&start.to_be_bytes());
        }
        chunk.extend_from_slice(&body);
        let mut decoder = RleDecoder::new(&target);
        match decoder.apply(&chunk, &mut target) {
            Ok(newly_set) => prop_assert_eq!(newly_set, target.count_set_blocks()),
            Err(_) => prop_assert_eq!(target.count_set_blocks(), 0),
        }
        prop_assert!(decoder.blocks_received() <= 256);
    }
}
