//! Start-up: turn a configuration into running resources, and serve until a signal.
//!
//! Invariant: everything that can be checked (config, node selection, disks, sizes, sockets)
//! is checked in `prepare`/`bind` before any peer or client is served, so a bad setup is a
//! clear error and starts nothing.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bufpool::{BufPool, PoolConfig};
use repl::{
    AfterSb0Pri, AfterSb1Pri, AfterSb2Pri, Engine, EngineConfig, FencePolicy, NodeId, OnNoQuorum,
    PeerConfig, QuorumConfig, QuorumRule, ResyncRateConfig, SplitBrainPolicies,
};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc;

use crate::digest::DigestKind;
use crate::disk::Disk;
use crate::export::Registry;
use crate::meta_store::MetaStore;
use crate::metadata::{MetaFile, MetaSpec, MetadataError};
use crate::peer::{self, Acceptor};
use crate::resource::{PeerInfo, Resource, ResourceParts};
use crate::{admin_server, resync_after, DaemonError, NodeOptions};

/// Options tandem acts on today; every other option that is set is reported once at start-up
/// as accepted but not yet active.
pub(crate) const ACTIVE_OPTIONS: &[&str] = &[
    "protocol",
    "max-buffers",
    "max-epoch-size",
    "sndbuf-size",
    "rcvbuf-size",
    "ping-int",
    "ping-timeout",
    "timeout",
    "ko-count",
    "connect-int",
    "cram-hmac-alg",
    "shared-secret",
    "resync-rate",
    "c-plan-ahead",
    "c-delay-target",
    "c-fill-target",
    "c-max-rate",
    "c-min-rate",
    "after-sb-0pri",
    "after-sb-1pri",
    "after-sb-2pri",
    "split-brain",
    "initial-split-brain",
    "pri-lost-after-sb",
    "verify-alg",
    "csums-alg",
    "out-of-sync",
    "al-extents",
    "al-updates",
    "resync-after",
    "quorum",
    "on-no-quorum",
    "quorum-minimum-redundancy",
    "quorum-lost",
    "srm",
    "srm-interval",
    "srm-max-lag-bytes",
    "srm-max-lag-time",
    "srm-latency-high",
    "srm-latency-low",
    "srm-fill-high",
    "srm-fill-low",
    "srm-min-dwell",
    "srm-max-buffers-min",
    "srm-max-buffers-max",
    "srm-max-epoch-size-min",
    "srm-max-epoch-size-max",
    "srm-resync-share",
    "auto-promote",
    "before-resync-target",
    "after-resync-target",
    "before-resync-source",
    "disk-flushes",
    "on-congestion",
    "congestion-fill",
    "congestion-extents",
    "async-buffer",
    "async-buffer-compress",
    "tls",
    "on-io-error",
    "local-io-error",
    "fencing",
    "fence-peer",
    "unfence-peer",
    "handler-timeout",
];

/// Dirty bitmap pages are written every this many engine ticks (1 s), besides on every
/// metadata change and at shutdown.
const BITMAP_WRITE_TICKS: u32 = 10;

/// A node ready to serve: resources built, nothing listening yet.
pub(crate) struct PreparedNode {
    pub(crate) name: String,
    pub(crate) resources: Vec<Arc<Resource>>,
    pub(crate) nbd_address: Option<std::net::SocketAddr>,
    /// Where to serve Prometheus metrics (`metrics-address`), if anywhere.
    pub(crate) metrics_address: Option<std::net::SocketAddr>,
    /// FUSE mount directories (`fuse-mount`), each with the resources whose files it holds.
    pub(crate) fuse_mounts: std::collections::BTreeMap<std::path::PathBuf, Vec<String>>,
    /// The largest NBD request: a write may touch at most as many activity-log extents as one
    /// transaction can activate, so small `al-extents` lower it.
    pub(crate) request_bytes_max: u32,
    /// `resync-after` between this node's volumes.
    pub(crate) resync_after: Vec<resync_after::Dependency>,
}

