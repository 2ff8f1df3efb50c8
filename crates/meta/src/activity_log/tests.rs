//! Unit tests of the activity log: the call protocol (hot, transaction, after-transaction,
//! busy), LRU eviction, the transaction codec and recovery after torn writes (issue 3 item 1,
//! "a write to a cold extent first persists the extent's activation"; item 9, "a torn
//! activity-log transaction after a crash is detected and the last good one is used").

use super::*;
use crate::Bitmap;

const RING_BLOCKS: u32 = 8;

fn config(al_extents: u16) -> ActivityLogConfig {
    ActivityLogConfig {
        al_extents,
        al_ring_blocks: RING_BLOCKS,
        extent_count: 10_000,
        updates: AlUpdates::Enabled,
    }
}

fn one(extent: u64) -> ExtentRange {
    ExtentRange {
        first: extent,
        end: extent + 1,
    }
}

/// Begins a write that must need a transaction, writes it into `ring` and acknowledges it.
fn activate(log: &mut ActivityLog, ring: &mut [u8], range: ExtentRange) -> AlWrite {
    let Ok(Begin::NeedsTransaction(write)) = log.begin_write(range) else {
        panic!("expected a transaction for {range:?}");
    };
    let offset = usize::try_from(write.ring_offset_bytes()).expect("small");
    ring[offset..offset + 4096].copy_from_slice(&write.encode().expect("encodes"));
    log.transaction_written(write.transaction.seq)
        .expect("in flight");
    write
}

fn fresh(al_extents: u16) -> (ActivityLog, Vec<u8>) {
    let ring = format_ring(RING_BLOCKS, al_extents, 0).expect("formats");
    let log = ActivityLog::new(config(al_extents), u64::from(RING_BLOCKS)).expect("valid");
    (log, ring)
}

#[test]
fn extent_ranges_cover_touched_extents() {
    let mib = 1 << 20;
    let cases = [
        (0, 0, 0, 0),
        (0, 1, 0, 1),
        (4 * mib - 1, 2, 0, 2),
        (4 * mib, 4 * mib, 1, 2),
        (5 * mib, 8 * mib, 1, 4),
    ];
    for (offset, length, first, end) in cases {
        assert_eq!(
            ExtentRange::covering(offset, length),
            Ok(ExtentRange { first, end }),
            "{offset}+{length}"
        );
    }
    assert!(ExtentRange::covering(u64::MAX, 2).is_err());
    assert_eq!(
        extent_byte_range(2, 9 * (1 << 20)),
        Some((8 << 20, 1 << 20))
    );
    assert_eq!(extent_byte_range(3, 9 * (1 << 20)), None);
}

#[test]
fn cold_write_needs_transaction_then_is_hot() {
    let (mut log, mut ring) = fresh(7);
    let write = activate(&mut log, &mut ring, ExtentRange { first: 3, end: 5 });
    assert_eq!(write.transaction.seq, 8);
    assert_eq!(write.ring_block, 0);
    assert_eq!(
        write.transaction.updates.len(),
        2,
        "one transaction activates both extents"
    );
    assert!(write.cold_extents.is_empty());
    assert_eq!(log.begin_write(one(4)), Ok(Begin::Hot));
    assert_eq!(log.writes_in_flight(4), 2);
    assert_eq!(log.active_extents(), vec![3, 4]);
    log.end_write(ExtentRange { first: 3, end: 5 })
        .expect("begun");
    log.end_write(one(4)).expect("begun");
    assert_eq!(
        log.end_write(one(4)),
        Err(MetaError::AlEndWithoutBegin { extent: 4 })
    );
    assert_eq!(
        log.end_write(one(9)),
        Err(MetaError::AlEndWithoutBegin { extent: 9 })
    );
}

