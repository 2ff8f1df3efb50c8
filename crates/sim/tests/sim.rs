//! The named scenarios, a small random batch, replay determinism, proof that every checker
//! can fail, and one ignored reproducer per engine issue the simulator found (exact seed and
//! switches; run them with `cargo test -p tandem-sim -- --ignored`).

use std::collections::BTreeSet;

use tandem_sim::check::{self, tag, Bounds, Cluster, SessionWrite, Usage, WriteRecord};
use tandem_sim::faults::FaultMask;
use tandem_sim::{run, Outcome, Scenario, SimConfig};

/// The faithful model (what CI runs): every cache volatile, no administrator's way around
/// an engine gap. (Until issue 24 it set replicated writes durable on the Secondary and, in
/// quorum mode with three nodes, a full resync after every failover.)
fn clean(seed: u64, scenario: Scenario) -> SimConfig {
    SimConfig::new(seed, scenario)
}

/// A random run drawing from the fault classes of the time before issue 24 added full disks
/// and whole-cluster power losses (which change every run that draws them): the regression
/// tests below replay the runs their seeds were found in, as far as the simulator's other
/// changes let them.
fn found(seed: u64) -> SimConfig {
    let faults =
        FaultMask::parse("drop,partition,stop-reading,crash,disk-errors").unwrap_or(FaultMask::ALL);
    SimConfig {
        faults,
        ..SimConfig::new(seed, Scenario::Random)
    }
}

fn assert_passes(outcome: &Outcome) {
    assert!(
        outcome.failure.is_none(),
        "seed {} {}: {:?}\n{}",
        outcome.cfg.seed,
        outcome.cfg.scenario.name(),
        outcome.failure,
        outcome.trace_tail.join("\n")
    );
    assert!(
        outcome.stats.writes_acked > 0 && outcome.stats.identical_checks > 0,
        "the run did some work and compared replicas"
    );
}

#[test]
fn primary_crash_in_the_middle_of_a_resync() {
    for seed in 0..3 {
        let outcome = run(clean(seed, Scenario::PrimaryCrashMidResync));
        assert_passes(&outcome);
        assert!(outcome.stats.crashes >= 2);
    }
}

#[test]
fn secondary_crash_in_the_middle_of_a_write_burst() {
    for seed in 0..3 {
        let outcome = run(clean(seed, Scenario::SecondaryCrashMidBurst));
        assert_passes(&outcome);
        assert!(outcome.stats.crashes >= 1);
    }
}

#[test]
fn failover_primary_dies_secondary_promoted() {
    for seed in 1..4 {
        let outcome = run(SimConfig::new(seed, Scenario::Failover));
        assert_passes(&outcome);
        assert!(outcome.stats.promotions >= 2, "the Secondary was promoted");
    }
}

/// (Since barrier acks wait for the Secondary's flush, the cut here lands during the
/// resolution's resync too; fixed with the lost-SyncStart rule, see below.)
#[test]
fn partition_during_split_brain_resolution_when_the_cut_misses_the_sync_start() {
    let outcome = run(clean(1, Scenario::PartitionDuringSplitBrain));
    assert_passes(&outcome);
    assert!(
        outcome.stats.split_brains >= 1,
        "the split brain was detected"
    );
}

#[test]
fn split_brain_of_two_primaries_is_detected_when_the_handshake_comes_first() {
    let outcome = run(SimConfig {
        durable_peer_writes: true,
        internal_metadata: true,
        ..SimConfig::new(1, Scenario::SplitBrainTwoPrimaries)
    });
    assert_passes(&outcome);
    assert!(outcome.stats.split_brains >= 1);
}

/// Two nodes, every fault class.
#[test]
fn a_small_random_batch_passes() {
    for seed in 0..6 {
        let config = SimConfig {
            workload_ns: 8_000_000_000,
            nodes: 2,
            ..clean(seed, Scenario::Random)
        };
        let outcome = run(config);
        assert!(
            outcome.failure.is_none(),
            "seed {seed}: {:?}\n{}",
            outcome.failure,
            outcome.trace_tail.join("\n")
        );
    }
}

/// Two nodes: a data disk that fills up (writes fail with `IoError::NoSpace` until space is
/// freed) and the whole cluster losing power at once (every volatile cache lost, every node
/// booting again) are drawn from the seed; seeds 40, 59 and 75 draw a whole-cluster power
/// loss in eight seconds, seed 75 a full disk too (which seeds do moves with the engine's
/// timing: 20, 32 and 36 until session 17, 40, 59 and 235 until session 19).
#[test]
fn full_disks_and_whole_cluster_power_losses_pass() {
    let (mut full_disks, mut outages) = (0, 0);
    for seed in [40, 59, 75] {
        let outcome = run(SimConfig {
            workload_ns: 8_000_000_000,
            nodes: 2,
            ..clean(seed, Scenario::Random)
        });
        assert_passes(&outcome);
        full_disks += outcome.stats.disks_full;
        outages += outcome.stats.cluster_power_losses;
    }
    assert!(full_disks > 0, "a full disk drawn");
    assert!(outages >= 3, "a whole-cluster power loss drawn in each");
}

