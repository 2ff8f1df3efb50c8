//! One resource at run time: its engine, disks, peer links and client requests.
//!
//! The engine sits behind one mutex together with the links' send queues and the pending
//! client completions. Every input goes through [`Resource::step`], which locks, lets the
//! engine decide, routes the cheap actions (queueing sends, answering clients, noting state
//! changes) while still holding the lock — so frames reach each peer's queue in the order the
//! engine produced them — and then performs local disk I/O on blocking threads after
//! unlocking. No lock is ever held across I/O.
//!
//! Invariants:
//! - A peer has an installed link exactly while the engine considers it Connected (both are
//!   changed together under the lock).
//! - Every client request id is in `completions` from submit until its `Complete` action.

mod resize;

pub(crate) use resize::ResizeOptions;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bufpool::BufPool;
use bufpool::Incoming;
use repl::{
    Action, ConnState, DisconnectReason, DiskOp, Engine, IoError, Op, PeerMessage, ReplState,
    RequestId, Resolution, Role, Time,
};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit};

use crate::digest::DigestKind;
use crate::disk::Disk;
use crate::handlers::{self, HandlerEvent};
use crate::held_reads::{HeldRead, HeldReads};
use crate::io_workers::{IoWorkers, IO_THREADS, IO_THREADS_DIRECT};
use crate::link_tuning::{AsyncBuffer, LinkTuning};
use crate::meta_store::{MetaJob, MetaStore};

/// Who is told when a metadata job is durable.
enum MetaDone {
    /// The engine (`local_done`).
    Engine(repl::IoId),
    /// A caller waiting for it (shutdown).
    Notify(std::sync::mpsc::SyncSender<Result<(), IoError>>),
    /// Nobody; a failure is logged (periodic write-back). The counter of such jobs still
    /// queued is decremented.
    Log(Arc<AtomicUsize>),
}

/// The queue of a volume's metadata writer. Unbounded as a channel, bounded in content: the
/// engine has at most one `PersistMeta` and one activity-log transaction in flight per volume,
/// and the periodic write-back queues nothing while one of its jobs is still queued.
type MetaSender = std::sync::mpsc::Sender<(MetaJob, MetaDone)>;
type MetaReceiver = std::sync::mpsc::Receiver<(MetaJob, MetaDone)>;

/// Writes up to this size without FUA are done on the calling thread: a page-cache copy of a
/// few microseconds costs less than handing it to an I/O thread and waking it.
const INLINE_WRITE_BYTES_MAX: usize = 64 * 1024;
/// An inline write's completion can release more inline writes (on a Secondary, each small
/// epoch's writes wait for the previous epoch's). They run one after another on the same
/// thread, queued rather than nested so the stack stays flat; after this many in one run the
/// rest go to the I/O threads, so one thread is never held for long.
const INLINE_RUN_MAX: u32 = 64;

/// I/O threads that may wait for a payload still arriving; at least one is always left for
/// everything else.
const WRITES_ARRIVING_MAX: usize = crate::io_workers::IO_THREADS - 1;
const _: () = assert!(WRITES_ARRIVING_MAX >= 1);

/// Inline jobs with their resource, in release order.
type InlineQueue = std::collections::VecDeque<(Arc<Resource>, crate::io_workers::Job)>;

thread_local! {
    /// Inline jobs released while this thread runs inline jobs, with their resource: run in
    /// order by the outermost run (see `run_inline`).
    static INLINE_QUEUE: std::cell::RefCell<InlineQueue> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
    static INLINE_RUNNING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a local I/O is cheap enough to run on the calling thread.
fn runs_inline(action: &Action<Payload>) -> bool {
    matches!(action, Action::LocalWrite { op: DiskOp::Write { data, fua: false, .. }, .. }
        if data.data.len() <= INLINE_WRITE_BYTES_MAX && data.data.as_complete().is_some())
}

/// A write's data: shared bytes, possibly still arriving (a large write is passed on while
/// its client or peer is still sending it), plus for data received from a peer the
/// receive-buffer permit (`max-buffers`) that is released when the last clone drops.
#[derive(Debug, Clone)]
pub(crate) struct Payload {
    pub(crate) data: Incoming,
    pub(crate) _permit: Option<Arc<OwnedSemaphorePermit>>,
}

/// Memory a replicated write's frame holds while queued: its payload (trims and zeroing
/// carry none).
fn disk_op_bytes(op: &DiskOp<Payload>) -> u64 {
    match op {
        DiskOp::Write { length, .. } => *length,
        DiskOp::Trim { .. } | DiskOp::WriteZeroes { .. } => 0,
    }
}

/// A frame waiting in a link's send queue.
#[derive(Debug)]
pub(crate) enum Outgoing {
    /// A replicated write (data socket); `report_sent`: tell the engine once it is in the
    /// socket (protocol A in effect for the peer when it was queued); `buffered`: bytes it
    /// holds in the link's async buffer (it was reported sent when queued), released once it
    /// is in the socket.
    Data {
        seq: u64,
        epoch: u64,
        volume: u16,
        op: DiskOp<Payload>,
        report_sent: bool,
        buffered: u64,
    },
    /// An epoch boundary (data socket).
    Barrier { epoch: u64, flush: bool },
    /// Acks, pings, state (control socket).
    Control(PeerMessage<Payload>),
    /// Handshake, bitmap and resync messages (data socket, in order with the writes).
    OnData(PeerMessage<Payload>),
    /// The engine dropped the peer: send a goodbye after everything queued, then stop.
    Close { reason: String },
}

/// The sending side of an established link, installed while the peer is Connected.
#[derive(Debug)]
pub(crate) struct LinkTx {
    pub(crate) generation: u64,
    pub(crate) data: mpsc::UnboundedSender<Outgoing>,
    pub(crate) control: mpsc::UnboundedSender<Outgoing>,
    /// Dropping or sending on this ends the link's tasks.
    pub(crate) kill: watch::Sender<crate::peer::Stop>,
    /// A duplicate of the data socket's descriptor, for live `sndbuf-size` changes.
    pub(crate) socket: Option<OwnedFd>,
    /// The link's async buffer (`async-buffer`).
    pub(crate) buffer: Arc<AsyncBuffer>,
}

/// DRBD's `DRBD_*_AF` word for an address.
fn address_family(address: &std::net::SocketAddr) -> &'static str {
    if address.is_ipv4() {
        "ipv4"
    } else {
        "ipv6"
    }
}

/// What one NBD client request waits for.
pub(crate) type Completion = nbd::Completion;

struct Core {
    engine: Engine<Payload>,
    links: HashMap<u8, LinkTx>,
    completions: HashMap<RequestId, Completion>,
    /// When each client write in flight was submitted, while the manager runs (for its
    /// completion-time measurement); bounded like `completions`, which it mirrors.
    write_started: HashMap<RequestId, Time>,
}

/// Static facts about one peer of this node.
#[derive(Debug, Clone)]
pub(crate) struct PeerInfo {
    pub(crate) node_id: u8,
    pub(crate) name: String,
    /// Where to connect to it.
    pub(crate) address: std::net::SocketAddr,
    /// This node's address on the connection to it (where it listens for this peer).
    pub(crate) local_address: std::net::SocketAddr,
    /// The volumes the peer is configured without a disk for (`disk none`: DRBD's clients).
    pub(crate) diskless_volumes: Vec<u16>,
    pub(crate) net: config::NetOptions,
    /// Resync options of the connection.
    pub(crate) peer_device: config::PeerDeviceOptions,
    /// The `after-sb-*` policies, resolved to node ids.
    pub(crate) split_brain: repl::SplitBrainPolicies,
    /// `verify-alg`, if set (online verify needs it).
    pub(crate) verify_alg: Option<DigestKind>,
    /// `csums-alg`, if set (checksum-based resync).
    pub(crate) csums_alg: Option<DigestKind>,
    /// `disk-flushes` of every volume: epochs are acknowledged only once durable.
    pub(crate) disk_flushes: bool,
}

