//! One activity-log transaction: the 4 KiB block written to the ring before a write to a cold
//! extent is issued.
//!
//! Byte layout (big-endian):
//!
//! | offset | size      | field           | meaning                                            |
//! |-------:|----------:|-----------------|----------------------------------------------------|
//! | 0      | 4         | `magic`         | [`AL_TRANSACTION_MAGIC`], `"TNAL"`                 |
//! | 4      | 4         | `crc`           | crc32c of the block with this field as zero        |
//! | 8      | 8         | `seq`           | transaction number; ring block = `seq % blocks`    |
//! | 16     | 2         | `version`       | [`AL_TRANSACTION_VERSION`]                         |
//! | 18     | 2         | `al_extents`    | cache size (slots) when written                    |
//! | 20     | 2         | `update_count`  | used entries of `updates`                          |
//! | 22     | 2         | `context_start` | first slot of the context window                   |
//! | 24     | 2         | `context_count` | `min(al_extents, 945)`                             |
//! | 26     | 2         | reserved        | zero                                               |
//! | 28     | 48 × 6    | `updates`       | `(slot u16, extent u32)`, unused entries zero      |
//! | 316    | 945 × 4   | `context`       | extent of slots `context_start..` (cyclic)         |
//!
//! An extent field holds [`AL_SLOT_EMPTY`] for an empty slot. Context entries past
//! `context_count` are zero.
//!
//! Invariants: a transaction that encodes decodes to itself, and decode accepts only what encode
//! can produce (canonical form: zeroed padding, exact context length); every slot index is below
//! `al_extents`; the context is the content of its slots *after* this transaction's updates.

use crate::codec::{block_crc, store_crc, Reader, Writer};
use crate::MetaError;

use super::{AL_EXTENTS_MAX, AL_EXTENTS_MIN};

/// Size of one transaction block.
pub const AL_TRANSACTION_BYTES: usize = 4096;
/// First four bytes of every transaction block: "TNAL".
pub const AL_TRANSACTION_MAGIC: u32 = u32::from_be_bytes(*b"TNAL");
/// The transaction format version this build writes and reads.
pub const AL_TRANSACTION_VERSION: u16 = 1;
/// Bytes of the fixed header.
pub const AL_TRANSACTION_HEADER_BYTES: usize = 28;
/// Slot updates one transaction carries, so the extents one write may activate at once.
pub const AL_UPDATES_PER_TRANSACTION_MAX: usize = 48;
/// Bytes of one slot update: slot u16, extent u32.
pub const AL_UPDATE_BYTES: usize = 6;
/// Context slots one transaction carries.
pub const AL_CONTEXT_SLOTS_PER_TRANSACTION: usize = 945;
/// Bytes of one context entry: extent u32.
pub const AL_CONTEXT_ENTRY_BYTES: usize = 4;
/// The extent value of an empty slot.
pub const AL_SLOT_EMPTY: u32 = u32::MAX;

const CRC_OFFSET: usize = 4;
const WHAT: &str = "activity-log transaction";

const _: () = assert!(
    AL_TRANSACTION_HEADER_BYTES
        + AL_UPDATES_PER_TRANSACTION_MAX * AL_UPDATE_BYTES
        + AL_CONTEXT_SLOTS_PER_TRANSACTION * AL_CONTEXT_ENTRY_BYTES
        <= AL_TRANSACTION_BYTES
);
// Slot numbers and counts are u16 on disk.
const _: () = assert!(AL_CONTEXT_SLOTS_PER_TRANSACTION <= u16::MAX as usize);
const _: () = assert!(AL_UPDATES_PER_TRANSACTION_MAX <= u16::MAX as usize);

/// One slot of the cache taking a new value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotUpdate {
    /// The slot index, below the transaction's `al_extents`.
    pub slot: u16,
    /// The extent the slot now holds, or None when it becomes empty.
    pub extent: Option<u32>,
}

/// A decoded (or about-to-be-encoded) activity-log transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    /// Transaction number; each transaction is one more than the previous.
    pub seq: u64,
    /// Cache size when written (7..=65534).
    pub al_extents: u16,
    /// Slots changed by this transaction (at most [`AL_UPDATES_PER_TRANSACTION_MAX`]).
    pub updates: Vec<SlotUpdate>,
    /// First slot of the context window.
    pub context_start: u16,
    /// Content of slots `context_start, context_start + 1, …` (mod `al_extents`) after the
    /// updates; exactly `min(al_extents, AL_CONTEXT_SLOTS_PER_TRANSACTION)` entries.
    pub context: Vec<Option<u32>>,
}

/// The context length a transaction over `al_extents` slots carries.
pub fn context_len(al_extents: u16) -> usize {
    usize::from(al_extents).min(AL_CONTEXT_SLOTS_PER_TRANSACTION)
}

impl Transaction {
    /// Ring block (0-based) this transaction belongs in, for a ring of `ring_blocks` blocks.
    pub fn ring_block(&self, ring_blocks: u32) -> u32 {
        let index = self.seq % u64::from(ring_blocks.max(1));
        u32::try_from(index).unwrap_or(0)
    }

