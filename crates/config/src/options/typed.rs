//! The typed option structs callers use: one per section class, each field the effective
//! value of one drbd.conf option, in a Rust type with the unit in its name or type.
//!
//! Invariant: each struct is generated from a list of (field, option name) pairs, so
//! `from_set` and `values` cannot drift apart; tests check that every table row belongs to
//! exactly one struct and that each field's type fits its row.

use std::time::Duration;

use super::enums::{
    AfterSb0Pri, AfterSb1Pri, AfterSb2Pri, AsyncBufferCompress, DiskIo, Fencing, OnCongestion,
    OnIoError, OnNoDataAccessible, OnNoQuorum, OnSuspendedPrimaryOutdated, Protocol, Quorum,
    ReadBalancing, RrConflict, Srm, UsageCount,
};
use super::field::OptionField;
use super::set::OptionSet;
use super::table;
use super::value::Value;

/// Declares a typed option struct from `field: Type = "option-name"` lines.
macro_rules! option_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$field_meta:meta])* $field:ident: $type:ty = $option:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $type,)+
        }

        impl $name {
            /// The drbd.conf names of the options this struct holds, in field order.
            pub const OPTION_NAMES: &'static [&'static str] = &[$($option),+];

            /// The effective values of `set` (table defaults for what it does not set).
            pub(crate) fn from_set(set: &OptionSet) -> Self {
                Self { $($field: set.field::<$type>($option),)+ }
            }

            /// A copy with `overrides` (`(option name, value)`, as on a command line) applied,
            /// each checked as in a file; only options named in `allowed` may change (the
            /// error lists them).
            pub fn with_overrides(
                &self,
                allowed: &[&str],
                overrides: &[(String, String)],
            ) -> Result<Self, String> {
                super::overrides::apply(self.values(), allowed, overrides)
                    .map(|set| Self::from_set(&set))
            }

            /// Every option with its value in DRBD's unit (`None` = unset), in field order.
            pub(crate) fn values(&self) -> Vec<(&'static table::OptionSpec, Option<Value>)> {
                let mut values = Vec::new();
                $(
                    if let Some(spec) = table::find($option) {
                        values.push((spec, self.$field.to_value(spec)));
                    }
                )+
                values
            }

            /// For tests: whether every field's type fits its table row.
            #[cfg(test)]
            pub(crate) fn field_kinds_fit() -> Vec<(&'static str, bool)> {
                let fits = |option: &str, kind_fits: fn(&table::Kind) -> bool| {
                    table::find(option).is_some_and(|spec| kind_fits(&spec.kind))
                };
                vec![$(($option, fits($option, <$type as OptionField>::fits)),)+]
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::from_set(&OptionSet::default())
            }
        }
    };
}

option_struct! {
    /// `global { }`: settings that apply to the whole configuration.
    pub struct Global {
        /// `usage-count` (tandem never reports usage anywhere).
        usage_count: UsageCount = "usage-count",
        /// `udev-always-use-vnr`.
        udev_always_use_vnr: bool = "udev-always-use-vnr",
        /// `disable-ip-verification`.
        disable_ip_verification: bool = "disable-ip-verification",
        /// `dialog-refresh`.
        dialog_refresh: Duration = "dialog-refresh",
        /// `minor-count`.
        minor_count: u32 = "minor-count",
        /// `cmd-timeout-short`.
        cmd_timeout_short: Duration = "cmd-timeout-short",
        /// `cmd-timeout-medium`.
        cmd_timeout_medium: Duration = "cmd-timeout-medium",
        /// `cmd-timeout-long`.
        cmd_timeout_long: Duration = "cmd-timeout-long",
    }
}