/// Who asks [`Resource::promote`]: the administrator (`primary`) or the export's first
/// opener (`auto-promote`), which leaves a Primary as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Promoter {
    Administrator,
    Opener,
}

/// A resource of this node.
pub(crate) struct Resource {
    pub(crate) name: String,
    pub(crate) node_id: u8,
    /// Where peers connect to us (one listener each).
    pub(crate) listen: Vec<std::net::SocketAddr>,
    pub(crate) peers: Vec<PeerInfo>,
    /// Volume number and its disk, sorted by number.
    pub(crate) volumes: Vec<(u16, Arc<Disk>)>,
    /// Volume number and its metadata, sorted by number.
    metas: Vec<(u16, Arc<MetaStore>)>,
    /// Volume number and the queue of its metadata writer.
    meta_queues: Vec<(u16, MetaSender)>,
    /// Periodic bitmap write-back jobs still queued.
    writebacks_queued: Arc<AtomicUsize>,
    pub(crate) pool: Arc<BufPool>,
    /// `handlers { }` of the resource.
    handlers: config::Handlers,
    /// [`ResourceParts::volume_layout`].
    pub(crate) volume_layout: String,
    /// [`ResourceParts::minors`].
    minors: Vec<(u16, u32)>,
    /// [`ResourceParts::options`].
    pub(crate) options: config::ResourceOptions,
    /// What the Selective Replication Manager shows (None: `srm off`).
    pub(crate) srm_view: Mutex<Option<crate::srm_driver::SrmView>>,
    /// Client writes since the manager last looked.
    pub(crate) write_counters: Mutex<crate::srm_driver::WriteCounters>,
    io: IoWorkers,
    core: Mutex<Core>,
    next_request: AtomicU64,
    next_generation: AtomicU64,
    /// I/O threads currently writing a payload that is still arriving.
    writes_arriving: AtomicUsize,
    /// Peer links whose tasks still run (a stopping daemon lets them send their goodbyes).
    pub(crate) link_tasks: AtomicUsize,
    /// Bumped on every state change; status and events watch it.
    pub(crate) changed: watch::Sender<u64>,
    pub(crate) down: AtomicBool,
    /// Quorum as last reported (for the `quorum-lost` handler and the log).
    had_quorum: AtomicBool,
    /// The node became Primary through `auto-promote`: the last close demotes it.
    pub(crate) auto_promoted: AtomicBool,
    /// The replication state of each (peer, volume) as last seen, for the resync handlers.
    repl_states: Mutex<Vec<(u8, u16, ReplState)>>,
    /// Peers this node ran `fence-peer` against and has not unfenced since.
    fenced: Mutex<Vec<u8>>,
    /// Each peer's live link settings (sndbuf-size, async-buffer).
    tunings: Vec<(u8, Arc<LinkTuning>)>,
    /// `tls yes`: the certificates of the replication links.
    pub(crate) tls: Option<Arc<crate::tls::TlsSetup>>,
    /// Client reads held by `suspend-io`.
    held_reads: HeldReads,
    /// Each peer's settings as they run (the start's, then as `adjust` and `net-options`
    /// left them): what `net-options` changes from.
    live_peers: Mutex<Vec<PeerInfo>>,
    start: Instant,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("name", &self.name)
            .field("node_id", &self.node_id)
            .finish()
    }
}

/// Everything needed to build a [`Resource`].
pub(crate) struct ResourceParts {
    pub(crate) name: String,
    pub(crate) node_id: u8,
    pub(crate) listen: Vec<std::net::SocketAddr>,
    pub(crate) peers: Vec<PeerInfo>,
    pub(crate) volumes: Vec<(u16, Arc<Disk>)>,
    pub(crate) metas: Vec<(u16, Arc<MetaStore>)>,
    pub(crate) pool: Arc<BufPool>,
    pub(crate) handlers: config::Handlers,
    pub(crate) engine: Engine<Payload>,
    /// The resource's `options { }` (quorum, srm).
    pub(crate) options: config::ResourceOptions,
    /// The volumes as configured (number, disk, meta-disk), for `adjust` to refuse changes it
    /// cannot apply live.
    pub(crate) volume_layout: String,
    /// Each volume's device minor (`device /dev/drbdN` or `minor N`), where the
    /// configuration gives one: handlers get it as DRBD_MINOR.
    pub(crate) minors: Vec<(u16, u32)>,
    /// `tls yes`: the certificates of the replication links.
    pub(crate) tls: Option<Arc<crate::tls::TlsSetup>>,
}

impl Resource {
    pub(crate) fn new(parts: ResourceParts) -> std::io::Result<Arc<Resource>> {
        let (changed, _) = watch::channel(0);
        let direct = parts
            .volumes
            .iter()
            .any(|(_, disk)| disk.io() == config::DiskIo::Direct);
        let io = IoWorkers::start(
            &parts.name,
            if direct {
                IO_THREADS_DIRECT
            } else {
                IO_THREADS
            },
        )?;
        let (meta_queues, receivers): (Vec<_>, Vec<_>) = parts
            .metas
            .iter()
            .map(|(volume, _)| {
                let (tx, rx) = std::sync::mpsc::channel();
                ((*volume, tx), (*volume, rx))
            })
            .unzip();
        let tunings = parts
            .peers
            .iter()
            .map(|peer| (peer.node_id, LinkTuning::new(&peer.net)))
            .collect();
        let resource = Arc::new(Resource {
            tunings,
            tls: parts.tls,
            meta_queues,
            writebacks_queued: Arc::new(AtomicUsize::new(0)),
            io,
            name: parts.name,
            node_id: parts.node_id,
            listen: parts.listen,
            peers: parts.peers.clone(),
            volume_layout: parts.volume_layout,
            minors: parts.minors,
            options: parts.options,
            srm_view: Mutex::new(None),
            write_counters: Mutex::new(crate::srm_driver::WriteCounters::default()),
            volumes: parts.volumes,
            metas: parts.metas,
            pool: parts.pool,
            handlers: parts.handlers,
            core: Mutex::new(Core {
                engine: parts.engine,
                links: HashMap::new(),
                completions: HashMap::new(),
                write_started: HashMap::new(),
            }),
            next_request: AtomicU64::new(1),
            writes_arriving: AtomicUsize::new(0),
            link_tasks: AtomicUsize::new(0),
            next_generation: AtomicU64::new(1),
            changed,
            down: AtomicBool::new(false),
            had_quorum: AtomicBool::new(true),
            auto_promoted: AtomicBool::new(false),
            repl_states: Mutex::new(Vec::new()),
            fenced: Mutex::new(Vec::new()),
            held_reads: HeldReads::default(),
            live_peers: Mutex::new(parts.peers.clone()),
            start: Instant::now(),
        });
        resource.start_meta_writers(receivers)?;
        Ok(resource)
    }