    /// The 4 KiB block image, or an error if a field breaks the format's rules.
    pub fn encode(&self) -> Result<Vec<u8>, MetaError> {
        self.validate()?;
        let mut writer = Writer::with_capacity(AL_TRANSACTION_BYTES);
        writer.u32(AL_TRANSACTION_MAGIC);
        writer.u32(0);
        writer.u64(self.seq);
        writer.u16(AL_TRANSACTION_VERSION);
        writer.u16(self.al_extents);
        writer.u16(count_u16(self.updates.len()));
        writer.u16(self.context_start);
        writer.u16(count_u16(self.context.len()));
        writer.u16(0);
        for update in &self.updates {
            writer.u16(update.slot);
            writer.u32(update.extent.unwrap_or(AL_SLOT_EMPTY));
        }
        writer.zeros((AL_UPDATES_PER_TRANSACTION_MAX - self.updates.len()) * AL_UPDATE_BYTES);
        for extent in &self.context {
            writer.u32(extent.unwrap_or(AL_SLOT_EMPTY));
        }
        let mut block = writer.finish_padded(AL_TRANSACTION_BYTES);
        let crc = block_crc(&block, CRC_OFFSET);
        store_crc(&mut block, CRC_OFFSET, crc);
        Ok(block)
    }

    /// Decodes one ring block. Torn and foreign blocks fail with the magic or checksum error.
    pub fn decode(block: &[u8]) -> Result<Transaction, MetaError> {
        if block.len() < AL_TRANSACTION_BYTES {
            return Err(MetaError::Truncated {
                what: WHAT,
                needed: AL_TRANSACTION_BYTES,
                actual: block.len(),
            });
        }
        let block = block.get(..AL_TRANSACTION_BYTES).unwrap_or(block);
        let mut reader = Reader::new(block, WHAT);
        let magic = reader.u32()?;
        if magic != AL_TRANSACTION_MAGIC {
            return Err(invalid("magic", u64::from(magic)));
        }
        let stored = reader.u32()?;
        let computed = block_crc(block, CRC_OFFSET);
        if stored != computed {
            return Err(MetaError::ChecksumMismatch {
                what: WHAT,
                stored,
                computed,
            });
        }
        let seq = reader.u64()?;
        let version = reader.u16()?;
        if version != AL_TRANSACTION_VERSION {
            return Err(invalid("version", u64::from(version)));
        }
        let transaction = Self::decode_body(&mut reader, seq)?;
        reader.reserved(AL_TRANSACTION_BYTES - reader.position())?;
        transaction.validate()?;
        Ok(transaction)
    }

    fn decode_body(reader: &mut Reader<'_>, seq: u64) -> Result<Transaction, MetaError> {
        let al_extents = reader.u16()?;
        let update_count = usize::from(reader.u16()?);
        let context_start = reader.u16()?;
        let context_count = usize::from(reader.u16()?);
        reader.reserved(2)?;
        if update_count > AL_UPDATES_PER_TRANSACTION_MAX {
            return Err(invalid("update_count", to_u64(update_count)));
        }
        if context_count != context_len(al_extents) {
            return Err(invalid("context_count", to_u64(context_count)));
        }
        let mut updates = Vec::with_capacity(update_count);
        for _ in 0..update_count {
            let slot = reader.u16()?;
            updates.push(SlotUpdate {
                slot,
                extent: extent_from_disk(reader.u32()?),
            });
        }
        reader.reserved((AL_UPDATES_PER_TRANSACTION_MAX - update_count) * AL_UPDATE_BYTES)?;
        let mut context = Vec::with_capacity(context_count);
        for _ in 0..context_count {
            context.push(extent_from_disk(reader.u32()?));
        }
        Ok(Transaction {
            seq,
            al_extents,
            updates,
            context_start,
            context,
        })
    }

    /// Checks the rules the module comment lists.
    fn validate(&self) -> Result<(), MetaError> {
        if !(AL_EXTENTS_MIN..=AL_EXTENTS_MAX).contains(&self.al_extents) {
            return Err(invalid("al_extents", u64::from(self.al_extents)));
        }
        if self.updates.len() > AL_UPDATES_PER_TRANSACTION_MAX {
            return Err(invalid("update_count", to_u64(self.updates.len())));
        }
        if self.context.len() != context_len(self.al_extents) {
            return Err(invalid("context_count", to_u64(self.context.len())));
        }
        if self.context_start >= self.al_extents {
            return Err(invalid("context_start", u64::from(self.context_start)));
        }
        for update in &self.updates {
            if update.slot >= self.al_extents {
                return Err(invalid("update.slot", u64::from(update.slot)));
            }
        }
        let extents = self
            .updates
            .iter()
            .map(|update| update.extent)
            .chain(self.context.iter().copied());
        for extent in extents.flatten() {
            if extent == AL_SLOT_EMPTY {
                return Err(invalid("extent", u64::from(extent)));
            }
        }
        Ok(())
    }

    /// The slot index of context entry `index`.
    pub fn context_slot(&self, index: usize) -> u16 {
        let slot = (usize::from(self.context_start) + index) % usize::from(self.al_extents.max(1));
        u16::try_from(slot).unwrap_or(0)
    }
}

fn extent_from_disk(value: u32) -> Option<u32> {
    (value != AL_SLOT_EMPTY).then_some(value)
}

fn invalid(field: &'static str, value: u64) -> MetaError {
    MetaError::FieldInvalid {
        what: WHAT,
        field,
        value,
    }
}

fn to_u64(value: usize) -> u64 {
    crate::codec::to_u64(value)
}

/// A count already checked to be at most [`AL_CONTEXT_SLOTS_PER_TRANSACTION`].
fn count_u16(count: usize) -> u16 {
    u16::try_from(count).unwrap_or(u16::MAX)
}
