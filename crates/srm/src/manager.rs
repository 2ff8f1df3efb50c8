//! The manager: per-peer state, and the one entry point [`Manager::observe`] that runs every
//! rule on one observation.
//!
//! Call protocol: the driver calls `observe` once per `srm-interval` with a fresh
//! [`Observation`], then applies the non-advisory decisions of the returned [`Outcome`] in
//! order before the next call, and logs every decision. The manager assumes each
//! non-advisory decision was applied; it never looks at a clock and keeps peers in a
//! `BTreeMap`, so the same sequence of observations always yields the same decisions.
//!
//! Invariants: a peer is switched to protocol A only in the same outcome as, and after, a
//! [`Action::MarkPossiblyStale`] for it; the mark is cleared only when the peer runs the
//! configured protocol again, is not Ahead, and has no unreplicated or out-of-sync bytes.

mod buffers;
mod congestion;
mod gain;
pub(crate) mod lag;
mod mtu;
mod protocol;
mod resync;
mod unwind;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{BufferSettings, Mode, Protocol, SrmConfig};
use crate::decision::{Action, Decision, Measurement, Outcome, Value};
use crate::error::SrmError;
use crate::observation::{Observation, PeerId, PeerObservation, SystemObservation, WritePattern};

/// The Selective Replication Manager of one resource.
#[derive(Clone, Debug)]
pub struct Manager {
    config: SrmConfig,
    /// What the driver runs: the state `on` mode decided and the driver applied.
    peers: BTreeMap<PeerId, PeerState>,
    /// What `advise` mode would have applied (never applied).
    shadow: BTreeMap<PeerId, PeerState>,
}

/// What the manager currently believes about one peer, for `tandem srm status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerStatus {
    /// The protocol the peer replicates with.
    pub protocol: Protocol,
    /// Whether the peer is marked possibly-stale.
    pub possibly_stale: bool,
    /// Whether the peer is Ahead (data not shipped, marked out of sync).
    pub ahead: bool,
    /// The buffer settings in force.
    pub buffers: BufferSettings,
    /// The resync cap last decided, if a resync runs.
    pub resync_cap_bytes_per_s: Option<u64>,
    /// The latest switch to protocol A: what it was predicted to gain and what it did.
    pub last_switch: Option<SwitchRecord>,
    /// Switches undone in a row for want of gain (the back-off exponent).
    pub undone_switches: u32,
    /// While backing off: no switch to protocol A before this time.
    pub async_not_before: Option<Duration>,
}

/// One switch to protocol A, for `tandem srm status` and the event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchRecord {
    /// When it was decided (the observation's time).
    pub at: Duration,
    /// The gain the model predicted (completion time sync / async), per mille.
    pub predicted_gain_permille: u32,
    /// The gain measured after the switch, per mille (`None` while still measuring).
    pub observed_gain_permille: Option<u32>,
    /// Where the switch stands.
    pub verdict: SwitchVerdict,
}

/// Whether a switch to protocol A earned its risk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchVerdict {
    /// Still measuring.
    Pending,
    /// The gain materialised: the peer stays async until the link recovers.
    Kept,
    /// It did not: the switch was undone and further switches back off.
    Undone,
}

impl std::fmt::Display for SwitchVerdict {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Self::Pending => "measuring",
            Self::Kept => "kept",
            Self::Undone => "undone",
        })
    }
}

/// Where a peer's replication protocol stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replication {
    /// The configured protocol; `since` is when it was last switched back (`None`: never left).
    Configured { since: Option<Duration> },
    /// Protocol A, chosen by the manager at `since`; `verifying` until its gain is judged.
    Async {
        since: Duration,
        verifying: Option<Verifying>,
    },
}

/// A switch to protocol A whose gain is being measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Verifying {
    /// Writes during the enter streak (before the switch).
    baseline: gain::Window,
    /// Writes since the switch, from the second interval on, intervals with writes only.
    after: gain::Window,
    /// Observations since the switch.
    observations: u32,
}

