//! `tandem adjust`: re-read the configuration and apply what changed to the running
//! resources without dropping their connections, as far as tandem can do that live.
//!
//! Live (through `Engine::reconfigure_peer`): protocol, max-epoch-size, max-buffers, ping-int,
//! ping-timeout, timeout, ko-count, the resync rate options, the after-sb policies,
//! on-congestion and its thresholds, and whether csums-alg is used; `fencing` (through
//! `Engine::set_fencing`); on-io-error; on the running link:
//! sndbuf-size and async-buffer. Not yet live (reported, applied at the node's next start):
//! rcvbuf-size, connect-int, shared secret, verify-alg/csums-alg algorithm names, handlers, a
//! volume's `io` (the backing disk is opened once, at start). Refused as a whole (nothing applied):
//! a file that does not load, a resource or host section that is gone, peers, addresses or volumes
//! that changed.
//!
//! The plan ([`Plan`]) is also how `net-options` and `disk-options` apply their changes
//! (`runtime_options.rs`); every applied plan records the peers' settings as now running.
//!
//! `--skip-net` (drbdadm's option) leaves every connection's options alone: only the
//! volumes' disk options (on-io-error) change.
//!
//! Invariant: adjust either applies every live change of every selected resource, or (on a
//! refusal found before anything was applied) none; the report lists each change.

use std::path::PathBuf;
use std::sync::Arc;

use repl::PeerConfig;

use crate::resource::{PeerInfo, Resource};
use crate::setup::{peer_config, peer_infos, volume_layout};

/// What adjust needs to know about the node.
#[derive(Debug, Clone)]
pub(crate) struct NodeContext {
    /// The configuration file the node was started with.
    pub(crate) config_path: PathBuf,
    /// Its `on NAME` section.
    pub(crate) node_name: String,
}

/// Which options an adjust applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope {
    /// The connections' (net) options; false for `adjust --skip-net`.
    pub(crate) net: bool,
}

/// One resource's planned changes.
pub(crate) struct Plan {
    resource: Arc<Resource>,
    configs: Vec<PeerConfig>,
    /// Per peer: its new net options, for the settings of its running link.
    links: Vec<(u8, config::NetOptions)>,
    /// A new `on-io-error`, if it changed.
    /// Volumes whose `on-io-error` changes.
    on_io_error: Vec<(u16, repl::OnIoError)>,
    /// Per peer whose `fencing` changed: the new policy.
    fencing: Vec<(u8, repl::FencePolicy)>,
    /// The peers' settings once applied (what `net-options` starts from next).
    infos: Vec<PeerInfo>,
    report: Vec<String>,
}

impl Plan {
    /// Nothing to change yet.
    pub(crate) fn new(resource: &Arc<Resource>) -> Plan {
        Plan {
            resource: Arc::clone(resource),
            configs: Vec::new(),
            links: Vec::new(),
            on_io_error: Vec::new(),
            fencing: Vec::new(),
            infos: Vec::new(),
            report: Vec::new(),
        }
    }

    /// Plans the live changes that take `info`'s peer from its running settings to
    /// `info`'s: the running link's buffers, the engine's settings, fencing.
    pub(crate) fn peer(&mut self, info: &PeerInfo) {
        let resource = Arc::clone(&self.resource);
        let link_changes = link_changes(&resource, info);
        if !link_changes.is_empty() {
            self.report
                .push(format!("{}: {}", info.name, link_changes.join(", ")));
            self.links.push((info.node_id, info.net.clone()));
        }
        let after = peer_config(info);
        let running = resource.step(|engine, _, _| engine.peer_config(info.node_id));
        let changes = live_changes(&running.unwrap_or_else(|| after.clone()), &after);
        if !changes.is_empty() {
            self.report
                .push(format!("{}: {}", info.name, changes.join(", ")));
            self.configs.push(after);
        }
        let policy = crate::setup::fence_policy(info.net.fencing);
        let running = resource.with_engine(|engine| engine.fence_policy(info.node_id));
        if running.is_some_and(|running| running != policy) {
            self.report.push(format!(
                "{}: fencing {} -> {policy}",
                info.name,
                running.unwrap_or_default()
            ));
            self.fencing.push((info.node_id, policy));
        }
        self.infos.push(info.clone());
    }

