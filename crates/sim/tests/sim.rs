//! The named scenarios, a small random batch, replay determinism, and proof that every
//! checker can fail.

use std::collections::BTreeSet;

use tandem_sim::check::{self, tag, Bounds, SessionWrite, Usage, WriteRecord};
use tandem_sim::faults::FaultMask;
use tandem_sim::{run, Outcome, Scenario, SimConfig};

fn outcome(seed: u64, scenario: Scenario) -> Outcome {
    run(SimConfig::new(seed, scenario))
}

fn assert_passes(outcome: &Outcome) {
    assert!(outcome.failure.is_none(), "seed {} {}: {:?}\n{}", outcome.cfg.seed, outcome.cfg.scenario.name(), outcome.failure, outcome.trace_tail.join("\n"));
    assert!(outcome.stats.writes_acked > 0 && outcome.stats.identical_checks > 0, "the run did some work and compared replicas");
}

#[test]
fn primary_crash_in_the_middle_of_a_resync() {
    let outcome = outcome(1, Scenario::PrimaryCrashMidResync);
    assert_passes(&outcome);
    assert!(outcome.stats.crashes >= 2);
}

#[test]
fn failover_primary_dies_secondary_promoted() {
    for seed in 1..4 {
        let outcome = outcome(seed, Scenario::Failover);
        assert_passes(&outcome);
        assert!(outcome.stats.promotions >= 2, "the Secondary was promoted");
    }
}

/// Known engine issue (see the crate's report): a split-brain resolution resync cut before
/// the target received the source's SyncStart identifiers leaves the two nodes "unrelated
/// data" for ever (the source rotated its bitmap identifier; the target's current never
/// appears in the source's history), so they never reconnect, even with discard-my-data.
#[test]
#[ignore = "engine bug: a partition during split-brain resolution makes the peers unrelated (seed 1)"]
fn partition_during_split_brain_resolution() {
    assert_passes(&outcome(1, Scenario::PartitionDuringSplitBrain));
}

/// Known engine issue: a Secondary that loses power loses writes it acknowledged (protocol
/// C write ack, not yet flushed); the Primary dropped them from its transfer log at the write
/// ack, so they are never marked out of sync and the replicas stay different.
#[test]
#[ignore = "engine bug: a Secondary's power loss loses acknowledged writes silently (seed 1)"]
fn secondary_crash_in_the_middle_of_a_write_burst() {
    assert_passes(&outcome(1, Scenario::SecondaryCrashMidBurst));
}

#[test]
fn secondary_crash_scenario_reaches_its_crash_and_reports_the_divergence() {
    let outcome = outcome(1, Scenario::SecondaryCrashMidBurst);
    assert!(outcome.stats.crashes >= 1);
    assert!(outcome.failure.is_some_and(|f| f.checker == "identical"), "the checker sees the lost writes");
}

fn small_random(seed: u64) -> SimConfig {
    let faults = FaultMask::parse("partition,stop-reading").unwrap_or(FaultMask::ALL);
    SimConfig { workload_ns: 8_000_000_000, faults, ..SimConfig::new(seed, Scenario::Random) }
}

