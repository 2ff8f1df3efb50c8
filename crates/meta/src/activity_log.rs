//! The activity log: which 4 MiB extents of the data may have writes in flight, kept so that a
//! crashed node resyncs only those extents instead of the whole device.
//!
//! [`ActivityLog`] is a sans-I/O cache of at most `al_extents` *active* extents with a count of
//! writes in flight each and an LRU order. A write to an inactive (cold) extent first needs an
//! activation [`Transaction`] to be durable in the on-disk ring; writes to active (hot) extents go
//! ahead at once.
//!
//! # Call protocol
//!
//! For every data write, the caller calls [`ActivityLog::begin_write`] with the extents it
//! touches and acts on the [`Begin`]:
//! - [`Begin::Hot`]: issue the data write now.
//! - [`Begin::NeedsTransaction`]: first write the [`AlWrite`]'s bitmap pages for its
//!   `cold_extents` (see the rule below), then its transaction block at its ring offset, make
//!   both durable, call [`ActivityLog::transaction_written`], then issue the data write.
//! - [`Begin::AfterTransaction`]: issue the data write after `transaction_written(seq)`.
//! - If the transaction cannot be written, call [`ActivityLog::end_write`] for every write
//!   waiting for it (none was issued), then [`ActivityLog::transaction_failed`]: the extents it
//!   was activating go back to cold.
//! - [`Begin::Busy`]: nothing was reserved; retry after the next `transaction_written` or
//!   `end_write` (this is the backpressure: one transaction at a time, and an extent with writes
//!   in flight is never evicted).
//!
//! Every begin that did not return `Busy` is matched by exactly one
//! [`ActivityLog::end_write`] with the same range once the data write has completed (or failed).
//!
//! # Crash-safety rule
//!
//! **Invariant:** after a crash, every block that might differ on a peer is either set in that
//! peer's persisted bitmap or inside an extent the persisted ring says was hot. It holds because:
//! 1. a data write is issued only once its extents are hot in a durable transaction;
//! 2. an extent leaves the cache only when no write to it is in flight, and the transaction that
//!    evicts it lists it in [`AlWrite::cold_extents`]; **before that transaction is written, the
//!    caller writes and makes durable every dirty bitmap page covering each cold extent**
//!    ([`crate::Bitmap::take_dirty_pages_in`] with [`extent_byte_range`]). So the bits that
//!    described the extent's differing blocks reach disk while the ring still calls it hot.
//! 3. bits set outside the write path (bitmap exchange, verify, invalidate) are not covered by
//!    the log: the caller writes those pages back before relying on them.
//!
//! With `al-updates no` ([`AlUpdates::Disabled`]) no transaction is ever needed and every begin
//! is `Hot`; recovery after a primary crash is then a full resync.
//!
//! Invariants of the cache: at most one transaction is in flight; an extent occupies at most
//! one slot; a slot with writes in flight or being activated is never evicted.

mod recovery;
mod transaction;

use std::collections::{BTreeMap, BTreeSet};

pub use recovery::{format_ring, recover, FullResyncReason, Recovery};
pub use transaction::{
    context_len, SlotUpdate, Transaction, AL_CONTEXT_ENTRY_BYTES, AL_CONTEXT_SLOTS_PER_TRANSACTION,
    AL_SLOT_EMPTY, AL_TRANSACTION_BYTES, AL_TRANSACTION_HEADER_BYTES, AL_TRANSACTION_MAGIC,
    AL_TRANSACTION_VERSION, AL_UPDATES_PER_TRANSACTION_MAX, AL_UPDATE_BYTES,
};

use crate::{Layout, MetaError};

/// Bytes of data one activity-log extent covers: 4 MiB.
pub const AL_EXTENT_BYTES: u64 = 4 << 20;
/// Smallest `al-extents` (DRBD's).
pub const AL_EXTENTS_MIN: u16 = 7;
/// Largest `al-extents` (DRBD's).
pub const AL_EXTENTS_MAX: u16 = 65534;

// With the default 32 KiB ring, al-extents reaches DRBD's documented maximum of 6433.
const _: () = assert!(AL_CONTEXT_SLOTS_PER_TRANSACTION * (32 * 1024 / 4096 - 1) >= 6433);
const _: () = assert!(AL_TRANSACTION_BYTES == 4096);

