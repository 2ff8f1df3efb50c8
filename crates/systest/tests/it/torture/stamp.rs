//! Stamped 4 KiB writes: the block format, the writer that records what became of every
//! write, and the check of a replica's stamped region against that record.
//!
//! A stamped block names itself: [`MAGIC`], the trial seed, the write's sequence number and
//! the block's own byte offset, then [`PAYLOAD_BYTES`] generated from those three. A block
//! read back from a backing file therefore says which write put it there and whether it is
//! whole, without the harness keeping any data.
//!
//! Invariants:
//! - Sequence numbers are unique in a trial and follow issue order: each phase has one
//!   writer at queue depth 1, and the old Primary's writer stops (its stop flag is set at the
//!   fault) before the new Primary's starts.
//! - A replica keeps every acknowledged write when each block of the stamped region holds the
//!   last acknowledged write to it, or a write to it issued after that one and never
//!   acknowledged (it may or may not have landed). A block no acknowledged write touched
//!   holds zeros or such an unacknowledged write. Anything else is reported, with the block.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::export::Export;
use crate::tools::Rng;

/// Every stamped write is one block of this size, aligned to it.
pub const BLOCK_BYTES: u64 = 4096;
/// Stamped writes land in the first 16 MiB of the export.
pub const REGION_BYTES: u64 = 16 << 20;
/// Blocks in the stamped region.
pub const REGION_BLOCKS: u64 = REGION_BYTES / BLOCK_BYTES;
/// The first 8 bytes of every stamped block.
pub const MAGIC: [u8; 8] = *b"TDMSTAMP";
/// Magic, trial seed, sequence number, offset: four u64.
const HEADER_BYTES: usize = 32;
/// The generated rest of a block.
const PAYLOAD_BYTES: usize = 4096 - HEADER_BYTES;
/// How long one stamped write may wait for its reply (a partitioned Primary answers only
/// once it gave up on its peers and lost quorum).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

const _: () = assert!(HEADER_BYTES + PAYLOAD_BYTES == 4096);
const _: () = assert!(REGION_BYTES.is_multiple_of(BLOCK_BYTES));

/// The block that write `sequence` of trial `trial_seed` puts at `offset`.
pub fn block(trial_seed: u64, sequence: u64, offset: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4096);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&trial_seed.to_le_bytes());
    bytes.extend_from_slice(&sequence.to_le_bytes());
    bytes.extend_from_slice(&offset.to_le_bytes());
    bytes.extend_from_slice(&payload(trial_seed, sequence, offset));
    bytes
}

fn payload(trial_seed: u64, sequence: u64, offset: u64) -> Vec<u8> {
    Rng::new(trial_seed ^ sequence.rotate_left(21) ^ offset.rotate_left(43)).bytes(PAYLOAD_BYTES)
}

/// What a block read back holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Nothing was ever written there.
    Zeros,
    /// Stamped write `sequence`, whole and in its place.
    Stamp(u64),
    /// A whole stamped write that belongs at another offset (a misdirected write).
    Misplaced { sequence: u64, offset: u64 },
    /// A stamp header whose payload does not match (a torn or corrupted write).
    Torn { sequence: u64 },
    /// Data that is not this trial's stamp (e.g. the background load's).
    Foreign,
}

impl fmt::Display for Found {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Zeros => write!(formatter, "zeros"),
            Found::Stamp(sequence) => write!(formatter, "write #{sequence}"),
            Found::Misplaced { sequence, offset } => write!(
                formatter,
                "write #{sequence} of offset {offset} (misdirected)"
            ),
            Found::Torn { sequence } => write!(formatter, "a torn copy of write #{sequence}"),
            Found::Foreign => write!(formatter, "data that is no stamp of this trial"),
        }
    }
}

