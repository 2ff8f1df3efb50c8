//! Fault injection from the seed (bounded rates) and the simulated administrator: promotion
//! of a Primary (failover after a crash) and resolution of a split brain.
//!
//! Faults: connection drops, one-way and two-way partitions, a reader that stops reading,
//! power loss of one node (and its reboot), I/O errors on disk ranges, a full data disk
//! (writes fail with `IoError::NoSpace` until the administrator frees space), and a power
//! loss of the whole cluster at once (every node crashes in the same instant, volatile caches
//! lost, and each boots again).
//!
//! The administrator knows only what an administrator or a cluster manager sees: the roles,
//! disk, connection and replication states and out-of-sync counts of `tandem status`, the
//! quorum each node reports, the engine's logged reason of a stand-off (split brain or
//! rr-conflict), which nodes are up and which reach each other (the membership), and its own
//! decisions (which node it made the client's Primary, whether that application still has
//! I/O outstanding, as a cluster manager stops the application before demoting). It never
//! reads the simulator's record of writes. It promotes an UpToDate Secondary (without
//! quorum, the old Primary if it can, else, once the Primary was gone for a second in a run
//! that fails over, the one last seen connected to the Primary without losing power since,
//! [`best_candidate`]; with two nodes or three) and resolves a split brain by a documented
//! rule ([`split_brain_winner`]).
//!
//! Quorum mode (`SimConfig::quorum`, `--quorum`): every engine runs with `quorum majority`,
//! `on-no-quorum suspend-io`, and the administrator acts as a quorum cluster manager
//! (Pacemaker over DRBD quorum): once a Secondary with quorum has not reached the client's
//! Primary for a second (the Primary is down, or outside the Secondary's partition: reach is
//! transitive, as in a membership), the best Secondary of its partition that does not reach
//! the Primary either is promoted (the one last seen connected to that Primary), even while
//! the old Primary still runs cut off in a minority, where its writes are held (never
//! acknowledged). The client then writes to the new Primary; requests held by the old one
//! stay in flight until the two meet: a split brain is resolved against the side not last
//! seen connected to the client's Primary ([`split_brain_winner`]), a role conflict by
//! stepping the Primary down, and a Primary that steps down does so by force (`secondary
//! --force`), so every write it held fails instead of completing. If the client's Primary
//! loses quorum while another Primary has it, the client follows that one. A fault class of
//! its own cuts one node off from all others (isolation).
//!
//! Invariants: at most `nodes − 1` nodes are down at once, except for a whole-cluster power
//! loss; every timed fault has its end scheduled when it starts; the administrator promotes
//! only a node that is UpToDate, Secondary and has no replicated writes still being applied,
//! and only when no node is Primary, or, in quorum mode, a node that also has quorum and
//! whose partition has not reached the client's Primary for a second; in quorum mode a
//! Primary the administrator demotes holds no write that can still complete successfully.

use repl::{Promotion, ReplState, Role};

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
    /// A full data disk (ENOSPC) until space is freed.
    pub no_space: bool,
    /// The whole cluster loses power at once, then every node boots again.
    pub cluster_power_loss: bool,
}

impl FaultMask {
    /// Every fault class.
    pub const ALL: FaultMask = FaultMask {
        drop: true,
        partition: true,
        stop_reading: true,
        crash: true,
        disk_errors: true,
        no_space: true,
        cluster_power_loss: true,
    };

    /// No fault class.
    pub const NONE: FaultMask = FaultMask {
        drop: false,
        partition: false,
        stop_reading: false,
        crash: false,
        disk_errors: false,
        no_space: false,
        cluster_power_loss: false,
    };