option_struct! {
    /// `options { }`: resource-wide settings.
    pub struct ResourceOptions {
        /// `cpu-mask` (hex CPU mask for DRBD's threads).
        cpu_mask: Option<String> = "cpu-mask",
        /// `on-no-data-accessible`.
        on_no_data_accessible: OnNoDataAccessible = "on-no-data-accessible",
        /// `auto-promote`: become primary on open for writing.
        auto_promote: bool = "auto-promote",
        /// `auto-promote-timeout`.
        auto_promote_timeout: Duration = "auto-promote-timeout",
        /// `peer-ack-window`, in 512-byte sectors.
        peer_ack_window_sectors: u32 = "peer-ack-window",
        /// `peer-ack-delay`.
        peer_ack_delay: Duration = "peer-ack-delay",
        /// `twopc-timeout`: two-phase-commit timeout.
        twopc_timeout: Duration = "twopc-timeout",
        /// `twopc-retry-timeout`.
        twopc_retry_timeout: Duration = "twopc-retry-timeout",
        /// `max-io-depth`: requests in flight per device.
        max_io_depth: u32 = "max-io-depth",
        /// `quorum`.
        quorum: Quorum = "quorum",
        /// `on-no-quorum`.
        on_no_quorum: OnNoQuorum = "on-no-quorum",
        /// `quorum-minimum-redundancy`.
        quorum_minimum_redundancy: Quorum = "quorum-minimum-redundancy",
        /// `on-suspended-primary-outdated`.
        on_suspended_primary_outdated: OnSuspendedPrimaryOutdated = "on-suspended-primary-outdated",
        /// tandem only: `srm`, the Selective Replication Manager's mode.
        srm: Srm = "srm",
        /// tandem only: `srm-interval`, time between the manager's observations.
        srm_interval: Duration = "srm-interval",
        /// tandem only: `handler-timeout`, how long a handler may run before it is killed.
        handler_timeout: Duration = "handler-timeout",
    }
}

