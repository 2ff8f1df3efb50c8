//! Integration tests of the `tandem` binary: exit codes, the "no node running" message, and
//! the admin verbs against a fake node (a unix listener in a test thread answering canned
//! reply lines). Every wait polls against a deadline; nothing sleeps a fixed time.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

mod compat;
mod events_options;

use admin::{
    ConnectionStatus, DeviceStatus, PeerDeviceStatus, Reply, Request, ResourceStatus, StatusReport,
};

/// How long any one step may take before the test fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(20);
/// Interval between polls of a child process or a non-blocking accept.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

fn tandem(run_dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
    command
        .env_remove("TANDEM_RUN_DIR")
        .arg("--run-dir")
        .arg(run_dir);
    command
}

/// Runs `command` to completion, failing the test if it takes longer than [`DEADLINE`].
fn run(mut command: Command) -> Output {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn tandem");
    let stdout = drain(child.stdout.take().expect("piped"));
    let stderr = drain(child.stderr.take().expect("piped"));
    let status = wait_with_deadline(&mut child);
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).expect("read pipe");
        bytes
    })
}

fn wait_with_deadline(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > DEADLINE {
            child.kill().expect("kill");
            panic!("tandem did not exit within {DEADLINE:?}");
        }
        thread::sleep(POLL_INTERVAL);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fake node: accepts one connection on `run_dir/admin.sock`, reads the request line,
/// then lets `answer` write replies. Returns the decoded request.
fn fake_node(
    run_dir: &Path,
    answer: impl FnOnce(&mut UnixStream) + Send + 'static,
) -> JoinHandle<Request> {
    let listener = UnixListener::bind(run_dir.join("admin.sock")).expect("bind admin.sock");
    listener.set_nonblocking(true).expect("nonblocking");
    thread::spawn(move || {
        let mut stream = accept_with_deadline(&listener);
        stream.set_nonblocking(false).expect("blocking");
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let mut line = Vec::new();
        BufReader::new(&mut stream)
            .read_until(b'\n', &mut line)
            .expect("request line");
        let request = admin::decode_line(&line).expect("a valid request");
        answer(&mut stream);
        request
    })
}

fn accept_with_deadline(listener: &UnixListener) -> UnixStream {
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => return stream,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(start.elapsed() < DEADLINE, "tandem never connected");
                thread::sleep(POLL_INTERVAL);
            }
            Err(error) => panic!("accept: {error}"),
        }
    }
}

fn send(stream: &mut UnixStream, reply: &Reply) {
    stream
        .write_all(&admin::encode_line(reply))
        .expect("write reply");
}

/// A fake node that answers with exactly one reply.
fn answering(run_dir: &Path, reply: Reply) -> JoinHandle<Request> {
    fake_node(run_dir, move |stream| send(stream, &reply))
}

fn report() -> StatusReport {
    let device = DeviceStatus {
        volume: 0,
        minor: Some(0),
        disk: "UpToDate".to_string(),
        backing_dev: "/dev/vg0/r0".to_string(),
        quorum: true,
        open: false,
        size_kib: 1024,
        read_kib: 0,
        written_kib: 0,
        al_writes: 0,
        bm_writes: 0,
        upper_pending: 0,
        lower_pending: 0,
        blocked: false,
        possibly_stale: false,
        unclean_since_restart: false,
    };
    let peer_device = PeerDeviceStatus {
        peer_client: false,
        volume: 0,
        replication: "SyncSource".to_string(),
        peer_disk: "Inconsistent".to_string(),
        resync_suspended: "no".into(),
        received_kib: 0,
        sent_kib: 512,
        out_of_sync_kib: 512,
        pending: 0,
        unacked: 0,
        done_percent: Some(50.0),
        rate_kib_per_s: None,
        verify_found_kib: 0,
        verify_skipped_kib: 0,
    };
    let connection = ConnectionStatus {
        name: "bob".to_string(),
        peer_node_id: 1,
        connection: "Connected".to_string(),
        role: "Secondary".to_string(),
        congested: false,
        ap_in_flight_kib: 0,
        rs_in_flight_kib: 0,
        protocol: "C".to_string(),
        last_error: None,
        unreplicated_kib: 0,
        peer_possibly_stale: false,
        async_buffer_kib: 0,
        peer_devices: vec![peer_device],
        paths: Vec::new(),
    };
    let resource = ResourceStatus {
        name: "r0".to_string(),
        node_id: 0,
        role: "Primary".to_string(),
        suspended: false,
        suspend_reasons: Vec::new(),
        write_ordering: "flush".to_string(),
        down: false,
        devices: vec![device],
        connections: vec![connection],
    };
    StatusReport {
        resources: vec![resource],
    }
}

