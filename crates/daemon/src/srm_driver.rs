//! Drives the Selective Replication Manager (`crates/srm`) for one resource: once per
//! `srm-interval` it measures the host, each peer link and the write pattern, asks the
//! manager, logs every decision with its reason, and — with `srm on` — applies it through the
//! same engine calls `tandem adjust` uses. `tandem srm status` shows the latest measurements
//! and decisions.
//!
//! Invariants:
//! - Protocol A reaches a peer only through `Engine::set_protocol`, which has the peer
//!   durably mark itself possibly stale first; the engine's lag bound (`srm-max-lag-bytes`,
//!   `srm-max-lag-time`, with the manager's throttle curve so the bound is approached
//!   smoothly) holds writes back, so the manager's own gate is advice only.
//! - The manager's gain model gets the mean submit-to-completion time of client writes
//!   (`WriteCounters::completed`, timed in `Resource::submit` only while the manager runs).
//! - `srm advise` changes nothing: decisions are logged and shown, never applied, and no lag
//!   bound is set.
//! - Memory is bounded: the decision history keeps [`HISTORY_LINES_MAX`] lines per resource.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use repl::{LagBound, LagThrottle, PeerConfig, Protocol};
use srm::{
    Action, Decision, Manager, Mode, Observation, PeerObservation, SrmConfig, SystemObservation,
    WritePattern,
};

use crate::resource::{PeerInfo, Resource};

/// Decision lines kept for `tandem srm status`.
pub(crate) const HISTORY_LINES_MAX: usize = 32;
/// Bytes per `max-buffers` page.
const PAGE_BYTES: u64 = 4096;

/// Write pattern counters the export updates (taken once per interval).
#[derive(Debug, Default)]
pub(crate) struct WriteCounters {
    writes: u64,
    bytes: u64,
    sequential: u64,
    /// Where the previous write ended (None before the first).
    next_offset: Option<u64>,
    histogram: [srm::SizeClass; 6],
    /// Client writes completed and their summed submit-to-completion time.
    completed: u64,
    completion_sum: Duration,
}

impl WriteCounters {
    /// One client write of `length` bytes at `offset`.
    pub(crate) fn note(&mut self, offset: u64, length: u64) {
        self.writes += 1;
        self.bytes += length;
        if self.next_offset == Some(offset) {
            self.sequential += 1;
        }
        self.next_offset = Some(offset.saturating_add(length));
        if let Some(class) = self.histogram.get_mut(srm::size_class(length)) {
            class.writes += 1;
            class.bytes += length;
        }
    }

    /// One client write completed `latency` after its submission.
    pub(crate) fn completed(&mut self, latency: Duration) {
        self.completed += 1;
        self.completion_sum = self.completion_sum.saturating_add(latency);
    }

    fn take(&mut self, interval: Duration) -> WritePattern {
        let taken = std::mem::take(self);
        self.next_offset = taken.next_offset;
        let per_s = |count: u64| {
            u64::try_from(u128::from(count) * 1000 / interval.as_millis().max(1))
                .unwrap_or(u64::MAX)
        };
        let sequential_permille = (taken.sequential * 1000)
            .checked_div(taken.writes)
            .map_or(0, |permille| u32::try_from(permille).unwrap_or(1000));
        let completion_latency_mean = taken
            .completion_sum
            .checked_div(u32::try_from(taken.completed).unwrap_or(u32::MAX));
        WritePattern {
            bytes_per_s: per_s(taken.bytes),
            writes_per_s: per_s(taken.writes),
            size_histogram: taken.histogram,
            sequential_permille,
            completion_latency_mean,
        }
    }
}

/// What `tandem srm status` shows.
#[derive(Debug, Default)]
pub(crate) struct SrmView {
    pub(crate) mode: String,
    /// The latest measurements, one line per peer plus one for the host.
    pub(crate) measurements: Vec<String>,
    /// The latest decisions, oldest first.
    pub(crate) history: VecDeque<String>,
    /// The latest measurements as numbers, every peer in one observation (for metrics).
    pub(crate) latest: Option<Observation>,
}

