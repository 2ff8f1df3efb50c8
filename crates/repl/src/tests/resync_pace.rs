//! Resync pacing tests at the engine level (drbd-semantics.md §1, `resync-rate`, the `c-*`
//! options and `max-buffers`): a full sync between two engines over an instant link, stepped
//! by hand. The payload is `()`, so large volumes cost nothing; the rig counts the bytes the
//! target requests and writes, and checks the data in flight against `max-buffers` after every
//! message the target sends.

use std::collections::BTreeMap;

use super::*;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 4096;
/// Big enough that no test below finishes its resync early.
const PACE_VOLUME_BYTES: u64 = 256 * MIB;
/// Ticks in a simulated second.
const TICKS_PER_S: u64 = 10;

/// Two engines with `()` payloads, A the sync source of a full sync towards B, and counters.
struct Rig {
    nodes: [Engine<()>; 2],
    now: Time,
    /// Messages on their way to node i (data and control in one FIFO: the link is instant).
    inbox: [VecDeque<PeerMessage<()>>; 2],
    /// Local I/O issued by node i and not yet performed.
    local: [VecDeque<Action<()>>; 2],
    /// B's resync requests not yet acknowledged (written): id → bytes.
    outstanding: BTreeMap<u64, u64>,
    outstanding_bytes: u64,
    /// `max-buffers` in bytes.
    in_flight_max_bytes: u64,
    /// The most B ever had in flight.
    outstanding_peak_bytes: u64,
    /// Resync bytes B requested / wrote, in all.
    requested_bytes: u64,
    written_bytes: u64,
    /// Resync requests B issued during `settle`, after the tick's own batch (refills).
    requested_between_ticks_bytes: u64,
    settling: bool,
    completed: u64,
}

impl Rig {
    /// Fresh disks, connected, A promoted with `--force`: a full sync of the volume.
    fn full_sync(resync: ResyncRateConfig, max_buffers_pages: u32) -> Rig {
        let engine = |node_id: u8, peer: u8| {
            let mut config = peer_config(peer, Protocol::C);
            config.resync = resync;
            config.max_buffers_pages = max_buffers_pages;
            let volume = VolumeConfig::fresh(0, PACE_VOLUME_BYTES);
            let seed = 0x5eed + u64::from(node_id);
            let config = EngineConfig {
                node_id,
                volumes: vec![volume],
                peers: vec![config],
                random_seed: seed,
            };
            Engine::new(config).expect("valid test configuration")
        };
        let mut rig = Rig {
            nodes: [engine(0, 1), engine(1, 0)],
            now: Time(1),
            inbox: [VecDeque::new(), VecDeque::new()],
            local: [VecDeque::new(), VecDeque::new()],
            outstanding: BTreeMap::new(),
            outstanding_bytes: 0,
            in_flight_max_bytes: u64::from(max_buffers_pages) * BLOCK,
            outstanding_peak_bytes: 0,
            requested_bytes: 0,
            written_bytes: 0,
            requested_between_ticks_bytes: 0,
            settling: false,
            completed: 0,
        };
        for node in [A, B] {
            let mut out = Vec::new();
            rig.nodes[node].peer_connected(rig.now, 1 - node as u8, &mut out);
            rig.route(node, out);
        }
        rig.settle();
        let mut out = Vec::new();
        rig.nodes[A]
            .promote(Promotion::Forced, &mut out)
            .expect("primary --force");
        rig.route(A, out);
        rig.settle();
        // Unbounded settings may finish the whole resync right here.
        assert!(
            rig.replication(B) == ReplState::SyncTarget || rig.written_bytes == PACE_VOLUME_BYTES
        );
        rig.requested_between_ticks_bytes = 0;
        rig
    }

    fn replication(&self, node: usize) -> ReplState {
        self.nodes[node].status().peers[0].volumes[0].replication
    }

