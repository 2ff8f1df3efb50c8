//! `tandem create-md`, `dump-md` and `wipe-md`: the offline metadata commands, like
//! drbdadm's. They work on the metadata devices directly (no node involved) and are refused
//! while a node holds a volume's metadata. `tandem outdate` asks the running node, and works
//! on the metadata directly when none runs.
//!
//! `wipe-md` destroys metadata: without `--force` it asks on a terminal and refuses when
//! standard input is not one.
//!
//! Invariants: the resource argument is required; `all` means every resource with a section
//! for this node. The node defaults to the host name, as `tandem node` does.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use admin::Request;
use daemon::{CreateOptions, MdTarget, MetadataError};

use crate::client::Session;
use crate::error::CliError;
use crate::terminal::{self, Written};

/// The configuration, node and resource an offline metadata command acts on.
#[derive(Debug, Clone)]
pub struct MdArgs {
    /// The drbd.conf-style configuration file.
    pub config: PathBuf,
    /// This node's `on NAME` section (default: the host name).
    pub node: Option<String>,
    /// A resource name, or `all`.
    pub resource: String,
}

/// `tandem create-md`: format the metadata of this node's volumes; one line per volume.
pub fn create(args: MdArgs, options: CreateOptions) -> Result<(), CliError> {
    let target = target(args)?;
    print_lines(|report| daemon::create_md(&target, options, report))
}

/// `tandem outdate`: the running node marks its data Outdated; with no node running, the
/// metadata on disk is marked so directly.
pub fn outdate(run_dir: &Path, args: MdArgs) -> Result<(), CliError> {
    let request = Request::Outdate {
        resource: Some(args.resource.clone()).filter(|resource| resource != "all"),
    };
    if let Some(session) = Session::open_if_running(run_dir, &request)? {
        return crate::commands::print_simple_reply(&request, session.reply()?);
    }
    let target = target(args)?;
    print_lines(|report| daemon::outdate_md(&target, report))
}

/// `tandem wipe-md`: destroy the metadata of this node's volumes (node stopped).
pub fn wipe(args: MdArgs, force: bool) -> Result<(), CliError> {
    if !force {
        confirm_wipe(&args.resource)?;
    }
    let target = target(args)?;
    print_lines(|report| daemon::wipe_md(&target, report))
}

/// Asks on the terminal; refuses when standard input is not one.
fn confirm_wipe(resource: &str) -> Result<(), CliError> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(CliError::Refused(
            "wipe-md destroys the metadata (generation identifiers and bitmaps) and standard \
             input is not a terminal to confirm it on; pass --force"
                .into(),
        ));
    }
    eprint!(
        "Destroy the tandem metadata of {resource} on this node? Its generation identifiers and \
         bitmaps are lost. Type 'yes' to go on: "
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(CliError::Stdin)?;
    if answer.trim() != "yes" {
        return Err(CliError::Refused(
            "not confirmed; nothing was changed".into(),
        ));
    }
    Ok(())
}

/// Runs an offline metadata command that reports one line per volume, printing each.
fn print_lines(
    command: impl FnOnce(&mut dyn FnMut(&str)) -> Result<(), MetadataError>,
) -> Result<(), CliError> {
    let mut printed = Ok(Written::Done);
    let result = command(&mut |line| {
        if matches!(printed, Ok(Written::Done)) {
            printed = terminal::print(&format!("{line}\n"));
        }
    });
    result.map_err(refused)?;
    printed.map(|_| ())
}

/// `tandem dump-md`: print the metadata of this node's volumes, as text or JSON.
pub fn dump(args: MdArgs, json: bool) -> Result<(), CliError> {
    let target = target(args)?;
    let dumps = daemon::dump_md(&target).map_err(refused)?;
    let text = if json {
        let mut text = serde_json::to_string_pretty(&dumps).map_err(|error| {
            CliError::Refused(format!("cannot encode the dump as JSON: {error}"))
        })?;
        text.push('\n');
        text
    } else {
        dumps
            .iter()
            .map(daemon::VolumeDump::render_text)
            .collect::<Vec<_>>()
            .join("\n")
    };
    terminal::print(&text).map(|_| ())
}

fn target(args: MdArgs) -> Result<MdTarget, CliError> {
    let node = match args.node {
        Some(node) => node,
        None => host_name()?,
    };
    let resource = Some(args.resource).filter(|resource| resource != "all");
    Ok(MdTarget {
        config: args.config,
        node,
        resource,
    })
}

fn refused(error: MetadataError) -> CliError {
    CliError::Refused(error.to_string())
}

/// The host name, the default `on NAME` section.
pub(crate) fn host_name() -> Result<String, CliError> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf, which lives for the call.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(CliError::Refused(
            "cannot read the host name; pass --node NAME".into(),
        ));
    }
    let end = buf.iter().position(|&byte| byte == 0).unwrap_or(buf.len());
    let name = buf.get(..end).unwrap_or_default();
    Ok(String::from_utf8_lossy(name).into_owned())
}