impl SrmView {
    /// The text of `tandem srm status`.
    pub(crate) fn render(&self, resource: &str) -> String {
        let mut text = format!("{resource} srm:{}\n", self.mode);
        for line in &self.measurements {
            text.push_str(&format!("  {line}\n"));
        }
        text.push_str(if self.history.is_empty() {
            "  no decisions yet\n"
        } else {
            "  decisions (oldest first):\n"
        });
        for line in &self.history {
            text.push_str(&format!("    {line}\n"));
        }
        text
    }
}

/// The manager of one peer connection.
struct PeerManager {
    node_id: u8,
    name: String,
    manager: Manager,
}

/// The manager's settings for one connection, from the resource's configuration.
pub(crate) fn srm_config(options: &config::ResourceOptions, peer: &PeerInfo) -> SrmConfig {
    let (net, device) = (&peer.net, &peer.peer_device);
    let mode = match options.srm {
        config::Srm::Off => Mode::Off,
        config::Srm::Advise => Mode::Advise,
        config::Srm::On => Mode::On,
    };
    let protocol = match crate::peer::protocol_of(net) {
        Protocol::A => srm::Protocol::A,
        Protocol::B => srm::Protocol::B,
        Protocol::C => srm::Protocol::C,
    };
    let defaults = SrmConfig::default();
    let buffers = srm::BufferSettings {
        max_buffers_pages: u64::from(net.max_buffers),
        max_epoch_size: u64::from(net.max_epoch_size),
        sndbuf_bytes: net.sndbuf_size_bytes,
    };
    let bounds = |min: u64, max: u64| srm::Bounds { min, max };
    SrmConfig {
        mode,
        interval: options.srm_interval,
        protocol,
        max_lag_bytes: net.srm_max_lag_bytes,
        max_lag_time: net.srm_max_lag_time,
        latency_enter: net.srm_latency_high,
        latency_return: net.srm_latency_low,
        fill_enter_permille: net.srm_fill_high_percent * 10,
        fill_return_permille: net.srm_fill_low_percent * 10,
        min_dwell: net.srm_min_dwell,
        congestion_fill_bytes: None,
        resync_share_percent: device.srm_resync_share_percent,
        c_min_rate_bytes_per_s: u64::from(device.c_min_rate_kib_per_s) * 1024,
        c_max_rate_bytes_per_s: u64::from(device.c_max_rate_kib_per_s) * 1024,
        buffers,
        buffer_bounds: srm::BufferBounds {
            max_buffers_pages: bounds(
                u64::from(net.srm_max_buffers_min),
                u64::from(net.srm_max_buffers_max),
            ),
            max_epoch_size: bounds(
                u64::from(net.srm_max_epoch_size_min),
                u64::from(net.srm_max_epoch_size_max),
            ),
            sndbuf_bytes: bounds(net.srm_sndbuf_size_min_bytes, net.srm_sndbuf_size_max_bytes),
        },
        ..defaults
    }
}

/// Starts the manager of `resource` if its `srm` option is not `off`; the config was
/// validated at load, so a refusal here is a bug worth a log line, not a failed start.
pub(crate) fn start(resource: &Arc<Resource>, options: &config::ResourceOptions) {
    if options.srm == config::Srm::Off {
        return;
    }
    let mut peers = Vec::new();
    for info in &resource.peers {
        let config = srm_config(options, info);
        match Manager::new(config.clone()) {
            Ok(manager) => peers.push(PeerManager {
                node_id: info.node_id,
                name: info.name.clone(),
                manager,
            }),
            Err(error) => {
                tracing::error!(
                    resource = %resource.name, peer = %info.name,
                    "srm not started: {error}"
                )
            }
        }
        if options.srm == config::Srm::On {
            let bound = LagBound {
                bytes_max: config.max_lag_bytes,
                time_max: config.max_lag_time,
                throttle: Some(throttle_of(&config)),
            };
            let _ = resource
                .step(|engine, now, out| engine.set_lag_bound(now, info.node_id, Some(bound), out));
        }
    }
    let mode = if options.srm == config::Srm::On {
        Mode::On
    } else {
        Mode::Advise
    };
    *lock(&resource.srm_view) = Some(SrmView {
        mode: mode.to_string(),
        ..SrmView::default()
    });
    tokio::spawn(run(Arc::clone(resource), peers, mode, options.srm_interval));
}

