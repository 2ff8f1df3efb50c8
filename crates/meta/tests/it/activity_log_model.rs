//! The activity log driven like the daemon drives it, with a simulated ring and a peer that is
//! away, then crashed at random points (issue 3: "activity-log transactions and recovery from a
//! torn write"; the crash-safety rule of `meta::activity_log`).
//!
//! Checked at every crash:
//! - recovery names exactly the extents that were active when the last transaction that reached
//!   the disk was written (the previous one if the newest is torn), with no full-resync fallback;
//! - every block written since the peer went away is set in the persisted bitmap or inside a
//!   recovered hot extent.

use std::collections::BTreeSet;

use meta::activity_log::{
    ActivityLogConfig, AlUpdates, AlWrite, Begin, ExtentRange, AL_EXTENT_BYTES,
};
use meta::bitmap::BITMAP_PAGE_BYTES;
use meta::{extent_byte_range, format_ring, recover, ActivityLog, Bitmap, Transaction};
use proptest::prelude::*;

/// Bitmap granularity in the model: 1 MiB, so one extent is 4 bits.
const GRANULARITY_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone)]
enum Op {
    Write { extent: u64, length: u64 },
    CompleteTransaction,
    EndOldest,
    EndNewest,
    Crash { landed: Landed },
}

#[derive(Debug, Clone, Copy)]
enum Landed {
    Nothing,
    Torn { bytes: usize },
    Whole,
}

struct Harness {
    config: ActivityLogConfig,
    log: ActivityLog,
    ring: Vec<u8>,
    /// The transaction handed out and not yet durable, with the cache content it records.
    pending: Option<(AlWrite, Vec<u32>)>,
    /// Data writes waiting for the pending transaction.
    waiting: Vec<ExtentRange>,
    /// Data writes issued to the disk and not yet completed.
    issued: Vec<ExtentRange>,
    /// Cache content recorded by the newest durable transaction.
    durable: Vec<u32>,
    bitmap: Bitmap,
    bitmap_on_disk: Vec<u8>,
    /// Blocks written while the peer is away: they differ on the peer.
    differ: BTreeSet<u64>,
}

impl Harness {
    fn new(config: ActivityLogConfig) -> Harness {
        let data_bytes = config.extent_count * AL_EXTENT_BYTES;
        let bitmap = Bitmap::new(data_bytes, GRANULARITY_BYTES as u32).expect("valid");
        let pages = bitmap.page_count() as usize;
        let mut harness = Harness {
            config,
            log: ActivityLog::new(config, 0).expect("valid"),
            ring: Vec::new(),
            pending: None,
            waiting: Vec::new(),
            issued: Vec::new(),
            durable: Vec::new(),
            bitmap,
            bitmap_on_disk: vec![0; pages * BITMAP_PAGE_BYTES],
            differ: BTreeSet::new(),
        };
        harness.restart(0);
        harness
    }

    /// Formats the ring from `next_seq` and starts an empty cache after it.
    fn restart(&mut self, next_seq: u64) {
        let ring_blocks = self.config.al_ring_blocks;
        self.ring = format_ring(ring_blocks, self.config.al_extents, next_seq).expect("formats");
        self.log = ActivityLog::new(self.config, next_seq + u64::from(ring_blocks)).expect("valid");
        self.pending = None;
        self.waiting.clear();
        self.issued.clear();
        self.durable.clear();
    }

    fn issue(&mut self, range: ExtentRange) {
        let blocks_per_extent = AL_EXTENT_BYTES / GRANULARITY_BYTES;
        self.differ
            .extend(range.first * blocks_per_extent..range.end * blocks_per_extent);
        self.issued.push(range);
    }

    fn persist_pages(&mut self, pages: Vec<(u64, Vec<u8>)>) {
        for (page, image) in pages {
            let start = page as usize * BITMAP_PAGE_BYTES;
            self.bitmap_on_disk[start..start + BITMAP_PAGE_BYTES].copy_from_slice(&image);
        }
    }

    fn write(&mut self, range: ExtentRange) {
        match self.log.begin_write(range).expect("valid range") {
            Begin::Hot => self.issue(range),
            Begin::AfterTransaction { seq } => {
                assert_eq!(
                    self.pending.as_ref().map(|(w, _)| w.transaction.seq),
                    Some(seq)
                );
                self.waiting.push(range);
            }
            Begin::NeedsTransaction(write) => {
                assert!(self.pending.is_none(), "two transactions in flight");
                // The rule: bitmap pages of every extent going cold are durable first.
                for &extent in &write.cold_extents {
                    let (offset, length) =
                        extent_byte_range(extent, self.bitmap.data_bytes()).expect("in data");
                    let pages: Vec<(u64, Vec<u8>)> = self
                        .bitmap
                        .take_dirty_pages_in(offset, length)
                        .expect("in range")
                        .map(|(page, image)| (page, image.to_vec()))
                        .collect();
                    self.persist_pages(pages);
                }
                self.pending = Some((write, self.log.active_extents()));
                self.waiting.push(range);
            }
            Begin::Busy => {}
        }
    }

