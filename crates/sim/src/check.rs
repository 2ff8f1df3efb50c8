//! The checkers: pure functions over the recorded history and disk images, so each can be fed
//! a deliberately broken history in tests.
//!
//! Block content model: a block holds a tag, `write id << 24 | block number` ([`tag`]), or 0
//! (never written). Write ids grow in submission order across the whole cluster, and writes
//! overlapping each other are applied in submission order, so "this block holds write w or a
//! later one" is `write_of(block) >= w`.
//!
//! Durability, as each node was promised it ([`WriteRecord::durable_on`]): the Primary that
//! served a write holds it durably once it was written with FUA or a client flush submitted
//! after its acknowledgement completed; a peer holds it durably once it confirmed it written
//! with FUA, or its barrier acknowledgement covering the write's epoch reached the Primary
//! (`disk-flushes yes`: a barrier is acknowledged only after a flush, `repl::receiver`).
//! A power loss loses what a node held without that promise. Two outcomes follow from it:
//!
//! - **Lost unflushed with its Primary** ([`WriteRecord::lost_on`]): the Primary that served
//!   a write lost power before the client was told it is durable (no FUA, no completed flush
//!   since). Any disk may lose such a write at a power loss (and DRBD's crashed Primary is
//!   the sync source of its hot extents); it is required neither on that node nor on a node
//!   that later took that node's data by resync, and counted where it is found missing.
//! - **Lost by a double failure** ([`lost_by_double_failure`]): the checked node lacks the
//!   write because it lost power before the write was durable there (or took a resync from
//!   a node that did, [`WriteRecord::power_lost_on`]), and every other node that held the
//!   write is gone too: each confirming peer lost it the same way, is down, or holds no
//!   usable copy (its disk is not UpToDate), and the Primary that served it lost it, is
//!   down, holds no usable copy, or runs cut off from the checked node (a failover away
//!   from it). Protocol C promises that one failed node loses no acknowledged
//!   write; this takes two (a peer's power loss, then the loss of the Primary). The write is
//!   recorded as such ([`WriteRecord::double_failure`]), counted, traced, and required
//!   nowhere from then on. The rule never excuses a write that a running, UpToDate node
//!   that confirmed it still holds (in the checked node's partition, or anywhere for a
//!   confirming peer), nor one the checked node never held or took by resync.
//!
//! Under quorum and protocol C ([`check_promotion_strict`]) nothing else excuses an
//! acknowledged write; without quorum, or under protocols A and B, the administrator's
//! choices excuse more ([`WriteRecord::excused`]).

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
    /// behind by a failover to a node that never confirmed it: required nowhere. Never set
    /// under quorum and protocol C.
    pub excused: bool,
    /// Nodes where it is durable as the protocol promised (see the module documentation).
    pub durable_on: BTreeSet<u8>,
    /// Nodes that may have lost it with the volatile cache of its Primary: the Primary lost
    /// power before the client was told the write is durable, or the node took a resync from
    /// such a node (a resync brings the source's data, losses included). Not required there.
    pub lost_on: BTreeSet<u8>,
    /// Nodes that held it (as a confirming peer) and lost power before it was durable there,
    /// or took a resync from such a node: the first half of a double failure
    /// ([`lost_by_double_failure`]). Not an excuse by itself.
    pub power_lost_on: BTreeSet<u8>,
    /// Found lost by a double failure at a check: required nowhere from then on.
    pub double_failure: bool,
    /// Found missing on a node where it was lost with its Primary's cache (counted once).
    pub lost_unflushed: bool,
}

/// What a check found missing and did not count as a violation, by write id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Losses {
    /// Lost by a double failure ([`lost_by_double_failure`]): the caller records them.
    pub double_failure: Vec<u64>,
    /// Lost with the volatile cache of their Primary ([`WriteRecord::lost_on`]).
    pub unflushed: Vec<u64>,
}

