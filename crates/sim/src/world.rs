//! The simulated world: nodes, network, client and checkers, driven by one event queue
//! ordered by (time, sequence number), so a run is a pure function of its seed.
//!
//! Invariants:
//! - Time only moves forward, to the time of the next event; events at the same time run in
//!   the order they were scheduled.
//! - Every engine output is executed here as the daemon does (`repl` call protocol): local I/O
//!   on the simulated disk, metadata through the node's ordered metadata queue, messages on
//!   the right socket of the current connection, `peer_sent` when a data frame enters the
//!   socket.
//! - The first checker violation stops the run; the trace tail and seed replay it.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use repl::{
    Action, ConnState, DisconnectReason, DiskOp, Engine, IoError, IoId, Op, PeerMessage, Promotion,
    Role, Time, UuidsPurpose, WriteFlags,
};

use crate::check::{self, SessionWrite, Usage, Violation, WriteRecord};
use crate::disk::{SimDisk, BLOCK_BYTES};
use crate::metadata::{MetaJob, MetaSpec, PeerPages, SimMeta};
use crate::net::{Body, Chan, ChanKey, Frame, Network, FRAME_HEADER_BYTES};
use crate::node::Node;
use crate::rng::Rng;
use crate::trace::Trace;
use crate::{Payload, SimConfig, SimError};

/// The current generation every node starts with (in sync, UpToDate).
const SYNCED_UUID: u64 = 0x5eed_0000_0000_1000;
/// Blocks of the simulated volume (32 MiB: 8 activity-log extents).
pub const VOLUME_BLOCKS: u64 = 8192;
/// `al-extents` (fewer than the volume's extents, so extents get evicted).
const AL_EXTENTS: u32 = 7;
/// Client requests in flight at most.
pub const CLIENT_IN_FLIGHT_MAX: usize = 8;
/// Writes a named scenario submits at once, beyond the client's limit.
pub const SCRIPTED_WRITES_MAX: u64 = 20;
/// Blocks of the largest client write.
pub const WRITE_BLOCKS_MAX: u64 = 16;
const MS: u64 = 1_000_000;

/// A scheduled event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    /// Engine housekeeping of a node.
    Tick { node: u8, inc: u64 },
    /// A local I/O finishes.
    Io { node: u8, inc: u64, key: u64 },
    /// The next phase of a node's metadata queue.
    Meta { node: u8, inc: u64 },
    /// The front frame of a channel may be due.
    Deliver { key: ChanKey },
    /// A node notices that connection `conn` to `peer` died.
    Detect { node: u8, peer: u8, conn: u64 },
    /// The client may submit.
    Client,
    /// The next random fault.
    Fault,
    /// A fault ends.
    Heal(crate::faults::Heal),
    /// A crashed node boots.
    Restart { node: u8 },
    /// Connection attempts.
    Connect,
    /// Checkers and the administrator.
    Checkpoint,
    /// The administrator again, soon after a promotion that waits for its peers' answers
    /// (`tandem primary` waits for that round trip rather than for the next checkpoint).
    AdminRetry,
}

/// A client request in flight.
#[derive(Debug, Clone, Copy)]
struct Request {
    node: u8,
    write: Option<u64>,
    submitted: u64,
}

/// What one connection carried towards one receiver, for the epoch-prefix checker.
#[derive(Debug, Clone)]
struct Session {
    sender: u8,
    snapshot: Vec<u64>,
    writes: Vec<SessionWrite>,
    valid: bool,
}

/// Counters of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Events processed.
    pub steps: u64,
    /// Faults injected.
    pub faults: u64,
    /// Client writes acknowledged.
    pub writes_acked: u64,
    /// Node crashes.
    pub crashes: u64,
    /// Promotions.
    pub promotions: u64,
    /// Split brains detected.
    pub split_brains: u64,
    /// Quorum mode: promotions while the client's previous Primary still ran (cut off).
    pub failovers_from_live_primary: u64,
    /// Client writes completed with an error (e.g. held by a Primary without quorum, then
    /// failed by its forced demotion).
    pub writes_failed: u64,
    /// Quorum mode: graceful departures of a Secondary (`down`), each outdating it.
    pub departures: u64,
    /// Quorum mode: client writes acknowledged by a Primary that held quorum only because
    /// every absent peer had departed Outdated (last man standing).
    pub writes_by_last_man: u64,
    /// Acknowledged writes found lost by a double failure (`check::lost_by_double_failure`):
    /// a reported outcome outside what the protocol promises, not a violation.
    pub writes_lost_by_double_failure: u64,
    /// Acknowledged writes found missing where they were lost with their Primary's volatile
    /// cache (never made durable for the client: any disk may lose such a write at a power
    /// loss).
    pub writes_lost_unflushed: u64,
    /// Power losses of the whole cluster at once.
    pub cluster_power_losses: u64,
    /// Periods of a full data disk (writes fail with `IoError::NoSpace`).
    pub disks_full: u64,
    /// Replica comparisons that passed.
    pub identical_checks: u64,
    /// Epoch-prefix checks that passed.
    pub prefix_checks: u64,
}

/// The simulated cluster.
#[derive(Debug)]
pub struct Sim {
    /// The run's configuration.
    pub cfg: SimConfig,
    /// Simulated time.
    pub now: Time,
    /// The run's randomness.
    pub rng: Rng,
    queue: BTreeMap<(Time, u64), Ev>,
    next_event: u64,
    /// The nodes, indexed by id.
    pub nodes: Vec<Node>,
    /// The network.
    pub net: Network,
    next_conn: u64,
    /// Connections that broke (dropped, or a node crashed): nothing more travels on them.
    dead_conns: BTreeSet<u64>,
    next_key: u64,
    next_request: u64,
    sessions: BTreeMap<(u64, u8), Session>,
    prefix_pending: BTreeMap<u8, Session>,
    /// Connections whose goodbye arrived on one channel only, with the receiving node: the
    /// daemon ends a link once both of its sockets ended (what the peer sent on the other
    /// before its goodbye still reaches the engine).
    half_closed: std::collections::BTreeSet<(u64, u8)>,
    /// Every client write, by id − 1.
    pub writes: Vec<WriteRecord>,
    requests: BTreeMap<u64, Request>,
    /// Acknowledged writes the client was not yet told are durable (no FUA, no completed
    /// flush since): their Primary's power loss may lose them.
    volatile: Vec<u64>,
    /// `(Primary, incarnation, sequence number)` → (write id, epoch) of a replicated write.
    seq_map: BTreeMap<(u8, u64, u64), (u64, u64)>,
    /// Per peer: writes it confirmed and has not yet made durable as promised (its barrier
    /// acknowledgement covering them has not reached the Primary), as `(connection, epoch,
    /// write id)`. Its power loss loses them.
    peer_unflushed: BTreeMap<u8, Vec<(u64, u64, u64)>>,
    /// `(x, y)`: x holds writes y lacks, made by a Primary while not connected to y (x is that
    /// Primary, a peer connected to it, or a node since resynced from one of those).
    pub wrote_apart: BTreeSet<(u8, u8)>,
    /// An [`Ev::AdminRetry`] is scheduled.
    admin_retry_scheduled: bool,
    /// Pairs `(low, high)` whose split brain an engine reported.
    pub sb_detected: BTreeSet<(u8, u8)>,
    /// Pairs `(low, high)` whose latest stand-off an engine gave as an rr-conflict (a
    /// resync that would overwrite a Primary), not a split brain: what the administrator
    /// reads in the log before choosing how to resolve it.
    pub role_conflicts: BTreeSet<(u8, u8)>,
    /// Quorum mode: nodes the administrator took away gracefully (`down`) until their
    /// scheduled return; the administrator does not reconnect them meanwhile.
    pub away: BTreeSet<u8>,
    /// The node the client writes to.
    pub primary: Option<u8>,
    /// When the client's Primary was lost.
    pub primary_lost_at: Option<Time>,
    /// The administrator promotes nobody before this (a Primary stepped down for a resync).
    pub promotion_hold_until: Option<Time>,
    /// Quorum mode: since when each node has not reached the client's Primary (not
    /// connected to it, or it is down); cleared when the client's Primary changes.
    pub primary_unreachable_since: BTreeMap<u8, Time>,
    /// The administrator's history: when each node was last seen connected to the client's
    /// Primary (replicating its writes), forgotten when the node loses power (it may have
    /// lost in its cache what it got from that Primary).
    pub with_primary_at: BTreeMap<u8, Time>,
    /// The same history, kept across power losses: which side of a split brain followed the
    /// client's Primary last (a node that lost power since still holds that Primary's
    /// lineage, less what its cache lost; the other side, e.g. an old Primary the client
    /// left, never had it).
    pub last_with_primary_at: BTreeMap<u8, Time>,
    /// Counters.
    pub stats: Stats,
    /// The trace.
    pub trace: Trace,
    /// The first violation.
    pub failure: Option<Violation>,
    /// The client submits.
    pub workload_on: bool,
    /// Random faults are injected.
    pub faults_on: bool,
    /// Largest usage seen (memory checker).
    pub usage: Usage,
}