/// Three nodes without quorum, failing over (random runs failed over with two nodes only
/// until issue 24): after the loss of a Primary the Secondaries may hold different parts of
/// its last writes (seed 4 here: connected UpToDate nodes 1 and 2 differed), until the
/// survivors of a lost Primary resynced its unsettled writes (`repl`, issue 24).
#[test]
fn a_small_three_node_random_batch_passes() {
    for seed in 0..6 {
        let config = SimConfig {
            workload_ns: 8_000_000_000,
            nodes: 3,
            ..clean(seed, Scenario::Random)
        };
        let outcome = run(config);
        assert!(
            outcome.failure.is_none(),
            "seed {seed}: {:?}\n{}",
            outcome.failure,
            outcome.trace_tail.join("\n")
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in [3, 11] {
        let config = SimConfig {
            workload_ns: 5_000_000_000,
            ..SimConfig::new(seed, Scenario::Random)
        };
        let (a, b) = (run(config.clone()), run(config));
        assert_eq!(
            (a.trace_hash, a.trace_lines, a.stats.steps),
            (b.trace_hash, b.trace_lines, b.stats.steps)
        );
        assert_eq!(a.trace_tail, b.trace_tail);
        assert_eq!(a.failure, b.failure);
        assert!(a.trace_lines > 100);
    }
    let short = |seed| {
        run(SimConfig {
            workload_ns: 2_000_000_000,
            ..SimConfig::new(seed, Scenario::Random)
        })
    };
    assert_ne!(
        short(1).trace_hash,
        short(2).trace_hash,
        "different seeds differ"
    );
}

/// A Secondary's power loss, then the loss of the Primary: the faithful model's double
/// failure (found as random seed 50 before issue 24: node 1 confirmed write 474 under
/// protocol C and was cut off before the barrier covering it was acknowledged; the client's
/// flush completed on node 0 alone, so the write was durable there only; node 1 lost power,
/// booted still cut off, node 0 crashed, and node 1 was promoted without it). Protocol C
/// promises that one failed node loses no acknowledged write; this takes two, so the
/// checker counts such writes as lost by a double failure (check.rs) instead of failing the
/// run. Scripted (`Scenario::DoubleFailure`) so that engine changes do not move it away;
/// external metadata, whose syncs do not flush the data disk, and a power loss keeps each
/// unflushed block with even odds, so some seeds lose nothing.
#[test]
fn a_secondary_power_loss_then_the_primary_crash_is_a_double_failure() {
    let mut lost = 0;
    for seed in 0..4 {
        let outcome = run(SimConfig {
            internal_metadata: false,
            ..clean(seed, Scenario::DoubleFailure)
        });
        assert_passes(&outcome);
        assert!(
            outcome.stats.crashes >= 2 && outcome.stats.split_brains >= 1,
            "two failures, then node 0 returned diverged"
        );
        lost += outcome.stats.writes_lost_by_double_failure;
    }
    assert!(
        lost >= 1,
        "a write node 1 confirmed and lost with its power"
    );
}

/// Random runs fail over with three nodes too (behind the seed's draw), not only with two.
#[test]
fn random_runs_fail_over_with_two_and_three_nodes() {
    let configs: Vec<SimConfig> = (0..100)
        .map(|seed| SimConfig::new(seed, Scenario::Random))
        .collect();
    for nodes in [2, 3] {
        assert!(
            configs.iter().any(|c| c.nodes == nodes && c.failover),
            "{nodes} nodes"
        );
        assert!(
            configs.iter().any(|c| c.nodes == nodes && !c.failover),
            "{nodes} nodes"
        );
    }
}

// ----- reproducers of engine issues (ignored until fixed) ------------------------------------

/// A Secondary that loses power loses replicated writes it acknowledged but had not flushed;
/// the Primary used to drop them from its transfer log at the write ack, so they were never
/// marked out of sync (found: block 1598, write 188). Fixed: barrier acks wait for the
/// Secondary's group flush and the transfer log keeps every write until then.
#[test]
fn secondary_power_loss_keeps_replicas_identical() {
    assert_passes(&run(SimConfig::new(1, Scenario::SecondaryCrashMidBurst)));
}

/// The source of the resync that resolves a split brain persists a fresh sync identifier
/// (old bitmap identifier into the history) before sending SyncStart; a cut before the
/// victim receives it leaves the victim's diverged current known to nobody: "unrelated
/// data" on every later connect, which discard-my-data cannot resolve.
#[test]
// Fixed: one side's bitmap identifier found as the other's newest history entry counts as
// bitmap-both (uuid.rs), so the cut resolution is a split brain again, not unrelated data.
fn partition_during_split_brain_resolution_converges() {
    assert_passes(&run(clean(0, Scenario::PartitionDuringSplitBrain)));
}

/// Two Primaries reconnecting: the connect-time State (control socket) may arrive before the
/// identifiers (data socket). It used to drop both sides with "both nodes are Primary"
/// (ProtocolError) before comparing them, so the split brain was never reported; the
/// handshake now judges two Primaries (fixed, kept as a regression test).
#[test]
fn split_brain_of_two_primaries_is_always_detected() {
    let outcome = run(clean(1, Scenario::SplitBrainTwoPrimaries));
    assert_passes(&outcome);
}

/// External metadata: an activity-log extent is evicted while the Primary's own completed
/// writes in it are still only in its volatile cache; a power loss loses them locally, the
/// peer has them, and recovery does not mark the (cold) extent: replicas differ. Fixed: the
/// driver makes the data disk durable before every metadata write (data before metadata).
#[test]
fn external_metadata_crash_keeps_replicas_identical() {
    let faults = FaultMask::parse("crash").unwrap_or(FaultMask::ALL);
    let config = SimConfig {
        faults,
        nodes: 2,
        durable_peer_writes: true,
        internal_metadata: false,
        ..SimConfig::new(15, Scenario::Random)
    };
    assert_passes(&run(config));
}

/// (Fixed by announcing disk-state changes at the next tick; kept as a regression test.)
/// The connect-time State of a sync target (Inconsistent, control socket) arrives after its
/// ResyncDone (data socket): the source then shows the peer Inconsistent for ever.
#[test]
fn peer_state_after_a_resync_is_up_to_date() {
    let config = SimConfig {
        nodes: 2,
        durable_peer_writes: true,
        internal_metadata: true,
        ..found(513)
    };
    assert_passes(&run(config));
}

/// Three nodes: a Secondary does not adopt the Primary's new generation, so two Secondaries
/// that reconnect run a (full) resync between themselves while the Primary replicates to
/// both; older resync data from the other Secondary overwrites a newer replicated write
/// (found: node 1 block 536 loses write 2456 to node 2's resync reply for blocks 512+32).
/// Fixed (engine/rotate.rs): Secondaries follow the Primary's new generations, and a resync
/// between two Secondaries waits while a Primary feeds either of them.
#[test]
fn three_nodes_keep_replicas_identical() {
    let faults = FaultMask::parse("drop").unwrap_or(FaultMask::ALL);
    let config = SimConfig {
        faults,
        nodes: 3,
        ..SimConfig::new(7, Scenario::Random)
    };
    assert_passes(&run(config));
}

/// Three nodes, the faithful model: a Secondary that receives a resync from one peer while
/// another is away changed those blocks without marking them for the absent one, so a later
/// bitmap resync with it missed them (found: nodes 0 and 2 differ at block 5638). Fixed: a
/// resync write, like a replicated one, is marked for the peers not connected.
#[test]
fn three_nodes_resync_writes_are_marked_for_absent_peers() {
    assert_passes(&run(found(453)));
}

// ----- quorum mode ---------------------------------------------------------------------------

fn quorum(seed: u64, nodes: u8) -> SimConfig {
    SimConfig {
        nodes,
        ..found(seed)
    }
    .with_quorum()
}

#[test]
fn quorum_mode_with_two_nodes_passes() {
    for seed in 0..6 {
        let outcome = run(SimConfig {
            workload_ns: 8_000_000_000,
            nodes: 2,
            ..SimConfig::new(seed, Scenario::Random)
        }
        .with_quorum());
        assert!(
            outcome.failure.is_none(),
            "seed {seed}: {:?}\n{}",
            outcome.failure,
            outcome.trace_tail.join("\n")
        );
    }
}

/// Three nodes: the Primary is cut off in a minority, a Secondary with quorum is promoted
/// while it still runs, its writes are held, and when the two meet its forced demotion fails
/// every one of them (none acknowledged); every acknowledged write survives. Three seeds
/// (each run's path moves when the engine's timing does; seed 28 was one until session 14,
/// seeds 5, 6 and 28 until promotions confirmed their peers in session 15, seeds 2, 7 and 35
/// until issue 24's engine and simulator changes, 1, 73 and 74 until the reconciliation kept
/// waiting Secondaries connected, 36, 69 and 79 until session 17's Secondary activity log,
/// 15, 17 and 21 until session 19 persisted the followed Primary).
#[test]
fn quorum_failover_away_from_a_live_primary_fails_its_held_writes() {
    let (mut failovers, mut failed) = (0, 0);
    for seed in [35, 38, 45] {
        let outcome = run(quorum(seed, 3));
        assert_passes(&outcome);
        failovers += outcome.stats.failovers_from_live_primary;
        failed += outcome.stats.writes_failed;
    }
    assert!(failovers >= 1, "a failover away from a running Primary");
    assert!(failed >= 1, "the old Primary's held writes failed");
}

/// Two nodes, quorum: the Secondary departs gracefully now and then (`down`), outdating
/// itself first, and the lone Primary goes on writing with quorum (last man standing);
/// every acknowledged write survives and the replicas converge when it rejoins.
#[test]
fn quorum_lone_primary_writes_after_graceful_departures() {
    let (mut departures, mut last_man) = (0, 0);
    for seed in 0..32 {
        let outcome = run(SimConfig {
            workload_ns: 8_000_000_000,
            nodes: 2,
            ..SimConfig::new(seed, Scenario::Random)
        }
        .with_quorum());
        assert!(
            outcome.failure.is_none(),
            "seed {seed}: {:?}\n{}",
            outcome.failure,
            outcome.trace_tail.join("\n")
        );
        departures += outcome.stats.departures;
        last_man += outcome.stats.writes_by_last_man;
    }
    assert!(departures > 0, "no graceful departure drawn");
    assert!(last_man > 0, "no write acknowledged by a lone Primary");
}

#[test]
fn quorum_mode_replays_exactly() {
    let config = SimConfig {
        workload_ns: 5_000_000_000,
        ..quorum(25, 3)
    };
    let (a, b) = (run(config.clone()), run(config));
    assert_eq!(
        (a.trace_hash, a.trace_lines, a.stats.steps),
        (b.trace_hash, b.trace_lines, b.stats.steps)
    );
}

/// Three nodes, quorum: the crashed Primary (node 0) returns while the new Primary (node 1)
/// is resyncing node 2; node 1 crashes, node 0 (which lacks node 1's writes) becomes the sync
/// source of the Inconsistent node 2 and is promoted with it, without writes node 1
/// acknowledged (found: seed 289, write 353 at block 0; also seed 444). The sync target of a
/// newer generation accepted a full resync from an older one ("unrelated data" with an
/// Inconsistent side). Fixed: a sync target records its source's ancestor generations in its
/// history, so the older node is seen as behind and the resync is refused; kept as a
/// regression test.
#[test]
fn quorum_old_primary_does_not_resync_a_newer_target() {
    assert_passes(&run(quorum(289, 3)));
    assert_passes(&run(quorum(444, 3)));
}

/// Three nodes, quorum: the Primary loses one Secondary (it stopped reading) and goes on
/// with the other in a new generation, then crashes; the Secondary left behind, still
/// connected to the other one, was UpToDate and promoted without the Primary's later writes
/// (found: seed 333, write 515). Fixed: a Secondary that takes its Primary's new generation
/// tells its other Secondaries, and one that reaches no Primary and sees a peer descend
/// from its generation outdates itself (`rotate.rs`, left behind); kept as a regression test.
#[test]
fn quorum_secondary_left_behind_is_outdated_not_promoted() {
    assert_passes(&run(quorum(333, 3)));
}

/// Three nodes, quorum: a Secondary that crashed while a third node was away lost the bits it
/// had marked for it in memory, and later resynced that node from the shortened bitmap; the
/// node was then promoted without an acknowledged write (found: seed 400, write 161). Fixed:
/// the superblock's `in_use` flag, found set at attach, marks every block for each peer whose
/// bitmap was counting; kept as a regression test.
#[test]
fn quorum_secondary_crash_keeps_every_block_for_the_absent_peer() {
    assert_passes(&run(quorum(400, 3)));
}

/// A sync target cut off from its source while Established with a Primary that keeps no bits
/// for it stayed Inconsistent for ever (the resync between Secondaries waits while a Primary
/// is near; found: seed 176 in the faithful model). Fixed: it reconnects to the
/// Primary, whose handshake resyncs it; kept as a regression test.
#[test]
fn a_stranded_sync_target_is_resynced_by_the_primary() {
    assert_passes(&run(found(176)));
}

/// Three nodes, quorum: the same class with nothing to tell the Secondaries apart: the
/// Primary completed writes with one Secondary while the other had stopped reading, lost
/// both before its new generation reached anyone, and crashed; the two Secondaries,
/// connected with equal generations, never learned that one lacked the writes (found: seed
/// 62, write 2110). Fixed: such writes complete only once every Secondary that has them
/// answered the rotation (`RotateSeen`, `repl/src/engine/rotate.rs`), so the holder's
/// generation is the newer one; kept as a regression test.
#[test]
fn quorum_secondaries_learn_what_the_other_lacks() {
    assert_passes(&run(quorum(62, 3)));
}

/// A promotion that raced the connect of the returning old Primary made the new Primary the
/// target of a crashed-primary resync, whose replies overwrote its application writes
/// (found: seed 13, write 78). Fixed: promotion waits for a handshake under way, and a
/// handshake never makes a Primary a sync target (`repl` test
/// `promotion_waits_for_a_handshake_under_way`); kept as a regression test.
#[test]
fn quorum_new_primary_is_never_a_sync_target() {
    assert_passes(&run(quorum(13, 3)));
}

/// Three nodes, quorum: a Secondary's replicated writes fail (disk error, `on-io-error
/// pass_on`, negative acks); the Secondary used to stay UpToDate and be promoted after the
/// Primary crashed, without the acknowledged writes its disk refused (found: seed 118, write
/// 143; then seed 72, write 2178). Fixed as DRBD does it: the failed write makes the disk
/// Inconsistent with the block marked for every peer (and the link is dropped so that the
/// reconnect resyncs it); kept as a regression test.
#[test]
fn quorum_secondary_with_a_failed_write_is_not_promoted() {
    assert_passes(&run(quorum(72, 3)));
}

/// Three nodes, quorum: replicas differed after a split brain that no shared bitmap
/// identifier counted (history-both) was resolved by discard-my-data with a bitmap resync,
/// whose bits did not cover where the two differed (found: seed 15, block 7). Fixed: such a
/// resolution is a full resync; kept as a regression test.
#[test]
fn quorum_a_history_only_split_brain_resolution_copies_everything() {
    assert_passes(&run(quorum(15, 3)));
}

/// Three nodes, quorum: a Secondary that was the sync source of one node became the sync
/// target of a returning crashed Primary meanwhile; the blocks it had already sent changed
/// under its own target, which ended UpToDate with old and new data mixed (found: seed 1885,
/// block 2574; seed 2335). Fixed: a sync target takes part in no other resync, as a target or
/// as a source (`secondary_resync_must_wait`); kept as a regression test.
#[test]
fn quorum_a_sync_source_does_not_become_a_target_meanwhile() {
    assert_passes(&run(quorum(1885, 3)));
    assert_passes(&run(quorum(2335, 3)));
}

/// Three nodes, quorum: a crashed Primary resynced its hot extents to one Secondary and then
/// forgot it had crashed; the other Secondary, which lacked its last acknowledged write (a new
/// Primary's full resync had overwritten it) and held bits of its own, became its source by
/// the node-id tie-break of two sides with bits, while the crashed Primary stayed Established
/// with the first: two UpToDate replicas differed (found: seed 6671, block 14). Fixed: the
/// flag lasts until no peer is owed bits, counts only towards a peer it holds bits for, and
/// yields, as equal generations do, between two Secondaries fed by a Primary (seeds 412 and
/// 699 otherwise); kept as a regression test. The earlier seeds of this class (replicas that
/// differ after failovers, crashes and split-brain resolutions: 265, 71, 125, 15, 269, 778,
/// 1885, 1891, 2335, 4594) pass; none is known to fail, so it has no ignored reproducer now.
/// Seed 4594 showed a gap still open: a Secondary that is no crashed Primary full-synced a
/// node Established with a third Secondary, which kept the old blocks (the target would have
/// to name the Secondaries it is Established with in its handshake).
#[test]
fn quorum_a_crashed_primary_stays_the_source_of_every_peer() {
    assert_passes(&run(quorum(6671, 3)));
    assert_passes(&run(quorum(412, 3)));
    assert_passes(&run(quorum(699, 3)));
}

/// Three nodes, quorum: a Secondary resynced a crashed Primary's hot extents from it while
/// Established with the third node, which shares its generation; the two ended UpToDate and
/// different (found: seed 1891, block 3020; seed 778, block 7). Fixed: the target of a
/// crashed Primary drops its other Secondaries until that resync is over, so its resync
/// writes are marked for them and resynced when they return; kept as a regression test.
#[test]
fn quorum_a_crashed_primarys_hot_extents_reach_every_secondary() {
    assert_passes(&run(quorum(1891, 3)));
    assert_passes(&run(quorum(778, 3)));
}

/// Three nodes, quorum: a node promoted without an acknowledged write (seeds 88, 473 and
/// 1124, fixed; seed 2234, write 1989, analysed, passes since session 14's changes moved its
/// run elsewhere: node 2 was promoted with quorum counting its link to node 1, which was
/// already cut but not yet detected dead; the old Primary, held without quorum, then
/// regained it through node 1 (which never heard of node 2's promotion) and acknowledged its
/// held write, which the split-brain resolution in favour of node 2 discarded. That needs
/// what DRBD has and tandem lacks: a promotion confirmed by the peers it counts, a
/// cluster-wide two-phase state change). Seeds 3427 and 3530 were other mechanisms, fixed
/// (see below); seed 7091 was this one before they moved it: node 1 was promoted counting its
/// link to node 2, which had crashed, and the old Primary regained quorum through node 2,
/// restarted, and acknowledged write 1323. Now seed 16699, write 1726, the same mechanism:
/// node 2 promoted at 17.3 s counting node 0, crashed at 17.16 s and not yet detected; the
/// old Primary 1 regains quorum through node 0, restarted, at 20.1 s. Fixed (session 15): a
/// promotion counts only the peers that answer the ping it sends then (engine unit test
/// `a_promotion_counts_only_the_peers_that_answer_it`); the seeds' runs moved with it, so
/// this is a regression test of the runs, not of the mechanism.
#[test]
fn quorum_three_node_failovers_keep_acknowledged_writes() {
    assert_passes(&run(quorum(16699, 3)));
    assert_passes(&run(quorum(2234, 3)));
    assert_passes(&run(quorum(7091, 3)));
}

/// Three nodes, quorum: no convergence (seed 7036; also 1780 and 6714; seed 5470 until a
/// crashed Primary's flag lasted until every peer was resynced, which moved its run). Node 0, back
/// after crashing as Primary with bits for the new Primary node 1 at equal generations, would be
/// node 1's sync source (crashed-primary rule), which rr-conflict refuses (as DRBD does); the pair
/// once had a split brain, and the simulated administrator answers every later stand-off of
/// such a pair with `--discard-my-data`, which decides split brains only (DRBD's
/// administrator would `invalidate` the returning node). It was a gap of the simulator's
/// administrator: it now reads why the pair stood off (an rr-conflict is resolved by stepping
/// the Primary down, whatever split brain the pair had before), and first follows the
/// Primary of the quorate partition, so a split brain resolved next keeps that Primary's
/// acknowledged writes (seed 1344 otherwise, after promotions confirmed their peers).
#[test]
fn quorum_an_rr_conflict_after_a_split_brain_is_resolved() {
    for seed in [7036, 1780, 6714, 1344] {
        assert_passes(&run(quorum(seed, 3)));
    }
}

/// Three nodes, quorum: a Secondary reconnecting to two Primaries at once accepted the old
/// Primary's handshake before that Primary's `State` arrived, so it did not yet count it as
/// the Primary it follows; the new Primary's `State` came next and the Secondary dropped the
/// old one instead of refusing the new one. The old Primary had already counted it (its
/// `Accepted`), regained quorum and acknowledged held writes, and the new Primary then
/// regained quorum through the same Secondary: both acknowledged writes (found in session
/// 15: seed 15268, write 96; the same kind in seed 5976). Fixed: a Primary's handshake makes
/// it the Primary the Secondary follows (engine unit test
/// `a_primary_known_from_its_handshake_is_followed_before_its_state_arrives`); kept as a
/// regression test.
#[test]
fn quorum_a_secondary_follows_the_primary_whose_handshake_it_accepted() {
    assert_passes(&run(quorum(15268, 3)));
    assert_passes(&run(quorum(5976, 3)));
}

/// Three nodes, quorum: a crashed Primary returns at equal generations with the current
/// Primary, which acknowledged writes since (without starting a new generation: it already
/// held a bitmap identifier for the absent node); the crashed-primary rule makes the
/// returning node the source, rr-conflict refuses it, and the simulated administrator's way
/// out (step the Primary down so the resync runs) overwrites those writes (found in session
/// 15: seed 8840, write 1066, once the administrator resolved every rr-conflict that way).
/// Passes since session 16 (rule 41: the Primary now is the source of a crashed Primary
/// that returns at equal generations; the run has moved since, so it is a regression seed).
#[test]
fn quorum_a_returning_crashed_primary_does_not_overwrite_acknowledged_writes() {
    assert_passes(&run(quorum(8840, 3)));
}

/// Three nodes, quorum: two connected UpToDate nodes differ (found in session 15: seed
/// 17406, protocol C, block 4231). Passes since session 16 (the run has moved since).
#[test]
fn quorum_connected_up_to_date_replicas_are_identical() {
    assert_passes(&run(quorum(17406, 3)));
}

/// Three nodes, quorum, protocols A and B: a crashed Primary that wrote while apart from the
/// node promoted after it returns with a generation that reads as an ancestor of the new
/// Primary's, and is resynced from it without a split brain being reported (found in
/// session 15: seeds 1141 and 13838, after promotions confirmed their peers). Passes since
/// session 16 (the run has moved since, so it is a regression seed).
#[test]
fn quorum_a_returning_primary_that_wrote_apart_is_a_split_brain() {
    assert_passes(&run(quorum(1141, 3)));
}

/// Three nodes, quorum: a Primary held without quorum regained it through a Secondary whose
/// handshake it had decided, though that Secondary, following another Primary, dropped it on
/// receiving its own; and a stale `--discard-my-data` later discarded writes the Secondary
/// had received from that other Primary since (found: seed 1124, write 1370). Fixed: a peer
/// counts towards quorum once it said it accepted the handshake (`Accepted`), and a resync
/// from another peer withdraws a pending discard-my-data; kept as a regression test.
#[test]
fn quorum_a_handshake_one_side_refused_lends_no_quorum() {
    assert_passes(&run(quorum(1124, 3)));
}

/// Three nodes, quorum: a Secondary that took its Primary's rotation gave the absent third
/// node a bitmap identifier, but its bits for it missed the writes it had applied between
/// that node's crash and noticing it; the third node later "resynced" from it without them
/// and was promoted (found: seed 88, write 1487). Fixed: a bitmap identifier new to a
/// Secondary marks every block for that peer (a full resync unless the Primary, with its
/// exact bits, gets there first); kept as a regression test.
#[test]
fn quorum_a_rotation_marks_everything_for_a_peer_that_left_unnoticed() {
    assert_passes(&run(quorum(88, 3)));
}

/// Three nodes, quorum: an old Primary cut off in a minority regained quorum through an
/// Inconsistent sync target of the new Primary's lineage (the new Primary having crashed)
/// and resynced it in full from its own data, the new Primary's acknowledged writes on it
/// included, because "unrelated data" with an Inconsistent side was a full sync; the old
/// Primary was later promoted without them (found: seed 473, write 393). Fixed: a sync target
/// records the generation its resync brings it to (`GenerationIds::resync_goal`, persisted
/// and exchanged); a side that never held it meets a split brain instead; kept as a
/// regression test.
#[test]
fn quorum_an_inconsistent_target_of_another_lineage_is_not_overwritten() {
    assert_passes(&run(quorum(473, 3)));
}

/// Three nodes, quorum: a Secondary finished a resync from the Primary and took over its
/// identifiers, the Primary's bitmap identifier for the third node (which missed the
/// Primary's writes) included, but not the Primary's bits for it; the third node later met
/// it by the bitmap rule, "resynced" nothing and was promoted without the writes (found: seed
/// 604, write 835). Fixed: a third peer's adopted bitmap identifier that differs from ours
/// marks every block for it, and the Secondaries connected to the adopter hear of its new
/// generation (so one left behind outdates itself); kept as a regression test.
#[test]
fn quorum_an_adopted_bitmap_identifier_brings_its_bits() {
    assert_passes(&run(quorum(604, 3)));
}

/// Three nodes, no quorum: a resync between two Secondaries went on after a third node was
/// promoted, and its replies overwrote the new Primary's writes on the target (found: seed
/// 1938, block 4143, once adopted bitmap identifiers brought their bits). Fixed: a Secondary
/// that hears a peer is Primary stops its resyncs with other Secondaries; kept as a
/// regression test.
#[test]
fn a_resync_between_secondaries_stops_when_a_primary_appears() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..found(1938)
    }));
}