    /// From a comma-separated list of `drop`, `partition`, `stop-reading`, `crash`,
    /// `disk-errors`, `no-space`, `cluster-power-loss` (or `all`, or `none`).
    pub fn parse(list: &str) -> Option<FaultMask> {
        let mut mask = FaultMask::NONE;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => mask = FaultMask::ALL,
                "none" => {}
                "drop" => mask.drop = true,
                "partition" => mask.partition = true,
                "stop-reading" => mask.stop_reading = true,
                "crash" => mask.crash = true,
                "disk-errors" => mask.disk_errors = true,
                "no-space" => mask.no_space = true,
                "cluster-power-loss" => mask.cluster_power_loss = true,
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
    /// Space was freed on the full disk of `node`.
    Space { node: u8 },
    /// `node`, away after a graceful departure, connects to its peers again (`up`).
    Rejoin { node: u8 },
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
        20..=34 if mask.partition && sim.cfg.quorum && sim.rng.chance(40) => isolate(sim, a),
        20..=34 if mask.partition => {
            let both = sim.rng.chance(50);
            partition(sim, a, b, both)
        }
        35..=44 if mask.stop_reading => stop_reading(sim, a, b),
        45..=69 if mask.crash => crash(sim, a),
        70..=84 if mask.disk_errors => disk_errors(sim, a),
        85..=92 if sim.cfg.quorum => depart(sim, a),
        93..=96 if mask.no_space => fill_disk(sim, a),
        97..=98 if mask.cluster_power_loss => cluster_power_loss(sim),
        _ => latency_only(sim),
    };
    if injected {
        sim.stats.faults += 1;
    }
}

fn drop_link(sim: &mut Sim, a: u8, b: u8) -> bool {
    let Some(&conn) = sim.nodes[usize::from(a)].conns.get(&b) else {
        return false;
    };
    sim.note(|| format!("FAULT drop connection {a} <-> {b}"));
    sim.drop_connection(a, b, conn);
    true
}

fn partition(sim: &mut Sim, a: u8, b: u8, both: bool) -> bool {
    let duration = sim.rng.range(200 * MS, 6000 * MS);
    sim.note(|| {
        format!(
            "FAULT partition {a} -> {b}{} for {} ms",
            if both { " and back" } else { "" },
            duration / MS
        )
    });
    sim.net.blocked.insert((a, b));
    sim.schedule(duration, Ev::Heal(Heal::Partition { from: a, to: b }));
    if both {
        sim.net.blocked.insert((b, a));
        sim.schedule(duration, Ev::Heal(Heal::Partition { from: b, to: a }));
    }
    true
}

/// Quorum mode: cuts node `n` off from every other node, both ways, for one duration (a
/// Primary alone in a minority, the case quorum is for).
fn isolate(sim: &mut Sim, n: u8) -> bool {
    let duration = sim.rng.range(1000 * MS, 8000 * MS);
    sim.note(|| format!("FAULT isolate node {n} for {} ms", duration / MS));
    for peer in (0..sim.cfg.nodes).filter(|&p| p != n) {
        for (from, to) in [(n, peer), (peer, n)] {
            sim.net.blocked.insert((from, to));
            sim.schedule(duration, Ev::Heal(Heal::Partition { from, to }));
        }
    }
    true
}

/// Quorum mode: the administrator takes Secondary `n` away gracefully (`tandem down`): it
/// disconnects from every peer, outdating itself first where it leaves a Primary, and
/// connects again later. A Primary whose absent peers all left so keeps quorum alone.
fn depart(sim: &mut Sim, n: u8) -> bool {
    if !alive(sim, n) || role(sim, n) != Some(Role::Secondary) || sim.away.contains(&n) {
        return false;
    }
    let duration = sim.rng.range(500 * MS, 8000 * MS);
    sim.note(|| {
        format!(
            "FAULT node {n} departs gracefully (down) for {} ms",
            duration / MS
        )
    });
    sim.away.insert(n);
    sim.stats.departures += 1;
    for peer in (0..sim.cfg.nodes).filter(|&p| p != n) {
        sim.with_engine(n, |e, now, out| {
            let _ = e.set_connect(now, peer, false, out);
        });
    }
    sim.schedule(duration, Ev::Heal(Heal::Rejoin { node: n }));
    true
}