/// The manager's lag throttle curve, in the engine's terms.
fn throttle_of(config: &SrmConfig) -> LagThrottle {
    let curve = srm::ThrottleCurve::of(config);
    LagThrottle {
        start_permille: curve.start_permille,
        admit_per_ack_permille: curve.admit_per_ack_permille,
    }
}

const _: () = assert!(srm::THROTTLE_STEPS == repl::LAG_THROTTLE_STEPS);

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn run(resource: Arc<Resource>, mut peers: Vec<PeerManager>, mode: Mode, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    let mut host = HostSampler::default();
    let start = tokio::time::Instant::now();
    loop {
        ticker.tick().await;
        let mut system = host.sample();
        let local = resource.step(|engine, _, _| engine.take_local_stats());
        system.local_write_latency = local
            .latency_sum
            .checked_div(u32::try_from(local.writes).unwrap_or(u32::MAX))
            .unwrap_or_default();
        let writes = lock(&resource.write_counters).take(interval);
        let now = start.elapsed();
        let mut lines = vec![system_line(&system, &writes)];
        let mut all = Observation {
            now,
            system: system.clone(),
            peers: Vec::with_capacity(peers.len()),
            writes: writes.clone(),
        };
        for peer in &mut peers {
            let observation = observe_peer(&resource, peer.node_id, interval);
            lines.push(peer_line(&peer.name, &observation));
            all.peers.push(observation.clone());
            let obs = Observation {
                now,
                system: system.clone(),
                peers: vec![observation],
                writes: writes.clone(),
            };
            let outcome = peer.manager.observe(&obs);
            for decision in &outcome.decisions {
                record(&resource, &peer.name, decision);
                if mode == Mode::On && !decision.advisory {
                    apply(&resource, peer.node_id, &decision.action);
                }
            }
            let status = if mode == Mode::On {
                peer.manager.peer_status(peer.node_id)
            } else {
                peer.manager.advised_status(peer.node_id)
            };
            if let Some(line) = status.and_then(|status| switch_line(&peer.name, &status, now)) {
                lines.push(line);
            }
        }
        if let Some(view) = lock(&resource.srm_view).as_mut() {
            view.measurements = lines;
            view.latest = Some(all);
        }
    }
}

fn observe_peer(resource: &Arc<Resource>, node_id: u8, interval: Duration) -> PeerObservation {
    let (status, stats, config) = resource.step(|engine, now, out| {
        let status = engine
            .status()
            .peers
            .into_iter()
            .find(|p| p.node_id == node_id);
        let stats = engine.take_peer_stats(node_id);
        // The next interval's round trip: a ping on the control socket, answered in order.
        engine.probe_rtt(now, node_id, out);
        (status, stats, engine.peer_config(node_id))
    });
    let Some(status) = status else {
        return PeerObservation {
            peer: node_id,
            ..PeerObservation::default()
        };
    };
    let connected = status.connection == repl::ConnState::Connected;
    let mean = stats
        .ack_latency_sum
        .checked_div(u32::try_from(stats.acks).unwrap_or(u32::MAX));
    let window = config
        .map_or(1, |c| u64::from(c.max_buffers_pages) * PAGE_BYTES)
        .max(1);
    let fill = u32::try_from(status.lag.unreplicated_bytes.saturating_mul(1000) / window)
        .unwrap_or(1000)
        .min(1000);
    let resync = status
        .volumes
        .iter()
        .find_map(|v| v.resync)
        .map(|r| srm::ResyncObservation {
            rate_bytes_per_s: r.rate_bytes_per_s,
            bytes_left: r.total_bytes.saturating_sub(r.done_bytes),
        });
    PeerObservation {
        peer: node_id,
        connected,
        rtt: stats.ping_rtt,
        ack_latency_mean: mean,
        ack_latency_min: (stats.acks > 0).then_some(stats.ack_latency_min),
        ack_latency_p99: (stats.acks > 0).then_some(stats.ack_latency_max),
        // The peer does not report its disk's latency (yet): the manager uses ours.
        peer_write_latency: None,
        goodput_bytes_per_s: u64::try_from(
            u128::from(stats.acked_bytes) * 1000 / interval.as_millis().max(1),
        )
        .unwrap_or(u64::MAX),
        tcp: resource.tcp_info(node_id),
        send_queue_fill_permille: fill,
        unreplicated_bytes: status.lag.unreplicated_bytes,
        oldest_unreplicated_age: Duration::from_millis(status.lag.oldest_age_ms),
        out_of_sync_bytes: status.volumes.iter().map(|v| v.out_of_sync_bytes).sum(),
        resync,
        link_capacity_bytes_per_s: None,
        interface_mtu_bytes: resource
            .listen
            .first()
            .and_then(|address| interface_mtu(address.ip())),
    }
}

