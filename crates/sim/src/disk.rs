//! A simulated data disk: a volatile write cache over a durable image, at 4 KiB block
//! granularity. A block holds a 64-bit tag naming the client write (and block) that produced
//! it, so comparing disks and checking history costs one word per block.
//!
//! Invariants:
//! - Reads see the cache; a crash keeps only the durable image, plus (at random) some of the
//!   unflushed blocks and some blocks of the writes in progress (torn multi-block writes).
//! - A write lands in the cache when it completes; with FUA it is also durable then.
//! - A flush makes durable the blocks that were dirty when it was issued, with the values
//!   they had then (a later write to the same block stays dirty).
//! - A write or read touching a failing range fails with `IoError::Io` and changes nothing.
//! - While the disk is full (ENOSPC of the file system or thin pool under it), a write that
//!   needs space (a write or write-zeroes, not a trim) fails with `IoError::NoSpace` and
//!   changes nothing; reads, trims and flushes work.

use std::collections::{BTreeMap, BTreeSet};

use repl::IoError;

use crate::rng::Rng;

/// Size of a block of the simulated disk.
pub const BLOCK_BYTES: u64 = 4096;

/// The simulated disk of one node.
#[derive(Debug, Clone)]
pub struct SimDisk {
    cache: Vec<u64>,
    durable: Vec<u64>,
    /// Per block: the write sequence number of the cache value and of the durable value (a
    /// flush never replaces a durable value with an older one).
    cache_seq: Vec<u64>,
    durable_seq: Vec<u64>,
    next_seq: u64,
    dirty: BTreeSet<u64>,
    /// Writes issued and not completed: key → (first block, tags, whether it needs space).
    in_progress: BTreeMap<u64, (u64, Vec<u64>, bool)>,
    /// Flushes issued and not completed: key → (block, value, its sequence) to make durable.
    flushes: BTreeMap<u64, Vec<(u64, u64, u64)>>,
    /// Block ranges `[first, end)` where I/O fails.
    failing: Vec<(u64, u64)>,
    /// No space left: writes that need space fail.
    full: bool,
}

impl SimDisk {
    /// A disk of `blocks` blocks, all zero (tag 0), all durable.
    pub fn new(blocks: u64) -> SimDisk {
        let len = usize::try_from(blocks).unwrap_or(0);
        SimDisk {
            cache: vec![0; len],
            durable: vec![0; len],
            cache_seq: vec![0; len],
            durable_seq: vec![0; len],
            next_seq: 1,
            dirty: BTreeSet::new(),
            in_progress: BTreeMap::new(),
            flushes: BTreeMap::new(),
            failing: Vec::new(),
            full: false,
        }
    }

    /// What a read of the whole disk returns now.
    pub fn blocks(&self) -> &[u64] {
        &self.cache
    }

    /// The durable image (what a crash now would keep at least).
    pub fn durable(&self) -> &[u64] {
        &self.durable
    }

    /// Number of blocks.
    pub fn block_count(&self) -> u64 {
        u64::try_from(self.cache.len()).unwrap_or(0)
    }

    /// Makes I/O on blocks `[first, end)` fail from now on.
    pub fn fail_range(&mut self, first: u64, end: u64) {
        self.failing.push((first, end));
    }

    /// Makes every range work again.
    pub fn clear_failures(&mut self) {
        self.failing.clear();
    }

    /// Whether any range fails now, or the disk is full.
    pub fn has_failures(&self) -> bool {
        !self.failing.is_empty() || self.full
    }

    /// The disk is full from now on: writes that need space fail with `IoError::NoSpace`.
    pub fn fill(&mut self) {
        self.full = true;
    }

    /// Space was freed: writes work again.
    pub fn free_space(&mut self) {
        self.full = false;
    }

    fn fails(&self, first: u64, count: u64) -> bool {
        let end = first.saturating_add(count);
        self.failing.iter().any(|&(f, e)| first < e && f < end)
    }

    fn in_range(&self, first: u64, count: u64) -> bool {
        first
            .checked_add(count)
            .is_some_and(|end| end <= self.block_count())
    }

