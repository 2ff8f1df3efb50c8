//! The static table of every drbd.conf option tandem understands: name, the class of
//! section it belongs to, and its kind (with DRBD's default, range and unit).
//!
//! Invariants: names are unique; every integer default lies within its range; every enum
//! default is one of its values (both checked by tests). Defaults and ranges are DRBD's, from
//! `linux/drbd_limits.h` in drbd-headers (see shared/reference/drbd-semantics.md §1); the
//! option names and their sections are drbdsetup's (drbd-utils `config_flags.c`). Where
//! those say nothing, a comment on the row cites drbd.conf(5).

/// Which section class an option belongs to; the class decides where it may be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// `global { }`.
    Global,
    /// `options { }` (drbdsetup resource-options).
    Resource,
    /// `net { }` (drbdsetup net-options), per connection.
    Net,
    /// `disk { }` (drbdsetup disk-options and device options), per volume.
    Disk,
    /// Peer-device options, written in a `disk { }` section (per connection and volume).
    PeerDevice,
    /// `startup { }` (read by the tools at start-up, not by the kernel).
    Startup,
}

impl Class {
    /// Where options of this class are written, for error messages.
    pub fn home(self) -> &'static str {
        match self {
            Self::Global => "the global section",
            Self::Resource => "an options section",
            Self::Net => "a net section",
            Self::Disk => "a disk section of common, resource, on or volume",
            Self::PeerDevice => "a disk section of common, resource, volume or connection",
            Self::Startup => "a startup section",
        }
    }
}

/// The unit a number is stored in; decides how K/M/G/s suffixes convert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A plain count; a K/M/G suffix multiplies by 1024, 1024², 1024³.
    Count,
    /// A count of 4 KiB pages (suffixes multiply like [`Unit::Count`]).
    Pages,
    /// Bytes.
    Bytes,
    /// 512-byte sectors.
    Sectors,
    /// KiB per second.
    KibPerSecond,
    /// Seconds (no suffixes).
    Seconds,
    /// Tenths of a second (no suffixes).
    Deciseconds,
    /// Milliseconds (no suffixes).
    Milliseconds,
    /// Percent of something (no suffixes).
    Percent,
}

impl Unit {
    /// The unit's name as error messages and docs show it; empty for plain counts.
    pub fn label(self) -> &'static str {
        match self {
            Self::Count => "",
            Self::Pages => "pages",
            Self::Bytes => "bytes",
            Self::Sectors => "sectors",
            Self::KibPerSecond => "KiB/s",
            Self::Seconds => "seconds",
            Self::Deciseconds => "1/10 seconds",
            Self::Milliseconds => "milliseconds",
            Self::Percent => "percent",
        }
    }

    /// How many bytes one unit is, for units that take size suffixes.
    pub fn bytes(self) -> Option<u64> {
        match self {
            Self::Count | Self::Pages | Self::Bytes => Some(1),
            Self::Sectors => Some(512),
            Self::KibPerSecond => Some(1024),
            Self::Seconds | Self::Deciseconds | Self::Milliseconds | Self::Percent => None,
        }
    }

    /// True if the unit is a time span (the typed field is a `Duration`).
    pub fn is_time(self) -> bool {
        matches!(self, Self::Seconds | Self::Deciseconds | Self::Milliseconds)
    }
}

/// What values an option takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `yes` or `no`; the bare keyword means `yes`.
    Bool {
        /// DRBD's default.
        default: bool,
    },
    /// One word out of a list. A value ending in `NAME` (as in `discard-node-NAME`) stands for
    /// any word with that prefix.
    Enum {
        /// The allowed words.
        values: &'static [&'static str],
        /// DRBD's default, or `None` for "unset".
        default: Option<&'static str>,
        /// Whether `c` is accepted for `C` (drbdsetup does this for `protocol` only).
        ignore_case: bool,
    },
    /// A number with a unit and an inclusive range.
    Integer {
        /// The unit values are stored in.
        unit: Unit,
        /// Smallest allowed value.
        min: u64,
        /// Largest allowed value.
        max: u64,
        /// DRBD's default.
        default: u64,
    },
    /// A string (unset by default).
    Text {
        /// Longest allowed value in characters.
        max_len: usize,
    },
    /// `off`, `majority`, `all` or a node count 1..=32 (default `off`).
    Quorum,
    /// One or more words (default: none).
    Words,
}

