//! The crate's one error type: every way a metadata configuration, byte image or call can be
//! refused.
//!
//! Invariant: no function of this crate panics on bad input; each refusal maps to exactly one
//! variant here, and its message names the field and the values involved so an operator can act
//! on it (`tandem create-md`/attach print these messages unchanged).

/// A refused metadata configuration, byte image or call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// The number of peer slots is outside 1..=31.
    #[error("{peer_slots} peer slots requested; tandem metadata holds 1..=31")]
    PeerSlotsOutOfRange {
        /// The number requested.
        peer_slots: u8,
    },
    /// The bitmap granularity is not a power of two between 4 KiB and 1 MiB.
    #[error(
        "bitmap granularity of {granularity_bytes} bytes per bit is invalid: it must be a power \
         of two from 4096 to 1048576"
    )]
    GranularityInvalid {
        /// The granularity requested, in bytes per bit.
        granularity_bytes: u32,
    },
    /// The activity-log ring size is not a whole number of 4 KiB blocks within the limits.
    #[error(
        "activity-log ring of {al_ring_bytes} bytes is invalid: it must be a multiple of 4096 \
         between {al_ring_bytes_min} and {al_ring_bytes_max}"
    )]
    AlRingBytesInvalid {
        /// The ring size requested.
        al_ring_bytes: u32,
        /// The smallest ring allowed.
        al_ring_bytes_min: u32,
        /// The largest ring allowed.
        al_ring_bytes_max: u32,
    },
    /// `al-extents` is outside DRBD's range 7..=65534.
    #[error("al-extents {al_extents} is out of range 7..=65534")]
    AlExtentsOutOfRange {
        /// The number requested.
        al_extents: u32,
    },
    /// `al-extents` is more than the activity-log ring can recover after a torn write.
    #[error(
        "al-extents {al_extents} does not fit an activity-log ring of {al_ring_bytes} bytes \
         (at most {al_extents_max}); lower al-extents or enlarge the ring"
    )]
    AlExtentsExceedRing {
        /// The number requested.
        al_extents: u32,
        /// The most this ring can hold.
        al_extents_max: u32,
        /// The ring size.
        al_ring_bytes: u32,
    },
    /// Internal metadata: the backing device cannot hold any data plus the metadata.
    #[error(
        "backing device of {backing_bytes} bytes is too small: internal metadata plus one 4 KiB \
         data block need {needed_bytes} bytes"
    )]
    BackingTooSmall {
        /// The backing device size.
        backing_bytes: u64,
        /// The smallest backing device that would work.
        needed_bytes: u64,
    },
    /// External metadata: the metadata device is smaller than the metadata for this backing
    /// device.
    #[error(
        "metadata area of {available_bytes} bytes is too small for this device: it needs \
         {needed_bytes} bytes"
    )]
    MetadataAreaTooSmall {
        /// The metadata device size.
        available_bytes: u64,
        /// The size the metadata needs.
        needed_bytes: u64,
    },
    /// `data_bytes_max` is below one 4 KiB block.
    #[error("a data size cap of {data_bytes_max} bytes is below one 4 KiB block")]
    DataCapTooSmall {
        /// The cap requested.
        data_bytes_max: u64,
    },
    /// A resize would change internal metadata to external or back.
    #[error("the metadata placement (internal or external) cannot change in a resize")]
    PlacementChanged,
    /// A resize would make the data smaller (shrinking is not supported).
    #[error(
        "the data would shrink from {data_bytes} to {new_data_bytes} bytes; shrinking is not \
         supported (grow the backing device, or check --size)"
    )]
    DataWouldShrink {
        /// The data size now.
        data_bytes: u64,
        /// The data size the resize would give.
        new_data_bytes: u64,
    },
    /// A resize of internal metadata where the new metadata would overlap the old.
    #[error(
        "the backing device grew too little to move the metadata safely: at {backing_bytes} \
         bytes the new metadata would overwrite the old; grow it to at least {needed_bytes} bytes"
    )]
    GrowOverlapsMetadata {
        /// The backing device size now.
        backing_bytes: u64,
        /// About the smallest backing size that allows the move.
        needed_bytes: u64,
    },
    /// The data area has more 4 MiB extents than an activity-log slot can name.
    #[error("data area of {data_bytes} bytes is too large for the activity log's extent numbers")]
    DataTooLarge {
        /// The data size.
        data_bytes: u64,
    },
    /// A peer slot index past the configured number of slots.
    #[error("peer slot {slot} does not exist (the metadata has {peer_slots} slots)")]
    PeerSlotOutOfRange {
        /// The slot asked for.
        slot: u8,
        /// The number of slots.
        peer_slots: u8,
    },
    /// A byte image is shorter than its format requires.
    #[error("{what} is truncated: {actual} bytes, need {needed}")]
    Truncated {
        /// Which structure.
        what: &'static str,
        /// The bytes it needs.
        needed: usize,
        /// The bytes given.
        actual: usize,
    },
    /// The superblock magic is wrong: the area does not hold tandem metadata.
    #[error("not tandem metadata: magic {found:02x?} is not \"TNDMMETA\"")]
    NotTandemMetadata {
        /// The eight bytes found where the magic belongs.
        found: [u8; 8],
    },
    /// The superblock comes from a format version this build does not read.
    #[error(
        "unsupported tandem metadata version {version} (this build reads version {supported})"
    )]
    UnsupportedVersion {
        /// The version found.
        version: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// A stored crc32c does not match the bytes: the block is torn or corrupt.
    #[error("{what} checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// Which structure.
        what: &'static str,
        /// The checksum stored in the block.
        stored: u32,
        /// The checksum of the bytes as read.
        computed: u32,
    },
    /// A field holds a value its format does not allow (unknown flag bits, node id past 31,
    /// an unknown enum byte, a slot index past the cache size).
    #[error("{what}: field {field} has invalid value {value:#x}")]
    FieldInvalid {
        /// Which structure.
        what: &'static str,
        /// Which field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// Bytes that must be zero in this format version are not.
    #[error("{what}: reserved byte at offset {offset} is not zero")]
    ReservedNotZero {
        /// Which structure.
        what: &'static str,
        /// Byte offset of the first non-zero reserved byte.
        offset: usize,
    },
    /// The superblock's layout parameters do not describe a valid layout.
    #[error("superblock is inconsistent: its layout parameters are invalid: {source}")]
    SuperblockLayoutInvalid {
        /// Why the stored parameters do not give a layout.
        source: Box<MetaError>,
    },
    /// A stored offset or size disagrees with the layout its own parameters give.
    #[error("superblock is inconsistent: {field} is {stored}, its parameters give {computed}")]
    SuperblockLayoutMismatch {
        /// Which field.
        field: &'static str,
        /// The value stored.
        stored: u64,
        /// The value computed from the stored parameters.
        computed: u64,
    },
    /// The metadata on disk was made for another configuration or device size.
    #[error(
        "metadata does not match the configuration: {field} is {on_disk} on disk but \
         {configured} now"
    )]
    LayoutMismatch {
        /// Which parameter.
        field: &'static str,
        /// The value on disk.
        on_disk: u64,
        /// The value the current configuration and device give.
        configured: u64,
    },
    /// A byte range reaches past the end of the data area (or wraps around u64).
    #[error("byte range {offset_bytes}+{length_bytes} is outside the data area of {data_bytes}")]
    RangeOutOfBounds {
        /// Start of the range.
        offset_bytes: u64,
        /// Length of the range.
        length_bytes: u64,
        /// Size of the data area.
        data_bytes: u64,
    },
    /// Two bitmaps (or a bitmap and an RLE stream) cover different numbers of blocks.
    #[error("bitmap geometry mismatch: {expected_blocks} blocks expected, {found_blocks} found")]
    BitmapGeometryMismatch {
        /// The block count of the receiving bitmap.
        expected_blocks: u64,
        /// The block count of the other side.
        found_blocks: u64,
    },
    /// A bitmap page index past the bitmap.
    #[error("bitmap page {page} does not exist (the bitmap has {page_count} pages)")]
    PageOutOfRange {
        /// The page asked for.
        page: u64,
        /// The number of pages.
        page_count: u64,
    },
    /// A bitmap page image is not exactly one 4 KiB page.
    #[error("bitmap page image of {length} bytes; pages are 4096 bytes")]
    PageLengthInvalid {
        /// The length given.
        length: usize,
    },
    /// A bitmap page sets bits past the last block of the data area.
    #[error("bitmap page {page} sets bits past the end of the data area")]
    BitmapPaddingNotZero {
        /// The page.
        page: u64,
    },
    /// The run-length chunk size limit is below the smallest useful chunk.
    #[error("RLE chunk limit of {chunk_bytes_max} bytes is below the minimum {chunk_bytes_min}")]
    RleChunkBytesMaxTooSmall {
        /// The limit requested.
        chunk_bytes_max: usize,
        /// The smallest limit allowed.
        chunk_bytes_min: usize,
    },
    /// A received run-length chunk is malformed.
    #[error("bad bitmap RLE chunk: {reason}")]
    RleInvalid {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A received run-length chunk does not start where the previous one ended.
    #[error("bitmap RLE chunk starts at block {found}, expected {expected}")]
    RleOutOfOrder {
        /// The block the previous chunk ended at.
        expected: u64,
        /// The block this chunk starts at.
        found: u64,
    },
    /// A write spans more activity-log extents than one transaction (or the cache) can activate.
    #[error("write spans {extents} activity-log extents; at most {extents_max} at once")]
    AlRangeTooLarge {
        /// Extents the write spans.
        extents: u64,
        /// The most one write may span.
        extents_max: u64,
    },
    /// `transaction_written` named a transaction that is not the one in flight.
    #[error("activity-log transaction {seq} is not in flight (in flight: {in_flight:?})")]
    AlTransactionNotInFlight {
        /// The sequence number given.
        seq: u64,
        /// The transaction in flight, if any.
        in_flight: Option<u64>,
    },
    /// `transaction_failed` while a write still holds an extent the transaction was
    /// activating (every write waiting for it must be ended first).
    #[error(
        "activity-log transaction {seq} failed while extent {extent} still has writes in flight"
    )]
    AlTransactionStillUsed {
        /// The failed transaction.
        seq: u64,
        /// An extent it was activating that still has a write in flight.
        extent: u32,
    },
    /// `end_write` for an extent that has no write in flight.
    #[error("end_write for activity-log extent {extent}, which has no write in flight")]
    AlEndWithoutBegin {
        /// The extent.
        extent: u32,
    },
    /// The activity-log ring image is not a whole number of 4 KiB blocks, or is empty.
    #[error("activity-log ring image of {ring_bytes} bytes is not a whole number of 4 KiB blocks")]
    AlRingImageInvalid {
        /// The length given.
        ring_bytes: usize,
    },
    /// A value does not fit this machine's address space.
    #[error("{what} of {value} does not fit in memory on this machine")]
    TooLargeForMemory {
        /// Which quantity.
        what: &'static str,
        /// Its value.
        value: u64,
    },
}

impl MetaError {
    /// The error wrapped as an inconsistent-superblock error.
    pub(crate) fn inside_superblock(self) -> MetaError {
        MetaError::SuperblockLayoutInvalid {
            source: Box::new(self),
        }
    }
}