fn stop_reading(sim: &mut Sim, reader: u8, from: u8) -> bool {
    let duration = sim.rng.range(200 * MS, 10_000 * MS);
    sim.note(|| {
        format!(
            "FAULT node {reader} stops reading from {from} for {} ms",
            duration / MS
        )
    });
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
    let first = if sim.rng.chance(50) {
        sim.rng.range(0, 64)
    } else {
        sim.rng.range(0, crate::world::VOLUME_BLOCKS - 64)
    };
    let count = sim.rng.range(1, 64);
    let duration = sim.rng.range(100 * MS, 3000 * MS);
    sim.note(|| {
        format!(
            "FAULT disk errors on node {n} blocks {first}+{count} for {} ms",
            duration / MS
        )
    });
    sim.nodes[usize::from(n)]
        .disk
        .fail_range(first, first + count);
    sim.invalidate_receiver_sessions(n);
    sim.schedule(duration, Ev::Heal(Heal::Disk { node: n }));
    true
}

/// The data disk of `n` runs out of space (a thin pool or the file system under a backing file
/// fills up): writes fail with `IoError::NoSpace` until the administrator frees space.
fn fill_disk(sim: &mut Sim, n: u8) -> bool {
    let duration = sim.rng.range(100 * MS, 4000 * MS);
    sim.note(|| {
        format!(
            "FAULT disk of node {n} full (no space) for {} ms",
            duration / MS
        )
    });
    sim.nodes[usize::from(n)].disk.fill();
    sim.invalidate_receiver_sessions(n);
    sim.stats.disks_full += 1;
    sim.schedule(duration, Ev::Heal(Heal::Space { node: n }));
    true
}

/// The whole cluster loses power in one instant (a site outage): every running node crashes,
/// its volatile cache lost, and each boots again after its own downtime.
fn cluster_power_loss(sim: &mut Sim) -> bool {
    let running: Vec<u8> = (0..sim.cfg.nodes).filter(|&n| alive(sim, n)).collect();
    if running.is_empty() {
        return false;
    }
    sim.note(|| "FAULT the whole cluster loses power".to_string());
    sim.stats.cluster_power_losses += 1;
    for n in running {
        let downtime = sim.rng.range(100 * MS, 5000 * MS);
        sim.crash(n, Some(downtime));
    }
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
        Heal::Space { node } => {
            sim.note(|| format!("ADMIN frees space on the disk of node {node}"));
            sim.nodes[usize::from(node)].disk.free_space();
        }
        Heal::Rejoin { node } => rejoin(sim, node),
    }
    sim.reschedule_deliveries();
}

/// A departed node connects to its peers again (`tandem up`).
fn rejoin(sim: &mut Sim, n: u8) {
    if !sim.away.remove(&n) {
        return;
    }
    sim.note(|| format!("ADMIN node {n} rejoins (up)"));
    for peer in (0..sim.cfg.nodes).filter(|&p| p != n) {
        sim.with_engine(n, |e, now, out| {
            let _ = e.set_connect(now, peer, true, out);
        });
    }
}

/// Ends every fault now (network, disks) and boots every crashed node.
pub fn heal_everything(sim: &mut Sim) {
    let away: Vec<u8> = sim.away.iter().copied().collect();
    for n in away {
        rejoin(sim, n);
    }
    sim.net.blocked.clear();
    sim.net.stopped.clear();
    sim.reschedule_deliveries();
    for n in 0..sim.cfg.nodes {
        sim.nodes[usize::from(n)].disk.clear_failures();
        sim.nodes[usize::from(n)].disk.free_space();
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
        let Some(engine) = &sim.nodes[usize::from(n)].engine else {
            continue;
        };
        let stuck: Vec<u8> = engine
            .status()
            .peers
            .iter()
            .filter(|p| {
                p.volumes
                    .iter()
                    .any(|v| v.replication == ReplState::Established && v.out_of_sync_bytes > 0)
            })
            .map(|p| p.node_id)
            .collect();
        for peer in stuck {
            sim.note(|| {
                format!(
                    "ADMIN cycles the connection {n} -> {peer} (blocks out of sync while \
                     Established)"
                )
            });
            sim.with_engine(n, |e, now, out| {
                let _ = e.set_connect(now, peer, false, out);
                let _ = e.set_connect(now, peer, true, out);
            });
            cycled += 1;
        }
    }
    cycled
}