fn record(resource: &Resource, peer: &str, decision: &Decision) {
    let kind = if decision.advisory {
        "advice"
    } else {
        "decision"
    };
    tracing::info!(resource = %resource.name, peer, "srm {kind}: {decision}");
    if let Some(view) = lock(&resource.srm_view).as_mut() {
        if view.history.len() == HISTORY_LINES_MAX {
            view.history.pop_front();
        }
        view.history
            .push_back(format!("{peer}: {kind}: {decision}"));
    }
    resource.changed.send_modify(|version| *version += 1);
}

/// Applies one decision through the engine (the path `adjust` uses).
fn apply(resource: &Arc<Resource>, peer: u8, action: &Action) {
    let result = match action {
        Action::SetProtocol(protocol) => {
            let protocol = match protocol {
                srm::Protocol::A => Protocol::A,
                srm::Protocol::B => Protocol::B,
                srm::Protocol::C => Protocol::C,
            };
            resource.step(|engine, now, out| engine.set_protocol(now, peer, protocol, out))
        }
        Action::SetBuffers(buffers) => {
            if let Err(error) = resource.set_sndbuf(peer, buffers.sndbuf_bytes) {
                tracing::warn!(resource = %resource.name, peer, "srm: sndbuf-size {} not applied: \
                    {error}", buffers.sndbuf_bytes);
            }
            reconfigure(resource, peer, |config| {
                config.max_buffers_pages =
                    u32::try_from(buffers.max_buffers_pages).unwrap_or(u32::MAX);
                config.max_epoch_size = u32::try_from(buffers.max_epoch_size).unwrap_or(u32::MAX);
            })
        }
        Action::SetResyncRate { bytes_per_s } => reconfigure(resource, peer, |config| {
            let kib = u32::try_from(bytes_per_s / 1024).unwrap_or(u32::MAX).max(1);
            config.resync.c_max_rate_kib_per_s = kib;
            if config.resync.c_plan_ahead.is_zero() {
                config.resync.resync_rate_kib_per_s = kib;
            }
        }),
        // The engine marks a peer when protocol A is set for it and clears the mark once it
        // caught up; pull-ahead is the engine's own (`on-congestion`, so the manager is
        // configured without a congestion fill and never decides it); MTU advice is advice.
        // A kept switch's gain is a report: nothing to apply.
        Action::MarkPossiblyStale
        | Action::ClearPossiblyStale
        | Action::AdviseMtu { .. }
        | Action::EnterAhead
        | Action::LeaveAhead
        | Action::GainObserved { .. } => Ok(()),
    };
    if let Err(error) = result {
        tracing::warn!(resource = %resource.name, peer, "srm: decision not applied: {error}");
    }
}

fn reconfigure(
    resource: &Arc<Resource>,
    peer: u8,
    change: impl FnOnce(&mut PeerConfig),
) -> Result<(), repl::StateError> {
    resource.step(|engine, now, out| {
        let mut config = engine
            .peer_config(peer)
            .ok_or(repl::StateError::NoSuchPeer(peer))?;
        change(&mut config);
        engine.reconfigure_peer(now, config, out)
    })
}

/// `bob: last switch to A at 12.4s: predicted gain 15.20x, observed 9.80x (kept)`, plus the
/// back-off while one holds at `now`; `None` before the first switch.
fn switch_line(name: &str, status: &srm::PeerStatus, now: Duration) -> Option<String> {
    let record = status.last_switch?;
    let observed = record.observed_gain_permille.map_or_else(
        || "-".to_string(),
        |gain| srm::Value::Ratio(gain).to_string(),
    );
    let mut line = format!(
        "{name}: last switch to A at {:.1}s: predicted gain {}, observed {} ({})",
        record.at.as_secs_f64(),
        srm::Value::Ratio(record.predicted_gain_permille),
        observed,
        record.verdict
    );
    if let Some(until) = status.async_not_before.filter(|until| *until > now) {
        line.push_str(&format!(
            "; {} undone in a row, no switch to A before {:.1}s",
            status.undone_switches,
            until.as_secs_f64()
        ));
    }
    Some(line)
}