    fn route(&mut self, from: usize, actions: Vec<Action<()>>) {
        let to = 1 - from;
        for action in actions {
            match action {
                Action::LocalWrite { .. }
                | Action::LocalFlush { .. }
                | Action::LocalRead { .. }
                | Action::PersistMeta { .. }
                | Action::WriteActivityLog { .. } => self.local[from].push_back(action),
                Action::SendOnData { message, .. } | Action::SendControl { message, .. } => {
                    if from == B {
                        self.count(&message);
                    }
                    self.inbox[to].push_back(message);
                }
                Action::SendData {
                    seq,
                    epoch,
                    volume,
                    op,
                    ..
                } => {
                    let DiskOp::Write { offset, .. } = op else {
                        panic!("the tests only write")
                    };
                    self.inbox[to].push_back(PeerMessage::Data {
                        seq,
                        epoch,
                        volume,
                        offset,
                        op,
                    });
                    let mut out = Vec::new();
                    self.nodes[from].peer_sent(self.now, to as u8, seq, &mut out);
                    self.route(from, out);
                }
                Action::SendBarrier { epoch, flush, .. } => {
                    self.inbox[to].push_back(PeerMessage::Barrier { epoch, flush })
                }
                Action::Complete { result, .. } => {
                    assert!(result.is_ok(), "an application write failed");
                    self.completed += 1;
                }
                Action::Disconnect { reason, .. } => panic!("node {from} disconnected: {reason}"),
                Action::SplitBrain { detail, .. } => panic!("split brain: {detail}"),
                Action::LocalDigest { .. }
                | Action::VerifyFound { .. }
                | Action::VerifyFinished { .. } => {
                    panic!("the pacing tests run no verify and no csums")
                }
                Action::Detached { .. } | Action::ReadDone { .. } => {
                    panic!("the pacing tests fail no disk")
                }
                Action::FencePeer { .. } => panic!("the pacing tests set no fencing"),
                Action::ResizeOffer { .. } | Action::Grow { .. } => {
                    panic!("the pacing tests do not resize")
                }
                Action::StateChanged => {}
            }
        }
    }

    /// Counts B's resync requests and acks, and checks `max-buffers` at this step.
    fn count(&mut self, message: &PeerMessage<()>) {
        match *message {
            PeerMessage::ResyncRequest { id, length, .. } => {
                self.outstanding.insert(id, length);
                self.outstanding_bytes += length;
                self.requested_bytes += length;
                if self.settling {
                    self.requested_between_ticks_bytes += length;
                }
                self.outstanding_peak_bytes =
                    self.outstanding_peak_bytes.max(self.outstanding_bytes);
                assert!(
                    self.outstanding_bytes <= self.in_flight_max_bytes,
                    "{} bytes in flight, max-buffers is {}",
                    self.outstanding_bytes,
                    self.in_flight_max_bytes
                );
            }
            PeerMessage::ResyncAck { id, ok, .. } => {
                assert!(ok, "resync write {id} failed");
                let length = self
                    .outstanding
                    .remove(&id)
                    .expect("an ack answers a request");
                self.outstanding_bytes -= length;
                self.written_bytes += length;
            }
            _ => {}
        }
    }

