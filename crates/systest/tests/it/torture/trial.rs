//! One torture trial, from its seed to its record: three nodes (protocol C, `quorum
//! majority`, `on-no-quorum io-error`) with alice Primary; stamped writes and background load
//! through alice; the fault (SIGKILL of alice, or her bridge port cut); the promotion of the
//! chosen survivor; stamped writes and load through it; alice's return (restarted after a
//! kill; demoted and healed after a cut), before, during or after those writes; the wait for
//! every node to be Connected and UpToDate; then the checks on the backing files.
//!
//! Invariants:
//! - The seed fixes the plan ([`Plan::from_seed`]): fault, survivor, write counts, offsets,
//!   FUA flags, data, when alice returns. Process timing is real, so a replay follows the
//!   same plan, not necessarily the same interleaving.
//! - A broken property of the replicas is a [`Finding`], not a panic: the trial goes on to the
//!   checks it can still make and the record keeps counting. A failure of the harness's own
//!   steps (a setup deadline, a node that cannot be started) panics; the caller catches it
//!   and records it as a [`Check::Harness`] finding.
//! - Nothing waits with a fixed sleep: every wait polls a condition against a deadline.
//! - Every process, file and namespace belongs to the trial's [`Rig`] or to a writer or load
//!   that is joined or dropped before it, so all of them are gone when the trial ends.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::load::{self, Load};
use super::stamp::{
    self, Found, Issued, Ledger, Mismatch, Outcome, Phase, Planned, Writer, WriterConfig,
};
use crate::cluster::{Cluster, Spec, NODE_NAMES, POLL_INTERVAL, RESOURCE};
use crate::netns::Network;
use crate::tools::Rng;

/// The first Primary, whose fault every trial survives.
pub const ALICE: usize = 0;
/// How long a lost peer, a closed export or a role may take to show.
const STATE_DEADLINE: Duration = Duration::from_secs(40);
/// How long the stamped writers may take for their share.
const WRITES_DEADLINE: Duration = Duration::from_secs(90);
/// How long `tandem primary` is retried while it says quorum is being confirmed.
const PROMOTE_DEADLINE: Duration = Duration::from_secs(30);
/// How long the returning node may take until every node is Connected and UpToDate.
const SYNC_DEADLINE: Duration = Duration::from_secs(60);
/// How long in-sync replicas may take to become byte-identical on disk (writes completing).
const SETTLE_DEADLINE: Duration = Duration::from_secs(10);
/// How often the settling replicas are compared (each comparison reads every backing file).
const SETTLE_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Lines of each node's log in a failure report.
const LOG_TAIL_LINES: usize = 60;
/// Mismatching blocks listed per node and check (the count covers all).
const LISTED_MAX: usize = 5;
/// Stamped writes acknowledged by alice before the fault: at least this many...
const BEFORE_MIN: u64 = 100;
/// ...plus a seeded share of this many more.
const BEFORE_SPREAD: u64 = 500;
/// Stamped writes through the new Primary: at least this many, plus a share of the spread.
const AFTER_MIN: u64 = 50;
const AFTER_SPREAD: u64 = 250;
/// Writes alice's writer has planned beyond the fault threshold, so it is still writing
/// when the fault comes (it is stopped there).
const BEFORE_TAIL: u64 = 20_000;
/// Half of the stamped writes go to this many blocks, so blocks are overwritten often.
const HOT_BLOCKS: u64 = 64;
/// One stamped write in this many has FUA.
const FUA_ONE_IN: u64 = 4;

/// What happens to alice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL; she is restarted later.
    Kill,
    /// Her bridge port is cut (`netns`); later she is demoted and the port healed.
    Partition,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Partition => "partition",
        }
    }
}

/// When alice returns, relative to the new Primary's stamped writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Return {
    /// Before the first: the new Primary is still on the generation alice knows.
    Before,
    /// Once half of them are acknowledged: her resync runs under writes.
    During,
    /// After all of them.
    After,
}

impl Return {
    pub fn name(self) -> &'static str {
        match self {
            Return::Before => "before",
            Return::During => "during",
            Return::After => "after",
        }
    }
}

/// Everything a seed decides.
#[derive(Debug, Clone)]
pub struct Plan {
    pub seed: u64,
    pub fault: Fault,
    /// The survivor promoted: bob (1) or carol (2).
    pub survivor: usize,
    /// Stamped writes alice must have acknowledged when the fault comes.
    pub acknowledged_before_fault: u64,
    /// Alice's writer's list (longer: it runs on until the fault).
    pub before: Vec<Planned>,
    /// The new Primary's writer's list.
    pub after: Vec<Planned>,
    /// When alice returns.
    pub alice_returns: Return,
}