fn system_line(system: &SystemObservation, writes: &WritePattern) -> String {
    format!(
        "host: cpu-busy:{}‰ steal:{}‰ mem-available:{}‰ local-write:{:?} writes:{}/s {} KiB/s \
         sequential:{}‰",
        system.cpu_busy_permille,
        system.cpu_steal_permille,
        system.memory_available_permille,
        system.local_write_latency,
        writes.writes_per_s,
        writes.bytes_per_s / 1024,
        writes.sequential_permille
    )
}

fn peer_line(name: &str, peer: &PeerObservation) -> String {
    let tcp = peer.tcp.map_or_else(String::new, |tcp| {
        format!(
            " tcp-rtt:{:?} rttvar:{:?} retransmits:{} cwnd:{} unacked:{} not-sent:{} B",
            tcp.rtt,
            tcp.rtt_variance,
            tcp.retransmits_total,
            tcp.congestion_window_segments,
            tcp.unacked_segments,
            tcp.not_sent_bytes
        )
    });
    let line = format!(
        "{name}: connected:{} rtt:{} ack-latency:{:?} min:{:?} max:{:?} goodput:{} KiB/s \
         unreplicated:{} KiB oldest:{:?} queue-fill:{}‰ out-of-sync:{} KiB",
        if peer.connected { "yes" } else { "no" },
        peer.rtt
            .map_or_else(|| "-".to_string(), |rtt| format!("{rtt:?}")),
        peer.ack_latency_mean.unwrap_or_default(),
        peer.ack_latency_min.unwrap_or_default(),
        peer.ack_latency_p99.unwrap_or_default(),
        peer.goodput_bytes_per_s / 1024,
        peer.unreplicated_bytes / 1024,
        peer.oldest_unreplicated_age,
        peer.send_queue_fill_permille,
        peer.out_of_sync_bytes / 1024
    );
    line + &tcp
}

/// Host measurements from /proc (CPU shares need the previous sample).
#[derive(Default)]
struct HostSampler {
    previous: Option<srm::procfs::CpuTimes>,
}

impl HostSampler {
    fn sample(&mut self) -> SystemObservation {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let mut system = SystemObservation::default();
        if let Some(now) = read("/proc/stat").and_then(|text| srm::procfs::parse_stat(&text).ok()) {
            if let Some(before) = &self.previous {
                let shares = srm::procfs::cpu_shares(before, &now);
                system.cpu_busy_permille = shares.busy_permille;
                system.cpu_steal_permille = shares.steal_permille;
            }
            self.previous = Some(now);
        }
        if let Some(load) =
            read("/proc/loadavg").and_then(|text| srm::procfs::parse_loadavg(&text).ok())
        {
            system.load_average_hundredths = load.one_minute_hundredths;
        }
        if let Some(memory) =
            read("/proc/meminfo").and_then(|text| srm::procfs::parse_meminfo(&text).ok())
        {
            system.memory_available_permille = memory.available_permille();
        }
        system.cpu_count =
            u32::try_from(std::thread::available_parallelism().map_or(1, usize::from)).unwrap_or(1);
        system
    }
}

/// The MTU of the network interface that holds `address` (the node's replication address),
/// from getifaddrs and /sys/class/net; None when it cannot be told (advice only: tandem never
/// changes host network settings).
fn interface_mtu(address: std::net::IpAddr) -> Option<u32> {
    let name = interface_of(address)?;
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?;
    text.trim().parse().ok()
}

