//! Unit tests of the verify source's pure parts: which blocks a write marks, which digests
//! fit the driver contract, and the block-by-block judgement (table cases and a proptest
//! against a straightforward model).

use proptest::prelude::*;

use super::*;

const BLOCK: u64 = 4096;

fn range(offset: u64, length: u64) -> Extent {
    Extent { offset, length }
}

#[test]
fn block_mask_marks_every_block_a_write_touches() {
    let full = range(128 * 1024, 128 * 1024);
    let short = range(1 << 20, 3 * BLOCK + 100);
    let cases = [
        (full, range(0, 128 * 1024), 0),
        (full, range(128 * 1024, 1), 1),
        (full, range(128 * 1024 + BLOCK - 1, 2), 0b11),
        (full, range(256 * 1024 - 1, 1 << 20), 1 << 31),
        (full, range(0, 1 << 30), u32::MAX),
        (full, range(128 * 1024 + 5 * BLOCK, 3 * BLOCK), 0b111 << 5),
        (full, range(256 * 1024, BLOCK), 0),
        (short, range((1 << 20) + 3 * BLOCK + 99, 1), 1 << 3),
        (full, range(130 * 1024, 0), 0),
    ];
    for (range, write, expected) in cases {
        assert_eq!(
            block_mask(range, write, BLOCK),
            expected,
            "{range:?} {write:?}"
        );
    }
}

#[test]
fn digests_fit_only_one_equal_digest_per_block_within_a_reply() {
    let full = range(0, 128 * 1024);
    let short = range(0, BLOCK + 1);
    let cases = [
        (full, 32 * 64, true),
        (full, 32, true),
        (full, 0, false),
        (full, 33, false),
        (full, 32 * 128, false),
        (full, 32 * 127, true),
        (short, 2 * 8, true),
        (short, 9, false),
    ];
    for (extent, len, fits) in cases {
        assert_eq!(
            digests_fit(len, extent, BLOCK),
            fits,
            "{len} bytes for {extent:?}"
        );
    }
    let digests = |len| Ok(vec![0; len]);
    assert_eq!(checked_digests(digests(0), full, BLOCK), Digests::Failed);
    assert_eq!(
        checked_digests(Err(IoError::Io), full, BLOCK),
        Digests::Failed
    );
    assert_eq!(
        checked_digests(digests(32), full, BLOCK),
        Digests::Ready(vec![0; 32])
    );
}

fn verify_range(local: Digests, remote: Digests, written: u32) -> VerifyRange {
    VerifyRange {
        extent: range(0, 4 * BLOCK),
        since: Time(0),
        local: Some(local),
        remote: Some(remote),
        written,
    }
}

#[test]
fn judge_table() {
    let same = || Digests::Ready(vec![1, 2, 3, 4]);
    let failed = Verdict {
        failed_bytes: 4 * BLOCK,
        ..Verdict::default()
    };
    assert_eq!(
        judge(&verify_range(Digests::Failed, same(), 0), BLOCK),
        Ok(failed)
    );
    let failed = Verdict {
        failed_bytes: 4 * BLOCK,
        ..Verdict::default()
    };
    assert_eq!(
        judge(&verify_range(same(), Digests::Failed, 0b1111), BLOCK),
        Ok(failed)
    );
    assert_eq!(
        judge(&verify_range(same(), same(), 0), BLOCK),
        Ok(Verdict::default())
    );
    let differ = Digests::Ready(vec![9, 2, 9, 9]);
    let expected = Verdict {
        found: vec![range(0, BLOCK), range(2 * BLOCK, BLOCK)],
        skipped_bytes: BLOCK,
        failed_bytes: 0,
    };
    assert_eq!(
        judge(&verify_range(same(), differ, 0b1000), BLOCK),
        Ok(expected)
    );
    let longer = Digests::Ready(vec![1; 8]);
    assert!(
        judge(&verify_range(same(), longer, 0), BLOCK).is_err(),
        "another verify-alg"
    );
}

proptest! {
    /// The verdict is exactly the model's: differing blocks not written, merged into runs of
    /// adjacent blocks; written blocks skipped whatever their digests; bytes add up.
    #[test]
    fn judge_matches_the_model(
        blocks in 1..=32_u64,
        last_short in 0..BLOCK,
        digest_len in 1..=8_usize,
        seed in any::<u64>(),
        differing in any::<u32>(),
        written in any::<u32>(),
    ) {
        let length = blocks * BLOCK - last_short;
        let extent = range(7 * 128 * 1024, length);
        let count = usize::try_from(blocks).expect("small");
        let local: Vec<u8> = (0..count * digest_len)
            .map(|i| (seed.rotate_left(u32::try_from(i % 64).expect("small")) & 0xFF) as u8)
            .collect();
        let mut remote = local.clone();
        for block in 0..count {
            if differing & (1 << block) != 0 {
                remote[block * digest_len] ^= 0x80;
            }
        }
        let range = VerifyRange {
            extent,
            since: Time(0),
            local: Some(Digests::Ready(local)),
            remote: Some(Digests::Ready(remote)),
            written,
        };
        let verdict = judge(&range, BLOCK).expect("same lengths");
        let block_length = |b: u64| BLOCK.min(length - b * BLOCK);
        let mut found_bytes = 0;
        let mut model: Vec<Extent> = Vec::new();
        let mut skipped = 0;
        for b in 0..blocks {
            if written & (1 << b) != 0 {
                skipped += block_length(b);
            } else if differing & (1 << b) != 0 {
                found_bytes += block_length(b);
                let block = Extent { offset: extent.offset + b * BLOCK, length: block_length(b) };
                match model.last_mut() {
                    Some(run) if run.end() == block.offset => run.length += block.length,
                    _ => model.push(block),
                }
            }
        }
        prop_assert_eq!(&verdict.found, &model);
        prop_assert_eq!(verdict.skipped_bytes, skipped);
        prop_assert_eq!(verdict.failed_bytes, 0);
        prop_assert_eq!(verdict.found.iter().map(|r| r.length).sum::<u64>(), found_bytes);
        prop_assert!(found_bytes + skipped <= length);
        let (start, end) = (extent.offset, extent.end());
        prop_assert!(verdict.found.iter().all(|r| r.offset >= start && r.end() <= end));
    }
}
