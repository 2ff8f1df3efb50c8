//! DRBD's handlers (`handlers { split-brain "cmd"; ... }`): shell commands run on events,
//! with DRBD's environment variables, so existing handler scripts keep working.
//!
//! Invariants: a handler never blocks the engine or an I/O thread (it runs on its own thread);
//! at most [`RUNNING_MAX`] handlers run at once per node (more are skipped with an error in the
//! log, never queued without bound); a handler that outlives [`HANDLER_TIMEOUT`] is killed.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Handlers running at once, node-wide.
const RUNNING_MAX: usize = 8;
/// How long a handler may run before it is killed.
const HANDLER_TIMEOUT: Duration = Duration::from_secs(120);
/// How often a running handler is checked.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

static RUNNING: AtomicUsize = AtomicUsize::new(0);

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
    let spawned = std::thread::Builder::new().name("tandem-handler".into()).spawn(move || {
        supervise(process, &resource, &handler, &command);
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    });
    if let Err(error) = spawned {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
        tracing::error!(resource = event.resource, handler = name, "cannot start a thread for the handler: {error}");
    }
}

fn supervise(mut process: Command, resource: &str, name: &str, command: &str) {
    tracing::info!(resource, handler = name, "running handler: {command}");
    let mut child = match process.spawn() {
        Ok(child) => child,
        Err(error) => {
            tracing::error!(resource, handler = name, "cannot run handler '{command}': {error}");
            return;
        }
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => {
                tracing::info!(resource, handler = name, "handler finished");
                return;
            }
            Ok(Some(status)) => {
                tracing::warn!(resource, handler = name, "handler exited with {status}");
                return;
            }
            Ok(None) if start.elapsed() > HANDLER_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                tracing::error!(resource, handler = name, "handler killed after {HANDLER_TIMEOUT:?}");
                return;
            }
            Ok(None) => std::thread::sleep(POLL_INTERVAL),
            Err(error) => {
                tracing::error!(resource, handler = name, "cannot wait for the handler: {error}");
                return;
            }
        }
    }
}