/// Reads what a block at `offset` holds.
pub fn decode(bytes: &[u8], trial_seed: u64, offset: u64) -> Found {
    assert_eq!(bytes.len(), 4096, "a stamped block is 4 KiB");
    if bytes.iter().all(|byte| *byte == 0) {
        return Found::Zeros;
    }
    let word = |index: usize| {
        u64::from_le_bytes(bytes[index * 8..index * 8 + 8].try_into().expect("8 bytes"))
    };
    if bytes[..8] != MAGIC || word(1) != trial_seed {
        return Found::Foreign;
    }
    let (sequence, stamped_offset) = (word(2), word(3));
    if bytes[HEADER_BYTES..] != payload(trial_seed, sequence, stamped_offset)[..] {
        return Found::Torn { sequence };
    }
    if stamped_offset != offset {
        return Found::Misplaced {
            sequence,
            offset: stamped_offset,
        };
    }
    Found::Stamp(sequence)
}

/// Which writer issued a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Through the first Primary's export, before (and at) the fault.
    BeforeFault,
    /// Through the promoted survivor's export.
    AfterFailover,
}

/// One write a writer is to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    pub offset: u64,
    pub fua: bool,
}

/// What became of one issued write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The server replied success: the write must survive.
    Acknowledged,
    /// The server replied with this errno.
    Failed(u32),
    /// No reply: the connection ended or timed out (a killed or partitioned Primary).
    Unanswered(String),
}

/// One write a writer sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub sequence: u64,
    pub offset: u64,
    pub fua: bool,
    pub phase: Phase,
    pub outcome: Outcome,
}

/// What a writer thread is to do.
#[derive(Debug)]
pub struct WriterConfig {
    pub socket: PathBuf,
    pub trial_seed: u64,
    /// The sequence number of `writes[0]`.
    pub first_sequence: u64,
    pub phase: Phase,
    pub writes: Vec<Planned>,
}

/// A thread issuing stamped writes at queue depth 1 until its list ends, it is stopped, or a
/// write is not acknowledged.
pub struct Writer {
    handle: JoinHandle<Vec<Issued>>,
    stop: Arc<AtomicBool>,
    acknowledged: Arc<AtomicU64>,
}

impl Writer {
    /// Opens the export (in the caller's thread: a refusal is a harness error) and starts.
    pub fn spawn(config: WriterConfig) -> Writer {
        let export = Export::open(&config.socket, REPLY_TIMEOUT);
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(AtomicU64::new(0));
        let (thread_stop, thread_acknowledged) = (Arc::clone(&stop), Arc::clone(&acknowledged));
        let handle = std::thread::spawn(move || {
            write_all(export, &config, &thread_stop, &thread_acknowledged)
        });
        Writer {
            handle,
            stop,
            acknowledged,
        }
    }

    /// Writes acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged.load(Ordering::Relaxed)
    }

    /// Issue no further write (the one in flight still gets its outcome).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether the thread ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the thread (bounded by the reply timeout) and returns every issued write.
    pub fn join(self) -> Vec<Issued> {
        self.stop();
        self.handle.join().expect("a stamped writer panicked")
    }
}

fn write_all(
    mut export: Export,
    config: &WriterConfig,
    stop: &AtomicBool,
    acknowledged: &AtomicU64,
) -> Vec<Issued> {
    let mut issued = Vec::new();
    for (index, planned) in config.writes.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let sequence = config.first_sequence + u64::try_from(index).expect("small");
        let data = block(config.trial_seed, sequence, planned.offset);
        let outcome = match export.write(sequence, planned.offset, &data, planned.fua) {
            Ok(0) => Outcome::Acknowledged,
            Ok(errno) => Outcome::Failed(errno),
            Err(error) => Outcome::Unanswered(error.to_string()),
        };
        let done = outcome != Outcome::Acknowledged;
        if !done {
            acknowledged.fetch_add(1, Ordering::Relaxed);
        }
        issued.push(Issued {
            sequence,
            offset: planned.offset,
            fua: planned.fua,
            phase: config.phase,
            outcome,
        });
        if done {
            break;
        }
    }
    export.disconnect();
    issued
}

