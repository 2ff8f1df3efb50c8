//! DRBD's handlers (`handlers { split-brain "cmd"; ... }`): shell commands run on events,
//! with DRBD's environment variables, so existing handler scripts keep working.
//!
//! Invariants: a handler never blocks the engine or an I/O thread (it runs on its own thread);
//! at most [`RUNNING_MAX`] handlers run at once per node (more are skipped with an error in the
//! log, never queued without bound); a handler that outlives its timeout (`handler-timeout`,
//! tandem only, default 120 s) is killed, and its `response helper` line says so (status
//! 128 + 9). A handler whose answer the engine waits for (`fence-peer`) always gets one:
//! its exit status, or -1 when it could not run.
//! Every call and its outcome is also an events2 line (`call helper` / `response helper`,
//! DRBD's words) kept in a node-wide ring of [`EVENT_LINES_MAX`] lines for `tandem events`.
//!
//! Limitation: `DRBD_MY_ADDRESS` is the resource's first listening address.

use std::collections::VecDeque;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Handlers running at once, node-wide.
const RUNNING_MAX: usize = 8;
/// How often a running handler is checked.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// The configuration file (`DRBD_CONF`), set once at start-up.
static CONF_PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Remembers the configuration file for `DRBD_CONF` (the first call wins).
pub(crate) fn set_conf_path(path: &std::path::Path) {
    let _ = CONF_PATH.set(path.to_path_buf());
}

/// The configuration file, once known.
pub(crate) fn conf_path() -> Option<&'static std::path::Path> {
    CONF_PATH.get().map(std::path::PathBuf::as_path)
}

/// Helper event lines kept for `tandem events` (older ones are dropped).
pub(crate) const EVENT_LINES_MAX: usize = 256;

/// `(sequence, resource, line)` of recent helper calls and responses, oldest first.
static EVENTS: Mutex<VecDeque<(u64, String, String)>> = Mutex::new(VecDeque::new());
static NEXT_EVENT: AtomicU64 = AtomicU64::new(1);
/// The newest event's sequence number, for `events` streams to wait on.
static NEWEST_EVENT: std::sync::LazyLock<tokio::sync::watch::Sender<u64>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::Sender::new(0));

/// A receiver that sees every new helper event line (its sequence number).
pub(crate) fn subscribe_events() -> tokio::sync::watch::Receiver<u64> {
    NEWEST_EVENT.subscribe()
}

fn record(resource: &str, line: String) {
    let sequence = NEXT_EVENT.fetch_add(1, Ordering::AcqRel);
    let mut events = EVENTS.lock().unwrap_or_else(PoisonError::into_inner);
    if events.len() == EVENT_LINES_MAX {
        events.pop_front();
    }
    events.push_back((sequence, resource.to_owned(), line));
    drop(events);
    NEWEST_EVENT.send_replace(sequence);
}

/// Helper event lines after `after` (a sequence number; 0 for all kept), with the newest
/// sequence number seen, for the resources `wanted` accepts.
pub(crate) fn events_since(after: u64, wanted: impl Fn(&str) -> bool) -> (Vec<String>, u64) {
    let events = EVENTS.lock().unwrap_or_else(PoisonError::into_inner);
    let newest = events
        .back()
        .map_or(after, |(sequence, _, _)| (*sequence).max(after));
    let lines = events
        .iter()
        .filter(|(sequence, resource, _)| *sequence > after && wanted(resource))
        .map(|(_, _, line)| line.clone())
        .collect();
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
    /// More of DRBD's variables (`DRBD_PEER_ADDRESS`, `DRBD_MY_NODE_ID`, `DRBD_CONF`, ...).
    pub(crate) env: Vec<(String, String)>,
    /// How long the handler may run (`handler-timeout`).
    pub(crate) timeout: Duration,
}

/// Called with a handler's status (see [`supervise`]) once it ended.
pub(crate) type OnExit = Box<dyn FnOnce(i32) + Send>;

/// Runs handler `name` if the resource configures it; returns at once.
pub(crate) fn run(handlers: &config::Handlers, name: &str, event: &HandlerEvent<'_>) {
    let _ = run_then(handlers, name, event, None);
}

