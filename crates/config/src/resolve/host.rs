//! `on HOST { node-id; address; nbd-address; metrics-address; fuse-mount; volume N { };
//! disk { } }` and the effective per-host volumes.
//!
//! Invariants: a host's effective volume N takes each of device, disk and meta-disk from the
//! host's own `volume N` if written there, else from the resource's `volume N`; a volume must
//! end up with a disk (`none` for diskless), and a diskful one with a meta-disk; every host
//! has at least one volume.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::error::{ConfigError, Location};
use crate::model::{Host, MetaDisk, Volume};
use crate::options::set::OptionSet;
use crate::options::table::Class;
use crate::options::DiskOptions;
use crate::syntax::Node;

use super::address::{parse_address, parse_listen_address};
use super::sections::add_all;
use super::volume::{insert_volume, parse_volume, VolumeDecl};
use super::{plain_number, single_value, unknown_keyword};

/// Largest `disk-throttle-latency`: one second per write.
pub const DISK_THROTTLE_LATENCY_US_MAX: u64 = 1_000_000;

/// Highest node id (DRBD_PEERS_MAX - 1).
pub const NODE_ID_MAX: u8 = 31;

/// An `on` section as written.
#[derive(Clone, Debug)]
pub(crate) struct HostDecl {
    pub name: String,
    pub at: Location,
    pub node_id: Option<(u8, Location)>,
    pub address: Option<(SocketAddr, Location)>,
    pub nbd_address: Option<(SocketAddr, Location)>,
    pub metrics_address: Option<(SocketAddr, Location)>,
    pub fuse_mount: Option<(PathBuf, Location)>,
    pub tls_certificate: Option<(PathBuf, Location)>,
    pub tls_key: Option<(PathBuf, Location)>,
    pub tls_fingerprint: Option<([u8; 32], Location)>,
    pub disk_throttle_latency_us: Option<(u64, Location)>,
    pub volumes: BTreeMap<u16, VolumeDecl>,
    /// The `on` section's `disk { }` options (apply to all its volumes).
    pub disk: OptionSet,
}

/// Parses `on NAME { ... }`.
pub(crate) fn parse_host(node: &Node) -> Result<HostDecl, ConfigError> {
    let body = super::section_body(node, 1)?;
    let name_token = node.args.first().ok_or_else(|| ConfigError::WrongArity {
        at: node.at().clone(),
        name: "on".to_string(),
        expected: "one host name",
    })?;
    if name_token.text.is_empty() {
        return Err(ConfigError::InvalidName {
            at: name_token.at.clone(),
            kind: "host",
            name: String::new(),
        });
    }
    let mut host = HostDecl {
        name: name_token.text.clone(),
        at: name_token.at.clone(),
        node_id: None,
        address: None,
        nbd_address: None,
        metrics_address: None,
        fuse_mount: None,
        tls_certificate: None,
        tls_key: None,
        tls_fingerprint: None,
        disk_throttle_latency_us: None,
        volumes: BTreeMap::new(),
        disk: OptionSet::default(),
    };
    let mut implicit = VolumeDecl::new(0, node.at().clone());
    for statement in body {
        if !implicit.try_field(statement)? {
            host.statement(statement)?;
        }
    }
    if implicit.has_fields() {
        insert_volume(&mut host.volumes, implicit)?;
    }
    Ok(host)
}

/// The value of a statement that names one absolute path (`fuse-mount`, `tls-key`, ...).
fn absolute_path(node: &Node, expected: &'static str) -> Result<PathBuf, ConfigError> {
    let token = single_value(node, expected)?;
    if !Path::new(&token.text).is_absolute() {
        return Err(ConfigError::invalid(
            &token.at,
            format!("{} '{}' is not an absolute path", node.name(), token.text),
        ));
    }
    Ok(PathBuf::from(&token.text))
}

/// The value of a `tls-fingerprint` statement.
fn fingerprint_statement(node: &Node) -> Result<[u8; 32], ConfigError> {
    let token = single_value(node, "sha256:HEX (the SHA-256 of the host's certificate)")?;
    parse_fingerprint(&token.text).ok_or_else(|| {
        ConfigError::invalid(
            &token.at,
            format!(
                "tls-fingerprint '{}' is not sha256: followed by 64 hex digits",
                token.text
            ),
        )
    })
}