/// Three nodes, quorum: after a failover away from a Primary cut off in a minority, the old
/// Primary regained quorum through the Secondary that followed the new one, and became a
/// second sync source of that Secondary's disk; the new Primary's acknowledged writes were
/// lost (found: seed 265, write 194). Fixed: a Secondary follows one Primary and drops the
/// connection of a second (`Engine::second_primary`); kept as a regression test.
#[test]
fn quorum_a_secondary_follows_one_primary() {
    assert_passes(&run(quorum(265, 3)));
}

/// Three nodes, quorum: an old Primary held without quorum regained it through a Secondary
/// whose handshake made it a sync target, as soon as that Secondary accepted the handshake,
/// and acknowledged its held writes; it crashed before its `SyncStart` arrived, so the
/// Secondary stayed UpToDate without them and was promoted (found: seed 3530, write 236).
/// Fixed: a peer this node resyncs counts toward quorum only once it said it is no longer
/// UpToDate (`quorum.rs`); kept as a regression test.
#[test]
fn quorum_a_sync_target_lends_quorum_once_it_is_inconsistent() {
    assert_passes(&run(quorum(3530, 3)));
}

/// Three nodes, quorum: node 1, a Secondary, resynced node 2, which then resynced node 0
/// (no Primary near); node 1, promoted while apart from node 0, wrote on the generation
/// without starting a new one, since its bitmap identifier for node 0 was older and it had
/// never seen node 0 share the generation; node 0, UpToDate on it without node 1's writes,
/// was promoted after node 1 crashed (found: seed 3427, write 722). Fixed: a node promoted
/// trusts no record of who shares its generation (`Engine::distrust_shared_with`): its first
/// write with a peer away starts a new one, and node 0 is left behind; kept as a regression
/// test.
#[test]
fn quorum_a_promoted_node_rotates_before_writing_with_a_peer_away() {
    assert_passes(&run(quorum(3427, 3)));
}