#[test]
fn one_transaction_at_a_time_and_piggybacking() {
    let (mut log, _) = fresh(7);
    let Ok(Begin::NeedsTransaction(write)) = log.begin_write(one(1)) else {
        panic!("cold")
    };
    let seq = write.transaction.seq;
    assert_eq!(log.transaction_in_flight(), Some(seq));
    assert_eq!(
        log.begin_write(one(1)),
        Ok(Begin::AfterTransaction { seq }),
        "same extent: wait for it"
    );
    assert_eq!(
        log.begin_write(one(2)),
        Ok(Begin::Busy),
        "another cold extent: one transaction at a time"
    );
    assert_eq!(log.writes_in_flight(2), 0, "busy reserves nothing");
    assert_eq!(
        log.transaction_written(seq + 1),
        Err(MetaError::AlTransactionNotInFlight {
            seq: seq + 1,
            in_flight: Some(seq)
        })
    );
    log.transaction_written(seq).expect("in flight");
    assert_eq!(
        log.transaction_written(seq),
        Err(MetaError::AlTransactionNotInFlight {
            seq,
            in_flight: None
        })
    );
    assert_eq!(log.begin_write(one(1)), Ok(Begin::Hot));
    assert_eq!(log.writes_in_flight(1), 3);
}

#[test]
fn eviction_is_lru_and_never_touches_busy_extents() {
    let (mut log, mut ring) = fresh(7);
    for extent in 0..7 {
        activate(&mut log, &mut ring, one(extent));
    }
    // Extents 0 and 1 still have writes in flight; the rest are idle. Touch 2 again.
    for extent in 2..7 {
        log.end_write(one(extent)).expect("begun");
    }
    assert_eq!(log.begin_write(one(2)), Ok(Begin::Hot));
    log.end_write(one(2)).expect("begun");
    let write = activate(&mut log, &mut ring, one(100));
    assert_eq!(
        write.cold_extents,
        vec![3],
        "least recently used idle extent"
    );
    let write = activate(
        &mut log,
        &mut ring,
        ExtentRange {
            first: 200,
            end: 203,
        },
    );
    assert_eq!(write.cold_extents, vec![4, 5, 6]);
    // Now only 2 is idle; two cold extents need two slots.
    assert_eq!(
        log.begin_write(ExtentRange {
            first: 300,
            end: 302
        }),
        Ok(Begin::Busy)
    );
    log.end_write(one(0)).expect("begun");
    let write = activate(
        &mut log,
        &mut ring,
        ExtentRange {
            first: 300,
            end: 302,
        },
    );
    assert_eq!(write.cold_extents, vec![0, 2], "0 was last used before 2");
    assert_eq!(log.active_extents(), vec![1, 100, 200, 201, 202, 300, 301]);
}

/// A transaction that could not be written gives its extents back: they are cold again, the
/// evicted extent stays evicted, and the next transaction (a new number) activates them anew.
#[test]
fn a_failed_transaction_makes_its_extents_cold_again() {
    let (mut log, mut ring) = fresh(7);
    for extent in 0..7 {
        activate(&mut log, &mut ring, one(extent));
        log.end_write(one(extent)).expect("begun");
    }
    let Ok(Begin::NeedsTransaction(write)) = log.begin_write(ExtentRange { first: 20, end: 22 })
    else {
        panic!("cold")
    };
    let seq = write.transaction.seq;
    assert_eq!(write.cold_extents, vec![0, 1]);
    assert_eq!(
        log.begin_write(one(21)),
        Ok(Begin::AfterTransaction { seq })
    );
    assert_eq!(
        log.transaction_failed(seq + 1),
        Err(MetaError::AlTransactionNotInFlight {
            seq: seq + 1,
            in_flight: Some(seq)
        })
    );
    assert_eq!(
        log.transaction_failed(seq),
        Err(MetaError::AlTransactionStillUsed { seq, extent: 20 }),
        "the writes waiting for it are ended first"
    );
    assert_eq!(
        log.transaction_in_flight(),
        Some(seq),
        "a refusal changes nothing"
    );
    log.end_write(ExtentRange { first: 20, end: 22 })
        .expect("begun");
    log.end_write(one(21)).expect("begun");
    log.transaction_failed(seq).expect("in flight, unused");
    assert_eq!(log.transaction_in_flight(), None);
    assert_eq!(log.active_extents(), vec![2, 3, 4, 5, 6]);
    assert_eq!(
        log.end_write(one(20)),
        Err(MetaError::AlEndWithoutBegin { extent: 20 })
    );
    let retry = activate(&mut log, &mut ring, one(21));
    assert_eq!(retry.transaction.seq, seq + 1, "numbers are never reused");
    assert!(retry.cold_extents.is_empty(), "a freed slot is used first");
    let next = activate(&mut log, &mut ring, one(22));
    assert_eq!(next.cold_extents, Vec::<u32>::new());
    assert_eq!(log.active_extents(), vec![2, 3, 4, 5, 6, 21, 22]);
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    assert_eq!(recovery.hot_extents, vec![2, 3, 4, 5, 6, 21, 22]);
}