/// What a block may hold, from every write issued to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectation {
    /// The last acknowledged write (index into the ledger's writes).
    pub acknowledged: Option<usize>,
    /// Writes issued after it (or at all, when none was acknowledged) that were not
    /// acknowledged, by sequence number.
    pub unacknowledged_after: Vec<u64>,
}

impl Expectation {
    fn allows(&self, found: Found, ledger: &Ledger) -> bool {
        match found {
            Found::Zeros => self.acknowledged.is_none(),
            Found::Stamp(sequence) => {
                self.acknowledged.map(|index| ledger.writes[index].sequence) == Some(sequence)
                    || self.unacknowledged_after.contains(&sequence)
            }
            Found::Misplaced { .. } | Found::Torn { .. } | Found::Foreign => false,
        }
    }
}

/// Every stamped write of a trial in sequence order, and per block what it may hold.
#[derive(Debug, Default)]
pub struct Ledger {
    pub writes: Vec<Issued>,
    expectations: BTreeMap<u64, Expectation>,
}

/// A block of one replica that breaks the invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub offset: u64,
    pub found: Found,
    /// The acknowledged write it lacks, if any (then this is a lost write).
    pub lost: Option<Issued>,
    /// What else it could have held.
    pub unacknowledged_after: Vec<u64>,
}

impl Ledger {
    /// A ledger of `writes` (every writer's, any order).
    pub fn new(mut writes: Vec<Issued>) -> Ledger {
        writes.sort_by_key(|write| write.sequence);
        assert!(
            writes
                .windows(2)
                .all(|pair| pair[0].sequence < pair[1].sequence),
            "sequence numbers are unique"
        );
        let mut expectations: BTreeMap<u64, Expectation> = BTreeMap::new();
        for (index, write) in writes.iter().enumerate() {
            let expectation = expectations.entry(write.offset).or_default();
            if write.outcome == Outcome::Acknowledged {
                *expectation = Expectation {
                    acknowledged: Some(index),
                    unacknowledged_after: Vec::new(),
                };
            } else {
                expectation.unacknowledged_after.push(write.sequence);
            }
        }
        Ledger {
            writes,
            expectations,
        }
    }

    /// Acknowledged writes, and how many of them had FUA.
    pub fn acknowledged_counts(&self) -> (usize, usize) {
        let acknowledged = self
            .writes
            .iter()
            .filter(|write| write.outcome == Outcome::Acknowledged);
        let fua = acknowledged.clone().filter(|write| write.fua).count();
        (acknowledged.count(), fua)
    }

    /// Write `sequence` in words: where it went, how, and what became of it.
    pub fn describe(&self, sequence: u64) -> String {
        let Ok(index) = self
            .writes
            .binary_search_by_key(&sequence, |write| write.sequence)
        else {
            return format!("write #{sequence} (not in the ledger)");
        };
        let write = &self.writes[index];
        let phase = match write.phase {
            Phase::BeforeFault => "through alice before the fault",
            Phase::AfterFailover => "through the new Primary",
        };
        let fua = if write.fua { ", FUA" } else { "" };
        let outcome = match &write.outcome {
            Outcome::Acknowledged => "acknowledged".to_string(),
            Outcome::Failed(errno) => format!("failed with errno {errno}"),
            Outcome::Unanswered(_) => "never answered".to_string(),
        };
        format!("write #{sequence} ({phase}{fua}, {outcome})")
    }