    /// Plans `volume`'s `on-io-error` to become `wanted`.
    pub(crate) fn on_io_error(&mut self, volume: u16, wanted: repl::OnIoError) {
        let running = self
            .resource
            .with_engine(|engine| engine.on_io_error(volume));
        if running.is_some_and(|running| running != wanted) {
            self.report.push(format!(
                "volume {volume}: on-io-error {:?} -> {wanted:?}",
                running.unwrap_or_default()
            ));
            self.on_io_error.push((volume, wanted));
        }
    }

    /// Applies the plan; returns its report lines (`RES: no changes` when empty).
    pub(crate) fn apply(self) -> Result<Vec<String>, String> {
        let name = self.resource.name.clone();
        for (peer, net) in &self.links {
            let tuning = self.resource.tuning(*peer);
            tuning.set_async_buffer_bytes(net.async_buffer_bytes);
            tuning.set_compression(net.async_buffer_compress);
            let sndbuf = net.sndbuf_size_bytes;
            self.resource
                .set_sndbuf(*peer, sndbuf)
                .map_err(|error| format!("{name}: sndbuf-size {sndbuf}: {error}"))?;
        }
        for (volume, policy) in self.on_io_error {
            self.resource
                .step(|engine, _, _| engine.set_on_io_error(volume, policy));
        }
        for (peer, policy) in self.fencing {
            self.resource
                .step(|engine, now, out| engine.set_fencing(now, peer, policy, out))
                .map_err(|error| format!("{name}: {error}"))?;
        }
        for config in self.configs {
            self.resource
                .step(|engine, now, out| engine.reconfigure_peer(now, config, out))
                .map_err(|error| format!("{name}: {error}"))?;
        }
        for info in self.infos {
            self.resource.set_live_peer(info);
        }
        if self.report.is_empty() {
            return Ok(vec![format!("{name}: no changes")]);
        }
        Ok(self
            .report
            .into_iter()
            .map(|line| format!("{name}: {line}"))
            .collect())
    }
}

/// Re-reads the configuration and applies it to the selected resources; returns the report.
pub(crate) fn adjust(
    context: &NodeContext,
    selected: &[Arc<Resource>],
    scope: Scope,
) -> Result<String, String> {
    let config = config::load(&context.config_path)
        .map_err(|error| format!("{error}\nnothing was changed"))?;
    let mut plans = Vec::new();
    for resource in selected {
        plans.push(
            plan(&config, resource, &context.node_name, scope)
                .map_err(|error| format!("{}: {error}; nothing was changed", resource.name))?,
        );
    }
    let mut lines = Vec::new();
    for plan in plans {
        lines.extend(plan.apply()?);
    }
    Ok(lines.join("\n"))
}

fn plan(
    config: &config::Config,
    resource: &Arc<Resource>,
    node: &str,
    scope: Scope,
) -> Result<Plan, String> {
    let new = config
        .resources
        .iter()
        .find(|r| r.name == resource.name)
        .ok_or("the resource is no longer in the configuration")?;
    let host = new
        .host(node)
        .ok_or_else(|| format!("the resource has no 'on {node}' section any more"))?;
    let (peers, listen) = peer_infos(new, host)?;
    if listen != resource.listen {
        return Err("the listening addresses changed; restart the node to apply that".into());
    }
    if volume_layout(host) != resource.volume_layout {
        return Err(
            "the volumes (disk, meta-disk, device minor) changed; restart the node to apply that"
                .into(),
        );
    }
    let key = |p: &PeerInfo| (p.node_id, p.name.clone(), p.address);
    let mut old_keys: Vec<_> = resource.peers.iter().map(key).collect();
    let mut new_keys: Vec<_> = peers.iter().map(key).collect();
    old_keys.sort();
    new_keys.sort();
    if old_keys != new_keys {
        return Err("the peers or their addresses changed; restart the node to apply that".into());
    }
    let mut plan = Plan::new(resource);
    for info in peers.iter().filter(|_| scope.net) {
        let Some(old) = resource.peers.iter().find(|p| p.node_id == info.node_id) else {
            continue;
        };
        plan.peer(info);
        let pending = pending_changes(old, info);
        if !pending.is_empty() {
            plan.report.push(format!(
                "{}: changed but not applied until the node restarts: {}",
                info.name,
                pending.join(", ")
            ));
        }
    }
    for (volume, wanted) in crate::setup::on_io_error_of(host) {
        plan.on_io_error(volume, wanted);
    }
    for volume in &host.volumes {
        let running = resource.disk_io(volume.number);
        if running.is_some_and(|running| running != volume.disk_options.io) {
            let (from, to) = (
                running.map_or("", |io| io.as_str()),
                volume.disk_options.io.as_str(),
            );
            plan.report.push(format!(
                "volume {}: io {from} -> {to} changed but not applied until the node restarts \
                 (the backing disk stays open as it is)",
                volume.number
            ));
        }
    }
    Ok(plan)
}