/// The largest request whose extents (4 MiB each, plus one for an unaligned start) fit one
/// activity-log transaction of a cache of `al_extents`.
fn request_bytes_max_for(al_extents: u32) -> u32 {
    let per_transaction =
        u64::from(al_extents).min(meta::activity_log::AL_UPDATES_PER_TRANSACTION_MAX as u64);
    let bytes = per_transaction
        .saturating_sub(1)
        .saturating_mul(meta::AL_EXTENT_BYTES);
    u32::try_from(bytes)
        .unwrap_or(u32::MAX)
        .min(nbd::ServerConfig::REQUEST_BYTES_MAX_DEFAULT)
}

/// Load and check everything; open the disks.
pub(crate) fn prepare(options: &NodeOptions) -> Result<PreparedNode, DaemonError> {
    let config = config::load(&options.config)?;
    crate::handlers::set_conf_path(&options.config);
    let name = match &options.node {
        Some(name) => name.clone(),
        None => host_name()?,
    };
    for setting in config.settings_not_in(ACTIVE_OPTIONS) {
        let scope = setting
            .resource
            .as_deref()
            .map_or_else(|| "global".to_string(), |r| format!("resource {r}"));
        tracing::warn!(
            "{}: {} ({scope}, {:?} section): accepted but not yet active in tandem",
            setting.at,
            setting.option,
            setting.section
        );
    }
    let pool = BufPool::new(PoolConfig::default());
    let mut resources = Vec::new();
    let mut nbd_address = None;
    let mut metrics_address = None;
    let mut fuse_mounts = std::collections::BTreeMap::<_, Vec<String>>::new();
    let mut request_bytes_max = nbd::ServerConfig::REQUEST_BYTES_MAX_DEFAULT;
    let mut declared = Vec::new();
    for resource in &config.resources {
        let Some(host) = resource.host(&name) else {
            continue;
        };
        let volumes = host
            .volumes
            .iter()
            .map(|v| (v.number, v.disk_options.resync_after.clone()))
            .collect();
        declared.push(resync_after::Declared {
            name: resource.name.clone(),
            volumes,
        });
        nbd_address = nbd_address.or(host.nbd_address);
        metrics_address = metrics_address.or(host.metrics_address);
        if let Some(path) = &host.fuse_mount {
            fuse_mounts
                .entry(path.clone())
                .or_default()
                .push(resource.name.clone());
        }
        for volume in &host.volumes {
            request_bytes_max =
                request_bytes_max.min(request_bytes_max_for(volume.disk_options.al_extents));
        }
        resources.push(build_resource(resource, host, &pool)?);
    }
    if resources.is_empty() {
        let file = options.config.display();
        return Err(DaemonError::Setup(format!(
            "{file}: no resource has an 'on {name}' section; pick the node with --node NAME"
        )));
    }
    let resync_after = resync_after::resolve(&declared).map_err(DaemonError::Setup)?;
    Ok(PreparedNode {
        name,
        resources,
        nbd_address,
        metrics_address,
        fuse_mounts,
        request_bytes_max,
        resync_after,
    })
}

fn host_name() -> Result<String, DaemonError> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(DaemonError::Setup(
            "cannot read the host name; pass --node NAME".into(),
        ));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The peers of `host` in `resource` and the addresses it listens on; an error says what is