#[test]
fn a_small_random_batch_passes() {
    for seed in 0..6 {
        let outcome = run(small_random(seed));
        assert!(outcome.failure.is_none(), "seed {seed}: {:?}\n{}", outcome.failure, outcome.trace_tail.join("\n"));
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in [3, 11] {
        let config = SimConfig { workload_ns: 5_000_000_000, ..SimConfig::new(seed, Scenario::Random) };
        let (a, b) = (run(config.clone()), run(config));
        assert_eq!((a.trace_hash, a.trace_lines, a.stats.steps), (b.trace_hash, b.trace_lines, b.stats.steps));
        assert_eq!(a.trace_tail, b.trace_tail);
        assert!(a.trace_lines > 100);
    }
    let (a, b) = (run(small_random(1)), run(small_random(2)));
    assert_ne!(a.trace_hash, b.trace_hash, "different seeds differ");
}

fn acked(id: u64, node: u8, first: u64, count: u64, acked_by: &[u8]) -> WriteRecord {
    WriteRecord { id, node, first, count, acked: Some(id), acked_by: acked_by.iter().copied().collect::<BTreeSet<u8>>(), ..WriteRecord::default() }
}

#[test]
fn acked_on_primary_checker_fails_on_a_missing_block() {
    let w = acked(5, 0, 2, 2, &[]);
    let mut disk = vec![0; 8];
    disk[2] = tag(5, 2);
    assert!(check::check_acked_on_primary(&disk, &w).is_err());
    disk[3] = tag(5, 3);
    assert!(check::check_acked_on_primary(&disk, &w).is_ok());
}

#[test]
fn promotion_checker_fails_on_a_lost_acknowledged_write() {
    let writes = vec![acked(1, 0, 0, 2, &[1]), acked(2, 0, 4, 1, &[])];
    let mut disk = vec![0; 8];
    assert!(check::check_promotion(&disk, 1, &writes).is_err(), "write 1 was confirmed by node 1");
    disk[0] = tag(1, 0);
    disk[1] = tag(3, 1);
    assert!(check::check_promotion(&disk, 1, &writes).is_ok(), "write 2 was never confirmed by node 1; a later write may cover");
    let mut excused = writes.clone();
    excused[0].excused = true;
    assert!(check::check_promotion(&[0; 8], 1, &excused).is_ok());
}

#[test]
fn epoch_prefix_checker_fails_on_a_hole() {
    let writes = [
        SessionWrite { epoch: 1, id: 1, first: 0, count: 1 },
        SessionWrite { epoch: 2, id: 2, first: 1, count: 1 },
        SessionWrite { epoch: 2, id: 3, first: 2, count: 1 },
    ];
    let snapshot = vec![0; 4];
    let good = vec![tag(1, 0), 0, tag(3, 2), 0];
    assert!(check::check_epoch_prefix(&snapshot, &writes, &good).is_ok(), "epoch 1 whole, part of epoch 2");
    let hole = vec![0, tag(2, 1), 0, 0];
    assert!(check::check_epoch_prefix(&snapshot, &writes, &hole).is_err(), "epoch 2 applied without epoch 1");
    let stray = vec![tag(1, 0), 0, 0, 9 << 24];
    assert!(check::check_epoch_prefix(&snapshot, &writes, &stray).is_err(), "a block nobody sent changed");
}

#[test]
fn identical_checker_fails_on_a_difference() {
    assert!(check::check_identical((0, &[1, 2]), (1, &[1, 2])).is_ok());
    assert!(check::check_identical((0, &[1, 2]), (1, &[1, 3])).is_err());
}

#[test]
fn split_brain_checker_fails_on_a_silent_merge() {
    assert!(check::check_split_brain((0, 1), (true, true), false, "x").is_err());
    assert!(check::check_split_brain((0, 1), (true, true), true, "x").is_ok());
    assert!(check::check_split_brain((0, 1), (true, false), false, "x").is_ok());
}

#[test]
fn memory_checker_fails_over_a_bound() {
    let bounds = Bounds { channel_bytes_max: 10, channel_frames_max: 2, upper_pending_max: 1, local_pending_max: 1 };
    assert!(check::check_bounds(Usage::default(), bounds).is_ok());
    for usage in [
        Usage { channel_bytes: 11, ..Usage::default() },
        Usage { channel_frames: 3, ..Usage::default() },
        Usage { upper_pending: 2, ..Usage::default() },
        Usage { local_pending: 2, ..Usage::default() },
    ] {
        assert!(check::check_bounds(usage, bounds).is_err(), "{usage:?}");
    }
}

/// Known engine issue: with three nodes, two Secondaries that received different parts of
/// the Primary's stream (one connection cut by a partition) stay connected UpToDate with
/// different data: nothing reconciles Secondaries with each other (DRBD 9 resyncs them).
#[test]
#[ignore = "engine gap: no reconciliation between Secondaries with three nodes (seed 29)"]
fn three_nodes_secondaries_converge_after_a_partition() {
    let faults = FaultMask::parse("partition,stop-reading").unwrap_or(FaultMask::ALL);
    let outcome = run(SimConfig { faults, ..SimConfig::new(29, Scenario::Random) });
    assert_passes(&outcome);
}
