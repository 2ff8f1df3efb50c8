//! `tandem status`: the layout of `drbdsetup status` (drbd-semantics.md §4), and JSON.
//!
//! The text is a tree: the resource line at column 0, local volumes and connections indented
//! by 2, peer volumes by 4. A line longer than [`StatusOptions::width`] wraps between
//! `key:value` words; its continuation lines are indented by 4 more (6 for a volume or
//! connection, 8 for a peer volume). Every resource block ends with a blank line.
//!
//! What is shown, following drbdsetup:
//! - `volume:N` only with `--verbose` or when the resource does not have exactly one volume,
//!   numbered 0.
//! - Local disk: `disk:`, then `quorum:no` only without quorum, then `open:` (current drbd-utils
//!   always prints `open:` when it is known, and tandem always knows it).
//! - A connection shows `connection:` only when not `Connected`, `role:` only when
//!   `Connected`, `congested:yes ap-in-flight:N rs-in-flight:N` only when congested (in-flight
//!   counters in 512-byte sectors, as DRBD prints them). Its peer volumes are listed only
//!   when `Connected` (or with `--verbose`/`--statistics`).
//! - A peer volume shows `replication:` only beyond `Established`, `done:` and tandem's
//!   `rate:` (KiB/s or MiB/s over the last few seconds) while a resync or verify runs,
//!   and `out-of-sync:` (and tandem's `verify-found:` / `verify-skipped:`, what the last online
//!   verify found different or could not judge) only with `--statistics`, and then only when
//!   non-zero (`--verbose`
//!   prints it always).
//! - `--verbose` adds `node-id:`, `suspended:`, `minor:`, `backing_dev:`, `quorum:yes`,
//!   `blocked:no`, `resync-suspended:no` and connection counters; `--statistics` adds the I/O
//!   counters on their own (wrapped) lines.
//!
//! Fields DRBD prints that tandem's report does not carry are left out rather than invented:
//! `force-io-failures:`, `client:`, `tls:`, `al-suspended:`, and the `-vv` resync rates.
//! `suspended:` prints DRBD's reasons (`fencing`, `quorum`; `yes` when the report gives
//! none); `resync-suspended:` prints DRBD's reasons (`user`, `peer`, `dependency`).

use crate::report::{
    ConnectionStatus, DeviceStatus, PeerDeviceStatus, ResourceStatus, StatusReport,
};
use crate::words;

/// How to print a status report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusOptions {
    /// Print every field (`--verbose`).
    pub verbose: bool,
    /// Print the I/O counters (`--statistics`).
    pub statistics: bool,
    /// Wrap lines at this many columns; 0 means never wrap.
    pub width: usize,
}

/// Indent of a local volume or connection line.
const CHILD_INDENT: usize = 2;
/// Indent of a peer volume line.
const PEER_DEVICE_INDENT: usize = 4;
/// Extra indent of a continuation line relative to its first line.
const CONTINUATION_INDENT: usize = 4;

/// The text for a report without resources.
const NO_RESOURCES: &str = "# No currently configured tandem resources found.\n";

/// Prints `report` in the layout of `drbdsetup status` (see the module documentation).
pub fn format_status(report: &StatusReport, options: &StatusOptions) -> String {
    if report.resources.is_empty() {
        return NO_RESOURCES.to_string();
    }
    let mut out = Wrapped::new(options.width);
    for resource in sorted(&report.resources, |resource| resource.name.clone()) {
        write_resource(&mut out, resource, options);
    }
    out.text
}

/// Prints `report` as pretty JSON, with the field names of [`StatusReport`], ending in `\n`.
pub fn format_json(report: &StatusReport) -> String {
    crate::protocol::to_json_pretty(report)
}

/// What the parts of one resource block need to know.
struct Scope<'a> {
    options: &'a StatusOptions,
    /// Whether volume lines start with `volume:N`.
    show_volume: bool,
}

fn write_resource(out: &mut Wrapped, resource: &ResourceStatus, options: &StatusOptions) {
    let single_volume_zero = matches!(resource.devices.as_slice(), [device] if device.volume == 0);
    let scope = Scope {
        options,
        show_volume: options.verbose || !single_volume_zero,
    };
    write_resource_line(out, resource, options);
    for device in sorted(&resource.devices, |device| device.volume) {
        write_device(out, device, &scope);
    }
    for connection in sorted(&resource.connections, |connection| connection.name.clone()) {
        write_connection(out, connection, &scope);
    }
    out.blank_line();
}