fn norm(a: u8, b: u8) -> (u8, u8) {
    (a.min(b), a.max(b))
}

impl Sim {
    /// A cluster as `cfg` says: every node UpToDate with the same generation, node 0 Primary.
    pub fn new(cfg: SimConfig) -> Result<Sim, SimError> {
        let mut nodes = Vec::new();
        for id in 0..cfg.nodes {
            let peers: Vec<u8> = (0..cfg.nodes).filter(|&p| p != id).collect();
            let spec = MetaSpec {
                data_bytes: VOLUME_BLOCKS * BLOCK_BYTES,
                node_id: id,
                peers,
                al_enabled: cfg.al_enabled,
                al_extents: AL_EXTENTS,
            };
            nodes.push(Node::new(
                id,
                SimDisk::new(VOLUME_BLOCKS),
                SimMeta::create(spec, SYNCED_UUID, true)?,
            ));
        }
        let trace_tail = cfg.trace_tail;
        let sockets_in_order = cfg.sockets_in_order;
        let mut sim = Sim {
            rng: Rng::new(cfg.seed),
            cfg,
            now: Time(0),
            queue: BTreeMap::new(),
            next_event: 0,
            nodes,
            net: Network {
                sockets_in_order,
                ..Network::default()
            },
            next_conn: 1,
            dead_conns: BTreeSet::new(),
            next_key: 1,
            next_request: 1,
            sessions: BTreeMap::new(),
            prefix_pending: BTreeMap::new(),
            half_closed: std::collections::BTreeSet::new(),
            writes: Vec::new(),
            requests: BTreeMap::new(),
            volatile: Vec::new(),
            seq_map: BTreeMap::new(),
            peer_unflushed: BTreeMap::new(),
            wrote_apart: BTreeSet::new(),
            admin_retry_scheduled: false,
            sb_detected: BTreeSet::new(),
            role_conflicts: BTreeSet::new(),
            away: BTreeSet::new(),
            primary: None,
            primary_lost_at: None,
            promotion_hold_until: None,
            primary_unreachable_since: BTreeMap::new(),
            with_primary_at: BTreeMap::new(),
            last_with_primary_at: BTreeMap::new(),
            stats: Stats::default(),
            trace: Trace::with_tail(trace_tail),
            failure: None,
            workload_on: true,
            faults_on: false,
            usage: Usage::default(),
        };
        for id in 0..sim.cfg.nodes {
            sim.boot(id)?;
        }
        sim.schedule(0, Ev::Connect);
        sim.schedule(0, Ev::Checkpoint);
        sim.schedule(MS, Ev::Client);
        Ok(sim)
    }

    /// Schedules `ev` `delay_ns` from now.
    pub fn schedule(&mut self, delay_ns: u64, ev: Ev) {
        let at = self.now.after(std::time::Duration::from_nanos(delay_ns));
        self.queue.insert((at, self.next_event), ev);
        self.next_event += 1;
    }

    /// Records a line in the trace.
    pub fn note(&mut self, line: impl FnOnce() -> String) {
        let now = self.now;
        self.trace.push(now, line());
    }

    /// Records a violation (the first one stops the run).
    pub fn fail(&mut self, violation: Violation) {
        if self.failure.is_none() {
            self.note(|| format!("VIOLATION {violation}"));
            self.failure = Some(violation);
        }
    }

    fn check(&mut self, result: Result<(), Violation>) {
        if let Err(violation) = result {
            self.fail(violation);
        }
    }

    /// Runs events until `until`, a failure, or `stop` holds. Returns false if the queue ran
    /// dry.
    pub fn run_until(&mut self, until: Time, mut stop: impl FnMut(&Sim) -> bool) -> bool {
        while self.failure.is_none() && !stop(self) {
            let Some((&(at, _), _)) = self.queue.first_key_value() else {
                return false;
            };
            if at > until {
                self.now = until;
                return true;
            }
            let Some(((at, _), ev)) = self.queue.pop_first() else {
                return false;
            };
            self.now = at;
            self.stats.steps += 1;
            self.handle(ev);
        }
        true
    }

    fn handle(&mut self, ev: Ev) {
        if !matches!(
            ev,
            Ev::Checkpoint
                | Ev::Tick { .. }
                | Ev::Connect
                | Ev::Client
                | Ev::Deliver { .. }
                | Ev::Io { .. }
                | Ev::Meta { .. }
        ) {
            self.note(|| format!("{ev:?}"));
        }
        match ev {
            Ev::Tick { node, inc } => self.on_tick(node, inc),
            Ev::Io { node, inc, key } => self.on_io(node, inc, key),
            Ev::Meta { node, inc } => self.on_meta(node, inc),
            Ev::Deliver { key } => self.on_deliver(key),
            Ev::Detect { node, peer, conn } => {
                if self.nodes[usize::from(node)].conns.get(&peer) == Some(&conn) {
                    self.disconnect_local(node, peer, ConnState::BrokenPipe, "connection reset");
                }
            }
            Ev::Client => self.on_client(),
            Ev::Fault => crate::faults::inject(self),
            Ev::Heal(heal) => crate::faults::heal(self, heal),
            Ev::Restart { node } => self.restart(node),
            Ev::Connect => self.on_connect(),
            Ev::Checkpoint => self.on_checkpoint(),
            Ev::AdminRetry => {
                self.admin_retry_scheduled = false;
                crate::faults::admin(self);
            }
        }
    }

    // ----- engine calls and routing ------------------------------------------------------

    /// Calls the engine of `node` (if running) and executes what it returns.
    pub fn with_engine(
        &mut self,
        node: u8,
        f: impl FnOnce(&mut Engine<Payload>, Time, &mut Vec<Action<Payload>>),
    ) {
        let now = self.now;
        let mut out = Vec::new();
        let Some(engine) = self.nodes[usize::from(node)].engine.as_mut() else {
            return;
        };
        f(engine, now, &mut out);
        self.route(node, out);
    }

    fn route(&mut self, n: u8, actions: Vec<Action<Payload>>) {
        for action in actions {
            match action {
                Action::LocalWrite { .. }
                | Action::LocalFlush { .. }
                | Action::LocalRead { .. }
                | Action::LocalDigest { .. } => self.start_io(n, action),
                Action::PersistMeta { io, volume, meta } => self.persist_meta(n, io, volume, meta),
                Action::WriteActivityLog {
                    io,
                    offset_bytes,
                    block,
                    bitmap_pages,
                    evicts,
                    ..
                } => {
                    self.queue_meta(
                        n,
                        MetaJob::ActivityLog {
                            pages: bitmap_pages,
                            offset_bytes,
                            block,
                            io,
                            evicts,
                        },
                    );
                }
                Action::SendData {
                    peer,
                    seq,
                    epoch,
                    volume,
                    op,
                } => self.send_data(n, peer, seq, epoch, volume, op),
                Action::SendBarrier { peer, epoch, flush } => self.send_frame(
                    n,
                    peer,
                    Chan::Data,
                    Body::Msg(PeerMessage::Barrier { epoch, flush }),
                    None,
                ),
                Action::SendControl { peer, message } => {
                    self.send_frame(n, peer, Chan::Control, Body::Msg(message), None)
                }
                Action::SendOnData { peer, message } => self.send_on_data(n, peer, message),
                Action::SplitBrain {
                    peer,
                    resolution,
                    detail,
                    ..
                } => self.split_brain_detected(n, peer, resolution, &detail),
                // The simulated nodes set no `fencing`, so no fence-peer run is ever asked for.
                Action::VerifyFound { .. }
                | Action::VerifyFinished { .. }
                | Action::FencePeer { .. } => {}
                // The simulated nodes never start a resize, so no peer asks for one.
                Action::ResizeOffer { .. } | Action::Grow { .. } => {}
                // The simulator never sets a detaching `on-io-error` (the engine's default is
                // pass_on), so no volume is detached.
                Action::Detached { volume, .. } => {
                    self.note(|| format!("node {n}: volume {volume} detached"))
                }
                Action::ReadDone { .. } => {}
                Action::Disconnect {
                    peer,
                    state,
                    reason,
                } => self.engine_dropped_peer(n, peer, state, reason),
                Action::Complete { request, result } => self.on_complete(request, result),
                Action::StateChanged => {
                    self.write_back_pages(n);
                    // What `tandem events` shows the administrator as it happens.
                    crate::faults::note_primary_partition(self);
                }
            }
        }
    }