/// A resync the roles forbid (rr-conflict): once the client is idle (the cluster manager
/// stops the application before it demotes), the Primary steps down so the resync can run
/// (the administrator promotes again afterwards), and both reconnect. In quorum mode only
/// the client's Primary must be idle: an old Primary that the client left holds its requests
/// for ever, and steps down by force ([`step_down`]).
fn resolve_role_conflict(sim: &mut Sim, a: u8, b: u8) {
    let busy = if sim.cfg.quorum {
        [a, b]
            .into_iter()
            .any(|n| sim.primary == Some(n) && sim.requests_to(n) > 0)
    } else {
        sim.requests_in_flight() > 0
    };
    if busy {
        return;
    }
    sim.note(|| {
        format!("ADMIN resolves stand-alone {a} <-> {b} (no split brain): demote, reconnect")
    });
    sim.promotion_hold_until = Some(sim.now.after(std::time::Duration::from_secs(1)));
    for n in [a, b] {
        if role(sim, n) == Some(Role::Primary) {
            step_down(sim, n);
        }
    }
    sim.with_engine(a, |e, now, out| {
        let _ = e.set_connect(now, b, true, out);
    });
    sim.with_engine(b, |e, now, out| {
        let _ = e.set_connect(now, a, true, out);
    });
}

/// Demotes Primary `n`. In quorum mode by force (`secondary --force`): a Primary that lost
/// quorum holds its writes, and a plain demotion would let them complete; forced, every
/// held write fails, so none is acknowledged that the other side never got.
fn step_down(sim: &mut Sim, n: u8) {
    let forced = sim.cfg.quorum;
    if forced {
        let held = sim.requests_to(n);
        sim.note(|| format!("ADMIN demotes node {n} by force ({held} client requests held)"));
    }
    sim.with_engine(n, |e, now, out| {
        let _ = if forced {
            e.demote_forced(now, out)
        } else {
            e.demote(out)
        };
    });
}

fn role(sim: &Sim, n: u8) -> Option<Role> {
    sim.nodes[usize::from(n)].engine.as_ref().map(|e| e.role())
}

fn has_quorum(sim: &Sim, n: u8) -> bool {
    sim.nodes[usize::from(n)]
        .engine
        .as_ref()
        .is_some_and(|e| e.has_quorum())
}

/// Whether `n` may serve as the client's Primary: it is Primary and, in quorum mode, has
/// quorum (an old Primary cut off in a minority is not adopted).
fn serving_primary(sim: &Sim, n: u8) -> bool {
    role(sim, n) == Some(Role::Primary) && (!sim.cfg.quorum || has_quorum(sim, n))
}

/// Quorum mode: records since when each node has not reached the client's Primary (it is
/// down, or not in the node's partition). Reach is transitive, as in a cluster manager's
/// membership: a Secondary cut off from the Primary but connected to a node that still
/// reaches it is not failed over to (tandem's engine, unlike DRBD's two-phase commit, would
/// let it become a second Primary with quorum; see the crate's known issues).
fn note_primary_reachability(sim: &mut Sim) {
    let Some(p) = sim.primary else {
        sim.primary_unreachable_since.clear();
        return;
    };
    for n in 0..sim.cfg.nodes {
        let reaches = alive(sim, p) && sim.partition_of(n).contains(&p);
        if reaches || !alive(sim, n) {
            sim.primary_unreachable_since.remove(&n);
        } else {
            let now = sim.now;
            sim.primary_unreachable_since.entry(n).or_insert(now);
        }
    }
}

