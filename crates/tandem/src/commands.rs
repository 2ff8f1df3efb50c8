//! The admin verbs (`up`, `down`, `primary`, `secondary`, `connect`, `disconnect`, `status`,
//! `events`): each sends one request to the node and prints what comes back.
//!
//! Invariant: a reply of the wrong kind is an error, never silently ignored; an `Error`
//! reply always becomes [`CliError::Refused`] (exit status 1).

use std::path::Path;

use admin::{Reply, Request, StatusOptions};

use crate::client::{reply_kind, Session};
use crate::error::CliError;
use crate::terminal::{self, Written};

/// How `tandem status` prints.
#[derive(Debug, Clone, Copy)]
pub struct StatusFormat {
    /// JSON instead of drbdsetup's text.
    pub json: bool,
    /// `--verbose`.
    pub verbose: bool,
    /// `--statistics`.
    pub statistics: bool,
}

/// Sends a request that is answered with `Ok` or `Error`, and prints the `Ok` message.
pub fn simple(run_dir: &Path, request: &Request) -> Result<(), CliError> {
    match Session::open(run_dir, request)?.reply()? {
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

/// `tandem status`: asks for a report and prints it as text or JSON.
pub fn status(
    run_dir: &Path,
    resource: Option<String>,
    format: StatusFormat,
) -> Result<(), CliError> {
    let request = Request::Status { resource };
    let report = match Session::open(run_dir, &request)?.reply()? {
        Reply::Status(report) => report,
        Reply::Error { message } => return Err(CliError::Refused(message)),
        other => return Err(unexpected(&request, &other)),
    };
    let text = if format.json {
        admin::format_json(&report)
    } else {
        let options = StatusOptions {
            verbose: format.verbose,
            statistics: format.statistics,
            width: terminal::stdout_width(),
        };
        admin::format_status(&report, &options)
    };
    terminal::print(&text)?;
    Ok(())
}

/// `tandem events`: prints each event line as it arrives until the node closes the
/// connection, the reader of our output goes away, or the user interrupts.
pub fn events(run_dir: &Path, resource: Option<String>, statistics: bool) -> Result<(), CliError> {
    let request = Request::Events {
        resource,
        statistics,
    };
    let mut session = Session::open(run_dir, &request)?;
    while let Some(reply) = session.next_reply()? {
        let line = match reply {
            Reply::Event { line } => line,
            Reply::Error { message } => return Err(CliError::Refused(message)),
            other => return Err(unexpected(&request, &other)),
        };
        if terminal::print(&format!("{line}\n"))? == Written::ReaderGone {
            break;
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
        Request::Events { .. } => "events",
    }
}