    /// Queues node `n`'s [`Action::PersistMeta`] with the bitmap pages it dirtied.
    fn persist_meta(&mut self, n: u8, io: IoId, volume: u16, meta: Box<repl::VolumeMeta>) {
        let (pages, clears) = self.take_pages(n, volume);
        self.queue_meta(
            n,
            MetaJob::Persist {
                pages,
                meta: Some(meta),
                io: Some(io),
                clears,
            },
        );
    }

    /// Sends a message on the data channel; a `ResyncDone` also finishes the resync here.
    fn send_on_data(&mut self, n: u8, peer: u8, message: PeerMessage<Payload>) {
        if matches!(message, PeerMessage::ResyncDone { .. }) {
            self.resync_finished(
                n,
                peer,
                matches!(
                    message,
                    PeerMessage::ResyncDone {
                        failed_bytes: 0,
                        ..
                    }
                ),
            );
        }
        self.send_frame(n, peer, Chan::Data, Body::Msg(message), None);
    }

    /// Node `n` detected a split brain with `peer`.
    fn split_brain_detected(
        &mut self,
        n: u8,
        peer: u8,
        resolution: repl::Resolution,
        detail: &str,
    ) {
        self.stats.split_brains += 1;
        self.sb_detected.insert(norm(n, peer));
        self.role_conflicts.remove(&norm(n, peer));
        self.note(|| format!("node {n}: split brain with {peer}: {resolution:?} ({detail})"));
    }

    /// Node `n` drops `peer`: both sockets end after what was queued on them.
    fn engine_dropped_peer(&mut self, n: u8, peer: u8, state: ConnState, reason: DisconnectReason) {
        self.note(|| format!("node {n} drops {peer} ({state}): {reason}"));
        // The rr-conflict refusal is a policy reason, still text (`repl::DisconnectReason`).
        if matches!(&reason, DisconnectReason::Policy(text) if text.starts_with("rr-conflict")) {
            self.role_conflicts.insert(norm(n, peer));
        }
        if let Some(conn) = self.nodes[usize::from(n)].conns.remove(&peer) {
            // As the daemon does: both sockets end after what was queued on them.
            self.send_on(n, peer, conn, Chan::Data, Body::Close, None);
            self.send_on(n, peer, conn, Chan::Control, Body::Close, None);
            self.end_session(conn, n);
        }
    }

    /// Target `n` finished a resync from `source`: it now holds the source's data, losses
    /// included; with nothing failed, the pair's divergence is resolved, and towards a third
    /// node `n` stands where `source` did: it lacks the third node's writes exactly when
    /// `source` did (with three nodes, a Primary's writes reach a node it was apart from
    /// through the other one), and its own writes made apart from the third node are gone.
    fn resync_finished(&mut self, n: u8, source: u8, complete: bool) {
        for w in self.writes.iter_mut() {
            if w.lost_on.contains(&source) {
                w.lost_on.insert(n);
            }
            if w.power_lost_on.contains(&source) {
                w.power_lost_on.insert(n);
            }
        }
        if self.cfg.protocol != repl::Protocol::C {
            // Under protocols A and B a write is acknowledged before every peer wrote it: an
            // UpToDate source may legitimately lack one that was in flight to it when its
            // Primary failed, and `n` (which may have confirmed it while it was a sync
            // target itself) now holds the source's data, without it (seeds 4915, 6805).
            for w in self
                .writes
                .iter_mut()
                .filter(|w| w.node != source && !w.acked_by.contains(&source))
            {
                w.lost_on.insert(n);
            }
        }
        if complete {
            self.wrote_apart.remove(&(n, source));
            self.wrote_apart.remove(&(source, n));
            self.sb_detected.remove(&norm(n, source));
            self.role_conflicts.remove(&norm(n, source));
            // `n` now carries the source's data: a third node's writes it lacks are those the
            // source lacked, and the writes it holds that the third node lacks are the
            // source's (its own diverged ones were overwritten by the resync).
            for x in (0..self.cfg.nodes).filter(|&x| x != n && x != source) {
                for (from, to) in [((x, source), (x, n)), ((source, x), (n, x))] {
                    if self.wrote_apart.contains(&from) {
                        self.wrote_apart.insert(to);
                    } else {
                        self.wrote_apart.remove(&to);
                    }
                }
            }
        }
    }

    /// Every peer's dirty bitmap pages of `volume`, and whether a bit was cleared in one.
    fn take_pages(&mut self, n: u8, volume: u16) -> (PeerPages, bool) {
        let peers: Vec<u8> = (0..self.cfg.nodes).filter(|&p| p != n).collect();
        let Some(engine) = self.nodes[usize::from(n)].engine.as_mut() else {
            return (Vec::new(), false);
        };
        let mut clears = false;
        let pages = peers
            .into_iter()
            .map(|p| {
                let taken = engine.take_dirty_bitmap_pages(volume, p);
                clears |= taken.clears;
                (p, taken.pages)
            })
            .collect();
        (pages, clears)
    }

    /// The daemon's bitmap write-back (periodic, and on a state change): volume 0's dirty
    /// pages, if any.
    fn write_back_pages(&mut self, n: u8) {
        let (pages, clears) = self.take_pages(n, 0);
        if pages.iter().any(|(_, p)| !p.is_empty()) {
            self.queue_meta(
                n,
                MetaJob::Persist {
                    pages,
                    meta: None,
                    io: None,
                    clears,
                },
            );
        }
    }

    fn queue_meta(&mut self, n: u8, job: MetaJob) {
        let node = &mut self.nodes[usize::from(n)];
        node.meta.push(job);
        if !node.meta_scheduled {
            node.meta_scheduled = true;
            let inc = node.inc;
            let delay = self.rng.range(50_000, 2 * MS);
            self.schedule(delay, Ev::Meta { node: n, inc });
        }
    }

    fn on_meta(&mut self, n: u8, inc: u64) {
        let node = &mut self.nodes[usize::from(n)];
        if node.inc != inc || !node.alive() {
            return;
        }
        node.meta_scheduled = false;
        // Data before metadata: internal metadata lives in the data file, whose fdatasync
        // flushes the data too; with external metadata the driver syncs the data disk before
        // every metadata write that may evict an extent, clear a bit or change the superblock
        // (daemon:
        // `MetaJob::needs_data_sync`, `MetaFile::sync_backing`).
        if self.cfg.internal_metadata || node.meta.head_needs_data_sync() {
            node.disk.sync_all();
        }
        match node.meta.step() {
            Err(error) => self.fail(Violation {
                checker: "metadata",
                detail: error.to_string(),
            }),
            Ok(done) => {
                if let Some(Some(io)) = done {
                    self.with_engine(n, |e, now, out| e.local_done(now, io, Ok(()), out));
                }
                let node = &mut self.nodes[usize::from(n)];
                if node.meta.busy() && !node.meta_scheduled {
                    node.meta_scheduled = true;
                    let delay = self.rng.range(50_000, 2 * MS);
                    self.schedule(delay, Ev::Meta { node: n, inc });
                }
            }
        }
    }

    // ----- local I/O ---------------------------------------------------------------------

