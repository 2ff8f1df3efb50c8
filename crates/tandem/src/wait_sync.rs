//! `tandem wait-sync`: wait until a resource is UpToDate everywhere, with a progress bar, the
//! resync rate and an ETA; fail with a clear message when it cannot get there on its own.
//!
//! The judgement is a pure function of one status report ([`assess`]); the loop polls the
//! node's admin socket. Progress is measured by the out-of-sync amount still to move (the sum
//! over every peer device), against the largest amount seen since the command started.
//!
//! Invariant: the command returns success only when every local disk is UpToDate, every
//! connection is Connected, and every peer device is Established, UpToDate and has nothing
//! out of sync.

use std::path::Path;
use std::time::{Duration, Instant};

use admin::{Reply, Request, ResourceStatus, StatusReport};
use indicatif::{ProgressBar, ProgressStyle};

use crate::client::Session;
use crate::error::CliError;

/// How often the node is asked for its status.
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// Weight of the newest sample in the rate's moving average.
const RATE_SMOOTHING: f64 = 0.3;

/// What one status report says about getting in sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Assessment {
    /// Every disk and peer disk is UpToDate, nothing out of sync.
    InSync,
    /// On its way (resyncing, connecting): this much still out of sync, in KiB.
    Waiting { remaining_kib: u64, what: String },
    /// Cannot get there without the administrator.
    Stuck(String),
}

/// Judges one resource's status.
pub fn assess(resource: &ResourceStatus) -> Assessment {
    let remaining_kib = resource
        .connections
        .iter()
        .flat_map(|c| &c.peer_devices)
        .map(|d| d.out_of_sync_kib)
        .sum();
    if let Some(stuck) = standalone(resource) {
        return stuck;
    }
    let syncing = resource
        .connections
        .iter()
        .flat_map(|c| &c.peer_devices)
        .any(|d| d.replication.starts_with("Sync") || d.replication.starts_with("PausedSync"));
    let verifying = resource
        .connections
        .iter()
        .flat_map(|c| &c.peer_devices)
        .any(|d| d.replication.starts_with("Verify"));
    let any_up_to_date = resource.devices.iter().any(|d| d.disk == "UpToDate")
        || resource
            .connections
            .iter()
            .flat_map(|c| &c.peer_devices)
            .any(|d| d.peer_disk == "UpToDate");
    let all_connected = resource
        .connections
        .iter()
        .all(|c| c.connection == "Connected");
    if !syncing && all_connected && !any_up_to_date {
        return Assessment::Stuck(format!(
            "{}: no node has UpToDate data, so nothing can be a sync source; choose the node \
             whose data is good and run `tandem primary --force {}` there (or `tandem \
             new-current-uuid --clear-bitmap {}` if every disk is empty)",
            resource.name, resource.name, resource.name
        ));
    }
    let local_ok = resource.devices.iter().all(|d| d.disk == "UpToDate");
    let peers_ok = resource
        .connections
        .iter()
        .flat_map(|c| &c.peer_devices)
        .all(|d| {
            d.replication == "Established" && d.peer_disk == "UpToDate" && d.out_of_sync_kib == 0
        });
    if local_ok && peers_ok && all_connected {
        return Assessment::InSync;
    }
    if all_connected && !syncing && !verifying && remaining_kib > 0 && local_ok {
        return Assessment::Stuck(format!(
            "{}: {remaining_kib} KiB are out of sync (found by an online verify?) and no resync \
             is running; resync them with `tandem disconnect {}` then `tandem connect {}` (or \
             `tandem invalidate-remote`)",
            resource.name, resource.name, resource.name
        ));
    }
    let what = if syncing {
        "resyncing".to_string()
    } else if verifying {
        "verifying".to_string()
    } else if !all_connected {
        format!(
            "waiting for {} to connect",
            not_connected(resource).join(", ")
        )
    } else {
        "waiting for the disks to become UpToDate".to_string()
    };
    Assessment::Waiting {
        remaining_kib,
        what,
    }
}

/// Stuck if a connection is StandAlone: it does not sync until the administrator connects it.
fn standalone(resource: &ResourceStatus) -> Option<Assessment> {
    let connection = resource
        .connections
        .iter()
        .find(|c| c.connection == "StandAlone")?;
    let why = connection
        .last_error
        .as_deref()
        .map_or_else(String::new, |e| format!(" ({e})"));
    Some(Assessment::Stuck(format!(
        "{}: the connection to {} is StandAlone{why}; it will not sync until `tandem connect` \
         (with --discard-my-data on the node whose changes are to be dropped, after a split brain)",
        resource.name, connection.name
    )))
}