/// The most `al-extents` a ring of `al_ring_bytes` recovers: `945 × (ring blocks − 1)`, capped
/// at 65534.
///
/// Recovery rebuilds the cache from the context windows of the newest consecutive
/// transactions; `ceil(al_extents / 945)` of them cover every slot. The newest block may be
/// torn, so those transactions must fit in the other `ring blocks − 1` blocks.
pub fn al_extents_max(al_ring_bytes: u32) -> u32 {
    let ring_blocks = al_ring_bytes / 4096;
    let context = u32::try_from(AL_CONTEXT_SLOTS_PER_TRANSACTION).unwrap_or(0);
    context
        .saturating_mul(ring_blocks.saturating_sub(1))
        .min(u32::from(AL_EXTENTS_MAX))
}

/// The data bytes `(offset, length)` of `extent`, clipped to `data_bytes`; None past the end.
pub fn extent_byte_range(extent: u32, data_bytes: u64) -> Option<(u64, u64)> {
    let offset = u64::from(extent) * AL_EXTENT_BYTES;
    (offset < data_bytes).then(|| (offset, AL_EXTENT_BYTES.min(data_bytes - offset)))
}

/// Whether activity-log transactions are written (`al-updates yes`, the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum AlUpdates {
    /// Cold extents are activated by a durable transaction before writes go ahead.
    Enabled,
    /// `al-updates no`: nothing is logged; a primary crash means a full resync.
    Disabled,
}

/// The parameters of an [`ActivityLog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActivityLogConfig {
    /// Cache size (`al-extents`).
    pub al_extents: u16,
    /// Transactions the ring holds.
    pub al_ring_blocks: u32,
    /// Extents covering the data (`ceil(data_bytes / 4 MiB)`).
    pub extent_count: u64,
    /// Whether transactions are written.
    pub updates: AlUpdates,
}

impl ActivityLogConfig {
    /// The configuration of a volume with this layout.
    pub fn from_layout(layout: &Layout, updates: AlUpdates) -> ActivityLogConfig {
        ActivityLogConfig {
            al_extents: u16::try_from(layout.config().al_extents).unwrap_or(AL_EXTENTS_MAX),
            al_ring_blocks: layout.al_ring_blocks(),
            extent_count: layout.al_extent_count(),
            updates,
        }
    }
}

/// A half-open range of extent numbers `[first, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtentRange {
    /// First extent.
    pub first: u64,
    /// One past the last extent.
    pub end: u64,
}

impl ExtentRange {
    /// The extents a byte range touches (empty for a zero length).
    pub fn covering(offset_bytes: u64, length_bytes: u64) -> Result<ExtentRange, MetaError> {
        let end_bytes =
            offset_bytes
                .checked_add(length_bytes)
                .ok_or(MetaError::RangeOutOfBounds {
                    offset_bytes,
                    length_bytes,
                    data_bytes: u64::MAX,
                })?;
        let first = offset_bytes / AL_EXTENT_BYTES;
        let end = if length_bytes == 0 {
            first
        } else {
            end_bytes.div_ceil(AL_EXTENT_BYTES)
        };
        Ok(ExtentRange { first, end })
    }

    /// Number of extents.
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.first)
    }

    /// Whether the range holds no extent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn extents(&self) -> impl Iterator<Item = u32> {
        let first = u32::try_from(self.first).unwrap_or(u32::MAX);
        let end = u32::try_from(self.end).unwrap_or(u32::MAX);
        first..end
    }
}

/// What the caller must do before issuing a data write; see the module's call protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// Every extent is durably active: issue the data write now.
    Hot,
    /// Write this transaction durably first (after the bitmap pages of its cold extents).
    NeedsTransaction(AlWrite),
    /// The extents are being activated by transaction `seq`: issue the write after it is durable.
    AfterTransaction {
        /// The transaction in flight.
        seq: u64,
    },
    /// Nothing reserved: retry after the next `transaction_written` or `end_write`.
    Busy,
}

/// A transaction to write, with where it goes and what it makes cold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlWrite {
    /// The transaction.
    pub transaction: Transaction,
    /// Ring block it goes to (`seq % ring blocks`).
    pub ring_block: u32,
    /// Extents this transaction evicts: their bitmap pages must be durable first.
    pub cold_extents: Vec<u32>,
}