/// The cluster as the double-failure rule sees it at the check of one node.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Nodes that are not running (crashed and not restarted yet).
    pub down: BTreeSet<u8>,
    /// Running nodes outside the checked node's partition.
    pub cut_off: BTreeSet<u8>,
    /// Running nodes whose disk is not UpToDate (a sync target part way, an Outdated node):
    /// they hold no copy the cluster may promote or resync from.
    pub unusable: BTreeSet<u8>,
}

/// Whether `write`, missing on `node`, was lost by a double failure (see the module
/// documentation): `node` lost power before the write was durable there (or took a resync
/// from a node that did), every other confirming peer lost it so too, is down or holds no
/// usable copy (not UpToDate), and the Primary that served it lost it, is down, holds no
/// usable copy, or is cut off from `node`.
pub fn lost_by_double_failure(write: &WriteRecord, node: u8, cluster: &Cluster) -> bool {
    if !write.power_lost_on.contains(&node) {
        return false;
    }
    let lost = |h: &u8| {
        write.lost_on.contains(h)
            || write.power_lost_on.contains(h)
            || cluster.down.contains(h)
            || cluster.unusable.contains(h)
    };
    let primary_gone =
        write.node == node || lost(&write.node) || cluster.cut_off.contains(&write.node);
    primary_gone && write.acked_by.iter().filter(|&&c| c != node).all(lost)
}

/// Under any protocol: a write acknowledged to the client is on the Primary's disk.
pub fn check_acked_on_primary(disk: &[u64], write: &WriteRecord) -> Result<(), Violation> {
    for block in write.first..write.first + write.count {
        let found = usize::try_from(block)
            .ok()
            .and_then(|i| disk.get(i))
            .copied()
            .unwrap_or(0);
        if found != tag(write.id, block) {
            let detail = format!(
                "write {} acknowledged but block {block} of node {} holds write {}",
                write.id,
                write.node,
                write_of(found)
            );
            return Err(violation("acked-on-primary", detail));
        }
    }
    Ok(())
}

/// At a promotion of `node` with UpToDate data: every write acknowledged to the client that
/// `node` confirmed writing (or that `node` itself served as Primary), not excused, is on its
/// disk (or overwritten by a later write), unless it was lost with its Primary's cache or by
/// a double failure. Returns the writes found lost so (the caller records them).
pub fn check_promotion(
    disk: &[u64],
    node: u8,
    writes: &[WriteRecord],
    cluster: &Cluster,
) -> Result<Losses, Violation> {
    check_holds(disk, node, writes, cluster, |w| {
        w.node == node || w.acked_by.contains(&node)
    })
}

/// Quorum mode with protocol C, at a promotion of `node` with UpToDate data (and at the end):
/// every write acknowledged to the client is on its disk (or overwritten by a later write),
/// unless it was lost with its Primary's cache or by a double failure. A Primary acknowledges
/// a write only once every connected peer wrote it and only while it reaches a majority, and
/// a node is promoted only with a majority: the two majorities share a node, so the write
/// must have reached the promoted node (or made it non-UpToDate), whichever node confirmed
/// it. Returns the writes found lost with their Primary's cache or by a double failure.
pub fn check_promotion_strict(
    disk: &[u64],
    node: u8,
    writes: &[WriteRecord],
    cluster: &Cluster,
) -> Result<Losses, Violation> {
    check_holds(disk, node, writes, cluster, |_| true)
}

