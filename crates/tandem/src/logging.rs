//! The node's log: standard error, filtered by `RUST_LOG` (default `info`). Under systemd
//! with standard error connected to the journal (`JOURNAL_STREAM` names that stream), each
//! line starts with its syslog priority (`<3>` error, `<4>` warning, `<6>` info, `<7>`
//! debug and trace), which journald reads as the entry's level, and carries no timestamp
//! (journald stamps every entry itself), as sd-daemon(3) describes.
//!
//! Invariant: the journal format is chosen only when standard error really is the stream
//! `JOURNAL_STREAM` names (same device and inode), so a child that inherited the variable
//! but writes elsewhere keeps the ordinary format.

use std::fmt;
use std::os::unix::fs::MetadataExt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the node's log subscriber.
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // try_init fails only when a subscriber is already installed; then that one is used.
    let _ = if stderr_is_journal() {
        builder
            .with_ansi(false)
            .event_format(JournalFormat)
            .try_init()
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init()
    };
}

/// Whether standard error is the journal stream systemd connected (`JOURNAL_STREAM=DEV:INODE`).
fn stderr_is_journal() -> bool {
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(metadata) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    stream_matches(&stream, metadata.dev(), metadata.ino())
}

fn stream_matches(stream: &str, device: u64, inode: u64) -> bool {
    let Some((stream_device, stream_inode)) = stream.split_once(':') else {
        return false;
    };
    stream_device.parse() == Ok(device) && stream_inode.parse() == Ok(inode)
}

/// The syslog priority journald reads from a `<N>` line prefix.
fn priority(level: Level) -> u8 {
    match level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// One line per event: `<PRIORITY>TARGET: MESSAGE FIELDS`, no timestamp, no level word.
struct JournalFormat;

impl<S, N> FormatEvent<S, N> for JournalFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        write!(
            writer,
            "<{}>{}: ",
            priority(*metadata.level()),
            metadata.target()
        )?;
        context
            .field_format()
            .format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_and_priorities() {
        assert!(stream_matches("64769:123456", 64769, 123_456));
        assert!(!stream_matches("64769:123456", 64769, 1));
        assert!(!stream_matches("garbage", 64769, 123_456));
        assert!(!stream_matches("", 0, 0));
        let table = [
            (Level::ERROR, 3),
            (Level::WARN, 4),
            (Level::INFO, 6),
            (Level::DEBUG, 7),
            (Level::TRACE, 7),
        ];
        for (level, expected) in table {
            assert_eq!(priority(level), expected, "{level}");
        }
    }
}