    /// Every block of a replica's stamped region (`region`, from offset 0) that breaks the
    /// invariant of the module documentation.
    pub fn check(&self, region: &[u8], trial_seed: u64) -> Vec<Mismatch> {
        assert_eq!(
            u64::try_from(region.len()).expect("small"),
            REGION_BYTES,
            "the whole stamped region"
        );
        let untouched = Expectation::default();
        let mut mismatches = Vec::new();
        for (index, bytes) in region.chunks(4096).enumerate() {
            let offset = u64::try_from(index).expect("small") * BLOCK_BYTES;
            let found = decode(bytes, trial_seed, offset);
            let expectation = self.expectations.get(&offset).unwrap_or(&untouched);
            if !expectation.allows(found, self) {
                mismatches.push(Mismatch {
                    offset,
                    found,
                    lost: expectation
                        .acknowledged
                        .map(|index| self.writes[index].clone()),
                    unacknowledged_after: expectation.unacknowledged_after.clone(),
                });
            }
        }
        mismatches
    }
}

/// Writes to block 0 as (sequence, acknowledged), what the block holds, whether allowed.
#[cfg(test)]
type Case = (&'static [(u64, bool)], Found, bool);

/// The rules of the module documentation, one case per line: (writes to block 0 as
/// (sequence, acknowledged), what the block holds, whether that is allowed).
#[test]
fn a_block_must_hold_its_last_acknowledged_write_or_a_later_unacknowledged_one() {
    const SEED: u64 = 7;
    let cases: &[Case] = &[
        (&[], Found::Zeros, true),
        (&[], Found::Stamp(1), false),
        (&[(1, true)], Found::Stamp(1), true),
        (&[(1, true)], Found::Zeros, false),
        (&[(1, true), (2, true)], Found::Stamp(1), false),
        (&[(1, true), (2, false)], Found::Stamp(1), true),
        (&[(1, true), (2, false)], Found::Stamp(2), true),
        (&[(1, false), (2, true)], Found::Stamp(1), false),
        (&[(1, false)], Found::Zeros, true),
        (&[(1, false)], Found::Stamp(1), true),
        (&[(1, true)], Found::Torn { sequence: 1 }, false),
        (&[(1, true)], Found::Foreign, false),
    ];
    for (writes, found, allowed) in cases {
        let issued = writes
            .iter()
            .map(|(sequence, acknowledged)| Issued {
                sequence: *sequence,
                offset: 0,
                fua: false,
                phase: Phase::BeforeFault,
                outcome: if *acknowledged {
                    Outcome::Acknowledged
                } else {
                    Outcome::Unanswered("killed".into())
                },
            })
            .collect();
        let ledger = Ledger::new(issued);
        let mut region = vec![0u8; usize::try_from(REGION_BYTES).expect("small")];
        match found {
            Found::Stamp(sequence) => region[..4096].copy_from_slice(&block(SEED, *sequence, 0)),
            Found::Torn { sequence } => {
                region[..4096].copy_from_slice(&block(SEED, *sequence, 0));
                region[4000] ^= 1;
            }
            Found::Foreign => region[..4096].fill(0xa5),
            Found::Zeros | Found::Misplaced { .. } => {}
        }
        let mismatches = ledger.check(&region, SEED);
        assert_eq!(
            mismatches.is_empty(),
            *allowed,
            "writes {writes:?}, block holds {found}: {mismatches:?}"
        );
        if !allowed {
            assert_eq!(mismatches[0].found, *found, "decoded as written");
        }
    }
}

#[test]
fn a_stamp_decodes_to_itself_and_nothing_else() {
    let stamped = block(11, 42, 8192);
    assert_eq!(decode(&stamped, 11, 8192), Found::Stamp(42));
    assert_eq!(
        decode(&stamped, 11, 4096),
        Found::Misplaced {
            sequence: 42,
            offset: 8192
        }
    );
    assert_eq!(
        decode(&stamped, 12, 8192),
        Found::Foreign,
        "another trial's stamp"
    );
    let mut torn = stamped.clone();
    torn[2048..].fill(0);
    assert_eq!(decode(&torn, 11, 8192), Found::Torn { sequence: 42 });
    assert_eq!(decode(&[0; 4096], 11, 8192), Found::Zeros);
}