    fn write_block(&mut self, write: &AlWrite, bytes: usize) {
        let offset = write.ring_offset_bytes() as usize;
        let image = write.encode().expect("encodes");
        self.ring[offset..offset + bytes].copy_from_slice(&image[..bytes]);
    }

    fn complete_transaction(&mut self) {
        let Some((write, recorded)) = self.pending.take() else {
            return;
        };
        self.write_block(&write, 4096);
        self.log
            .transaction_written(write.transaction.seq)
            .expect("in flight");
        self.durable = recorded;
        for range in std::mem::take(&mut self.waiting) {
            self.issue(range);
        }
    }

    fn end(&mut self, index: usize) {
        if self.issued.is_empty() {
            return;
        }
        let range = self.issued.remove(index.min(self.issued.len() - 1));
        self.log.end_write(range).expect("begun");
        // The peer is away: the completed write is recorded as out of sync in memory.
        self.bitmap
            .set(range.first * AL_EXTENT_BYTES, range.len() * AL_EXTENT_BYTES)
            .expect("in range");
    }

    fn crash(&mut self, landed: Landed) -> Result<(), TestCaseError> {
        let mut expected = self.durable.clone();
        if let Some((write, recorded)) = self.pending.take() {
            match landed {
                Landed::Nothing => {}
                Landed::Torn { bytes } => self.write_block(&write, bytes),
                Landed::Whole => self.write_block(&write, 4096),
            }
            let offset = write.ring_offset_bytes() as usize;
            if Transaction::decode(&self.ring[offset..offset + 4096]).as_ref()
                == Ok(&write.transaction)
            {
                expected = recorded;
            }
        }
        let recovery = recover(&self.ring, AlUpdates::Enabled).expect("ring image is whole blocks");
        prop_assert_eq!(recovery.full_resync, None);
        prop_assert_eq!(&recovery.hot_extents, &expected);
        // After the crash: the persisted bitmap plus the hot extents cover every differing block.
        let mut restarted =
            Bitmap::new(self.bitmap.data_bytes(), GRANULARITY_BYTES as u32).expect("valid");
        for page in 0..restarted.page_count() {
            let start = page as usize * BITMAP_PAGE_BYTES;
            restarted
                .load_page(page, &self.bitmap_on_disk[start..start + BITMAP_PAGE_BYTES])
                .expect("valid page");
        }
        recovery.mark_out_of_sync(&mut restarted).expect("in range");
        for &block in &self.differ {
            prop_assert!(
                restarted.is_set(block),
                "block {} differs on the peer but is not marked",
                block
            );
        }
        // Restart as the daemon does: persist the marks, format the ring, continue.
        let pages: Vec<(u64, Vec<u8>)> = restarted
            .take_dirty_pages()
            .map(|(p, i)| (p, i.to_vec()))
            .collect();
        self.persist_pages(pages);
        restarted.take_dirty_pages().for_each(drop);
        self.bitmap = restarted;
        self.restart(recovery.next_seq);
        Ok(())
    }
}

fn op_strategy(extent_count: u64) -> impl Strategy<Value = Op> {
    let hot_set = extent_count.min(24);
    prop_oneof![
        // Mostly a small working set (hits), sometimes anywhere (misses and evictions).
        4 => (0..hot_set, 1_u64..=3).prop_map(|(extent, length)| Op::Write { extent, length }),
        3 => (0..extent_count, 1_u64..=3).prop_map(|(extent, length)| Op::Write { extent, length }),
        4 => Just(Op::CompleteTransaction),
        3 => Just(Op::EndOldest),
        2 => Just(Op::EndNewest),
        1 => prop_oneof![
            Just(Landed::Nothing),
            (1_usize..4096).prop_map(|bytes| Landed::Torn { bytes }),
            Just(Landed::Whole),
        ]
        .prop_map(|landed| Op::Crash { landed }),
    ]
}

fn case_strategy() -> impl Strategy<Value = (ActivityLogConfig, Vec<Op>)> {
    // (al_extents, ring blocks, extents of data): tiny caches that evict all the time, and
    // caches that need several transactions' context windows to be recovered.
    let shapes = prop_oneof![
        Just((7_u16, 2_u32, 40_u64)),
        Just((7, 8, 300)),
        Just((30, 3, 90)),
        Just((1000, 3, 3000)),
        Just((2000, 4, 3000)),
    ];
    shapes.prop_flat_map(|(al_extents, al_ring_blocks, extent_count)| {
        let config = ActivityLogConfig {
            al_extents,
            al_ring_blocks,
            extent_count,
            updates: AlUpdates::Enabled,
        };
        (
            Just(config),
            proptest::collection::vec(op_strategy(extent_count), 1..300),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn recovery_matches_model_and_nothing_is_lost((config, ops) in case_strategy()) {
        let mut harness = Harness::new(config);
        for op in ops {
            match op {
                Op::Write { extent, length } => {
                    let end = (extent + length).min(config.extent_count);
                    harness.write(ExtentRange { first: extent, end });
                }
                Op::CompleteTransaction => harness.complete_transaction(),
                Op::EndOldest => harness.end(0),
                Op::EndNewest => harness.end(usize::MAX),
                Op::Crash { landed } => harness.crash(landed)?,
            }
        }
        harness.crash(Landed::Torn { bytes: 100 })?;
    }
}
