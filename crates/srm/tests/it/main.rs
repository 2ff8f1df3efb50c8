//! The manager on synthetic traces (issue 5, "Tests"): a latency step, a bandwidth
//! collapse, a flapping signal, CPU saturation, a slow local disk, the lag bound under
//! random traces, the pull-ahead loop guard (LINBIT/drbd issue 46), resync share, buffers,
//! MTU advice, the modes, and configuration validation.
//!
//! Every run goes through [`Run`], which also checks on every outcome that a switch to
//! protocol A or into Ahead is preceded by the possibly-stale mark (or the peer already
//! carries it).

mod gain;
mod traces;

use std::time::Duration;

use srm::{
    Action, Admit, Decision, Manager, Mode, Observation, PeerObservation, Protocol, SrmConfig,
    SystemObservation, WritePattern,
};

/// Seconds as a `Duration`.
fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// Milliseconds as a `Duration`.
fn millis(milliseconds: u64) -> Duration {
    Duration::from_millis(milliseconds)
}

/// The peer every trace talks about.
const PEER: u8 = 1;

/// The manager's settings with `mode` and otherwise the defaults, but a 1 s interval: the
/// traces step one observation per second.
fn config(mode: Mode) -> SrmConfig {
    SrmConfig {
        mode,
        interval: Duration::from_secs(1),
        ..SrmConfig::default()
    }
}

/// A healthy LAN peer: 0.3 ms RTT, 0.5 ms acks, a quiet send queue.
fn healthy_peer() -> PeerObservation {
    PeerObservation {
        peer: PEER,
        connected: true,
        rtt: Some(Duration::from_micros(300)),
        ack_latency_mean: Some(Duration::from_micros(500)),
        ack_latency_p99: Some(Duration::from_micros(900)),
        goodput_bytes_per_s: 40 << 20,
        send_queue_fill_permille: 50,
        ..PeerObservation::default()
    }
}

/// A healthy host: 30% busy, plenty of memory, 0.1 ms disk writes.
fn healthy_system() -> SystemObservation {
    SystemObservation {
        cpu_busy_permille: 300,
        cpu_count: 2,
        memory_available_permille: 600,
        local_write_latency: Duration::from_micros(100),
        ..SystemObservation::default()
    }
}

/// 4 KiB random writes at 10000 IOPS.
fn small_random_writes() -> WritePattern {
    let mut pattern = WritePattern {
        bytes_per_s: 10_000 * 4096,
        writes_per_s: 10_000,
        sequential_permille: 20,
        ..WritePattern::default()
    };
    pattern.size_histogram[0] = srm::SizeClass {
        writes: 10_000,
        bytes: 10_000 * 4096,
    };
    pattern
}

/// An observation at second `t` of one peer.
fn sample(t: u64, peer: PeerObservation) -> Observation {
    Observation {
        now: secs(t),
        system: healthy_system(),
        peers: vec![peer],
        writes: small_random_writes(),
    }
}

/// A manager under test with the decisions it made, stamped with the second they came at.
struct Run {
    manager: Manager,
    log: Vec<(u64, Decision)>,
}

impl Run {
    fn new(config: SrmConfig) -> Self {
        let manager = match Manager::new(config) {
            Ok(manager) => manager,
            Err(error) => panic!("the test configuration is valid: {error}"),
        };
        Self {
            manager,
            log: Vec::new(),
        }
    }

    /// Observes, checks the mark-before-switch order, logs and returns the outcome. Unless
    /// the trace sets it, the writes' completion time is what a client sees under the
    /// protocol in effect: the local write and, unless async, the peer's ack (see
    /// [`completion`]).
    fn step(&mut self, t: u64, observation: &Observation) -> srm::Outcome {
        let mut observation = observation.clone();
        if observation.writes.completion_latency_mean.is_none()
            && observation.writes.writes_per_s > 0
        {
            observation.writes.completion_latency_mean = completion(&observation, self.protocol());
        }
        let observation = &observation;
        let marked_before = self
            .manager
            .peer_status(PEER)
            .is_some_and(|status| status.possibly_stale);
        let outcome = self.manager.observe(observation);
        let mut marked = marked_before;
        for decision in &outcome.decisions {
            match decision.action {
                Action::MarkPossiblyStale => marked = true,
                Action::ClearPossiblyStale => marked = false,
                Action::SetProtocol(Protocol::A) | Action::EnterAhead => {
                    assert!(
                        marked,
                        "t={t}: {decision} without the possibly-stale mark first"
                    );
                }
                _ => {}
            }
            assert!(!decision.reason.is_empty(), "every decision has a reason");
        }
        self.log.extend(
            outcome
                .decisions
                .iter()
                .map(|decision| (t, decision.clone())),
        );
        outcome
    }

    /// Seconds at which the decisions matching `wanted` were made.
    fn times(&self, wanted: impl Fn(&Action) -> bool) -> Vec<u64> {
        self.log
            .iter()
            .filter(|(_, decision)| wanted(&decision.action))
            .map(|(t, _)| *t)
            .collect()
    }

    /// Seconds and protocols of every protocol switch.
    fn switches(&self) -> Vec<(u64, Protocol)> {
        self.log
            .iter()
            .filter_map(|(t, decision)| match decision.action {
                Action::SetProtocol(protocol) => Some((*t, protocol)),
                _ => None,
            })
            .collect()
    }

    fn protocol(&self) -> Protocol {
        self.manager
            .peer_status(PEER)
            .map_or(Protocol::C, |status| status.protocol)
    }
}

/// Mean completion time of [`PEER`]'s writes under `protocol`: the local write, and under a
/// synchronous protocol also the ack (they run in parallel).
fn completion(observation: &Observation, protocol: Protocol) -> Option<Duration> {
    let local = observation.system.local_write_latency;
    let peer = observation.peers.iter().find(|peer| peer.peer == PEER)?;
    let tcp_rtt = peer.tcp.map(|tcp| tcp.rtt);
    let ack = peer
        .ack_latency_mean
        .or(peer.rtt)
        .or(tcp_rtt)
        .unwrap_or_default();
    Some(match protocol {
        Protocol::A => local,
        Protocol::B | Protocol::C => local.max(ack),
    })
}

/// Admission budget of `outcome`'s gate for [`PEER`].
fn admit(outcome: &srm::Outcome) -> Option<Admit> {
    outcome
        .gates
        .iter()
        .find(|gate| gate.peer == PEER)
        .map(|gate| gate.admit)
}