#[test]
fn range_refusals() {
    let (mut log, _) = fresh(7);
    assert_eq!(
        log.begin_write(ExtentRange { first: 0, end: 8 }),
        Err(MetaError::AlRangeTooLarge {
            extents: 8,
            extents_max: 7
        })
    );
    let (mut big, _) = fresh(2000);
    assert_eq!(
        big.begin_write(ExtentRange { first: 0, end: 49 }),
        Err(MetaError::AlRangeTooLarge {
            extents: 49,
            extents_max: 48
        })
    );
    assert!(matches!(
        log.begin_write(one(10_000)),
        Err(MetaError::RangeOutOfBounds { .. })
    ));
    assert_eq!(
        log.begin_write(ExtentRange { first: 5, end: 5 }),
        Ok(Begin::Hot),
        "empty range"
    );
    assert!(ActivityLog::new(config(6), 0).is_err());
    let huge = ActivityLogConfig {
        extent_count: u64::from(u32::MAX),
        ..config(7)
    };
    assert!(matches!(
        ActivityLog::new(huge, 0),
        Err(MetaError::DataTooLarge { .. })
    ));
    let too_many = ActivityLogConfig {
        al_extents: 6616,
        ..config(7)
    };
    assert!(matches!(
        ActivityLog::new(too_many, 0),
        Err(MetaError::AlExtentsExceedRing {
            al_extents_max: 6615,
            ..
        })
    ));
}

#[test]
fn disabled_mode_never_logs() {
    let mut log = ActivityLog::new(
        ActivityLogConfig {
            updates: AlUpdates::Disabled,
            ..config(7)
        },
        0,
    )
    .expect("valid");
    for extent in 0..100 {
        assert_eq!(log.begin_write(one(extent)), Ok(Begin::Hot));
    }
    assert_eq!(log.end_write(one(3)), Ok(()));
    assert!(log.active_extents().is_empty());
    let ring = format_ring(RING_BLOCKS, 7, 0).expect("formats");
    let recovery = recover(&ring, AlUpdates::Disabled).expect("reads");
    assert_eq!(recovery.full_resync, Some(FullResyncReason::AlDisabled));
}

