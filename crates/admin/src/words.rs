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
