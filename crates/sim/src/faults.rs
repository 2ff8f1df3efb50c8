//! Fault injection from the seed (bounded rates) and the simulated administrator: promotion
//! of a Primary (failover after a crash) and resolution of a split brain.
//!
//! Invariants: at most `nodes − 1` nodes are down at once; every timed fault has its end
//! scheduled when it starts; the administrator promotes only a node that is UpToDate,
//! Secondary and has no replicated writes still being applied, and only when no node is
//! Primary.

use repl::{ReplState, Role};

use crate::world::{Ev, Sim};

const MS: u64 = 1_000_000;

/// Which fault classes a random run draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultMask {
    /// Connection drops.
    pub drop: bool,
    /// One-way and two-way partitions.
    pub partition: bool,
    /// A reader that stops reading.
    pub stop_reading: bool,
    /// Node crashes (power loss) and restarts.
    pub crash: bool,
    /// I/O errors on disk ranges.
    pub disk_errors: bool,
}

impl FaultMask {
    /// Every fault class.
    pub const ALL: FaultMask = FaultMask { drop: true, partition: true, stop_reading: true, crash: true, disk_errors: true };

    /// From a comma-separated list of `drop`, `partition`, `stop-reading`, `crash`,
    /// `disk-errors` (or `all`, or `none`).
    pub fn parse(list: &str) -> Option<FaultMask> {
        let mut mask = FaultMask { drop: false, partition: false, stop_reading: false, crash: false, disk_errors: false };
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => mask = FaultMask::ALL,
                "none" => {}
                "drop" => mask.drop = true,
                "partition" => mask.partition = true,
                "stop-reading" => mask.stop_reading = true,
                "crash" => mask.crash = true,
                "disk-errors" => mask.disk_errors = true,
                _ => return None,
            }
        }
        Some(mask)
    }
}

/// The end of a timed fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heal {
    /// Frames from `from` to `to` flow again.
    Partition { from: u8, to: u8 },
    /// `reader` reads from `from` again.
    Reader { reader: u8, from: u8 },
    /// The disk of `node` works again.
    Disk { node: u8 },
}

fn alive(sim: &Sim, n: u8) -> bool {
    sim.nodes[usize::from(n)].alive()
}

fn pick_pair(sim: &mut Sim) -> (u8, u8) {
    let nodes = u64::from(sim.cfg.nodes);
    let a = u8::try_from(sim.rng.range(0, nodes)).unwrap_or(0);
    let b = u8::try_from((u64::from(a) + sim.rng.range(1, nodes)) % nodes).unwrap_or(0);
    (a, b)
}

/// Injects one random fault and schedules the next.
pub fn inject(sim: &mut Sim) {
    if !sim.faults_on {
        return;
    }
    let next = sim.rng.range(300 * MS, 3000 * MS);
    sim.schedule(next, Ev::Fault);
    let (a, b) = pick_pair(sim);
    let kind = sim.rng.range(0, 100);
    let mask = sim.cfg.faults;
    let injected = match kind {
        0..=19 if mask.drop => drop_link(sim, a, b),
        20..=34 if mask.partition => {
            let both = sim.rng.chance(50);
            partition(sim, a, b, both)
        }
        35..=44 if mask.stop_reading => stop_reading(sim, a, b),
        45..=69 if mask.crash => crash(sim, a),
        70..=84 if mask.disk_errors => disk_errors(sim, a),
        _ => latency_only(sim),
    };
    if injected {
        sim.stats.faults += 1;
    }
}

fn drop_link(sim: &mut Sim, a: u8, b: u8) -> bool {
    let Some(&conn) = sim.nodes[usize::from(a)].conns.get(&b) else { return false };
    sim.note(|| format!("FAULT drop connection {a} <-> {b}"));
    sim.drop_connection(a, b, conn);
    true
}

fn partition(sim: &mut Sim, a: u8, b: u8, both: bool) -> bool {
    let duration = sim.rng.range(200 * MS, 6000 * MS);
    sim.note(|| format!("FAULT partition {a} -> {b}{} for {} ms", if both { " and back" } else { "" }, duration / MS));
    sim.net.blocked.insert((a, b));
    sim.schedule(duration, Ev::Heal(Heal::Partition { from: a, to: b }));
    if both {
        sim.net.blocked.insert((b, a));
        sim.schedule(duration, Ev::Heal(Heal::Partition { from: b, to: a }));
    }
    true
}

