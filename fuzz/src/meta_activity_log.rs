//! Fuzz target `meta_activity_log`: the activity-log transaction decoder and ring recovery
//! (what attach does with the ring of a crashed Primary).
//!
//! Input: one mode byte, then the ring. Mode bit 1 clear: the rest is the ring image, cut
//! into 4 KiB blocks (the last zero-padded). Bit 1 set (compact): records `len: u16, bytes`,
//! each zero-padded to one block, so the fuzzer can write many blocks with short inputs.
//! Bit 2 set: the harness writes the magic and version of every block; bit 0 set: it writes
//! every block's CRC. Bit 3 set: recovery runs as with `al-updates no`. Bit 4 set: instead,
//! a ring formatted from fuzzed parameters is recovered.
//!
//! Properties: neither decoder panics; a decoded block re-encodes to itself; recovery of a
//! non-empty ring of whole blocks succeeds, its hot extents are strictly ascending and fit
//! the cache, its counts are consistent, and marking it into a bitmap sets only what it says
//! (everything for a full resync). A freshly formatted ring recovers to no hot extent with the
//! last sequence number it was formatted with.

use meta::activity_log::{AL_TRANSACTION_BYTES, AL_TRANSACTION_MAGIC, AL_TRANSACTION_VERSION};
use meta::layout::AL_RING_BYTES_MAX;
use meta::{format_ring, recover, AlUpdates, Bitmap, Recovery, Transaction};

use crate::input::Input;
use crate::meta_superblock::write_at;

/// Most ring blocks an input makes (the largest ring is 1024 blocks, but recovery does the
/// same for 64 as for 1024, and big rings cost the fuzzer 100 times more per input).
const RING_BLOCKS_MAX: usize = 64;
/// Most blocks of a formatted ring: enough for the largest `al-extents` (65534 slots need
/// `ceil(65534 / 945) + 1 = 71` blocks).
const FORMAT_RING_BLOCKS_MAX: u32 = 72;
/// Offset of a transaction's CRC.
const CRC_OFFSET: usize = 4;
/// Data size of the bitmap recovery is marked into: a few extents, with a short last one.
const BITMAP_DATA_BYTES: u64 = (16 << 20) + (1 << 20);

/// The target's body.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    if mode & 16 != 0 {
        return check_format(&mut input);
    }
    let mut ring = if mode & 2 == 0 {
        raw_ring(input.take(RING_BLOCKS_MAX * AL_TRANSACTION_BYTES))
    } else {
        compact_ring(&mut input)
    };
    for block in ring.chunks_exact_mut(AL_TRANSACTION_BYTES) {
        if mode & 4 != 0 {
            write_at(block, 0, &AL_TRANSACTION_MAGIC.to_be_bytes());
            write_at(block, 16, &AL_TRANSACTION_VERSION.to_be_bytes());
        }
        if mode & 1 != 0 {
            write_at(block, CRC_OFFSET, &[0; 4]);
            let crc = crc32c::crc32c(block);
            write_at(block, CRC_OFFSET, &crc.to_be_bytes());
        }
        if let Ok(transaction) = Transaction::decode(block) {
            let encoded = transaction.encode();
            assert_eq!(
                encoded.as_deref().ok(),
                Some(&block[..]),
                "transaction round trip"
            );
        }
    }
    let updates = if mode & 8 != 0 {
        AlUpdates::Disabled
    } else {
        AlUpdates::Enabled
    };
    let recovery = recover(&ring, updates);
    assert!(
        recovery.is_ok(),
        "a ring of whole blocks recovers: {recovery:?}"
    );
    if let Ok(recovery) = recovery {
        check_recovery(&recovery, ring.len() / AL_TRANSACTION_BYTES);
    }
}

/// The raw image cut into whole blocks (at least one).
fn raw_ring(bytes: &[u8]) -> Vec<u8> {
    let blocks = bytes.len().div_ceil(AL_TRANSACTION_BYTES).max(1);
    let mut ring = bytes.to_vec();
    ring.resize(blocks * AL_TRANSACTION_BYTES, 0);
    ring
}

/// Blocks given as length-prefixed prefixes (at least one).
fn compact_ring(input: &mut Input<'_>) -> Vec<u8> {
    let mut ring = Vec::new();
    while ring.is_empty()
        || (!input.is_empty() && ring.len() < RING_BLOCKS_MAX * AL_TRANSACTION_BYTES)
    {
        let len = usize::from(input.u16()) % (AL_TRANSACTION_BYTES + 1);
        let start = ring.len();
        ring.extend_from_slice(input.take(len));
        ring.resize(start + AL_TRANSACTION_BYTES, 0);
    }
    ring
}

/// The consistency of one recovery.
fn check_recovery(recovery: &Recovery, ring_blocks: usize) {
    let ascending = recovery
        .hot_extents
        .windows(2)
        .all(|pair| pair[0] < pair[1]);
    assert!(ascending, "hot extents ascending and unique");
    let invalid = usize::try_from(recovery.invalid_blocks).unwrap_or(usize::MAX);
    assert!(invalid <= ring_blocks);
    assert_eq!(recovery.last_seq.is_some(), invalid < ring_blocks);
    assert_eq!(recovery.al_extents.is_some(), recovery.last_seq.is_some());
    let next = recovery.last_seq.map_or(0, |seq| seq.saturating_add(1));
    assert_eq!(recovery.next_seq, next);
    if recovery.full_resync.is_none() {
        let slots = recovery.al_extents.map_or(0, usize::from);
        assert!(
            recovery.hot_extents.len() <= slots,
            "hot extents fit the cache"
        );
    } else {
        assert!(recovery.hot_extents.is_empty());
    }
    let Ok(mut bitmap) = Bitmap::new(BITMAP_DATA_BYTES, 4096) else {
        panic!("the bitmap of the recovery check is valid");
    };
    let newly_set = recovery.mark_out_of_sync(&mut bitmap);
    assert_eq!(newly_set.as_ref().ok(), Some(&bitmap.count_set_blocks()));
    if recovery.full_resync.is_some() {
        assert_eq!(bitmap.count_set_blocks(), bitmap.block_count());
    }
}

/// A formatted ring recovers to an empty cache.
fn check_format(input: &mut Input<'_>) {
    let ring_blocks_max = (AL_RING_BYTES_MAX / 4096).min(FORMAT_RING_BLOCKS_MAX);
    let ring_blocks = input.u32() % (ring_blocks_max + 1);
    let al_extents = input.u16();
    let first_seq = input.u64();
    let Ok(ring) = format_ring(ring_blocks, al_extents, first_seq) else {
        return;
    };
    let blocks = u64::from(ring_blocks);
    let recovery = recover(&ring, AlUpdates::Enabled);
    let Ok(recovery) = recovery else {
        panic!("a formatted ring recovers: {recovery:?}");
    };
    assert_eq!(recovery.full_resync, None, "a formatted ring is complete");
    assert!(recovery.hot_extents.is_empty());
    assert_eq!(recovery.invalid_blocks, 0);
    assert_eq!(recovery.al_extents, Some(al_extents));
    let last = first_seq.saturating_add(blocks.saturating_sub(1));
    assert_eq!(recovery.last_seq, Some(last));
}