impl AlWrite {
    /// Byte offset of the block within the ring region.
    pub fn ring_offset_bytes(&self) -> u64 {
        u64::from(self.ring_block) * 4096
    }

    /// The 4 KiB block image.
    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        self.transaction.encode()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    extent: Option<u32>,
    writes_in_flight: u32,
    last_use: u64,
    activating: bool,
}

#[derive(Debug, Clone)]
struct InFlight {
    seq: u64,
    slots: Vec<u16>,
}

/// The in-memory activity-log cache; see the module documentation for the call protocol.
#[derive(Debug, Clone)]
pub struct ActivityLog {
    config: ActivityLogConfig,
    slots: Vec<Slot>,
    slot_of: BTreeMap<u32, u16>,
    lru: BTreeMap<u64, u16>,
    free: BTreeSet<u16>,
    next_use: u64,
    next_seq: u64,
    context_cursor: u16,
    in_flight: Option<InFlight>,
}

impl ActivityLog {
    /// An empty cache whose first transaction is `next_seq` (see [`Recovery::next_seq`]).
    pub fn new(config: ActivityLogConfig, next_seq: u64) -> Result<ActivityLog, MetaError> {
        let al_extents = config.al_extents;
        if !(AL_EXTENTS_MIN..=AL_EXTENTS_MAX).contains(&al_extents) {
            return Err(MetaError::AlExtentsOutOfRange {
                al_extents: u32::from(al_extents),
            });
        }
        if config.extent_count >= u64::from(AL_SLOT_EMPTY) {
            let data_bytes = config.extent_count.saturating_mul(AL_EXTENT_BYTES);
            return Err(MetaError::DataTooLarge { data_bytes });
        }
        let al_ring_bytes = config.al_ring_blocks.saturating_mul(4096);
        let al_extents_max = al_extents_max(al_ring_bytes);
        if u32::from(al_extents) > al_extents_max {
            return Err(MetaError::AlExtentsExceedRing {
                al_extents: u32::from(al_extents),
                al_extents_max,
                al_ring_bytes,
            });
        }
        Ok(ActivityLog {
            config,
            slots: vec![Slot::default(); usize::from(al_extents)],
            slot_of: BTreeMap::new(),
            lru: BTreeMap::new(),
            free: (0..al_extents).collect(),
            next_use: 0,
            next_seq,
            context_cursor: 0,
            in_flight: None,
        })
    }