/// Three nodes, quorum, protocol A: a sync target of the Primary confirmed a write the
/// Primary acknowledged (protocol A: once sent) and that never reached the other, UpToDate
/// Secondary; the Primary crashed, and the target, resynced from that Secondary, was
/// promoted without the write, as protocol A allows (found: seeds 4915, 6805). The checker
/// expected every write the promoted node once confirmed; now a resync target under A or B
/// is expected to hold only what its source confirmed; kept as a regression test.
#[test]
fn quorum_protocol_a_a_target_resynced_from_a_peer_without_a_write() {
    for seed in [4915, 6805] {
        assert_passes(&run(quorum(seed, 3)));
    }
}

/// Three nodes, quorum: a Secondary's data disk fills up and its replicated writes fail with
/// `IoError::NoSpace`; it NegAcks them, but the engine makes a Secondary Inconsistent only for
/// `IoError::Io` (`replicated_write_failed`), so it stays UpToDate without them, the Primary
/// crashes and it is promoted without write 67, which the Primary acknowledged with node 2
/// (seed 1059, found by the full-disk fault of issue 24; also seeds 100, 2335: a Primary that
/// acknowledged a write every peer NegAcked). DRBD treats ENOSPC from the backing device as
/// any I/O error. Fixed: every disk error of a replicated write takes the failed-write path
/// (`repl`, "a Secondary records a failed replicated write before its NegAck"); kept as a
/// regression test.
#[test]
fn quorum_a_secondary_whose_disk_is_full_is_not_promoted() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(1059, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes, quorum, protocol C: the whole cluster loses power; node 1 had confirmed
/// write 134 without flushing it yet, node 2 had it durably (its barrier acknowledgement had
/// reached the Primary). Nodes 1 and 2 boot with equal generations and no bits for each
/// other, and node 1 is promoted without the write node 2 holds (seed 1610; also 492 and
/// 2106 under protocols B and A). A Secondary's unflushed replicated writes are recorded only
/// in its Primary's memory and activity log; once that Primary is lost too, power and all,
/// nothing tells the Secondaries apart, and the survivors' resync of a lost Primary's
/// unsettled writes (`repl`, issue 24) did not run after a power loss of all of them. Fixed in
/// session 17: a Secondary with more than one peer keeps the extents of unsettled replicated
/// writes hot in its own activity log, an unclean restart marks them for every peer, and a
/// node that went down uncleanly is the target of one that did not (`repl`,
/// `secondary_log.rs`, `crashed_secondary`); kept as a regression seed (the run moved).
#[test]
fn quorum_a_secondary_power_loss_is_reconciled_after_the_primary_is_lost() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(1610, Scenario::Random)
    }
    .with_quorum()));
}

