//! The resolved, typed configuration the daemon uses.
//!
//! Invariants (established by `resolve`, relied on by callers): resource names are unique
//! and match `[A-Za-z0-9_.-]+`; within a resource host names and node ids (0..=31) are
//! unique; every host has at least one volume, sorted by number; every connection names two
//! different hosts of its resource, has at least one path, and no two connections join the
//! same pair; all option values are effective (defaults and inheritance applied).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::error::Location;
use crate::options::{
    DiskOptions, Global, NetOptions, PeerDeviceOptions, ResourceOptions, Startup,
};

/// A whole configuration: the global section and every resource, in file order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Config {
    /// `global { }`.
    pub global: Global,
    /// Every resource not disabled by `skip`, in file order.
    pub resources: Vec<Resource>,
    /// Where each explicit setting came from (ignored by `==`).
    pub(crate) origins: Origins,
}

/// A handler name mapped to its command line (`handlers { split-brain "cmd"; }`).
pub type Handlers = BTreeMap<String, String>;

/// One replicated resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// The resource name.
    pub name: String,
    /// `options { }`, effective (common < resource).
    pub options: ResourceOptions,
    /// `net { }` at resource level, effective (common < resource); each connection has its own.
    pub net: NetOptions,
    /// `disk { }` at resource level, effective; each volume has its own.
    pub disk: DiskOptions,
    /// Peer-device options at resource level, effective; each connection has its own.
    pub peer_device: PeerDeviceOptions,
    /// `handlers { }`, effective (common < resource).
    pub handlers: Handlers,
    /// `startup { }`, effective (common < resource).
    pub startup: Startup,
    /// The `on` sections, in file order.
    pub hosts: Vec<Host>,
    /// Every connection: explicit ones, mesh pairs, or the implicit one of a two-host
    /// resource; in file order.
    pub connections: Vec<Connection>,
}

/// One node of a resource (an `on HOST { }` section).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// The host name as written after `on`.
    pub name: String,
    /// The node id, 0..=31.
    pub node_id: u8,
    /// The replication address, if given in the `on` section.
    pub address: Option<SocketAddr>,
    /// tandem only: where this node's NBD server listens, if it runs one.
    pub nbd_address: Option<SocketAddr>,
    /// tandem only: where this node serves Prometheus metrics over HTTP; `None` (the
    /// default) runs no listener.
    pub metrics_address: Option<SocketAddr>,
    /// tandem only: the directory where this node mounts its FUSE export of the resource's
    /// volumes (`fuse-mount PATH;`), if any; always absolute.
    pub fuse_mount: Option<PathBuf>,
    /// tandem only: this host's TLS certificate and key (PEM files), used when it runs the
    /// resource with `tls yes`.
    pub tls_certificate: Option<PathBuf>,
    /// See [`Host::tls_certificate`].
    pub tls_key: Option<PathBuf>,
    /// tandem only: the SHA-256 of this host's certificate (DER): its peers accept exactly
    /// this certificate from it (`tls-fingerprint sha256:HEX;`).
    pub tls_fingerprint: Option<[u8; 32]>,
    /// tandem only, for benchmarks and tests (`disk-throttle-latency USECS;`): every local data
    /// write of this host takes at least this many microseconds, emulating a slow disk.
    pub disk_throttle_latency_us: Option<u64>,
    /// This host's volumes (resource-level volumes with this host's overrides), by number.
    pub volumes: Vec<Volume>,
}

/// One volume as one host sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    /// The volume number, 0..=65534.
    pub number: u16,
    /// The device path (`/dev/drbdN` when only a minor was given), if any.
    pub device: Option<String>,
    /// The minor number, given or taken from a `/dev/drbdN` path, if known.
    pub minor: Option<u32>,
    /// The backing device; `None` for a diskless volume (`disk none;`).
    pub disk: Option<PathBuf>,
    /// Where the metadata lives (always `Internal` for a diskless volume).
    pub meta_disk: MetaDisk,
    /// Effective disk options (common < resource < on < volume < on's volume).
    pub disk_options: DiskOptions,
}

/// Where a volume's metadata lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaDisk {
    /// At the end of the backing device.
    Internal,
    /// On a separate device, optionally at a fixed 128 MiB slot `index`.
    External {
        /// The metadata device.
        path: PathBuf,
        /// The slot for `meta-disk DEVICE [INDEX]`.
        index: Option<u32>,
    },
}