/// One row of the option table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    /// The keyword as written in drbd.conf.
    pub name: &'static str,
    /// The section class it belongs to.
    pub class: Class,
    /// Its values, default and range.
    pub kind: Kind,
}

/// Highest node count `quorum` and `quorum-minimum-redundancy` accept (DRBD_PEERS_MAX).
pub const QUORUM_NODES_MAX: u64 = 32;
/// SHARED_SECRET_MAX in drbd.h: the length bound of net strings.
const SHARED_SECRET_MAX: usize = 64;

const fn flag(name: &'static str, class: Class, default: bool) -> OptionSpec {
    OptionSpec {
        name,
        class,
        kind: Kind::Bool { default },
    }
}

const fn number(
    name: &'static str,
    class: Class,
    unit: Unit,
    range: (u64, u64),
    default: u64,
) -> OptionSpec {
    OptionSpec {
        name,
        class,
        kind: Kind::Integer {
            unit,
            min: range.0,
            max: range.1,
            default,
        },
    }
}

const fn choice(
    name: &'static str,
    class: Class,
    values: &'static [&'static str],
    default: &'static str,
) -> OptionSpec {
    OptionSpec {
        name,
        class,
        kind: Kind::Enum {
            values,
            default: Some(default),
            ignore_case: false,
        },
    }
}

const fn text(name: &'static str, class: Class, max_len: usize) -> OptionSpec {
    OptionSpec {
        name,
        class,
        kind: Kind::Text { max_len },
    }
}

use super::enums as e;
use Class::{Disk, Global, Net, PeerDevice, Resource, Startup};
use Unit::{
    Bytes, Count, Deciseconds, KibPerSecond, Milliseconds, Pages, Percent, Seconds, Sectors,
};

/// Largest `srm-max-lag-bytes` and `async-buffer`: 64 GiB (both are memory on the Primary).
pub const SRM_BUFFER_BYTES_MAX: u64 = 64 << 30;
/// Largest `srm-max-lag-time`: one hour, in milliseconds.
pub const SRM_LAG_MILLISECONDS_MAX: u64 = 3_600_000;

/// Algorithms tandem implements for `cram-hmac-alg` (peer authentication).
pub const CRAM_HMAC_ALGORITHMS: &[&str] = &["sha1", "sha256", "sha512"];