// ----- every checker can fail ---------------------------------------------------------------

fn acked(id: u64, node: u8, first: u64, count: u64, acked_by: &[u8]) -> WriteRecord {
    WriteRecord {
        id,
        node,
        first,
        count,
        acked: Some(id),
        acked_by: acked_by.iter().copied().collect::<BTreeSet<u8>>(),
        ..WriteRecord::default()
    }
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

fn cluster(down: &[u8], cut_off: &[u8]) -> Cluster {
    Cluster {
        down: down.iter().copied().collect(),
        cut_off: cut_off.iter().copied().collect(),
        ..Cluster::default()
    }
}

#[test]
fn promotion_checker_fails_on_a_lost_acknowledged_write() {
    let writes = vec![acked(1, 0, 0, 2, &[1]), acked(2, 0, 4, 1, &[])];
    let up = Cluster::default();
    let mut disk = vec![0; 8];
    assert!(
        check::check_promotion(&disk, 1, &writes, &up).is_err(),
        "write 1 was confirmed by node 1"
    );
    disk[0] = tag(1, 0);
    disk[1] = tag(3, 1);
    assert!(
        check::check_promotion(&disk, 1, &writes, &up).is_ok(),
        "write 2 was never confirmed by node 1; a later write may cover"
    );
    let mut excused = writes.clone();
    excused[0].excused = true;
    assert!(check::check_promotion(&[0; 8], 1, &excused, &up).is_ok());
    let mut lost_with_primary = writes.clone();
    lost_with_primary[0].lost_on.insert(0);
    assert!(
        check::check_promotion(&[0; 8], 1, &lost_with_primary, &up).is_err(),
        "its Primary's power loss does not excuse node 1's own copy"
    );
    lost_with_primary[0].lost_on.insert(1);
    let losses = check::check_promotion(&[0; 8], 1, &lost_with_primary, &up);
    assert_eq!(
        losses.map(|l| l.unflushed),
        Ok(vec![1]),
        "node 1 took its data from the Primary that lost it unflushed"
    );
}

/// The double-failure rule (check.rs): node 1 lost power before write 1 was durable there;
/// the write is lost by a double failure only once every other node that held it is gone.
#[test]
fn double_failure_rule_needs_every_holder_gone() {
    let mut write = acked(1, 0, 0, 2, &[1, 2]);
    write.power_lost_on.insert(1);
    let writes = vec![write];
    let promote_1 = |cluster: &Cluster| {
        check::check_promotion(&[0; 8], 1, &writes, cluster).map(|losses| losses.double_failure)
    };
    assert!(
        promote_1(&cluster(&[0], &[])).is_err(),
        "node 2 runs and holds it"
    );
    assert!(
        promote_1(&cluster(&[2], &[])).is_err(),
        "its Primary, node 0, runs in node 1's partition and holds it"
    );
    assert!(
        promote_1(&cluster(&[0], &[2])).is_err(),
        "a confirming peer cut off still holds it"
    );
    assert_eq!(
        promote_1(&cluster(&[0, 2], &[])),
        Ok(vec![1]),
        "node 0 and node 2 are down"
    );
    assert_eq!(
        promote_1(&cluster(&[2], &[0])),
        Ok(vec![1]),
        "node 2 is down, node 0 cut off (failed over from)"
    );
    let unusable = Cluster {
        unusable: [2].into_iter().collect(),
        ..cluster(&[0], &[])
    };
    assert_eq!(
        promote_1(&unusable),
        Ok(vec![1]),
        "node 0 is down, node 2 runs Inconsistent: no copy anyone may use"
    );
    let mut both_lost = writes.clone();
    both_lost[0].power_lost_on.insert(2);
    both_lost[0].lost_on.insert(0);
    assert_eq!(
        check::check_promotion(&[0; 8], 1, &both_lost, &Cluster::default())
            .map(|losses| losses.double_failure),
        Ok(vec![1]),
        "every holder lost it at a power loss"
    );
    let never_lost = vec![acked(1, 0, 0, 2, &[1])];
    assert!(
        check::check_promotion(&[0; 8], 1, &never_lost, &cluster(&[0], &[])).is_err(),
        "node 1 never lost power: nothing excuses it"
    );
    let mut recorded = never_lost.clone();
    recorded[0].double_failure = true;
    assert!(
        check::check_promotion(&[0; 8], 1, &recorded, &Cluster::default()).is_ok(),
        "found lost by a double failure before: required nowhere"
    );
    let elsewhere = vec![acked(1, 0, 0, 2, &[2])];
    let mut elsewhere_lost = elsewhere.clone();
    elsewhere_lost[0].power_lost_on.insert(2);
    assert!(
        check::check_promotion_strict(&[0; 8], 1, &elsewhere_lost, &cluster(&[0], &[])).is_err(),
        "strict: node 1 never held it nor took it by resync"
    );
}

#[test]
fn strict_promotion_checker_fails_on_a_write_the_node_never_confirmed() {
    let up = Cluster::default();
    let writes = vec![acked(1, 0, 0, 2, &[2])];
    assert!(
        check::check_promotion(&[0; 8], 1, &writes, &up).is_ok(),
        "node 1 never confirmed write 1"
    );
    assert!(
        check::check_promotion_strict(&[0; 8], 1, &writes, &up).is_err(),
        "quorum, protocol C: acknowledged is required everywhere"
    );
    let mut disk = vec![0; 8];
    disk[0] = tag(1, 0);
    disk[1] = tag(1, 1);
    assert!(check::check_promotion_strict(&disk, 1, &writes, &up).is_ok());
    let held = vec![WriteRecord {
        acked: None,
        ..acked(1, 0, 0, 2, &[])
    }];
    assert!(
        check::check_promotion_strict(&[0; 8], 1, &held, &up).is_ok(),
        "a write held, never acknowledged, is required nowhere"
    );
}

#[test]
fn epoch_prefix_checker_fails_on_a_hole() {
    let writes = [
        SessionWrite {
            epoch: 1,
            id: 1,
            first: 0,
            count: 1,
        },
        SessionWrite {
            epoch: 2,
            id: 2,
            first: 1,
            count: 1,
        },
        SessionWrite {
            epoch: 2,
            id: 3,
            first: 2,
            count: 1,
        },
    ];
    let snapshot = vec![0; 4];
    let good = vec![tag(1, 0), 0, tag(3, 2), 0];
    assert!(
        check::check_epoch_prefix(&snapshot, &writes, &good).is_ok(),
        "epoch 1 whole, part of epoch 2"
    );
    let hole = vec![0, tag(2, 1), 0, 0];
    assert!(
        check::check_epoch_prefix(&snapshot, &writes, &hole).is_err(),
        "epoch 2 applied without epoch 1"
    );
    let stray = vec![tag(1, 0), 0, 0, 9 << 24];
    assert!(
        check::check_epoch_prefix(&snapshot, &writes, &stray).is_err(),
        "a block nobody sent changed"
    );
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
    let bounds = Bounds {
        channel_bytes_max: 10,
        channel_frames_max: 2,
        upper_pending_max: 1,
        local_pending_max: 1,
    };
    assert!(check::check_bounds(Usage::default(), bounds).is_ok());
    for usage in [
        Usage {
            channel_bytes: 11,
            ..Usage::default()
        },
        Usage {
            channel_frames: 3,
            ..Usage::default()
        },
        Usage {
            upper_pending: 2,
            ..Usage::default()
        },
        Usage {
            local_pending: 2,
            ..Usage::default()
        },
    ] {
        assert!(check::check_bounds(usage, bounds).is_err(), "{usage:?}");
    }
}

/// Found after the engine gained asynchronous-replication marks, quorum and disk-state
/// announcements (the trajectory changed, the class of bug may be older): protocol A, the
/// Secondary is cut off in the middle of a resync as target, the Primary crashes, the
/// Secondary is promoted by force and writes; when the old Primary returns, data moves from
/// the new Primary although both wrote while apart (no split brain reported).
#[test]
fn forced_promotion_after_an_interrupted_resync_still_detects_split_brain() {
    assert_passes(&run(found(289)));
}

/// Three nodes, quorum, no power loss of the whole cluster: two connected UpToDate nodes
/// differed (session 16, after the reconciliation of a lost Primary's writes: seeds 1654,
/// 1774, 2934 of CI's range). Passes since session 17's reconciliation source rules (the
/// run moved; not analysed, so it stays as a regression seed).
#[test]
fn quorum_replicas_are_identical_without_a_cluster_power_loss() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(1654, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes, quorum, protocol B, no power loss (session 17: seed 2883 of CI's range): two
/// nodes were Primary on one generation and demoted by force when they met; the old one held
/// an unacknowledged write the other lacked, and resynced it (by its bits, equal
/// generations) to the third node, which was connected to the other and shared its
/// generation: two connected UpToDate nodes differed. Fixed in session 18: a sync target
/// marks its resync writes for every other peer and, once UpToDate, starts a new handshake
/// with each Secondary it holds bits for (no Primary feeding them).
#[test]
fn quorum_a_resync_from_a_third_node_reaches_the_connected_secondary() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(2883, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes, quorum, protocol C, a whole-cluster power loss: a write the Primary
/// acknowledged while its only other copy was an Inconsistent sync target was lost when a
/// majority without that Primary promoted a node that lacked it (session 17: seed 355; 499
/// and 2351 in earlier runs). Analysed in session 18: the administrator settled the
/// target's split brain with a node that had diverged from the Primary against the target
/// (the UpToDate side won), which discarded the copy; once the Primary was gone, the node
/// whose data the administrator had given up on could still be promoted. Fixed in session
/// 18: the simulated administrator keeps the side last seen with the client's Primary even
/// when it is Inconsistent, and the engine refuses to promote a node marked
/// `--discard-my-data` (as in DRBD, a Primary is never the split brain's victim).
#[test]
fn quorum_a_write_on_an_inconsistent_target_survives_its_primary() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(355, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes, quorum, protocol C: a node was promoted without a write a quorate Primary
/// acknowledged (session 16: seed 1537 of CI's range; 1060 and 127 in earlier runs, one
/// confirmer, no power loss). Passes since the reconciliation keeps waiting Secondaries
/// connected (the run moved; not analysed, so it stays as a regression seed).
#[test]
fn quorum_a_promotion_keeps_every_acknowledged_write() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(1537, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes without quorum, failing over since session 16: two connected UpToDate nodes
/// differed without a whole-cluster power loss (seeds 205, 1194, 2041, 2419 of CI's range).
/// Passes since session 17 (the run moved; not analysed, so it stays as a regression seed).
#[test]
fn three_node_failover_without_quorum_keeps_replicas_identical() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(205, Scenario::Random)
    }));
}

/// Three nodes without quorum, failing over: a node was promoted without a write it had
/// confirmed (session 16: seeds 1106 and 2329 of CI's range, no whole-cluster power loss).
/// One Secondary was cut off from the Primary; the write completed with the other, which
/// then lost the Primary before the rotation reached it; the two reconciled from the lower
/// node id, the one without the write. Fixed in session 17: the side that received the lost
/// Primary's later write is the source (`Followed` in the handshake); kept as a regression
/// seed.
#[test]
fn three_node_failover_without_quorum_keeps_acknowledged_writes() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(1106, Scenario::Random)
    }));
}