impl Plan {
    /// The plan of `seed`, choosing the fault among `faults`.
    pub fn from_seed(seed: u64, faults: &[Fault]) -> Plan {
        assert!(!faults.is_empty(), "at least one kind of fault");
        let mut rng = Rng::new(seed);
        let fault_count = u64::try_from(faults.len()).expect("small");
        let fault = faults[usize::try_from(rng.next_u64() % fault_count).expect("small")];
        let survivor = 1 + usize::try_from(rng.next_u64() % 2).expect("small");
        let acknowledged_before_fault = BEFORE_MIN + rng.next_u64() % BEFORE_SPREAD;
        let after_count = AFTER_MIN + rng.next_u64() % AFTER_SPREAD;
        let alice_returns = [Return::Before, Return::During, Return::After]
            [usize::try_from(rng.next_u64() % 3).expect("small")];
        let before = planned_writes(&mut rng, acknowledged_before_fault + BEFORE_TAIL);
        let after = planned_writes(&mut rng, after_count);
        Plan {
            seed,
            fault,
            survivor,
            acknowledged_before_fault,
            before,
            after,
            alice_returns,
        }
    }

    /// The plan in one sentence.
    pub fn describe(&self) -> String {
        let (survivor, other) = (NODE_NAMES[self.survivor], NODE_NAMES[3 - self.survivor]);
        let fault = match self.fault {
            Fault::Kill => "SIGKILL of alice (Primary), restarted later",
            Fault::Partition => "alice (Primary) partitioned off, demoted and healed later",
        };
        let timing = self.alice_returns.name();
        format!(
            "seed {}: {fault}; {} stamped writes acknowledged before the fault; {survivor} \
             promoted ({other} stays Secondary); {} stamped writes through {survivor}; alice \
             returns {timing} them",
            self.seed,
            self.acknowledged_before_fault,
            self.after.len()
        )
    }
}

fn planned_writes(rng: &mut Rng, count: u64) -> Vec<Planned> {
    (0..count)
        .map(|_| {
            let hot = rng.next_u64().is_multiple_of(2);
            let block = rng.next_u64()
                % if hot {
                    HOT_BLOCKS
                } else {
                    stamp::REGION_BLOCKS
                };
            Planned {
                offset: block * stamp::BLOCK_BYTES,
                fua: rng.next_u64().is_multiple_of(FUA_ONE_IN),
            }
        })
        .collect()
}

/// Which property a finding breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Check {
    /// A connection ended StandAlone: a dead end that needs the administrator.
    StandAlone,
    /// The nodes did not reach Connected/UpToDate everywhere before the deadline.
    NotInSync,
    /// A node died without being asked.
    NodeDied,
    /// A checked replica lacks an acknowledged write.
    LostWrite,
    /// A checked replica holds a block no write explains (torn, misdirected, stray).
    StrayBlock,
    /// Two checked replicas differ.
    Divergent,
    /// The survivor could not be promoted.
    Promotion,
    /// A stamped write through the new Primary failed.
    NewPrimaryWrite,
    /// The harness's own step failed (a panic caught by the caller).
    Harness,
}

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::StandAlone => "standalone",
            Check::NotInSync => "not-in-sync",
            Check::NodeDied => "node-died",
            Check::LostWrite => "lost-write",
            Check::StrayBlock => "stray-block",
            Check::Divergent => "divergent",
            Check::Promotion => "promotion",
            Check::NewPrimaryWrite => "new-primary-write",
            Check::Harness => "harness",
        }
    }
}

/// One broken property, in words that name the node and the block.
#[derive(Debug, Clone)]
pub struct Finding {
    pub check: Check,
    pub text: String,
}

/// How long each phase took (None: not reached).
#[derive(Debug, Clone, Default)]
pub struct Timings {
    pub setup: Option<Duration>,
    pub before: Option<Duration>,
    pub failover: Option<Duration>,
    pub after: Option<Duration>,
    pub sync: Option<Duration>,
    pub check: Option<Duration>,
    /// Killing what still runs, deleting the files and namespaces.
    pub teardown: Option<Duration>,
    pub total: Duration,
}

/// The result of one trial.
#[derive(Debug, Clone)]
pub struct Record {
    pub number: usize,
    pub plan: Plan,
    pub load: load::Kind,
    pub acknowledged: usize,
    pub acknowledged_fua: usize,
    /// Blocks whose acknowledged write is missing on at least one checked node.
    pub lost_writes: usize,
    /// The most 4 KiB blocks in which a checked node differs from the new Primary.
    pub divergent_blocks: u64,
    /// Refusals of `tandem primary` retried through before the promotion succeeded.
    pub promotion_retries: usize,
    pub findings: Vec<Finding>,
    /// Facts worth keeping that are not failures (how the load ended, unchecked nodes).
    pub notes: Vec<String>,
    pub timings: Timings,
    /// Everything about a failed trial: findings, replay line, statuses, log tails.
    pub report: Option<String>,
}