/// Quorum mode: the client's Primary may still run on the far side of a partition; once a
/// node has not reached it for a second, the best Secondary of that node's partition that
/// does not reach it either and has quorum is promoted ([`best_candidate`]), as a quorum
/// cluster manager does. The old Primary, in a minority, can no longer complete writes.
fn fail_over_from_unreachable_primary(sim: &mut Sim) {
    let Some(old) = sim.primary else { return };
    if sim
        .promotion_hold_until
        .is_some_and(|until| sim.now < until)
    {
        return;
    }
    let now = sim.now;
    let waited = |sim: &Sim, n: u8| {
        sim.primary_unreachable_since
            .get(&n)
            .is_some_and(|&since| now.since(since) >= std::time::Duration::from_secs(1))
    };
    // A partition that has missed the Primary for a second fails over, to its best node
    // that does not reach the Primary either (not only to the first that noticed).
    let cut_off = |sim: &Sim, n: u8| {
        sim.primary_unreachable_since.contains_key(&n)
            && sim.partition_of(n).into_iter().any(|m| waited(sim, m))
    };
    let candidates: Vec<u8> = (0..sim.cfg.nodes)
        .filter(|&n| n != old && cut_off(sim, n) && promotable(sim, n))
        .collect();
    let Some(n) = best_candidate(sim, &candidates) else {
        return;
    };
    sim.note(|| {
        format!("ADMIN fails over from node {old} (unreachable from node {n}) to node {n}")
    });
    if sim.promote(n, Promotion::Normal) {
        sim.stats.failovers_from_live_primary += u64::from(alive(sim, old));
        set_primary(sim, n);
    }
}

/// Quorum mode: the client's Primary lost quorum while another Primary has it (an old
/// Primary that a majority rejoined): the client follows the one with quorum, as a cluster
/// manager keeps the Primary of its quorate partition. Returns whether it did.
fn follow_quorate_primary(sim: &mut Sim) -> bool {
    let Some(p) = sim.primary else { return false };
    if has_quorum(sim, p) {
        return false;
    }
    let Some(other) = (0..sim.cfg.nodes).find(|&n| n != p && serving_primary(sim, n)) else {
        return false;
    };
    sim.note(|| format!("ADMIN follows node {other}, a Primary with quorum (node {p} has none)"));
    set_primary(sim, other);
    true
}

/// The client writes to `n` from now on.
fn set_primary(sim: &mut Sim, n: u8) {
    sim.primary = Some(n);
    sim.primary_lost_at = None;
    sim.primary_unreachable_since.clear();
}

/// The administrator's checkpoint duties.
pub fn admin(sim: &mut Sim) {
    note_primary_partition(sim);
    // First the Primary of the quorate partition, as a cluster manager keeps it: a stand-off
    // resolved next then keeps that Primary's data, acknowledged writes included.
    let primary = sim
        .primary
        .is_some_and(|p| role(sim, p) == Some(Role::Primary));
    let followed = primary && sim.cfg.quorum && follow_quorate_primary(sim);
    resolve_stand_alone(sim);
    if sim.cfg.quorum {
        note_primary_reachability(sim);
    }
    if sim
        .primary
        .is_some_and(|p| role(sim, p) == Some(Role::Primary))
    {
        if sim.cfg.quorum && !followed {
            fail_over_from_unreachable_primary(sim);
        }
        return;
    }
    if let Some(p) = (0..sim.cfg.nodes).find(|&n| serving_primary(sim, n)) {
        set_primary(sim, p);
        return;
    }
    if sim
        .promotion_hold_until
        .is_some_and(|until| sim.now < until)
    {
        return;
    }
    let lost_at = *sim.primary_lost_at.get_or_insert(sim.now);
    let waited = sim.now.since(lost_at) >= std::time::Duration::from_secs(1);
    let old = sim.primary;
    let candidates: Vec<u8> = (0..sim.cfg.nodes).filter(|&n| promotable(sim, n)).collect();
    let choice = match old {
        Some(p) if candidates.contains(&p) => Some(p),
        Some(_) if !(sim.cfg.failover && waited) => None,
        _ => best_candidate(sim, &candidates),
    };
    if let Some(n) = choice {
        if sim.promote(n, Promotion::Normal) {
            set_primary(sim, n);
        }
    }
}

