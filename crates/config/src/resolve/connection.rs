//! `connection [NAME] { host A [address ..] [port P]; path { .. }; net { }; disk { };
//! volume N { disk { } } }`, `connection-mesh { hosts A B C; net { } }`, and the implicit
//! connection of a two-host resource.
//!
//! Invariants: each connection joins two different, defined hosts; no pair is joined twice;
//! each path of a connection names the same pair and resolves to two addresses (explicit,
//! or the host's `on` address with an optional port override). A mesh joins every pair of
//! its hosts in the order listed.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use crate::error::{ConfigError, Location};
use crate::model::{Connection, Host, PeerVolume};
use crate::options::enums::{OnCongestion, Protocol, Srm};
use crate::options::set::OptionSet;
use crate::options::table::Class;
use crate::options::{NetOptions, PeerDeviceOptions, ResourceOptions};
use crate::syntax::Node;

use super::address::{parse_address, parse_port};
use super::sections::add_all;
use super::volume::{volume_number, VolumeDecl};
use super::{section_body, unknown_keyword};

/// `host NAME [address ADDR] [port P]` inside a connection or path.
#[derive(Clone, Debug)]
pub(crate) struct HostLine {
    pub name: String,
    pub at: Location,
    pub address: Option<SocketAddr>,
    pub port: Option<u16>,
}

/// A `connection` section as written.
#[derive(Clone, Debug)]
pub(crate) struct ConnectionDecl {
    pub name: Option<String>,
    pub at: Location,
    pub hosts: Vec<HostLine>,
    pub paths: Vec<(Vec<HostLine>, Location)>,
    pub net: OptionSet,
    pub disk: OptionSet,
    pub volumes: BTreeMap<u16, (OptionSet, Location)>,
}

/// A `connection-mesh` section as written.
#[derive(Clone, Debug)]
pub(crate) struct MeshDecl {
    pub at: Location,
    pub hosts: Vec<(String, Location)>,
    pub net: OptionSet,
}

/// Either kind of link declaration, kept in file order.
#[derive(Clone, Debug)]
pub(crate) enum LinkDecl {
    Connection(ConnectionDecl),
    Mesh(MeshDecl),
}

/// Parses `connection [NAME] { ... }`.
pub(crate) fn parse_connection(node: &Node) -> Result<ConnectionDecl, ConfigError> {
    let named = node.args.len() == 1;
    let body = section_body(node, usize::from(named))?;
    let mut decl = ConnectionDecl {
        name: node.args.first().map(|token| token.text.clone()),
        at: node.at().clone(),
        hosts: Vec::new(),
        paths: Vec::new(),
        net: OptionSet::default(),
        disk: OptionSet::default(),
        volumes: BTreeMap::new(),
    };
    for statement in body {
        match (statement.name(), statement.body.is_some()) {
            ("host", false) => decl.hosts.push(parse_host_line(statement)?),
            ("path", true) => decl
                .paths
                .push((parse_path(statement)?, statement.at().clone())),
            ("net", true) => add_all(&mut decl.net, statement, &[Class::Net], "connection net")?,
            ("disk", true) => add_all(
                &mut decl.disk,
                statement,
                &[Class::PeerDevice],
                "connection disk",
            )?,
            ("volume", true) => parse_connection_volume(&mut decl, statement)?,
            _ => return Err(unknown_keyword(statement, "connection section")),
        }
    }
    Ok(decl)
}

fn parse_path(node: &Node) -> Result<Vec<HostLine>, ConfigError> {
    let mut lines = Vec::new();
    for statement in section_body(node, 0)? {
        if statement.name() != "host" || statement.body.is_some() {
            return Err(unknown_keyword(statement, "path section"));
        }
        lines.push(parse_host_line(statement)?);
    }
    Ok(lines)
}

fn parse_connection_volume(decl: &mut ConnectionDecl, node: &Node) -> Result<(), ConfigError> {
    let number = volume_number(node)?;
    let mut options = OptionSet::default();
    for statement in section_body(node, 1)? {
        if statement.name() != "disk" || statement.body.is_none() {
            return Err(unknown_keyword(
                statement,
                &format!("connection volume {number}"),
            ));
        }
        add_all(
            &mut options,
            statement,
            &[Class::PeerDevice],
            "connection volume disk",
        )?;
    }
    if let Some((_, first)) = decl.volumes.get(&number) {
        let what = format!("volume {number}");
        return Err(ConfigError::Duplicate {
            at: node.at().clone(),
            what,
            first: first.clone(),
        });
    }
    decl.volumes.insert(number, (options, node.at().clone()));
    Ok(())
}