impl Record {
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    pub fn has(&self, check: Check) -> bool {
        self.findings.iter().any(|finding| finding.check == check)
    }
}

/// Runs one trial; never panics (a harness failure becomes a finding).
pub fn run(number: usize, plan: &Plan, load: load::Kind) -> Record {
    let started = Instant::now();
    let mut record = Record {
        number,
        plan: plan.clone(),
        load,
        acknowledged: 0,
        acknowledged_fua: 0,
        lost_writes: 0,
        divergent_blocks: 0,
        promotion_retries: 0,
        findings: Vec::new(),
        notes: Vec::new(),
        timings: Timings::default(),
        report: None,
    };
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
        run_phases(plan, load, &mut record, started)
    }));
    if let Err(payload) = outcome {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|text| text.to_string()))
            .unwrap_or_else(|| "a panic without a message".to_string());
        let first_line = message.lines().next().unwrap_or_default().to_string();
        record.findings.push(Finding {
            check: Check::Harness,
            text: first_line,
        });
        let mut report = header(&record);
        let _ = writeln!(
            report,
            "---- the harness step panicked; its message (with the node states and logs when the \
             cluster reported) ----\n{message}"
        );
        record.report = Some(report);
    }
    record.timings.total = started.elapsed();
    record
}

/// The cluster of one trial, and its network when the fault is a partition. Field order
/// matters: the nodes are killed before their namespaces are deleted.
struct Rig {
    cluster: Cluster,
    network: Option<Network>,
}

impl Rig {
    fn build(fault: Fault) -> Rig {
        let spec = Spec::three_nodes('C')
            .options_line("quorum majority;")
            .options_line("on-no-quorum io-error;");
        match fault {
            Fault::Kill => Rig {
                cluster: Cluster::with_primary(spec),
                network: None,
            },
            Fault::Partition => {
                let network = Network::create(3);
                let cluster = Cluster::with_primary(spec.in_namespaces(network.placements()));
                Rig {
                    cluster,
                    network: Some(network),
                }
            }
        }
    }

    fn network(&self) -> &Network {
        self.network
            .as_ref()
            .expect("a partition trial has a network")
    }
}

impl Deref for Rig {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

/// The stamped writer and the load of one Primary.
struct Traffic {
    writer: Writer,
    load: Load,
}

/// A trial in progress.
struct Trial<'a> {
    plan: &'a Plan,
    load: load::Kind,
    rig: Rig,
    record: &'a mut Record,
    issued: Vec<Issued>,
}

fn run_phases(plan: &Plan, load: load::Kind, record: &mut Record, started: Instant) {
    let clock = Instant::now();
    let rig = Rig::build(plan.fault);
    record.timings.setup = Some(clock.elapsed());
    let mut trial = Trial {
        plan,
        load,
        rig,
        record,
        issued: Vec::new(),
    };
    let mut old = Some(trial.before_fault());
    if plan.fault == Fault::Kill {
        // Alice is dead: her writer and load end at once (the connection is gone).
        trial.finish(old.take().expect("just set"));
    }
    if trial.fail_over() {
        let returned_at = trial.after_failover(old);
        let in_sync = trial.await_sync(returned_at);
        trial.settle_stop_and_check(in_sync);
    } else {
        trial.stop_nodes();
    }
    if !trial.record.passed() {
        trial.record.timings.total = started.elapsed();
        trial.record.report = Some(trial.report());
    }
    let Trial { rig, record, .. } = trial;
    let clock = Instant::now();
    drop(rig);
    record.timings.teardown = Some(clock.elapsed());
}