/// The value of a `disk-throttle-latency` statement, in microseconds.
fn throttle_latency_statement(node: &Node) -> Result<u64, ConfigError> {
    let token = single_value(node, "microseconds per local write")?;
    plain_number(
        token,
        "disk-throttle-latency",
        (0, DISK_THROTTLE_LATENCY_US_MAX),
    )
}

impl HostDecl {
    fn statement(&mut self, node: &Node) -> Result<(), ConfigError> {
        let duplicate = |what: &str, first: &Location| ConfigError::Duplicate {
            at: node.at().clone(),
            what: what.to_string(),
            first: first.clone(),
        };
        match node.name() {
            "node-id" => {
                if let Some((_, first)) = &self.node_id {
                    return Err(duplicate("node-id", first));
                }
                let token = single_value(node, "one node id")?;
                let id = plain_number(token, "node-id", (0, u64::from(NODE_ID_MAX)))?;
                self.node_id = Some((u8::try_from(id).unwrap_or(NODE_ID_MAX), token.at.clone()));
            }
            "address" => {
                if let Some((_, first)) = &self.address {
                    return Err(duplicate("address", first));
                }
                self.address = Some((self.address_statement(node)?, node.at().clone()));
            }
            "nbd-address" | "metrics-address" => {
                let slot = if node.name() == "nbd-address" {
                    &mut self.nbd_address
                } else {
                    &mut self.metrics_address
                };
                if let Some((_, first)) = slot {
                    return Err(duplicate(node.name(), first));
                }
                let address = parse_listen_address(single_value(node, "[ADDRESS:]PORT")?)?;
                *slot = Some((address, node.at().clone()));
            }
            "fuse-mount" => {
                if let Some((_, first)) = &self.fuse_mount {
                    return Err(duplicate("fuse-mount", first));
                }
                let path = absolute_path(node, "an absolute directory path")?;
                self.fuse_mount = Some((path, node.at().clone()));
            }
            "tls-certificate" | "tls-key" => {
                let slot = if node.name() == "tls-key" {
                    &mut self.tls_key
                } else {
                    &mut self.tls_certificate
                };
                if let Some((_, first)) = slot {
                    return Err(duplicate(node.name(), first));
                }
                let path = absolute_path(node, "an absolute file path")?;
                *slot = Some((path, node.at().clone()));
            }
            "tls-fingerprint" => {
                if let Some((_, first)) = &self.tls_fingerprint {
                    return Err(duplicate("tls-fingerprint", first));
                }
                self.tls_fingerprint = Some((fingerprint_statement(node)?, node.at().clone()));
            }
            "disk-throttle-latency" => {
                if let Some((_, first)) = &self.disk_throttle_latency_us {
                    return Err(duplicate("disk-throttle-latency", first));
                }
                let micros = throttle_latency_statement(node)?;
                self.disk_throttle_latency_us = Some((micros, node.at().clone()));
            }
            "volume" => insert_volume(&mut self.volumes, parse_volume(node, &[Class::Disk])?)?,
            "disk" => add_all(&mut self.disk, node, &[Class::Disk], "on disk")?,
            _ => {
                return Err(unknown_keyword(
                    node,
                    &format!("on section '{}'", self.name),
                ))
            }
        }
        Ok(())
    }

    fn address_statement(&self, node: &Node) -> Result<SocketAddr, ConfigError> {
        let (address, used) = parse_address(&node.args, &node.keyword)?;
        if let Some(extra) = node.args.get(used) {
            return Err(ConfigError::Unexpected {
                at: extra.at.clone(),
                expected: "';'",
                found: extra.describe(),
            });
        }
        if node.body.is_some() {
            return Err(unknown_keyword(
                node,
                &format!("on section '{}'", self.name),
            ));
        }
        Ok(address)
    }
}