/// Parses `host NAME [address [FAMILY] ADDR:PORT] [port P]`.
fn parse_host_line(node: &Node) -> Result<HostLine, ConfigError> {
    let Some((name, mut rest)) = node.args.split_first() else {
        let expected = "a host name, then optionally 'address ADDR:PORT' or 'port P'";
        return Err(ConfigError::WrongArity {
            at: node.at().clone(),
            name: "host".to_string(),
            expected,
        });
    };
    let mut line = HostLine {
        name: name.text.clone(),
        at: name.at.clone(),
        address: None,
        port: None,
    };
    while let Some((keyword, after)) = rest.split_first() {
        match keyword.text.as_str() {
            "address" if line.address.is_none() => {
                let (address, used) = parse_address(after, keyword)?;
                line.address = Some(address);
                rest = after.get(used..).unwrap_or_default();
            }
            "port" if line.port.is_none() => {
                let port = after.first().ok_or_else(|| ConfigError::WrongArity {
                    at: keyword.at.clone(),
                    name: "port".to_string(),
                    expected: "a port number",
                })?;
                line.port = Some(parse_port(port)?);
                rest = after.get(1..).unwrap_or_default();
            }
            "via" => {
                return Err(ConfigError::Unsupported {
                    at: keyword.at.clone(),
                    what: "DRBD Proxy ('via')".to_string(),
                })
            }
            _ => {
                return Err(ConfigError::Unexpected {
                    at: keyword.at.clone(),
                    expected: "'address', 'port' or ';'",
                    found: keyword.describe(),
                })
            }
        }
    }
    Ok(line)
}

/// Parses `connection-mesh { hosts A B ...; net { } }`.
pub(crate) fn parse_mesh(node: &Node) -> Result<MeshDecl, ConfigError> {
    let mut decl = MeshDecl {
        at: node.at().clone(),
        hosts: Vec::new(),
        net: OptionSet::default(),
    };
    for statement in section_body(node, 0)? {
        match (statement.name(), statement.body.is_some()) {
            ("hosts", false) => {
                let names = statement
                    .args
                    .iter()
                    .map(|token| (token.text.clone(), token.at.clone()));
                decl.hosts.extend(names);
            }
            ("net", true) => add_all(
                &mut decl.net,
                statement,
                &[Class::Net],
                "connection-mesh net",
            )?,
            _ => return Err(unknown_keyword(statement, "connection-mesh section")),
        }
    }
    Ok(decl)
}

/// What links inherit from their resource.
pub(crate) struct LinkContext<'a> {
    pub resource: &'a str,
    pub hosts: &'a [Host],
    /// common options < resource options (the manager's mode decides some net rules).
    pub options: &'a OptionSet,
    /// common net < resource net.
    pub net: &'a OptionSet,
    /// common disk < resource disk.
    pub disk: &'a OptionSet,
    /// Resource-level volume declarations (their disk sections hold peer-device options too).
    pub volumes: &'a BTreeMap<u16, VolumeDecl>,
    /// Where the resource starts, for the implicit connection's errors.
    pub at: &'a Location,
}

/// The per-connection option layers on top of the context's.
struct Layers<'a> {
    net: Option<&'a OptionSet>,
    disk: Option<&'a OptionSet>,
    volumes: Option<&'a BTreeMap<u16, (OptionSet, Location)>>,
}