    /// A write of `tags` at block `first` was issued (it may tear if the node crashes);
    /// `needs_space` unless it is a trim.
    pub fn start_write(&mut self, key: u64, first: u64, tags: Vec<u64>, needs_space: bool) {
        self.in_progress.insert(key, (first, tags, needs_space));
    }

    /// The write `key` completes now.
    pub fn finish_write(&mut self, key: u64, fua: bool) -> Result<(), IoError> {
        let Some((first, tags, needs_space)) = self.in_progress.remove(&key) else {
            return Err(IoError::Io);
        };
        let count = u64::try_from(tags.len()).unwrap_or(u64::MAX);
        if !self.in_range(first, count) {
            return Err(IoError::Invalid);
        }
        if self.fails(first, count) {
            return Err(IoError::Io);
        }
        if self.full && needs_space {
            return Err(IoError::NoSpace);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        for (block, tag) in (first..).zip(tags) {
            let Ok(index) = usize::try_from(block) else {
                continue;
            };
            self.cache[index] = tag;
            self.cache_seq[index] = seq;
            if fua {
                self.durable[index] = tag;
                self.durable_seq[index] = seq;
                self.dirty.remove(&block);
            } else {
                self.dirty.insert(block);
            }
        }
        Ok(())
    }

    /// A flush was issued: it covers the blocks dirty now.
    pub fn start_flush(&mut self, key: u64) {
        let snapshot = self.dirty.iter().filter_map(|&b| {
            let index = usize::try_from(b).ok()?;
            Some((b, *self.cache.get(index)?, *self.cache_seq.get(index)?))
        });
        let snapshot = snapshot.collect();
        self.flushes.insert(key, snapshot);
    }

    /// The flush `key` completes now.
    pub fn finish_flush(&mut self, key: u64) {
        for (block, value, seq) in self.flushes.remove(&key).unwrap_or_default() {
            let Ok(index) = usize::try_from(block) else {
                continue;
            };
            if self.durable_seq[index] < seq {
                self.durable[index] = value;
                self.durable_seq[index] = seq;
            }
            if self.cache_seq[index] == seq {
                self.dirty.remove(&block);
            }
        }
    }

    /// Every completed write becomes durable now (an `fdatasync` of the file, as a metadata
    /// sync does when the metadata is internal, in the same file).
    pub fn sync_all(&mut self) {
        for block in std::mem::take(&mut self.dirty) {
            let Ok(index) = usize::try_from(block) else {
                continue;
            };
            if self.durable_seq[index] < self.cache_seq[index] {
                self.durable[index] = self.cache[index];
                self.durable_seq[index] = self.cache_seq[index];
            }
        }
    }

    /// Reads `count` blocks at `first`.
    pub fn read(&self, first: u64, count: u64) -> Result<Vec<u64>, IoError> {
        if !self.in_range(first, count) {
            return Err(IoError::Invalid);
        }
        if self.fails(first, count) {
            return Err(IoError::Io);
        }
        let start = usize::try_from(first).map_err(|_| IoError::Invalid)?;
        let end = usize::try_from(first + count).map_err(|_| IoError::Invalid)?;
        Ok(self.cache[start..end].to_vec())
    }

    /// Power loss: keeps the durable image plus, at random, some unflushed blocks and some
    /// blocks of the writes in progress. Returns how many blocks were lost or torn.
    pub fn crash(&mut self, rng: &mut Rng) -> u64 {
        let mut damaged = 0;
        for &block in &self.dirty {
            let Ok(index) = usize::try_from(block) else {
                continue;
            };
            if rng.chance(50) && self.durable_seq[index] < self.cache_seq[index] {
                self.durable[index] = self.cache[index];
            } else {
                damaged += 1;
            }
        }
        for (first, tags, needs_space) in self.in_progress.values() {
            if self.full && *needs_space {
                // It would have failed: nothing of it reaches the disk.
                continue;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            for (block, tag) in (*first..).zip(tags) {
                let Some(index) = usize::try_from(block)
                    .ok()
                    .filter(|&i| i < self.durable.len())
                else {
                    continue;
                };
                if rng.chance(50) {
                    self.durable[index] = *tag;
                    self.durable_seq[index] = seq;
                    damaged += 1;
                }
            }
        }
        self.cache.clone_from(&self.durable);
        self.cache_seq.clone_from(&self.durable_seq);
        self.dirty.clear();
        self.in_progress.clear();
        self.flushes.clear();
        damaged
    }

    /// Overwrites the cache and durable image (tests of the checkers).
    pub fn set_blocks(&mut self, blocks: Vec<u64>) {
        self.cache_seq = vec![0; blocks.len()];
        self.durable_seq = vec![0; blocks.len()];
        self.durable.clone_from(&blocks);
        self.cache = blocks;
        self.dirty.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unflushed_writes_may_be_lost_flushed_and_fua_writes_never() {
        for seed in 0..32 {
            let mut disk = SimDisk::new(16);
            disk.start_write(1, 0, vec![1, 1], true);
            disk.finish_write(1, false).expect("write");
            disk.start_flush(2);
            disk.finish_flush(2);
            disk.start_write(3, 4, vec![3], true);
            disk.finish_write(3, true).expect("fua write");
            disk.start_write(4, 8, vec![4, 4, 4], true);
            disk.finish_write(4, false).expect("write");
            disk.start_write(5, 12, vec![5, 5], true);
            disk.crash(&mut Rng::new(seed));
            let b = disk.blocks();
            assert_eq!(&b[0..2], &[1, 1]);
            assert_eq!(b[4], 3);
            assert!(b[8..11].iter().all(|&t| t == 0 || t == 4));
            assert!(b[12..14].iter().all(|&t| t == 0 || t == 5));
        }
    }

    #[test]
    fn a_flush_never_replaces_a_newer_durable_value() {
        let mut disk = SimDisk::new(4);
        disk.start_write(1, 0, vec![1], true);
        disk.finish_write(1, false).expect("write");
        disk.start_flush(2);
        disk.start_write(3, 0, vec![3], true);
        disk.finish_write(3, true).expect("fua write");
        disk.finish_flush(2);
        disk.crash(&mut Rng::new(1));
        assert_eq!(disk.blocks()[0], 3);
    }

    #[test]
    fn a_write_after_a_torn_write_is_made_durable_by_a_flush() {
        for seed in 0..16 {
            let mut disk = SimDisk::new(4);
            disk.start_write(1, 0, vec![1, 1, 1, 1], true);
            disk.crash(&mut Rng::new(seed));
            disk.start_write(2, 0, vec![2, 2], true);
            disk.finish_write(2, false).expect("write");
            disk.start_flush(3);
            disk.finish_flush(3);
            disk.crash(&mut Rng::new(seed + 100));
            assert_eq!(&disk.blocks()[0..2], &[2, 2], "seed {seed}");
        }
    }

    #[test]
    fn a_full_disk_fails_writes_that_need_space_until_space_is_freed() {
        let mut disk = SimDisk::new(8);
        disk.fill();
        disk.start_write(1, 1, vec![9, 9], true);
        assert_eq!(disk.finish_write(1, false), Err(IoError::NoSpace));
        assert_eq!(disk.blocks()[1], 0, "a failed write changes nothing");
        disk.start_write(2, 3, vec![0], false);
        assert_eq!(disk.finish_write(2, false), Ok(()), "a trim needs no space");
        assert_eq!(disk.read(1, 2), Ok(vec![0, 0]), "reads work");
        disk.start_write(3, 4, vec![7], true);
        disk.crash(&mut Rng::new(3));
        assert_eq!(
            disk.blocks()[4],
            0,
            "a write that would fail never lands, torn or not"
        );
        disk.free_space();
        disk.start_write(4, 1, vec![9], true);
        assert_eq!(disk.finish_write(4, false), Ok(()));
        assert_eq!(disk.blocks()[1], 9);
    }

    #[test]
    fn failing_ranges_fail_and_change_nothing() {
        let mut disk = SimDisk::new(8);
        disk.fail_range(2, 3);
        disk.start_write(1, 1, vec![9, 9], true);
        assert_eq!(disk.finish_write(1, false), Err(IoError::Io));
        assert_eq!(disk.blocks()[1], 0);
        assert_eq!(disk.read(2, 1), Err(IoError::Io));
        assert_eq!(disk.read(7, 2), Err(IoError::Invalid));
        disk.clear_failures();
        assert_eq!(disk.read(2, 1), Ok(vec![0]));
    }
}