/// `sha256:HEX`: 64 hex digits, optionally in pairs separated by colons (as `openssl x509
/// -fingerprint` prints them), case-insensitive.
pub fn parse_fingerprint(text: &str) -> Option<[u8; 32]> {
    let hex: String = text
        .strip_prefix("sha256:")
        .or_else(|| text.strip_prefix("SHA256:"))?
        .chars()
        .filter(|c| *c != ':')
        .collect();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// The text form [`parse_fingerprint`] reads.
pub fn format_fingerprint(fingerprint: &[u8; 32]) -> String {
    let hex: String = fingerprint.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// What a host's effective volumes inherit from the levels above it.
pub(crate) struct Inherited<'a> {
    /// Resource-level volume declarations.
    pub volumes: &'a BTreeMap<u16, VolumeDecl>,
    /// common disk < resource disk, merged.
    pub disk: &'a OptionSet,
}

/// Builds the effective host from its declaration and node id.
pub(crate) fn build_host(
    decl: &HostDecl,
    node_id: u8,
    inherited: &Inherited<'_>,
) -> Result<Host, ConfigError> {
    let numbers: BTreeSet<u16> = inherited
        .volumes
        .keys()
        .chain(decl.volumes.keys())
        .copied()
        .collect();
    if numbers.is_empty() {
        return Err(ConfigError::invalid(
            &decl.at,
            format!("host '{}' has no volumes", decl.name),
        ));
    }
    let mut volumes = Vec::with_capacity(numbers.len());
    for number in numbers {
        let shared = inherited.volumes.get(&number);
        let own = decl.volumes.get(&number);
        volumes.push(build_volume(decl, number, [shared, own], inherited.disk)?);
    }
    let host = Host {
        name: decl.name.clone(),
        node_id,
        address: decl.address.as_ref().map(|(address, _)| *address),
        nbd_address: decl.nbd_address.as_ref().map(|(address, _)| *address),
        metrics_address: decl.metrics_address.as_ref().map(|(address, _)| *address),
        fuse_mount: decl.fuse_mount.as_ref().map(|(path, _)| path.clone()),
        tls_certificate: decl.tls_certificate.as_ref().map(|(path, _)| path.clone()),
        tls_key: decl.tls_key.as_ref().map(|(path, _)| path.clone()),
        tls_fingerprint: decl
            .tls_fingerprint
            .as_ref()
            .map(|(fingerprint, _)| *fingerprint),
        disk_throttle_latency_us: decl
            .disk_throttle_latency_us
            .as_ref()
            .map(|(micros, _)| *micros),
        volumes,
    };
    Ok(host)
}

/// Merges the resource-level (`layers[0]`) and host-level (`layers[1]`) declarations of one
/// volume number.
fn build_volume(
    host: &HostDecl,
    number: u16,
    layers: [Option<&VolumeDecl>; 2],
    inherited_disk: &OptionSet,
) -> Result<Volume, ConfigError> {
    let at = layers
        .iter()
        .flatten()
        .last()
        .map_or(&host.at, |decl| &decl.at);
    let pick = |field: fn(&VolumeDecl) -> bool| {
        layers
            .iter()
            .rev()
            .flatten()
            .find(|decl| field(decl))
            .copied()
    };
    let device = pick(|decl| decl.device.is_some())
        .and_then(|decl| decl.device.as_ref())
        .map(|(device, _)| device);
    let disk = pick(|decl| decl.disk.is_some())
        .and_then(|decl| decl.disk.as_ref())
        .map(|(disk, _)| disk);
    let meta = pick(|decl| decl.meta_disk.is_some())
        .and_then(|decl| decl.meta_disk.as_ref())
        .map(|(meta, _)| meta);
    let Some(disk) = disk else {
        let message = format!(
            "volume {number} of host '{}' has no disk (write 'disk none;' for diskless)",
            host.name
        );
        return Err(ConfigError::invalid(at, message));
    };
    let meta_disk = match (disk, meta) {
        (None, _) => MetaDisk::Internal,
        (Some(_), Some(meta)) => meta.clone(),
        (Some(_), None) => {
            let message = format!(
                "volume {number} of host '{}' has a disk but no meta-disk",
                host.name
            );
            return Err(ConfigError::invalid(at, message));
        }
    };
    let mut option_layers = vec![inherited_disk, &host.disk];
    option_layers.extend(layers.iter().flatten().map(|decl| &decl.options));
    Ok(Volume {
        number,
        device: device.and_then(|device| device.path.clone()),
        minor: device.and_then(|device| device.minor),
        disk: disk.clone(),
        meta_disk,
        disk_options: DiskOptions::from_set(&OptionSet::layered(&option_layers)),
    })
}