fn write_resource_line(out: &mut Wrapped, resource: &ResourceStatus, options: &StatusOptions) {
    let indent = CONTINUATION_INDENT;
    out.word(0, &resource.name);
    if options.verbose {
        out.word(indent, &format!(" node-id:{}", resource.node_id));
    }
    out.word(indent, &format!(" role:{}", resource.role));
    if options.verbose || resource.suspended {
        out.word(
            indent,
            &format!(" suspended:{}", resource.suspended_words()),
        );
    }
    if options.verbose && options.statistics {
        out.end_line();
        out.word(
            indent,
            &format!(" write-ordering:{}", resource.write_ordering),
        );
    }
    out.end_line();
}

fn write_device(out: &mut Wrapped, device: &DeviceStatus, scope: &Scope<'_>) {
    let verbose = scope.options.verbose;
    let indent = CHILD_INDENT + CONTINUATION_INDENT;
    let mut first_indent = CHILD_INDENT;
    if scope.show_volume {
        out.word(first_indent, &format!("volume:{}", device.volume));
        first_indent = indent;
        if let (true, Some(minor)) = (verbose, device.minor) {
            out.word(indent, &format!(" minor:{minor}"));
        }
    }
    out.word(first_indent, &format!(" disk:{}", device.disk));
    if verbose {
        out.word(indent, &format!(" backing_dev:{}", device.backing_dev));
    }
    if verbose || !device.quorum {
        out.word(indent, &format!(" quorum:{}", words::yes_no(device.quorum)));
    }
    out.word(indent, &format!(" open:{}", words::yes_no(device.open)));
    if device.possibly_stale {
        out.word(indent, " possibly-stale:yes");
    }
    if device.unclean_since_restart {
        out.word(indent, " unclean-since-restart:yes");
    }
    if scope.options.statistics {
        out.end_line();
        for word in device_statistics(device, verbose) {
            out.word(indent, &word);
        }
    }
    if verbose || device.blocked {
        out.word(
            indent,
            &format!(" blocked:{}", words::blocked(device.blocked)),
        );
    }
    out.end_line();
}

fn device_statistics(device: &DeviceStatus, verbose: bool) -> Vec<String> {
    let mut words = Vec::new();
    if verbose {
        words.push(format!(" size:{}", device.size_kib));
    }
    words.push(format!(" read:{}", device.read_kib));
    words.push(format!(" written:{}", device.written_kib));
    if verbose {
        words.push(format!(" al-writes:{}", device.al_writes));
        words.push(format!(" bm-writes:{}", device.bm_writes));
        words.push(format!(" upper-pending:{}", device.upper_pending));
        words.push(format!(" lower-pending:{}", device.lower_pending));
    }
    words
}

fn write_connection(out: &mut Wrapped, connection: &ConnectionStatus, scope: &Scope<'_>) {
    let verbose = scope.options.verbose;
    let connected = connection.connection == "Connected";
    let indent = CHILD_INDENT + CONTINUATION_INDENT;
    out.word(CHILD_INDENT, &connection.name);
    if verbose {
        out.word(indent, &format!(" node-id:{}", connection.peer_node_id));
    }
    if verbose || !connected {
        out.word(indent, &format!(" connection:{}", connection.connection));
    }
    if verbose || connected {
        out.word(indent, &format!(" role:{}", connection.role));
    }
    if verbose || connection.congested {
        let ap_in_flight = words::sectors_from_kib(connection.ap_in_flight_kib);
        let rs_in_flight = words::sectors_from_kib(connection.rs_in_flight_kib);
        out.word(
            indent,
            &format!(" congested:{}", words::yes_no(connection.congested)),
        );
        out.word(indent, &format!(" ap-in-flight:{ap_in_flight}"));
        out.word(indent, &format!(" rs-in-flight:{rs_in_flight}"));
    }
    out.end_line();
    if verbose || scope.options.statistics || connected {
        for peer_device in sorted(&connection.peer_devices, |peer_device| peer_device.volume) {
            write_peer_device(out, peer_device, scope);
        }
    }
}

