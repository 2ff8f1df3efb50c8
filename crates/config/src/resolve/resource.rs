//! One `resource NAME { ... }`: collects its declarations, then builds hosts (with node ids
//! and effective volumes) and connections, inheriting from `common`.
//!
//! Invariants: the name matches `[A-Za-z0-9_.-]+`; node ids are unique; if no host writes a
//! node-id and there are at most two hosts, they get 0 and 1 in file order (DRBD 8.4
//! configurations have none); otherwise every host must write one.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{ConfigError, Location};
use crate::model::{Host, Resource, SectionKind, SettingRef};
use crate::options::set::OptionSet;
use crate::options::table::Class;
use crate::options::{DiskOptions, NetOptions, PeerDeviceOptions, ResourceOptions, Startup};
use crate::syntax::Node;

use super::connection::{build_links, parse_connection, parse_mesh, LinkContext, LinkDecl};
use super::host::{build_host, parse_host, HostDecl, Inherited};
use super::sections::{HandlerSet, Sections};
use super::volume::{insert_volume, parse_volume, VolumeDecl};
use super::{section_body, unknown_keyword};

/// A resource section as written.
struct ResourceDecl {
    name: String,
    at: Location,
    sections: Sections,
    volumes: BTreeMap<u16, VolumeDecl>,
    hosts: Vec<HostDecl>,
    links: Vec<LinkDecl>,
}

/// Resolves `resource NAME { }` with `common` inherited; also returns its explicit settings.
pub(crate) fn resolve(
    node: &Node,
    common: &Sections,
) -> Result<(Resource, Vec<SettingRef>), ConfigError> {
    let decl = parse(node)?;
    let net = OptionSet::layered(&[&common.net, &decl.sections.net]);
    let disk = OptionSet::layered(&[&common.disk, &decl.sections.disk]);
    let options = OptionSet::layered(&[&common.options, &decl.sections.options]);
    let hosts = build_hosts(&decl, &disk)?;
    let context = LinkContext {
        resource: &decl.name,
        hosts: &hosts,
        options: &options,
        net: &net,
        disk: &disk,
        volumes: &decl.volumes,
        at: &decl.at,
    };
    let connections = build_links(&decl.links, &context)?;
    check_tls(&hosts, &connections, &decl.at)?;
    let resource = Resource {
        name: decl.name.clone(),
        options: ResourceOptions::from_set(&options),
        net: NetOptions::from_set(&net),
        disk: DiskOptions::from_set(&disk),
        peer_device: PeerDeviceOptions::from_set(&disk),
        handlers: HandlerSet::layered(&[&common.handlers, &decl.sections.handlers]),
        startup: Startup::from_set(&OptionSet::layered(&[
            &common.startup,
            &decl.sections.startup,
        ])),
        hosts,
        connections,
    };
    Ok((resource, origins(&decl, common)))
}

