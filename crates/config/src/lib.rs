//! Parser for DRBD's `drbd.conf` syntax, producing tandem's typed, resolved configuration.
//!
//! A DRBD user's resource files load unchanged: `global`, `common`, `resource` with
//! `options`, `net`, `disk`, `handlers`, `startup`, `volume`, `on`, `connection` (with `host`
//! or `path`) and `connection-mesh`; `skip` before any section; top-level `include "glob";`;
//! `#` comments; double-quoted strings with backslash escapes; K/M/G (×1024) and `s` (512)
//! suffixes, converted into each option's unit as drbdsetup does (`c-max-rate 100M` is
//! 102400 KiB/s). Every option is range-checked against DRBD's limits; see
//! [`table::OPTIONS`] for the full list with defaults, ranges and units.
//!
//! # Resolution
//! * Options merge common < resource < (`on` | connection | mesh) < volume; the later,
//!   more specific level wins. Peer-device options (`resync-rate`, `c-*`, `bitmap`, ...) are
//!   written in `disk { }` sections of common, resource, resource volumes and connections.
//! * Volumes declared at resource level apply to every host; `on HOST { volume N { } }`
//!   overrides device, disk or meta-disk for that host (`disk none;` makes it diskless).
//!   `device`/`disk`/`meta-disk` written directly in a resource or `on` section declare
//!   volume 0 (DRBD 8.4 style).
//! * Without any connection section, a two-host resource has one implicit connection; a
//!   `connection-mesh` expands to every pair of its hosts.
//! * Two hosts without any `node-id` get 0 and 1 in file order; otherwise each host needs one.
//! * Cross-field rules the DRBD kernel enforces are checked on each connection's effective
//!   net options: `allow-two-primaries` needs protocol C, and an `on-congestion` policy other
//!   than `block` needs protocol A.
//!
//! # tandem-only keywords
//! * `nbd-address [ADDR:]PORT;` inside `on HOST { }`: where that node's NBD server listens.
//!   A bare port means `127.0.0.1:PORT`. See [`Host::nbd_address`].
//! * `metrics-address [ADDR:]PORT;` inside `on HOST { }`: where that node serves Prometheus
//!   metrics (off unless written; a bare port means loopback). See [`Host::metrics_address`].
//! * `io buffered|direct;` in a `disk { }` section: whether the node opens the volume's
//!   backing device through the page cache (the default) or with `O_DIRECT`. See
//!   [`DiskOptions::io`] and the daemon's `disk.rs` for how unaligned requests are handled.
//! * The Selective Replication Manager (issue 5; its rules and the reasons for the defaults
//!   are in the `srm` crate): `srm off|advise|on` and `srm-interval` in `options`;
//!   `srm-max-lag-bytes`, `srm-max-lag-time`, `srm-latency-high`/`-low`,
//!   `srm-fill-high`/`-low` (percent), `srm-min-dwell`, the bounds the manager moves
//!   buffers within (`srm-max-buffers-min`/`-max`, `srm-max-epoch-size-min`/`-max`,
//!   `srm-sndbuf-size-min`/`-max`) and the async buffer (`async-buffer SIZE`,
//!   `async-buffer-compress none|lz4|zstd`) in `net`, per connection like `protocol`;
//!   `srm-resync-share` (percent) with the other resync options in `disk`. Contradictory
//!   combinations are refused at load time (see `resolve/srm.rs`): a zero lag bound or a
//!   lag time under the interval with `srm` on or advise, a return threshold not below its
//!   enter threshold, a minimum over its maximum, compression without a buffer, a buffer
//!   larger than the lag bound or one nothing would use. With `srm on`, `on-congestion`
//!   other than `block` is accepted with any protocol (it applies while the manager runs
//!   the peer asynchronously).
//! * `handler-timeout SECONDS;` in `options` (1 to 3600, default 120): a handler (`fence-peer`,
//!   `split-brain`, ...) still running after that long is killed, and its `response helper` line
//!   reports the signal (status 137).
//! * `tls-certificate PATH;`, `tls-key PATH;` and `tls-fingerprint sha256:HEX;` inside
//!   `on HOST { }`: the host's TLS identity for `net { tls yes; }` (its peers pin the
//!   fingerprint). `tls` must be the same on every connection of a resource, and with it every
//!   host needs a fingerprint. See [`Host::tls_fingerprint`].
//! * `disk-throttle-latency USECS;` inside `on HOST { }`: for benchmarks and tests only, every
//!   local data write of that host takes at least that long (a slow disk; the
//!   `heterogeneous-disks` benchmark uses it).
//! * `fuse-mount PATH;` inside `on HOST { }`: the directory (absolute) where that node
//!   mounts the resource's volumes as files (the FUSE export). See [`Host::fuse_mount`].
//!
//! # Restrictions compared with DRBD
//! * `cram-hmac-alg` accepts only [`CRAM_HMAC_ALGORITHMS`] (what tandem implements).
//! * `floating`, `stacked-on-top-of`, DRBD Proxy (`proxy`, `via`) and the non-IP address
//!   families (`ssocks`, `sdp`, `sci`) are refused with an "is not supported" error.
//! * `require-drbd-module-version-*` statements are accepted and ignored (there is no module).
//! * Peer-device options are not accepted in `on` sections (they are per connection).
//!
//! # Bounds
//! Files over [`MAX_FILE_BYTES`], sections nested deeper than [`MAX_NESTING`], includes
//! nested deeper than [`MAX_INCLUDE_DEPTH`] and more than [`MAX_FILES`] files are refused.
//! No input makes the parser panic.
//!
//! # Errors
//! All errors are [`ConfigError`]; each displays as `file:line:column: message` (I/O errors
//! as `file: cannot read: ...`).

mod dump;
mod error;
mod lexer;
mod model;
mod options;
mod resolve;
mod source;
mod syntax;

use std::path::Path;

pub use dump::{dump, dump_with, DumpOptions};
pub use error::{ConfigError, Location};
pub use model::{
    Config, Connection, Handlers, Host, MetaDisk, PeerVolume, Resource, SectionKind, SettingRef,
    Volume,
};
pub use options::enums::{
    AfterSb0Pri, AfterSb1Pri, AfterSb2Pri, AsyncBufferCompress, DiskIo, Fencing, OnCongestion,
    OnIoError, OnNoDataAccessible, OnNoQuorum, OnSuspendedPrimaryOutdated, Protocol, Quorum,
    ReadBalancing, RrConflict, Srm, UsageCount,
};
pub use options::table::{self, CRAM_HMAC_ALGORITHMS};
pub use options::{DiskOptions, Global, NetOptions, PeerDeviceOptions, ResourceOptions, Startup};
pub use resolve::host::{format_fingerprint, parse_fingerprint};
pub use source::{MAX_FILES, MAX_FILE_BYTES, MAX_INCLUDE_DEPTH};
pub use syntax::MAX_NESTING;

/// Reads the configuration file at `path` and every file it includes.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    resolve::resolve(&source::load(path)?)
}

/// Parses `text` as if it were the file `file_name`; includes are read relative to
/// `file_name`'s directory.
pub fn parse_str(text: &str, file_name: &Path) -> Result<Config, ConfigError> {
    resolve::resolve(&source::parse_text(text, file_name, true)?)
}

/// Parses `text` as [`parse_str`] does but never touches the file system: an `include`
/// statement is a [`ConfigError::Invalid`] error. For text from untrusted sources (and the
/// fuzz targets).
pub fn parse_str_isolated(text: &str, file_name: &Path) -> Result<Config, ConfigError> {
    resolve::resolve(&source::parse_text(text, file_name, false)?)
}
