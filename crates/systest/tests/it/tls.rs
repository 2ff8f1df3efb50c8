//! TLS on replication links (`tls yes` with pinned certificates, issue 7): two nodes replicate
//! over TLS and the bytes between them are ciphertext (a recording relay sits on the link; the
//! same relay sees the plain bytes without TLS); a certificate other than the pinned one, or
//! TLS on one side only, never connects and the log says why.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cluster::{tandem_bin, Cluster, Spec, RESOURCE};
use crate::nbd_client;

const ALICE: usize = 0;
const BOB: usize = 1;
const DEADLINE: Duration = Duration::from_secs(20);
/// Bytes the relay keeps, at most (far more than the test writes).
const RECORD_BYTES_MAX: usize = 64 << 20;
/// A pattern no protocol field contains.
const CANARY: &[u8; 32] = b"tandem-tls-canary-0123456789abcd";

/// `tandem tls-keygen` for `name` in `dir`: the three lines for its `on` section.
fn keygen(dir: &Path, name: &str) -> Vec<String> {
    let out = Command::new(tandem_bin())
        .args(["tls-keygen", "--out"])
        .arg(dir)
        .args(["--name", name])
        .output()
        .expect("run tandem tls-keygen");
    assert!(
        out.status.success(),
        "tls-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Two nodes, `tls yes`, each host's certificate lines in its `on` section; `bob_pin`
/// replaces bob's pinned fingerprint (for the wrong-certificate case).
fn tls_spec(keys: &Path, bob_pin: Option<&str>) -> Spec {
    let mut spec = Spec::two_nodes('C')
        .through_relays()
        .net_line_all("tls yes;");
    for (index, name) in ["alice", "bob"].into_iter().enumerate() {
        for line in keygen(keys, name) {
            let line = match (bob_pin, index == BOB && line.starts_with("tls-fingerprint")) {
                (Some(pin), true) => pin.to_string(),
                _ => line,
            };
            spec = spec.host_line(index, &line);
        }
    }
    spec
}

/// A relay per node on its relay port (as `Spec::through_relays` expects), recording every
/// byte it forwards in either direction.
struct RecordingRelay {
    bytes: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl RecordingRelay {
    fn start(cluster: &Cluster) -> RecordingRelay {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        for (index, port) in cluster.relay_ports().expect("relays").iter().enumerate() {
            let listener = TcpListener::bind(("127.0.0.1", *port)).expect("bind the relay port");
            listener.set_nonblocking(true).expect("nonblocking");
            let (target, bytes, stop) = (
                cluster.address(index),
                Arc::clone(&bytes),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((client, _)) => {
                            let Ok(server) = TcpStream::connect(target) else {
                                continue;
                            };
                            pipe(&client, &server, &bytes);
                            pipe(&server, &client, &bytes);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            });
        }
        RecordingRelay { bytes, stop }
    }

    fn saw(&self, pattern: &[u8]) -> bool {
        self.bytes
            .lock()
            .map(|b| b.windows(pattern.len()).any(|w| w == pattern))
            .unwrap_or(false)
    }

    fn recorded(&self) -> usize {
        self.bytes.lock().map(|b| b.len()).unwrap_or(0)
    }
}

impl Drop for RecordingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` on a thread, recording the bytes.
fn pipe(from: &TcpStream, to: &TcpStream, bytes: &Arc<Mutex<Vec<u8>>>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let bytes = Arc::clone(bytes);
    std::thread::spawn(move || {
        let mut buf = vec![0; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Ok(mut recorded) = bytes.lock() {
                if recorded.len() + n <= RECORD_BYTES_MAX {
                    recorded.extend_from_slice(&buf[..n]);
                }
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// Writes 64 KiB of the canary at offset 0 through alice and waits for identical replicas.
fn write_canary(cluster: &Cluster) {
    let data: Vec<u8> = CANARY.iter().copied().cycle().take(64 * 1024).collect();
    let mut client =
        nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open the export");
    assert_eq!(client.write(0, &data), 0);
    client.disconnect();
    cluster.wait_identical(ALICE, BOB, DEADLINE);
}

#[test]
fn replication_over_tls_is_ciphertext_on_the_wire() {
    let keys = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::create(tls_spec(keys.path(), None));
    let relay = RecordingRelay::start(&cluster);
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    write_canary(&cluster);
    assert!(
        relay.recorded() >= 64 * 1024,
        "the relay carried the replication ({} bytes)",
        relay.recorded()
    );
    assert!(
        !relay.saw(CANARY),
        "the written data crossed the link in clear text despite tls yes"
    );
    assert!(
        !relay.saw(b"TNDM"),
        "tandem's frame magic is visible on a TLS link"
    );

    // The same relay, without TLS, sees the data: the check above can fail.
    let plain = Cluster::create(Spec::two_nodes('C').through_relays());
    let relay = RecordingRelay::start(&plain);
    plain.start_all();
    plain.wait_connected();
    plain.initial_sync();
    plain.promote_and_wait(ALICE);
    write_canary(&plain);
    assert!(
        relay.saw(CANARY),
        "without TLS the relay sees the written data"
    );
}

/// Polls that the two nodes never connect for a while, then that `node`'s log says why.
fn never_connects(cluster: &Cluster, node: usize, why: &[&str]) {
    cluster.hold_for("the nodes never connect", Duration::from_secs(3), || {
        !cluster.all_connected()
    });
    cluster.wait_until("the log says why", DEADLINE, || {
        let log = cluster.log(node);
        why.iter().all(|w| log.contains(w))
    });
}

#[test]
fn a_certificate_other_than_the_pinned_one_never_connects() {
    let keys = tempfile::tempdir().expect("tempdir");
    let mallory = keygen(keys.path(), "mallory");
    let mallory_pin = mallory
        .iter()
        .find(|l| l.starts_with("tls-fingerprint"))
        .expect("fingerprint line")
        .clone();
    // Everyone expects mallory's certificate from bob; bob presents his own.
    let cluster = Cluster::create(tls_spec(keys.path(), Some(&mallory_pin)));
    let _relay = RecordingRelay::start(&cluster);
    cluster.start_all();
    never_connects(&cluster, ALICE, &["is not pinned", "pinned: bob sha256:"]);
}

#[test]
fn tls_on_one_side_only_never_connects() {
    let keys = tempfile::tempdir().expect("tempdir");
    let mut spec = Spec::two_nodes('C').net_line(ALICE, "tls yes;");
    for (index, name) in ["alice", "bob"].into_iter().enumerate() {
        for line in keygen(keys.path(), name) {
            spec = spec.host_line(index, &line);
        }
    }
    let cluster = Cluster::start(spec);
    never_connects(&cluster, ALICE, &["TLS handshake"]);
}