    /// Whether the administrator took the resource down.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    fn now(&self) -> Time {
        Time(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A poisoned lock means a bug panicked while holding it; with panic=abort that cannot
        // happen, so recover the guard rather than spread the failure.
        self.core
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Read-only access to the engine (status, role checks).
    pub(crate) fn with_engine<R>(&self, f: impl FnOnce(&Engine<Payload>) -> R) -> R {
        f(&self.lock().engine)
    }

    /// Feed one input to the engine and carry out what it decides.
    pub(crate) fn step<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Engine<Payload>, Time, &mut Vec<Action<Payload>>) -> R,
    ) -> R {
        self.step_core(|core, now, out| f(&mut core.engine, now, out))
    }

    /// `primary` (and auto-promote): promotes, waiting while the engine confirms quorum with
    /// the peers it counts ([`repl::StateError::ConfirmingPeers`]: a ping round trip) for at
    /// most a second more than the longest `ping-timeout`. Polled, as `primary` waits for
    /// fencing; on a runtime worker the wait hands the worker's other tasks on
    /// (`block_in_place`).
    /// For [`Promoter::Opener`] (the export's auto-promote), a node that is Primary already
    /// is left as it is: Ok(false).
    pub(crate) fn promote(
        self: &Arc<Self>,
        promotion: repl::Promotion,
        by: Promoter,
    ) -> Result<bool, repl::StateError> {
        const POLL: std::time::Duration = std::time::Duration::from_millis(5);
        let attempt = || {
            self.step(|engine, _, out| {
                match by == Promoter::Opener && engine.role() == repl::Role::Primary {
                    true => Ok(false),
                    false => engine.promote(promotion, out).map(|()| true),
                }
            })
        };
        let first = attempt();
        if first != Err(repl::StateError::ConfirmingPeers) {
            return first;
        }
        let longest = self
            .peers
            .iter()
            .map(|p| p.net.ping_timeout)
            .max()
            .unwrap_or_default();
        let deadline = std::time::Instant::now() + longest + std::time::Duration::from_secs(1);
        tokio::task::block_in_place(|| loop {
            std::thread::sleep(POLL);
            let result = attempt();
            if result != Err(repl::StateError::ConfirmingPeers)
                || std::time::Instant::now() >= deadline
            {
                return result;
            }
        })
    }

    /// Like [`Resource::step`], with access to the links too (to change both together).
    fn step_core<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Core, Time, &mut Vec<Action<Payload>>) -> R,
    ) -> R {
        let mut actions = Vec::new();
        let mut local = Vec::new();
        let mut buffered = Vec::new();
        let result = {
            let mut core = self.lock();
            let now = self.now();
            let result = f(&mut core, now, &mut actions);
            loop {
                for action in actions.drain(..) {
                    if let Some(io) = self.route(&mut core, action, &mut buffered) {
                        local.push(io);
                    }
                }
                if buffered.is_empty() {
                    break;
                }
                // Writes the async buffer took count as sent (protocol A's completion point).
                for (peer, seq) in buffered.drain(..) {
                    core.engine.peer_sent(now, peer, seq, &mut actions);
                }
            }
            result
        };
        for action in local {
            self.start_local_io(action);
        }
        result
    }

    /// Carry out an action that needs no I/O (under the lock); hand back local I/O. Writes
    /// the async buffer admitted go to `buffered` (peer, seq).
    fn route(
        &self,
        core: &mut Core,
        action: Action<Payload>,
        buffered: &mut Vec<(u8, u64)>,
    ) -> Option<Action<Payload>> {
        match action {
            // fence-peer may answer at once (no handler configured): outside the lock.
            Action::LocalWrite { .. }
            | Action::LocalFlush { .. }
            | Action::LocalRead { .. }
            | Action::LocalDigest { .. }
            | Action::FencePeer { .. } => return Some(action),
            // Resizing reads the device and moves the metadata: outside the lock (`resize.rs`).
            Action::ResizeOffer { .. } | Action::Grow { .. } => return Some(action),
            Action::PersistMeta { io, volume, meta } => {
                let job = self.persist_job(core, volume, Some(meta));
                self.queue_meta(volume, job, MetaDone::Engine(io));
            }
            Action::WriteActivityLog {
                io,
                volume,
                offset_bytes,
                block,
                bitmap_pages,
                evicts,
            } => {
                self.queue_meta(
                    volume,
                    MetaJob::ActivityLog {
                        pages: bitmap_pages,
                        offset_bytes,
                        block,
                        evicts,
                    },
                    MetaDone::Engine(io),
                );
            }
            Action::Detached {
                volume,
                failed,
                call_handler,
            } => self.detached(volume, failed, call_handler),
            Action::ReadDone { request, result } => {
                if let Some(completion) = core.completions.remove(&request) {
                    match result.and_then(|payload| {
                        payload
                            .data
                            .as_complete()
                            .map(bytes::Bytes::copy_from_slice)
                            .ok_or(IoError::Io)
                    }) {
                        Ok(data) => completion.read_data(data),
                        Err(error) => completion.error(crate::export::errno_of(error)),
                    }
                }
            }
            Action::Complete { request, result } => self.complete(core, request, result),
            Action::StateChanged => {
                self.quorum_transition(&core.engine);
                self.resync_transitions(&core.engine);
                self.changed.send_modify(|version| *version += 1);
            }
            action => self.route_to_peer(core, action, buffered),
        }
        None
    }

    /// [`Resource::route`] for the actions about a peer: its link, verify and split brain.
    fn route_to_peer(
        &self,
        core: &mut Core,
        action: Action<Payload>,
        buffered: &mut Vec<(u8, u64)>,
    ) {
        match action {
            Action::VerifyFound {
                peer,
                volume,
                offset,
                length,
            } => {
                tracing::warn!(
                    resource = %self.name, peer = %self.peer_name(peer), volume, offset, length,
                    "online verify: blocks differ (marked out of sync)"
                );
            }
            Action::VerifyFinished {
                peer,
                volume,
                oos_bytes,
                skipped_bytes,
            } => self.verify_finished(core, peer, volume, oos_bytes, skipped_bytes),
            Action::SendOnData { peer, message } => {
                if let Some(link) = core.links.get(&peer) {
                    let _ = link.data.send(Outgoing::OnData(message));
                }
            }
            Action::SplitBrain {
                peer,
                volume,
                resolution,
                detail,
            } => self.split_brain(peer, volume, resolution, &detail),
            Action::SendData {
                peer,
                seq,
                epoch,
                volume,
                op,
            } => send_data(core, buffered, peer, seq, epoch, volume, op),
            Action::SendBarrier { peer, epoch, flush } => {
                if let Some(link) = core.links.get(&peer) {
                    let _ = link.data.send(Outgoing::Barrier { epoch, flush });
                }
            }
            Action::SendControl { peer, message } => {
                if let Some(link) = core.links.get(&peer) {
                    let _ = link.control.send(Outgoing::Control(message));
                }
            }
            Action::Disconnect {
                peer,
                state,
                reason,
            } => self.disconnect_link(core, peer, state, reason),
            _ => unreachable!("route handles the local actions"),
        }
    }

    /// An online verify finished: persists its result and runs the out-of-sync handler.
    fn verify_finished(
        &self,
        core: &mut Core,
        peer: u8,
        volume: u16,
        oos_bytes: u64,
        skipped_bytes: u64,
    ) {
        let peer_name = self.peer_name(peer);
        tracing::info!(
            resource = %self.name, peer = %peer_name, volume, oos_bytes, skipped_bytes,
            "online verify finished"
        );
        let job = self.persist_job(core, volume, None);
        self.writebacks_queued.fetch_add(1, Ordering::AcqRel);
        self.queue_meta(
            volume,
            job,
            MetaDone::Log(Arc::clone(&self.writebacks_queued)),
        );
        if oos_bytes > 0 {
            let event = self.handler_event(Some(volume), Some(peer), Some(&peer_name));
            handlers::run(&self.handlers, "out-of-sync", &event);
        }
    }

    /// A split brain was detected: logs it and runs the handlers of its resolution.
    fn split_brain(&self, peer: u8, volume: u16, resolution: Resolution, detail: &str) {
        let peer_name = self.peer_name(peer);
        tracing::error!(
            resource = %self.name, peer = %peer_name, volume, ?resolution,
            "split brain detected: {detail}"
        );
        let event = self.handler_event(Some(volume), Some(peer), Some(&peer_name));
        handlers::run(&self.handlers, "initial-split-brain", &event);
        match resolution {
            Resolution::Disconnect => handlers::run(&self.handlers, "split-brain", &event),
            Resolution::CallPriLostAfterSb => {
                handlers::run(&self.handlers, "pri-lost-after-sb", &event)
            }
            Resolution::DiscardLocal | Resolution::DiscardRemote => {}
        }
    }

    /// The engine detached a volume (Diskless now).
    fn detached(&self, volume: u16, failed: bool, call_handler: bool) {
        if let Some(disk) = self.disk(volume) {
            disk.set_detached(true);
        }
        if failed {
            tracing::error!(
                resource = %self.name, volume,
                "local disk I/O error: detached, Diskless; I/O goes through the peers (on-io-error)"
            );
        } else {
            tracing::info!(resource = %self.name, volume, "detached: Diskless");
        }
        if call_handler {
            let event = self.handler_event(Some(volume), None, None);
            handlers::run(&self.handlers, "local-io-error", &event);
        }
    }

    /// The engine dropped a peer: the link says goodbye after what is queued, then stops.
    fn disconnect_link(
        &self,
        core: &mut Core,
        peer: u8,
        state: ConnState,
        reason: DisconnectReason,
    ) {
        if let Some(link) = core.links.remove(&peer) {
            tracing::warn!(
                resource = %self.name, peer = %self.peer_name(peer),
                "dropping connection ({state}): {reason}"
            );
            let reason = reason.to_string();
            let _ = link.data.send(Outgoing::Close {
                reason: reason.clone(),
            });
            let _ = link.control.send(Outgoing::Close { reason });
            let _ = link.kill.send(crate::peer::Stop::Drain);
        }
    }

    /// A client request completed: counts a write's latency and answers the client.
    fn complete(&self, core: &mut Core, request: RequestId, result: Result<(), IoError>) {
        if let Some(started) = core.write_started.remove(&request) {
            let nanos = self.now().0.saturating_sub(started.0);
            self.write_counters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .completed(std::time::Duration::from_nanos(nanos));
        }
        if let Some(completion) = core.completions.remove(&request) {
            match result {
                Ok(()) => completion.ok(),
                Err(error) => {
                    tracing::debug!(
                        resource = %self.name, request, ?error,
                        quorum = core.engine.has_quorum(), role = ?core.engine.role(),
                        "client request failed"
                    );
                    completion.error(crate::export::errno_of(error))
                }
            }
        }
    }

    /// Counts a client write for the manager's write pattern (only while it runs).
    pub(crate) fn note_write(&self, offset: u64, length: u64) {
        if self.options.srm != config::Srm::Off {
            self.write_counters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .note(offset, length);
        }
    }

    /// Runs `before-resync-target` when a resync towards this node starts,
    /// `after-resync-target` when it ends, `before-resync-source` when one from this node
    /// starts, and `unfence-peer` (once per peer) when one from this node completes with
    /// fencing on, or when a peer fenced from here is back Established and UpToDate (fire
    /// and forget: the resync does not wait for them).
    fn resync_transitions(&self, engine: &Engine<Payload>) {
        let is_target =
            |state: ReplState| matches!(state, ReplState::SyncTarget | ReplState::PausedSyncT);
        let is_source =
            |state: ReplState| matches!(state, ReplState::SyncSource | ReplState::PausedSyncS);
        let now: Vec<(u8, u16, ReplState)> = engine
            .status()
            .peers
            .iter()
            .flat_map(|p| {
                p.volumes
                    .iter()
                    .map(|v| (p.node_id, v.volume, v.replication))
            })
            .collect();
        let before = std::mem::replace(
            &mut *self
                .repl_states
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            now.clone(),
        );
        let mut unfence = Vec::new();
        for (peer, volume, state) in now {
            let old = before
                .iter()
                .find(|(p, v, _)| (*p, *v) == (peer, volume))
                .map_or(ReplState::Off, |(_, _, s)| *s);
            let handler = match (
                is_target(old),
                is_target(state),
                is_source(old),
                is_source(state),
            ) {
                (false, true, _, _) => "before-resync-target",
                (true, false, _, _) => "after-resync-target",
                (_, _, false, true) => "before-resync-source",
                (_, _, true, false) if state == ReplState::Established => {
                    if !unfence.contains(&peer) {
                        unfence.push(peer);
                    }
                    continue;
                }
                _ => continue,
            };
            let peer_name = self.peer_name(peer);
            let event = self.handler_event(Some(volume), Some(peer), Some(&peer_name));
            handlers::run(&self.handlers, handler, &event);
        }
        // A peer fenced from here that is back in sync without a resync from us (the
        // handshake found nothing to move, or another node resynced it).
        let status = engine.status();
        let back = |peer: u8| {
            status.peers.iter().any(|p| {
                p.node_id == peer
                    && p.connection == ConnState::Connected
                    && !p.volumes.is_empty()
                    && p.volumes.iter().all(|v| {
                        v.replication == ReplState::Established
                            && v.peer_disk == repl::DiskState::UpToDate
                    })
            })
        };
        let fenced = self
            .fenced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for peer in fenced.into_iter().filter(|peer| back(*peer)) {
            if !unfence.contains(&peer) {
                unfence.push(peer);
            }
        }
        for peer in unfence {
            self.unfence(engine, peer);
        }
    }

    /// A resync from this node to `peer` finished, or a peer fenced from here is back
    /// Established and UpToDate: with fencing on, `unfence-peer` undoes what `fence-peer`
    /// may have done (DRBD's connection handler, no volume).
    fn unfence(&self, engine: &Engine<Payload>, peer: u8) {
        self.fenced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|p| *p != peer);
        if engine
            .fence_policy(peer)
            .is_some_and(|policy| policy != repl::FencePolicy::DontCare)
        {
            let peer_name = self.peer_name(peer);
            handlers::run(
                &self.handlers,
                "unfence-peer",
                &self.handler_event(None, Some(peer), Some(&peer_name)),
            );
        }
    }

    /// The device minor of `volume`, if the configuration gives one.
    pub(crate) fn minor(&self, volume: u16) -> Option<u32> {
        self.minors
            .iter()
            .find(|(number, _)| *number == volume)
            .map(|(_, minor)| *minor)
    }

    /// What a handler is told: DRBD's variables for this resource, `volume` and `peer`.
    fn handler_event<'a>(
        &'a self,
        volume: Option<u16>,
        peer: Option<u8>,
        peer_name: Option<&'a str>,
    ) -> HandlerEvent<'a> {
        let mut env = vec![("DRBD_MY_NODE_ID".to_string(), self.node_id.to_string())];
        if let Some(address) = self.listen.first() {
            env.push(("DRBD_MY_ADDRESS".into(), address.ip().to_string()));
            env.push(("DRBD_MY_AF".into(), address_family(address).into()));
        }
        if let Some(info) = peer.and_then(|id| self.peers.iter().find(|p| p.node_id == id)) {
            env.push(("DRBD_PEER_ADDRESS".into(), info.address.ip().to_string()));
            env.push(("DRBD_PEER_AF".into(), address_family(&info.address).into()));
        }
        for info in &self.peers {
            env.push((format!("DRBD_NODE_ID_{}", info.node_id), info.name.clone()));
        }
        if let Some(disk) = volume.and_then(|v| self.disk(v)) {
            env.push(("DRBD_BACKING_DEV".into(), disk.path().display().to_string()));
        }
        match volume {
            // A volume's handler: its minor. A connection's (fence-peer, unfence-peer): every
            // volume's, as DRBD_MINOR_<volume>, as DRBD does.
            Some(volume) => {
                if let Some(minor) = self.minor(volume) {
                    env.push(("DRBD_MINOR".into(), minor.to_string()));
                }
            }
            None => {
                for (number, minor) in &self.minors {
                    env.push((format!("DRBD_MINOR_{number}"), minor.to_string()));
                }
            }
        }
        if let Some(conf) = handlers::conf_path() {
            env.push(("DRBD_CONF".into(), conf.display().to_string()));
        }
        HandlerEvent {
            resource: &self.name,
            volume,
            peer_node_id: peer,
            peer_name,
            env,
            timeout: self.options.handler_timeout,
        }
    }

    /// Runs `fence-peer` against `peer` (engine's [`Action::FencePeer`]) and hands its status
    /// back; without a handler (or a free handler slot) the answer is a failure at once.
    fn fence_peer(self: &Arc<Self>, peer: u8) {
        let mut fenced = self
            .fenced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !fenced.contains(&peer) {
            fenced.push(peer);
        }
        drop(fenced);
        let peer_name = self.peer_name(peer);
        let event = self.handler_event(None, Some(peer), Some(&peer_name));
        let resource = Arc::downgrade(self);
        let on_exit: handlers::OnExit = Box::new(move |status| {
            if let Some(resource) = resource.upgrade() {
                resource.fence_peer_answered(peer, status);
            }
        });
        if !handlers::run_then(&self.handlers, "fence-peer", &event, Some(on_exit)) {
            tracing::error!(
                resource = %self.name, peer = %peer_name,
                "fencing is on but the fence-peer handler did not run (none configured, or too \
                 many handlers running)"
            );
            self.fence_peer_answered(peer, -1);
        }
    }

    fn fence_peer_answered(self: &Arc<Self>, peer: u8, status: i32) {
        match repl::fence_outcome(status) {
            Some(disk) => {
                tracing::info!(
                    resource = %self.name, peer = %self.peer_name(peer), status,
                    "fence-peer: the peer is {disk}"
                )
            }
            None => {
                tracing::error!(
                    resource = %self.name, peer = %self.peer_name(peer), status,
                    "fence-peer failed; with resource-and-stonith I/O stays frozen until 'tandem \
                     resume-io'"
                )
            }
        }
        self.step(|engine, now, out| engine.fence_peer_done(now, peer, status, out));
    }

    /// Logs quorum changes and runs `quorum-lost` when a Primary loses it.
    fn quorum_transition(&self, engine: &Engine<Payload>) {
        let now = engine.has_quorum();
        if self.had_quorum.swap(now, Ordering::AcqRel) == now {
            return;
        }
        if now {
            tracing::info!(resource = %self.name, "quorum regained");
            return;
        }
        if engine.role() != Role::Primary {
            tracing::info!(resource = %self.name, "no quorum: {}", engine.quorum_report());
            return;
        }
        tracing::error!(resource = %self.name, "quorum lost by the Primary: \
            {}", engine.quorum_report());
        {
            let event = self.handler_event(None, None, None);
            handlers::run(&self.handlers, "quorum-lost", &event);
        }
    }

    fn start_local_io(self: &Arc<Self>, action: Action<Payload>) {
        if let Action::FencePeer { peer } = action {
            self.fence_peer(peer);
            return;
        }
        if matches!(action, Action::ResizeOffer { .. } | Action::Grow { .. }) {
            self.resize_action(action);
            return;
        }
        let throttled = self.volumes.iter().any(|(_, disk)| disk.waits_for_device());
        let action = if throttled {
            action
        } else {
            match self.write_as_it_arrives(action) {
                Ok(()) => return,
                Err(action) => action,
            }
        };
        let inline = !throttled && runs_inline(&action);
        let arriving = match &action {
            Action::LocalWrite {
                op: DiskOp::Write { data, .. },
                ..
            } if data.data.as_complete().is_none() => Some(data.data.clone()),
            _ => None,
        };
        let resource = Arc::clone(self);
        let job = move || {
            let (io, result) = match action {
                Action::LocalWrite { io, volume, op } => (io, resource.disk_op(volume, op)),
                Action::LocalFlush { io } => (io, resource.flush_all()),
                Action::LocalDigest {
                    io,
                    volume,
                    offset,
                    length,
                    block_bytes,
                    alg,
                } => {
                    let result = resource.digest(io, volume, offset, length, block_bytes, alg);
                    resource
                        .step(|engine, now, out| engine.local_digest_done(now, io, result, out));
                    return;
                }
                Action::LocalRead {
                    io,
                    volume,
                    offset,
                    length,
                } => {
                    let result = resource.read_payload(volume, offset, length);
                    resource.step(|engine, now, out| engine.local_read_done(now, io, result, out));
                    return;
                }
                _ => return,
            };
            if let Err(error) = result {
                tracing::error!(resource = %resource.name, ?io, "local I/O failed: {error}");
            }
            resource.step(|engine, now, out| engine.local_done(now, io, result, out));
        };
        if inline {
            self.run_inline(Box::new(job));
        } else if let Some(arriving) = arriving {
            self.start_arriving_write(arriving, Box::new(job));
        } else {
            self.io.run(Box::new(job));
        }
    }

    /// A write whose payload is still arriving is written by the payload's filler, piece by
    /// piece as it reads them (the NBD reader or the peer receiver; see
    /// [`bufpool::Incoming::on_piece`]): receiving and writing alternate on one thread, and
    /// no I/O thread waits for the payload or is woken for each piece. Measured with protocol
    /// C, 1 MiB sequential writes: 25 -> 15 context switches per request on the Primary, 22 -> 14
    /// on the Secondary.
    /// Any other action is handed back.
    fn write_as_it_arrives(
        self: &Arc<Self>,
        action: Action<Payload>,
    ) -> Result<(), Action<Payload>> {
        let Action::LocalWrite {
            io,
            volume,
            op:
                DiskOp::Write {
                    offset,
                    length,
                    data,
                    fua,
                },
        } = &action
        else {
            return Err(action);
        };
        if data.data.as_complete().is_some() {
            return Err(action);
        }
        let Some(disk) = self.disk(*volume).map(Arc::clone) else {
            return Err(action);
        };
        let Ok(mut writer) = disk.piece_writer(*offset, *length, *fua) else {
            return Err(action);
        };
        let (io, resource) = (*io, Arc::clone(self));
        // Keeps the receive-buffer permit until the write is over.
        let mut payload = Some(data.clone());
        let sink: bufpool::OnPiece = Box::new(move |piece| {
            let Some(result) = writer.feed(&disk, piece) else {
                return false;
            };
            if let Err(error) = result {
                tracing::error!(resource = %resource.name, ?io, "local I/O failed: {error}");
            }
            resource.step(|engine, now, out| engine.local_done(now, io, result, out));
            payload.take();
            true
        });
        match data.data.on_piece(sink) {
            Ok(()) => Ok(()),
            Err(_) => Err(action),
        }
    }

    /// Runs a cheap local write on this thread. One released while this thread already runs
    /// inline jobs waits for that run to get to it (a trampoline, not a nested call); a run
    /// hands what is left to the I/O threads after [`INLINE_RUN_MAX`] jobs.
    fn run_inline(self: &Arc<Self>, job: crate::io_workers::Job) {
        if INLINE_RUNNING.with(|running| running.get()) {
            INLINE_QUEUE.with(|queue| queue.borrow_mut().push_back((Arc::clone(self), job)));
            return;
        }
        INLINE_RUNNING.with(|running| running.set(true));
        job();
        let mut ran = 1;
        while let Some((resource, job)) = INLINE_QUEUE.with(|queue| queue.borrow_mut().pop_front())
        {
            if ran >= INLINE_RUN_MAX {
                resource.io.run(job);
                continue;
            }
            job();
            ran += 1;
        }
        INLINE_RUNNING.with(|running| running.set(false));
    }

    /// A write whose payload is still arriving: written as it arrives by an I/O thread if
    /// one may wait for it; otherwise queued once the payload is all here. So slow senders
    /// can never hold every I/O thread.
    fn start_arriving_write(self: &Arc<Self>, arriving: Incoming, job: crate::io_workers::Job) {
        if self.writes_arriving.fetch_add(1, Ordering::AcqRel) < WRITES_ARRIVING_MAX {
            let resource = Arc::clone(self);
            self.io.run(Box::new(move || {
                job();
                resource.writes_arriving.fetch_sub(1, Ordering::AcqRel);
            }));
        } else {
            self.writes_arriving.fetch_sub(1, Ordering::AcqRel);
            let resource = Arc::clone(self);
            arriving.on_arrival(Box::new(move || resource.io.run(job)));
        }
    }

    fn disk(&self, volume: u16) -> Option<&Arc<Disk>> {
        self.volumes
            .iter()
            .find(|(number, _)| *number == volume)
            .map(|(_, disk)| disk)
    }

    /// How `volume`'s backing disk was opened (`io`); None without a disk.
    pub(crate) fn disk_io(&self, volume: u16) -> Option<config::DiskIo> {
        self.disk(volume).map(|disk| disk.io())
    }

    fn disk_op(&self, volume: u16, op: DiskOp<Payload>) -> Result<(), IoError> {
        let disk = self.disk(volume).ok_or(IoError::Invalid)?;
        if disk.is_detached() {
            // A write that raced with the detach: refused, so the peer marks it for us.
            return Err(IoError::Io);
        }
        match op {
            DiskOp::Write {
                offset, data, fua, ..
            } => disk.write_incoming(offset, &data.data, fua),
            DiskOp::Trim {
                offset,
                length,
                fua,
            } => disk.zero(offset, length, true, fua),
            DiskOp::WriteZeroes {
                offset,
                length,
                fua,
            } => disk.zero(offset, length, false, fua),
        }
    }

    /// The digests of a range (verify or csums), one per `block_bytes`, with the peer's
    /// configured algorithm.
    fn digest(
        &self,
        io: repl::IoId,
        volume: u16,
        offset: u64,
        length: u64,
        block_bytes: u32,
        alg: repl::DigestAlg,
    ) -> Result<Vec<u8>, IoError> {
        use repl::IoId;
        let peer = match io {
            IoId::VerifyRead { peer, .. }
            | IoId::VerifyPeerRead { peer, .. }
            | IoId::CsumRead { peer, .. }
            | IoId::CsumPeerRead { peer, .. } => peer,
            _ => return Err(IoError::Invalid),
        };
        let info = self
            .peers
            .iter()
            .find(|p| p.node_id == peer)
            .ok_or(IoError::Invalid)?;
        let kind = match alg {
            repl::DigestAlg::Verify => info.verify_alg,
            repl::DigestAlg::Csums => info.csums_alg,
        }
        .ok_or(IoError::NotSupported)?;
        let data = self.read_payload(volume, offset, length)?;
        let bytes = data.data.as_complete().ok_or(IoError::Io)?;
        Ok(kind.digest_blocks(
            bytes,
            usize::try_from(block_bytes).map_err(|_| IoError::Invalid)?,
        ))
    }

    /// Read a range for a resync reply.
    fn read_payload(&self, volume: u16, offset: u64, length: u64) -> Result<Payload, IoError> {
        let length = usize::try_from(length).map_err(|_| IoError::Invalid)?;
        let mut buf = self.pool.take(length).ok_or(IoError::Invalid)?;
        self.disk(volume)
            .ok_or(IoError::Invalid)?
            .read(offset, &mut buf)?;
        Ok(Payload {
            data: Incoming::complete(buf),
            _permit: None,
        })
    }

    /// Hand a metadata job to the volume's writer (called under the engine's lock, so jobs
    /// are written in the order their page images were taken).
    fn queue_meta(&self, volume: u16, job: MetaJob, done: MetaDone) {
        let Some((_, queue)) = self
            .meta_queues
            .iter()
            .find(|(number, _)| *number == volume)
        else {
            tracing::error!(resource = %self.name, volume, "no metadata writer for this volume");
            return;
        };
        if queue.send((job, done)).is_err() {
            tracing::error!(resource = %self.name, volume, "the metadata writer is gone");
        }
    }

    /// A `Persist` job for `volume`: every peer's dirty bitmap pages, taken now, then `meta`.
    fn persist_job(
        &self,
        core: &mut Core,
        volume: u16,
        meta: Option<Box<repl::VolumeMeta>>,
    ) -> MetaJob {
        let mut clears = false;
        let pages = self
            .peers
            .iter()
            .map(|peer| {
                let taken = core.engine.take_dirty_bitmap_pages(volume, peer.node_id);
                clears |= taken.clears;
                (peer.node_id, taken.pages)
            })
            .collect();
        MetaJob::Persist {
            pages,
            meta,
            clears,
        }
    }

    /// Queue every volume's dirty bitmap pages (and, with `with_meta`, the superblock as it is
    /// now) for writing; with `wait`, block until they are durable.
    /// Returns whether every write waited for succeeded (always true without `wait`).
    fn write_metadata(self: &Arc<Self>, with_meta: bool, wait: bool) -> bool {
        let mut waits = Vec::new();
        let mut ok = true;
        self.step_core(|core, _, _| {
            for (volume, _) in &self.metas {
                if core.engine.is_diskless(*volume) {
                    // Detached: its metadata stays as it was (the next attach or start
                    // handshakes from it); dirty pages wait in the engine.
                    continue;
                }
                let meta = if with_meta {
                    core.engine.meta(*volume).map(Box::new)
                } else {
                    None
                };
                let job = self.persist_job(core, *volume, meta);
                if job.is_empty() {
                    continue;
                }
                let done = if wait {
                    let (tx, rx) = std::sync::mpsc::sync_channel(1);
                    waits.push((*volume, rx));
                    MetaDone::Notify(tx)
                } else {
                    self.writebacks_queued.fetch_add(1, Ordering::AcqRel);
                    MetaDone::Log(Arc::clone(&self.writebacks_queued))
                };
                self.queue_meta(*volume, job, done);
            }
        });
        for (volume, rx) in waits {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    ok = false;
                    tracing::error!(
                        resource = %self.name, volume,
                        "cannot write the metadata: {error}"
                    );
                }
                Err(_) => {
                    ok = false;
                    tracing::error!(resource = %self.name, volume, "the metadata writer is gone");
                }
            }
        }
        ok
    }

    /// The periodic write-back of dirty bitmap pages (skipped while the previous one is
    /// still queued: a stalled metadata device does not make the queue grow).
    pub(crate) fn write_bitmaps_in_background(self: &Arc<Self>) {
        if self.writebacks_queued.load(Ordering::Acquire) == 0 {
            self.write_metadata(false, false);
        }
    }

    /// Clean shutdown: demote if no client holds the export (so the next start is not taken
    /// for a crash of the Primary), then write the bitmaps and the superblock as they are now
    /// and wait until they are durable.
    pub(crate) fn shut_down(self: &Arc<Self>) {
        if let Err(error) = self.step(|engine, _, out| engine.demote(out)) {
            tracing::warn!(
                resource = %self.name,
                "stopping as Primary ({error}): the next start resyncs as after a crash"
            );
        }
        if self.write_metadata(true, true) {
            self.mark_clean();
        }
    }

    /// The end of a clean stop: every volume with metadata clears its `in_use` flag, after
    /// everything queued before (the last bitmap write among them). A detached volume keeps
    /// it: its dirty pages were not written.
    fn mark_clean(self: &Arc<Self>) {
        let mut waits = Vec::new();
        for (volume, _) in &self.metas {
            if self.with_engine(|engine| engine.is_diskless(*volume)) {
                continue;
            }
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            self.queue_meta(*volume, MetaJob::Clean, MetaDone::Notify(tx));
            waits.push((*volume, rx));
        }
        for (volume, rx) in waits {
            if !matches!(rx.recv(), Ok(Ok(()))) {
                tracing::error!(
                    resource = %self.name, volume,
                    "cannot mark the metadata clean: the next start resyncs every absent peer in \
                     full"
                );
            }
        }
    }

    /// The first half of a clean stop, as `down` does it: demote if possible, then
    /// disconnect from every peer; a Secondary leaving a Primary outdates itself first
    /// (`repl::engine` leave.rs), which [`Resource::departing`] reports until done.
    pub(crate) fn leave_peers(self: &Arc<Self>) {
        let _ = self.step(|engine, _, out| engine.demote(out));
        let peers: Vec<u8> = self.peers.iter().map(|p| p.node_id).collect();
        for peer in peers {
            if let Err(error) =
                self.step(|engine, now, out| engine.set_connect(now, peer, false, out))
            {
                tracing::warn!(resource = %self.name, peer, "cannot disconnect: {error}");
            }
        }
    }

    /// Whether any peer link's tasks still run.
    pub(crate) fn links_up(&self) -> bool {
        self.link_tasks.load(Ordering::Acquire) > 0
    }

    /// Whether a graceful departure still waits for its metadata.
    pub(crate) fn departing(&self) -> bool {
        self.with_engine(Engine::departing)
    }

    /// Start one metadata writer thread per volume (see [`MetaJob`]).
    fn start_meta_writers(
        self: &Arc<Self>,
        receivers: Vec<(u16, MetaReceiver)>,
    ) -> std::io::Result<()> {
        for (volume, receiver) in receivers {
            let Some(store) = self
                .metas
                .iter()
                .find(|(number, _)| *number == volume)
                .map(|(_, store)| Arc::clone(store))
            else {
                continue;
            };
            let resource = Arc::downgrade(self);
            std::thread::Builder::new()
                .name(format!("tandem-meta-{}", self.name))
                .spawn(move || {
                    while let Ok((job, done)) = receiver.recv() {
                        let result = store.execute(&job);
                        match done {
                            MetaDone::Engine(io) => {
                                let Some(resource) = resource.upgrade() else {
                                    return;
                                };
                                resource.step(|engine, now, out| {
                                    engine.local_done(now, io, result, out)
                                });
                            }
                            MetaDone::Notify(tx) => {
                                let _ = tx.send(result);
                            }
                            MetaDone::Log(queued) => {
                                queued.fetch_sub(1, Ordering::AcqRel);
                                if let Err(error) = result {
                                    tracing::error!(volume, "cannot write the bitmap: {error}");
                                }
                            }
                        }
                    }
                })?;
        }
        Ok(())
    }

    fn flush_all(&self) -> Result<(), IoError> {
        self.volumes
            .iter()
            .filter(|(_, disk)| !disk.is_detached())
            .try_for_each(|(_, disk)| disk.flush())
    }

    /// Submit a client request: its completion waits in `completions` until the engine
    /// answers (one lock for both).
    pub(crate) fn submit(self: &Arc<Self>, volume: u16, op: Op<Payload>, completion: Completion) {
        let request: RequestId = self.next_request.fetch_add(1, Ordering::Relaxed);
        let timed = self.options.srm != config::Srm::Off && matches!(op, Op::Write { .. });
        self.step_core(|core, now, out| {
            core.completions.insert(request, completion);
            if timed {
                core.write_started.insert(request, now);
            }
            core.engine.submit(now, request, volume, op, out);
        });
    }

    /// Read from the local disk (client reads are served locally; the Primary is UpToDate).
    /// A detached disk's reads go to an UpToDate peer; a read that fails with a disk error
    /// detaches the disk under `on-io-error detach` and is then retried through the peer.
    pub(crate) fn read(
        self: &Arc<Self>,
        volume: u16,
        offset: u64,
        length: u32,
        completion: Completion,
    ) {
        let Some(HeldRead { completion, .. }) = self.held_reads.hold(HeldRead {
            volume,
            offset,
            length,
            completion,
        }) else {
            return;
        };
        if self.disk(volume).is_some_and(|disk| disk.is_detached()) {
            self.read_through_peer(volume, offset, length, completion);
            return;
        }
        let resource = Arc::clone(self);
        self.io.run(Box::new(move || {
            let Some(mut buf) = resource.pool.take(length as usize) else {
                completion.error(nbd::Errno::Inval);
                return;
            };
            let result = resource
                .disk(volume)
                .ok_or(IoError::Invalid)
                .and_then(|d| d.read(offset, &mut buf));
            match result {
                Ok(()) => completion.read_data(buf.freeze()),
                Err(IoError::Io)
                    if resource
                        .step(|engine, now, out| engine.local_read_failed(now, volume, out)) =>
                {
                    tracing::warn!(
                        resource = %resource.name, volume, offset, length,
                        "local read failed: read through a peer"
                    );
                    resource.read_through_peer(volume, offset, length, completion);
                }
                Err(error) => completion.error(crate::export::errno_of(error)),
            }
        }));
    }

    /// The running settings of the peer with `node_id`.
    pub(crate) fn live_peer(&self, node_id: u8) -> Option<PeerInfo> {
        let live = self
            .live_peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        live.iter().find(|p| p.node_id == node_id).cloned()
    }

    /// Records a peer's settings as now running.
    pub(crate) fn set_live_peer(&self, info: PeerInfo) {
        let mut live = self
            .live_peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match live.iter_mut().find(|p| p.node_id == info.node_id) {
            Some(entry) => *entry = info,
            None => live.push(info),
        }
    }

    /// `suspend-io`: new client writes wait in the engine, new reads here, until `resume-io`.
    pub(crate) fn suspend_io(self: &Arc<Self>) {
        self.held_reads.suspend();
        self.step(|engine, _, out| engine.suspend_io(out));
    }

    /// `resume-io`: lifts `suspend-io` and fencing's freeze; the held writes and reads go on.
    pub(crate) fn resume_io(self: &Arc<Self>) -> Result<(), repl::StateError> {
        let resumed = self.step(|engine, now, out| engine.resume_io(now, out));
        for read in self.held_reads.resume() {
            self.read(read.volume, read.offset, read.length, read.completion);
        }
        resumed
    }

    /// `attach`: every Diskless volume that has a backing disk shows Attaching, is checked
    /// with a read, and is attached again (then resyncs from its peers) or stays Diskless.
    /// A `disk none;` volume cannot be attached.
    pub(crate) fn attach(self: &Arc<Self>) -> Result<(), String> {
        let numbers: Vec<u16> =
            self.with_engine(|engine| engine.status().volumes.iter().map(|v| v.volume).collect());
        let mut attached = 0;
        for volume in numbers {
            if !self.with_engine(|engine| engine.is_diskless(volume)) {
                continue;
            }
            let Some(disk) = self.disk(volume).map(Arc::clone) else {
                return Err(format!(
                    "volume {volume} is configured without a disk (disk none;)"
                ));
            };
            self.step(|engine, _, out| engine.begin_attach(volume, out))
                .map_err(|e| format!("State change failed: {e}"))?;
            let mut probe = vec![0; 4096];
            let usable = disk.read(0, &mut probe).and_then(|()| disk.flush());
            if usable.is_ok() {
                disk.set_detached(false);
            }
            self.step(|engine, now, out| engine.finish_attach(now, volume, usable.is_ok(), out));
            usable.map_err(|error| {
                format!("volume {volume}: the disk still fails ({error}); Diskless")
            })?;
            tracing::info!(
                resource = %self.name, volume,
                "attached; resyncing what it missed from the peers"
            );
            attached += 1;
        }
        if attached == 0 {
            return Err("no volume is Diskless; nothing to attach".into());
        }
        Ok(())
    }

    /// A client read of a Diskless volume, sent to a peer by the engine.
    fn read_through_peer(
        self: &Arc<Self>,
        volume: u16,
        offset: u64,
        length: u32,
        completion: Completion,
    ) {
        let request: RequestId = self.next_request.fetch_add(1, Ordering::Relaxed);
        self.step_core(|core, _, out| {
            core.completions.insert(request, completion);
            core.engine
                .read_through_peer(request, volume, offset, u64::from(length), out);
        });
    }

    /// `get-gi`: the generation identifiers of the volumes and peers `filter` names, as the
    /// engine holds them now (applied over the superblock last written).
    pub(crate) fn generations(
        &self,
        filter: &crate::metadata::GiFilter,
    ) -> Result<Vec<admin::Generations>, String> {
        let (status, metas, fencing) = self.with_engine(|engine| {
            let metas: Vec<_> = self
                .metas
                .iter()
                .map(|(volume, store)| (*volume, engine.meta(*volume), Arc::clone(store)))
                .collect();
            let fencing: Vec<bool> = self
                .peers
                .iter()
                .map(|p| {
                    engine
                        .fence_policy(p.node_id)
                        .is_some_and(|policy| policy != repl::FencePolicy::DontCare)
                })
                .collect();
            (engine.status(), metas, fencing)
        });
        let peers: Vec<crate::metadata::GiPeer> = self
            .peers
            .iter()
            .zip(fencing)
            .map(|(p, fencing)| {
                let connected = status
                    .peers
                    .iter()
                    .any(|s| s.node_id == p.node_id && s.connection == ConnState::Connected);
                crate::metadata::GiPeer {
                    name: p.name.clone(),
                    node_id: p.node_id,
                    connected,
                    fencing,
                }
            })
            .collect();
        let mut records = Vec::new();
        for (volume, meta, store) in metas
            .into_iter()
            .filter(|(volume, ..)| filter.volume.is_none_or(|wanted| *volume == wanted))
        {
            let mut superblock = store.written();
            if let Some(meta) = meta {
                meta.apply_to(&mut superblock);
            }
            records.extend(crate::metadata::volume_generations(
                &superblock,
                (&self.name, volume),
                &peers,
                filter,
            )?);
        }
        match (filter.volume, records.is_empty()) {
            (Some(volume), true) => Err(format!("no volume {volume} with a disk on this node")),
            _ => Ok(records),
        }
    }

    pub(crate) fn peer_name(&self, node_id: u8) -> String {
        self.peers
            .iter()
            .find(|p| p.node_id == node_id)
            .map_or_else(|| format!("node-{node_id}"), |p| p.name.clone())
    }

    /// Install a freshly handshaken link and tell the engine; returns its generation.
    pub(crate) fn link_up(
        self: &Arc<Self>,
        peer: u8,
        data: mpsc::UnboundedSender<Outgoing>,
        control: mpsc::UnboundedSender<Outgoing>,
        kill: watch::Sender<crate::peer::Stop>,
        socket: Option<OwnedFd>,
    ) -> (u64, Arc<AsyncBuffer>) {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let tuning = self.tuning(peer);
        let buffer = AsyncBuffer::new(Arc::clone(&tuning));
        let link = LinkTx {
            generation,
            data,
            control,
            kill,
            socket,
            buffer: Arc::clone(&buffer),
        };
        self.step_core(|core, now, out| {
            if let Some(old) = core.links.insert(peer, link) {
                let _ = old.kill.send(crate::peer::Stop::Now);
            }
            core.engine.peer_connected(now, peer, out);
        });
        (generation, buffer)
    }

    /// The live link settings of `peer` (a fresh default for an unknown peer).
    pub(crate) fn tuning(&self, peer: u8) -> Arc<LinkTuning> {
        match self.tunings.iter().find(|(id, _)| *id == peer) {
            Some((_, tuning)) => Arc::clone(tuning),
            None => LinkTuning::new(&config::NetOptions::default()),
        }
    }

    /// A new `sndbuf-size` for `peer`, applied to its running data socket at once.
    pub(crate) fn set_sndbuf(&self, peer: u8, bytes: u64) -> std::io::Result<()> {
        self.tuning(peer).set_sndbuf_bytes(bytes);
        let core = self.lock();
        match core.links.get(&peer).and_then(|link| link.socket.as_ref()) {
            Some(socket) => crate::link_tuning::apply_sndbuf(socket, bytes),
            None => Ok(()),
        }
    }

    /// The kernel's view of `peer`'s data connection (None when not connected).
    pub(crate) fn tcp_info(&self, peer: u8) -> Option<srm::TcpInfo> {
        let core = self.lock();
        core.links
            .get(&peer)
            .and_then(|link| link.socket.as_ref())
            .and_then(crate::link_tuning::tcp_info)
    }

    /// Bytes waiting in `peer`'s async buffer (0 when not connected).
    pub(crate) fn async_buffered_bytes(&self, peer: u8) -> u64 {
        self.lock()
            .links
            .get(&peer)
            .map_or(0, |link| link.buffer.queued_bytes())
    }

    /// A link's tasks ended; unless the engine already dropped it, tell the engine.
    pub(crate) fn link_down(
        self: &Arc<Self>,
        peer: u8,
        generation: u64,
        state: ConnState,
        reason: String,
    ) {
        self.step_core(|core, now, out| {
            let current = core
                .links
                .get(&peer)
                .is_some_and(|link| link.generation == generation);
            if current {
                core.links.remove(&peer);
                tracing::warn!(
                    resource = %self.name, peer = %self.peer_name(peer),
                    "connection lost ({state}): {reason}"
                );
                core.engine.peer_disconnected(now, peer, state, reason, out);
            }
        });
    }
}
/// Queues a replicated write on the peer's data socket; under protocol A it is reported
/// sent at once if the link's async buffer takes it (`buffered`).
fn send_data(
    core: &Core,
    buffered: &mut Vec<(u8, u64)>,
    peer: u8,
    seq: u64,
    epoch: u64,
    volume: u16,
    op: DiskOp<Payload>,
) {
    if let Some(link) = core.links.get(&peer) {
        let mut report_sent = core.engine.protocol_in_effect(peer) == Some(repl::Protocol::A);
        let length = disk_op_bytes(&op);
        let mut in_buffer = 0;
        if report_sent && link.buffer.try_admit(length) {
            (report_sent, in_buffer) = (false, length);
            buffered.push((peer, seq));
        }
        let _ = link.data.send(Outgoing::Data {
            seq,
            epoch,
            volume,
            op,
            report_sent,
            buffered: in_buffer,
        });
    }
}