option_struct! {
    /// `net { }`: per-connection replication settings.
    pub struct NetOptions {
        /// `protocol`: when a write completes.
        protocol: Protocol = "protocol",
        /// `timeout`: how long to wait for a peer's answer before declaring it dead.
        timeout: Duration = "timeout",
        /// `max-epoch-size`: writes between barriers.
        max_epoch_size: u32 = "max-epoch-size",
        /// `max-buffers`: receive/resync buffer limit in 4 KiB pages.
        max_buffers: u32 = "max-buffers",
        /// `connect-int`: reconnect interval.
        connect_int: Duration = "connect-int",
        /// `ping-int`: keep-alive interval when idle.
        ping_int: Duration = "ping-int",
        /// `ping-timeout`: how long a keep-alive may take.
        ping_timeout: Duration = "ping-timeout",
        /// `sndbuf-size` in bytes; 0 = let the kernel tune it.
        sndbuf_size_bytes: u64 = "sndbuf-size",
        /// `rcvbuf-size` in bytes; 0 = let the kernel tune it.
        rcvbuf_size_bytes: u64 = "rcvbuf-size",
        /// `ko-count`: timeouts of one write before the peer is dropped; 0 = off.
        ko_count: u32 = "ko-count",
        /// `allow-two-primaries`.
        allow_two_primaries: bool = "allow-two-primaries",
        /// `cram-hmac-alg`: one of [`crate::CRAM_HMAC_ALGORITHMS`], or `None` for no peer
        /// authentication.
        cram_hmac_alg: Option<String> = "cram-hmac-alg",
        /// `shared-secret` (at most 64 characters).
        shared_secret: Option<String> = "shared-secret",
        /// `after-sb-0pri`.
        after_sb_0pri: AfterSb0Pri = "after-sb-0pri",
        /// `after-sb-1pri`.
        after_sb_1pri: AfterSb1Pri = "after-sb-1pri",
        /// `after-sb-2pri`.
        after_sb_2pri: AfterSb2Pri = "after-sb-2pri",
        /// `always-asbp`.
        always_asbp: bool = "always-asbp",
        /// `rr-conflict`.
        rr_conflict: RrConflict = "rr-conflict",
        /// `data-integrity-alg`: per-packet digest, or `None`.
        data_integrity_alg: Option<String> = "data-integrity-alg",
        /// `tcp-cork`.
        tcp_cork: bool = "tcp-cork",
        /// `on-congestion`.
        on_congestion: OnCongestion = "on-congestion",
        /// `congestion-fill` in 512-byte sectors; 0 = off.
        congestion_fill_sectors: u64 = "congestion-fill",
        /// `congestion-extents`.
        congestion_extents: u32 = "congestion-extents",
        /// `csums-alg`: checksum-based resync digest, or `None`.
        csums_alg: Option<String> = "csums-alg",
        /// `csums-after-crash-only`.
        csums_after_crash_only: bool = "csums-after-crash-only",
        /// `verify-alg`: online-verify digest, or `None`.
        verify_alg: Option<String> = "verify-alg",
        /// `use-rle`: run-length encode bitmap exchange.
        use_rle: bool = "use-rle",
        /// `socket-check-timeout`; zero = off.
        socket_check_timeout: Duration = "socket-check-timeout",
        /// `fencing`.
        fencing: Fencing = "fencing",
        /// `allow-remote-read`.
        allow_remote_read: bool = "allow-remote-read",
        /// `tls`.
        tls: bool = "tls",
        /// `transport`; `None` = the default (TCP).
        transport: Option<String> = "transport",
        /// `load-balance-paths`.
        load_balance_paths: bool = "load-balance-paths",
        /// tandem only: `srm-max-lag-bytes`, most unreplicated data an async peer may have.
        srm_max_lag_bytes: u64 = "srm-max-lag-bytes",
        /// tandem only: `srm-max-lag-time`, oldest unreplicated data an async peer may have.
        srm_max_lag_time: Duration = "srm-max-lag-time",
        /// tandem only: `srm-latency-high`, network latency that sends a peer async.
        srm_latency_high: Duration = "srm-latency-high",
        /// tandem only: `srm-latency-low`, network latency that brings it back.
        srm_latency_low: Duration = "srm-latency-low",
        /// tandem only: `srm-fill-high`, send-queue fill (percent) that sends a peer async.
        srm_fill_high_percent: u32 = "srm-fill-high",
        /// tandem only: `srm-fill-low`, send-queue fill (percent) that brings it back.
        srm_fill_low_percent: u32 = "srm-fill-low",
        /// tandem only: `srm-min-dwell`, least time between two protocol switches.
        srm_min_dwell: Duration = "srm-min-dwell",
        /// tandem only: `srm-max-buffers-min`, lowest `max-buffers` the manager sets (pages).
        srm_max_buffers_min: u32 = "srm-max-buffers-min",
        /// tandem only: `srm-max-buffers-max`, highest `max-buffers` the manager sets (pages).
        srm_max_buffers_max: u32 = "srm-max-buffers-max",
        /// tandem only: `srm-max-epoch-size-min`, lowest `max-epoch-size` the manager sets.
        srm_max_epoch_size_min: u32 = "srm-max-epoch-size-min",
        /// tandem only: `srm-max-epoch-size-max`, highest `max-epoch-size` the manager sets.
        srm_max_epoch_size_max: u32 = "srm-max-epoch-size-max",
        /// tandem only: `srm-sndbuf-size-min`, smallest `sndbuf-size` the manager sets.
        srm_sndbuf_size_min_bytes: u64 = "srm-sndbuf-size-min",
        /// tandem only: `srm-sndbuf-size-max`, largest `sndbuf-size` the manager sets.
        srm_sndbuf_size_max_bytes: u64 = "srm-sndbuf-size-max",
        /// tandem only: `async-buffer`, memory that absorbs write bursts of an async peer;
        /// 0 = none.
        async_buffer_bytes: u64 = "async-buffer",
        /// tandem only: `async-buffer-compress`.
        async_buffer_compress: AsyncBufferCompress = "async-buffer-compress",
    }
}

