//! The checkers: pure functions over the recorded history and disk images, so each can be fed
//! a deliberately broken history in tests.
//!
//! Block content model: a block holds a tag, `write id << 24 | block number` ([`tag`]), or 0
//! (never written). Write ids grow in submission order across the whole cluster, and writes
//! overlapping each other are applied in submission order, so "this block holds write w or a
//! later one" is `write_of(block) >= w`.

use std::collections::BTreeSet;
use std::fmt;

/// Bits of a tag that hold the block number.
const TAG_BLOCK_BITS: u32 = 24;

/// The tag of block `block` written by write `write`.
pub fn tag(write: u64, block: u64) -> u64 {
    write << TAG_BLOCK_BITS | (block & ((1 << TAG_BLOCK_BITS) - 1))
}

/// The write a tag came from (0: never written).
pub fn write_of(tag: u64) -> u64 {
    tag >> TAG_BLOCK_BITS
}

/// A checker's finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which checker.
    pub checker: &'static str,
    /// What it found.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.checker, self.detail)
    }
}

fn violation(checker: &'static str, detail: String) -> Violation {
    Violation { checker, detail }
}

/// One client write as the simulator recorded it.
#[derive(Debug, Clone, Default)]
pub struct WriteRecord {
    /// Cluster-wide id (submission order, from 1).
    pub id: u64,
    /// The Primary it was submitted to.
    pub node: u8,
    /// First block.
    pub first: u64,
    /// Blocks.
    pub count: u64,
    /// Submitted with FUA.
    pub fua: bool,
    /// Step at which it was acknowledged OK to the client.
    pub acked: Option<u64>,
    /// Peers whose write acknowledgement (protocol C) reached the Primary.
    pub acked_by: BTreeSet<u8>,
    /// Discarded by an administrator (split-brain resolution, forced promotion) or left
    /// behind by a failover to a node that never confirmed it: required nowhere.
    pub excused: bool,
    /// Nodes that may have lost it: it was not yet durable when they lost power (or they
    /// took a resync from such a node). Not required there.
    pub lost_on: BTreeSet<u8>,
}

/// Under any protocol: a write acknowledged to the client is on the Primary's disk.
pub fn check_acked_on_primary(disk: &[u64], write: &WriteRecord) -> Result<(), Violation> {
    for block in write.first..write.first + write.count {
        let found = usize::try_from(block).ok().and_then(|i| disk.get(i)).copied().unwrap_or(0);
        if found != tag(write.id, block) {
            let detail = format!("write {} acknowledged but block {block} of node {} holds write {}", write.id, write.node, write_of(found));
            return Err(violation("acked-on-primary", detail));
        }
    }
    Ok(())
}

/// At a promotion of `node` with UpToDate data: every write acknowledged to the client that
/// `node` confirmed writing (or that `node` itself served as Primary), not excused, is on its
/// disk (or overwritten by a later write).
pub fn check_promotion(disk: &[u64], node: u8, writes: &[WriteRecord]) -> Result<(), Violation> {
    check_holds(disk, node, writes, |w| w.node == node || w.acked_by.contains(&node))
}

/// Quorum mode with protocol C, at a promotion of `node` with UpToDate data (and at the end):
/// every write acknowledged to the client, not excused, is on its disk (or overwritten by a
/// later write) unless `node` lost power before it was durable. A Primary acknowledges a
/// write only once every connected peer wrote it and only while it reaches a majority, and a
/// node is promoted only with a majority: the two majorities share a node, so the write must
/// have reached the promoted node (or made it non-UpToDate), whichever node confirmed it.
pub fn check_promotion_strict(disk: &[u64], node: u8, writes: &[WriteRecord]) -> Result<(), Violation> {
    check_holds(disk, node, writes, |_| true)
}

/// Every acknowledged write that is not excused, not lost on `node`, and `relevant`, is on
/// `disk` (or overwritten by a later write).
fn check_holds(disk: &[u64], node: u8, writes: &[WriteRecord], relevant: impl Fn(&WriteRecord) -> bool) -> Result<(), Violation> {
    let mut required = vec![0u64; disk.len()];
    let is_required = |w: &&WriteRecord| w.acked.is_some() && !w.excused && !w.lost_on.contains(&node) && relevant(w);
    for w in writes.iter().filter(is_required) {
        for block in w.first..w.first + w.count {
            if let Some(slot) = usize::try_from(block).ok().and_then(|i| required.get_mut(i)) {
                *slot = (*slot).max(w.id);
            }
        }
    }
    for (block, (&found, &needed)) in disk.iter().zip(&required).enumerate() {
        if needed != 0 && write_of(found) < needed {
            let detail = format!("node {node} promoted without acknowledged write {needed} at block {block} (holds write {})", write_of(found));
            return Err(violation("acked-write-lost", detail));
        }
    }
    Ok(())
}

