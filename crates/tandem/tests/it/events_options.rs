//! `tandem events` with drbdsetup events2's options against a fake node: `--now` stops after
//! the state dump, `--poll` prints a dump per `n` on standard input, `--timestamps` prefixes
//! each line with the time, `--full` reaches the node in the request (issue 27, item 1).

use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Stdio;
use std::thread::{self, JoinHandle};

use admin::{Reply, Request};

use super::{accept_with_deadline, run, send, tandem, text, wait_with_deadline, DEADLINE};

const DUMP: [&str; 2] = ["exists resource name:r0 role:Primary", "exists -"];

/// A fake node that serves `connections` events requests one after the other, each with
/// the two-line dump; it then keeps the connection open until the client closes it, so a
/// client that did not stop by itself would hang (and fail on the deadline).
fn dumping_node(run_dir: &Path, connections: usize) -> JoinHandle<Vec<Request>> {
    let listener = UnixListener::bind(run_dir.join("admin.sock")).expect("bind admin.sock");
    listener.set_nonblocking(true).expect("nonblocking");
    thread::spawn(move || {
        (0..connections)
            .map(|_| serve_dump(accept_with_deadline(&listener)))
            .collect()
    })
}

fn serve_dump(mut stream: UnixStream) -> Request {
    use std::io::{BufRead, BufReader, Read};
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).expect("request line");
    let request = admin::decode_line(&line).expect("a valid request");
    for line in DUMP {
        send(
            &mut stream,
            &Reply::Event {
                line: line.to_string(),
            },
        );
    }
    // Returns once the client hung up (or the deadline passed: the read then fails).
    let mut rest = Vec::new();
    reader
        .read_to_end(&mut rest)
        .expect("client closes the stream");
    request
}

#[test]
fn now_prints_the_dump_and_exits() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = dumping_node(run_dir.path(), 1);
    let mut command = tandem(run_dir.path());
    command.args(["events", "--now", "--statistics", "--full", "r0"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), format!("{}\n{}\n", DUMP[0], DUMP[1]));
    let requests = node.join().expect("node");
    let expected = Request::Events {
        resource: Some("r0".into()),
        statistics: true,
        full: true,
    };
    assert_eq!(requests, vec![expected]);
}

/// Runs `tandem events --poll` with `input` on its standard input: (exit code, stdout,
/// stderr).
fn poll(run_dir: &Path, input: &[u8]) -> (Option<i32>, String, String) {
    let mut command = tandem(run_dir);
    command.args(["events", "--poll"]);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input)
        .expect("write input");
    let status = wait_with_deadline(&mut child);
    let read = |pipe: Option<&mut dyn std::io::Read>| {
        let mut text = String::new();
        pipe.expect("piped")
            .read_to_string(&mut text)
            .expect("read");
        text
    };
    let stdout = read(child.stdout.as_mut().map(|p| p as &mut dyn std::io::Read));
    let stderr = read(child.stderr.as_mut().map(|p| p as &mut dyn std::io::Read));
    (status.code(), stdout, stderr)
}

#[test]
fn poll_prints_a_dump_per_n_until_end_of_input() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = dumping_node(run_dir.path(), 2);
    let (code, stdout, stderr) = poll(run_dir.path(), b"n\n");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, format!("{0}\n{1}\n{0}\n{1}\n", DUMP[0], DUMP[1]));
    assert_eq!(node.join().expect("node").len(), 2);
}

#[test]
fn poll_refuses_other_input_with_a_clear_message() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = dumping_node(run_dir.path(), 1);
    let (code, _, stderr) = poll(run_dir.path(), b"x\n");
    assert_eq!(code, Some(1));
    assert!(stderr.contains("expected 'n'"), "{stderr}");
    node.join().expect("node");
}

#[test]
fn timestamps_prefix_each_line_with_utc_microseconds() {
    let run_dir = tempfile::tempdir().expect("tempdir");
    let node = dumping_node(run_dir.path(), 1);
    let mut command = tandem(run_dir.path());
    command.args(["events", "--now", "--timestamps"]);
    let output = run(command);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (line, event) in lines.iter().zip(DUMP) {
        let (time, rest) = line.split_once(' ').expect("a timestamp, then the line");
        assert_eq!(rest, event);
        // 2026-11-27T15:51:24.123456+00:00
        assert_eq!(time.len(), 32, "{time}");
        assert_eq!(
            (&time[10..11], &time[19..20], &time[26..]),
            ("T", ".", "+00:00"),
            "{time}"
        );
    }
    node.join().expect("node");
}