    fn start_io(&mut self, n: u8, action: Action<Payload>) {
        let key = self.next_key;
        self.next_key += 1;
        if self.cfg.trace_io {
            let text = format!("{action:?}");
            self.note(|| {
                format!(
                    "node {n} io start: {}",
                    text.chars().take(160).collect::<String>()
                )
            });
        }
        let node = &mut self.nodes[usize::from(n)];
        match &action {
            Action::LocalWrite { op, .. } => {
                let (first, tags) = op_tags(op);
                let needs_space = !matches!(op, DiskOp::Trim { .. });
                node.disk.start_write(key, first, tags, needs_space);
            }
            Action::LocalFlush { .. } => node.disk.start_flush(key),
            _ => {}
        }
        node.pending.insert(key, action);
        let inc = node.inc;
        let delay = self.rng.range(20_000, 3 * MS);
        self.schedule(delay, Ev::Io { node: n, inc, key });
    }

    fn on_io(&mut self, n: u8, inc: u64, key: u64) {
        let node = &mut self.nodes[usize::from(n)];
        if node.inc != inc {
            return;
        }
        let Some(action) = node.pending.remove(&key) else {
            return;
        };
        if self.cfg.trace_io {
            let text = format!("{action:?}");
            self.note(|| {
                format!(
                    "node {n} io done: {}",
                    text.chars().take(160).collect::<String>()
                )
            });
        }
        let peer_io = matches!(
            &action,
            Action::LocalWrite {
                io: IoId::PeerWrite { .. } | IoId::ResyncWrite { .. },
                ..
            } | Action::LocalFlush {
                io: IoId::PeerFlush { .. } | IoId::PeerGroupFlush { .. }
            }
        );
        self.complete_io(n, key, action);
        if peer_io {
            self.run_prefix_check(n);
        }
    }

    fn complete_io(&mut self, n: u8, key: u64, action: Action<Payload>) {
        let node = &mut self.nodes[usize::from(n)];
        match action {
            Action::LocalWrite { io, op, .. } => {
                let peer_write = matches!(io, IoId::PeerWrite { .. });
                let durable_anyway = peer_write && self.cfg.durable_peer_writes;
                let fua = durable_anyway
                    || matches!(
                        op,
                        DiskOp::Write { fua: true, .. }
                            | DiskOp::Trim { fua: true, .. }
                            | DiskOp::WriteZeroes { fua: true, .. }
                    );
                let node = &mut self.nodes[usize::from(n)];
                let result = node.disk.finish_write(key, fua);
                let failed = result.is_err();
                self.with_engine(n, |e, now, out| e.local_done(now, io, result, out));
                if failed {
                    self.forget_holdings_of_failed_disk(n);
                }
            }
            Action::LocalFlush { io } => {
                node.disk.finish_flush(key);
                self.with_engine(n, |e, now, out| e.local_done(now, io, Ok(()), out));
            }
            Action::LocalRead {
                io, offset, length, ..
            } => {
                let result = node
                    .disk
                    .read(offset / BLOCK_BYTES, length / BLOCK_BYTES)
                    .map(Rc::from);
                self.with_engine(n, |e, now, out| e.local_read_done(now, io, result, out));
            }
            Action::LocalDigest {
                io,
                offset,
                length,
                block_bytes,
                ..
            } => {
                let result = node
                    .disk
                    .read(offset / BLOCK_BYTES, length / BLOCK_BYTES)
                    .map(|tags| digests(&tags, block_bytes));
                self.with_engine(n, |e, now, out| e.local_digest_done(now, io, result, out));
            }
            _ => {}
        }
    }

    /// A write failed on `n`'s disk: if that made it Inconsistent (`on-io-error pass_on`),
    /// its copy is no one's data any more, and it no longer holds writes its peers lack. The
    /// Primary that made them still does (or they are lost with it, which the loss checks
    /// judge); a resync into `n` overwrites nothing a split brain must decide (seed 2265:
    /// a Secondary of a Primary cut off from the old one ran out of space, then was resynced
    /// in full from the old Primary).
    fn forget_holdings_of_failed_disk(&mut self, n: u8) {
        let inconsistent = self.nodes[usize::from(n)]
            .engine
            .as_ref()
            .and_then(|e| e.meta(0))
            .is_some_and(|m| m.disk == repl::DiskState::Inconsistent);
        if inconsistent {
            self.wrote_apart.retain(|&(holder, _)| holder != n);
        }
    }

    // ----- network -----------------------------------------------------------------------

    fn send_data(
        &mut self,
        n: u8,
        peer: u8,
        seq: u64,
        epoch: u64,
        volume: u16,
        op: DiskOp<Payload>,
    ) {
        let (first, tags) = op_tags(&op);
        let write = tags.first().map_or(0, |&t| check::write_of(t));
        let inc = self.nodes[usize::from(n)].inc;
        self.seq_map.insert((n, inc, seq), (write, epoch));
        if let Some(&conn) = self.nodes[usize::from(n)].conns.get(&peer) {
            if let Some(session) = self.sessions.get_mut(&(conn, peer)) {
                let count = u64::try_from(tags.len()).unwrap_or(0);
                session.writes.push(SessionWrite {
                    epoch,
                    id: write,
                    first,
                    count,
                });
            }
        }
        let offset = first * BLOCK_BYTES;
        let message = PeerMessage::Data {
            seq,
            epoch,
            volume,
            offset,
            op,
        };
        self.send_frame(n, peer, Chan::Data, Body::Msg(message), Some(seq));
    }

    fn send_frame(&mut self, n: u8, peer: u8, chan: Chan, body: Body, data_seq: Option<u64>) {
        // Like the daemon: a message for a peer without a link is dropped.
        let Some(&conn) = self.nodes[usize::from(n)].conns.get(&peer) else {
            return;
        };
        self.send_on(n, peer, conn, chan, body, data_seq);
    }

    fn send_on(
        &mut self,
        n: u8,
        peer: u8,
        conn: u64,
        chan: Chan,
        body: Body,
        data_seq: Option<u64>,
    ) {
        if self.dead_conns.contains(&conn) {
            // The socket is broken: the write fails and the frame is lost.
            return;
        }
        let bytes = FRAME_HEADER_BYTES + frame_payload_bytes(&body);
        let frame = Frame {
            conn,
            at: Time(0),
            body,
            bytes,
            data_seq,
        };
        let delay = self.net_delay();
        let key = (n, peer, chan);
        if let Some((at, seq)) = self.net.send(key, frame, self.now, delay) {
            self.schedule(at.0 - self.now.0, Ev::Deliver { key });
            if let Some(seq) = seq {
                self.with_engine(n, |e, now, out| e.peer_sent(now, peer, seq, out));
            }
        }
    }

    fn net_delay(&mut self) -> u64 {
        let base = self.rng.range(50_000, 500_000);
        if self.rng.chance(5) {
            base + self.rng.range(MS, 20 * MS)
        } else {
            base
        }
    }

    fn on_deliver(&mut self, key: ChanKey) {
        let Some(frame) = self.net.take_due(key, self.now) else {
            return;
        };
        let delay = self.net_delay();
        for (at, seq, conn) in self.net.refill(key, self.now, delay) {
            self.schedule(at.0.saturating_sub(self.now.0), Ev::Deliver { key });
            let (from, to, _) = key;
            if let (Some(seq), Some(&current)) = (seq, self.nodes[usize::from(from)].conns.get(&to))
            {
                if current == conn {
                    self.with_engine(from, |e, now, out| e.peer_sent(now, to, seq, out));
                }
            }
        }
        self.receive(key.0, key.1, frame);
    }

    fn receive(&mut self, from: u8, to: u8, frame: Frame) {
        if self.nodes[usize::from(to)].conns.get(&from) != Some(&frame.conn) {
            return;
        }
        let message = match frame.body {
            Body::Close => {
                if self.half_closed.remove(&(frame.conn, to)) {
                    self.disconnect_local(
                        to,
                        from,
                        ConnState::NetworkFailure,
                        "peer closed the connection",
                    );
                } else {
                    self.half_closed.insert((frame.conn, to));
                }
                return;
            }
            Body::Msg(message) => message,
        };
        self.observe(from, to, frame.conn, &message);
        self.note(|| format!("{from}->{to} {}", describe(&message)));
        self.with_engine(to, |e, now, out| e.peer_message(now, from, message, out));
    }

