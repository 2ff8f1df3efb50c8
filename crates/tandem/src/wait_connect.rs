//! `tandem wait-connect [--timeout S] RES[:PEER]`: wait until the resource's connections (or
//! the one to PEER) are Connected; fail at once when one cannot get there by itself
//! (StandAlone: only `tandem connect` leaves it), and after `--timeout` seconds.
//!
//! The judgement is a pure function of one status report ([`assess`]); the loop polls the
//! node's admin socket every [`POLL_INTERVAL`].
//!
//! Invariant: success only when every named connection of the resource is `Connected` in the
//! node's own report; a resource without such a connection is an error, not a success.

use std::path::Path;
use std::time::{Duration, Instant};

use admin::{ConnectionStatus, StatusReport};

use crate::commands;
use crate::compat::Spec;
use crate::error::CliError;

/// How often the node is asked for its status.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// What one status report says about the connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assessment {
    /// Every named connection is Connected.
    Connected,
    /// These peers are on their way (connecting); the text names them and their states.
    Waiting(String),
    /// Cannot get there without the administrator; the text says why.
    Stuck(String),
}

/// Judges the connections `spec` names in `report`.
pub fn assess(report: &StatusReport, spec: &Spec) -> Assessment {
    let name = spec.resource.as_deref().unwrap_or_default();
    let Some(resource) = report
        .resources
        .iter()
        .find(|resource| resource.name == name)
    else {
        return Assessment::Stuck(format!("no resource named '{name}' on this node"));
    };
    let named: Vec<&ConnectionStatus> = resource
        .connections
        .iter()
        .filter(|connection| {
            spec.peer
                .as_ref()
                .is_none_or(|peer| &connection.name == peer)
        })
        .collect();
    if named.is_empty() {
        let what = spec.peer.as_ref().map_or_else(
            || "has no connections".to_string(),
            |peer| format!("has no connection named '{peer}'"),
        );
        return Assessment::Stuck(format!("resource '{name}' {what}"));
    }
    if resource.down {
        return Assessment::Stuck(format!(
            "resource '{name}' is down; run 'tandem up {name}' first"
        ));
    }
    if let Some(standalone) = named
        .iter()
        .find(|connection| connection.connection == "StandAlone")
    {
        return Assessment::Stuck(format!(
            "{name}: the connection to {} is StandAlone; it will not connect until 'tandem \
             connect {name}'",
            standalone.name
        ));
    }
    let waiting: Vec<String> = named
        .iter()
        .filter(|connection| connection.connection != "Connected")
        .map(|connection| format!("{} {}", connection.name, connection.connection))
        .collect();
    if waiting.is_empty() {
        Assessment::Connected
    } else {
        Assessment::Waiting(waiting.join(", "))
    }
}

/// Polls until connected (Ok), stuck or past `timeout` (Err).
pub fn run(run_dir: &Path, spec: &Spec, timeout: Option<Duration>) -> Result<(), CliError> {
    let start = Instant::now();
    loop {
        let report = commands::fetch_report(run_dir, spec.resource.clone())?;
        match assess(&report, spec) {
            Assessment::Connected => return Ok(()),
            Assessment::Stuck(message) => return Err(CliError::Refused(message)),
            Assessment::Waiting(what) if timeout.is_some_and(|limit| start.elapsed() >= limit) => {
                let seconds = start.elapsed().as_secs_f64();
                return Err(CliError::Refused(format!(
                    "not connected after {seconds:.1} s: {what}"
                )));
            }
            Assessment::Waiting(_) => std::thread::sleep(POLL_INTERVAL),
        }
    }
}

#[cfg(test)]
mod tests;