/// A replication link between two hosts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The name after `connection`, if any.
    pub name: Option<String>,
    /// The two hosts, in the order written.
    pub hosts: [String; 2],
    /// Network paths; each holds the addresses of `hosts[0]` and `hosts[1]`. Never empty.
    pub paths: Vec<[SocketAddr; 2]>,
    /// Effective net options (common < resource < connection or mesh).
    pub net: NetOptions,
    /// Effective peer-device options (common < resource < connection).
    pub peer_device: PeerDeviceOptions,
    /// Effective peer-device options per volume (… < connection < connection's volume), for
    /// every volume number either host has, by number.
    pub volumes: Vec<PeerVolume>,
}

/// Peer-device options of one volume on one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerVolume {
    /// The volume number.
    pub number: u16,
    /// The effective options.
    pub peer_device: PeerDeviceOptions,
}

/// Which section an explicit setting was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SectionKind {
    /// `global`.
    Global,
    /// `options`.
    Options,
    /// `net`.
    Net,
    /// `disk` (disk options).
    Disk,
    /// `disk` (peer-device options).
    PeerDevice,
    /// `startup`.
    Startup,
    /// `handlers` (the option is the handler name).
    Handlers,
}

/// One explicitly written option, for "accepted but not used" warnings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingRef {
    /// The resource it applies to; `None` for `global` settings.
    pub resource: Option<String>,
    /// The section kind.
    pub section: SectionKind,
    /// The option (or handler) name.
    pub option: String,
    /// Where it is written (the first place, if several apply to the resource).
    pub at: Location,
}

/// The provenance of explicit settings. It is bookkeeping, not configuration, so two
/// configurations that mean the same compare equal whatever files they came from.
#[derive(Clone, Debug, Default)]
pub(crate) struct Origins(pub Vec<SettingRef>);

impl PartialEq for Origins {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for Origins {}

impl Config {
    /// The resource called `name`.
    pub fn resource(&self, name: &str) -> Option<&Resource> {
        self.resources.iter().find(|resource| resource.name == name)
    }

    /// Every option explicitly set anywhere in the files whose name is not in `active`,
    /// once per (resource, option), with the place it was written.
    pub fn settings_not_in(&self, active: &[&str]) -> Vec<SettingRef> {
        let origins = self.origins.0.iter();
        origins
            .filter(|setting| !active.contains(&setting.option.as_str()))
            .cloned()
            .collect()
    }
}

impl Resource {
    /// The host called `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|host| host.name == name)
    }

    /// The host with node id `id`.
    pub fn host_by_node_id(&self, id: u8) -> Option<&Host> {
        self.hosts.iter().find(|host| host.node_id == id)
    }

    /// The connections `host` takes part in.
    pub fn connections_of<'a>(&'a self, host: &'a str) -> impl Iterator<Item = &'a Connection> {
        self.connections
            .iter()
            .filter(move |connection| connection.hosts.iter().any(|name| name == host))
    }
}

impl Host {
    /// The volume numbered `number`.
    pub fn volume(&self, number: u16) -> Option<&Volume> {
        self.volumes.iter().find(|volume| volume.number == number)
    }

    /// True if every volume of this host is diskless (a tiebreaker node).
    pub fn is_diskless(&self) -> bool {
        self.volumes.iter().all(|volume| volume.disk.is_none())
    }
}

impl Connection {
    /// The other end of the connection as seen from `host`, if `host` is one end.
    pub fn peer_of(&self, host: &str) -> Option<&str> {
        match &self.hosts {
            [first, second] if first == host => Some(second),
            [first, second] if second == host => Some(first),
            _ => None,
        }
    }

    /// `host`'s address on path `path_index` and the peer's, if `host` is one end.
    pub fn addresses_of(&self, host: &str, path_index: usize) -> Option<(SocketAddr, SocketAddr)> {
        let [first, second] = *self.paths.get(path_index)?;
        if self.hosts[0] == host {
            Some((first, second))
        } else if self.hosts[1] == host {
            Some((second, first))
        } else {
            None
        }
    }

    /// The peer-device options of volume `number`.
    pub fn volume(&self, number: u16) -> Option<&PeerVolume> {
        self.volumes.iter().find(|volume| volume.number == number)
    }
}