/// Congestion policy state (`on-congestion pull-ahead`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Congestion {
    /// Data is shipped. `left` is when Ahead was last left, `reentries` how many times in a
    /// row Ahead was re-entered soon after leaving it (the loop guard's back-off exponent).
    Shipping {
        left: Option<Duration>,
        reentries: u32,
    },
    /// Ahead since `since`; it is left no earlier than `since + hold`.
    Ahead {
        since: Duration,
        hold: Duration,
        reentries: u32,
    },
}

/// The write pattern the buffers are tuned for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    /// Large sequential writes: larger buffers.
    Streaming,
    /// Small writes: smaller buffers, lower latency.
    Latency,
}

#[derive(Clone, Debug)]
struct PeerState {
    replication: Replication,
    possibly_stale: bool,
    above_intervals: u32,
    below_intervals: u32,
    /// Writes of the current enter streak and the least gain predicted in it.
    streak: gain::Window,
    streak_gain_permille: u32,
    last_switch: Option<SwitchRecord>,
    undone_switches: u32,
    async_not_before: Option<Duration>,
    congestion: Congestion,
    capacity_peak_bytes_per_s: u64,
    resync_cap_bytes_per_s: Option<u64>,
    buffers: BufferSettings,
    profile: Option<(Profile, u32)>,
    buffers_changed_at: Option<Duration>,
    large_intervals: u32,
    mtu_advised: bool,
}

impl PeerState {
    fn new(config: &SrmConfig) -> Self {
        Self {
            replication: Replication::Configured { since: None },
            possibly_stale: false,
            above_intervals: 0,
            below_intervals: 0,
            streak: gain::Window::default(),
            streak_gain_permille: 0,
            last_switch: None,
            undone_switches: 0,
            async_not_before: None,
            congestion: Congestion::Shipping {
                left: None,
                reentries: 0,
            },
            capacity_peak_bytes_per_s: 0,
            resync_cap_bytes_per_s: None,
            buffers: config.buffer_bounds.clamp(config.buffers),
            profile: None,
            buffers_changed_at: None,
            large_intervals: 0,
            mtu_advised: false,
        }
    }

    fn protocol(&self, config: &SrmConfig) -> Protocol {
        match self.replication {
            Replication::Configured { .. } => config.protocol,
            Replication::Async { .. } => Protocol::A,
        }
    }

    fn status(&self, config: &SrmConfig) -> PeerStatus {
        PeerStatus {
            protocol: self.protocol(config),
            possibly_stale: self.possibly_stale,
            ahead: self.ahead(),
            buffers: self.buffers,
            resync_cap_bytes_per_s: self.resync_cap_bytes_per_s,
            last_switch: self.last_switch,
            undone_switches: self.undone_switches,
            async_not_before: self.async_not_before,
        }
    }

    fn ahead(&self) -> bool {
        matches!(self.congestion, Congestion::Ahead { .. })
    }

    /// Forgets the consecutive-interval counters (a disconnected peer starts afresh).
    fn forget_streaks(&mut self) {
        self.above_intervals = 0;
        self.below_intervals = 0;
        self.streak = gain::Window::default();
        self.profile = None;
        self.large_intervals = 0;
    }
}

/// What every rule reads.
struct Context<'a> {
    config: &'a SrmConfig,
    now: Duration,
    system: &'a SystemObservation,
    writes: &'a WritePattern,
    peer: &'a PeerObservation,
}

impl Context<'_> {
    fn decision(&self, action: Action, reason: String, measurements: Vec<Measurement>) -> Decision {
        Decision {
            peer: self.peer.peer,
            action,
            advisory: false,
            reason,
            measurements,
        }
    }

    /// True if at least `dwell` passed since `since` (`None`: nothing to wait for).
    fn dwelt(&self, since: Option<Duration>, dwell: Duration) -> bool {
        since.is_none_or(|since| self.now.saturating_sub(since) >= dwell)
    }
}

fn measure(name: &'static str, value: Value) -> Measurement {
    Measurement { name, value }
}

impl Manager {
    /// A manager for `config`, which must be consistent.
    pub fn new(config: SrmConfig) -> Result<Self, SrmError> {
        config.validate()?;
        Ok(Self {
            config,
            peers: BTreeMap::new(),
            shadow: BTreeMap::new(),
        })
    }