fn interface_of(address: std::net::IpAddr) -> Option<String> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut entry = list;
    while !entry.is_null() && found.is_none() {
        // SAFETY: `entry` is a node of the list getifaddrs returned, not yet freed.
        let item = unsafe { &*entry };
        if !item.ifa_addr.is_null() && sockaddr_ip(item.ifa_addr) == Some(address) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            found = Some(
                unsafe { std::ffi::CStr::from_ptr(item.ifa_name) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        entry = item.ifa_next;
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

fn sockaddr_ip(address: *const libc::sockaddr) -> Option<std::net::IpAddr> {
    // SAFETY: the caller passes a non-null sockaddr from getifaddrs; its family says which
    // layout it has.
    unsafe {
        match i32::from((*address).sa_family) {
            libc::AF_INET => {
                let v4 = &*(address.cast::<libc::sockaddr_in>());
                Some(std::net::IpAddr::from(
                    u32::from_be(v4.sin_addr.s_addr).to_be_bytes(),
                ))
            }
            libc::AF_INET6 => {
                let v6 = &*(address.cast::<libc::sockaddr_in6>());
                Some(std::net::IpAddr::from(v6.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_an_mtu() {
        let mtu = interface_mtu(std::net::IpAddr::from([127, 0, 0, 1]));
        assert!(mtu.is_some_and(|mtu| mtu >= 1500), "{mtu:?}");
        assert_eq!(
            interface_mtu(std::net::IpAddr::from([192, 0, 2, 77])),
            None,
            "an address no interface holds"
        );
    }

    #[test]
    fn write_counters_measure_rates_sizes_and_sequential_share() {
        let mut counters = WriteCounters::default();
        for index in 0..10 {
            counters.note(index * 4096, 4096);
        }
        counters.note(1 << 30, 1 << 20);
        let pattern = counters.take(Duration::from_secs(2));
        assert_eq!(pattern.writes_per_s, 5, "11 writes in 2 s, rounded down");
        assert_eq!(pattern.bytes_per_s, (10 * 4096 + (1 << 20)) / 2);
        assert_eq!(
            pattern.sequential_permille, 818,
            "9 of 11 continued the previous write"
        );
        assert_eq!(pattern.size_histogram[srm::size_class(4096)].writes, 10);
        assert_eq!(
            counters.take(Duration::from_secs(1)).writes_per_s,
            0,
            "taking resets"
        );
    }

    #[test]
    fn write_counters_measure_mean_completion_time() {
        let mut counters = WriteCounters::default();
        assert_eq!(
            counters
                .take(Duration::from_secs(1))
                .completion_latency_mean,
            None,
            "nothing completed"
        );
        counters.completed(Duration::from_millis(1));
        counters.completed(Duration::from_millis(3));
        assert_eq!(
            counters
                .take(Duration::from_secs(1))
                .completion_latency_mean,
            Some(Duration::from_millis(2))
        );
        assert_eq!(
            counters
                .take(Duration::from_secs(1))
                .completion_latency_mean,
            None,
            "taking resets"
        );
    }

    #[test]
    fn status_shows_the_last_switch_with_its_gains_and_the_back_off() {
        let mut status = srm::PeerStatus {
            protocol: srm::Protocol::C,
            possibly_stale: false,
            ahead: false,
            buffers: srm::BufferSettings {
                max_buffers_pages: 2048,
                max_epoch_size: 2048,
                sndbuf_bytes: 128 << 10,
            },
            resync_cap_bytes_per_s: None,
            last_switch: None,
            undone_switches: 0,
            async_not_before: None,
        };
        assert_eq!(switch_line("bob", &status, Duration::ZERO), None);
        status.last_switch = Some(srm::SwitchRecord {
            at: Duration::from_millis(12_400),
            predicted_gain_permille: 15_200,
            observed_gain_permille: Some(1_000),
            verdict: srm::SwitchVerdict::Undone,
        });
        status.undone_switches = 1;
        status.async_not_before = Some(Duration::from_secs(30));
        assert_eq!(
            switch_line("bob", &status, Duration::from_secs(20)).as_deref(),
            Some(
                "bob: last switch to A at 12.4s: predicted gain 15.20x, observed 1.00x (undone); \
                 1 undone in a row, no switch to A before 30.0s"
            )
        );
        assert_eq!(
            switch_line("bob", &status, Duration::from_secs(31)).as_deref(),
            Some("bob: last switch to A at 12.4s: predicted gain 15.20x, observed 1.00x (undone)"),
            "a back-off that passed is not shown"
        );
    }
}