    /// Covers `extent_count` extents from now on (`resize`: the data grew). The cache and the
    /// transactions are unchanged: extent numbers keep their meaning in a larger volume.
    pub fn grow(&mut self, extent_count: u64) -> Result<(), MetaError> {
        if extent_count >= u64::from(AL_SLOT_EMPTY) {
            let data_bytes = extent_count.saturating_mul(AL_EXTENT_BYTES);
            return Err(MetaError::DataTooLarge { data_bytes });
        }
        if extent_count < self.config.extent_count {
            return Err(MetaError::DataWouldShrink {
                data_bytes: self.config.extent_count.saturating_mul(AL_EXTENT_BYTES),
                new_data_bytes: extent_count.saturating_mul(AL_EXTENT_BYTES),
            });
        }
        self.config.extent_count = extent_count;
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &ActivityLogConfig {
        &self.config
    }

    /// Reserves the extents of a data write; see [`Begin`].
    pub fn begin_write(&mut self, range: ExtentRange) -> Result<Begin, MetaError> {
        self.check_range(range)?;
        if self.config.updates == AlUpdates::Disabled || range.is_empty() {
            return Ok(Begin::Hot);
        }
        let cold: Vec<u32> = range
            .extents()
            .filter(|e| !self.slot_of.contains_key(e))
            .collect();
        if cold.is_empty() {
            let activating = range
                .extents()
                .any(|extent| self.slot(extent).is_some_and(|s| s.activating));
            self.reserve(range);
            return Ok(match (&self.in_flight, activating) {
                (Some(in_flight), true) => Begin::AfterTransaction { seq: in_flight.seq },
                _ => Begin::Hot,
            });
        }
        if self.in_flight.is_some() {
            return Ok(Begin::Busy);
        }
        let Some(victims) = self.choose_victims(range, cold.len()) else {
            return Ok(Begin::Busy);
        };
        let (updates, cold_extents) = self.install(&cold, &victims);
        self.reserve(range);
        let write = self.build_transaction(updates, cold_extents);
        Ok(Begin::NeedsTransaction(write))
    }

    /// Records that transaction `seq` is durable: its extents are hot.
    pub fn transaction_written(&mut self, seq: u64) -> Result<(), MetaError> {
        let in_flight_seq = self.in_flight.as_ref().map(|in_flight| in_flight.seq);
        let in_flight = match self.in_flight.take() {
            Some(in_flight) if in_flight.seq == seq => in_flight,
            other => {
                self.in_flight = other;
                return Err(MetaError::AlTransactionNotInFlight {
                    seq,
                    in_flight: in_flight_seq,
                });
            }
        };
        for slot in in_flight.slots {
            if let Some(slot) = self.slots.get_mut(usize::from(slot)) {
                assert!(slot.activating, "in-flight slot not marked activating");
                slot.activating = false;
            }
        }
        Ok(())
    }

    /// Records that transaction `seq` could not be written: the extents it was activating leave
    /// the cache again (their slots are free). The extents it evicted stay evicted: the ring on
    /// disk may still call them hot, which is safe, and their bitmap pages, which may not have
    /// reached the disk, must go with the next transaction (the caller's part). Refused, with
    /// nothing changed, while a write still holds one of the activated extents.
    pub fn transaction_failed(&mut self, seq: u64) -> Result<(), MetaError> {
        let in_flight_seq = self.transaction_in_flight();
        let Some(in_flight) = self.in_flight.as_ref().filter(|f| f.seq == seq) else {
            return Err(MetaError::AlTransactionNotInFlight {
                seq,
                in_flight: in_flight_seq,
            });
        };
        for &index in &in_flight.slots {
            let used = self
                .slots
                .get(usize::from(index))
                .filter(|s| s.writes_in_flight > 0);
            if let Some(extent) = used.and_then(|slot| slot.extent) {
                return Err(MetaError::AlTransactionStillUsed { seq, extent });
            }
        }
        let slots = self.in_flight.take().map(|f| f.slots).unwrap_or_default();
        for index in slots {
            let Some(slot) = self.slots.get_mut(usize::from(index)) else {
                continue;
            };
            assert!(slot.activating, "in-flight slot not marked activating");
            if let Some(extent) = slot.extent.take() {
                self.slot_of.remove(&extent);
            }
            self.lru.remove(&slot.last_use);
            *slot = Slot::default();
            self.free.insert(index);
        }
        Ok(())
    }

    /// Releases the extents of a data write that completed (or failed).
    pub fn end_write(&mut self, range: ExtentRange) -> Result<(), MetaError> {
        self.check_range(range)?;
        if self.config.updates == AlUpdates::Disabled {
            return Ok(());
        }
        for extent in range.extents() {
            if self
                .slot(extent)
                .is_none_or(|slot| slot.writes_in_flight == 0)
            {
                return Err(MetaError::AlEndWithoutBegin { extent });
            }
        }
        for extent in range.extents() {
            if let Some(slot) = self.slot_mut(extent) {
                slot.writes_in_flight -= 1;
            }
        }
        Ok(())
    }

    /// How many extents are active (including those being activated).
    pub fn active_count(&self) -> usize {
        self.slot_of.len()
    }

    /// Active extents (including those being activated), ascending.
    pub fn active_extents(&self) -> Vec<u32> {
        self.slot_of.keys().copied().collect()
    }

    /// Writes in flight to `extent` (0 if it is not active).
    pub fn writes_in_flight(&self, extent: u32) -> u32 {
        self.slot(extent).map_or(0, |slot| slot.writes_in_flight)
    }

    /// The transaction in flight, if any.
    pub fn transaction_in_flight(&self) -> Option<u64> {
        self.in_flight.as_ref().map(|in_flight| in_flight.seq)
    }

    /// The number the next transaction will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn check_range(&self, range: ExtentRange) -> Result<(), MetaError> {
        if range.first > range.end || range.end > self.config.extent_count {
            return Err(MetaError::RangeOutOfBounds {
                offset_bytes: range.first.saturating_mul(AL_EXTENT_BYTES),
                length_bytes: range.len().saturating_mul(AL_EXTENT_BYTES),
                data_bytes: self.config.extent_count.saturating_mul(AL_EXTENT_BYTES),
            });
        }
        let extents_max = u64::from(self.config.al_extents)
            .min(crate::codec::to_u64(AL_UPDATES_PER_TRANSACTION_MAX));
        if range.len() > extents_max {
            return Err(MetaError::AlRangeTooLarge {
                extents: range.len(),
                extents_max,
            });
        }
        Ok(())
    }

