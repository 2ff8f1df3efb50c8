//! Prints a [`Config`] back as drbd.conf text in normal form, like `drbdadm dump`.
//!
//! Invariant: parsing the output gives back an equal `Config` (tests check this over the
//! reference configurations and generated ones). To keep that true with little text, `common`
//! is folded into each resource, every connection is written out explicitly (mesh pairs and
//! the implicit two-host connection included), volumes are written per host, and an option
//! is printed only where its value differs from what the enclosing level already gives
//! (at resource level: from DRBD's default, unless `show_defaults` is set). Values are in
//! DRBD's units; indentation is four spaces.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use crate::lexer::{quote, word_or_quoted};
use crate::model::{Config, Connection, Host, MetaDisk, Resource, Volume};
use crate::options::table::{Class, Kind, OptionSpec};
use crate::options::value::Value;
use crate::options::{
    DiskOptions, Global, NetOptions, PeerDeviceOptions, ResourceOptions, Startup,
};

#[cfg(test)]
mod tests;

/// Choices for [`dump_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumpOptions {
    /// Print every option at resource level, defaults included (like
    /// `drbdsetup show --show-defaults`), instead of only those that differ from DRBD's default.
    pub show_defaults: bool,
}

/// The normalized configuration; with `resource`, only that resource (empty if unknown).
pub fn dump(config: &Config, resource: Option<&str>) -> String {
    dump_with(config, resource, DumpOptions::default())
}

/// [`dump`] with options.
pub fn dump_with(config: &Config, resource: Option<&str>, options: DumpOptions) -> String {
    let mut writer = Writer {
        out: String::new(),
        depth: 0,
        show_defaults: options.show_defaults,
    };
    if resource.is_none() {
        let baseline = Global::default().values();
        writer.options_block("global", config.global.values(), &baseline);
    }
    let selected = config
        .resources
        .iter()
        .filter(|candidate| resource.is_none_or(|name| candidate.name == name));
    for resource in selected {
        writer.resource(resource);
    }
    writer.out
}