#[test]
fn transaction_round_trip_and_refusals() {
    let transaction = Transaction {
        seq: 77,
        al_extents: 9,
        updates: vec![
            SlotUpdate {
                slot: 8,
                extent: Some(5),
            },
            SlotUpdate {
                slot: 0,
                extent: None,
            },
        ],
        context_start: 4,
        context: vec![None, Some(1), None, None, Some(5), None, None, None, None],
    };
    let block = transaction.encode().expect("valid");
    assert_eq!(block.len(), AL_TRANSACTION_BYTES);
    assert_eq!(Transaction::decode(&block), Ok(transaction.clone()));
    assert_eq!(
        transaction.context_slot(5),
        0,
        "context wraps around the slots"
    );
    let mut corrupt = block.clone();
    corrupt[3000] ^= 4;
    assert!(matches!(
        Transaction::decode(&corrupt),
        Err(MetaError::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        Transaction::decode(&vec![0; 4096]),
        Err(MetaError::FieldInvalid { field: "magic", .. })
    ));
    assert!(matches!(
        Transaction::decode(&block[..4000]),
        Err(MetaError::Truncated { .. })
    ));
    let invalid = [
        Transaction {
            context_start: 9,
            ..transaction.clone()
        },
        Transaction {
            al_extents: 6,
            context: vec![None; 6],
            ..transaction.clone()
        },
        Transaction {
            context: vec![None; 8],
            ..transaction.clone()
        },
        Transaction {
            updates: vec![SlotUpdate {
                slot: 9,
                extent: None,
            }],
            ..transaction.clone()
        },
        Transaction {
            updates: vec![SlotUpdate {
                slot: 1,
                extent: Some(AL_SLOT_EMPTY),
            }],
            ..transaction.clone()
        },
        Transaction {
            updates: vec![
                SlotUpdate {
                    slot: 1,
                    extent: None
                };
                49
            ],
            ..transaction.clone()
        },
    ];
    for transaction in invalid {
        assert!(
            matches!(transaction.encode(), Err(MetaError::FieldInvalid { .. })),
            "{transaction:?}"
        );
    }
}

#[test]
fn recovery_finds_hot_extents_and_survives_a_torn_newest_block() {
    let (mut log, mut ring) = fresh(7);
    for extent in [10, 11, 12] {
        activate(&mut log, &mut ring, one(extent));
    }
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    assert_eq!(recovery.hot_extents, vec![10, 11, 12]);
    assert_eq!((recovery.full_resync, recovery.invalid_blocks), (None, 0));
    assert_eq!(recovery.last_seq, Some(10));
    assert_eq!(recovery.next_seq, 11);
    // The next activation is torn: only its first 320 bytes (header, update, first context
    // entry) reached the disk; the rest of the block is the old transaction's.
    let Ok(Begin::NeedsTransaction(write)) = log.begin_write(one(13)) else {
        panic!("cold")
    };
    let offset = usize::try_from(write.ring_offset_bytes()).expect("small");
    ring[offset..offset + 320].copy_from_slice(&write.encode().expect("encodes")[..320]);
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    assert_eq!(
        recovery.hot_extents,
        vec![10, 11, 12],
        "the previous good transaction is used"
    );
    assert_eq!(recovery.invalid_blocks, 1);
    assert_eq!(recovery.last_seq, Some(10));
}

#[test]
fn recovery_of_garbage_and_broken_windows() {
    let garbage: Vec<u8> = (0..8 * 4096_u32)
        .map(|i| u8::try_from(i.wrapping_mul(2_654_435_761) >> 24).unwrap_or(0))
        .collect();
    let recovery = recover(&garbage, AlUpdates::Enabled).expect("reads");
    assert_eq!(
        recovery.full_resync,
        Some(FullResyncReason::NoValidTransaction)
    );
    assert_eq!((recovery.invalid_blocks, recovery.next_seq), (8, 0));
    assert_eq!(
        recover(&[], AlUpdates::Enabled),
        Err(MetaError::AlRingImageInvalid { ring_bytes: 0 })
    );
    assert_eq!(
        recover(&[0; 5000], AlUpdates::Enabled),
        Err(MetaError::AlRingImageInvalid { ring_bytes: 5000 })
    );
    // 2000 slots need the 3 newest transactions; corrupt the second newest.
    let mut ring = format_ring(4, 2000, 0).expect("formats");
    assert!(recover(&ring, AlUpdates::Enabled)
        .expect("reads")
        .hot_extents
        .is_empty());
    ring[2 * 4096 + 100] ^= 1;
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    assert_eq!(
        recovery.full_resync,
        Some(FullResyncReason::WindowIncomplete { missing_seq: 2 })
    );
    assert_eq!(recovery.last_seq, Some(3));
}

#[test]
fn recovery_ignores_misplaced_blocks() {
    let (mut log, mut ring) = fresh(7);
    activate(&mut log, &mut ring, one(42));
    // A valid transaction copied into the wrong ring block (a misdirected write) is not trusted.
    let copy = ring[..4096].to_vec();
    ring[4096..8192].copy_from_slice(&copy);
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    assert_eq!(recovery.hot_extents, vec![42]);
    assert_eq!(recovery.invalid_blocks, 1);
}

#[test]
fn mark_out_of_sync_sets_hot_extents_or_everything() {
    let (mut log, mut ring) = fresh(7);
    activate(&mut log, &mut ring, ExtentRange { first: 0, end: 2 });
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    // 6 MiB of data: extent 1 is short (2 MiB).
    let mut bitmap = Bitmap::new(6 << 20, 4096).expect("valid");
    assert_eq!(recovery.mark_out_of_sync(&mut bitmap), Ok(1536));
    let everything = Recovery {
        full_resync: Some(FullResyncReason::NoValidTransaction),
        ..recovery
    };
    let mut bitmap = Bitmap::new(64 << 20, 4096).expect("valid");
    assert_eq!(everything.mark_out_of_sync(&mut bitmap), Ok(16384));
}

#[test]
fn format_ring_refuses_what_the_ring_cannot_recover() {
    assert!(matches!(
        format_ring(2, 946, 0),
        Err(MetaError::AlExtentsExceedRing {
            al_extents_max: 945,
            ..
        })
    ));
    assert!(format_ring(2, 945, 0).is_ok());
    assert!(matches!(
        format_ring(8, 6, 0),
        Err(MetaError::AlExtentsOutOfRange { .. })
    ));
}

/// Found by fuzzing (`meta_activity_log`): a first sequence number near `u64::MAX` made the
/// sequence numbers saturate, so the formatted ring held duplicates and did not recover.
#[test]
fn format_ring_refuses_sequence_numbers_that_overflow() {
    let top = u64::MAX - 8;
    let ring = format_ring(8, 7, top).expect("the last sequence number fits");
    let recovery = recover(&ring, AlUpdates::Enabled).expect("recovers");
    assert_eq!(recovery.full_resync, None);
    assert_eq!(recovery.last_seq, Some(u64::MAX - 1));
    for first_seq in [u64::MAX - 7, u64::MAX - 2, u64::MAX] {
        assert_eq!(
            format_ring(8, 7, first_seq),
            Err(MetaError::FieldInvalid {
                what: "activity-log ring",
                field: "first_seq",
                value: first_seq,
            })
        );
    }
}

#[test]
fn transaction_fields_land_where_the_table_says() {
    let transaction = Transaction {
        seq: 0x0102_0304_0506_0708,
        al_extents: 7,
        updates: vec![SlotUpdate {
            slot: 6,
            extent: Some(0xAABB),
        }],
        context_start: 3,
        context: vec![Some(9), None, None, None, None, None, Some(0xAABB)],
    };
    let block = transaction.encode().expect("valid");
    assert_eq!(&block[0..4], b"TNAL");
    assert_eq!(&block[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(
        &block[16..28],
        &[0, 1, 0, 7, 0, 1, 0, 3, 0, 7, 0, 0],
        "version, al_extents, counts, start"
    );
    assert_eq!(&block[28..34], &[0, 6, 0, 0, 0xAA, 0xBB], "update 0");
    assert!(
        block[34..316].iter().all(|&b| b == 0),
        "unused updates are zero"
    );
    assert_eq!(
        &block[316..324],
        &[0, 0, 0, 9, 0xFF, 0xFF, 0xFF, 0xFF],
        "context 0 and 1"
    );
    assert!(
        block[316 + 7 * 4..].iter().all(|&b| b == 0),
        "unused context is zero"
    );
}