/// Every acknowledged write that is `relevant`, not excused and not already found lost by a
/// double failure, is on `disk` (or overwritten by a later write), or else was lost on `node`
/// with its Primary's cache, or is lost by a double failure now (both returned).
fn check_holds(
    disk: &[u64],
    node: u8,
    writes: &[WriteRecord],
    cluster: &Cluster,
    relevant: impl Fn(&WriteRecord) -> bool,
) -> Result<Losses, Violation> {
    let required =
        |w: &&WriteRecord| w.acked.is_some() && !w.excused && !w.double_failure && relevant(w);
    let found = |block: u64| {
        usize::try_from(block)
            .ok()
            .and_then(|i| disk.get(i))
            .copied()
            .unwrap_or(0)
    };
    let mut losses = Losses::default();
    for w in writes.iter().filter(required) {
        let Some(block) = (w.first..w.first + w.count).find(|&b| write_of(found(b)) < w.id) else {
            continue;
        };
        if w.lost_on.contains(&node) {
            losses.unflushed.push(w.id);
            continue;
        }
        if lost_by_double_failure(w, node, cluster) {
            losses.double_failure.push(w.id);
            continue;
        }
        let detail = format!(
            "node {node} promoted without acknowledged write {} at block {block} (holds write {}; \
             served by node {}, confirmed by {:?}, lost at a power loss on {:?}, lost with its \
             Primary on {:?})",
            w.id,
            write_of(found(block)),
            w.node,
            w.acked_by,
            w.power_lost_on,
            w.lost_on
        );
        return Err(violation("acked-write-lost", detail));
    }
    Ok(losses)
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
pub fn check_epoch_prefix(
    snapshot: &[u64],
    writes: &[SessionWrite],
    disk: &[u64],
) -> Result<(), Violation> {
    let shows = |w: &SessionWrite| {
        (w.first..w.first + w.count)
            .any(|b| usize::try_from(b).ok().and_then(|i| disk.get(i)) == Some(&tag(w.id, b)))
    };
    let k = writes
        .iter()
        .filter(|w| shows(w))
        .map(|w| w.epoch)
        .max()
        .unwrap_or(0);
    let mut expected = snapshot.to_vec();
    let mut alternative: Vec<Option<u64>> = vec![None; disk.len()];
    for w in writes {
        for block in w.first..w.first + w.count {
            let Ok(i) = usize::try_from(block) else {
                continue;
            };
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
            let detail = format!(
                "block {i} holds write {} but an epoch-{k} prefix has write {}",
                write_of(found),
                write_of(want)
            );
            return Err(violation("epoch-prefix", detail));
        }
    }
    Ok(())
}

/// Connected UpToDate replicas, quiescent, hold the same data.
pub fn check_identical(a: (u8, &[u64]), b: (u8, &[u64])) -> Result<(), Violation> {
    let Some(block) = a.1.iter().zip(b.1).position(|(x, y)| x != y) else {
        return if a.1.len() == b.1.len() {
            Ok(())
        } else {
            Err(violation("identical", "disk sizes differ".into()))
        };
    };
    let (x, y) = (a.1[block], b.1[block]);
    let detail = format!(
        "connected UpToDate nodes {} and {} differ at block {block}: write {} vs write {}",
        a.0,
        b.0,
        write_of(x),
        write_of(y)
    );
    Err(violation("identical", detail))
}

/// Both nodes of a pair wrote as Primary while apart: data moving between them, or an
/// Established connection, needs a detected split brain.
pub fn check_split_brain(
    pair: (u8, u8),
    wrote_apart: (bool, bool),
    detected: bool,
    what: &str,
) -> Result<(), Violation> {
    if wrote_apart.0 && wrote_apart.1 && !detected {
        let detail = format!(
            "nodes {} and {} both wrote while apart, and {what} without a split brain being \
             detected",
            pair.0, pair.1
        );
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
        (
            usage.channel_bytes > bounds.channel_bytes_max,
            format!(
                "a channel holds {} bytes (max {})",
                usage.channel_bytes, bounds.channel_bytes_max
            ),
        ),
        (
            usage.channel_frames > bounds.channel_frames_max,
            format!(
                "a channel holds {} frames (max {})",
                usage.channel_frames, bounds.channel_frames_max
            ),
        ),
        (
            usage.upper_pending > bounds.upper_pending_max,
            format!(
                "{} client requests pending (max {})",
                usage.upper_pending, bounds.upper_pending_max
            ),
        ),
        (
            usage.local_pending > bounds.local_pending_max,
            format!(
                "{} local I/Os pending (max {})",
                usage.local_pending, bounds.local_pending_max
            ),
        ),
    ];
    match over.into_iter().find(|(bad, _)| *bad) {
        Some((_, detail)) => Err(violation("memory", detail)),
        None => Ok(()),
    }
}
