//! Runs: the random fault schedule and the named scenarios, all on the same harness, each
//! ending with a heal phase (faults off, crashed nodes booted, client stopped) after which the
//! cluster must converge to connected, UpToDate, identical replicas.

use std::time::Duration;

use repl::{Promotion, ReplState, Time};

use crate::check::Violation;
use crate::faults;
use crate::world::{Ev, Sim, Stats};
use crate::{SimConfig, SimError};

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;
/// Simulated time the heal phase may take to converge.
const CONVERGE_NS_MAX: u64 = 600 * SECOND;

/// The named scenarios (and the random one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Random faults from the seed.
    Random,
    /// The Primary crashes while it is the source of a resync.
    PrimaryCrashMidResync,
    /// A partition cuts the resync that resolves a split brain.
    PartitionDuringSplitBrain,
    /// A Secondary crashes in the middle of a burst of writes.
    SecondaryCrashMidBurst,
    /// The Primary dies and a Secondary is promoted.
    Failover,
    /// Two Primaries (one forced during a partition) meet again: the split brain must be
    /// detected.
    SplitBrainTwoPrimaries,
    /// A Secondary's power loss, then the Primary's crash, and a failover to the Secondary:
    /// a double failure, outside what protocol C promises (`check`).
    DoubleFailure,
}

impl Scenario {
    /// Every scenario, named ones first.
    pub const ALL: [Scenario; 7] = [
        Scenario::PrimaryCrashMidResync,
        Scenario::PartitionDuringSplitBrain,
        Scenario::SecondaryCrashMidBurst,
        Scenario::Failover,
        Scenario::SplitBrainTwoPrimaries,
        Scenario::DoubleFailure,
        Scenario::Random,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Random => "random",
            Scenario::PrimaryCrashMidResync => "primary-crash-mid-resync",
            Scenario::PartitionDuringSplitBrain => "partition-during-split-brain",
            Scenario::SecondaryCrashMidBurst => "secondary-crash-mid-burst",
            Scenario::Failover => "failover",
            Scenario::SplitBrainTwoPrimaries => "split-brain-two-primaries",
            Scenario::DoubleFailure => "double-failure",
        }
    }

    /// The scenario of a name.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The result of one run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The configuration it ran with.
    pub cfg: SimConfig,
    /// Counters.
    pub stats: Stats,
    /// The first violation, if any.
    pub failure: Option<Violation>,
    /// Hash of the whole trace (equal for equal runs).
    pub trace_hash: u64,
    /// Lines in the trace.
    pub trace_lines: u64,
    /// The last trace lines.
    pub trace_tail: Vec<String>,
}

/// Runs one configuration to the end.
pub fn run(cfg: SimConfig) -> Outcome {
    let mut sim = match Sim::new(cfg.clone()) {
        Ok(sim) => sim,
        Err(error) => return setup_failure(cfg, &error),
    };
    match cfg.scenario {
        Scenario::Random => random(&mut sim),
        Scenario::PrimaryCrashMidResync => primary_crash_mid_resync(&mut sim),
        Scenario::PartitionDuringSplitBrain => partition_during_split_brain(&mut sim),
        Scenario::SecondaryCrashMidBurst => secondary_crash_mid_burst(&mut sim),
        Scenario::Failover => failover(&mut sim),
        Scenario::SplitBrainTwoPrimaries => split_brain_two_primaries(&mut sim),
        Scenario::DoubleFailure => double_failure(&mut sim),
    }
    if sim.failure.is_none() {
        heal_and_converge(&mut sim);
    }
    Outcome {
        cfg,
        stats: sim.stats,
        failure: sim.failure.clone(),
        trace_hash: sim.trace.hash(),
        trace_lines: sim.trace.lines(),
        trace_tail: sim.trace.tail(),
    }
}

fn setup_failure(cfg: SimConfig, error: &SimError) -> Outcome {
    let failure = Some(Violation {
        checker: "setup",
        detail: error.to_string(),
    });
    Outcome {
        cfg,
        stats: Stats::default(),
        failure,
        trace_hash: 0,
        trace_lines: 0,
        trace_tail: Vec::new(),
    }
}

fn at(sim: &Sim, delay_ns: u64) -> Time {
    Time(sim.now.0.saturating_add(delay_ns))
}

/// Runs for `ns` of simulated time.
fn run_for(sim: &mut Sim, ns: u64) {
    let until = at(sim, ns);
    sim.run_until(until, |_| false);
}

/// Runs until `done` holds (true) or `ns` passed (false).
fn run_while_not(sim: &mut Sim, ns: u64, done: impl Fn(&Sim) -> bool) -> bool {
    let until = at(sim, ns);
    sim.run_until(until, |s| done(s));
    done(sim)
}

fn expect(sim: &mut Sim, reached: bool, what: &str) {
    if !reached {
        let detail = format!("the scenario never reached: {what}");
        sim.fail(Violation {
            checker: "scenario",
            detail,
        });
    }
}