/// `name old -> new` for the running link's settings that differ.
fn link_changes(resource: &Resource, info: &PeerInfo) -> Vec<String> {
    let tuning = resource.tuning(info.node_id);
    let compression = |c: Option<wire::Compression>| {
        c.map_or_else(|| "none".to_string(), |c| format!("{c:?}").to_lowercase())
    };
    let wanted = crate::link_tuning::LinkTuning::new(&info.net);
    let fields = [
        (
            "sndbuf-size",
            tuning.sndbuf_bytes().to_string(),
            info.net.sndbuf_size_bytes.to_string(),
        ),
        (
            "async-buffer",
            tuning.async_buffer_bytes().to_string(),
            info.net.async_buffer_bytes.to_string(),
        ),
        (
            "async-buffer-compress",
            compression(tuning.compression()),
            compression(wanted.compression()),
        ),
    ];
    fields
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("{name} {a} -> {b}"))
        .collect()
}

/// `name old -> new` for every engine setting that differs.
fn live_changes(before: &PeerConfig, after: &PeerConfig) -> Vec<String> {
    let fields: [(&str, String, String); 10] = [
        (
            "protocol",
            before.protocol.to_string(),
            after.protocol.to_string(),
        ),
        (
            "max-epoch-size",
            before.max_epoch_size.to_string(),
            after.max_epoch_size.to_string(),
        ),
        (
            "max-buffers",
            before.max_buffers_pages.to_string(),
            after.max_buffers_pages.to_string(),
        ),
        (
            "ping-int",
            format!("{:?}", before.ping_interval),
            format!("{:?}", after.ping_interval),
        ),
        (
            "ping-timeout",
            format!("{:?}", before.ping_timeout),
            format!("{:?}", after.ping_timeout),
        ),
        (
            "timeout",
            format!("{:?}", before.timeout),
            format!("{:?}", after.timeout),
        ),
        (
            "ko-count",
            before.ko_count.to_string(),
            after.ko_count.to_string(),
        ),
        (
            "resync options",
            format!("{:?}", before.resync),
            format!("{:?}", after.resync),
        ),
        (
            "after-sb policies",
            format!("{:?}", before.split_brain),
            format!("{:?}", after.split_brain),
        ),
        (
            "on-congestion",
            format!("{:?}", before.congestion),
            format!("{:?}", after.congestion),
        ),
    ];
    let mut changes: Vec<String> = fields
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(name, a, b)| format!("{name} {a} -> {b}"))
        .collect();
    if before.csums != after.csums {
        changes.push(format!(
            "csums {} -> {}",
            on_off(before.csums),
            on_off(after.csums)
        ));
    }
    changes
}

/// Settings the daemon reads only at start or at connect.
fn pending_changes(old: &PeerInfo, new: &PeerInfo) -> Vec<&'static str> {
    let (a, b) = (&old.net, &new.net);
    let checks = [
        ("rcvbuf-size", a.rcvbuf_size_bytes != b.rcvbuf_size_bytes),
        ("connect-int", a.connect_int != b.connect_int),
        (
            "cram-hmac-alg/shared-secret",
            a.cram_hmac_alg != b.cram_hmac_alg || a.shared_secret != b.shared_secret,
        ),
        ("verify-alg", old.verify_alg != new.verify_alg),
        (
            "csums-alg",
            old.csums_alg != new.csums_alg && old.csums_alg.is_some() && new.csums_alg.is_some(),
        ),
    ];
    checks
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| name)
        .collect()
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}