/// A replicated write of one connection, as the Primary sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWrite {
    /// Its epoch.
    pub epoch: u64,
    /// Its write id.
    pub id: u64,
    /// First block.
    pub first: u64,
    /// Blocks.
    pub count: u64,
}

/// A peer's disk after its connection ended: the disk it had when the connection started,
/// plus every write of the epochs before some epoch k (in send order), plus any of epoch k's
/// writes (which were concurrent on the Primary, so never overlap), and nothing later.
pub fn check_epoch_prefix(snapshot: &[u64], writes: &[SessionWrite], disk: &[u64]) -> Result<(), Violation> {
    let shows = |w: &SessionWrite| (w.first..w.first + w.count).any(|b| usize::try_from(b).ok().and_then(|i| disk.get(i)) == Some(&tag(w.id, b)));
    let k = writes.iter().filter(|w| shows(w)).map(|w| w.epoch).max().unwrap_or(0);
    let mut expected = snapshot.to_vec();
    let mut alternative: Vec<Option<u64>> = vec![None; disk.len()];
    for w in writes {
        for block in w.first..w.first + w.count {
            let Ok(i) = usize::try_from(block) else { continue };
            if w.epoch < k {
                if let Some(slot) = expected.get_mut(i) {
                    *slot = tag(w.id, block);
                }
            } else if w.epoch == k {
                if let Some(slot) = alternative.get_mut(i) {
                    *slot = Some(tag(w.id, block));
                }
            }
        }
    }
    for (i, &found) in disk.iter().enumerate() {
        let want = expected.get(i).copied().unwrap_or(0);
        if found != want && alternative.get(i).copied().flatten() != Some(found) {
            let detail = format!("block {i} holds write {} but an epoch-{k} prefix has write {}", write_of(found), write_of(want));
            return Err(violation("epoch-prefix", detail));
        }
    }
    Ok(())
}

/// Connected UpToDate replicas, quiescent, hold the same data.
pub fn check_identical(a: (u8, &[u64]), b: (u8, &[u64])) -> Result<(), Violation> {
    let Some(block) = a.1.iter().zip(b.1).position(|(x, y)| x != y) else {
        return if a.1.len() == b.1.len() { Ok(()) } else { Err(violation("identical", "disk sizes differ".into())) };
    };
    let (x, y) = (a.1[block], b.1[block]);
    let detail = format!("connected UpToDate nodes {} and {} differ at block {block}: write {} vs write {}", a.0, b.0, write_of(x), write_of(y));
    Err(violation("identical", detail))
}

/// Both nodes of a pair wrote as Primary while apart: data moving between them, or an
/// Established connection, needs a detected split brain.
pub fn check_split_brain(pair: (u8, u8), wrote_apart: (bool, bool), detected: bool, what: &str) -> Result<(), Violation> {
    if wrote_apart.0 && wrote_apart.1 && !detected {
        let detail = format!("nodes {} and {} both wrote while apart, and {what} without a split brain being detected", pair.0, pair.1);
        return Err(violation("split-brain", detail));
    }
    Ok(())
}

/// Limits of the memory checker.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Bytes queued on one channel (wire and backlog).
    pub channel_bytes_max: u64,
    /// Frames queued on one channel.
    pub channel_frames_max: usize,
    /// Client requests in flight on one engine.
    pub upper_pending_max: u64,
    /// Local I/O in flight on one node.
    pub local_pending_max: usize,
}

/// What the memory checker measures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Largest channel, in bytes.
    pub channel_bytes: u64,
    /// Largest channel, in frames.
    pub channel_frames: usize,
    /// Largest `upper_pending`.
    pub upper_pending: u64,
    /// Largest number of local I/Os in flight.
    pub local_pending: usize,
}

/// Every queue is under its bound.
pub fn check_bounds(usage: Usage, bounds: Bounds) -> Result<(), Violation> {
    let over = [
        (usage.channel_bytes > bounds.channel_bytes_max, format!("a channel holds {} bytes (max {})", usage.channel_bytes, bounds.channel_bytes_max)),
        (usage.channel_frames > bounds.channel_frames_max, format!("a channel holds {} frames (max {})", usage.channel_frames, bounds.channel_frames_max)),
        (usage.upper_pending > bounds.upper_pending_max, format!("{} client requests pending (max {})", usage.upper_pending, bounds.upper_pending_max)),
        (usage.local_pending > bounds.local_pending_max, format!("{} local I/Os pending (max {})", usage.local_pending, bounds.local_pending_max)),
    ];
    match over.into_iter().find(|(bad, _)| *bad) {
        Some((_, detail)) => Err(violation("memory", detail)),
        None => Ok(()),
    }
}
