//! The command line: drbdadm's verbs (`create-md` and `dump-md` included) plus `node`, `dump`
//! and `demo`, parsed with clap.
//!
//! Invariants:
//! - Parsing never touches the system; a usage error exits with clap's status 2 before any
//!   socket is opened.
//! - A resource argument of `all`, or none, means every resource ([`resource_filter`]).

use std::path::PathBuf;

use admin::Request;

use crate::compat::{self, QueriedState, Spec};
use clap::{Args, Parser, Subcommand};

/// Where a node keeps its admin socket unless `--run-dir` or `TANDEM_RUN_DIR` says otherwise.
pub const RUN_DIR_DEFAULT: &str = "/run/tandem";
/// The configuration `node`, `dump`, `create-md` and `dump-md` read unless `--config` says
/// otherwise.
pub const CONFIG_PATH_DEFAULT: &str = "/etc/tandem/tandem.conf";

/// What `tandem --version` prints after the name: the version and the git commit it was
/// built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TANDEM_COMMIT"),
    ")"
);

/// tandem: a userspace replicated block device that speaks DRBD's language.
#[derive(Debug, Parser)]
#[command(name = "tandem", version = VERSION, arg_required_else_help = true)]
pub struct Cli {
    /// Directory of the node's admin socket (admin.sock).
    #[arg(long, global = true, env = "TANDEM_RUN_DIR", default_value = RUN_DIR_DEFAULT)]
    pub run_dir: PathBuf,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The verbs answered with a plain `Ok` or `Error`.
    #[command(flatten)]
    Simple(SimpleVerb),
    /// Show the state of resources, like `drbdadm status`.
    Status {
        /// Print the report as JSON (tandem's own schema: the admin protocol's report).
        #[arg(long)]
        json: bool,
        /// Print the report in the JSON schema of `drbdsetup status --json`.
        #[arg(long, conflicts_with = "json")]
        drbd_json: bool,
        /// Show every field.
        #[arg(short, long)]
        verbose: bool,
        /// Show I/O counters.
        #[arg(short, long)]
        statistics: bool,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// Print state changes as they happen, like `drbdsetup events2`, until interrupted.
    Events(EventsArgs),
    /// Print this node's role in a resource, like `drbdadm role`.
    Role {
        /// The resource.
        #[arg(
            value_name = "RES",
            value_parser = |text: &str| compat::query_spec(QueriedState::Role, text)
        )]
        spec: Spec,
    },
    /// Print the state of each connection, one line per peer (sorted by name), like
    /// `drbdadm cstate`; `RES:PEER` for one peer.
    Cstate {
        /// The resource, and optionally the peer.
        #[arg(
            value_name = "RES[:PEER]",
            value_parser = |text: &str| compat::query_spec(QueriedState::Connection, text)
        )]
        spec: Spec,
    },
    /// Print the disk states, one line per volume: this node's, then each peer's
    /// (`UpToDate/UpToDate`), like `drbdadm dstate`; `RES:PEER` and `RES/VOL` narrow it.
    Dstate {
        /// The resource, and optionally the peer and the volume.
        #[arg(
            value_name = "RES[:PEER][/VOL]",
            value_parser = |text: &str| compat::query_spec(QueriedState::Disk, text)
        )]
        spec: Spec,
    },
    /// Print the generation identifiers, one line per volume and peer, in drbdsetup's
    /// get-gi layout: CURRENT:BITMAP:HIST1:HIST2 (hex), then seven flags of this node and
    /// five of the peer (0/1). From the running node, else from the metadata on disk.
    GetGi(GiArgs),
    /// Print the generation identifiers with what each value and flag means (drbdsetup's
    /// show-gi). From the running node, else from the metadata on disk.
    ShowGi(GiArgs),
    /// Change connection options of the running node without editing the file, like
    /// `drbdsetup net-options`: protocol, max-epoch-size, max-buffers, ping-int,
    /// ping-timeout, timeout, ko-count, after-sb-0pri/1pri/2pri, on-congestion,
    /// congestion-fill, congestion-extents, sndbuf-size, async-buffer,
    /// async-buffer-compress, fencing. Not persistent: the next adjust brings back the
    /// file's values.
    NetOptions {
        /// The resource, and optionally the peer (default: every peer).
        #[arg(
            value_name = "RES[:PEER]",
            value_parser = |text: &str| compat::options_spec(text, false)
        )]
        spec: Spec,
        /// The options, `--NAME VALUE` or `--NAME=VALUE`, with the file's units and ranges.
        #[arg(
            value_name = "--NAME VALUE",
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true
        )]
        options: Vec<String>,
    },
    /// Change disk options of the running node without editing the file, like `drbdsetup
    /// disk-options`: on-io-error, and the resync rate options resync-rate, c-plan-ahead,
    /// c-delay-target, c-fill-target, c-max-rate, c-min-rate (for every volume: tandem keeps
    /// one resync configuration per peer). Not persistent: the next adjust brings back the
    /// file's values.
    DiskOptions {
        /// The resource, and optionally the volume (default: every volume).
        #[arg(
            value_name = "RES[/VOL]",
            value_parser = |text: &str| compat::options_spec(text, true)
        )]
        spec: Spec,
        /// The options, `--NAME VALUE` or `--NAME=VALUE`, with the file's units and ranges.
        #[arg(
            value_name = "--NAME VALUE",
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true
        )]
        options: Vec<String>,
    },
    /// Forget a peer that is not connected (StandAlone or Connecting), like `drbdadm
    /// forget-peer`: every block is marked out of sync for it and its last known disk state
    /// is dropped, so a later connect is a full sync. Refused while connected.
    ForgetPeer {
        /// The resource and the peer.
        #[arg(value_name = "RES:PEER", value_parser = compat::peer_spec)]
        spec: Spec,
    },
    /// Wait until the resource's connections (or the one to PEER) are Connected; fails at
    /// once on a StandAlone connection or a resource that is down.
    WaitConnect {
        /// Give up after this many seconds (default: wait as long as it takes).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// The resource, and optionally the peer.
        #[arg(
            value_name = "RES[:PEER]",
            value_parser = |text: &str| compat::query_spec(QueriedState::Connection, text)
        )]
        spec: Spec,
    },
    /// Run a node in the foreground.
    Node {
        /// The drbd.conf-style configuration file.
        #[arg(short, long, default_value = CONFIG_PATH_DEFAULT)]
        config: PathBuf,
        /// Which `on NAME` section is this node (default: the host name).
        #[arg(long)]
        node: Option<String>,
    },
    /// Parse a configuration file and print it back in canonical form, like `drbdadm dump`.
    Dump {
        /// The drbd.conf-style configuration file.
        #[arg(short, long, default_value = CONFIG_PATH_DEFAULT)]
        config: PathBuf,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// Write fresh metadata for this node's volumes, like `drbdadm create-md`.
    CreateMd {
        /// The drbd.conf-style configuration file.
        #[arg(short, long, default_value = CONFIG_PATH_DEFAULT)]
        config: PathBuf,
        /// Which `on NAME` section is this node (default: the host name).
        #[arg(long)]
        node: Option<String>,
        /// Overwrite existing tandem metadata (its generation identifiers and bitmaps are
        /// lost), or whatever else is there: without it, create-md refuses a device holding a
        /// file system, swap, LUKS, a partition table or DRBD metadata where it would write
        /// (the backing disk with internal metadata, the metadata device with external).
        #[arg(long)]
        force: bool,
        /// Peer bitmap slots to reserve, for peers added later (default: the configured peers).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=31))]
        max_peers: Option<u8>,
        /// Bytes of data per bitmap bit (default 4K): a power of two from 4K to 1M. Coarser
        /// bits make the bitmap smaller and resyncs move more. Peers must use the same.
        #[arg(long, value_name = "SIZE", value_parser = parse_granularity)]
        bitmap_granularity: Option<u32>,
        /// Resource name, or `all`.
        #[arg(value_name = "RES")]
        resource: String,
    },
    /// Mark this node's data Outdated, like `drbdadm outdate`: it will not be promoted
    /// (without --force) before a resync from an UpToDate peer. Refused on a Primary, while
    /// connected to a peer, and for Inconsistent data. With no node running, the flag is
    /// written into the metadata on disk (like drbdmeta outdate); it survives a restart.
    Outdate {
        /// Where the metadata is when no node runs.
        #[command(flatten)]
        on_disk: OnDiskArgs,
        /// Resource name, or `all`.
        #[arg(value_name = "RES")]
        resource: String,
    },
    /// Destroy this node's metadata of a resource, like `drbdadm wipe-md` (the node must be
    /// stopped). Asks for confirmation on a terminal.
    WipeMd {
        /// Where the metadata is.
        #[command(flatten)]
        on_disk: OnDiskArgs,
        /// Do not ask (required when standard input is not a terminal).
        #[arg(long)]
        force: bool,
        /// Resource name, or `all`.
        #[arg(value_name = "RES")]
        resource: String,
    },
    /// Print the metadata of this node's volumes, like `drbdadm dump-md`.
    DumpMd {
        /// The drbd.conf-style configuration file.
        #[arg(short, long, default_value = CONFIG_PATH_DEFAULT)]
        config: PathBuf,
        /// Which `on NAME` section is this node (default: the host name).
        #[arg(long)]
        node: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Resource name, or `all`.
        #[arg(value_name = "RES")]
        resource: String,
    },
    /// Wait until the resource is UpToDate on every node, with a progress bar, rate and ETA.
    /// Fails at once when it cannot get there without you (StandAlone, no UpToDate data).
    WaitSync {
        /// Give up after this many seconds (default: wait as long as it progresses).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// Run a self-contained demonstration on this machine.
    Demo,
    /// Make a self-signed certificate and key for a host's TLS replication links
    /// (DIR/NAME.crt, DIR/NAME.key mode 0600) and print the lines for its `on` section.
    TlsKeygen {
        /// Where to write the two files (never overwritten).
        #[arg(long, value_name = "DIR", default_value = "/etc/tandem")]
        out: PathBuf,
        /// The host's name (its `on NAME` section).
        #[arg(long, value_name = "NAME")]
        name: String,
    },
    /// Write the man pages (DIR/man8/tandem.8 and tandem-VERB.8) and the shell completions
    /// (DIR/completions/tandem.bash, _tandem, tandem.fish), for packaging.
    #[command(hide = true)]
    GenerateDocs {
        /// Where to write them.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// Where a verb finds this node's metadata when it works on it directly (no node running).
#[derive(Debug, Args)]
pub struct OnDiskArgs {
    /// The drbd.conf-style configuration file.
    #[arg(short, long, default_value = CONFIG_PATH_DEFAULT)]
    pub config: PathBuf,
    /// Which `on NAME` section is this node (default: the host name).
    #[arg(long)]
    pub node: Option<String>,
}

impl OnDiskArgs {
    /// The same, for the metadata commands, with the resource they act on.
    pub fn md_args(self, resource: String) -> crate::md::MdArgs {
        crate::md::MdArgs {
            config: self.config,
            node: self.node,
            resource,
        }
    }
}

/// `tandem get-gi` and `show-gi`.
#[derive(Debug, Args)]
pub struct GiArgs {
    /// Where the metadata is when no node runs.
    #[command(flatten)]
    pub on_disk: OnDiskArgs,
    /// The resource, and optionally the peer and the volume.
    #[arg(value_name = "RES[:PEER][/VOL]", value_parser = compat::gi_spec)]
    pub spec: Spec,
}

impl GiArgs {
    /// Where the metadata is when no node runs.
    pub fn on_disk(&self) -> crate::gi::OnDisk {
        crate::gi::OnDisk {
            config: self.on_disk.config.clone(),
            node: self.on_disk.node.clone(),
        }
    }
}

/// `tandem events` (and `drbdsetup events2`): drbdsetup's options.
#[derive(Debug, PartialEq, Eq, Args)]
pub struct EventsArgs {
    /// Include I/O counters.
    #[arg(short, long)]
    pub statistics: bool,
    /// Print the current state (`exists` lines, then `exists -`) and exit.
    #[arg(long)]
    pub now: bool,
    /// Print the current state, then again each time a line `n` arrives on standard input;
    /// exit at the end of input.
    #[arg(long, conflicts_with = "now")]
    pub poll: bool,
    /// Every `change` line carries every field of its object, counters included.
    #[arg(long)]
    pub full: bool,
    /// Start each line with the time it arrived (ISO 8601, UTC, microseconds).
    #[arg(long)]
    pub timestamps: bool,
    /// Which resource.
    #[command(flatten)]
    pub target: Target,
}

/// The admin verbs that change state and are answered with a plain `Ok` or `Error`.
#[derive(Debug, Subcommand)]
pub enum SimpleVerb {
    /// Bring resources up: attach the disk and start connecting.
    Up(Target),
    /// Take resources down: disconnect and detach.
    Down(Target),
    /// Promote this node to Primary.
    Primary {
        /// Promote even without UpToDate data (starts a full sync towards the peers).
        #[arg(long)]
        force: bool,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// Demote this node to Secondary.
    Secondary {
        /// Demote even while the export is open: every write held for want of quorum or by
        /// fencing, or still pending, fails with EIO (none is acknowledged).
        #[arg(long)]
        force: bool,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// Start connecting to peers.
    Connect {
        /// Lose the next split-brain resolution with these peers: their data replaces ours.
        #[arg(long)]
        discard_my_data: bool,
        /// Which resource and peer.
        #[command(flatten)]
        target: PeerTarget,
    },
    /// Online verify against peers: only digests cross the wire; blocks found different are
    /// marked out of sync (a disconnect/connect or invalidate repairs them).
    Verify(PeerTarget),
    /// Discard this node's data: a full resync from a peer with UpToDate data replaces it.
    Invalidate(Target),
    /// Take the backing disk away: the node goes Diskless and serves through a peer (a
    /// Primary needs a connected UpToDate peer).
    Detach(Target),
    /// Attach the backing disk again (after detach or a disk failure): Attaching, then a
    /// resync of what it missed from an UpToDate peer (on a Secondary).
    Attach(Target),
    /// Discard a peer's data: a full resync from this node replaces it.
    InvalidateRemote(PeerTarget),
    /// Start a new generation of the data; with --clear-bitmap, connected peers take it
    /// over without a resync (skip the initial sync of empty disks).
    NewCurrentUuid {
        /// Clear the bitmaps of connected peers and mark every disk UpToDate.
        #[arg(long)]
        clear_bitmap: bool,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// Drop connections to peers.
    Disconnect(PeerTarget),
    /// Re-read the configuration and apply what changed without dropping connections
    /// (protocol, buffers, timeouts, resync rates, after-sb policies).
    Adjust {
        /// Leave the connections' options alone; only disk options change.
        #[arg(long)]
        skip_net: bool,
        /// Which resource.
        #[command(flatten)]
        target: Target,
    },
    /// The Selective Replication Manager: `tandem srm status [RES]` shows what it measured
    /// and decided.
    Srm {
        /// What to do.
        #[command(subcommand)]
        command: SrmVerb,
    },
    /// Suspend resyncs with peers (PausedSyncS/T, `resync-suspended:user`) until
    /// resume-sync; writes keep replicating.
    PauseSync(PeerTarget),
    /// Let resyncs suspended by pause-sync run again.
    ResumeSync(PeerTarget),
    /// Freeze client I/O: new writes and reads wait (nothing fails) until resume-io; status
    /// shows `suspended:user`. Writes already in flight finish.
    SuspendIo(Target),
    /// Resume client I/O frozen by suspend-io or by fencing (`fencing resource-and-stonith`
    /// after the fence-peer handler failed or still runs; the lost peer stays unfenced).
    ResumeIo(Target),
    /// Grow a volume online once every node's backing device grew (truncate -s, lvextend):
    /// the nodes agree on the smallest size their devices offer, move their metadata to the
    /// new end, and resync the new area from the Primary. Every peer must be connected;
    /// shrinking is refused.
    Resize {
        /// Grow to at most this size (bytes, or with a K/M/G/T suffix, powers of 1024).
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        size: Option<u64>,
        /// The new area reads the same on every node (say, freshly extended sparse files):
        /// take it as in sync instead of resyncing it.
        #[arg(long)]
        assume_clean: bool,
        /// Grow this node alone, asking no peer (refused while one is connected): for a node
        /// that missed a resize its peers did, which they refuse to connect to until it grows.
        #[arg(long)]
        assume_peer_has_space: bool,
        /// `RES` or `RES/VOL` (default: every volume of every resource).
        #[arg(value_name = "RES[/VOL]", value_parser = parse_resize_target)]
        target: Option<(String, Option<u16>)>,
    },
}

/// A size with an optional K/M/G/T suffix (powers of 1024), as `drbdadm resize --size`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => {
            let shift = match unit.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("unknown size unit in '{text}' (use K, M, G or T)")),
            };
            (&text[..at], shift)
        }
        _ => (text, 0),
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size"))?;
    number
        .checked_mul(1 << shift)
        .filter(|bytes| *bytes > 0)
        .ok_or_else(|| format!("size '{text}' is out of range"))
}

/// `RES[/VOL]` split into the resource and the volume.
pub fn parse_resize_target(text: &str) -> Result<(String, Option<u16>), String> {
    match text.split_once('/') {
        Some((resource, volume)) => {
            let volume = volume
                .parse()
                .map_err(|_| format!("'{volume}' is not a volume number"))?;
            Ok((resource.to_string(), Some(volume)))
        }
        None => Ok((text.to_string(), None)),
    }
}

/// The resource (None for all) and volume a resize names.
fn resize_target(target: Option<(String, Option<u16>)>) -> (Option<String>, Option<u16>) {
    match target {
        Some((resource, volume)) if resource != "all" => (Some(resource), volume),
        _ => (None, None),
    }
}

/// `tandem srm ...`.
#[derive(Debug, clap::Subcommand)]
pub enum SrmVerb {
    /// The latest measurements and decisions.
    Status(Target),
}

/// The request of `tandem resize`.
fn resize_request(
    target: Option<(String, Option<u16>)>,
    size_bytes: Option<u64>,
    assume_clean: bool,
    assume_peer_has_space: bool,
) -> Request {
    let (resource, volume) = resize_target(target);
    Request::Resize {
        resource,
        volume,
        size_bytes,
        assume_clean,
        assume_peer_has_space,
    }
}

/// The request `make` builds for the resources `target` selects.
fn with_resource(target: &Target, make: impl FnOnce(Option<String>) -> Request) -> Request {
    make(resource_filter(target))
}

impl SimpleVerb {
    /// The request this verb sends.
    pub fn into_request(self) -> Request {
        match self {
            Self::Up(target) => with_resource(&target, |resource| Request::Up { resource }),
            Self::Down(target) => with_resource(&target, |resource| Request::Down { resource }),
            Self::Primary { force, target } => Request::Primary {
                resource: resource_filter(&target),
                force,
            },
            Self::Secondary { force, target } => Request::Secondary {
                resource: resource_filter(&target),
                force,
            },
            Self::Connect {
                discard_my_data,
                target: PeerTarget { peer, target },
            } => Request::Connect {
                resource: resource_filter(&target),
                peer,
                discard_my_data,
            },
            Self::Verify(PeerTarget { peer, target }) => Request::Verify {
                resource: resource_filter(&target),
                peer,
            },
            Self::Invalidate(target) => {
                with_resource(&target, |resource| Request::Invalidate { resource })
            }
            Self::Detach(target) => with_resource(&target, |resource| Request::Detach { resource }),
            Self::Attach(target) => with_resource(&target, |resource| Request::Attach { resource }),
            Self::InvalidateRemote(PeerTarget { peer, target }) => Request::InvalidateRemote {
                resource: resource_filter(&target),
                peer,
            },
            Self::NewCurrentUuid {
                clear_bitmap,
                target,
            } => Request::NewCurrentUuid {
                resource: resource_filter(&target),
                clear_bitmap,
            },
            Self::Disconnect(PeerTarget { peer, target }) => Request::Disconnect {
                resource: resource_filter(&target),
                peer,
            },
            Self::Adjust { skip_net, target } => Request::Adjust {
                resource: resource_filter(&target),
                skip_net,
            },
            Self::Srm {
                command: SrmVerb::Status(target),
            } => Request::SrmStatus {
                resource: resource_filter(&target),
            },
            Self::PauseSync(PeerTarget { peer, target }) => Request::PauseSync {
                resource: resource_filter(&target),
                peer,
            },
            Self::ResumeSync(PeerTarget { peer, target }) => Request::ResumeSync {
                resource: resource_filter(&target),
                peer,
            },
            Self::Resize {
                size,
                assume_clean,
                assume_peer_has_space,
                target,
            } => resize_request(target, size, assume_clean, assume_peer_has_space),
            Self::ResumeIo(target) => {
                with_resource(&target, |resource| Request::ResumeIo { resource })
            }
            Self::SuspendIo(target) => {
                with_resource(&target, |resource| Request::SuspendIo { resource })
            }
        }
    }
}

/// The resource a command acts on.
#[derive(Debug, PartialEq, Eq, Args)]
pub struct Target {
    /// Resource name, or `all` (the default).
    #[arg(value_name = "RES")]
    pub resource: Option<String>,
}

/// The resource and peer a connection command acts on.
#[derive(Debug, Args)]
pub struct PeerTarget {
    /// Only this peer (connection name); default: all peers.
    #[arg(long, value_name = "NAME")]
    pub peer: Option<String>,
    /// Which resource.
    #[command(flatten)]
    pub target: Target,
}

/// The resource named by `target`, or `None` for all resources.
pub fn resource_filter(target: &Target) -> Option<String> {
    target.resource.clone().filter(|resource| resource != "all")
}

/// `--bitmap-granularity`: bytes (or K/M binary suffixes), a power of two from 4 KiB to 1 MiB.
pub fn parse_granularity(text: &str) -> Result<u32, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((at, 'K' | 'k')) => (&text[..at], 1024),
        Some((at, 'M' | 'm')) => (&text[..at], 1024 * 1024),
        _ => (text, 1),
    };
    let value = digits
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("'{text}' is not a size (e.g. 4K, 64K, 1M)"))?;
    let range =
        meta::layout::BITMAP_GRANULARITY_BYTES_MIN..=meta::layout::BITMAP_GRANULARITY_BYTES_MAX;
    if !value.is_power_of_two() || !range.contains(&value) {
        return Err(format!("{text} must be a power of two from 4K to 1M"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn resize_sizes_and_targets_parse() {
        for (text, bytes) in [
            ("4096", Some(4096)),
            ("64K", Some(64 << 10)),
            ("2g", Some(2 << 30)),
            ("1T", Some(1 << 40)),
            ("0", None),
            ("3X", None),
            ("G", None),
        ] {
            assert_eq!(parse_size(text).ok(), bytes, "{text}");
        }
        assert_eq!(parse_resize_target("r0/1"), Ok(("r0".to_string(), Some(1))));
        assert_eq!(parse_resize_target("r0"), Ok(("r0".to_string(), None)));
        assert!(parse_resize_target("r0/x").is_err());
        assert_eq!(resize_target(Some(("all".into(), None))), (None, None));
    }

    #[test]
    fn all_and_nothing_both_mean_every_resource() {
        for (resource, expected) in [(None, None), (Some("all"), None), (Some("r0"), Some("r0"))] {
            let target = Target {
                resource: resource.map(str::to_string),
            };
            assert_eq!(resource_filter(&target).as_deref(), expected);
        }
    }
}