fn random(sim: &mut Sim) {
    sim.faults_on = true;
    sim.schedule(SECOND / 2, Ev::Fault);
    let workload = sim.cfg.workload_ns;
    run_for(sim, workload);
}

/// Whether node `n` is the source (`source`) or target of a running resync.
pub fn resyncing(sim: &Sim, n: u8, source: bool) -> bool {
    let want = if source {
        ReplState::SyncSource
    } else {
        ReplState::SyncTarget
    };
    sim.nodes[usize::from(n)].engine.as_ref().is_some_and(|e| {
        e.status()
            .peers
            .iter()
            .flat_map(|p| &p.volumes)
            .any(|v| v.replication == want)
    })
}

fn primary_crash_mid_resync(sim: &mut Sim) {
    run_for(sim, SECOND);
    sim.crash(1, Some(2 * SECOND));
    let reached = run_while_not(sim, 30 * SECOND, |s| resyncing(s, 0, true));
    expect(sim, reached, "node 0 as the source of a resync");
    run_for(sim, 5 * MS);
    sim.crash(0, Some(2 * SECOND));
    run_for(sim, 5 * SECOND);
}

/// Partitions node 1 from the Primary, promotes it by force and writes there: both sides
/// diverge.
fn diverge(sim: &mut Sim) {
    run_for(sim, SECOND);
    for (a, b) in [(0, 1), (1, 0)] {
        sim.net.blocked.insert((a, b));
    }
    let apart = run_while_not(sim, 20 * SECOND, |s| {
        s.nodes[1].conns.is_empty() && s.nodes[0].conns.is_empty()
    });
    expect(sim, apart, "both sides noticing the partition");
    let forced = sim.promote(1, Promotion::Forced);
    expect(sim, forced, "node 1 promoted by force");
    for i in 0..20 {
        sim.submit_write(1, 100 + i * 3, 2, false);
    }
    run_for(sim, SECOND);
}

fn split_brain_detected(sim: &mut Sim) {
    let detected = run_while_not(sim, 30 * SECOND, |s| s.stats.split_brains > 0);
    expect(sim, detected, "a detected split brain");
}

/// The usual procedure: the forced Primary steps down before the link heals; the split brain
/// is detected, the administrator discards node 1's data, and a partition cuts the resync
/// that resolves it.
fn partition_during_split_brain(sim: &mut Sim) {
    diverge(sim);
    sim.with_engine(1, |e, _, out| {
        let _ = e.demote(out);
    });
    faults::heal_everything(sim);
    split_brain_detected(sim);
    let resolving = run_while_not(sim, 30 * SECOND, |s| resyncing(s, 0, true));
    expect(sim, resolving, "the resync that resolves the split brain");
    for (a, b) in [(0, 1), (1, 0)] {
        sim.net.blocked.insert((a, b));
    }
    run_for(sim, 3 * SECOND);
    faults::heal_everything(sim);
    run_for(sim, 2 * SECOND);
}

/// Both stay Primary when the link heals.
fn split_brain_two_primaries(sim: &mut Sim) {
    diverge(sim);
    faults::heal_everything(sim);
    split_brain_detected(sim);
}

fn secondary_crash_mid_burst(sim: &mut Sim) {
    run_for(sim, SECOND);
    for i in 0..6 {
        sim.submit_write(0, 2000 + i * 20, 16, false);
    }
    let busy = run_while_not(sim, SECOND, |s| s.nodes[1].peer_io_pending());
    expect(sim, busy, "node 1 writing replicated data");
    sim.crash(1, Some(SECOND));
    run_for(sim, 5 * SECOND);
}

fn failover(sim: &mut Sim) {
    run_for(sim, 2 * SECOND);
    sim.crash(0, None);
    let promoted = run_while_not(sim, 10 * SECOND, |s| {
        s.primary.is_some_and(|p| p != 0)
            && s.nodes[usize::from(s.primary.unwrap_or(0))]
                .engine
                .as_ref()
                .is_some_and(|e| e.role() == repl::Role::Primary)
    });
    expect(sim, promoted, "a Secondary promoted after the Primary died");
    run_for(sim, 2 * SECOND);
    sim.schedule(0, Ev::Restart { node: 0 });
    run_for(sim, 5 * SECOND);
}