/// wrong in words (used at start-up and by `adjust`).
pub(crate) fn peer_infos(
    resource: &config::Resource,
    host: &config::Host,
) -> Result<(Vec<PeerInfo>, Vec<std::net::SocketAddr>), String> {
    let mut peers = Vec::new();
    let mut listen = Vec::new();
    for connection in resource.connections_of(&host.name) {
        let Some(peer) = connection
            .peer_of(&host.name)
            .and_then(|name| resource.host(name))
        else {
            continue;
        };
        let (local, remote) = connection.addresses_of(&host.name, 0).ok_or_else(|| {
            format!(
                "no address for the connection {} - {}",
                host.name, peer.name
            )
        })?;
        check_auth(&connection.net)?;
        if !listen.contains(&local) {
            listen.push(local);
        }
        let split_brain = split_brain_policies(
            &|name| resource.host(name).map(|host| host.node_id),
            &connection.net,
        )?;
        let verify_alg = digest_of("verify-alg", connection.net.verify_alg.as_deref())?;
        let csums_alg = digest_of("csums-alg", connection.net.csums_alg.as_deref())?;
        peers.push(PeerInfo {
            node_id: peer.node_id,
            name: peer.name.clone(),
            address: remote,
            local_address: local,
            diskless_volumes: peer
                .volumes
                .iter()
                .filter(|volume| volume.disk.is_none())
                .map(|volume| volume.number)
                .collect(),
            net: connection.net.clone(),
            peer_device: connection.peer_device.clone(),
            split_brain,
            verify_alg,
            csums_alg,
            disk_flushes: host.volumes.iter().all(|v| v.disk_options.disk_flushes),
        });
    }
    if let (true, Some(address)) = (listen.is_empty(), host.address) {
        listen.push(address);
    }
    Ok((peers, listen))
}

/// Opens a volume's metadata and backing disk, with the volume's engine configuration.
fn open_volume(
    volume: &config::Volume,
    path: &Path,
    host: &config::Host,
    peer_ids: &[u8],
    setup_error: &dyn Fn(String) -> DaemonError,
) -> Result<(Disk, Arc<MetaStore>, repl::VolumeConfig), DaemonError> {
    let volume_error =
        |error: MetadataError| setup_error(format!("volume {}: {error}", volume.number));
    let spec = MetaSpec {
        disk: path.to_path_buf(),
        meta_disk: volume.meta_disk.clone(),
        node_id: host.node_id,
        peers: peer_ids.to_vec(),
        al_extents: volume.disk_options.al_extents,
    };
    let (file, superblock) = MetaFile::open(&spec).map_err(volume_error)?;
    let store = Arc::new(MetaStore::new(file, superblock));
    let mut disk = Disk::open_limited(path, store.data_bytes(), volume.disk_options.io)?;
    if let Some(micros) = host.disk_throttle_latency_us.filter(|&m| m > 0) {
        tracing::warn!(
            "volume {}: disk-throttle-latency {micros} us: every local write is slowed down \
             (benchmarks and tests only)",
            volume.number
        );
        disk.set_throttle(std::time::Duration::from_micros(micros));
    }
    let config = store
        .volume_config(volume.number, peer_ids, volume.disk_options.al_updates)
        .map_err(volume_error)?;
    Ok((disk, store, config))
}

