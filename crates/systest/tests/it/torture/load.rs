//! Background load beside the stamped writes: random 4 KiB writes at queue depth 16 through
//! a second NBD connection to the Primary, in a region of their own ([`REGION_START`] to the
//! end of the export), so they never overwrite a stamp. fio's nbd engine when fio is
//! installed; otherwise the harness's own pipelined writer, which does the same.
//!
//! The load is not checked write by write; it keeps the replication and resync paths busy,
//! and the byte-for-byte comparison of the replicas covers its blocks.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::export::Export;
use crate::tools::{Background, Rng};

/// The load writes from here to the end of the export (the stamped region ends before).
pub const REGION_START: u64 = 32 << 20;
/// Writes in flight at once.
const QUEUE_DEPTH: u64 = 16;
/// fio stops by itself after this long, should the harness never stop it.
const FIO_RUNTIME_MAX: Duration = Duration::from_secs(600);
/// How long the built-in load waits for one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

const _: () = assert!(REGION_START >= super::stamp::REGION_BYTES);

/// Which load generator runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `fio --ioengine=nbd --rw=randwrite --bs=4k --iodepth=16`.
    Fio,
    /// [`Builtin`]: the same pattern from the harness (fio is missing).
    Builtin,
}

impl Kind {
    /// fio when it is installed with its nbd engine, else the built-in writer.
    pub fn probe() -> Kind {
        let output = Command::new("fio")
            .arg("--enghelp")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        match output {
            Ok(output)
                if String::from_utf8_lossy(&output.stdout)
                    .lines()
                    .any(|line| line.trim() == "nbd") =>
            {
                Kind::Fio
            }
            _ => Kind::Builtin,
        }
    }

    /// How the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fio => "fio",
            Kind::Builtin => "builtin",
        }
    }
}

/// A running load; dropping it stops it too (fio's process group is killed).
pub enum Load {
    Fio(Background),
    Builtin(Builtin),
}

impl Load {
    /// Starts `kind` against the export at `socket` (URI `uri` for fio) with a seeded offset
    /// sequence; `export_bytes` is the export's size.
    pub fn start(kind: Kind, socket: &Path, uri: &str, export_bytes: u64, seed: u64) -> Load {
        assert!(
            export_bytes > REGION_START,
            "the export has room for the load's region"
        );
        match kind {
            Kind::Fio => Load::Fio(Background::spawn(fio_command(
                uri,
                export_bytes - REGION_START,
                seed,
            ))),
            Kind::Builtin => Load::Builtin(Builtin::spawn(socket, export_bytes, seed)),
        }
    }

    /// Stops the load; returns how it ended, for the trial's notes.
    pub fn stop(self) -> String {
        match self {
            Load::Fio(mut background) => {
                if background.is_running() {
                    return "fio ran until stopped".to_string();
                }
                let output = background.wait(Duration::from_secs(10));
                let stderr = String::from_utf8_lossy(&output.stderr);
                let last = stderr.lines().last().unwrap_or_default().to_string();
                format!("fio ended by itself ({}): {last}", output.status)
            }
            Load::Builtin(builtin) => builtin.stop(),
        }
    }
}

fn fio_command(uri: &str, size_bytes: u64, seed: u64) -> Command {
    let mut command = Command::new("fio");
    command
        .arg("--name=torture-load")
        // Threads, not forked job processes: a forked job calls setsid() and would escape
        // the process-group kill that stops the load.
        .arg("--thread")
        .arg("--ioengine=nbd")
        .arg(format!("--uri={uri}"))
        .arg("--rw=randwrite")
        .arg("--bs=4k")
        .arg(format!("--iodepth={QUEUE_DEPTH}"))
        .arg(format!("--offset={REGION_START}"))
        .arg(format!("--size={size_bytes}"))
        .arg("--time_based=1")
        .arg(format!("--runtime={}", FIO_RUNTIME_MAX.as_secs()))
        // fio parses its seed as a signed number: keep it below 2^63.
        .arg(format!("--randseed={}", seed >> 1))
        .stdin(Stdio::null());
    command
}

/// The built-in load: one thread keeping [`QUEUE_DEPTH`] writes in flight.
pub struct Builtin {
    handle: JoinHandle<String>,
    stop: Arc<AtomicBool>,
}

impl Builtin {
    fn spawn(socket: &Path, export_bytes: u64, seed: u64) -> Builtin {
        let export = Export::open(socket, REPLY_TIMEOUT);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let blocks = (export_bytes - REGION_START) / 4096;
        let handle = std::thread::spawn(move || pipeline(export, blocks, seed, &thread_stop));
        Builtin { handle, stop }
    }

    fn stop(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("the built-in load panicked")
    }
}

/// Keeps the queue full until stopped or the connection fails; drains what is in flight.
fn pipeline(mut export: Export, blocks: u64, seed: u64, stop: &AtomicBool) -> String {
    let mut rng = Rng::new(seed);
    let (mut in_flight, mut cookie, mut acknowledged) = (0u64, 1u64, 0u64);
    let mut ended = None;
    loop {
        while ended.is_none() && in_flight < QUEUE_DEPTH && !stop.load(Ordering::Relaxed) {
            let offset = REGION_START + rng.next_u64() % blocks * 4096;
            match export.send_write(cookie, offset, &rng.bytes(4096), false) {
                Ok(()) => (in_flight, cookie) = (in_flight + 1, cookie + 1),
                Err(error) => ended = Some(format!("send failed: {error}")),
            }
        }
        if in_flight == 0 {
            break;
        }
        match export.read_reply() {
            Ok(reply) if reply.errno == 0 => acknowledged += 1,
            Ok(reply) => {
                ended = ended.or(Some(format!("a write failed with errno {}", reply.errno)))
            }
            Err(error) => {
                ended = ended.or(Some(format!("reply lost: {error}")));
                break;
            }
        }
        in_flight -= 1;
    }
    export.disconnect();
    format!(
        "builtin load: {acknowledged} writes acknowledged, {}",
        ended.as_deref().unwrap_or("ran until stopped")
    )
}
