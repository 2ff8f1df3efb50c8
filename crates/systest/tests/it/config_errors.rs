//! Start-up errors: a configuration that cannot run makes `tandem node` exit non-zero with a
//! message an operator can act on, before it creates any socket.

use std::net::TcpStream;
use std::time::Duration;

use crate::cluster::{Cluster, Spec};

/// How long a node may take to give up on a bad setup.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);

/// Fails unless node 0 left no socket behind and does not listen on its peer port.
fn assert_nothing_listens(cluster: &Cluster) {
    let entries: Vec<String> = std::fs::read_dir(cluster.run_dir(0))
        .expect("cannot list the run dir")
        .map(|entry| {
            entry
                .expect("bad dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(
        entries.is_empty(),
        "a node that failed to start left {entries:?} in its run dir"
    );
    // Polled: a listener this test dropped a moment ago can linger in a child process another
    // test is forking (between fork and exec it holds copies of every descriptor).
    let deadline = std::time::Instant::now() + LINGER_DEADLINE;
    while TcpStream::connect(cluster.address(0)).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "something listens on the peer port of a node that failed to start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a dropped listener may linger in another test's forked child.
const LINGER_DEADLINE: Duration = Duration::from_secs(3);

/// drbd-semantics.md §1 table and §5: `ping-int` is 1–120 s; drbdadm rejects 500 ("Value
/// is too big"). tandem must refuse to start and point at the value: `file:line:col:`.
#[test]
fn out_of_range_option_names_file_line_and_column() {
    // create-md reads the same configuration and would refuse it too, so no metadata: the
    // node must fail on the configuration before it looks at any disk.
    let spec = Spec::two_nodes('C')
        .net_line(0, "ping-int 500;")
        .without_metadata();
    let cluster = Cluster::create(spec);
    let text = cluster.config_text(0);
    let (line_index, line) = text
        .lines()
        .enumerate()
        .find(|(_, line)| line.contains("ping-int 500;"))
        .expect("the config has no ping-int line");
    let column = line.find("500").expect("no value") + 1;
    let location = format!(
        "{}:{}:{column}:",
        cluster.config_path(0).display(),
        line_index + 1
    );
    let output = cluster.run_node_to_exit(0, EXIT_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "tandem node started with ping-int 500: {stderr}"
    );
    assert!(
        stderr.contains(&location),
        "stderr does not point at {location}:\n{stderr}"
    );
    assert!(
        stderr.contains("ping-int"),
        "stderr does not name the option:\n{stderr}"
    );
    assert_nothing_listens(&cluster);
}

/// A backing disk that does not exist is an error naming the path; tandem must not create
/// it (that would silently start an empty replica) and must start nothing.
#[test]
fn missing_backing_file_is_a_clear_error() {
    let cluster = Cluster::create(Spec::two_nodes('C'));
    std::fs::remove_file(cluster.disk(0)).expect("cannot remove alice's backing file");
    let output = cluster.run_node_to_exit(0, EXIT_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "tandem node started without its backing file: {stderr}"
    );
    let path = cluster.disk(0).display().to_string();
    assert!(
        stderr.contains(&path),
        "stderr does not name the missing file {path}:\n{stderr}"
    );
    let lower = stderr.to_lowercase();
    assert!(
        ["no such file", "does not exist", "not found"]
            .iter()
            .any(|words| lower.contains(words)),
        "stderr does not say the file does not exist:\n{stderr}"
    );
    assert!(
        !cluster.disk(0).exists(),
        "tandem node created the missing backing file"
    );
    assert_nothing_listens(&cluster);
}

/// A peer port that is already taken is a start-up error naming the address, and like every
/// start-up error it must leave nothing behind: no admin or NBD socket in the run dir that
/// would make `tandem status` talk to a node that does not exist.
#[test]
fn busy_peer_port_is_a_clear_error_and_leaves_no_sockets() {
    let cluster = Cluster::create(Spec::two_nodes('C'));
    let squatter =
        std::net::TcpListener::bind(cluster.address(0)).expect("cannot occupy alice's peer port");
    let output = cluster.run_node_to_exit(0, EXIT_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "tandem node started although its peer port is taken: {stderr}"
    );
    let address = cluster.address(0).to_string();
    assert!(
        stderr.contains(&address),
        "stderr does not name the busy address {address}:\n{stderr}"
    );
    drop(squatter);
    assert_nothing_listens(&cluster);
}