fn build_resource(
    resource: &config::Resource,
    host: &config::Host,
    pool: &Arc<BufPool>,
) -> Result<Arc<Resource>, DaemonError> {
    let setup_error =
        |message: String| DaemonError::Setup(format!("resource {}: {message}", resource.name));
    let (peers, listen) = peer_infos(resource, host).map_err(setup_error)?;
    let peer_ids: Vec<u8> = peers.iter().map(|p| p.node_id).collect();
    let mut volumes = Vec::new();
    let mut metas = Vec::new();
    let mut volume_configs = Vec::new();
    for volume in &host.volumes {
        let Some(path) = &volume.disk else {
            // `disk none;`: no backing file and no metadata; the node connects, votes for
            // quorum and stores nothing (a tiebreaker).
            volume_configs.push(diskless_volume(volume.number));
            continue;
        };
        let (disk, store, config) = open_volume(volume, path, host, &peer_ids, &setup_error)?;
        volume_configs.push(config);
        volumes.push((volume.number, Arc::new(disk)));
        metas.push((volume.number, store));
    }
    let engine = Engine::new(EngineConfig {
        node_id: host.node_id,
        volumes: volume_configs,
        peers: peers.iter().map(peer_config).collect(),
        random_seed: rand::random(),
    })
    .map_err(|error| {
        setup_error(format!(
            "the metadata does not fit the configuration: {error}"
        ))
    })?;
    let volume_layout = volume_layout(host);
    let tls = tls_setup(resource, host, &peers).map_err(setup_error)?;
    let minors = host
        .volumes
        .iter()
        .filter_map(|v| Some((v.number, v.minor?)))
        .collect();
    let parts = ResourceParts {
        name: resource.name.clone(),
        node_id: host.node_id,
        listen,
        peers,
        volumes,
        metas,
        pool: Arc::clone(pool),
        handlers: resource.handlers.clone(),
        engine,
        volume_layout,
        minors,
        options: resource.options.clone(),
        tls,
    };
    let built = Resource::new(parts)
        .map_err(|error| setup_error(format!("cannot start I/O threads: {error}")))?;
    let quorum = quorum_config(&resource.options);
    built.step(|engine, now, out| engine.set_quorum(now, quorum, out));
    for (volume, policy) in on_io_error_of(host) {
        built.step(|engine, _, _| engine.set_on_io_error(volume, policy));
    }
    apply_fencing(&built, &resource.handlers);
    Ok(built)
}

/// Each volume's `on-io-error` (a volume's `disk { }` section, else the resource's, else
/// DRBD's default, `detach`).
pub(crate) fn on_io_error_of(host: &config::Host) -> Vec<(u16, repl::OnIoError)> {
    host.volumes
        .iter()
        .map(|v| (v.number, on_io_error_policy(v.disk_options.on_io_error)))
        .collect()
}

/// The engine's policy for a configured `on-io-error`.
pub(crate) fn on_io_error_policy(option: config::OnIoError) -> repl::OnIoError {
    match option {
        config::OnIoError::PassOn => repl::OnIoError::PassOn,
        config::OnIoError::Detach => repl::OnIoError::Detach,
        config::OnIoError::CallLocalIoError => repl::OnIoError::CallLocalIoError,
    }
}

/// A volume without a disk (`disk none;`): Diskless, no size, no bitmaps, no activity log.
pub(crate) fn diskless_volume(number: u16) -> repl::VolumeConfig {
    repl::VolumeConfig {
        disk: repl::DiskState::Diskless,
        ..repl::VolumeConfig::fresh(number, 0)
    }
}

/// Each connection's `fencing` to the engine; fencing without a `fence-peer` handler is
/// reported (every fence then fails, and `resource-and-stonith` freezes I/O until
/// `resume-io`).
pub(crate) fn apply_fencing(resource: &Arc<Resource>, handlers: &config::Handlers) {
    for peer in &resource.peers {
        let policy = fence_policy(peer.net.fencing);
        if policy != FencePolicy::DontCare && !handlers.contains_key("fence-peer") {
            tracing::warn!(resource = %resource.name, peer = %peer.name, "fencing {} without a \
                fence-peer handler: every fence fails", peer.net.fencing);
        }
        if let Err(error) =
            resource.step(|engine, now, out| engine.set_fencing(now, peer.node_id, policy, out))
        {
            tracing::error!(
                resource = %resource.name, peer = %peer.name,
                "cannot set fencing: {error}"
            );
        }
    }
}

pub(crate) fn fence_policy(fencing: config::Fencing) -> FencePolicy {
    match fencing {
        config::Fencing::DontCare => FencePolicy::DontCare,
        config::Fencing::ResourceOnly => FencePolicy::ResourceOnly,
        config::Fencing::ResourceAndStonith => FencePolicy::ResourceAndStonith,
    }
}