/// Records which nodes are connected to the client's Primary now, replicating its writes
/// (the administrator's history, `Sim::with_primary_at`): as the Primary's `tandem status`
/// shows them, Established or the target of its resync. A link whose handshake stalls, or
/// that ended StandAlone, replicates nothing (seed 5604 of the quorum range: such a node,
/// counted as seen with the Primary, won a split brain against the node that held its
/// writes).
pub fn note_primary_partition(sim: &mut Sim) {
    // In quorum mode a Primary without quorum acknowledges nothing: being with it then says
    // nothing about holding its writes (seed 8757: an old Primary cut off in a minority,
    // counted as seen with itself until the failover, won a split brain against a node of
    // the quorate partition that held the new Primary's acknowledged writes).
    let Some(p) = sim
        .primary
        .filter(|&p| alive(sim, p) && (!sim.cfg.quorum || has_quorum(sim, p)))
    else {
        return;
    };
    let Some(status) = sim.nodes[usize::from(p)]
        .engine
        .as_ref()
        .map(|e| e.status())
    else {
        return;
    };
    let now = sim.now;
    let replicating: Vec<u8> = status
        .peers
        .iter()
        .filter(|peer| sim.linked(p, peer.node_id))
        .filter(|peer| {
            peer.volumes.first().is_some_and(|v| {
                matches!(
                    v.replication,
                    ReplState::Established | ReplState::SyncSource | ReplState::PausedSyncS
                )
            })
        })
        .map(|peer| peer.node_id)
        .collect();
    for n in replicating.into_iter().chain([p]) {
        sim.with_primary_at.insert(n, now);
        sim.last_with_primary_at.insert(n, now);
    }
}

/// Of the nodes that may be promoted, the one last seen connected to the client's Primary
/// without losing power since (it saw the most of that Primary's writes; a node that rebooted
/// may have lost some in its cache); the lower node id among equals.
fn best_candidate(sim: &Sim, candidates: &[u8]) -> Option<u8> {
    let seen = |n: u8| sim.with_primary_at.get(&n).copied();
    candidates.iter().copied().fold(None, |best, n| match best {
        Some(b) if seen(b) >= seen(n) => Some(b),
        _ => Some(n),
    })
}

fn promotable(sim: &Sim, n: u8) -> bool {
    let node = &sim.nodes[usize::from(n)];
    let Some(engine) = &node.engine else {
        return false;
    };
    let status = engine.status();
    let syncing = status.peers.iter().flat_map(|p| &p.volumes).any(|v| {
        matches!(
            v.replication,
            ReplState::SyncTarget | ReplState::WFBitMapT | ReplState::StartingSyncT
        )
    });
    // `pending`: replicated writes received and not yet written (`tandem status`).
    let applying = status
        .peers
        .iter()
        .flat_map(|p| &p.volumes)
        .any(|v| v.pending > 0);
    engine.role() == Role::Secondary
        && status
            .volumes
            .first()
            .is_some_and(|v| v.disk == repl::DiskState::UpToDate)
        && !syncing
        && !applying
        && (!sim.cfg.quorum || engine.has_quorum())
}