option_struct! {
    /// `disk { }` options of a volume's backing device.
    pub struct DiskOptions {
        /// `on-io-error`.
        on_io_error: OnIoError = "on-io-error",
        /// tandem only: `io`, buffered or direct (`O_DIRECT`) backing-device I/O.
        io: DiskIo = "io",
        /// `resync-after` (`resource` or `resource/volume`), or `None`.
        resync_after: Option<String> = "resync-after",
        /// `al-extents`: activity-log size in 4 MiB extents.
        al_extents: u32 = "al-extents",
        /// `al-updates`.
        al_updates: bool = "al-updates",
        /// `disk-barrier`.
        disk_barrier: bool = "disk-barrier",
        /// `disk-flushes`.
        disk_flushes: bool = "disk-flushes",
        /// `disk-drain`.
        disk_drain: bool = "disk-drain",
        /// `md-flushes`.
        md_flushes: bool = "md-flushes",
        /// `disk-timeout`; zero = off.
        disk_timeout: Duration = "disk-timeout",
        /// `read-balancing`.
        read_balancing: ReadBalancing = "read-balancing",
        /// `rs-discard-granularity` in bytes; 0 = off.
        rs_discard_granularity_bytes: u32 = "rs-discard-granularity",
        /// `discard-zeroes-if-aligned`.
        discard_zeroes_if_aligned: bool = "discard-zeroes-if-aligned",
        /// `disable-write-same`.
        disable_write_same: bool = "disable-write-same",
        /// `block-size`: logical block size exposed, in bytes.
        block_size_bytes: u32 = "block-size",
        /// `size` in 512-byte sectors; 0 = the whole backing device.
        size_sectors: u64 = "size",
    }
}

option_struct! {
    /// Peer-device options (written in `disk { }`): resync behaviour towards one peer.
    pub struct PeerDeviceOptions {
        /// `resync-rate`: fixed resync rate, used when `c_plan_ahead` is zero.
        resync_rate_kib_per_s: u32 = "resync-rate",
        /// `c-plan-ahead`; zero selects the fixed `resync-rate`.
        c_plan_ahead: Duration = "c-plan-ahead",
        /// `c-delay-target`.
        c_delay_target: Duration = "c-delay-target",
        /// `c-fill-target` in 512-byte sectors.
        c_fill_target_sectors: u32 = "c-fill-target",
        /// `c-max-rate`; 0 = unlimited.
        c_max_rate_kib_per_s: u32 = "c-max-rate",
        /// `c-min-rate`.
        c_min_rate_kib_per_s: u32 = "c-min-rate",
        /// tandem only: `srm-resync-share`, most of the link (percent) the manager lets a
        /// resync use.
        srm_resync_share_percent: u32 = "srm-resync-share",
        /// `bitmap`: keep a bitmap slot for this peer.
        bitmap: bool = "bitmap",
        /// `resync-without-replication`.
        resync_without_replication: bool = "resync-without-replication",
        /// `peer-tiebreaker`.
        peer_tiebreaker: bool = "peer-tiebreaker",
    }
}

option_struct! {
    /// `startup { }`: settings read when resources are brought up.
    pub struct Startup {
        /// `wfc-timeout`; zero = wait forever.
        wfc_timeout: Duration = "wfc-timeout",
        /// `degr-wfc-timeout`.
        degr_wfc_timeout: Duration = "degr-wfc-timeout",
        /// `outdated-wfc-timeout`.
        outdated_wfc_timeout: Duration = "outdated-wfc-timeout",
        /// `wait-after-sb`.
        wait_after_sb: bool = "wait-after-sb",
        /// `stacked-timeouts`.
        stacked_timeouts: bool = "stacked-timeouts",
        /// `become-primary-on`: host names or `both`.
        become_primary_on: Vec<String> = "become-primary-on",
    }
}