/// `tls yes`: this host's certificate and key, and each peer's pinned fingerprint (the
/// configuration already checked that every host of a TLS resource has one).
fn tls_setup(
    resource: &config::Resource,
    host: &config::Host,
    peers: &[PeerInfo],
) -> Result<Option<Arc<crate::tls::TlsSetup>>, String> {
    if !peers.iter().any(|p| p.net.tls) {
        return Ok(None);
    }
    let (Some(certificate), Some(key)) = (&host.tls_certificate, &host.tls_key) else {
        return Err(format!(
            "tls yes: host '{}' needs tls-certificate and tls-key in its on section (`tandem \
             tls-keygen` makes them)",
            host.name
        ));
    };
    let mut pins = Vec::new();
    for peer in peers {
        let pin = resource
            .host(&peer.name)
            .and_then(|h| h.tls_fingerprint)
            .ok_or_else(|| format!("tls yes: host '{}' has no tls-fingerprint", peer.name))?;
        pins.push((peer.node_id, peer.name.as_str(), pin));
    }
    crate::tls::TlsSetup::new(certificate, key, &pins).map(|setup| Some(Arc::new(setup)))
}

/// The engine's quorum settings from the resource's `options { }`.
pub(crate) fn quorum_config(options: &config::ResourceOptions) -> QuorumConfig {
    let rule = |quorum: config::Quorum| match quorum {
        config::Quorum::Off => QuorumRule::Off,
        config::Quorum::Majority => QuorumRule::Majority,
        config::Quorum::All => QuorumRule::All,
        config::Quorum::Nodes(count) => QuorumRule::Nodes(count),
    };
    let on_loss = match options.on_no_quorum {
        config::OnNoQuorum::IoError => OnNoQuorum::IoError,
        config::OnNoQuorum::SuspendIo => OnNoQuorum::SuspendIo,
    };
    QuorumConfig {
        rule: rule(options.quorum),
        on_loss,
        minimum_redundancy: rule(options.quorum_minimum_redundancy),
    }
}

/// The volumes of `host` as `adjust` compares them: number, disk and meta-disk.
pub(crate) fn volume_layout(host: &config::Host) -> String {
    let volumes: Vec<String> = host
        .volumes
        .iter()
        .map(|v| format!("{}:{:?}:{:?}:{:?}", v.number, v.disk, v.meta_disk, v.minor))
        .collect();
    volumes.join(",")
}

fn check_auth(net: &config::NetOptions) -> Result<(), String> {
    match (net.cram_hmac_alg.is_some(), net.shared_secret.is_some()) {
        (true, false) => Err("cram-hmac-alg is set but shared-secret is not".into()),
        (false, true) => Err("shared-secret is set but cram-hmac-alg is not".into()),
        _ => Ok(()),
    }
}

pub(crate) fn peer_config(peer: &PeerInfo) -> PeerConfig {
    PeerConfig {
        node_id: peer.node_id,
        name: peer.name.clone(),
        protocol: peer::protocol_of(&peer.net),
        max_epoch_size: peer.net.max_epoch_size,
        ping_interval: peer.net.ping_int,
        ping_timeout: peer.net.ping_timeout,
        timeout: peer.net.timeout,
        ko_count: peer.net.ko_count,
        max_buffers_pages: peer.net.max_buffers,
        resync: resync_rate_config(&peer.peer_device),
        split_brain: peer.split_brain,
        csums: peer.csums_alg.is_some(),
        durable_acks: peer.disk_flushes,
        congestion: congestion_of(&peer.net),
    }
}

/// `on-congestion` with `congestion-fill` and `congestion-extents`.
fn congestion_of(net: &config::NetOptions) -> Option<repl::Congestion> {
    let policy = match net.on_congestion {
        config::OnCongestion::Block => return None,
        config::OnCongestion::PullAhead => repl::CongestionPolicy::PullAhead,
        config::OnCongestion::Disconnect => repl::CongestionPolicy::Disconnect,
    };
    Some(repl::Congestion {
        policy,
        fill_bytes: net.congestion_fill_sectors.saturating_mul(512),
        extents: net.congestion_extents,
    })
}