fn write_peer_device(out: &mut Wrapped, peer_device: &PeerDeviceStatus, scope: &Scope<'_>) {
    let options = scope.options;
    let indent = PEER_DEVICE_INDENT + CONTINUATION_INDENT;
    let mut first_indent = PEER_DEVICE_INDENT;
    if scope.show_volume {
        out.word(first_indent, &format!("volume:{}", peer_device.volume));
        first_indent = indent;
    }
    if options.verbose || words::replication_is_beyond_established(&peer_device.replication) {
        out.word(
            first_indent,
            &format!(" replication:{}", peer_device.replication),
        );
        first_indent = indent;
    }
    let peer_disk_known = peer_device.replication != "Off" || peer_device.peer_disk != "DUnknown";
    if options.verbose || options.statistics || peer_disk_known {
        out.word(
            first_indent,
            &format!(" peer-disk:{}", peer_device.peer_disk),
        );
        if let Some(done) = peer_device.done_percent {
            out.word(indent, &format!(" done:{}", words::percent(done)));
        }
        if let Some(rate) = peer_device.rate_kib_per_s {
            out.word(indent, &format!(" rate:{}", words::rate(rate)));
        }
        if options.verbose || peer_device.resync_suspended != "no" {
            let suspended = &peer_device.resync_suspended;
            out.word(indent, &format!(" resync-suspended:{suspended}"));
        }
        if options.statistics {
            out.end_line();
            for word in peer_device_statistics(peer_device, options.verbose) {
                out.word(indent, &word);
            }
        }
    }
    out.end_line();
}

fn peer_device_statistics(peer_device: &PeerDeviceStatus, verbose: bool) -> Vec<String> {
    let mut words = vec![
        format!(" received:{}", peer_device.received_kib),
        format!(" sent:{}", peer_device.sent_kib),
    ];
    if verbose || peer_device.out_of_sync_kib != 0 {
        words.push(format!(" out-of-sync:{}", peer_device.out_of_sync_kib));
    }
    if verbose || peer_device.verify_found_kib != 0 {
        words.push(format!(" verify-found:{}", peer_device.verify_found_kib));
    }
    if verbose || peer_device.verify_skipped_kib != 0 {
        words.push(format!(
            " verify-skipped:{}",
            peer_device.verify_skipped_kib
        ));
    }
    if verbose {
        words.push(format!(" pending:{}", peer_device.pending));
        words.push(format!(" unacked:{}", peer_device.unacked));
    }
    words
}

/// `items` ordered by `key`, stably, so the output does not depend on the daemon's order.
pub(crate) fn sorted<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> Vec<&T> {
    let mut refs: Vec<&T> = items.iter().collect();
    refs.sort_by_key(|item| key(item));
    refs
}

/// Text that wraps between words at a column limit, like drbd-utils' `wrap_printf`.
///
/// A word is `key:value`, usually with one leading space that separates it from the word
/// before. At the start of a line the leading space is dropped and the word's indent is
/// written instead. A word that would end beyond `width` starts a new line, unless it is the
/// first word of its line (a single over-long word is printed whole).
struct Wrapped {
    text: String,
    width: usize,
    /// Characters on the current line; 0 at the start of a line.
    column: usize,
}

impl Wrapped {
    fn new(width: usize) -> Self {
        let width = if width == 0 { usize::MAX } else { width };
        Self {
            text: String::new(),
            width,
            column: 0,
        }
    }

    fn word(&mut self, indent: usize, word: &str) {
        let length = word.chars().count();
        if self.column > 0 && self.column.saturating_add(length) > self.width {
            self.end_line();
        }
        if self.column == 0 {
            let word = word.trim_start_matches(' ');
            self.text.extend(std::iter::repeat_n(' ', indent));
            self.text.push_str(word);
            self.column = indent + word.chars().count();
        } else {
            self.text.push_str(word);
            self.column += length;
        }
        assert!(self.column > 0 || word.trim().is_empty());
    }

    /// Ends the current line, if anything is on it.
    fn end_line(&mut self) {
        if self.column > 0 {
            self.text.push('\n');
            self.column = 0;
        }
    }

    /// Ends the current line and adds an empty one.
    fn blank_line(&mut self) {
        self.end_line();
        self.text.push('\n');
    }
}

#[cfg(test)]
mod tests;
