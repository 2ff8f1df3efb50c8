//! External programs the tests drive (fio, nbdinfo, nbdcopy, qemu-img, qemu-io), run with a
//! deadline, plus a seeded byte generator for test data.
//!
//! Invariants:
//! - No external program can hang a test: every run has a deadline, after which the program
//!   is killed and the test fails with what it printed.
//! - A missing client program fails the test with the Debian package to install; tests never
//!   skip silently.
//! - Test data is generated from a printed seed, so a failing run can be replayed.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a deadline wait polls the process.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A spawned program whose output is collected; killed and reaped if dropped while running.
pub struct Background {
    child: Option<Child>,
    description: String,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
}

impl Background {
    /// Spawns `command` with stdout and stderr captured.
    pub fn spawn(mut command: Command) -> Background {
        let description = format!("{command:?}");
        // Its own process group, so a program that forks (fio's job processes hold our pipes)
        // is killed whole and the pipe readers end.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("cannot spawn {description}: {error}"));
        let stdout = child
            .stdout
            .take()
            .map(|pipe| std::thread::spawn(move || drain(pipe)));
        let stderr = child
            .stderr
            .take()
            .map(|pipe| std::thread::spawn(move || drain(pipe)));
        Background {
            child: Some(child),
            description,
            stdout,
            stderr,
        }
    }

    /// Whether the program is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().expect("cannot poll a child").is_none(),
            None => false,
        }
    }

    /// Waits for the program to exit; kills it and fails the test after `deadline`.
    pub fn wait(mut self, deadline: Duration) -> Output {
        let mut child = self.child.take().expect("waited twice");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("cannot poll a child") {
                break status;
            }
            if start.elapsed() > deadline {
                kill_group(&mut child);
                let (stdout, stderr) = self.collect();
                panic!(
                    "{} did not finish within {deadline:?}\nstdout: {}\nstderr: {}",
                    self.description,
                    String::from_utf8_lossy(&stdout),
                    String::from_utf8_lossy(&stderr)
                );
            }
            std::thread::sleep(POLL_INTERVAL);
        };
        let (stdout, stderr) = self.collect();
        Output {
            status,
            stdout,
            stderr,
        }
    }

    fn collect(&mut self) -> (Vec<u8>, Vec<u8>) {
        let join = |handle: Option<JoinHandle<Vec<u8>>>| {
            handle
                .map(|handle| handle.join().unwrap_or_default())
                .unwrap_or_default()
        };
        (join(self.stdout.take()), join(self.stderr.take()))
    }
}

/// SIGKILL to the child's whole process group, then reap the child.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill has no memory-safety preconditions; a negative pid names the group the
        // child leads (process_group(0) at spawn).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }
}

fn drain(mut pipe: impl Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = pipe.read_to_end(&mut bytes);
    bytes
}

/// Runs `command` to completion with a deadline and returns its output.
pub fn run_with_deadline(command: Command, deadline: Duration) -> Output {
    Background::spawn(command).wait(deadline)
}

/// Runs `command`, which must exit with status 0; returns its output.
pub fn run_ok(command: Command, deadline: Duration) -> Output {
    let description = format!("{command:?}");
    let output = run_with_deadline(command, deadline);
    assert!(
        output.status.success(),
        "{description} failed with {}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Sends a signal to a child process.
pub fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid out of range");
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pid is our own
    // child, not yet reaped, so it cannot name an unrelated process.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}) failed: {}",
        std::io::Error::last_os_error()
    );
}

/// Fails the test unless `program` can be run; names the Debian package that provides it.
pub fn require(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(error) = found {
        panic!(
            "this test needs '{program}' ({error}); install the Debian package '{package}' \
             (CI installs: fio libnbd-bin qemu-utils)"
        );
    }
}

/// Fails the test unless fio is installed and has the nbd engine.
pub fn require_fio() {
    require("fio", "fio");
    let output = run_ok(
        {
            let mut command = Command::new("fio");
            command.arg("--enghelp");
            command
        },
        Duration::from_secs(10),
    );
    let engines = String::from_utf8_lossy(&output.stdout);
    assert!(
        engines.lines().any(|line| line.trim() == "nbd"),
        "this fio has no nbd engine (fio --enghelp lists: {engines}); install Debian's 'fio'"
    );
}

/// A fio job against an NBD URI that writes, then reads back and verifies every block
/// (crc32c, fatal on the first mismatch).
pub fn fio_verify(uri: &str, work_dir: &Path, rw: &str, block: &str, size: &str) -> Command {
    let mut command = Command::new("fio");
    command
        .current_dir(work_dir)
        .arg(format!("--name=t-{rw}-{block}"))
        .arg("--ioengine=nbd")
        .arg(format!("--uri={uri}"))
        .arg(format!("--rw={rw}"))
        .arg(format!("--bs={block}"))
        .arg("--iodepth=16")
        .arg(format!("--size={size}"))
        .arg("--verify=crc32c")
        .arg("--do_verify=1")
        .arg("--verify_fatal=1")
        .stdin(Stdio::null());
    command
}

/// A splitmix64 generator: deterministic test data from a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator; print the seed in the test so a failure can be replayed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `length` random bytes.
    pub fn bytes(&mut self, length: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(length + 8);
        while bytes.len() < length {
            bytes.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        bytes.truncate(length);
        bytes
    }
}

/// `SYSTEST_SEED` if set, else a seed that differs between runs; tests print it.
pub fn fresh_seed() -> u64 {
    if let Ok(text) = std::env::var("SYSTEST_SEED") {
        return text.parse().expect("SYSTEST_SEED is not a u64");
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    // Truncation is fine: any 64 bits of the clock make a seed.
    (nanos as u64) ^ u64::from(std::process::id())
}