    /// The settings in force.
    pub fn config(&self) -> &SrmConfig {
        &self.config
    }

    /// What the driver runs for `peer` by the manager's decisions (`None` if the manager
    /// holds nothing for it).
    pub fn peer_status(&self, peer: PeerId) -> Option<PeerStatus> {
        self.peers
            .get(&peer)
            .map(|state| state.status(&self.config))
    }

    /// In `advise` mode: what `peer` would run if the advice were followed.
    pub fn advised_status(&self, peer: PeerId) -> Option<PeerStatus> {
        self.shadow
            .get(&peer)
            .map(|state| state.status(&self.config))
    }

    /// Replaces the settings (after `tandem adjust`), keeping what the manager knows and has
    /// applied. Turning the manager from `on` to `advise` or `off` makes the next
    /// observations undo what it applied (see [`Manager::observe`]).
    pub fn reconfigure(&mut self, config: SrmConfig) -> Result<(), SrmError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Runs every rule on `observation` and returns what to do, in order.
    ///
    /// In `on` mode the rules run on the applied state. In `advise` mode they run on a
    /// shadow state and every decision and gate they produce is advisory. In `advise` and
    /// `off` mode, whatever an earlier `on` period applied is undone first with
    /// non-advisory decisions: async peers return to the configured protocol, Ahead peers
    /// leave Ahead, tuned buffers return to the configured values, and possibly-stale marks
    /// are cleared once the peer caught up. A manager that never ran `on` produces nothing
    /// in `off` mode.
    pub fn observe(&mut self, observation: &Observation) -> Outcome {
        let mut outcome = Outcome::default();
        let config = &self.config;
        match config.mode {
            Mode::On => {
                self.shadow.clear();
                run(config, &mut self.peers, observation, &mut outcome);
            }
            Mode::Advise => {
                unwind::run(config, &mut self.peers, observation, &mut outcome.decisions);
                let mut advised = Outcome::default();
                run(config, &mut self.shadow, observation, &mut advised);
                advised
                    .decisions
                    .iter_mut()
                    .for_each(|decision| decision.advisory = true);
                advised
                    .gates
                    .iter_mut()
                    .for_each(|gate| gate.advisory = true);
                outcome.decisions.extend(advised.decisions);
                outcome.gates = advised.gates;
            }
            Mode::Off => {
                self.shadow.clear();
                unwind::run(config, &mut self.peers, observation, &mut outcome.decisions);
            }
        }
        outcome
    }
}

/// The observed peers in id order, each once.
fn peers_in_order(observation: &Observation) -> Vec<&PeerObservation> {
    let mut peers: Vec<&PeerObservation> = observation.peers.iter().collect();
    peers.sort_by_key(|peer| peer.peer);
    peers.dedup_by_key(|peer| peer.peer);
    peers
}

/// Runs every rule for every observed peer on `states`.
fn run(
    config: &SrmConfig,
    states: &mut BTreeMap<PeerId, PeerState>,
    observation: &Observation,
    outcome: &mut Outcome,
) {
    for peer in peers_in_order(observation) {
        let context = Context {
            config,
            now: observation.now,
            system: &observation.system,
            writes: &observation.writes,
            peer,
        };
        let state = states
            .entry(peer.peer)
            .or_insert_with(|| PeerState::new(config));
        if !peer.connected {
            state.forget_streaks();
            continue;
        }
        let before = outcome.decisions.len();
        protocol::step(state, &context, &mut outcome.decisions);
        congestion::step(state, &context, &mut outcome.decisions);
        resync::step(state, &context, &mut outcome.decisions);
        buffers::step(state, &context, &mut outcome.decisions);
        mtu::step(state, &context, &mut outcome.decisions);
        protocol::clear_mark(state, &context, &mut outcome.decisions);
        outcome.gates.push(lag::gate(state, &context));
        let added = outcome.decisions.get(before..).unwrap_or_default();
        debug_assert!(added.iter().all(|decision| decision.peer == peer.peer));
    }
}