#[test]
fn usage_errors_exit_2() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    for args in [
        &[][..],
        &["frobnicate"],
        &["primary", "--bogus"],
        &["status", "r0", "r1"],
        &["node", "--config"],
        &["connect", "--peer"],
    ] {
        let output = run({
            let mut command = tandem(run_dir.path());
            command.args(args);
            command
        });
        assert_eq!(
            output.status.code(),
            Some(2),
            "tandem {args:?}: {}",
            text(&output.stderr)
        );
    }
}

/// `tandem node` without `--config` reads /etc/tandem/tandem.conf (issue 26): where that
/// file does not exist, the error names it.
#[test]
fn node_reads_the_default_configuration() {
    if std::path::Path::new("/etc/tandem/tandem.conf").exists() {
        eprintln!("skipped: /etc/tandem/tandem.conf exists on this machine");
        return;
    }
    let run_dir = tempfile::tempdir().expect("tempdir");
    let output = run({
        let mut command = tandem(run_dir.path());
        command.arg("node");
        command
    });
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("/etc/tandem/tandem.conf"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn version_is_printed() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let mut command = tandem(run_dir.path());
    command.arg("--version");
    let output = run(command);
    assert_eq!(output.status.code(), Some(0));
    // The version, then the commit it was built from (build.rs).
    let printed = text(&output.stdout);
    let prefix = format!("tandem {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(
        printed.starts_with(&prefix) && printed.ends_with(")\n"),
        "{printed}"
    );
    assert!(!printed.contains("commit )"), "{printed}");
}

#[test]
fn no_node_running_is_a_clear_error() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let dir = run_dir.path().display();
    let expected = format!(
        "tandem: no node running at {dir} (admin socket {dir}/admin.sock not found); \
         start one with 'tandem node'\n"
    );
    for verb in ["status", "primary", "events"] {
        let mut command = tandem(run_dir.path());
        command.arg(verb);
        let output = run(command);
        assert_eq!(output.status.code(), Some(1), "{verb}");
        assert_eq!(text(&output.stderr), expected, "{verb}");
        assert!(output.stdout.is_empty(), "{verb}");
    }
}

#[test]
fn a_stale_socket_is_reported_as_no_node() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    drop(UnixListener::bind(run_dir.path().join("admin.sock")).expect("bind"));
    let mut command = tandem(run_dir.path());
    command.arg("status");
    let output = run(command);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("admin.sock refuses connections); start one with"),
        "{stderr}"
    );
}

#[test]
fn the_run_dir_can_come_from_the_environment() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Ok { message: None });
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
    command.env("TANDEM_RUN_DIR", run_dir.path()).arg("up");
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(node.join().expect("node"), Request::Up { resource: None });
}

