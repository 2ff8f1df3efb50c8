//! `tandem net-options` and `tandem disk-options` (drbdsetup's verbs): change the options
//! `adjust` applies live, from the command line instead of the file, through adjust's own
//! plan (`adjust::Plan`). Not persistent, as in DRBD: the next `adjust` (or start) brings the
//! file's values back.
//!
//! net-options: protocol, max-epoch-size, max-buffers, ping-int, ping-timeout, timeout,
//! ko-count, after-sb-0pri/1pri/2pri, on-congestion, congestion-fill, congestion-extents,
//! sndbuf-size, async-buffer, async-buffer-compress, fencing; for one peer or every peer.
//! disk-options: on-io-error (per volume) and the resync rate options resync-rate,
//! c-plan-ahead, c-delay-target, c-fill-target, c-max-rate, c-min-rate (tandem keeps one
//! resync configuration per peer, so these apply to every volume).
//!
//! Invariants: every option is checked (name allowed, value valid as in a file) for every
//! selected peer before anything is applied; an option outside the lists is refused with
//! the list. Each change starts from the running settings, so options set earlier by
//! `adjust` or `net-options` stay as they are.

use std::sync::Arc;

use crate::adjust::Plan;
use crate::resource::{PeerInfo, Resource};

/// The net options `net-options` may change (the ones adjust applies live).
pub(crate) const NET_OPTIONS_LIVE: &[&str] = &[
    "protocol",
    "max-epoch-size",
    "max-buffers",
    "ping-int",
    "ping-timeout",
    "timeout",
    "ko-count",
    "after-sb-0pri",
    "after-sb-1pri",
    "after-sb-2pri",
    "on-congestion",
    "congestion-fill",
    "congestion-extents",
    "sndbuf-size",
    "async-buffer",
    "async-buffer-compress",
    "fencing",
];
/// The disk option `disk-options` may change per volume.
const DISK_OPTIONS_LIVE: &[&str] = &["on-io-error"];
/// The resync options `disk-options` may change (per peer).
const RESYNC_OPTIONS_LIVE: &[&str] = &[
    "resync-rate",
    "c-plan-ahead",
    "c-delay-target",
    "c-fill-target",
    "c-max-rate",
    "c-min-rate",
];

/// `net-options`: applies `overrides` to the connections to `peer` (None: every peer).
/// `node_name` is this node's host name (for `discard-node-NAME`).
pub(crate) fn net_options(
    resource: &Arc<Resource>,
    peer: Option<&str>,
    overrides: &[(String, String)],
    node_name: &str,
) -> Result<Vec<String>, String> {
    let node_id_of = |name: &str| {
        if name == node_name {
            return Some(resource.node_id);
        }
        resource
            .peers
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.node_id)
    };
    let mut infos = Vec::new();
    for base in selected_peers(resource, peer)? {
        let net = base.net.with_overrides(NET_OPTIONS_LIVE, overrides)?;
        let split_brain = crate::setup::split_brain_policies(&node_id_of, &net)?;
        infos.push(PeerInfo {
            net,
            split_brain,
            ..base
        });
    }
    let mut plan = Plan::new(resource);
    for info in &infos {
        plan.peer(info);
    }
    plan.apply()
}

/// `disk-options`: applies `overrides` to `volume` (None: every volume) and, for the resync
/// options, to every peer.
pub(crate) fn disk_options(
    resource: &Arc<Resource>,
    volume: Option<u16>,
    overrides: &[(String, String)],
) -> Result<Vec<String>, String> {
    let allowed: Vec<&str> = DISK_OPTIONS_LIVE
        .iter()
        .chain(RESYNC_OPTIONS_LIVE)
        .copied()
        .collect();
    if let Some((name, _)) = overrides
        .iter()
        .find(|(name, _)| !allowed.contains(&name.as_str()))
    {
        return Err(format!(
            "unknown option '--{name}'; the options that can change here are: {}",
            allowed.join(", ")
        ));
    }
    let (disk, resync): (Vec<_>, Vec<_>) = overrides
        .iter()
        .cloned()
        .partition(|(name, _)| DISK_OPTIONS_LIVE.contains(&name.as_str()));
    let disk_options = config::DiskOptions::default().with_overrides(DISK_OPTIONS_LIVE, &disk)?;
    let volumes: Vec<u16> = resource
        .volumes
        .iter()
        .map(|(number, _)| *number)
        .filter(|number| volume.is_none_or(|wanted| *number == wanted))
        .collect();
    if let (Some(wanted), true) = (volume, volumes.is_empty()) {
        return Err(format!("no volume {wanted} in resource {}", resource.name));
    }
    let mut infos = Vec::new();
    if !resync.is_empty() {
        for base in selected_peers(resource, None)? {
            let peer_device = base
                .peer_device
                .with_overrides(RESYNC_OPTIONS_LIVE, &resync)?;
            infos.push(PeerInfo {
                peer_device,
                ..base
            });
        }
    }
    let mut plan = Plan::new(resource);
    if !disk.is_empty() {
        for number in volumes {
            plan.on_io_error(
                number,
                crate::setup::on_io_error_policy(disk_options.on_io_error),
            );
        }
    }
    for info in &infos {
        plan.peer(info);
    }
    plan.apply()
}

/// The running settings of the peers `peer` names (None: all).
fn selected_peers(resource: &Resource, peer: Option<&str>) -> Result<Vec<PeerInfo>, String> {
    let infos: Vec<PeerInfo> = resource
        .peers
        .iter()
        .filter(|p| peer.is_none_or(|name| p.name == name))
        .filter_map(|p| resource.live_peer(p.node_id))
        .collect();
    if infos.is_empty() {
        return Err(format!("no peer named '{}'", peer.unwrap_or_default()));
    }
    Ok(infos)
}
