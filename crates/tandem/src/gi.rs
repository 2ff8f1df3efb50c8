//! `tandem get-gi` and `tandem show-gi`: the generation identifiers of a resource's volumes,
//! per peer, in drbdsetup's layouts (see `admin::format_get_gi`). From the running node when
//! one answers on the admin socket, else read from the metadata on disk, as drbdmeta does.
//!
//! Invariant: the metadata is only read when no node answers (a running node holds it
//! locked anyway); any other failure to ask the node is reported, never papered over.

use std::path::{Path, PathBuf};

use admin::{Generations, Reply, Request};

use crate::client::{reply_kind, Session};
use crate::compat::Spec;
use crate::error::CliError;
use crate::terminal;

/// Where to find the metadata when no node runs.
#[derive(Debug, Clone)]
pub struct OnDisk {
    /// The configuration file.
    pub config: PathBuf,
    /// This node's `on NAME` section (None: the host name).
    pub node: Option<String>,
}

impl OnDisk {
    /// The volumes of `resource` (None: every resource) in the configuration.
    pub fn target(self, resource: Option<String>) -> Result<daemon::MdTarget, CliError> {
        let node = match self.node {
            Some(node) => node,
            None => crate::md::host_name()?,
        };
        Ok(daemon::MdTarget {
            config: self.config,
            node,
            resource,
        })
    }
}

/// Prints the generation identifiers `spec` names: get-gi's line per record, or with
/// `explained` show-gi's blocks.
pub fn run(run_dir: &Path, spec: &Spec, on_disk: OnDisk, explained: bool) -> Result<(), CliError> {
    let records = fetch(run_dir, spec, on_disk)?;
    let text = if explained {
        admin::format_show_gi(&records)
    } else {
        admin::format_get_gi(&records)
    };
    terminal::print(&text).map(|_| ())
}

fn fetch(run_dir: &Path, spec: &Spec, on_disk: OnDisk) -> Result<Vec<Generations>, CliError> {
    let Some(resource) = spec.resource.clone() else {
        return Err(CliError::Refused("get-gi needs one resource name".into()));
    };
    let request = Request::GetGi {
        resource: resource.clone(),
        peer: spec.peer.clone(),
        volume: spec.volume,
    };
    let Some(session) = Session::open_if_running(run_dir, &request)? else {
        return read_from_disk(resource, spec, on_disk);
    };
    match session.reply()? {
        Reply::Generations { records } => Ok(records),
        Reply::Error { message } => Err(CliError::Refused(message)),
        other => Err(CliError::UnexpectedReply {
            request: "get-gi",
            reply: reply_kind(&other),
        }),
    }
}

fn read_from_disk(
    resource: String,
    spec: &Spec,
    on_disk: OnDisk,
) -> Result<Vec<Generations>, CliError> {
    let target = on_disk.target(Some(resource))?;
    let filter = daemon::GiFilter {
        peer: spec.peer.clone(),
        volume: spec.volume,
    };
    daemon::read_generations(&target, &filter).map_err(|error| CliError::Refused(error.to_string()))
}