/// Seed 50's class of random runs, scripted: node 1 is cut off while it holds writes it
/// confirmed (protocol C) and has not flushed yet (no barrier acknowledgement covers them)
/// and loses power before it notices (noticing, it records the Primary it lost, and that
/// metadata write flushes its disk first), node 0 goes on alone (its client flushes there
/// only), node 1 boots still cut off, node 0 crashes, and node 1 is promoted (failover)
/// without the writes its power loss took: lost by a double failure, counted
/// (`Stats::writes_lost_by_double_failure`), not a violation. When node 0 returns the two
/// wrote apart: a split brain, resolved for node 1.
fn double_failure(sim: &mut Sim) {
    run_for(sim, SECOND);
    for (a, b) in [(0, 1), (1, 0)] {
        sim.net.blocked.insert((a, b));
    }
    run_for(sim, 20 * MS);
    sim.crash(1, Some(SECOND));
    let apart = run_while_not(sim, 20 * SECOND, |s| s.nodes[0].conns.is_empty());
    expect(sim, apart, "node 0 noticing the partition");
    run_for(sim, 2 * SECOND);
    sim.crash(0, None);
    let promoted = run_while_not(sim, 10 * SECOND, |s| {
        s.primary == Some(1)
            && s.nodes[1]
                .engine
                .as_ref()
                .is_some_and(|e| e.role() == repl::Role::Primary)
    });
    expect(sim, promoted, "node 1 promoted after node 0 crashed");
    run_for(sim, 2 * SECOND);
}

/// Ends every fault, stops the client and waits until every pair of nodes is connected,
/// Established, UpToDate and identical; then the Primary must hold every write it must.
pub fn heal_and_converge(sim: &mut Sim) {
    sim.faults_on = false;
    sim.workload_on = false;
    faults::heal_everything(sim);
    let pairs = usize::from(sim.cfg.nodes) * usize::from(sim.cfg.nodes - 1) / 2;
    let until = at(sim, CONVERGE_NS_MAX);
    let mut converged = false;
    let mut rounds: u64 = 0;
    while sim.failure.is_none() && sim.now < until && !converged {
        let step_until = at(sim, 100 * MS);
        sim.run_until(step_until, |_| false);
        rounds += 1;
        if rounds.is_multiple_of(50) {
            faults::cycle_out_of_sync_links(sim);
        }
        let all_up = sim.nodes.iter().all(|n| n.alive());
        let has_primary = sim.primary.is_some_and(|p| {
            sim.nodes[usize::from(p)]
                .engine
                .as_ref()
                .is_some_and(|e| e.role() == repl::Role::Primary)
        });
        converged = all_up
            && has_primary
            && sim.requests_in_flight() == 0
            && sim.check_quiet_pairs(true) == pairs;
    }
    if sim.failure.is_some() {
        return;
    }
    if !converged {
        let states = status_summary(sim);
        sim.fail(Violation {
            checker: "convergence",
            detail: format!(
                "no convergence within {} s after healing: {states}",
                Duration::from_nanos(CONVERGE_NS_MAX).as_secs()
            ),
        });
        return;
    }
    if let Some(p) = sim.primary {
        if let Err(v) = sim.check_holds_acked_writes(p) {
            sim.fail(v);
        }
    }
}

fn status_summary(sim: &Sim) -> String {
    let mut parts = Vec::new();
    for node in &sim.nodes {
        let Some(engine) = &node.engine else {
            parts.push(format!("node {} down", node.id));
            continue;
        };
        let s = engine.status();
        let disk = s
            .volumes
            .first()
            .map(|v| v.disk.to_string())
            .unwrap_or_default();
        let peers: Vec<String> = s
            .peers
            .iter()
            .map(|p| {
                let v = p.volumes.first();
                let (repl, oos, pending) = v
                    .map(|v| (v.replication.to_string(), v.out_of_sync_bytes, v.pending))
                    .unwrap_or_default();
                format!(
                    "{}:{}/{}/{} unacked {} oos {oos} pending {pending}",
                    p.node_id,
                    p.connection,
                    repl,
                    v.map(|v| v.peer_disk.to_string()).unwrap_or_default(),
                    p.unacked
                )
            })
            .collect();
        let pending = s
            .volumes
            .first()
            .map(|v| {
                format!(
                    "upper {} lower {} local-io {} meta-jobs {}",
                    v.upper_pending,
                    v.lower_pending,
                    node.pending.len(),
                    node.meta.queued()
                )
            })
            .unwrap_or_default();
        let ids = engine.meta(0).map(|m| {
            let bitmaps: Vec<String> = (0..sim.cfg.nodes)
                .filter(|&p| p != node.id)
                .map(|p| format!("{p}:{:x}", m.ids.bitmap[usize::from(p)]))
                .collect();
            let history: Vec<String> = m
                .ids
                .history
                .iter()
                .take(3)
                .map(|h| format!("{h:x}"))
                .collect();
            format!(
                "current {:x} bitmap [{}] history [{}]",
                m.ids.current,
                bitmaps.join(" "),
                history.join(" ")
            )
        });
        parts.push(format!(
            "node {} {} {} {pending} [{}] {}",
            node.id,
            s.role,
            disk,
            peers.join(" "),
            ids.unwrap_or_default()
        ));
    }
    format!(
        "client requests in flight {}; {}",
        sim.requests_in_flight(),
        parts.join("; ")
    )
}
