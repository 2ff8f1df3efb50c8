//! The admin verbs (`up`, `down`, `primary`, `secondary`, `connect`, `disconnect`, `status`,
//! `events`): each sends one request to the node and prints what comes back.
//!
//! Invariant: a reply of the wrong kind is an error, never silently ignored; an `Error`
//! reply always becomes [`CliError::Refused`] (exit status 1).

use std::io::BufRead;
use std::path::Path;

use admin::{Reply, Request, StatusOptions, StatusReport};

use crate::cli::{resource_filter, EventsArgs};
use crate::client::{reply_kind, Session};
use crate::error::CliError;
use crate::terminal::{self, Written};

/// Which layout `tandem status` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusStyle {
    /// drbdsetup's text.
    Text,
    /// tandem's JSON (the admin protocol's report).
    Json,
    /// drbdsetup's `status --json` schema.
    DrbdJson,
}

/// How `tandem status` prints.
#[derive(Debug, Clone, Copy)]
pub struct StatusFormat {
    /// The layout.
    pub style: StatusStyle,
    /// `--verbose`.
    pub verbose: bool,
    /// `--statistics`.
    pub statistics: bool,
}

/// Sends a request that is answered with `Ok` or `Error`, and prints the `Ok` message.
pub fn simple(run_dir: &Path, request: &Request) -> Result<(), CliError> {
    print_simple_reply(request, Session::open(run_dir, request)?.reply()?)
}

/// Prints the `Ok` message of the reply to a request answered with `Ok` or `Error`.
pub fn print_simple_reply(request: &Request, reply: Reply) -> Result<(), CliError> {
    match reply {
        Reply::Ok { message } => {
            if let Some(message) = message {
                terminal::print(&format!("{message}\n"))?;
            }
            Ok(())
        }
        Reply::Error { message } => Err(CliError::Refused(message)),
        other => Err(unexpected(request, &other)),
    }
}

/// Which of the runtime options verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionsKind {
    /// `net-options RES[:PEER]`.
    Net,
    /// `disk-options RES[/VOL]`.
    Disk,
}

/// `tandem net-options` / `disk-options`: sends the `--NAME VALUE` words as pairs and prints
/// what changed.
pub fn runtime_options(
    run_dir: &Path,
    spec: crate::compat::Spec,
    words: &[String],
    kind: OptionsKind,
) -> Result<(), CliError> {
    let options = crate::compat::option_pairs(words).map_err(CliError::Refused)?;
    let resource = spec.resource.unwrap_or_default();
    let request = match kind {
        OptionsKind::Net => Request::NetOptions {
            resource,
            peer: spec.peer,
            options,
        },
        OptionsKind::Disk => Request::DiskOptions {
            resource,
            volume: spec.volume,
            options,
        },
    };
    simple(run_dir, &request)
}

/// `tandem status`: asks for a report and prints it as text or JSON.
pub fn status(
    run_dir: &Path,
    resource: Option<String>,
    format: StatusFormat,
) -> Result<(), CliError> {
    let report = fetch_report(run_dir, resource)?;
    let text = match format.style {
        StatusStyle::Json => admin::format_json(&report),
        StatusStyle::DrbdJson => admin::format_drbd_json(&report),
        StatusStyle::Text => {
            let options = StatusOptions {
                verbose: format.verbose,
                statistics: format.statistics,
                width: terminal::stdout_width(),
            };
            admin::format_status(&report, &options)
        }
    };
    terminal::print(&text)?;
    Ok(())
}

/// The node's status report for `resource` (`None`: every resource).
pub fn fetch_report(run_dir: &Path, resource: Option<String>) -> Result<StatusReport, CliError> {
    let request = Request::Status { resource };
    match Session::open(run_dir, &request)?.reply()? {
        Reply::Status(report) => Ok(report),
        Reply::Error { message } => Err(CliError::Refused(message)),
        other => Err(unexpected(&request, &other)),
    }
}