/// The digest algorithm a `verify-alg` / `csums-alg` names, if set; an error names the ones
/// tandem computes.
fn digest_of(option: &str, name: Option<&str>) -> Result<Option<DigestKind>, String> {
    let Some(name) = name else { return Ok(None) };
    match DigestKind::from_name(name) {
        Some(kind) => Ok(Some(kind)),
        None => Err(format!(
            "{option} {name} is not supported; use one of {}",
            crate::digest::DIGEST_NAMES.join(", ")
        )),
    }
}

fn resync_rate_config(options: &config::PeerDeviceOptions) -> ResyncRateConfig {
    ResyncRateConfig {
        resync_rate_kib_per_s: options.resync_rate_kib_per_s,
        c_plan_ahead: options.c_plan_ahead,
        c_delay_target: options.c_delay_target,
        c_fill_target_sectors: options.c_fill_target_sectors,
        c_max_rate_kib_per_s: options.c_max_rate_kib_per_s,
        c_min_rate_kib_per_s: options.c_min_rate_kib_per_s,
    }
}

/// The `after-sb-*` policies of a connection; `discard-node-NAME` must name a host of the
/// resource.
/// The after-sb policies of `net`; `node_id_of` finds the node id of a host the resource
/// names (for `discard-node-NAME`).
pub(crate) fn split_brain_policies(
    node_id_of: &dyn Fn(&str) -> Option<u8>,
    net: &config::NetOptions,
) -> Result<SplitBrainPolicies, String> {
    use config::{AfterSb0Pri as C0, AfterSb1Pri as C1, AfterSb2Pri as C2};
    let zero_primaries = match &net.after_sb_0pri {
        C0::Disconnect => AfterSb0Pri::Disconnect,
        C0::DiscardYoungerPrimary => AfterSb0Pri::DiscardYoungerPrimary,
        C0::DiscardOlderPrimary => AfterSb0Pri::DiscardOlderPrimary,
        C0::DiscardZeroChanges => AfterSb0Pri::DiscardZeroChanges,
        C0::DiscardLeastChanges => AfterSb0Pri::DiscardLeastChanges,
        C0::DiscardNode(name) => {
            let node_id = node_id_of(name).ok_or_else(|| {
                format!("after-sb-0pri discard-node-{name}: no host named '{name}' in the resource")
            })?;
            let node = NodeId::new(node_id)
                .map_err(|error| format!("after-sb-0pri discard-node-{name}: {error}"))?;
            AfterSb0Pri::DiscardNode(node)
        }
    };
    let one_primary = match net.after_sb_1pri {
        C1::Disconnect => AfterSb1Pri::Disconnect,
        C1::Consensus => AfterSb1Pri::Consensus,
        C1::ViolentlyAs0p => AfterSb1Pri::ViolentlyAs0p,
        C1::DiscardSecondary => AfterSb1Pri::DiscardSecondary,
        C1::CallPriLostAfterSb => AfterSb1Pri::CallPriLostAfterSb,
    };
    let two_primaries = match net.after_sb_2pri {
        C2::Disconnect => AfterSb2Pri::Disconnect,
        C2::ViolentlyAs0p => AfterSb2Pri::ViolentlyAs0p,
        C2::CallPriLostAfterSb => AfterSb2Pri::CallPriLostAfterSb,
    };
    Ok(SplitBrainPolicies {
        zero_primaries,
        one_primary,
        two_primaries,
    })
}

fn bind_unix(path: &Path, mode: u32) -> Result<UnixListener, DaemonError> {
    let what = path.display().to_string();
    if path.exists() {
        // A socket left by a dead node; a live node would still answer on it.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(DaemonError::Listen {
                what,
                source: std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "another node is running with this run directory",
                ),
            });
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|source| DaemonError::Listen {
        what: what.clone(),
        source,
    })?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|source| DaemonError::Listen { what, source })?;
    Ok(listener)
}