fn stop_reading(sim: &mut Sim, reader: u8, from: u8) -> bool {
    let duration = sim.rng.range(200 * MS, 10_000 * MS);
    sim.note(|| format!("FAULT node {reader} stops reading from {from} for {} ms", duration / MS));
    sim.net.stopped.insert((reader, from));
    sim.schedule(duration, Ev::Heal(Heal::Reader { reader, from }));
    true
}

fn crash(sim: &mut Sim, n: u8) -> bool {
    let up = (0..sim.cfg.nodes).filter(|&x| alive(sim, x)).count();
    if up < 2 || !alive(sim, n) {
        return false;
    }
    let downtime = sim.rng.range(100 * MS, 5000 * MS);
    sim.crash(n, Some(downtime));
    true
}

fn disk_errors(sim: &mut Sim, n: u8) -> bool {
    let first = if sim.rng.chance(50) { sim.rng.range(0, 64) } else { sim.rng.range(0, crate::world::VOLUME_BLOCKS - 64) };
    let count = sim.rng.range(1, 64);
    let duration = sim.rng.range(100 * MS, 3000 * MS);
    sim.note(|| format!("FAULT disk errors on node {n} blocks {first}+{count} for {} ms", duration / MS));
    sim.nodes[usize::from(n)].disk.fail_range(first, first + count);
    sim.invalidate_receiver_sessions(n);
    sim.schedule(duration, Ev::Heal(Heal::Disk { node: n }));
    true
}

fn latency_only(sim: &mut Sim) -> bool {
    sim.note(|| "FAULT none (quiet period)".to_string());
    false
}

/// Ends a timed fault.
pub fn heal(sim: &mut Sim, heal: Heal) {
    match heal {
        Heal::Partition { from, to } => {
            sim.net.blocked.remove(&(from, to));
        }
        Heal::Reader { reader, from } => {
            sim.net.stopped.remove(&(reader, from));
        }
        Heal::Disk { node } => sim.nodes[usize::from(node)].disk.clear_failures(),
    }
    sim.reschedule_deliveries();
}

/// Ends every fault now (network, disks) and boots every crashed node.
pub fn heal_everything(sim: &mut Sim) {
    sim.net.blocked.clear();
    sim.net.stopped.clear();
    sim.reschedule_deliveries();
    for n in 0..sim.cfg.nodes {
        sim.nodes[usize::from(n)].disk.clear_failures();
        if !alive(sim, n) {
            sim.schedule(0, Ev::Restart { node: n });
        }
    }
}

/// A connected peer with blocks out of sync while Established (negative acks after I/O
/// errors) is resynced only by a new connection, as in DRBD: the administrator disconnects
/// and reconnects it. Returns how many connections were cycled.
pub fn cycle_out_of_sync_links(sim: &mut Sim) -> usize {
    let mut cycled = 0;
    for n in 0..sim.cfg.nodes {
        let Some(engine) = &sim.nodes[usize::from(n)].engine else { continue };
        let stuck: Vec<u8> = engine
            .status()
            .peers
            .iter()
            .filter(|p| p.volumes.iter().any(|v| v.replication == ReplState::Established && v.out_of_sync_bytes > 0))
            .map(|p| p.node_id)
            .collect();
        for peer in stuck {
            sim.note(|| format!("ADMIN cycles the connection {n} -> {peer} (blocks out of sync while Established)"));
            sim.with_engine(n, |e, now, out| {
                let _ = e.set_connect(now, peer, false, out);
                let _ = e.set_connect(now, peer, true, out);
            });
            cycled += 1;
        }
    }
    cycled
}