/// Three nodes without quorum, a whole-cluster power loss and split brains the administrator
/// settles: a node was promoted without a write it had confirmed (session 17: seed 2223 of
/// CI's range). The class of seed 355 (the Inconsistent copy discarded in a split brain);
/// fixed with it in session 18.
#[test]
fn three_nodes_keep_a_confirmed_write_through_power_loss_and_split_brains() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(2223, Scenario::Random)
    }));
}

/// Three nodes without quorum (session 18: seed 250 of CI's range): an old Primary wrote
/// while apart from the node promoted after it, then lost a split brain the administrator
/// settled against it (its data discarded) with a node that followed the new Primary's
/// lineage; the new Primary's full resync of it moved data between the two writers with no
/// split brain between them. The checker expected one, but the old Primary's diverged
/// writes were already gone: the resync that settled its split brain made it a copy of
/// the other node. Fixed in session 19 in the checker's model (`resync_finished`: a
/// target stands towards a third node where its source did; a Primary's write is carried
/// by its UpToDate peers too), which is stricter in the other direction.
#[test]
fn three_nodes_report_the_split_brain_of_a_primary_that_wrote_while_apart() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(250, Scenario::Random)
    }));
}

/// Three nodes with quorum, protocol A (session 19: seed 4035 of the wide range 3000-6999,
/// found once the checker counted the peers that carry a Primary's writes). The Primary,
/// cut off from one Secondary and then isolated, completed writes before it noticed the
/// other was gone too (protocol A: sent, not received); the next Primary's lineage reached
/// the first Secondary, and when the old Primary returned it was resynced from that
/// Secondary as if merely behind: it had started no generation of its own for the writes
/// only it held, so no split brain was reported (tandem starts a generation on the next
/// write made apart, and the Primary, without quorum, made none). Passes since session 20
/// (peer acks name the nodes holding their writes); whether that removed the cause or only
/// moved the run off it was not analysed, so the wide range keeps watching for the class.
#[test]
fn three_nodes_report_the_split_brain_of_an_isolated_protocol_a_primary() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(4035, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes with quorum, protocol C, full disks (session 19: seed 5099 of the wide range
/// 3000-6999). A Secondary confirmed the writes of a second Primary (promoted while the
/// first was unreachable), then followed the first again when the administrator moved the
/// client back to it; data later moved between it and the first Primary with no split brain
/// reported, though each held writes the other lacked. Passes since session 20 (peer acks
/// name the nodes holding their writes; not analysed further).
#[test]
fn three_nodes_report_the_split_brain_of_a_secondary_that_followed_two_primaries() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(5099, Scenario::Random)
    }
    .with_quorum()));
}