impl Trial<'_> {
    fn start_traffic(
        &self,
        node: usize,
        phase: Phase,
        first_sequence: u64,
        writes: Vec<Planned>,
    ) -> Traffic {
        let load_seed = self.plan.seed ^ first_sequence.rotate_left(32);
        let load = Load::start(
            self.load,
            &self.rig.nbd_socket(node),
            &self.rig.nbd_uri(node),
            self.rig.export_bytes(),
            load_seed,
        );
        let socket = self.rig.nbd_socket(node);
        let writer = Writer::spawn(WriterConfig {
            socket,
            trial_seed: self.plan.seed,
            first_sequence,
            phase,
            writes,
        });
        Traffic { writer, load }
    }

    /// Joins the writer (keeping what it issued) and stops the load.
    fn finish(&mut self, traffic: Traffic) {
        self.issued.extend(traffic.writer.join());
        let note = traffic.load.stop();
        self.record.notes.push(note);
    }

    /// Alice writes until she acknowledged the planned count; then the fault, at once.
    fn before_fault(&mut self) -> Traffic {
        let clock = Instant::now();
        let traffic = self.start_traffic(ALICE, Phase::BeforeFault, 1, self.plan.before.clone());
        let wanted = self.plan.acknowledged_before_fault;
        self.rig.wait_until(
            &format!("alice acknowledged {wanted} stamped writes"),
            WRITES_DEADLINE,
            || traffic.writer.acknowledged() >= wanted || traffic.writer.is_finished(),
        );
        if traffic.writer.acknowledged() < wanted {
            let issued = traffic.writer.join();
            let last = issued
                .last()
                .map(|write| format!("{:?}", write.outcome))
                .unwrap_or_default();
            panic!(
                "alice's stamped writer ended after {} acknowledged writes, before the fault: \
                 {last}",
                issued.len()
            );
        }
        match self.plan.fault {
            Fault::Kill => self.rig.kill(ALICE),
            Fault::Partition => self.rig.network().cut(ALICE),
        }
        traffic.writer.stop();
        self.record.timings.before = Some(clock.elapsed());
        traffic
    }

    /// Both survivors notice alice is gone; the chosen one is promoted. False (with a
    /// finding) when the promotion is refused past its deadline.
    fn fail_over(&mut self) -> bool {
        let clock = Instant::now();
        for node in [1, 2] {
            let what = format!("{} notices that alice is gone", NODE_NAMES[node]);
            self.rig.wait_until(&what, STATE_DEADLINE, || {
                self.rig.status(node).connection_state("alice") != "Connected"
            });
        }
        let survivor = self.plan.survivor;
        match promote(&self.rig, survivor) {
            Ok(refusals) if refusals.is_empty() => {}
            Ok(refusals) => {
                self.record.promotion_retries = refusals.iter().map(|(_, count)| count).sum();
                let listed: Vec<String> = refusals
                    .iter()
                    .map(|(text, count)| format!("{count}x {text}"))
                    .collect();
                let note = format!(
                    "the promotion of {} was retried: {}",
                    NODE_NAMES[survivor],
                    listed.join("; ")
                );
                self.record.notes.push(note);
            }
            Err(text) => {
                self.record.findings.push(Finding {
                    check: Check::Promotion,
                    text,
                });
                return false;
            }
        }
        self.record.timings.failover = Some(clock.elapsed());
        true
    }

    /// Stamped writes and load through the new Primary; alice returns before, during or after
    /// them. Returns when alice started to return.
    fn after_failover(&mut self, mut old: Option<Traffic>) -> Instant {
        let clock = Instant::now();
        let survivor = self.plan.survivor;
        let mut returned_at = None;
        if self.plan.alice_returns == Return::Before {
            returned_at = Some(Instant::now());
            self.return_alice(old.take());
        }
        let first_sequence = u64::try_from(self.plan.before.len()).expect("small") + 1;
        let traffic = self.start_traffic(
            survivor,
            Phase::AfterFailover,
            first_sequence,
            self.plan.after.clone(),
        );
        if self.plan.alice_returns == Return::During {
            let half = u64::try_from(self.plan.after.len() / 2).expect("small");
            self.rig.wait_until(
                "the new Primary acknowledged half its stamped writes",
                WRITES_DEADLINE,
                || traffic.writer.acknowledged() >= half || traffic.writer.is_finished(),
            );
            returned_at = Some(Instant::now());
            self.return_alice(old.take());
        }
        self.rig.wait_until(
            "the new Primary's stamped writer is done",
            WRITES_DEADLINE,
            || traffic.writer.is_finished(),
        );
        self.finish(traffic);
        self.record.timings.after = Some(clock.elapsed());
        for write in self
            .issued
            .iter()
            .filter(|write| write.phase == Phase::AfterFailover)
        {
            if write.outcome != Outcome::Acknowledged {
                let text = format!(
                    "stamped write #{} at offset {} through the new Primary {}: {:?}",
                    write.sequence, write.offset, NODE_NAMES[survivor], write.outcome
                );
                self.record.findings.push(Finding {
                    check: Check::NewPrimaryWrite,
                    text,
                });
            }
        }
        returned_at.unwrap_or_else(|| {
            let now = Instant::now();
            self.return_alice(old.take());
            now
        })
    }

    /// Alice comes back: restarted after a kill; after a partition, her traffic is joined,
    /// she is demoted (her export closed) and her port healed.
    fn return_alice(&mut self, old: Option<Traffic>) {
        match self.plan.fault {
            Fault::Kill => self.rig.start_node(ALICE),
            Fault::Partition => {
                if let Some(traffic) = old {
                    self.finish(traffic);
                }
                self.rig
                    .wait_until("alice's export is closed", STATE_DEADLINE, || {
                        !self.rig.status(ALICE).open()
                    });
                if !self
                    .rig
                    .admin(ALICE, &["secondary", RESOURCE])
                    .status
                    .success()
                {
                    self.rig
                        .admin_ok(ALICE, &["secondary", "--force", RESOURCE]);
                }
                self.rig.network().heal(ALICE);
            }
        }
    }

    /// Polls until every node is Connected/UpToDate everywhere; a StandAlone connection, a
    /// dead node or the deadline ends the wait with a finding. True when in sync.
    fn await_sync(&mut self, returned_at: Instant) -> bool {
        let outcome = loop {
            let dead: Vec<&str> = (0..3)
                .filter(|node| !self.rig.is_alive(*node))
                .map(|node| NODE_NAMES[node])
                .collect();
            if !dead.is_empty() {
                break Err(Finding {
                    check: Check::NodeDied,
                    text: format!("{} exited without being asked", dead.join(", ")),
                });
            }
            let views: Vec<Option<View>> = (0..3).map(|node| view(&self.rig, node)).collect();
            let standalone = standalone_connections(&views);
            if !standalone.is_empty() {
                break Err(Finding {
                    check: Check::StandAlone,
                    text: standalone.join("; "),
                });
            }
            if views
                .iter()
                .all(|view| view.as_ref().is_some_and(View::in_sync))
            {
                break Ok(());
            }
            if returned_at.elapsed() > SYNC_DEADLINE {
                let states = views
                    .iter()
                    .enumerate()
                    .map(|(node, view)| describe_view(node, view.as_ref()))
                    .collect::<Vec<_>>()
                    .join("; ");
                break Err(Finding {
                    check: Check::NotInSync,
                    text: format!(
                        "not every node Connected/UpToDate {SYNC_DEADLINE:?} after alice \
                         returned: {states}"
                    ),
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        self.record.timings.sync = Some(returned_at.elapsed());
        match outcome {
            Ok(()) => true,
            Err(finding) => {
                self.record.findings.push(finding);
                false
            }
        }
    }

    /// Waits (bounded) for in-sync replicas to be identical on disk, stops every node, then
    /// checks the stamps and compares the replicas that were in sync with the new Primary.
    fn settle_stop_and_check(&mut self, in_sync: bool) {
        let clock = Instant::now();
        let primary = self.plan.survivor;
        let checked: Vec<usize> = if in_sync {
            vec![0, 1, 2]
        } else {
            self.nodes_in_sync_with(primary)
        };
        for node in (0..3).filter(|node| !checked.contains(node)) {
            self.record.notes.push(format!(
                "{} not checked: it never got in sync with the new Primary",
                NODE_NAMES[node]
            ));
        }
        if in_sync {
            let deadline = Instant::now() + SETTLE_DEADLINE;
            let differ =
                |node: &usize| *node != primary && self.differing_blocks(primary, *node).0 > 0;
            while Instant::now() < deadline && checked.iter().any(differ) {
                std::thread::sleep(SETTLE_POLL_INTERVAL);
            }
        }
        self.stop_nodes();
        let ledger = Ledger::new(std::mem::take(&mut self.issued));
        (self.record.acknowledged, self.record.acknowledged_fua) = ledger.acknowledged_counts();
        self.check_stamps(&ledger, &checked);
        self.compare_replicas(primary, &checked, &ledger);
        self.record.timings.check = Some(clock.elapsed());
    }

    /// The nodes the new Primary sees Established and UpToDate with nothing out of sync,
    /// and the Primary itself.
    fn nodes_in_sync_with(&self, primary: usize) -> Vec<usize> {
        let Some(primary_view) = view(&self.rig, primary) else {
            return vec![primary];
        };
        let mut nodes = vec![primary];
        for node in (0..3).filter(|node| *node != primary) {
            let seen_in_sync = primary_view
                .peers
                .iter()
                .any(|peer| peer.name == NODE_NAMES[node] && peer.in_sync());
            let own_disk = view(&self.rig, node).is_some_and(|view| view.disk == "UpToDate");
            if seen_in_sync && own_disk {
                nodes.push(node);
            }
        }
        nodes
    }

    /// Stops every running node (SIGKILL: what they wrote is in the page cache, which the
    /// checks read); the final statuses go into the report first.
    fn stop_nodes(&mut self) {
        let statuses: Vec<String> = (0..3).map(|node| final_status(&self.rig, node)).collect();
        self.record.notes.extend(statuses);
        for node in 0..3 {
            if self.rig.is_alive(node) {
                self.rig.kill(node);
            }
        }
    }

    fn check_stamps(&mut self, ledger: &Ledger, checked: &[usize]) {
        let mut lost_offsets = BTreeSet::new();
        for &node in checked {
            let mismatches = ledger.check(&read_region(&self.rig, node), self.plan.seed);
            let (lost, stray): (Vec<&Mismatch>, Vec<&Mismatch>) = mismatches
                .iter()
                .partition(|mismatch| mismatch.lost.is_some());
            lost_offsets.extend(lost.iter().map(|mismatch| mismatch.offset));
            for (check, list) in [(Check::LostWrite, lost), (Check::StrayBlock, stray)] {
                if !list.is_empty() {
                    let text = describe_mismatches(node, check, &list, ledger);
                    self.record.findings.push(Finding { check, text });
                }
            }
        }
        self.record.lost_writes = lost_offsets.len();
    }

    /// Compares every checked replica with the new Primary's; each differing block listed
    /// says what every node holds there.
    fn compare_replicas(&mut self, primary: usize, checked: &[usize], ledger: &Ledger) {
        for &node in checked.iter().filter(|node| **node != primary) {
            let (count, first) = self.differing_blocks(primary, node);
            if count == 0 {
                continue;
            }
            self.record.divergent_blocks = self.record.divergent_blocks.max(count);
            let listed: Vec<String> = first
                .iter()
                .map(|offset| self.describe_block(*offset, ledger))
                .collect();
            let text = format!(
                "{} and {} differ in {count} blocks of 4 KiB; first: {}",
                NODE_NAMES[primary],
                NODE_NAMES[node],
                listed.join("; ")
            );
            self.record.findings.push(Finding {
                check: Check::Divergent,
                text,
            });
        }
    }

    /// What each node's backing file holds in the block at `offset` (nodes are stopped).
    fn describe_block(&self, offset: u64, ledger: &Ledger) -> String {
        let held: Vec<String> = (0..3)
            .map(|node| {
                let mut bytes = vec![0u8; 4096];
                open(&self.rig, node)
                    .read_exact_at(&mut bytes, offset)
                    .expect("read a backing file");
                let found = stamp::decode(&bytes, self.plan.seed, offset);
                let what = match found {
                    Found::Stamp(sequence) => ledger.describe(sequence),
                    Found::Foreign if offset >= load::REGION_START => {
                        "background-load data".to_string()
                    }
                    other => other.to_string(),
                };
                format!("{} has {what}", NODE_NAMES[node])
            })
            .collect();
        let region = if offset >= load::REGION_START {
            "load region"
        } else {
            "stamped region"
        };
        format!(
            "block {} (offset {offset}, {region}): {}",
            offset / stamp::BLOCK_BYTES,
            held.join(", ")
        )
    }

    /// How many 4 KiB blocks of the export differ between two backing files, and the first
    /// few with what each side holds.
    fn differing_blocks(&self, a: usize, b: usize) -> (u64, Vec<u64>) {
        const CHUNK_BYTES: u64 = 1 << 20;
        let (file_a, file_b) = (open(&self.rig, a), open(&self.rig, b));
        let (mut chunk_a, mut chunk_b) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
        let (mut count, mut first) = (0u64, Vec::new());
        for start in (0..self.rig.export_bytes()).step_by(1 << 20) {
            let length =
                usize::try_from(CHUNK_BYTES.min(self.rig.export_bytes() - start)).expect("small");
            file_a
                .read_exact_at(&mut chunk_a[..length], start)
                .expect("read a backing file");
            file_b
                .read_exact_at(&mut chunk_b[..length], start)
                .expect("read a backing file");
            for (index, (block_a, block_b)) in chunk_a[..length]
                .chunks(4096)
                .zip(chunk_b[..length].chunks(4096))
                .enumerate()
            {
                if block_a != block_b {
                    count += 1;
                    let offset = start + u64::try_from(index).expect("small") * 4096;
                    if first.len() < LISTED_MAX {
                        first.push(offset);
                    }
                }
            }
        }
        (count, first)
    }

    /// The failure report: plan, findings, notes, timings, replay line, log tails.
    fn report(&self) -> String {
        let mut report = header(self.record);
        for (index, name) in NODE_NAMES.iter().enumerate() {
            let log = self.rig.log(index);
            let lines: Vec<&str> = log.lines().collect();
            let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
            let _ = writeln!(
                report,
                "---- {name} log (last {} of {} lines) ----",
                lines.len() - skip,
                lines.len()
            );
            for line in &lines[skip..] {
                let _ = writeln!(report, "{line}");
            }
        }
        report
    }
}

/// The head of a failure report (no logs).
fn header(record: &Record) -> String {
    let mut text = String::new();
    let plan = &record.plan;
    let _ = writeln!(
        text,
        "==== torture trial {} FAILED: seed {} ====",
        record.number, plan.seed
    );
    let _ = writeln!(
        text,
        "plan: {}; background load: {}",
        plan.describe(),
        record.load.name()
    );
    let _ = writeln!(text, "findings:");
    for finding in &record.findings {
        let _ = writeln!(text, "- [{}] {}", finding.check.name(), finding.text);
    }
    let _ = writeln!(
        text,
        "acknowledged stamped writes: {} ({} with FUA)",
        record.acknowledged, record.acknowledged_fua
    );
    let _ = writeln!(text, "timings: {}", describe_timings(&record.timings));
    for note in &record.notes {
        let _ = writeln!(text, "note: {note}");
    }
    let _ = writeln!(
        text,
        "replay: TANDEM_TORTURE_SEED={} TANDEM_TORTURE_TRIALS=1 TANDEM_TORTURE_FAULTS={} cargo \
         test -p systest --test it torture:: -- --include-ignored --nocapture",
        plan.seed,
        plan.fault.name()
    );
    text
}

pub fn describe_timings(timings: &Timings) -> String {
    let seconds = |duration: Option<Duration>| {
        duration.map_or_else(
            || "-".to_string(),
            |duration| format!("{:.1}s", duration.as_secs_f64()),
        )
    };
    format!(
        "setup {}, before {}, failover {}, after {}, sync {}, check {}, teardown {}, total {:.1}s",
        seconds(timings.setup),
        seconds(timings.before),
        seconds(timings.failover),
        seconds(timings.after),
        seconds(timings.sync),
        seconds(timings.check),
        seconds(timings.teardown),
        timings.total.as_secs_f64()
    )
}

/// `tandem primary` on `node`, retried while the refusal is one that passes (quorum being
/// confirmed, a handshake or resync in progress, the disk Inconsistent while the survivors
/// resync the lost Primary's last writes); then waits until it reports Primary. Returns the
/// refusals it retried through, each once with its count.
fn promote(cluster: &Cluster, node: usize) -> Result<Vec<(String, usize)>, String> {
    const PASSING: [&str; 4] = [
        "confirming quorum",
        "no quorum",
        "in progress",
        "is Inconsistent",
    ];
    let start = Instant::now();
    let mut refusals: Vec<(String, usize)> = Vec::new();
    loop {
        let output = cluster.admin(node, &["primary", RESOURCE]);
        if output.status.success() {
            break;
        }
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
        if !PASSING.iter().any(|passing| stderr.contains(passing))
            || start.elapsed() > PROMOTE_DEADLINE
        {
            return Err(format!(
                "'tandem primary' on {} refused after {:.1}s: {stderr}",
                NODE_NAMES[node],
                start.elapsed().as_secs_f64()
            ));
        }
        match refusals.iter_mut().find(|(text, _)| *text == stderr) {
            Some((_, count)) => *count += 1,
            None => refusals.push((stderr, 1)),
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    let what = format!("{} reports Primary", NODE_NAMES[node]);
    cluster.wait_until(&what, STATE_DEADLINE, || {
        cluster.status(node).role() == "Primary"
    });
    Ok(refusals)
}

/// One node's status as the sync wait needs it; missing fields read as "?".
#[derive(Debug)]
struct View {
    role: String,
    disk: String,
    peers: Vec<PeerView>,
}

#[derive(Debug)]
struct PeerView {
    name: String,
    connection: String,
    replication: String,
    peer_disk: String,
    out_of_sync_kib: u64,
    last_error: Option<String>,
}

impl View {
    fn in_sync(&self) -> bool {
        self.disk == "UpToDate" && self.peers.len() == 2 && self.peers.iter().all(PeerView::in_sync)
    }
}

impl PeerView {
    fn in_sync(&self) -> bool {
        self.connection == "Connected"
            && self.replication == "Established"
            && self.peer_disk == "UpToDate"
            && self.out_of_sync_kib == 0
    }
}

/// `status --json` of a node, read without panicking (None if it does not answer).
fn view(cluster: &Cluster, node: usize) -> Option<View> {
    let output = cluster.admin(node, &["status", "--json"]);
    let value: Value = serde_json::from_slice(&output.stdout).ok()?;
    let resource = value["resources"]
        .as_array()?
        .iter()
        .find(|resource| resource["name"] == RESOURCE)?;
    let text = |value: &Value| value.as_str().unwrap_or("?").to_string();
    let peers = resource["connections"]
        .as_array()?
        .iter()
        .map(|connection| {
            let device = &connection["peer_devices"][0];
            PeerView {
                name: text(&connection["name"]),
                connection: text(&connection["connection"]),
                replication: text(&device["replication"]),
                peer_disk: text(&device["peer_disk"]),
                out_of_sync_kib: device["out_of_sync_kib"].as_u64().unwrap_or(u64::MAX),
                last_error: connection["last_error"].as_str().map(str::to_string),
            }
        })
        .collect();
    Some(View {
        role: text(&resource["role"]),
        disk: text(&resource["devices"][0]["disk"]),
        peers,
    })
}

fn standalone_connections(views: &[Option<View>]) -> Vec<String> {
    let mut found = Vec::new();
    for (node, view) in views.iter().enumerate() {
        for peer in view
            .iter()
            .flat_map(|view| &view.peers)
            .filter(|peer| peer.connection == "StandAlone")
        {
            let why = peer.last_error.as_deref().unwrap_or("no last_error");
            found.push(format!(
                "{} is StandAlone towards {} ({why})",
                NODE_NAMES[node], peer.name
            ));
        }
    }
    found
}

fn describe_view(node: usize, view: Option<&View>) -> String {
    let Some(view) = view else {
        return format!("{} does not answer", NODE_NAMES[node]);
    };
    let peers: Vec<String> = view
        .peers
        .iter()
        .map(|peer| {
            format!(
                "{}:{}/{}/{} oos {} KiB",
                peer.name, peer.connection, peer.replication, peer.peer_disk, peer.out_of_sync_kib
            )
        })
        .collect();
    format!(
        "{} {} {} [{}]",
        NODE_NAMES[node],
        view.role,
        view.disk,
        peers.join(", ")
    )
}

fn final_status(cluster: &Cluster, node: usize) -> String {
    if !cluster.is_alive(node) {
        return format!("final status of {}: not running", NODE_NAMES[node]);
    }
    format!(
        "final status of {}: {}",
        NODE_NAMES[node],
        describe_view(node, view(cluster, node).as_ref())
    )
}

fn open(cluster: &Cluster, node: usize) -> File {
    File::open(cluster.disk(node))
        .unwrap_or_else(|error| panic!("cannot open {}: {error}", cluster.disk(node).display()))
}

/// The stamped region of a node's backing file (external metadata: the file is the data).
fn read_region(cluster: &Cluster, node: usize) -> Vec<u8> {
    let mut region = vec![0u8; usize::try_from(stamp::REGION_BYTES).expect("small")];
    open(cluster, node)
        .read_exact_at(&mut region, 0)
        .expect("read the stamped region");
    region
}

fn describe_mismatches(node: usize, check: Check, list: &[&Mismatch], ledger: &Ledger) -> String {
    let what = match check {
        Check::LostWrite => "lack their last acknowledged write",
        _ => "hold data no write explains",
    };
    let listed: Vec<String> = list
        .iter()
        .take(LISTED_MAX)
        .map(|mismatch| describe_mismatch(mismatch, ledger))
        .collect();
    format!(
        "{} blocks on {} {what}: {}",
        list.len(),
        NODE_NAMES[node],
        listed.join("; ")
    )
}

fn describe_mismatch(mismatch: &Mismatch, ledger: &Ledger) -> String {
    let expected = match &mismatch.lost {
        Some(write) => format!("expected {}", ledger.describe(write.sequence)),
        None => "expected zeros".to_string(),
    };
    let later = if mismatch.unacknowledged_after.is_empty() {
        String::new()
    } else {
        format!(" or unacknowledged #{:?}", mismatch.unacknowledged_after)
    };
    let found = match mismatch.found {
        Found::Stamp(sequence) => ledger.describe(sequence),
        other => other.to_string(),
    };
    format!(
        "block {} (offset {}): {expected}{later}, found {found}",
        mismatch.offset / stamp::BLOCK_BYTES,
        mismatch.offset
    )
}

/// A seed replays its plan, and every plan stays inside the harness's bounds: a survivor is
/// bob or carol, stamped writes are aligned blocks of the stamped region.
#[test]
fn a_seed_fixes_a_plan_within_bounds() {
    let faults = [Fault::Kill, Fault::Partition];
    for seed in 0..50 {
        let plan = Plan::from_seed(seed, &faults);
        assert_eq!(
            format!("{plan:?}"),
            format!("{:?}", Plan::from_seed(seed, &faults))
        );
        assert!(
            [1, 2].contains(&plan.survivor),
            "seed {seed}: survivor {}",
            plan.survivor
        );
        assert!(plan.acknowledged_before_fault < u64::try_from(plan.before.len()).expect("small"));
        for write in plan.before.iter().chain(&plan.after) {
            assert!(
                write.offset < stamp::REGION_BYTES
                    && write.offset.is_multiple_of(stamp::BLOCK_BYTES)
            );
        }
    }
    assert!(Plan::from_seed(1, &[Fault::Kill]).fault == Fault::Kill);
}