    /// Delivers every message and performs every local I/O until nothing moves: on an
    /// instant link every reply comes back at once.
    fn settle(&mut self) {
        self.settling = true;
        loop {
            let mut moved = false;
            for node in [A, B] {
                if let Some(message) = self.inbox[node].pop_front() {
                    let mut out = Vec::new();
                    self.nodes[node].peer_message(self.now, 1 - node as u8, message, &mut out);
                    self.route(node, out);
                    moved = true;
                }
                if let Some(action) = self.local[node].pop_front() {
                    self.perform(node, action);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        self.settling = false;
    }

    fn perform(&mut self, node: usize, action: Action<()>) {
        let mut out = Vec::new();
        match action {
            Action::LocalRead { io, .. } => {
                self.nodes[node].local_read_done(self.now, io, Ok(()), &mut out)
            }
            Action::LocalWrite { io, .. }
            | Action::LocalFlush { io }
            | Action::PersistMeta { io, .. }
            | Action::WriteActivityLog { io, .. } => {
                self.nodes[node].local_done(self.now, io, Ok(()), &mut out)
            }
            _ => unreachable!("only local I/O is queued"),
        }
        self.route(node, out);
    }

    /// One tick on both nodes (the target issues the tick's budget), then everything
    /// settles (the target refills its window as the replies come back).
    fn step(&mut self) {
        self.now = self.now.after(TICK_INTERVAL);
        for node in [A, B] {
            let mut out = Vec::new();
            self.nodes[node].tick(self.now, &mut out);
            self.route(node, out);
        }
        self.settle();
    }

    /// A 4 KiB application write on the Primary, replicated to B (application I/O for the
    /// `c-min-rate` rule).
    fn application_write(&mut self, request: RequestId) {
        let offset = PACE_VOLUME_BYTES - BLOCK * (1 + request % 16);
        let op = Op::Write {
            offset,
            length: BLOCK,
            data: (),
            flags: WriteFlags::default(),
        };
        let mut out = Vec::new();
        self.nodes[A].submit(self.now, request, 0, op, &mut out);
        self.route(A, out);
    }
}

/// Dynamic mode with c-fill-target 100 sectors: the target's window (the controller's aim).
fn default_window_bytes() -> u64 {
    u64::from(ResyncRateConfig::default().c_fill_target_sectors) * 512
}

/// The bug of issue 3: with DRBD's default options (c-fill-target 100 sectors = 50 KiB in
/// flight) the target issued only a per-tick credit, about 0.5 MiB/s even on loopback. Now
/// the window is refilled as replies arrive, so on an instant link the resync runs at the
/// default c-max-rate (100 MiB/s), never above it, and never with more than the window in
/// flight once the tick's budget is spent.
#[test]
fn default_options_refill_the_window_as_replies_arrive() {
    let config = ResyncRateConfig::default();
    let mut rig = Rig::full_sync(config, 2048);
    let start = rig.requested_bytes;
    for _ in 0..TICKS_PER_S {
        rig.step();
    }
    let moved_bytes = rig.written_bytes;
    assert!(
        moved_bytes >= 20 * MIB,
        "{} KiB in a simulated second",
        moved_bytes / 1024
    );
    let max_rate_bytes = u64::from(config.c_max_rate_kib_per_s) * 1024;
    let requested = rig.requested_bytes - start;
    assert!(
        requested <= max_rate_bytes + BLOCK,
        "{requested} bytes requested in one second"
    );
    assert!(
        rig.requested_between_ticks_bytes > 0,
        "refilled between ticks"
    );
    // The tick's budget may overdraw the window by less than a block; refills never pass it.
    let peak = rig.outstanding_peak_bytes;
    assert!(
        peak < default_window_bytes() + BLOCK,
        "peak {peak} bytes in flight"
    );
}

/// c-max-rate caps the refilled resync: at every tick the bytes requested stay within the
/// rate times the time since the start (plus one block), and over 5 simulated seconds the
/// resync moves the rate's worth within 10%.
#[test]
fn c_max_rate_caps_the_refilled_resync() {
    let rate_kib_per_s = 10 * 1024;
    let config = ResyncRateConfig {
        c_max_rate_kib_per_s: rate_kib_per_s,
        ..ResyncRateConfig::default()
    };
    let mut rig = Rig::full_sync(config, 2048);
    let rate_bytes_per_tick = u64::from(rate_kib_per_s) * 1024 / TICKS_PER_S;
    for tick in 1..=5 * TICKS_PER_S {
        rig.step();
        // The interval opened at connect counts too: tick + 1 intervals so far.
        let allowed = rate_bytes_per_tick * (tick + 1) + BLOCK;
        assert!(
            rig.requested_bytes <= allowed,
            "tick {tick}: {} > {allowed}",
            rig.requested_bytes
        );
    }
    let expected = 50 * MIB;
    let moved = rig.written_bytes;
    assert!(
        moved.abs_diff(expected) <= expected / 10,
        "{} KiB in 5 s at 10 MiB/s",
        moved / 1024
    );
}

/// While application writes arrive and c-min-rate is set, the resync yields down to
/// c-min-rate (the refills too); once the application stops it speeds up again.
#[test]
fn application_io_caps_the_resync_at_c_min_rate() {
    let config = ResyncRateConfig {
        c_min_rate_kib_per_s: 1024,
        ..ResyncRateConfig::default()
    };
    let mut rig = Rig::full_sync(config, 2048);
    let seconds = 3;
    let start = rig.requested_bytes;
    for request in 0..seconds * TICKS_PER_S {
        rig.application_write(request);
        rig.step();
    }
    assert_eq!(
        rig.completed,
        seconds * TICKS_PER_S,
        "every application write completed"
    );
    let requested = rig.requested_bytes - start;
    let expected = seconds * MIB;
    assert!(
        requested.abs_diff(expected) <= expected / 10,
        "{} KiB in {seconds} s at 1 MiB/s",
        requested / 1024
    );
    let idle_start = rig.requested_bytes;
    rig.step();
    rig.step();
    assert!(
        rig.requested_bytes - idle_start > 2 * MIB,
        "no application I/O: full speed again"
    );
}

/// Fixed mode (`c-plan-ahead 0`) is unchanged: requests only from the tick's budget
/// (resync-rate × time, carried), never on arrivals; the bytes requested never run ahead of
/// the rate by a block or more and keep up with it.
#[test]
fn fixed_mode_issues_only_the_rate() {
    let rate_kib_per_s = 4096;
    let config = ResyncRateConfig {
        c_plan_ahead: Duration::ZERO,
        resync_rate_kib_per_s: rate_kib_per_s,
        ..ResyncRateConfig::default()
    };
    let mut rig = Rig::full_sync(config, 2048);
    for tick in 1..=20 {
        rig.step();
        // The rate over tick + 1 intervals (the one opened at connect counts too).
        let allowed = u64::from(rate_kib_per_s) * 1024 * (tick + 1) / TICKS_PER_S;
        assert!(
            rig.requested_bytes <= allowed + BLOCK,
            "tick {tick}: {} > {allowed}",
            rig.requested_bytes
        );
        assert!(
            rig.requested_bytes + 1 >= allowed,
            "tick {tick}: {} < {allowed}",
            rig.requested_bytes
        );
    }
    // Every request of a tick's budget goes out in its tick call, before anything settles,
    // except where max-buffers held some back (not here: 420 KiB per tick, 8 MiB of buffers).
    assert_eq!(
        rig.requested_between_ticks_bytes, 0,
        "no refills in fixed mode"
    );
}

/// max-buffers is the hard cap on data in flight, whatever the controller allows: checked
/// after every request the target sends (in `Rig::count`), with a window far above it.
#[test]
fn max_buffers_bounds_data_in_flight_at_every_step() {
    let rows: &[(&str, ResyncRateConfig, u32)] = &[
        ("defaults, 8 pages", ResyncRateConfig::default(), 8),
        (
            "64 MiB fill target, unlimited rate, 32 pages",
            ResyncRateConfig {
                c_fill_target_sectors: 131_072,
                c_max_rate_kib_per_s: 0,
                ..ResyncRateConfig::default()
            },
            32,
        ),
        (
            "fixed 4 GiB/s, 64 pages",
            ResyncRateConfig {
                c_plan_ahead: Duration::ZERO,
                resync_rate_kib_per_s: 4 << 20,
                ..ResyncRateConfig::default()
            },
            64,
        ),
    ];
    for (name, config, pages) in rows {
        let mut rig = Rig::full_sync(*config, *pages);
        for _ in 0..3 * TICKS_PER_S {
            rig.step();
        }
        let max = u64::from(*pages) * BLOCK;
        assert!(
            rig.outstanding_peak_bytes <= max,
            "{name}: peak {}",
            rig.outstanding_peak_bytes
        );
        assert_eq!(
            rig.outstanding_peak_bytes, max,
            "{name}: the buffers were used"
        );
        assert!(
            rig.written_bytes >= 20 * MIB,
            "{name}: {} KiB in 3 s",
            rig.written_bytes / 1024
        );
    }
}