/// Wide-range seeds that lose data or leave replicas different (session 19, seeds 7000-10999,
/// protocol C; not analysed beyond their first look, and outside CI's ranges):
/// - quorum 7328: after a whole-cluster power loss, the Primary acknowledged a write its only
///   peer failed with ENOSPC (`pass_on`), crashed, and the other node, down meanwhile, was
///   promoted without it once the administrator settled a split brain against the node that
///   had failed it (issue 24 item 4's class);
/// - quorum 9289: a node promoted without a write another confirmed;
/// - no quorum 8363: two connected UpToDate nodes differ. A Secondary connected to a third
///   node the Primary did not reach (mid-handshake) let a peer ack settle writes that node
///   lacked; the Primary died and the two resynced without them. Fixed in session 20: a
///   peer ack names the nodes holding its writes, and the others get them marked.
///
/// All three pass since session 20; 7328 and 9289 were not analysed further (their path
/// moved with the engine's timing), so they stay here as regression seeds.
#[test]
fn wide_range_protocol_c_seeds_keep_every_acknowledged_write() {
    for (seed, quorum) in [(7328, true), (9289, true), (8363, false)] {
        let config = SimConfig {
            nodes: 3,
            ..SimConfig::new(seed, Scenario::Random)
        };
        assert_passes(&run(if quorum { config.with_quorum() } else { config }));
    }
}

/// More wide-range split brains not reported (session 19, seeds 3000-10999, beyond 4035 and
/// 5099 above; not analysed): no quorum 6013 (protocol A), 7768 and 9824 (protocol B),
/// quorum 10110 (protocol A). Under protocol B a peer that confirmed a write (received, not
/// written) counts as carrying it even if it then lost power: some of these may be the
/// checker's over-count rather than the engine's. All pass since session 20's peer-ack node
/// set (not analysed further); kept as regression seeds.
#[test]
fn wide_range_split_brains_are_reported() {
    for (seed, quorum) in [(6013, false), (7768, false), (9824, false), (10110, true)] {
        let config = SimConfig {
            nodes: 3,
            ..SimConfig::new(seed, Scenario::Random)
        };
        assert_passes(&run(if quorum { config.with_quorum() } else { config }));
    }
}