/// `tls yes`: every connection of the resource agrees (a listener cannot tell before the
/// TLS handshake who connects), and both hosts of each pin a certificate.
fn check_tls(
    hosts: &[Host],
    connections: &[crate::model::Connection],
    at: &Location,
) -> Result<(), ConfigError> {
    let Some(first) = connections.first() else {
        return Ok(());
    };
    if connections.iter().any(|c| c.net.tls != first.net.tls) {
        return Err(ConfigError::invalid(
            at,
            "tls must be the same on every connection of a resource (tandem listens once per \
             resource)"
                .to_string(),
        ));
    }
    if !first.net.tls {
        return Ok(());
    }
    for connection in connections {
        for name in &connection.hosts {
            let pinned = hosts
                .iter()
                .find(|h| &h.name == name)
                .is_some_and(|h| h.tls_fingerprint.is_some());
            if !pinned {
                return Err(ConfigError::invalid(
                    at,
                    format!(
                        "tls yes: host '{name}' has no tls-fingerprint (the SHA-256 of its \
                         certificate, written in its 'on' section; `tandem tls-keygen` prints it)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn parse(node: &Node) -> Result<ResourceDecl, ConfigError> {
    let body = section_body(node, 1)?;
    let name_token = node.args.first().ok_or_else(|| ConfigError::WrongArity {
        at: node.at().clone(),
        name: "resource".to_string(),
        expected: "a resource name",
    })?;
    let valid =
        |character: char| character.is_ascii_alphanumeric() || matches!(character, '_' | '.' | '-');
    if name_token.text.is_empty() || !name_token.text.chars().all(valid) {
        let name = name_token.text.clone();
        return Err(ConfigError::InvalidName {
            at: name_token.at.clone(),
            kind: "resource",
            name,
        });
    }
    let mut decl = ResourceDecl {
        name: name_token.text.clone(),
        at: node.at().clone(),
        sections: Sections::default(),
        volumes: BTreeMap::new(),
        hosts: Vec::new(),
        links: Vec::new(),
    };
    let mut implicit = VolumeDecl::new(0, node.at().clone());
    for statement in body {
        if !implicit.try_field(statement)? && !decl.sections.try_add(statement)? {
            decl.statement(statement)?;
        }
    }
    if implicit.has_fields() {
        insert_volume(&mut decl.volumes, implicit)?;
    }
    Ok(decl)
}

impl ResourceDecl {
    fn statement(&mut self, node: &Node) -> Result<(), ConfigError> {
        match node.name() {
            "volume" => insert_volume(
                &mut self.volumes,
                parse_volume(node, &[Class::Disk, Class::PeerDevice])?,
            )?,
            "on" => {
                let host = parse_host(node)?;
                if let Some(first) = self.hosts.iter().find(|known| known.name == host.name) {
                    let what = format!("host '{}'", host.name);
                    return Err(ConfigError::Duplicate {
                        at: host.at.clone(),
                        what,
                        first: first.at.clone(),
                    });
                }
                self.hosts.push(host);
            }
            "connection" => self
                .links
                .push(LinkDecl::Connection(parse_connection(node)?)),
            "connection-mesh" => self.links.push(LinkDecl::Mesh(parse_mesh(node)?)),
            "floating" | "stacked-on-top-of" | "proxy" => {
                let what = format!("'{}' section", node.name());
                return Err(ConfigError::Unsupported {
                    at: node.at().clone(),
                    what,
                });
            }
            _ => return Err(unknown_keyword(node, &format!("resource '{}'", self.name))),
        }
        Ok(())
    }
}

fn build_hosts(decl: &ResourceDecl, disk: &OptionSet) -> Result<Vec<Host>, ConfigError> {
    if decl.hosts.is_empty() {
        return Err(ConfigError::invalid(
            &decl.at,
            format!("resource '{}' has no on sections", decl.name),
        ));
    }
    let ids = node_ids(decl)?;
    let inherited = Inherited {
        volumes: &decl.volumes,
        disk,
    };
    decl.hosts
        .iter()
        .zip(ids)
        .map(|(host, id)| build_host(host, id, &inherited))
        .collect()
}

fn node_ids(decl: &ResourceDecl) -> Result<Vec<u8>, ConfigError> {
    let none_given = decl.hosts.iter().all(|host| host.node_id.is_none());
    if none_given && decl.hosts.len() <= 2 {
        return Ok((0..).take(decl.hosts.len()).collect());
    }
    let mut seen: BTreeMap<u8, &Location> = BTreeMap::new();
    let mut ids = Vec::with_capacity(decl.hosts.len());
    for host in &decl.hosts {
        let Some((id, at)) = &host.node_id else {
            return Err(ConfigError::invalid(
                &host.at,
                format!("host '{}' has no node-id", host.name),
            ));
        };
        if let Some(first) = seen.insert(*id, at) {
            let what = format!("node-id {id}");
            return Err(ConfigError::Duplicate {
                at: at.clone(),
                what,
                first: first.clone(),
            });
        }
        ids.push(*id);
    }
    Ok(ids)
}

/// Every explicit setting that applies to the resource, first occurrence per option.
fn origins(decl: &ResourceDecl, common: &Sections) -> Vec<SettingRef> {
    let mut sets: Vec<&OptionSet> = Vec::new();
    for level in [common, &decl.sections] {
        sets.extend([&level.options, &level.net, &level.disk, &level.startup]);
    }
    sets.extend(decl.volumes.values().map(|volume| &volume.options));
    for host in &decl.hosts {
        sets.push(&host.disk);
        sets.extend(host.volumes.values().map(|volume| &volume.options));
    }
    for link in &decl.links {
        match link {
            LinkDecl::Connection(connection) => {
                sets.extend([&connection.net, &connection.disk]);
                sets.extend(connection.volumes.values().map(|(options, _)| options));
            }
            LinkDecl::Mesh(mesh) => sets.push(&mesh.net),
        }
    }
    let mut seen = BTreeSet::new();
    let mut settings = Vec::new();
    let mut add = |section: SectionKind, option: &str, at: &Location| {
        if seen.insert(option.to_string()) {
            let resource = Some(decl.name.clone());
            settings.push(SettingRef {
                resource,
                section,
                option: option.to_string(),
                at: at.clone(),
            });
        }
    };
    for setting in sets.iter().flat_map(|set| set.settings()) {
        add(
            section_kind(setting.spec.class),
            setting.spec.name,
            &setting.at,
        );
    }
    for (name, (_, at)) in common.handlers.0.iter().chain(&decl.sections.handlers.0) {
        add(SectionKind::Handlers, name, at);
    }
    settings
}

fn section_kind(class: Class) -> SectionKind {
    match class {
        Class::Global => SectionKind::Global,
        Class::Resource => SectionKind::Options,
        Class::Net => SectionKind::Net,
        Class::Disk => SectionKind::Disk,
        Class::PeerDevice => SectionKind::PeerDevice,
        Class::Startup => SectionKind::Startup,
    }
}
