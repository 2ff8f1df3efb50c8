//! DRBD's handlers (`handlers { split-brain "cmd"; ... }`): shell commands run on events,
//! with DRBD's environment variables, so existing handler scripts keep working.
//!
//! Invariants: a handler never blocks the engine or an I/O thread (it runs on its own thread);
//! at most [`RUNNING_MAX`] handlers run at once per node (more are skipped with an error in the
//! log, never queued without bound); a handler that outlives [`HANDLER_TIMEOUT`] is killed.
//! Every call and its outcome is also an events2 line (`call helper` / `response helper`,
//! DRBD's words) kept in a node-wide ring of [`EVENT_LINES_MAX`] lines for `tandem events`.

use std::collections::VecDeque;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Handlers running at once, node-wide.
const RUNNING_MAX: usize = 8;
/// How long a handler may run before it is killed.
const HANDLER_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a running handler is checked.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Helper event lines kept for `tandem events` (older ones are dropped).
pub(crate) const EVENT_LINES_MAX: usize = 256;

/// `(sequence, resource, line)` of recent helper calls and responses, oldest first.
static EVENTS: Mutex<VecDeque<(u64, String, String)>> = Mutex::new(VecDeque::new());
static NEXT_EVENT: AtomicU64 = AtomicU64::new(1);

fn record(resource: &str, line: String) {
    let sequence = NEXT_EVENT.fetch_add(1, Ordering::AcqRel);
    let mut events = EVENTS.lock().unwrap_or_else(PoisonError::into_inner);
    if events.len() == EVENT_LINES_MAX {
        events.pop_front();
    }
    events.push_back((sequence, resource.to_owned(), line));
}

/// Helper event lines after `after` (a sequence number; 0 for all kept), with the newest
/// sequence number seen, for the resources `wanted` accepts.
pub(crate) fn events_since(after: u64, wanted: impl Fn(&str) -> bool) -> (Vec<String>, u64) {
    let events = EVENTS.lock().unwrap_or_else(PoisonError::into_inner);
    let newest = events.back().map_or(after, |(sequence, _, _)| (*sequence).max(after));
    let lines = events.iter().filter(|(sequence, resource, _)| *sequence > after && wanted(resource)).map(|(_, _, line)| line.clone()).collect();
    (lines, newest)
}

/// The newest helper event's sequence number (0: none yet).
pub(crate) fn latest_event() -> u64 {
    NEXT_EVENT.load(Ordering::Acquire).saturating_sub(1)
}

/// `name:R [peer-node-id:N conn-name:P] [volume:V] helper:H`, the shared part of both lines.
fn event_words(event: &HandlerEvent<'_>, handler: &str) -> String {
    let mut words = format!("name:{}", event.resource);
    if let (Some(node_id), Some(peer)) = (event.peer_node_id, event.peer_name) {
        words.push_str(&format!(" peer-node-id:{node_id} conn-name:{peer}"));
    }
    if let Some(volume) = event.volume {
        words.push_str(&format!(" volume:{volume}"));
    }
    words.push_str(&format!(" helper:{handler}"));
    words
}

/// What a handler is told about its event.
#[derive(Debug, Clone)]
pub(crate) struct HandlerEvent<'a> {
    pub(crate) resource: &'a str,
    pub(crate) volume: Option<u16>,
    pub(crate) peer_node_id: Option<u8>,
    pub(crate) peer_name: Option<&'a str>,
}

/// Runs handler `name` if the resource configures it; returns at once.
pub(crate) fn run(handlers: &config::Handlers, name: &str, event: &HandlerEvent<'_>) {
    let Some(command) = handlers.get(name) else { return };
    if RUNNING.fetch_add(1, Ordering::AcqRel) >= RUNNING_MAX {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        tracing::error!(resource = event.resource, handler = name, "{RUNNING_MAX} handlers are running already; not running this one");
        return;
    }
    let mut process = Command::new("/bin/sh");
    process.arg("-c").arg(command).stdin(Stdio::null()).env("DRBD_RESOURCE", event.resource).env("DRBD_HANDLER", name);
    if let Some(volume) = event.volume {
        process.env("DRBD_VOLUME", volume.to_string());
    }
    if let Some(node_id) = event.peer_node_id {
        process.env("DRBD_PEER_NODE_ID", node_id.to_string());
    }
    if let Some(peer) = event.peer_name {
        process.env("DRBD_PEER", peer);
    }
    let (resource, handler, command) = (event.resource.to_string(), name.to_string(), command.clone());
    let words = event_words(event, name);
    record(event.resource, format!("call helper {words}"));
    let spawned = std::thread::Builder::new().name("tandem-handler".into()).spawn(move || {
        let status = supervise(process, &resource, &handler, &command);
        record(&resource, format!("response helper {words} status:{status}"));
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    });
    if let Err(error) = spawned {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        tracing::error!(resource = event.resource, handler = name, "cannot start a thread for the handler: {error}");
    }
}

/// Runs one handler to its end (or its timeout); returns the status events2 reports: the
/// exit code, 128 + the signal that ended it, or -1 when it could not run or be waited for.
fn supervise(mut process: Command, resource: &str, name: &str, command: &str) -> i32 {
    tracing::info!(resource, handler = name, "running handler: {command}");
    let mut child = match process.spawn() {
        Ok(child) => child,
        Err(error) => {
            tracing::error!(resource, handler = name, "cannot run handler '{command}': {error}");
            return -1;
        }
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                if status.success() {
                    tracing::info!(resource, handler = name, "handler finished");
                } else {
                    tracing::warn!(resource, handler = name, "handler exited with {status}");
                }
                return exit_code(status);
            }
            Ok(None) if start.elapsed() > HANDLER_TIMEOUT => {
                let _ = child.kill();
                let status = child.wait().map_or(-1, exit_code);
                tracing::error!(resource, handler = name, "handler killed after {HANDLER_TIMEOUT:?}");
                return status;
            }
            Ok(None) => std::thread::sleep(POLL_INTERVAL),
            Err(error) => {
                tracing::error!(resource, handler = name, "cannot wait for the handler: {error}");
                return -1;
            }
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|signal| 128 + signal)).unwrap_or(-1)
}