/// Three nodes with quorum, protocol B (session 20, seed 2265 of CI's range once the peer-ack
/// change moved its timing): a Secondary confirmed a second Primary's writes, ran out of space
/// (`pass_on`: Inconsistent) and was resynced in full from the first Primary, after the split
/// brain between the two Primaries had been detected and resolved. The checker still counted
/// the failed Secondary as holding the second Primary's writes; a disk its own failed write
/// made Inconsistent holds none (checker rule, `forget_holdings_of_failed_disk`).
#[test]
fn quorum_a_secondary_whose_disk_failed_holds_no_diverged_writes() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(2265, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes without quorum, protocols C and A (session 20, seeds 3992 and 5446 of the wide
/// range): an old Primary lost a detected split brain, the administrator discarded its data,
/// and its resync from the winner failed part-way; it was later resynced by the Primary, a
/// third node. The checker still counted its discarded writes; the discard abandons them from
/// the first resync block on (checker rule in `observe`).
#[test]
fn a_split_brain_loser_being_resynced_holds_no_diverged_writes() {
    for seed in [3992, 5446] {
        assert_passes(&run(SimConfig {
            nodes: 3,
            ..SimConfig::new(seed, Scenario::Random)
        }));
    }
}

/// Three nodes with quorum, protocol C (session 20, seed 10438 of the long run): a Primary
/// isolated with writes held for want of quorum regained it through a node that had just
/// lent its vote to a second Primary, promoted meanwhile and crashed before its first write
/// reached that node; the held writes completed, and when the second Primary came back the
/// split brain between the two was resolved against the first, losing them. A vote now
/// carries one Primary at a time (`quorum.rs`, `vote_taken`): the voter refuses the old
/// Primary until the one it voted for is back as a Secondary and met it.
#[test]
fn quorum_a_vote_carries_one_primary_at_a_time() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(10438, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes without quorum, protocol A (session 20, seed 11512 of the long run): a Primary
/// lost a Secondary to a partition it had not detected (protocol A: its writes complete on
/// sending) while the old Primary, back as the new Primary's sync target, received one of
/// those writes by resync. The two Secondaries' handshake, both following the Primary, let
/// them forget their bits for each other (row 16: "the Primary's writes reach both"), which
/// does not hold for a resync write or for a peer the Primary no longer reaches; the
/// Primary then crashed before it noticed the partition, and the two ended UpToDate with
/// different data in that block. Not fixed. Keeping the bits instead leaves fed
/// Secondaries out of sync while Established (nothing resyncs them while a Primary feeds
/// them; tried in session 21). The likely fix: a sync target records a Primary source's
/// resync writes with its unsettled replicated writes, under the epoch the Primary was at
/// when it read the block (the `ResyncReply` would carry it), so a peer ack settles them
/// and a lost Primary turns the rest into bits (`reconcile.rs`).
#[test]
#[ignore = "engine: row 16 forgets bits a resync write or an unreached peer still needs"]
fn three_nodes_resync_writes_are_not_forgotten_between_fed_secondaries() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(11512, Scenario::Random)
    }));
}

/// More protocol C seeds of session 20's long run (three nodes, quorum majority) where a
/// node was promoted without an acknowledged write. 18318: a Primary lost its sync target
/// just after sending it the last block; the target finished the resync on its side and
/// was UpToDate, but the Primary remembered it Inconsistent, kept quorum alone (last man
/// standing) and acknowledged writes the target, promoted later, lacked (now a lost sync
/// target is DUnknown). 13973: the simulated administrator missed that a node had been the
/// Primary's sync target between two of its polls and kept the other side of a split brain
/// (it now also reads the Primary's state changes as `tandem events` shows them). 13101,
/// 14497, 22585 and 25775 were not analysed further; they pass since.
#[test]
fn quorum_long_run_promotions_keep_every_acknowledged_write() {
    for seed in [13101, 13973, 14497, 18318, 22585, 25775] {
        assert_passes(&run(SimConfig {
            nodes: 3,
            ..SimConfig::new(seed, Scenario::Random)
        }
        .with_quorum()));
    }
}

/// Three nodes with quorum, protocol C (session 21, seed 8757 of the long run): an old
/// Primary cut off in a minority, never down, met a node of the quorate partition that had
/// lost power after holding the new Primary's acknowledged writes; the simulated
/// administrator kept the old Primary's side (it counted the old Primary as seen with
/// itself until the failover, and preferred a side that had not lost power). It now counts
/// a Primary only while it has quorum and keeps the side seen last with it.
#[test]
fn quorum_a_split_brain_keeps_the_side_of_the_quorate_primary() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(8757, Scenario::Random)
    }
    .with_quorum()));
}

/// Three nodes without quorum, protocol A (session 20, seed 19322 of the long run): the
/// whole cluster lost power, and the Secondary that restarted first was promoted before it
/// met a peer, without a write its disk cache lost and its peer held. A node back from an
/// unclean stop as a Secondary is now promoted only after a handshake (I25).
#[test]
fn three_nodes_an_unclean_secondary_meets_a_peer_before_promotion() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(19322, Scenario::Random)
    }));
}

/// Three nodes without quorum, protocol C (session 20, seed 19592 of the long run): a
/// Secondary confirmed a write while it was the Primary's sync target (Inconsistent); the
/// Primary, which had lost the third node to an undetected partition, rotated, but the
/// Rotate never reached the target (it had stopped reading); the write completed when the
/// target was lost too. The target and the third node, both still on the old generation,
/// met: the target, Inconsistent, took a resync from the third node, which lacked the write
/// (it was left behind, and nothing outdated it), and was promoted without it after the
/// Primary crashed. Not fixed: a Primary does not outdate a Secondary it leaves (no
/// fencing), and an Inconsistent node cannot be the source of what it holds newer.
#[test]
#[ignore = "engine: a stale third node resyncs a target that confirmed newer writes"]
fn three_nodes_long_run_promotions_keep_every_acknowledged_write() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(19592, Scenario::Random)
    }));
}

/// Three nodes without quorum, protocol A (session 21, seed 24363 of the long run): the run
/// ends with every node Secondary and Outdated on one current identifier, so nobody can be
/// promoted without `--force` (the simulated administrator never forces), and one link is
/// seen Established from one side and Connecting from the other with a metadata job still
/// pending. Not analysed.
#[test]
#[ignore = "liveness: every node ends Outdated, not analysed"]
fn three_nodes_do_not_all_end_outdated() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(24363, Scenario::Random)
    }));
}

/// Three nodes with quorum, protocol B (session 21, seed 32314 of the long run): one node
/// ends Outdated on a current identifier the other two no longer name (their bitmap slot
/// for it holds another), and every handshake with it finds unrelated data, a dead end for
/// the administrator. Perhaps the history-overflow gap of docs/LINEAGE.md; not analysed.
#[test]
#[ignore = "liveness: unrelated data after a long run, not analysed"]
fn quorum_no_node_ends_with_unrelated_data() {
    assert_passes(&run(SimConfig {
        nodes: 3,
        ..SimConfig::new(32314, Scenario::Random)
    }
    .with_quorum()));
}
