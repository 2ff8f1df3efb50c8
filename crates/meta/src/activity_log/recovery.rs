//! Activity-log recovery: from the raw bytes of the ring, the set of extents that were hot when
//! the last durable transaction was written; and the image of a freshly formatted ring.
//!
//! Recovery decodes every ring block and keeps those that decode and sit in their own block
//! (`seq % ring blocks`); torn, corrupt, foreign and misdirected blocks are counted and ignored.
//! The newest valid transaction `n` names the cache size; the `k = ceil(al_extents / 945)`
//! transactions `n-k+1..=n` must all be valid and of the same size, since their context windows
//! together cover every slot. Replaying them oldest first (context, then updates) gives each
//! slot's content at transaction `n`. A torn newest block leaves `n-1` as the newest, which is
//! why the ring keeps `k + 1` blocks (see [`super::al_extents_max`]).
//!
//! Invariants: recovery never panics and never allocates more than the ring's size in
//! transactions; when it cannot rebuild the set it says so with a [`FullResyncReason`] instead of
//! guessing.

use std::collections::BTreeSet;

use super::{context_len, AlUpdates, Transaction, AL_EXTENTS_MAX, AL_EXTENTS_MIN};
use super::{extent_byte_range, AL_TRANSACTION_BYTES};
use crate::{Bitmap, MetaError};

/// Why recovery cannot name the hot extents: the caller must treat every block as out of sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum FullResyncReason {
    /// `al-updates no`: nothing was logged.
    AlDisabled,
    /// No ring block holds a valid transaction.
    NoValidTransaction,
    /// Transaction `missing_seq`, needed to rebuild the cache, is missing, corrupt or of another
    /// cache size.
    WindowIncomplete {
        /// The first transaction found missing, walking back from the newest.
        missing_seq: u64,
    },
}

/// The result of [`recover`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Recovery {
    /// Extents that were hot at the newest valid transaction, ascending, without duplicates.
    pub hot_extents: Vec<u32>,
    /// Set when `hot_extents` cannot be trusted: mark the whole device out of sync instead.
    pub full_resync: Option<FullResyncReason>,
    /// The newest valid transaction, if any.
    pub last_seq: Option<u64>,
    /// The number to give the next transaction written to this ring.
    pub next_seq: u64,
    /// Cache size of the newest valid transaction, if any.
    pub al_extents: Option<u16>,
    /// Ring blocks that did not hold a valid transaction for their position (torn, corrupt,
    /// never written or misdirected).
    pub invalid_blocks: u32,
}

impl Recovery {
    /// Marks what recovery says may differ in `bitmap`: every hot extent, or everything when a
    /// full resync is needed. Returns the number of newly set blocks.
    pub fn mark_out_of_sync(&self, bitmap: &mut Bitmap) -> Result<u64, MetaError> {
        if self.full_resync.is_some() {
            return Ok(bitmap.set_all());
        }
        let mut newly_set = 0;
        for &extent in &self.hot_extents {
            // Extents past the data end (a shrunk device) have nothing to mark.
            if let Some((offset, length)) = extent_byte_range(extent, bitmap.data_bytes()) {
                newly_set += bitmap.set(offset, length)?;
            }
        }
        Ok(newly_set)
    }
}

/// Rebuilds the hot extents from the ring's bytes (a whole number of 4 KiB blocks).
pub fn recover(ring: &[u8], updates: AlUpdates) -> Result<Recovery, MetaError> {
    let ring_blocks = ring_blocks(ring)?;
    let mut valid: Vec<Option<Transaction>> = Vec::with_capacity(ring.len() / AL_TRANSACTION_BYTES);
    for (index, block) in ring.chunks_exact(AL_TRANSACTION_BYTES).enumerate() {
        let transaction = Transaction::decode(block).ok();
        let in_place = transaction.filter(|t| t.ring_block(ring_blocks) == block_u32(index));
        valid.push(in_place);
    }
    let invalid_blocks = block_u32(valid.iter().filter(|t| t.is_none()).count());
    let newest = valid.iter().flatten().max_by_key(|t| t.seq);
    let mut recovery = Recovery {
        hot_extents: Vec::new(),
        full_resync: None,
        last_seq: newest.map(|t| t.seq),
        next_seq: newest.map_or(0, |t| t.seq.saturating_add(1)),
        al_extents: newest.map(|t| t.al_extents),
        invalid_blocks,
    };
    if updates == AlUpdates::Disabled {
        recovery.full_resync = Some(FullResyncReason::AlDisabled);
        return Ok(recovery);
    }
    let Some(newest) = newest else {
        recovery.full_resync = Some(FullResyncReason::NoValidTransaction);
        return Ok(recovery);
    };
    match replay_window(&valid, newest, ring_blocks) {
        Ok(hot_extents) => recovery.hot_extents = hot_extents,
        Err(missing_seq) => {
            recovery.full_resync = Some(FullResyncReason::WindowIncomplete { missing_seq });
        }
    }
    Ok(recovery)
}

