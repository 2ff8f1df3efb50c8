//! Tests of the `tandem-linkemu` binary: the control socket changes a running link, and bad
//! arguments exit non-zero with a message instead of panicking.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::support::{echo_server, round_trip, DEADLINE};

fn linkemu() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem-linkemu"));
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Kills the child when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `command` to completion, polling against [`DEADLINE`].
fn finish(command: &mut Command) -> Output {
    let mut child = command.spawn().expect("spawn tandem-linkemu");
    let deadline = Instant::now() + DEADLINE;
    while child.try_wait().expect("poll child").is_none() {
        assert!(Instant::now() < deadline, "tandem-linkemu did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().expect("collect output")
}

fn request(control: &mut BufReader<UnixStream>, line: &str) -> Value {
    let stream = control.get_mut();
    stream.write_all(line.as_bytes()).expect("send request");
    stream.write_all(b"\n").expect("send newline");
    let mut reply = String::new();
    control.read_line(&mut reply).expect("read reply");
    serde_json::from_str(&reply)
        .unwrap_or_else(|error| panic!("reply {reply:?} is not JSON: {error}"))
}

/// Starts the binary between a listener and `echo` with its control socket at `path`; returns
/// it with its listening address, once it printed its ready line.
async fn start_with_control(echo: SocketAddr, path: &std::path::Path) -> (Running, String) {
    let mut child = linkemu()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--target",
            &echo.to_string(),
            "--control",
        ])
        .arg(path)
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("piped stdout");
    let running = Running(child);
    // The first line names the listening address, printed once everything is ready.
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    let line = tokio::time::timeout(DEADLINE, first)
        .await
        .expect("ready line in time")
        .expect("join")
        .expect("read stdout");
    let listen = line
        .split(" -> ")
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert!(line.contains(&echo.to_string()), "ready line {line:?}");
    (running, listen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_socket_changes_the_running_link() {
    let echo = echo_server().await;
    let directory = tempfile::tempdir().expect("temporary directory");
    let path = directory.path().join("control.sock");
    let (mut running, listen) = start_with_control(echo, &path).await;

    let path_for_control = path.clone();
    let replies = tokio::task::spawn_blocking(move || {
        let mut control =
            BufReader::new(UnixStream::connect(&path_for_control).expect("connect control"));
        let stats = request(&mut control, r#"{"stats":true}"#);
        let slowed = request(&mut control, r#"{"delay_ms":25}"#);
        let unknown = request(&mut control, r#"{"nope":1}"#);
        let missing = request(&mut control, r#"{"pair":3,"delay_ms":1}"#);
        (control, [stats, slowed, unknown, missing])
    });
    let (control, [stats, slowed, unknown, missing]) = replies.await.expect("control exchange");
    assert_eq!(stats["ok"], Value::Bool(true), "{stats}");
    assert_eq!(
        stats["pairs"][0]["listen"],
        Value::String(listen.clone()),
        "{stats}"
    );
    assert_eq!(
        slowed["pairs"][0]["link"]["forward"]["delay_ms"],
        serde_json::json!(25.0),
        "{slowed}"
    );
    assert_eq!(unknown["ok"], Value::Bool(false), "{unknown}");
    assert_eq!(missing["ok"], Value::Bool(false), "{missing}");
    assert!(
        missing["error"]
            .as_str()
            .is_some_and(|error| error.contains("no pair 3")),
        "{missing}"
    );

    let mut stream = TcpStream::connect(listen.as_str())
        .await
        .expect("connect through the binary");
    let rtt = round_trip(&mut stream).await;
    assert!(
        rtt >= Duration::from_millis(50),
        "round trip {rtt:?} after delay_ms 25"
    );
    let counted = tokio::task::spawn_blocking(move || {
        let mut control = control;
        request(&mut control, r#"{"stats":true}"#)
    })
    .await
    .expect("stats exchange");
    assert_eq!(
        counted["pairs"][0]["stats"]["forward_bytes"],
        serde_json::json!(8),
        "{counted}"
    );
    assert_eq!(
        counted["pairs"][0]["stats"]["connections_open"],
        serde_json::json!(1),
        "{counted}"
    );

    // SIGTERM: a clean exit that resets the open connection and removes the control socket.
    let pid = running.0.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let mut buffer = [0u8; 4];
    let read = tokio::time::timeout(DEADLINE, stream.read(&mut buffer))
        .await
        .expect("reset within the deadline");
    assert!(
        matches!(read, Err(ref error) if error.kind() == std::io::ErrorKind::ConnectionReset),
        "got {read:?}"
    );
    let status = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = running.0.try_wait().expect("poll child") {
                return status;
            }
            assert!(Instant::now() < deadline, "tandem-linkemu ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(5));
        }
    })
    .await
    .expect("wait for exit");
    assert!(status.success(), "exit status {status:?} after SIGTERM");
    assert!(!path.exists(), "control socket left behind");
}

#[test]
fn bad_arguments_exit_non_zero_with_a_message() {
    let target = ["--target", "127.0.0.1:9"];
    let listen = ["--listen", "127.0.0.1:0"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "nothing to relay"),
        (listen.to_vec(), "--target"),
        (
            [&listen[..], &target[..], &["--delay", "5parsecs"]].concat(),
            "bad duration",
        ),
        (
            [&listen[..], &target[..], &["--rate", "fast"]].concat(),
            "bad rate",
        ),
        (
            [&listen[..], &target[..], &["--queue", "0"]].concat(),
            "queue bound",
        ),
        (
            [&listen[..], &target[..], &["--partition", "sideways"]].concat(),
            "bad partition",
        ),
        (
            [&listen[..], &target[..], &["--delay", "61s"]].concat(),
            "longer than the limit",
        ),
        (vec!["--pair", "127.0.0.1:0"], "LISTEN=TARGET"),
        (vec!["--pair", "here=there"], "bad address"),
        (
            vec!["--listen", "localhost", "--target", "127.0.0.1:9"],
            "invalid",
        ),
        (vec!["--bogus"], "unexpected argument"),
    ];
    for (arguments, message) in cases {
        let output = finish(linkemu().args(&arguments));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{arguments:?} succeeded");
        assert!(
            stderr.contains(message),
            "{arguments:?}: stderr {stderr:?} lacks {message:?}"
        );
        assert!(
            !stderr.contains("panicked"),
            "{arguments:?} panicked: {stderr}"
        );
    }
}

#[test]
fn an_address_in_use_is_a_start_up_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let output = finish(linkemu().args(["--listen", &address, "--target", "127.0.0.1:9"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("cannot listen on"), "stderr: {stderr}");
}