/// The peers not Connected.
fn not_connected(resource: &ResourceStatus) -> Vec<&str> {
    resource
        .connections
        .iter()
        .filter(|c| c.connection != "Connected")
        .map(|c| c.name.as_str())
        .collect()
}

/// Progress, rate and ETA from successive remaining amounts.
#[derive(Debug, Default)]
struct Meter {
    largest_kib: u64,
    last: Option<(Instant, u64)>,
    rate_kib_per_s: Option<f64>,
}

impl Meter {
    fn sample(&mut self, now: Instant, remaining_kib: u64) {
        self.largest_kib = self.largest_kib.max(remaining_kib);
        if let Some((then, before)) = self.last {
            let seconds = now.duration_since(then).as_secs_f64();
            if seconds > 0.0 && before >= remaining_kib {
                let rate = (before - remaining_kib) as f64 / seconds;
                self.rate_kib_per_s = Some(
                    self.rate_kib_per_s
                        .map_or(rate, |r| r + RATE_SMOOTHING * (rate - r)),
                );
            }
        }
        self.last = Some((now, remaining_kib));
    }

    fn message(&self, remaining_kib: u64, what: &str) -> String {
        let rate = self.rate_kib_per_s.filter(|r| *r > 0.0);
        let eta = rate.map_or_else(
            || "--".to_string(),
            |r| format!("{:.0}s", remaining_kib as f64 / r),
        );
        let rate = rate.map_or_else(|| "--".to_string(), |r| format!("{:.1} MiB/s", r / 1024.0));
        format!(
            "{what}: {} MiB left, {rate}, ETA {eta}",
            remaining_kib / 1024
        )
    }
}

/// `tandem wait-sync`: polls until in sync (Ok), stuck or past `timeout` (Err).
pub fn run(
    run_dir: &Path,
    resource: Option<String>,
    timeout: Option<Duration>,
) -> Result<(), CliError> {
    let start = Instant::now();
    let bar = ProgressBar::new(10_000);
    if let Ok(style) = ProgressStyle::with_template("[{bar:40}] {percent:>3}% {msg}") {
        bar.set_style(style.progress_chars("=> "));
    }
    let mut meter = Meter::default();
    loop {
        let report = status(run_dir, resource.clone())?;
        if report.resources.is_empty() {
            return Err(CliError::Refused("no resources to wait for".into()));
        }
        let assessments: Vec<Assessment> = report.resources.iter().map(assess).collect();
        if let Some(Assessment::Stuck(message)) = assessments
            .iter()
            .find(|a| matches!(a, Assessment::Stuck(_)))
        {
            bar.abandon();
            return Err(CliError::Refused(message.clone()));
        }
        let waiting: Vec<(u64, &str)> = assessments
            .iter()
            .filter_map(|a| match a {
                Assessment::Waiting {
                    remaining_kib,
                    what,
                } => Some((*remaining_kib, what.as_str())),
                _ => None,
            })
            .collect();
        if waiting.is_empty() {
            bar.set_position(10_000);
            bar.finish_with_message("UpToDate everywhere");
            return Ok(());
        }
        let remaining_kib: u64 = waiting.iter().map(|(kib, _)| kib).sum();
        meter.sample(Instant::now(), remaining_kib);
        let done = meter.largest_kib.saturating_sub(remaining_kib);
        bar.set_position(
            done.saturating_mul(10_000)
                .checked_div(meter.largest_kib)
                .unwrap_or(0),
        );
        bar.set_message(meter.message(remaining_kib, waiting[0].1));
        if timeout.is_some_and(|limit| start.elapsed() > limit) {
            bar.abandon();
            return Err(CliError::Refused(format!(
                "not in sync after {:?}: {}",
                start.elapsed(),
                meter.message(remaining_kib, waiting[0].1)
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

fn status(run_dir: &Path, resource: Option<String>) -> Result<StatusReport, CliError> {
    let request = Request::Status { resource };
    match Session::open(run_dir, &request)?.reply()? {
        Reply::Status(report) => Ok(report),
        Reply::Error { message } => Err(CliError::Refused(message)),
        other => Err(CliError::Refused(format!(
            "unexpected reply {:?} to status",
            crate::client::reply_kind(&other)
        ))),
    }
}

#[cfg(test)]
mod tests;