#[test]
fn status_prints_the_drbdsetup_layout() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Status(report()));
    let mut command = tandem(run_dir.path());
    command.args(["status", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // Not a terminal: wrapped at 80 columns.
    assert_eq!(
        text(&output.stdout),
        "r0 role:Primary
  disk:UpToDate open:no
  bob role:Secondary
    replication:SyncSource peer-disk:Inconsistent done:50.00

"
    );
    let request = node.join().expect("node");
    assert_eq!(
        request,
        Request::Status {
            resource: Some("r0".to_string())
        }
    );
}

#[test]
fn status_json_prints_the_report() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Status(report()));
    let mut command = tandem(run_dir.path());
    command.args(["status", "--json", "all"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let printed: StatusReport = serde_json::from_slice(&output.stdout).expect("JSON report");
    assert_eq!(printed, report());
    assert_eq!(
        node.join().expect("node"),
        Request::Status { resource: None }
    );
}

/// Issue 27: `--drbd-json` prints drbdsetup's schema (the admin crate tests every key).
#[test]
fn status_drbd_json_prints_drbdsetups_schema() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = answering(run_dir.path(), Reply::Status(report()));
    let mut command = tandem(run_dir.path());
    command.args(["status", "--drbd-json", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(printed[0]["name"], "r0");
    assert_eq!(printed[0]["devices"][0]["disk-state"], "UpToDate");
    assert!(
        printed[0]["connections"][0]["peer_devices"].is_array(),
        "{printed}"
    );
    node.join().expect("node");
}

#[test]
fn a_refused_request_prints_the_reason_and_exits_1() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let message = "r0: cannot promote: peer bob is Primary".to_string();
    let node = answering(
        run_dir.path(),
        Reply::Error {
            message: message.clone(),
        },
    );
    let mut command = tandem(run_dir.path());
    command.args(["primary", "--force", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(text(&output.stderr), format!("tandem: {message}\n"));
    assert!(output.stdout.is_empty());
    let request = node.join().expect("node");
    assert_eq!(
        request,
        Request::Primary {
            resource: Some("r0".to_string()),
            force: true
        }
    );
}

#[test]
fn simple_verbs_send_their_request_and_print_the_ok_message() {
    let cases: [(&[&str], Request); 6] = [
        (
            &["secondary", "all"],
            Request::Secondary {
                resource: None,
                force: false,
            },
        ),
        (
            &["secondary", "--force", "r0"],
            Request::Secondary {
                resource: Some("r0".into()),
                force: true,
            },
        ),
        (
            &["connect", "--peer", "bob", "r0"],
            Request::Connect {
                resource: Some("r0".to_string()),
                peer: Some("bob".to_string()),
                discard_my_data: false,
            },
        ),
        (
            &["connect", "--discard-my-data", "r0"],
            Request::Connect {
                resource: Some("r0".to_string()),
                peer: None,
                discard_my_data: true,
            },
        ),
        (
            &["new-current-uuid", "--clear-bitmap"],
            Request::NewCurrentUuid {
                resource: None,
                clear_bitmap: true,
            },
        ),
        (
            &["disconnect"],
            Request::Disconnect {
                resource: None,
                peer: None,
            },
        ),
    ];
    for (args, expected) in cases {
        let run_dir = tempfile::tempdir().expect("tempdir");
        let reply = Reply::Ok {
            message: Some("done".to_string()),
        };
        let node = answering(run_dir.path(), reply);
        let mut command = tandem(run_dir.path());
        command.args(args);
        let output = run(command);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stdout), "done\n");
        assert_eq!(node.join().expect("node"), expected);
    }
}

#[test]
fn a_node_that_hangs_up_without_answering_is_an_error() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = fake_node(run_dir.path(), |_stream| {});
    let mut command = tandem(run_dir.path());
    command.arg("down");
    let output = run(command);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "tandem: the node closed the connection without answering\n"
    );
    node.join().expect("node");
}