    fn slot(&self, extent: u32) -> Option<&Slot> {
        self.slot_of
            .get(&extent)
            .and_then(|&index| self.slots.get(usize::from(index)))
    }

    fn slot_mut(&mut self, extent: u32) -> Option<&mut Slot> {
        let index = *self.slot_of.get(&extent)?;
        self.slots.get_mut(usize::from(index))
    }

    /// Slots for `count` cold extents: free slots first (lowest index), then the least recently
    /// used idle extents outside `range`. None if there are not enough.
    fn choose_victims(&self, range: ExtentRange, count: usize) -> Option<Vec<u16>> {
        let mut chosen: Vec<u16> = self.free.iter().copied().take(count).collect();
        for &index in self.lru.values() {
            if chosen.len() == count {
                break;
            }
            let slot = self.slots.get(usize::from(index))?;
            let in_range = slot
                .extent
                .is_some_and(|e| (range.first..range.end).contains(&u64::from(e)));
            if slot.writes_in_flight == 0 && !slot.activating && !in_range {
                chosen.push(index);
            }
        }
        (chosen.len() == count).then_some(chosen)
    }

    /// Puts each cold extent in its chosen slot; returns the updates and the evicted extents.
    fn install(&mut self, cold: &[u32], victims: &[u16]) -> (Vec<SlotUpdate>, Vec<u32>) {
        let mut updates = Vec::with_capacity(cold.len());
        let mut evicted = Vec::new();
        for (&extent, &index) in cold.iter().zip(victims) {
            self.free.remove(&index);
            let Some(slot) = self.slots.get_mut(usize::from(index)) else {
                continue;
            };
            if let Some(old) = slot.extent.take() {
                assert!(
                    slot.writes_in_flight == 0,
                    "evicting an extent with writes in flight"
                );
                self.slot_of.remove(&old);
                self.lru.remove(&slot.last_use);
                evicted.push(old);
            }
            *slot = Slot {
                extent: Some(extent),
                writes_in_flight: 0,
                last_use: 0,
                activating: true,
            };
            self.slot_of.insert(extent, index);
            self.lru.insert(self.next_use, index);
            slot.last_use = self.next_use;
            self.next_use += 1;
            updates.push(SlotUpdate {
                slot: index,
                extent: Some(extent),
            });
        }
        self.in_flight = Some(InFlight {
            seq: self.next_seq,
            slots: victims.to_vec(),
        });
        (updates, evicted)
    }

    /// Counts one more write in flight on each extent of `range` and marks them most recently
    /// used. Every extent must be active.
    fn reserve(&mut self, range: ExtentRange) {
        for extent in range.extents() {
            let Some(&index) = self.slot_of.get(&extent) else {
                continue;
            };
            let Some(slot) = self.slots.get_mut(usize::from(index)) else {
                continue;
            };
            slot.writes_in_flight += 1;
            self.lru.remove(&slot.last_use);
            slot.last_use = self.next_use;
            self.lru.insert(self.next_use, index);
            self.next_use += 1;
        }
    }

    fn build_transaction(&mut self, updates: Vec<SlotUpdate>, cold_extents: Vec<u32>) -> AlWrite {
        let al_extents = self.config.al_extents;
        let mut transaction = Transaction {
            seq: self.next_seq,
            al_extents,
            updates,
            context_start: self.context_cursor,
            context: Vec::new(),
        };
        transaction.context = (0..context_len(al_extents))
            .map(|index| {
                let slot = transaction.context_slot(index);
                self.slots
                    .get(usize::from(slot))
                    .and_then(|slot| slot.extent)
            })
            .collect();
        let advanced = (usize::from(self.context_cursor) + transaction.context.len())
            % usize::from(al_extents);
        self.context_cursor = u16::try_from(advanced).unwrap_or(0);
        self.next_seq += 1;
        let ring_block = transaction.ring_block(self.config.al_ring_blocks);
        AlWrite {
            transaction,
            ring_block,
            cold_extents,
        }
    }
}

#[cfg(test)]
mod tests;