    /// Bookkeeping of the checkers on a delivered message.
    fn observe(&mut self, from: u8, to: u8, conn: u64, message: &PeerMessage<Payload>) {
        match message {
            PeerMessage::WriteAck { seq } => self.observe_write_ack(from, to, conn, *seq),
            PeerMessage::BarrierAck { epoch } => {
                // The peer flushed every epoch up to this one before acknowledging it.
                let (writes, pending): (Vec<_>, Vec<_>) = self
                    .peer_unflushed
                    .remove(&from)
                    .unwrap_or_default()
                    .into_iter()
                    .partition(|&(c, e, _)| c == conn && e <= *epoch);
                self.peer_unflushed.insert(from, pending);
                for (_, _, write) in writes {
                    if let Some(record) = self.record_mut(write) {
                        record.durable_on.insert(from);
                    }
                }
            }
            PeerMessage::ResyncReply { .. } => {
                // Resync data from any peer changes the receiver's disk outside its sessions.
                self.invalidate_sessions(conn);
                self.invalidate_receiver_sessions(to);
            }
            PeerMessage::ResyncRequest { .. }
            | PeerMessage::BitmapChunk { .. }
            | PeerMessage::CsumRequest { .. } => self.invalidate_sessions(conn),
            // A RotateSeen or an Accepted changes nothing on its receiver's disk.
            PeerMessage::SyncUuids(uuids)
                if !matches!(
                    uuids.purpose,
                    UuidsPurpose::Handshake | UuidsPurpose::RotateSeen | UuidsPurpose::Accepted
                ) =>
            {
                self.invalidate_sessions(conn)
            }
            _ => {}
        }
        if matches!(
            message,
            PeerMessage::Data { .. } | PeerMessage::ResyncReply { .. }
        ) {
            let pair = norm(from, to);
            let apart = (
                self.wrote_apart.contains(&(from, to)),
                self.wrote_apart.contains(&(to, from)),
            );
            let detected = self.sb_detected.contains(&pair);
            self.check(check::check_split_brain(
                pair,
                apart,
                detected,
                "data moved between them",
            ));
            // A detected split brain resolved with `to` as the target: the administrator's
            // (or an after-sb policy's) discard abandons its diverged writes from the first
            // resync block on, towards every node; an interrupted resync leaves it an
            // Inconsistent partial copy, no holder of them (seed 3992: such a target was later
            // resynced by a third node, the Primary, without a split brain of its own).
            let discarding = detected
                && matches!(message, PeerMessage::ResyncReply { .. })
                && self.wrote_apart.contains(&(to, from));
            if discarding {
                self.wrote_apart.retain(|&(holder, _)| holder != to);
            }
        }
    }

    /// Peer `from` confirmed writing replicated write `seq` of Primary `to`: it holds the write,
    /// durably at once if written with FUA (or with `durable_peer_writes`), else once its
    /// barrier acknowledgement covering the write's epoch arrives.
    fn observe_write_ack(&mut self, from: u8, to: u8, conn: u64, seq: u64) {
        let inc = self.nodes[usize::from(to)].inc;
        let Some(&(write, epoch)) = self.seq_map.get(&(to, inc, seq)) else {
            return;
        };
        let durable_peer_writes = self.cfg.durable_peer_writes;
        let Some(record) = self.record_mut(write) else {
            return;
        };
        record.acked_by.insert(from);
        if record.fua || durable_peer_writes {
            record.durable_on.insert(from);
        } else {
            self.peer_unflushed
                .entry(from)
                .or_default()
                .push((conn, epoch, write));
        }
    }

    fn record_mut(&mut self, write: u64) -> Option<&mut WriteRecord> {
        write
            .checked_sub(1)
            .and_then(|i| self.writes.get_mut(usize::try_from(i).ok()?))
    }

    /// Disk errors on `n`: what it receives may fail to be written (negative acks), so its
    /// sessions can no longer be checked as epoch prefixes.
    pub fn invalidate_receiver_sessions(&mut self, n: u8) {
        for ((_, receiver), session) in self.sessions.iter_mut() {
            if *receiver == n {
                session.valid = false;
            }
        }
    }

    fn invalidate_sessions(&mut self, conn: u64) {
        for ((c, _), session) in self.sessions.iter_mut() {
            if *c == conn {
                session.valid = false;
            }
        }
    }

    /// `n` learns that its connection to `peer` ended.
    pub fn disconnect_local(&mut self, n: u8, peer: u8, state: ConnState, reason: &str) {
        let Some(conn) = self.nodes[usize::from(n)].conns.remove(&peer) else {
            return;
        };
        self.note(|| format!("node {n} lost {peer} ({state}): {reason}"));
        self.end_session(conn, n);
        let reason = reason.to_string();
        self.with_engine(n, |e, now, out| {
            e.peer_disconnected(now, peer, state, reason, out)
        });
    }

    fn end_session(&mut self, conn: u64, receiver: u8) {
        if let Some(session) = self.sessions.remove(&(conn, receiver)) {
            if session.valid && !session.writes.is_empty() {
                self.prefix_pending.insert(receiver, session);
                self.run_prefix_check(receiver);
            }
        }
    }

    /// Drops connection `conn` between `a` and `b`: frames lost, each side notices after a
    /// detection delay.
    pub fn drop_connection(&mut self, a: u8, b: u8, conn: u64) {
        self.dead_conns.insert(conn);
        self.net.purge(conn);
        for (node, peer) in [(a, b), (b, a)] {
            let delay = self.rng.range(MS, 800 * MS);
            self.schedule(delay, Ev::Detect { node, peer, conn });
        }
    }

    fn on_connect(&mut self) {
        for a in 0..self.cfg.nodes {
            for b in a + 1..self.cfg.nodes {
                if self.can_connect(a, b) {
                    self.connect(a, b);
                }
            }
        }
        self.schedule(300 * MS, Ev::Connect);
    }

    fn can_connect(&self, a: u8, b: u8) -> bool {
        let ready = |x: u8, y: u8| {
            let node = &self.nodes[usize::from(x)];
            node.engine.as_ref().is_some_and(|e| e.wants_connection(y))
                && !node.conns.contains_key(&y)
                && !node.peer_io_pending()
                && !self.prefix_pending.contains_key(&x)
        };
        ready(a, b) && ready(b, a) && self.net.passes(a, b) && self.net.passes(b, a)
    }

    fn connect(&mut self, a: u8, b: u8) {
        let conn = self.next_conn;
        self.next_conn += 1;
        self.note(|| format!("connect {a} <-> {b} (conn {conn})"));
        for (x, y) in [(a, b), (b, a)] {
            self.nodes[usize::from(x)].conns.insert(y, conn);
            let up_to_date = self.nodes[usize::from(y)].engine.as_ref().is_some_and(|e| {
                e.status()
                    .volumes
                    .first()
                    .is_some_and(|v| v.disk == repl::DiskState::UpToDate)
            });
            // A disk that fails writes now cannot be checked as an epoch prefix (as
            // `invalidate_receiver_sessions` does for sessions under way when errors start).
            let failing = self.nodes[usize::from(y)].disk.has_failures();
            let snapshot = self.nodes[usize::from(y)].disk.blocks().to_vec();
            self.sessions.insert(
                (conn, y),
                Session {
                    sender: x,
                    snapshot,
                    writes: Vec::new(),
                    valid: up_to_date && !failing,
                },
            );
        }
        self.with_engine(a, |e, now, out| e.peer_connected(now, b, out));
        self.with_engine(b, |e, now, out| e.peer_connected(now, a, out));
    }

    // ----- node life ---------------------------------------------------------------------

    fn boot(&mut self, n: u8) -> Result<(), SimError> {
        let peers: Vec<u8> = (0..self.cfg.nodes).filter(|&p| p != n).collect();
        let seed = self.rng.next_u64();
        let protocol = self.cfg.protocol;
        self.nodes[usize::from(n)].start(&peers, protocol, seed)?;
        if self.cfg.quorum {
            // As the daemon does at attach: the resource's quorum settings before anything
            // else (a fresh or restarted node starts without quorum until it connects).
            self.with_engine(n, |e, now, out| {
                e.set_quorum(now, SimConfig::quorum_config(), out)
            });
        }
        let inc = self.nodes[usize::from(n)].inc;
        let first = self.rng.range(0, 100 * MS);
        self.schedule(first, Ev::Tick { node: n, inc });
        Ok(())
    }