/// Every option, grouped by class in the order `dump` prints them.
pub static OPTIONS: &[OptionSpec] = &[
    // global: drbd.conf(5) gives the defaults of dialog-refresh (1) and the cmd-timeouts
    // (5, 121, 600 s) and no upper bound for the latter; drbdadm accepts any u32.
    choice("usage-count", Global, e::UsageCount::NAMES, "ask"),
    flag("udev-always-use-vnr", Global, false),
    flag("disable-ip-verification", Global, false),
    number("dialog-refresh", Global, Seconds, (0, 600), 1),
    number("minor-count", Global, Count, (1, 255), 32),
    number(
        "cmd-timeout-short",
        Global,
        Seconds,
        (0, u32::MAX as u64),
        5,
    ),
    number(
        "cmd-timeout-medium",
        Global,
        Seconds,
        (0, u32::MAX as u64),
        121,
    ),
    number(
        "cmd-timeout-long",
        Global,
        Seconds,
        (0, u32::MAX as u64),
        600,
    ),
    // options (resource options)
    text("cpu-mask", Resource, 256),
    choice(
        "on-no-data-accessible",
        Resource,
        e::OnNoDataAccessible::NAMES,
        "io-error",
    ),
    flag("auto-promote", Resource, true),
    number("auto-promote-timeout", Resource, Deciseconds, (0, 600), 20),
    number("peer-ack-window", Resource, Sectors, (2048, 204_800), 4096),
    number("peer-ack-delay", Resource, Milliseconds, (1, 10_000), 100),
    number("twopc-timeout", Resource, Deciseconds, (50, 600), 300),
    number("twopc-retry-timeout", Resource, Deciseconds, (1, 50), 1),
    number("max-io-depth", Resource, Count, (4, u32::MAX as u64), 8000),
    OptionSpec {
        name: "quorum",
        class: Resource,
        kind: Kind::Quorum,
    },
    choice("on-no-quorum", Resource, e::OnNoQuorum::NAMES, "suspend-io"),
    OptionSpec {
        name: "quorum-minimum-redundancy",
        class: Resource,
        kind: Kind::Quorum,
    },
    choice(
        "on-suspended-primary-outdated",
        Resource,
        e::OnSuspendedPrimaryOutdated::NAMES,
        "disconnect",
    ),
    // tandem only: the Selective Replication Manager (issue 5); defaults are justified in
    // the srm crate's documentation.
    choice("srm", Resource, e::Srm::NAMES, "off"),
    number("srm-interval", Resource, Milliseconds, (100, 60_000), 500),
    // tandem only: how long a handler may run before it is killed (DRBD waits for ever,
    // except for its fence-peer timeout in the kernel's state machine).
    number("handler-timeout", Resource, Seconds, (1, 3600), 120),
    // net
    OptionSpec {
        name: "protocol",
        class: Net,
        kind: Kind::Enum {
            values: e::Protocol::NAMES,
            default: Some("C"),
            ignore_case: true,
        },
    },
    number("timeout", Net, Deciseconds, (1, 600), 60),
    number("max-epoch-size", Net, Count, (1, 20_000), 2048),
    number("max-buffers", Net, Pages, (32, 131_072), 2048),
    number("connect-int", Net, Seconds, (1, 120), 10),
    number("ping-int", Net, Seconds, (1, 120), 10),
    number("ping-timeout", Net, Deciseconds, (1, 300), 5),
    number("sndbuf-size", Net, Bytes, (0, 128 << 20), 0),
    number("rcvbuf-size", Net, Bytes, (0, 128 << 20), 0),
    number("ko-count", Net, Count, (0, 200), 7),
    flag("allow-two-primaries", Net, false),
    OptionSpec {
        name: "cram-hmac-alg",
        class: Net,
        kind: Kind::Enum {
            values: CRAM_HMAC_ALGORITHMS,
            default: None,
            ignore_case: false,
        },
    },
    text("shared-secret", Net, SHARED_SECRET_MAX),
    choice("after-sb-0pri", Net, e::AfterSb0Pri::NAMES, "disconnect"),
    choice("after-sb-1pri", Net, e::AfterSb1Pri::NAMES, "disconnect"),
    choice("after-sb-2pri", Net, e::AfterSb2Pri::NAMES, "disconnect"),
    flag("always-asbp", Net, false),
    choice("rr-conflict", Net, e::RrConflict::NAMES, "disconnect"),
    text("data-integrity-alg", Net, SHARED_SECRET_MAX),
    flag("tcp-cork", Net, true),
    choice("on-congestion", Net, e::OnCongestion::NAMES, "block"),
    number("congestion-fill", Net, Sectors, (0, 10 << 21), 0),
    number("congestion-extents", Net, Count, (67, 65_534), 1237),
    text("csums-alg", Net, SHARED_SECRET_MAX),
    flag("csums-after-crash-only", Net, false),
    text("verify-alg", Net, SHARED_SECRET_MAX),
    flag("use-rle", Net, true),
    number("socket-check-timeout", Net, Deciseconds, (0, 300), 0),
    choice("fencing", Net, e::Fencing::NAMES, "dont-care"),
    flag("allow-remote-read", Net, true),
    flag("tls", Net, false),
    text("transport", Net, SHARED_SECRET_MAX),
    flag("load-balance-paths", Net, false),
    // tandem only: the manager's per-connection bounds and thresholds, and the async buffer.
    number(
        "srm-max-lag-bytes",
        Net,
        Bytes,
        (0, SRM_BUFFER_BYTES_MAX),
        64 << 20,
    ),
    number(
        "srm-max-lag-time",
        Net,
        Milliseconds,
        (0, SRM_LAG_MILLISECONDS_MAX),
        2000,
    ),
    number("srm-latency-high", Net, Milliseconds, (1, 10_000), 5),
    number("srm-latency-low", Net, Milliseconds, (0, 9_999), 2),
    number("srm-fill-high", Net, Percent, (1, 100), 80),
    number("srm-fill-low", Net, Percent, (0, 99), 30),
    number("srm-min-dwell", Net, Seconds, (0, 3600), 10),
    number("srm-max-buffers-min", Net, Pages, (32, 131_072), 2048),
    number("srm-max-buffers-max", Net, Pages, (32, 131_072), 8192),
    number("srm-max-epoch-size-min", Net, Count, (1, 20_000), 2048),
    number("srm-max-epoch-size-max", Net, Count, (1, 20_000), 8192),
    number(
        "srm-sndbuf-size-min",
        Net,
        Bytes,
        (4096, 128 << 20),
        128 << 10,
    ),
    number(
        "srm-sndbuf-size-max",
        Net,
        Bytes,
        (4096, 128 << 20),
        2 << 20,
    ),
    number("async-buffer", Net, Bytes, (0, SRM_BUFFER_BYTES_MAX), 0),
    choice(
        "async-buffer-compress",
        Net,
        e::AsyncBufferCompress::NAMES,
        "none",
    ),
    // disk (disk-options and device options)
    choice("on-io-error", Disk, e::OnIoError::NAMES, "detach"),
    // tandem only: open the backing device with O_DIRECT or through the page cache.
    choice("io", Disk, e::DiskIo::NAMES, "buffered"),
    text("resync-after", Disk, SHARED_SECRET_MAX),
    number("al-extents", Disk, Count, (67, 65_534), 1237),
    flag("al-updates", Disk, true),
    flag("disk-barrier", Disk, false),
    flag("disk-flushes", Disk, true),
    flag("disk-drain", Disk, true),
    flag("md-flushes", Disk, true),
    number("disk-timeout", Disk, Deciseconds, (0, 6000), 0),
    choice(
        "read-balancing",
        Disk,
        e::ReadBalancing::NAMES,
        "prefer-local",
    ),
    number("rs-discard-granularity", Disk, Bytes, (0, 1 << 20), 0),
    flag("discard-zeroes-if-aligned", Disk, true),
    flag("disable-write-same", Disk, false),
    number("block-size", Disk, Bytes, (512, 4096), 512),
    // `size`: DRBD_DISK_SIZE_MAX is 2^41 sectors (1 PiB); 0 means "use the whole disk".
    number("size", Disk, Sectors, (0, 2 << 40), 0),
    // peer-device options (written in disk sections)
    number("resync-rate", PeerDevice, KibPerSecond, (1, 8 << 20), 250),
    number("c-plan-ahead", PeerDevice, Deciseconds, (0, 300), 20),
    number("c-delay-target", PeerDevice, Deciseconds, (1, 100), 10),
    number("c-fill-target", PeerDevice, Sectors, (0, 1 << 20), 100),
    number(
        "c-max-rate",
        PeerDevice,
        KibPerSecond,
        (0, 4 << 20),
        102_400,
    ),
    number("c-min-rate", PeerDevice, KibPerSecond, (0, 4 << 20), 250),
    // tandem only: most of the link the manager lets a resync use.
    number("srm-resync-share", PeerDevice, Percent, (1, 100), 50),
    flag("bitmap", PeerDevice, true),
    flag("resync-without-replication", PeerDevice, true),
    flag("peer-tiebreaker", PeerDevice, true),
    // startup (drbdadm's own limits: DRBD_*WFC_TIMEOUT_* in drbd_limits.h)
    number("wfc-timeout", Startup, Seconds, (0, 300_000), 0),
    number("degr-wfc-timeout", Startup, Seconds, (0, 300_000), 0),
    number("outdated-wfc-timeout", Startup, Seconds, (0, 300_000), 0),
    flag("wait-after-sb", Startup, false),
    flag("stacked-timeouts", Startup, false),
    OptionSpec {
        name: "become-primary-on",
        class: Startup,
        kind: Kind::Words,
    },
];

/// The table row for `name`, if it is an option.
pub fn find(name: &str) -> Option<&'static OptionSpec> {
    OPTIONS.iter().find(|spec| spec.name == name)
}

impl OptionSpec {
    /// The allowed values of an enum-like option, as error messages list them.
    pub fn allowed(&self) -> String {
        match self.kind {
            Kind::Bool { .. } => "yes | no".to_string(),
            Kind::Enum { values, .. } => values.join(" | "),
            Kind::Quorum => format!("off | majority | all | 1..={QUORUM_NODES_MAX}"),
            Kind::Integer { .. } | Kind::Text { .. } | Kind::Words => String::new(),
        }
    }
}