/// The side of a split brain between `a` and `b` whose data stays, decided from what the
/// administrator sees (roles, membership, quorum, out-of-sync counts; never the simulator's
/// record of writes), in this order:
/// 1. the client's Primary (where the cluster manager runs the application);
/// 2. the side last seen connected to the client's Primary (`Sim::last_with_primary_at`,
///    in quorum mode only while that Primary had quorum; the other, e.g. an old Primary the
///    client left or a node that was down, diverged from it), even when that side is an
///    Inconsistent sync target or lost power since: it holds the Primary's writes and may be
///    their only other copy (seed 5604 of the quorum range: both sides lost power and the
///    lower node id kept the old Primary the client had left, discarding its successor's
///    writes; seed 8757: the old Primary, cut off in a minority and never down, won against
///    a node of the quorate partition that had lost power since);
/// 3. the side whose disk is UpToDate while the other's is not (only it can be a sync
///    source);
/// 4. in quorum mode, the side that has quorum while the other has none (the quorate
///    partition keeps its data, as a cluster manager runs the resource there);
/// 5. the side with more out-of-sync data towards the other (DRBD's `discard-least-changes`:
///    each side's bitmap counts the blocks it changed while they were apart);
/// 6. `a`, the lower node id (a fixed preference, DRBD's `discard-node-<name>`).
fn split_brain_winner(sim: &Sim, a: u8, b: u8) -> u8 {
    if sim.primary == Some(b) {
        return b;
    }
    if sim.primary == Some(a) {
        return a;
    }
    let seen = |n: u8| sim.last_with_primary_at.get(&n).copied();
    if seen(a) != seen(b) {
        return if seen(b) > seen(a) { b } else { a };
    }
    match (up_to_date(sim, a), up_to_date(sim, b)) {
        (false, true) => return b,
        (true, false) => return a,
        _ => {}
    }
    if sim.cfg.quorum {
        match (has_quorum(sim, a), has_quorum(sim, b)) {
            (false, true) => return b,
            (true, false) => return a,
            _ => {}
        }
    }
    if changed_towards(sim, b, a) > changed_towards(sim, a, b) {
        return b;
    }
    a
}

/// Whether the disk of `n` is UpToDate (`tandem status`).
fn up_to_date(sim: &Sim, n: u8) -> bool {
    sim.nodes[usize::from(n)].engine.as_ref().is_some_and(|e| {
        e.status()
            .volumes
            .first()
            .is_some_and(|v| v.disk == repl::DiskState::UpToDate)
    })
}

/// The bytes `n` shows out of sync towards `peer` (`tandem status`): what it changed while
/// they were apart, and what it still owed `peer` before.
fn changed_towards(sim: &Sim, n: u8, peer: u8) -> u64 {
    let Some(engine) = &sim.nodes[usize::from(n)].engine else {
        return 0;
    };
    engine
        .status()
        .peers
        .iter()
        .filter(|p| p.node_id == peer)
        .flat_map(|p| &p.volumes)
        .map(|v| v.out_of_sync_bytes)
        .sum()
}

/// Two nodes that stopped trying to connect to each other: after a split brain, the node that
/// is not the client's Primary discards its data; otherwise, or when their latest stand-off
/// was an rr-conflict (a resync that would overwrite a Primary, e.g. a crashed Primary back
/// after a failover), see [`resolve_role_conflict`].
fn resolve_stand_alone(sim: &mut Sim) {
    for a in 0..sim.cfg.nodes {
        for b in a + 1..sim.cfg.nodes {
            if sim.away.contains(&a) || sim.away.contains(&b) {
                // Taken away on purpose; it rejoins when its departure ends.
                continue;
            }
            let wants = |x: u8, y: u8| {
                sim.nodes[usize::from(x)]
                    .engine
                    .as_ref()
                    .map(|e| e.wants_connection(y))
            };
            let (wa, wb) = (wants(a, b), wants(b, a));
            if wa.is_none() || wb.is_none() || (wa == Some(true) && wb == Some(true)) {
                continue;
            }
            // As the log says: an rr-conflict is resolved by stepping down, whatever split
            // brain the pair had before (discard-my-data decides split brains only).
            if !sim.sb_detected.contains(&(a, b)) || sim.role_conflicts.contains(&(a, b)) {
                resolve_role_conflict(sim, a, b);
                continue;
            }
            let winner = split_brain_winner(sim, a, b);
            let loser = if winner == a { b } else { a };
            sim.note(|| {
                format!("ADMIN resolves stand-alone {a} <-> {b}: node {loser} discards its data")
            });
            if role(sim, loser) == Some(Role::Primary) {
                step_down(sim, loser);
            }
            // The loser's writes that the winner lacks are given up by design; in quorum mode
            // with protocol C there are none (the winner was promoted holding every
            // acknowledged write, and a Primary without quorum acknowledges none), so nothing
            // is excused and the checkers still require them all.
            if !sim.cfg.strict_acked_writes() {
                sim.excuse_acked_writes(Some(loser));
            }
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
