//! tandem's on-disk metadata: the geometry, the superblock with the generation identifiers, one
//! out-of-sync bitmap per peer, and the activity log, as exact byte images and in-memory logic.
//!
//! **Boundary:** this crate does no I/O: no files, no sockets, no clocks, no randomness. It turns
//! typed values into byte images (`encode`) and byte images into typed values (`decode`, which
//! returns a [`MetaError`] for anything malformed and never panics), and it holds the bitmap and
//! activity-log logic. The daemon reads, writes and fsyncs.
//!
//! # On-disk layout
//!
//! ```text
//! internal (end of the backing device):
//!   [ data ......................... | bitmap 0 | … | bitmap n-1 | AL ring | superblock ]
//! external (own file or device, from 0):
//!   [ superblock | AL ring | bitmap 0 | … | bitmap n-1 | unused ]
//!
//! superblock: 4 KiB    AL ring: 4 KiB transactions (default 8)    bitmap: 1 bit per granularity
//! ```
//!
//! Metadata size: `4 KiB + al_ring_bytes + peer_slots × round_up_4k(ceil(ceil(data /
//! granularity) / 8))`, i.e. about 36 KiB + data/32768 per peer at the defaults; see
//! [`Layout::compute`].
//!
//! Growing (`tandem resize`): [`Layout::grow`] gives the layout on a grown device, refusing a
//! shrink and an internal grow whose new metadata would overlap the old; the daemon then moves
//! the metadata (new bitmaps and ring, then the new superblock as the commit). A data size
//! capped below what the device gives is stored in the superblock (`data_bytes_max`, v3).
//!
//! # Crash safety: activity log + bitmap
//!
//! **Invariant:** after a crash, every block that might differ on a peer is either set in that
//! peer's persisted bitmap or inside an extent that the persisted activity log calls hot. On
//! restart the daemon marks every hot extent out of sync for every peer
//! ([`Recovery::mark_out_of_sync`]), so a crashed primary resyncs only its hot extents.
//!
//! Write ordering that keeps it (the daemon's part):
//! 1. Data write to a cold extent: [`ActivityLog::begin_write`] returns an [`AlWrite`]; write the
//!    dirty bitmap pages of its `cold_extents` (evicted extents) and make them durable; write
//!    the transaction block and make it durable; then issue the data write.
//! 2. Bits set outside the write path (bitmap exchange, verify, `invalidate-remote`): write the
//!    dirty pages before acting on them (e.g. before the generation identifiers that depend on
//!    them are written).
//! 3. Superblock updates (new current UUID, flags): write and fsync before the state they
//!    describe is acted on (the primary indicator before the first write as Primary).
//! 4. Attach: decode the superblock, [`recover`] the ring, mark the hot extents in every peer's
//!    bitmap, write those pages, write a [`format_ring`] image, then start the
//!    [`ActivityLog`] at `next_seq + ring blocks`.
//!
//! # Modules
//!
//! - [`layout`]: sizes and offsets of every region.
//! - [`superblock`]: the 4 KiB superblock and the generation identifiers.
//! - [`bitmap`]: a peer's bitmap, dirty-page tracking and the RLE exchange format.
//! - [`activity_log`]: the cache of hot extents, the transaction format and recovery.
//! - [`dump`]: `tandem dump-md` (text and JSON).

pub mod activity_log;
pub mod bitmap;
mod codec;
pub mod dump;
mod error;
pub mod layout;
pub mod superblock;

pub use activity_log::{
    extent_byte_range, format_ring, recover, ActivityLog, ActivityLogConfig, AlUpdates, AlWrite,
    Begin, ExtentRange, FullResyncReason, Recovery, Transaction, AL_EXTENT_BYTES,
};
pub use bitmap::{Bitmap, RleDecoder, RleEncoder};
pub use dump::{DumpSources, MetaDump};
pub use error::MetaError;
pub use layout::{GrowTarget, Layout, LayoutConfig, Placement, Region};
pub use superblock::{
    FollowedPrimary, PeerFlags, PeerSlot, Superblock, SuperblockFlags, UUID_JUST_CREATED,
    UUID_PRIMARY_BIT,
};