/// Expands all link declarations (or the implicit link) into connections.
pub(crate) fn build_links(
    links: &[LinkDecl],
    context: &LinkContext<'_>,
) -> Result<Vec<Connection>, ConfigError> {
    let mut connections = Vec::new();
    let mut pairs: BTreeMap<(String, String), Location> = BTreeMap::new();
    for link in links {
        let built = match link {
            LinkDecl::Connection(decl) => vec![(explicit(decl, context)?, decl.at.clone())],
            LinkDecl::Mesh(decl) => mesh(decl, context)?,
        };
        for (connection, at) in built {
            let [first, second] = connection.hosts.clone();
            let key = if first <= second {
                (first, second)
            } else {
                (second, first)
            };
            if let Some(first_at) = pairs.insert(key.clone(), at.clone()) {
                let what = format!("connection between '{}' and '{}'", key.0, key.1);
                return Err(ConfigError::Duplicate {
                    at,
                    what,
                    first: first_at,
                });
            }
            connections.push(connection);
        }
    }
    if let ([first, second], true) = (context.hosts, links.is_empty()) {
        let paths = vec![[
            default_address(first, context.at)?,
            default_address(second, context.at)?,
        ]];
        let layers = Layers {
            net: None,
            disk: None,
            volumes: None,
        };
        connections.push(build(context, None, [first, second], paths, &layers)?);
    }
    Ok(connections)
}

fn host<'a>(context: &LinkContext<'a>, name: &str, at: &Location) -> Result<&'a Host, ConfigError> {
    context
        .hosts
        .iter()
        .find(|host| host.name == name)
        .ok_or_else(|| ConfigError::UnknownHost {
            at: at.clone(),
            name: name.to_string(),
            resource: context.resource.to_string(),
        })
}

fn default_address(host: &Host, at: &Location) -> Result<SocketAddr, ConfigError> {
    host.address
        .ok_or_else(|| ConfigError::invalid(at, format!("host '{}' has no address", host.name)))
}

fn explicit(decl: &ConnectionDecl, context: &LinkContext<'_>) -> Result<Connection, ConfigError> {
    let paths: Vec<(&[HostLine], &Location)> = if decl.paths.is_empty() {
        vec![(decl.hosts.as_slice(), &decl.at)]
    } else if decl.hosts.is_empty() {
        decl.paths
            .iter()
            .map(|(lines, at)| (lines.as_slice(), at))
            .collect()
    } else {
        return Err(ConfigError::invalid(
            &decl.at,
            "a connection has either two host statements or path sections",
        ));
    };
    let mut pair: Option<[&Host; 2]> = None;
    let mut addresses = Vec::with_capacity(paths.len());
    for (lines, at) in paths {
        let [first, second] = lines else {
            return Err(ConfigError::invalid(
                at,
                "a connection or path needs exactly two host statements",
            ));
        };
        let ends = [
            host(context, &first.name, &first.at)?,
            host(context, &second.name, &second.at)?,
        ];
        if ends[0].name == ends[1].name {
            return Err(ConfigError::invalid(
                &second.at,
                "a connection needs two different hosts",
            ));
        }
        let mut path = [
            line_address(first, ends[0])?,
            line_address(second, ends[1])?,
        ];
        let expected = *pair.get_or_insert(ends);
        if expected[0].name == ends[1].name && expected[1].name == ends[0].name {
            path.swap(0, 1);
        } else if expected[0].name != ends[0].name || expected[1].name != ends[1].name {
            return Err(ConfigError::invalid(
                at,
                "all paths of a connection must join the same two hosts",
            ));
        }
        addresses.push(path);
    }
    let Some(ends) = pair else {
        return Err(ConfigError::invalid(
            &decl.at,
            "a connection needs two host statements",
        ));
    };
    let layers = Layers {
        net: Some(&decl.net),
        disk: Some(&decl.disk),
        volumes: Some(&decl.volumes),
    };
    build(context, decl.name.clone(), ends, addresses, &layers)
}

fn line_address(line: &HostLine, host: &Host) -> Result<SocketAddr, ConfigError> {
    if let Some(address) = line.address {
        return Ok(address);
    }
    let mut address = host.address.ok_or_else(|| {
        let message = format!(
            "no address for host '{}': give one here or in its on section",
            host.name
        );
        ConfigError::invalid(&line.at, message)
    })?;
    if let Some(port) = line.port {
        address.set_port(port);
    }
    Ok(address)
}