    /// Power loss of node `n`; it boots again after `downtime_ns` (None: stays down until
    /// restarted).
    pub fn crash(&mut self, n: u8, downtime_ns: Option<u64>) {
        if !self.nodes[usize::from(n)].alive() {
            return;
        }
        self.stats.crashes += 1;
        let conns: Vec<(u8, u64)> = self.nodes[usize::from(n)]
            .conns
            .iter()
            .map(|(&p, &c)| (p, c))
            .collect();
        for (peer, conn) in conns {
            self.sessions.remove(&(conn, n));
            self.drop_connection(n, peer, conn);
        }
        self.prefix_pending.remove(&n);
        self.with_primary_at.remove(&n);
        self.requests.retain(|_, r| r.node != n);
        if self.primary == Some(n) {
            self.primary_lost_at = Some(self.now);
        }
        // What this power loss may lose (the checker's two outcomes, `check`): the writes it
        // served that the client was not yet told are durable, and the writes it confirmed as
        // a peer without making them durable yet.
        for id in self.volatile.clone() {
            if let Some(w) = self.record_mut(id).filter(|w| w.node == n) {
                w.lost_on.insert(n);
            }
        }
        for (_, _, id) in self.peer_unflushed.remove(&n).unwrap_or_default() {
            if let Some(w) = self.record_mut(id) {
                w.power_lost_on.insert(n);
            }
        }
        let node = &mut self.nodes[usize::from(n)];
        let damaged = node.disk.crash(&mut self.rng);
        node.meta.crash();
        node.engine = None;
        node.pending.clear();
        node.conns.clear();
        node.meta_scheduled = false;
        node.inc += 1;
        self.note(|| format!("CRASH node {n} ({damaged} blocks lost or torn)"));
        if let Some(downtime) = downtime_ns {
            self.schedule(downtime, Ev::Restart { node: n });
        }
    }

    fn restart(&mut self, n: u8) {
        if self.nodes[usize::from(n)].alive() {
            return;
        }
        self.note(|| format!("RESTART node {n}"));
        if let Err(error) = self.boot(n) {
            self.fail(Violation {
                checker: "restart",
                detail: error.to_string(),
            });
        }
    }

    fn on_tick(&mut self, n: u8, inc: u64) {
        if self.nodes[usize::from(n)].inc != inc || !self.nodes[usize::from(n)].alive() {
            return;
        }
        self.with_engine(n, |e, now, out| e.tick(now, out));
        // The daemon writes dirty bitmap pages every few seconds while a peer is away.
        if self.rng.chance(5) {
            self.write_back_pages(n);
        }
        self.schedule(
            repl::TICK_INTERVAL
                .as_nanos()
                .try_into()
                .unwrap_or(100 * MS),
            Ev::Tick { node: n, inc },
        );
    }

    // ----- client ------------------------------------------------------------------------

    fn on_client(&mut self) {
        let delay = if self.rng.chance(10) {
            self.rng.range(5 * MS, 50 * MS)
        } else {
            self.rng.range(100_000, 2 * MS)
        };
        self.schedule(delay, Ev::Client);
        let Some(n) = self.primary else { return };
        let is_primary = self.nodes[usize::from(n)]
            .engine
            .as_ref()
            .is_some_and(|e| e.role() == Role::Primary);
        if !self.workload_on || !is_primary || self.client_in_flight(n) >= CLIENT_IN_FLIGHT_MAX {
            return;
        }
        if self.rng.chance(8) {
            self.submit_flush(n);
        } else {
            let count = self.rng.range(1, WRITE_BLOCKS_MAX + 1);
            let first = if self.rng.chance(50) {
                self.rng.range(0, 64)
            } else {
                self.rng.range(0, VOLUME_BLOCKS - count)
            };
            let fua = self.rng.chance(10);
            self.submit_write(n, first, count, fua);
        }
    }

    /// Submits a client write of `count` blocks at `first` to node `n`; returns its id.
    pub fn submit_write(&mut self, n: u8, first: u64, count: u64, fua: bool) -> u64 {
        let id = u64::try_from(self.writes.len()).unwrap_or(u64::MAX) + 1;
        self.writes.push(WriteRecord {
            id,
            node: n,
            first,
            count,
            fua,
            ..WriteRecord::default()
        });
        let tags: Vec<u64> = (first..first + count).map(|b| check::tag(id, b)).collect();
        let request = self.next_request;
        self.next_request += 1;
        self.requests.insert(
            request,
            Request {
                node: n,
                write: Some(id),
                submitted: self.stats.steps,
            },
        );
        let op = Op::Write {
            offset: first * BLOCK_BYTES,
            length: count * BLOCK_BYTES,
            data: Rc::from(tags),
            flags: WriteFlags { fua },
        };
        self.note(|| {
            format!(
                "client write {id} to node {n}: blocks {first}+{count}{}",
                if fua { " fua" } else { "" }
            )
        });
        self.with_engine(n, |e, now, out| e.submit(now, request, 0, op, out));
        id
    }

    fn submit_flush(&mut self, n: u8) {
        let request = self.next_request;
        self.next_request += 1;
        self.requests.insert(
            request,
            Request {
                node: n,
                write: None,
                submitted: self.stats.steps,
            },
        );
        self.with_engine(n, |e, now, out| e.submit(now, request, 0, Op::Flush, out));
    }

    fn on_complete(&mut self, request: u64, result: Result<(), IoError>) {
        let Some(req) = self.requests.remove(&request) else {
            return;
        };
        self.note(|| {
            format!(
                "complete request {request} (write {:?}): {result:?}",
                req.write
            )
        });
        if result.is_err() {
            self.stats.writes_failed += u64::from(req.write.is_some());
            return;
        }
        let Some(id) = req.write else {
            self.flush_completed(req.node, req.submitted);
            return;
        };
        let step = self.stats.steps;
        let Some(index) = id.checked_sub(1).and_then(|i| usize::try_from(i).ok()) else {
            return;
        };
        let Some(record) = self.writes.get_mut(index) else {
            return;
        };
        record.acked = Some(step);
        if record.fua {
            record.durable_on.insert(req.node);
        } else {
            self.volatile.push(id);
        }
        self.stats.writes_acked += 1;
        let record = self.writes[index].clone();
        let n = req.node;
        if self.nodes[usize::from(n)]
            .engine
            .as_ref()
            .is_some_and(|e| e.quorum_left_out() > 0)
        {
            self.stats.writes_by_last_man += 1;
        }
        self.check(check::check_acked_on_primary(
            self.nodes[usize::from(n)].disk.blocks(),
            &record,
        ));
        // The write is on `n` and on the peers that confirmed it, and not on the peers `n` is
        // not connected to: the Primary and each UpToDate peer that confirmed it now carry
        // data each of those lacks (a holder that is later resynced from elsewhere passes
        // this on, `resync_finished`). A write only sent (protocols A and B: it may be lost
        // in flight) proves nothing about the peer; a peer that is not UpToDate (a sync
        // target) holds no data of its own to diverge: its copy is its source's, partial.
        let conns = &self.nodes[usize::from(n)].conns;
        let lacking: Vec<u8> = (0..self.cfg.nodes)
            .filter(|&p| p != n && !conns.contains_key(&p))
            .collect();
        if lacking.is_empty() {
            return;
        }
        let connected: Vec<u8> = (0..self.cfg.nodes)
            .filter(|&p| p == n || (conns.contains_key(&p) && record.acked_by.contains(&p)))
            .collect();
        let up_to_date = |p: u8| {
            self.nodes[usize::from(p)]
                .engine
                .as_ref()
                .and_then(|e| e.meta(0))
                .is_some_and(|m| m.disk == repl::DiskState::UpToDate)
        };
        let holders: Vec<u8> = connected
            .into_iter()
            .filter(|&p| p == n || up_to_date(p))
            .collect();
        for &holder in &holders {
            for &peer in &lacking {
                self.wrote_apart.insert((holder, peer));
            }
        }
    }

    /// A client flush submitted to `n` at step `submitted` completed: the client was told that
    /// every write acknowledged before is durable, and it is on `n` where `n` served or
    /// confirmed it (the peers' part comes with their barrier acknowledgements).
    fn flush_completed(&mut self, n: u8, submitted: u64) {
        let volatile = std::mem::take(&mut self.volatile);
        for id in volatile {
            let Some(w) = self.record_mut(id) else {
                continue;
            };
            if w.acked.unwrap_or(0) >= submitted {
                self.volatile.push(id);
            } else if w.node == n || w.acked_by.contains(&n) {
                w.durable_on.insert(n);
            }
        }
    }