type Values = Vec<(&'static OptionSpec, Option<Value>)>;

struct Writer {
    out: String,
    depth: usize,
    show_defaults: bool,
}

impl Writer {
    fn line(&mut self, text: &str) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn open(&mut self, header: &str) {
        self.line(&format!("{header} {{"));
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        self.line("}");
    }

    /// Writes `name { ... }` with the entries of `values` that differ from `baseline` (all of
    /// them at depth ≤ 1 when showing defaults); writes nothing if no entry qualifies.
    fn options_block(&mut self, name: &str, values: Values, baseline: &Values) {
        let show_all = self.show_defaults && self.depth <= 1;
        let lines: Vec<String> = values
            .iter()
            .zip(baseline)
            .filter(|((_, value), (_, base))| show_all || value != base)
            .filter_map(|((spec, value), _)| {
                value.as_ref().and_then(|value| option_line(spec, value))
            })
            .collect();
        if lines.is_empty() {
            return;
        }
        self.open(name);
        for line in lines {
            self.line(&line);
        }
        self.close();
    }

    fn resource(&mut self, resource: &Resource) {
        self.open(&format!("resource {}", word_or_quoted(&resource.name)));
        self.options_block(
            "options",
            resource.options.values(),
            &ResourceOptions::default().values(),
        );
        self.options_block(
            "net",
            resource.net.values(),
            &NetOptions::default().values(),
        );
        let disk = disk_values(&resource.disk, &resource.peer_device);
        self.options_block(
            "disk",
            disk,
            &disk_values(&DiskOptions::default(), &PeerDeviceOptions::default()),
        );
        self.options_block(
            "startup",
            resource.startup.values(),
            &Startup::default().values(),
        );
        if !resource.handlers.is_empty() {
            self.open("handlers");
            for (name, command) in &resource.handlers {
                // A handler name is a statement keyword, which the lexer only reads as a
                // bare word (never quoted), so it is written back verbatim.
                self.line(&format!("{name} {};", quote(command)));
            }
            self.close();
        }
        for host in &resource.hosts {
            self.host(host, &resource.disk);
        }
        for connection in &resource.connections {
            self.connection(connection, resource);
        }
        self.close();
    }

    fn host(&mut self, host: &Host, resource_disk: &DiskOptions) {
        self.open(&format!("on {}", word_or_quoted(&host.name)));
        self.line(&format!("node-id {};", host.node_id));
        if let Some(address) = host.address {
            self.line(&format!("address {};", address_text(address)));
        }
        if let Some(address) = host.nbd_address {
            self.line(&format!("nbd-address {address};"));
        }
        if let Some(address) = host.metrics_address {
            self.line(&format!("metrics-address {address};"));
        }
        if let Some(path) = &host.fuse_mount {
            self.line(&format!(
                "fuse-mount {};",
                word_or_quoted(&path.display().to_string())
            ));
        }
        for (keyword, path) in [
            ("tls-certificate", &host.tls_certificate),
            ("tls-key", &host.tls_key),
        ] {
            if let Some(path) = path {
                self.line(&format!(
                    "{keyword} {};",
                    word_or_quoted(&path.display().to_string())
                ));
            }
        }
        if let Some(micros) = host.disk_throttle_latency_us {
            self.line(&format!("disk-throttle-latency {micros};"));
        }
        if let Some(fingerprint) = &host.tls_fingerprint {
            self.line(&format!(
                "tls-fingerprint {};",
                crate::resolve::host::format_fingerprint(fingerprint)
            ));
        }
        for volume in &host.volumes {
            self.volume(volume, resource_disk);
        }
        self.close();
    }

    fn volume(&mut self, volume: &Volume, resource_disk: &DiskOptions) {
        self.open(&format!("volume {}", volume.number));
        if let Some(device) = &volume.device {
            let mut line = format!("device {}", word_or_quoted(device));
            if let Some(minor) = volume.minor {
                let _ = write!(line, " minor {minor}");
            }
            self.line(&format!("{line};"));
        }
        match &volume.disk {
            Some(path) => self.line(&format!("disk {};", path_text(path))),
            None => self.line("disk none;"),
        }
        match &volume.meta_disk {
            MetaDisk::Internal => self.line("meta-disk internal;"),
            MetaDisk::External { path, index: None } => {
                self.line(&format!("meta-disk {};", path_text(path)))
            }
            MetaDisk::External {
                path,
                index: Some(index),
            } => {
                self.line(&format!("meta-disk {} [{index}];", path_text(path)));
            }
        }
        self.options_block(
            "disk",
            volume.disk_options.values(),
            &resource_disk.values(),
        );
        self.close();
    }

    fn connection(&mut self, connection: &Connection, resource: &Resource) {
        let header = match &connection.name {
            Some(name) => format!("connection {}", word_or_quoted(name)),
            None => "connection".to_string(),
        };
        self.open(&header);
        if let [only] = connection.paths.as_slice() {
            self.host_lines(&connection.hosts, only);
        } else {
            for path in &connection.paths {
                self.open("path");
                self.host_lines(&connection.hosts, path);
                self.close();
            }
        }
        self.options_block("net", connection.net.values(), &resource.net.values());
        self.options_block(
            "disk",
            connection.peer_device.values(),
            &resource.peer_device.values(),
        );
        for volume in &connection.volumes {
            let values = volume.peer_device.values();
            let baseline = connection.peer_device.values();
            if values != baseline {
                self.open(&format!("volume {}", volume.number));
                self.options_block("disk", values, &baseline);
                self.close();
            }
        }
        self.close();
    }

    fn host_lines(&mut self, hosts: &[String; 2], addresses: &[SocketAddr; 2]) {
        for (host, address) in hosts.iter().zip(addresses) {
            self.line(&format!(
                "host {} address {};",
                word_or_quoted(host),
                address_text(*address)
            ));
        }
    }
}

fn disk_values(disk: &DiskOptions, peer_device: &PeerDeviceOptions) -> Values {
    let mut values = disk.values();
    values.extend(peer_device.values());
    values
}

/// One `name value;` line, or `None` when the option is not written (a false global flag).
fn option_line(spec: &OptionSpec, value: &Value) -> Option<String> {
    let text = match value {
        Value::Flag(true) if spec.class == Class::Global => return Some(format!("{};", spec.name)),
        Value::Flag(false) if spec.class == Class::Global => return None,
        Value::Flag(flag) => (if *flag { "yes" } else { "no" }).to_string(),
        Value::Number(number) => number.to_string(),
        Value::Text(text) if matches!(spec.kind, Kind::Text { .. }) => quote(text),
        Value::Text(text) => word_or_quoted(text),
        Value::Words(words) => words
            .iter()
            .map(|word| word_or_quoted(word))
            .collect::<Vec<_>>()
            .join(" "),
    };
    Some(format!("{} {text};", spec.name))
}

fn address_text(address: SocketAddr) -> String {
    match address {
        SocketAddr::V4(_) => address.to_string(),
        SocketAddr::V6(_) => format!("ipv6 {address}"),
    }
}

/// A path as a token; `none` and `internal` are quoted so they stay paths.
fn path_text(path: &Path) -> String {
    let text = path.to_string_lossy();
    if text == "none" || text == "internal" {
        quote(&text)
    } else {
        word_or_quoted(&text)
    }
}