/// `tandem events`: prints each event line as it arrives until the node closes the
/// connection, the reader of our output goes away, or the user interrupts. With `--now`,
/// stops after the state dump (`exists -`); with `--poll`, prints a new dump for each `n`
/// read from standard input.
pub fn events(run_dir: &Path, args: &EventsArgs) -> Result<(), CliError> {
    let request = Request::Events {
        resource: resource_filter(&args.target),
        statistics: args.statistics,
        full: args.full,
    };
    let print = LinePrinter {
        timestamps: args.timestamps,
    };
    if args.poll {
        return poll_events(run_dir, &request, print);
    }
    let until = if args.now {
        Until::DumpEnd
    } else {
        Until::Closed
    };
    stream_events(run_dir, &request, print, until).map(|_| ())
}

/// How far to follow an events stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// The end of the state dump, the `exists -` line.
    DumpEnd,
    /// The node closing the connection.
    Closed,
}

/// Prints event lines, each with the time it arrived if asked.
#[derive(Debug, Clone, Copy)]
struct LinePrinter {
    timestamps: bool,
}

impl LinePrinter {
    fn print(self, line: &str) -> Result<Written, CliError> {
        if self.timestamps {
            let now = crate::timestamp::format(std::time::SystemTime::now());
            terminal::print(&format!("{now} {line}\n"))
        } else {
            terminal::print(&format!("{line}\n"))
        }
    }
}

/// The line that ends events2's state dump.
const DUMP_END: &str = "exists -";

fn stream_events(
    run_dir: &Path,
    request: &Request,
    print: LinePrinter,
    until: Until,
) -> Result<Written, CliError> {
    let mut session = Session::open(run_dir, request)?;
    while let Some(reply) = session.next_reply()? {
        let line = match reply {
            Reply::Event { line } => line,
            Reply::Error { message } => return Err(CliError::Refused(message)),
            other => return Err(unexpected(request, &other)),
        };
        if print.print(&line)? == Written::ReaderGone {
            return Ok(Written::ReaderGone);
        }
        if until == Until::DumpEnd && line == DUMP_END {
            return Ok(Written::Done);
        }
    }
    match until {
        Until::DumpEnd => Err(CliError::NoReply),
        Until::Closed => Ok(Written::Done),
    }
}

/// `--poll`: a dump now, then one per `n` line on standard input, until its end.
fn poll_events(run_dir: &Path, request: &Request, print: LinePrinter) -> Result<(), CliError> {
    if stream_events(run_dir, request, print, Until::DumpEnd)? == Written::ReaderGone {
        return Ok(());
    }
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(CliError::Stdin)?;
        match line.trim() {
            "" => {}
            "n" => {
                if stream_events(run_dir, request, print, Until::DumpEnd)? == Written::ReaderGone {
                    return Ok(());
                }
            }
            other => return Err(CliError::PollInput(other.chars().take(40).collect())),
        }
    }
    Ok(())
}

fn unexpected(request: &Request, reply: &Reply) -> CliError {
    CliError::UnexpectedReply {
        request: request_kind(request),
        reply: reply_kind(reply),
    }
}

fn request_kind(request: &Request) -> &'static str {
    match request {
        Request::Status { .. } => "status",
        Request::Up { .. } => "up",
        Request::Down { .. } => "down",
        Request::Primary { .. } => "primary",
        Request::Secondary { .. } => "secondary",
        Request::Connect { .. } => "connect",
        Request::NewCurrentUuid { .. } => "new-current-uuid",
        Request::Invalidate { .. } => "invalidate",
        Request::Detach { .. } => "detach",
        Request::Attach { .. } => "attach",
        Request::Verify { .. } => "verify",
        Request::InvalidateRemote { .. } => "invalidate-remote",
        Request::Disconnect { .. } => "disconnect",
        Request::Adjust { .. } => "adjust",
        Request::SrmStatus { .. } => "srm status",
        Request::PauseSync { .. } => "pause-sync",
        Request::ResumeSync { .. } => "resume-sync",
        Request::ResumeIo { .. } => "resume-io",
        Request::Resize { .. } => "resize",
        Request::Events { .. } => "events",
        Request::GetGi { .. } => "get-gi",
        Request::Outdate { .. } => "outdate",
        Request::ForgetPeer { .. } => "forget-peer",
        Request::NetOptions { .. } => "net-options",
        Request::DiskOptions { .. } => "disk-options",
        Request::SuspendIo { .. } => "suspend-io",
    }
}