    /// Excuses every write acknowledged so far (a forced promotion or a discarded side gives
    /// up on them by design).
    pub fn excuse_acked_writes(&mut self, node: Option<u8>) {
        for w in self
            .writes
            .iter_mut()
            .filter(|w| node.is_none_or(|n| w.node == n))
        {
            w.excused = true;
        }
    }

    // ----- checkpoints -------------------------------------------------------------------

    fn on_checkpoint(&mut self) {
        self.schedule(100 * MS, Ev::Checkpoint);
        self.check_memory();
        self.check_quiet_pairs(false);
        self.settle_split_brain_records();
        crate::faults::admin(self);
    }

    fn check_memory(&mut self) {
        let mut usage = Usage::default();
        for channel in self.net.channels.values() {
            usage.channel_bytes = usage.channel_bytes.max(channel.bytes());
            usage.channel_frames = usage.channel_frames.max(channel.frames());
        }
        for node in &self.nodes {
            usage.local_pending = usage.local_pending.max(node.pending.len());
            if let Some(engine) = &node.engine {
                let upper = engine
                    .status()
                    .volumes
                    .first()
                    .map_or(0, |v| v.upper_pending);
                usage.upper_pending = usage.upper_pending.max(upper);
            }
        }
        let u = &mut self.usage;
        u.channel_bytes = u.channel_bytes.max(usage.channel_bytes);
        u.channel_frames = u.channel_frames.max(usage.channel_frames);
        u.upper_pending = u.upper_pending.max(usage.upper_pending);
        u.local_pending = u.local_pending.max(usage.local_pending);
        self.check(check::check_bounds(usage, crate::bounds()));
    }

    /// Checks the disk of `n` against the session that ended, once every replicated write
    /// it received is written (before anything else can write there: a node with a pending
    /// check neither reconnects nor is promoted without running it).
    fn run_prefix_check(&mut self, n: u8) {
        if self.nodes[usize::from(n)].peer_io_pending() {
            return;
        }
        let Some(session) = self.prefix_pending.remove(&n) else {
            return;
        };
        let result = check::check_epoch_prefix(
            &session.snapshot,
            &session.writes,
            self.nodes[usize::from(n)].disk.blocks(),
        );
        if result.is_ok() {
            self.stats.prefix_checks += 1;
        }
        let sender = session.sender;
        self.note(|| {
            format!(
                "epoch-prefix check of node {n} (from {sender}, {} writes)",
                session.writes.len()
            )
        });
        self.check(result);
    }

    /// Pairs that are connected, Established, both UpToDate, with nothing in flight: their
    /// disks must be identical, and their split-brain record is settled. Returns how many
    /// pairs were quiet. Without `all`, only pairs with the client's Primary are compared;
    /// with `all`, every pair, but only when every pair is quiet (two Secondaries may differ
    /// until the Primary has resynced the one that fell behind).
    pub fn check_quiet_pairs(&mut self, all: bool) -> usize {
        let mut quiet = Vec::new();
        for a in 0..self.cfg.nodes {
            for b in a + 1..self.cfg.nodes {
                let with_primary = self.primary == Some(a) || self.primary == Some(b);
                if (all || with_primary) && self.pair_quiet(a, b) {
                    quiet.push((a, b));
                }
            }
        }
        let pairs = usize::from(self.cfg.nodes) * usize::from(self.cfg.nodes - 1) / 2;
        if all && quiet.len() < pairs {
            return quiet.len();
        }
        for &(a, b) in &quiet {
            let apart = (
                self.wrote_apart.contains(&(a, b)),
                self.wrote_apart.contains(&(b, a)),
            );
            let detected = self.sb_detected.contains(&(a, b));
            self.check(check::check_split_brain(
                (a, b),
                apart,
                detected,
                "they are Established",
            ));
            let result = check::check_identical(
                (a, self.nodes[usize::from(a)].disk.blocks()),
                (b, self.nodes[usize::from(b)].disk.blocks()),
            );
            if result.is_ok() {
                self.stats.identical_checks += 1;
            }
            self.check(result);
            self.wrote_apart.remove(&(a, b));
            self.wrote_apart.remove(&(b, a));
            self.sb_detected.remove(&(a, b));
            self.role_conflicts.remove(&(a, b));
        }
        quiet.len()
    }

    /// Pairs Established with both disks UpToDate are in sync: a divergence they had must
    /// have been detected (checked), and their record starts afresh.
    fn settle_split_brain_records(&mut self) {
        for a in 0..self.cfg.nodes {
            for b in a + 1..self.cfg.nodes {
                let apart = (
                    self.wrote_apart.contains(&(a, b)),
                    self.wrote_apart.contains(&(b, a)),
                );
                if !(apart.0 || apart.1)
                    || !(self.established_up_to_date(a, b) && self.established_up_to_date(b, a))
                {
                    continue;
                }
                let detected = self.sb_detected.contains(&(a, b));
                self.check(check::check_split_brain(
                    (a, b),
                    apart,
                    detected,
                    "they are Established",
                ));
                self.wrote_apart.remove(&(a, b));
                self.wrote_apart.remove(&(b, a));
                self.sb_detected.remove(&(a, b));
                self.role_conflicts.remove(&(a, b));
                self.role_conflicts.remove(&(a, b));
            }
        }
    }

    fn established_up_to_date(&self, n: u8, peer: u8) -> bool {
        let Some(engine) = &self.nodes[usize::from(n)].engine else {
            return false;
        };
        let status = engine.status();
        status
            .volumes
            .first()
            .is_some_and(|v| v.disk == repl::DiskState::UpToDate)
            && status
                .peers
                .iter()
                .find(|p| p.node_id == peer)
                .is_some_and(|p| {
                    p.connection == ConnState::Connected
                        && p.volumes.first().is_some_and(|v| {
                            v.replication == repl::ReplState::Established
                                && v.peer_disk == repl::DiskState::UpToDate
                        })
                })
    }

    fn pair_quiet(&self, a: u8, b: u8) -> bool {
        let (na, nb) = (&self.nodes[usize::from(a)], &self.nodes[usize::from(b)]);
        let Some(conn) = na.conns.get(&b).copied() else {
            return false;
        };
        if nb.conns.get(&a) != Some(&conn)
            || self.dead_conns.contains(&conn)
            || self.net.carries(conn)
            || !self.requests.is_empty()
        {
            return false;
        }
        let settled = |node: &Node, peer: u8| {
            if !node.pending.is_empty() || node.meta.busy() {
                return false;
            }
            let Some(engine) = &node.engine else {
                return false;
            };
            let status = engine.status();
            let local = status.volumes.first().is_some_and(|v| {
                v.disk == repl::DiskState::UpToDate && v.upper_pending == 0 && v.lower_pending == 0
            });
            let remote = status
                .peers
                .iter()
                .find(|p| p.node_id == peer)
                .is_some_and(|p| {
                    p.connection == ConnState::Connected
                        && p.unacked == 0
                        && p.volumes.first().is_some_and(|v| {
                            v.replication == repl::ReplState::Established
                                && v.peer_disk == repl::DiskState::UpToDate
                                && v.pending == 0
                        })
                });
            local && remote
        };
        settled(na, b) && settled(nb, a)
    }

    /// Promotes `n`; unless forced, checks that it holds every write it must.
    pub fn promote(&mut self, n: u8, promotion: Promotion) -> bool {
        let force = promotion == Promotion::Forced;
        self.run_prefix_check(n);
        self.prefix_pending.remove(&n);
        let mut result = Ok(());
        let mut quorum_words = String::new();
        self.with_engine(n, |e, _, out| {
            quorum_words = e.quorum_report();
            result = e.promote(promotion, out);
        });
        let quorum_words = if self.cfg.quorum {
            format!(" ({quorum_words})")
        } else {
            String::new()
        };
        self.note(|| {
            format!(
                "promote node {n}{}: {result:?}{quorum_words}",
                if force { " --force" } else { "" }
            )
        });
        if result == Err(repl::StateError::ConfirmingPeers) && !self.admin_retry_scheduled {
            self.admin_retry_scheduled = true;
            self.schedule(2 * MS, Ev::AdminRetry);
        }
        if result.is_err() {
            return false;
        }
        self.stats.promotions += 1;
        if self.cfg.quorum || self.cfg.nodes > 2 {
            // A failover promotes a node whose connections to the other Secondaries started
            // while another Primary wrote to them: their snapshots are stale, so what it
            // sends there can no longer be checked as an epoch prefix.
            for session in self.sessions.values_mut().filter(|s| s.sender == n) {
                session.valid = false;
            }
        }
        if force {
            self.excuse_acked_writes(None);
        } else {
            let verdict = self.check_holds_acked_writes(n);
            self.check(verdict);
            // From now on this node's data is the reference: a write it never confirmed (the
            // last writes of protocol A or B, or of a node that served as Primary before) may
            // be gone by design, and resync may remove it from the others too. In quorum mode
            // only writes already acknowledged: one an old Primary still holds (suspended for
            // want of quorum) must never be acknowledged, and is not excused if it is. Under
            // quorum and protocol C nothing is excused: the promoted node held every
            // acknowledged write (checked above), and every later Primary must hold them too.
            let quorum = self.cfg.quorum;
            if !self.cfg.strict_acked_writes() {
                for w in self.writes.iter_mut().filter(|w| {
                    w.node != n && !w.acked_by.contains(&n) && (!quorum || w.acked.is_some())
                }) {
                    w.excused = true;
                }
            }
        }
        true
    }