/// Like [`run`]; `on_exit` gets the handler's status on the handler's thread. Returns false
/// (and does not call `on_exit`) when the handler is not configured or could not be started:
/// the caller answers for it then, outside any lock `on_exit` may take.
pub(crate) fn run_then(
    handlers: &config::Handlers,
    name: &str,
    event: &HandlerEvent<'_>,
    on_exit: Option<OnExit>,
) -> bool {
    let Some(command) = handlers.get(name) else {
        return false;
    };
    if RUNNING.fetch_add(1, Ordering::AcqRel) >= RUNNING_MAX {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        tracing::error!(
            resource = event.resource,
            handler = name,
            "{RUNNING_MAX} handlers are running already; not running this one"
        );
        record(
            event.resource,
            format!("call helper {}", event_words(event, name)),
        );
        record(
            event.resource,
            format!("response helper {} status:-1", event_words(event, name)),
        );
        return false;
    }
    let process = handler_command(command, name, event);
    let (resource, handler, command, timeout) = (
        event.resource.to_string(),
        name.to_string(),
        command.clone(),
        event.timeout,
    );
    let words = event_words(event, name);
    record(event.resource, format!("call helper {words}"));
    let failed_words = words.clone();
    let spawned = std::thread::Builder::new()
        .name("tandem-handler".into())
        .spawn(move || {
            let status = supervise(
                process,
                &Supervised {
                    resource: &resource,
                    name: &handler,
                    command: &command,
                    timeout,
                },
            );
            record(
                &resource,
                format!("response helper {words} status:{status}"),
            );
            RUNNING.fetch_sub(1, Ordering::AcqRel);
            if let Some(on_exit) = on_exit {
                on_exit(status);
            }
        });
    if let Err(error) = spawned {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        tracing::error!(
            resource = event.resource,
            handler = name,
            "cannot start a thread for the handler: {error}"
        );
        record(
            event.resource,
            format!("response helper {failed_words} status:-1"),
        );
        return false;
    }
    true
}

/// The shell command that runs handler `name` with the environment DRBD gives its handlers.
fn handler_command(command: &str, name: &str, event: &HandlerEvent<'_>) -> Command {
    let mut process = Command::new("/bin/sh");
    // Its own process group, so a timeout kills what the shell started too.
    std::os::unix::process::CommandExt::process_group(&mut process, 0);
    process
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .env("DRBD_RESOURCE", event.resource)
        .env("DRBD_HANDLER", name);
    // Only the node speaks to systemd for the service (sd_notify).
    process
        .env_remove(crate::sd_notify::NOTIFY_SOCKET)
        .env_remove("WATCHDOG_USEC")
        .env_remove("WATCHDOG_PID");
    if let Some(volume) = event.volume {
        process.env("DRBD_VOLUME", volume.to_string());
    }
    if let Some(node_id) = event.peer_node_id {
        process.env("DRBD_PEER_NODE_ID", node_id.to_string());
    }
    if let Some(peer) = event.peer_name {
        process.env("DRBD_PEER", peer);
    }
    process.envs(event.env.iter().map(|(key, value)| (key, value)));
    process
}

/// One handler run, for [`supervise`].
struct Supervised<'a> {
    resource: &'a str,
    name: &'a str,
    command: &'a str,
    timeout: Duration,
}

/// Runs one handler to its end (or its timeout); returns the status events2 reports: the
/// exit code, 128 + the signal that ended it, or -1 when it could not run or be waited for.
fn supervise(mut process: Command, run: &Supervised<'_>) -> i32 {
    let Supervised {
        resource,
        name,
        command,
        timeout,
    } = *run;
    tracing::info!(resource, handler = name, "running handler: {command}");
    let mut child = match process.spawn() {
        Ok(child) => child,
        Err(error) => {
            tracing::error!(
                resource,
                handler = name,
                "cannot run handler '{command}': {error}"
            );
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
            Ok(None) if start.elapsed() > timeout => {
                kill_group(&child);
                let _ = child.kill();
                let status = child.wait().map_or(-1, exit_code);
                tracing::error!(
                    resource,
                    handler = name,
                    "handler killed after {timeout:?} (handler-timeout)"
                );
                return status;
            }
            Ok(None) => std::thread::sleep(POLL_INTERVAL),
            Err(error) => {
                tracing::error!(
                    resource,
                    handler = name,
                    "cannot wait for the handler: {error}"
                );
                return -1;
            }
        }
    }
}

/// Kills the process group the handler leads (its shell and everything the shell started).
fn kill_group(child: &std::process::Child) {
    let Ok(pid) = i32::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) with a negative pid signals that process group; it touches no memory.
    // The group is the child's own (process_group(0)) and the child is not yet reaped, so the
    // id cannot have been reused.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 27: `call helper` / `response helper` lines carry drbdsetup events2's keys in
    /// its order (drbd-semantics.md §4: `name peer-node-id conn-name volume helper`).
    #[test]
    fn helper_event_words_follow_events2() {
        let event = |volume, peer: Option<(u8, &'static str)>| HandlerEvent {
            resource: "r0",
            volume,
            peer_node_id: peer.map(|(id, _)| id),
            peer_name: peer.map(|(_, name)| name),
            env: Vec::new(),
            timeout: Duration::from_secs(1),
        };
        let words = event_words(&event(Some(0), Some((1, "bob"))), "before-resync-target");
        assert_eq!(
            words,
            "name:r0 peer-node-id:1 conn-name:bob volume:0 helper:before-resync-target"
        );
        assert_eq!(
            event_words(&event(None, Some((2, "carol"))), "fence-peer"),
            "name:r0 peer-node-id:2 conn-name:carol helper:fence-peer"
        );
        assert_eq!(
            event_words(&event(None, None), "quorum-lost"),
            "name:r0 helper:quorum-lost"
        );
    }
}
