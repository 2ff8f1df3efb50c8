//! systemd integration (issue 26 item 3): the units in `contrib/systemd` pass
//! `systemd-analyze verify`, and a node started the way `tandem.service` starts it
//! (`Type=notify`, `WatchdogSec=`, standard error on the journal) tells a real notify socket
//! `READY=1` once its admin socket answers, pings the watchdog, says `STOPPING=1` on
//! SIGTERM, and writes journald's `<PRIORITY>` lines without timestamps.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::cluster::{tandem_bin, Cluster, Spec, NODE_READY_DEADLINE, STOP_DEADLINE};
use crate::tools::run_with_deadline;

/// How long `systemd-analyze verify` may take.
const VERIFY_DEADLINE: Duration = Duration::from_secs(60);
/// How often a receive gives up waiting to look at the deadline.
const RECEIVE_SLICE: Duration = Duration::from_millis(100);
/// The watchdog the test asks for: a ping every 100 ms.
const WATCHDOG_USEC: &str = "200000";

fn contrib_systemd() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/systemd")
}

/// Every unit passes `systemd-analyze verify`, with the binary path pointing at this
/// build's tandem (the package installs it as /usr/sbin/tandem, which verify checks), and
/// says what issue 26 asks of it.
#[test]
fn the_units_pass_systemd_analyze_verify() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!("skipped: systemd-analyze is missing (Debian package systemd)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let table = [
        (
            "tandem.service",
            &[
                "Type=notify",
                "RuntimeDirectory=tandem",
                "ExecReload=/usr/sbin/tandem adjust all",
                "WatchdogSec=",
            ][..],
        ),
        (
            "tandem-promote@.service",
            &[
                "Type=oneshot",
                "ExecStart=/usr/sbin/tandem primary %I",
                "ExecStop=/usr/sbin/tandem secondary %I",
            ][..],
        ),
    ];
    for (unit, lines) in table {
        let text = std::fs::read_to_string(contrib_systemd().join(unit)).expect("read a unit");
        for line in lines {
            assert!(
                text.lines().any(|l| l.starts_with(line)),
                "{unit} lacks '{line}'"
            );
        }
        let local = text.replace("/usr/sbin/tandem", &tandem_bin().display().to_string());
        std::fs::write(dir.path().join(unit), local).expect("write a unit");
    }
    let mut verify = Command::new("systemd-analyze");
    verify
        .arg("verify")
        .arg(dir.path().join("tandem.service"))
        .arg(dir.path().join("tandem-promote@r0.service"))
        .current_dir(dir.path())
        .stdin(Stdio::null());
    let output = run_with_deadline(verify, VERIFY_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {}\n{stderr}",
        output.status
    );
}

/// A node that the test kills if it is still running when the test ends.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Receives datagrams until one starts with `prefix`; fails after `deadline`.
fn receive_until(socket: &UnixDatagram, prefix: &str, deadline: Duration) -> String {
    let start = Instant::now();
    let mut buffer = [0u8; 4096];
    let mut seen = Vec::new();
    while start.elapsed() < deadline {
        match socket.recv(&mut buffer) {
            Ok(length) => {
                let text = String::from_utf8_lossy(&buffer[..length]).into_owned();
                if text.starts_with(prefix) {
                    return text;
                }
                seen.push(text);
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(error) => panic!("recv on the notify socket: {error}"),
        }
    }
    panic!("no '{prefix}' on the notify socket within {deadline:?}; got {seen:?}");
}

#[test]
fn a_node_notifies_readiness_watchdog_and_stopping_and_logs_for_journald() {
    let cluster = Cluster::create(Spec::two_nodes('C'));
    let socket_path = cluster.dir().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(RECEIVE_SLICE))
        .expect("read timeout");
    let log_path = cluster.dir().join("journal-stream.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let metadata = log.metadata().expect("log metadata");
    let mut command = cluster.node_command(0);
    command
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", WATCHDOG_USEC)
        .env(
            "JOURNAL_STREAM",
            format!("{}:{}", metadata.dev(), metadata.ino()),
        )
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log);
    let mut node = Node(command.spawn().expect("spawn the node"));

    let ready = receive_until(&socket, "READY=1", NODE_READY_DEADLINE);
    assert!(ready.contains("STATUS=serving 1 resources"), "{ready}");
    assert!(
        cluster.admin(0, &["status", "--json"]).status.success(),
        "READY=1 came before the admin socket answers"
    );
    receive_until(&socket, "WATCHDOG=1", NODE_READY_DEADLINE);

    let pid = i32::try_from(node.0.id()).expect("a pid");
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    let stopped = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(stopped, 0);
    receive_until(&socket, "STOPPING=1", STOP_DEADLINE);
    let start = Instant::now();
    while node.0.try_wait().expect("poll the node").is_none() {
        assert!(
            start.elapsed() < STOP_DEADLINE,
            "the node did not exit after SIGTERM"
        );
        std::thread::sleep(RECEIVE_SLICE);
    }

    let text = std::fs::read_to_string(&log_path).expect("read the log");
    assert!(
        text.lines()
            .any(|line| line.starts_with("<6>") && line.contains("node is up")),
        "no '<6>... node is up' line:\n{text}"
    );
    // journald stamps entries itself: a line starting with an RFC 3339 date would double it.
    let stamped = |line: &str| {
        line.len() > 10
            && line.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && line.as_bytes()[4] == b'-'
    };
    assert!(
        !text.lines().any(stamped),
        "a timestamped line in the journal format:\n{text}"
    );
}