/// Bind every socket, start every task, and wait for SIGINT or SIGTERM.
pub(crate) async fn serve(node: PreparedNode, options: NodeOptions) -> Result<(), DaemonError> {
    // TCP first: a busy port must fail before any socket file exists in the run directory.
    let peer_listeners = bind_peer_listeners(&node).await?;
    let nbd_tcp = match node.nbd_address {
        Some(address) => {
            Some(
                TcpListener::bind(address)
                    .await
                    .map_err(|source| DaemonError::Listen {
                        what: format!("NBD {address}"),
                        source,
                    })?,
            )
        }
        None => None,
    };
    let metrics_tcp = crate::metrics::bind(node.metrics_address).await?;
    std::fs::create_dir_all(&options.run_dir).map_err(|source| DaemonError::Listen {
        what: options.run_dir.display().to_string(),
        source,
    })?;
    let admin_path = options.run_dir.join("admin.sock");
    let nbd_path = options.run_dir.join("nbd.sock");
    let admin_listener = bind_unix(&admin_path, 0o600)?;
    let nbd_listener = bind_unix(&nbd_path, 0o600).inspect_err(|_| {
        let _ = std::fs::remove_file(&admin_path);
    })?;
    let registry = Arc::new(Registry {
        resources: node.resources.clone(),
    });
    let fuse_mounts =
        crate::fuse_export::mount_all(&node.fuse_mounts, &registry).inspect_err(|_| {
            let _ = std::fs::remove_file(&admin_path);
            let _ = std::fs::remove_file(&nbd_path);
        })?;
    for (resource, listener) in node.resources.iter().zip(peer_listeners) {
        start_resource(resource, listener);
    }
    spawn_nbd_servers(&node, nbd_listener, nbd_tcp, &registry);
    let context = crate::adjust::NodeContext {
        config_path: options.config.clone(),
        node_name: node.name.clone(),
    };
    tokio::spawn(admin_server::serve(
        admin_listener,
        node.resources.clone(),
        context,
    ));
    for resource in &node.resources {
        crate::srm_driver::start(resource, &resource.options);
    }
    if let Some(listener) = metrics_tcp {
        tokio::spawn(crate::metrics::serve(
            listener,
            node.name.clone(),
            node.resources.clone(),
        ));
    }
    if !node.resync_after.is_empty() {
        tokio::spawn(resync_after::run(
            node.resources.clone(),
            node.resync_after.clone(),
        ));
    }
    tracing::info!(node = %node.name, run_dir = %options.run_dir.display(), "node is up");
    // The admin socket listens and every resource is started: systemd's Type=notify
    // readiness (a no-op without NOTIFY_SOCKET).
    crate::sd_notify::notify(&format!(
        "READY=1\nSTATUS=serving {} resources",
        node.resources.len()
    ));
    if let Some(interval) = crate::sd_notify::watchdog_interval() {
        tokio::spawn(crate::sd_notify::ping_watchdog(interval));
    }
    wait_for_signal().await;
    shut_down(&node, fuse_mounts, &admin_path, &nbd_path).await;
    Ok(())
}

/// Each resource's peer listeners, in `node.resources` order.
async fn bind_peer_listeners(node: &PreparedNode) -> Result<Vec<Vec<TcpListener>>, DaemonError> {
    let mut peer_listeners = Vec::new();
    for resource in &node.resources {
        let mut listeners = Vec::new();
        for address in &resource.listen {
            let listener =
                TcpListener::bind(address)
                    .await
                    .map_err(|source| DaemonError::Listen {
                        what: format!("{address} (resource {})", resource.name),
                        source,
                    })?;
            listeners.push(listener);
        }
        peer_listeners.push(listeners);
    }
    Ok(peer_listeners)
}