/// The hot extents at `newest`, or the first sequence number of the window that is missing.
fn replay_window(
    valid: &[Option<Transaction>],
    newest: &Transaction,
    ring_blocks: u32,
) -> Result<Vec<u32>, u64> {
    let al_extents = newest.al_extents;
    let window = usize::from(al_extents).div_ceil(context_len(al_extents));
    let mut transactions = Vec::with_capacity(window);
    for back in 0..window {
        let seq = newest
            .seq
            .checked_sub(crate::codec::to_u64(back))
            .ok_or(0_u64)?;
        let position = usize::try_from(seq % u64::from(ring_blocks)).map_err(|_| seq)?;
        let found = valid.get(position).and_then(Option::as_ref);
        match found {
            Some(t) if t.seq == seq && t.al_extents == al_extents => transactions.push(t),
            _ => return Err(seq),
        }
    }
    let mut slots: Vec<Option<u32>> = vec![None; usize::from(al_extents)];
    for transaction in transactions.iter().rev() {
        for (index, extent) in transaction.context.iter().enumerate() {
            if let Some(slot) = slots.get_mut(usize::from(transaction.context_slot(index))) {
                *slot = *extent;
            }
        }
        for update in &transaction.updates {
            if let Some(slot) = slots.get_mut(usize::from(update.slot)) {
                *slot = update.extent;
            }
        }
    }
    let hot: BTreeSet<u32> = slots.into_iter().flatten().collect();
    Ok(hot.into_iter().collect())
}

/// The image of a freshly formatted ring: `ring_blocks` transactions `first_seq..` of an empty
/// cache of `al_extents` slots. Start the [`super::ActivityLog`] at `first_seq + ring_blocks`,
/// which must fit in a `u64` (a larger `first_seq` can only come from corrupt metadata).
pub fn format_ring(
    ring_blocks: u32,
    al_extents: u16,
    first_seq: u64,
) -> Result<Vec<u8>, MetaError> {
    if !(AL_EXTENTS_MIN..=AL_EXTENTS_MAX).contains(&al_extents) {
        return Err(MetaError::AlExtentsOutOfRange {
            al_extents: u32::from(al_extents),
        });
    }
    let ring_bytes = ring_blocks.saturating_mul(4096);
    let al_extents_max = super::al_extents_max(ring_bytes);
    if u32::from(al_extents) > al_extents_max {
        return Err(MetaError::AlExtentsExceedRing {
            al_extents: u32::from(al_extents),
            al_extents_max,
            al_ring_bytes: ring_bytes,
        });
    }
    // Sequence numbers must not saturate: duplicates would make the ring unrecoverable.
    if first_seq.checked_add(u64::from(ring_blocks)).is_none() {
        return Err(MetaError::FieldInvalid {
            what: "activity-log ring",
            field: "first_seq",
            value: first_seq,
        });
    }
    let block_count = crate::codec::to_usize(u64::from(ring_blocks), "activity-log ring")?;
    let mut image = vec![0; block_count * AL_TRANSACTION_BYTES];
    let mut context_start: usize = 0;
    for offset in 0..u64::from(ring_blocks) {
        let transaction = Transaction {
            seq: first_seq.saturating_add(offset),
            al_extents,
            updates: Vec::new(),
            context_start: u16::try_from(context_start).unwrap_or(0),
            context: vec![None; context_len(al_extents)],
        };
        context_start = (context_start + context_len(al_extents)) % usize::from(al_extents);
        let start = usize::try_from(transaction.ring_block(ring_blocks)).unwrap_or(0)
            * AL_TRANSACTION_BYTES;
        if let Some(block) = image.get_mut(start..start + AL_TRANSACTION_BYTES) {
            block.copy_from_slice(&transaction.encode()?);
        }
    }
    Ok(image)
}

fn ring_blocks(ring: &[u8]) -> Result<u32, MetaError> {
    let invalid = MetaError::AlRingImageInvalid {
        ring_bytes: ring.len(),
    };
    if ring.is_empty() || !ring.len().is_multiple_of(AL_TRANSACTION_BYTES) {
        return Err(invalid);
    }
    u32::try_from(ring.len() / AL_TRANSACTION_BYTES).map_err(|_| invalid)
}

fn block_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}
