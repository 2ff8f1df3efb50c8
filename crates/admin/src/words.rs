//! Value spellings shared by the status and events2 formats, so both print a field alike.
//!
//! Invariant: every value is one word (no spaces), so `key:value` pairs split on spaces.

/// DRBD's spelling of a flag.
pub(crate) fn yes_no(flag: bool) -> &'static str {
    if flag {
        "yes"
    } else {
        "no"
    }
}

/// DRBD's `blocked:` value: tandem only knows whether application (upper) I/O is blocked.
pub(crate) fn blocked(flag: bool) -> &'static str {
    if flag {
        "upper"
    } else {
        "no"
    }
}

/// An `IP:PORT` address as events2 prints it: `ipv4:IP:PORT`, or `ipv6:[IP]:PORT` for an
/// address in brackets.
pub(crate) fn address(address: &str) -> String {
    if address.starts_with('[') {
        format!("ipv6:{address}")
    } else {
        format!("ipv4:{address}")
    }
}

/// DRBD prints the in-flight counters in 512-byte sectors, not KiB.
pub(crate) fn sectors_from_kib(kib: u64) -> u64 {
    kib.saturating_mul(2)
}

/// A resync percentage as DRBD prints it: two decimals.
pub(crate) fn percent(value: f64) -> String {
    format!("{value:.2}")
}

/// Whether a replication state is past `Established` (resync, verify, ahead/behind), the
/// condition under which plain `status` shows `replication:`.
pub(crate) fn replication_is_beyond_established(replication: &str) -> bool {
    !matches!(replication, "Off" | "Established")
}

/// A rate in KiB/s as status prints it: `512KiB/s` below 1 MiB/s, else `98.2MiB/s`.
pub(crate) fn rate(kib_per_s: u64) -> String {
    if kib_per_s < 1024 {
        format!("{kib_per_s}KiB/s")
    } else {
        let mib = kib_per_s as f64 / 1024.0;
        format!("{mib:.1}MiB/s")
    }
}