/// Serves NBD on the Unix socket and, if configured, on TCP.
fn spawn_nbd_servers(
    node: &PreparedNode,
    nbd_listener: UnixListener,
    nbd_tcp: Option<TcpListener>,
    registry: &Arc<Registry>,
) {
    // One payload budget for both listeners: the node's client memory is bounded however
    // many clients connect.
    let mut server_config = nbd::ServerConfig::new(Arc::clone(&node.resources[0].pool));
    server_config.request_bytes_max = node.request_bytes_max;
    let server_config = Arc::new(server_config);
    tokio::spawn(nbd::serve_unix(
        nbd_listener,
        registry.clone(),
        Arc::clone(&server_config),
    ));
    if let Some(listener) = nbd_tcp {
        tokio::spawn(nbd::serve_tcp(
            listener,
            registry.clone(),
            Arc::clone(&server_config),
        ));
    }
}

/// After the signal: unmounts, removes the socket files, says goodbye to the peers and stops
/// every resource.
async fn shut_down(
    node: &PreparedNode,
    fuse_mounts: Vec<fuse::FuseMount>,
    admin_path: &Path,
    nbd_path: &Path,
) {
    tracing::info!("shutting down");
    crate::sd_notify::notify("STOPPING=1");
    crate::fuse_export::unmount_all(fuse_mounts);
    let _ = std::fs::remove_file(admin_path);
    let _ = std::fs::remove_file(nbd_path);
    leave_peers(&node.resources).await;
    for resource in &node.resources {
        resource.down.store(true, Ordering::Relaxed);
        resource.shut_down();
    }
}

fn start_resource(resource: &Arc<Resource>, listeners: Vec<TcpListener>) {
    let mut handoff = HashMap::new();
    for peer in &resource.peers {
        let (tx, rx) = mpsc::channel(1);
        handoff.insert(peer.node_id, tx);
        tokio::spawn(peer::supervise(Arc::clone(resource), peer.clone(), rx));
    }
    let acceptor = Arc::new(Acceptor::new(handoff));
    for listener in listeners {
        tokio::spawn(peer::listen(
            Arc::clone(resource),
            listener,
            Arc::clone(&acceptor),
        ));
    }
    let ticker = Arc::clone(resource);
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(repl::TICK_INTERVAL);
        let mut ticks: u32 = 0;
        loop {
            interval.tick().await;
            ticker.step(|engine, now, out| engine.tick(now, out));
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(BITMAP_WRITE_TICKS) {
                ticker.write_bitmaps_in_background();
            }
        }
    });
}

/// A stop leaves the peers as `down` does: a Secondary leaving a Primary outdates itself
/// durably and says so, so the Primary need not count it for quorum. Waits at most this long
/// for those departures (then the peers see a plain loss, which is stricter).
const LEAVE_WAIT_MAX: Duration = Duration::from_secs(5);
/// How often the stop looks whether the departures are done.
const LEAVE_POLL: Duration = Duration::from_millis(10);

async fn leave_peers(resources: &[Arc<Resource>]) {
    for resource in resources {
        resource.leave_peers();
    }
    let deadline = tokio::time::Instant::now() + LEAVE_WAIT_MAX;
    while resources.iter().any(|r| r.departing()) {
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(
                "stopping before every departure finished: those peers see a plain loss"
            );
            return;
        }
        tokio::time::sleep(LEAVE_POLL).await;
    }
    // The goodbyes are queued; give the links a moment to send them (bounded by the same
    // deadline): a link ends once its peer task has drained.
    while resources.iter().any(|r| r.links_up()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(LEAVE_POLL).await;
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::request_bytes_max_for;

    #[test]
    fn small_activity_logs_lower_the_largest_request() {
        assert_eq!(request_bytes_max_for(7), 24 << 20, "6 extents of 4 MiB");
        assert_eq!(request_bytes_max_for(9), 32 << 20);
        assert_eq!(
            request_bytes_max_for(1237),
            32 << 20,
            "never above NBD's 32 MiB"
        );
    }
}