/// A resync the roles forbid (rr-conflict): once the client is idle, the Primary steps down
/// so the resync can run (the administrator promotes again afterwards), and both reconnect.
fn resolve_role_conflict(sim: &mut Sim, a: u8, b: u8) {
    if sim.requests_in_flight() > 0 {
        return;
    }
    sim.note(|| format!("ADMIN resolves stand-alone {a} <-> {b} (no split brain): demote, reconnect"));
    sim.promotion_hold_until = Some(sim.now.after(std::time::Duration::from_secs(1)));
    for n in [a, b] {
        if role(sim, n) == Some(Role::Primary) {
            sim.with_engine(n, |e, _, out| {
                let _ = e.demote(out);
            });
        }
    }
    sim.with_engine(a, |e, now, out| {
        let _ = e.set_connect(now, b, true, out);
    });
    sim.with_engine(b, |e, now, out| {
        let _ = e.set_connect(now, a, true, out);
    });
}

fn role(sim: &Sim, n: u8) -> Option<Role> {
    sim.nodes[usize::from(n)].engine.as_ref().map(|e| e.role())
}

/// The administrator's checkpoint duties.
pub fn admin(sim: &mut Sim) {
    resolve_stand_alone(sim);
    if sim.primary.is_some_and(|p| role(sim, p) == Some(Role::Primary)) {
        return;
    }
    if let Some(p) = (0..sim.cfg.nodes).find(|&n| role(sim, n) == Some(Role::Primary)) {
        sim.primary = Some(p);
        return;
    }
    if sim.promotion_hold_until.is_some_and(|until| sim.now < until) {
        return;
    }
    let lost_at = *sim.primary_lost_at.get_or_insert(sim.now);
    let waited = sim.now.since(lost_at) >= std::time::Duration::from_secs(1);
    let old = sim.primary;
    let candidates: Vec<u8> = (0..sim.cfg.nodes).filter(|&n| promotable(sim, n)).collect();
    let choice = match old {
        Some(p) if candidates.contains(&p) => Some(p),
        Some(_) if !(sim.cfg.failover && waited) => None,
        _ => candidates.first().copied(),
    };
    if let Some(n) = choice {
        if sim.promote(n, false) {
            sim.primary = Some(n);
            sim.primary_lost_at = None;
        }
    }
}

fn promotable(sim: &Sim, n: u8) -> bool {
    let node = &sim.nodes[usize::from(n)];
    let Some(engine) = &node.engine else { return false };
    let status = engine.status();
    let syncing = status.peers.iter().flat_map(|p| &p.volumes).any(|v| matches!(v.replication, ReplState::SyncTarget | ReplState::WFBitMapT | ReplState::StartingSyncT));
    engine.role() == Role::Secondary
        && status.volumes.first().is_some_and(|v| v.disk == repl::DiskState::UpToDate)
        && !syncing
        && !node.peer_io_pending()
}

/// Two nodes that stopped trying to connect to each other: after a split brain, the node that
/// is not the client's Primary discards its data; otherwise (a resync that would overwrite a
/// Primary, e.g. a crashed Primary back after a failover) see [`resolve_role_conflict`].
fn resolve_stand_alone(sim: &mut Sim) {
    for a in 0..sim.cfg.nodes {
        for b in a + 1..sim.cfg.nodes {
            let wants = |x: u8, y: u8| sim.nodes[usize::from(x)].engine.as_ref().map(|e| e.wants_connection(y));
            let (wa, wb) = (wants(a, b), wants(b, a));
            if wa.is_none() || wb.is_none() || (wa == Some(true) && wb == Some(true)) {
                continue;
            }
            if !sim.sb_detected.contains(&(a, b)) {
                resolve_role_conflict(sim, a, b);
                continue;
            }
            let winner = if sim.primary == Some(b) { b } else { a };
            let loser = if winner == a { b } else { a };
            sim.note(|| format!("ADMIN resolves stand-alone {a} <-> {b}: node {loser} discards its data"));
            if role(sim, loser) == Some(Role::Primary) {
                sim.with_engine(loser, |e, _, out| {
                    let _ = e.demote(out);
                });
            }
            sim.excuse_acked_writes(Some(loser));
            sim.with_engine(loser, |e, _, _| {
                let _ = e.set_discard_my_data(winner);
            });
            sim.with_engine(loser, |e, now, out| {
                let _ = e.set_connect(now, winner, true, out);
            });
            sim.with_engine(winner, |e, now, out| {
                let _ = e.set_connect(now, loser, true, out);
            });
        }
    }
}