    /// Whether node `n`, promoted or the final Primary, holds every acknowledged write it
    /// must: those it confirmed or served itself, or in quorum mode with protocol C every one
    /// ([`check::check_promotion_strict`]). The writes it lacks that were lost by a double
    /// failure are recorded, counted and traced (required nowhere from then on).
    pub fn check_holds_acked_writes(&mut self, n: u8) -> Result<(), Violation> {
        let cluster = self.cluster_seen_from(n);
        let disk = self.nodes[usize::from(n)].disk.blocks();
        let losses = if self.cfg.strict_acked_writes() {
            check::check_promotion_strict(disk, n, &self.writes, &cluster)?
        } else {
            check::check_promotion(disk, n, &self.writes, &cluster)?
        };
        for id in losses.unflushed {
            let Some(w) = self.record_mut(id).filter(|w| !w.lost_unflushed) else {
                continue;
            };
            w.lost_unflushed = true;
            self.stats.writes_lost_unflushed += 1;
        }
        for id in losses.double_failure {
            let Some(w) = self.record_mut(id) else {
                continue;
            };
            w.double_failure = true;
            let (primary, confirmed, power_lost) =
                (w.node, w.acked_by.clone(), w.power_lost_on.clone());
            self.stats.writes_lost_by_double_failure += 1;
            self.note(|| {
                format!(
                    "write {id} lost by a double failure on node {n} (served by node {primary}, \
                     confirmed by {confirmed:?}, lost at a power loss on {power_lost:?}, down \
                     {:?}, cut off {:?})",
                    cluster.down, cluster.cut_off
                )
            });
        }
        Ok(())
    }

    /// The nodes down, those running outside the partition of `n`, and those whose disk is not
    /// UpToDate, as the double-failure rule needs them.
    fn cluster_seen_from(&self, n: u8) -> check::Cluster {
        let reach = self.partition_of(n);
        let mut cluster = check::Cluster::default();
        for m in 0..self.cfg.nodes {
            let Some(engine) = &self.nodes[usize::from(m)].engine else {
                cluster.down.insert(m);
                continue;
            };
            if !reach.contains(&m) {
                cluster.cut_off.insert(m);
            }
            if engine
                .status()
                .volumes
                .first()
                .is_none_or(|v| v.disk != repl::DiskState::UpToDate)
            {
                cluster.unusable.insert(m);
            }
        }
        cluster
    }

    /// The running nodes `n` reaches through connections (its own, its peers', and so on):
    /// its partition, as a cluster manager's membership sees it.
    pub fn partition_of(&self, n: u8) -> BTreeSet<u8> {
        let mut seen = BTreeSet::from([n]);
        let mut todo = vec![n];
        while let Some(x) = todo.pop() {
            for &y in self.nodes[usize::from(x)].conns.keys() {
                if self.linked(x, y) && seen.insert(y) {
                    todo.push(y);
                }
            }
        }
        seen
    }

    /// Whether `a` and `b` both run and both have their current connection to each other
    /// (not a connection one side still holds to a node that crashed since).
    pub fn linked(&self, a: u8, b: u8) -> bool {
        let (na, nb) = (&self.nodes[usize::from(a)], &self.nodes[usize::from(b)]);
        na.alive()
            && nb.alive()
            && na
                .conns
                .get(&b)
                .is_some_and(|c| nb.conns.get(&a) == Some(c))
    }

    /// Client requests in flight.
    pub fn requests_in_flight(&self) -> usize {
        self.requests.len()
    }

    /// Client requests in flight to node `n`.
    pub fn requests_to(&self, n: u8) -> usize {
        self.requests.values().filter(|r| r.node == n).count()
    }

    /// The requests that count against the client's limit when it writes to `n`: all of
    /// them, except in quorum mode, where requests held by an old Primary on the far side of
    /// a partition (suspended for want of quorum) belong to a client that failed over.
    fn client_in_flight(&self, n: u8) -> usize {
        if self.cfg.quorum {
            self.requests_to(n)
        } else {
            self.requests.len()
        }
    }

    /// Reschedules delivery of every frame on the wire (after a partition or a stopped reader
    /// ends).
    pub fn reschedule_deliveries(&mut self) {
        for (key, at) in self.net.pending_deliveries() {
            let delay = at.0.saturating_sub(self.now.0);
            self.schedule(delay, Ev::Deliver { key });
        }
    }
}

/// A short description of a message for the trace.
fn describe(message: &PeerMessage<Payload>) -> String {
    match message {
        PeerMessage::Data {
            seq, epoch, offset, ..
        } => format!(
            "Data seq {seq} epoch {epoch} block {}",
            offset / BLOCK_BYTES
        ),
        PeerMessage::ResyncReply {
            id, offset, length, ..
        } => format!(
            "ResyncReply {id} blocks {}+{}",
            offset / BLOCK_BYTES,
            length / BLOCK_BYTES
        ),
        PeerMessage::BitmapChunk { chunk, .. } => format!("BitmapChunk {} bytes", chunk.len()),
        PeerMessage::SyncUuids(u) => {
            let bitmaps: Vec<String> = u
                .ids
                .bitmap
                .iter()
                .enumerate()
                .filter(|(_, b)| **b != 0)
                .map(|(node, b)| format!("{node}:{b:x}"))
                .collect();
            let history: Vec<String> = u
                .ids
                .history
                .iter()
                .filter(|h| **h != 0)
                .map(|h| format!("{h:x}"))
                .collect();
            format!(
                "SyncUuids {:?} {:?} {} current {:x} bitmaps [{}] history [{}] flags {:?} bits {}",
                u.purpose,
                u.role,
                u.disk,
                u.ids.current,
                bitmaps.join(" "),
                history.join(" "),
                u.ids.flags,
                u.bitmap_bits
            )
        }
        other => {
            let text = format!("{other:?}");
            text.chars().take(80).collect()
        }
    }
}

/// The first block and the per-block tags a disk operation writes.
fn op_tags(op: &DiskOp<Payload>) -> (u64, Vec<u64>) {
    match op {
        DiskOp::Write { offset, data, .. } => (offset / BLOCK_BYTES, data.to_vec()),
        DiskOp::Trim { offset, length, .. } | DiskOp::WriteZeroes { offset, length, .. } => (
            offset / BLOCK_BYTES,
            vec![0; usize::try_from(length / BLOCK_BYTES).unwrap_or(0)],
        ),
    }
}

fn frame_payload_bytes(body: &Body) -> u64 {
    let blocks = match body {
        Body::Msg(PeerMessage::Data {
            op: DiskOp::Write { data, .. },
            ..
        })
        | Body::Msg(PeerMessage::ResyncReply { data, .. }) => data.len(),
        _ => 0,
    };
    u64::try_from(blocks).unwrap_or(0) * BLOCK_BYTES
}

/// One 8-byte digest per `block_bytes` of tags (the simulator's `verify-alg`).
fn digests(tags: &[u64], block_bytes: u32) -> Vec<u8> {
    let per = usize::try_from(u64::from(block_bytes) / BLOCK_BYTES)
        .unwrap_or(1)
        .max(1);
    tags.chunks(per)
        .flat_map(|chunk| {
            chunk
                .iter()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, &t| {
                    (h ^ t).wrapping_mul(0x100_0000_01b3)
                })
                .to_le_bytes()
        })
        .collect()
}