#[test]
fn events_stream_each_line_as_it_arrives() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let (first_seen, first_seen_by_node) = mpsc::channel::<()>();
    let node = fake_node(run_dir.path(), move |stream| {
        send(
            stream,
            &Reply::Event {
                line: "exists resource name:r0 role:Primary".to_string(),
            },
        );
        send(
            stream,
            &Reply::Event {
                line: "exists -".to_string(),
            },
        );
        // The next line is sent only once the client has printed the first ones, which
        // proves the client streams instead of waiting for the end.
        first_seen_by_node
            .recv_timeout(DEADLINE)
            .expect("client printed the dump");
        send(
            stream,
            &Reply::Event {
                line: "change resource name:r0 role:Secondary".to_string(),
            },
        );
    });
    let mut child = tandem(run_dir.path())
        .args(["events", "--statistics", "r0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut lines = Vec::new();
    for _ in 0..2 {
        lines.push(read_line(&mut stdout));
    }
    first_seen.send(()).expect("node waits");
    lines.push(read_line(&mut stdout));
    let status = wait_with_deadline(&mut child);
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        lines,
        [
            "exists resource name:r0 role:Primary\n",
            "exists -\n",
            "change resource name:r0 role:Secondary\n"
        ]
    );
    let request = node.join().expect("node");
    assert_eq!(
        request,
        Request::Events {
            resource: Some("r0".to_string()),
            statistics: true,
            full: false,
        }
    );
}

/// One line of the child's output; the fake node's own deadline keeps this from hanging.
fn read_line(reader: &mut impl BufRead) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).expect("read");
    line
}

/// The README's first command: two nodes, a workload, identical replicas, nothing left behind.
#[test]
fn demo_replicates_a_workload_and_cleans_up() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let mut command = tandem(run_dir.path());
    command.arg("demo");
    let output = run(command);
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&output.stderr)
    );
    assert!(stdout.contains("refuses to serve the export"), "{stdout}");
    assert!(stdout.contains("r0 role:Primary"), "{stdout}");
    assert!(
        stdout.contains("the replicas are byte-identical"),
        "{stdout}"
    );
    assert!(stdout.contains("metadata created (internal"), "{stdout}");
    assert!(
        stdout.contains("bob is in sync again: 24 MiB moved"),
        "{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("crc32c of the "))
        .expect("checksum line");
    let sums: Vec<&str> = line
        .split_whitespace()
        .map(|w| w.trim_end_matches(','))
        .filter(|w| w.len() == 8 && w.chars().all(|c| c.is_ascii_hexdigit()))
        .collect();
    assert_eq!(sums.len(), 2, "{line}");
    assert_eq!(sums[0], sums[1], "{line}");
    let removed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("== stopping the nodes and removing "))
        .expect("cleanup line");
    assert!(
        !std::path::Path::new(removed).exists(),
        "{removed} was left behind"
    );
}

/// A minimal two-node configuration in drbd.conf syntax.
const TWO_NODES_CONF: &str = "resource r0 {
  on alice { node-id 0; address 127.0.0.1:7789;
    volume 0 { device /dev/drbd0; disk /var/tmp/alice.img; meta-disk internal; } }
  on bob { node-id 1; address 127.0.0.1:7790;
    volume 0 { device /dev/drbd0; disk /var/tmp/bob.img; meta-disk internal; } }
}
";

#[test]
fn dump_prints_the_configuration_and_refuses_unknown_resources() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("tandem.conf");
    std::fs::write(&config, TWO_NODES_CONF).expect("write config");

    let mut command = tandem(dir.path());
    command.arg("dump").arg("--config").arg(&config).arg("r0");
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("resource r0 {"), "{stdout}");
    assert!(stdout.contains("on bob {"), "{stdout}");

    let mut command = tandem(dir.path());
    command.arg("dump").arg("-c").arg(&config).arg("r9");
    let output = run(command);
    assert_eq!(output.status.code(), Some(1));
    let expected = format!("tandem: 'r9' not defined in {}\n", config.display());
    assert_eq!(text(&output.stderr), expected);

    let mut command = tandem(dir.path());
    command
        .arg("dump")
        .arg("-c")
        .arg(dir.path().join("missing.conf"));
    let output = run(command);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("missing.conf"),
        "{}",
        text(&output.stderr)
    );
}