fn mesh(
    decl: &MeshDecl,
    context: &LinkContext<'_>,
) -> Result<Vec<(Connection, Location)>, ConfigError> {
    if decl.hosts.len() < 2 {
        return Err(ConfigError::invalid(
            &decl.at,
            "a connection-mesh needs a 'hosts' statement with two or more hosts",
        ));
    }
    let mut hosts = Vec::with_capacity(decl.hosts.len());
    for (name, at) in &decl.hosts {
        let found = host(context, name, at)?;
        if hosts
            .iter()
            .any(|(known, _): &(&Host, SocketAddr)| known.name == *name)
        {
            return Err(ConfigError::invalid(
                at,
                format!("host '{name}' is listed twice in the mesh"),
            ));
        }
        hosts.push((found, default_address(found, at)?));
    }
    let layers = Layers {
        net: Some(&decl.net),
        disk: None,
        volumes: None,
    };
    let mut connections = Vec::new();
    for (index, (first, first_address)) in hosts.iter().enumerate() {
        for (second, second_address) in hosts.iter().skip(index + 1) {
            let paths = vec![[*first_address, *second_address]];
            let connection = build(context, None, [first, second], paths, &layers)?;
            connections.push((connection, decl.at.clone()));
        }
    }
    Ok(connections)
}

fn build(
    context: &LinkContext<'_>,
    name: Option<String>,
    ends: [&Host; 2],
    paths: Vec<[SocketAddr; 2]>,
    layers: &Layers<'_>,
) -> Result<Connection, ConfigError> {
    let net = OptionSet::layered(&[context.net, layers.net.unwrap_or(&OptionSet::default())]);
    let connection_disk = layers.disk.cloned().unwrap_or_default();
    let peer_device = OptionSet::layered(&[context.disk, &connection_disk]);
    let numbers: BTreeSet<u16> = ends
        .iter()
        .flat_map(|host| host.volumes.iter().map(|volume| volume.number))
        .collect();
    let empty = BTreeMap::new();
    let own_volumes = layers.volumes.unwrap_or(&empty);
    if let Some((number, (_, at))) = own_volumes
        .iter()
        .find(|(number, _)| !numbers.contains(number))
    {
        return Err(ConfigError::invalid(
            at,
            format!("volume {number} is not a volume of these hosts"),
        ));
    }
    let volumes = numbers
        .into_iter()
        .map(|number| {
            let shared = context.volumes.get(&number).map(|decl| &decl.options);
            let own = own_volumes.get(&number).map(|(options, _)| options);
            let mut stack = vec![context.disk];
            stack.extend(shared);
            stack.push(&connection_disk);
            stack.extend(own);
            PeerVolume {
                number,
                peer_device: PeerDeviceOptions::from_set(&OptionSet::layered(&stack)),
            }
        })
        .collect();
    let net_options = NetOptions::from_set(&net);
    let options = ResourceOptions::from_set(context.options);
    check_net(&net, &net_options, options.srm, context.at)?;
    let sources = super::srm::Sources {
        net: &net,
        options: context.options,
        fallback: context.at,
    };
    super::srm::check(&net_options, &options, &sources)?;
    Ok(Connection {
        name,
        hosts: [ends[0].name.clone(), ends[1].name.clone()],
        paths,
        net: net_options,
        peer_device: PeerDeviceOptions::from_set(&peer_device),
        volumes,
    })
}

/// The kernel's cross-field rules on net options (drbd_nl.c: ERR_NOT_PROTO_C for two
/// primaries, ERR_CONG_NOT_PROTO_A for a congestion policy). `set` is the merged set, so
/// the error points at the setting that asked for the combination. With `srm on` a
/// congestion policy is accepted with any protocol: it applies while the manager runs the
/// peer asynchronously.
fn check_net(
    set: &OptionSet,
    net: &NetOptions,
    srm: Srm,
    fallback: &Location,
) -> Result<(), ConfigError> {
    let at = |name: &str| set.location(name).unwrap_or(fallback);
    if net.allow_two_primaries && net.protocol != Protocol::C {
        let message = "allow-two-primaries requires protocol C";
        return Err(ConfigError::invalid(at("allow-two-primaries"), message));
    }
    if net.on_congestion != OnCongestion::Block && net.protocol != Protocol::A && srm != Srm::On {
        let message = format!(
            "on-congestion {} requires protocol A (or srm on)",
            net.on_congestion
        );
        return Err(ConfigError::invalid(at("on-congestion"), message));
    }
    Ok(())
}
