//! The network edge of a node (issue 27, item 6; docs/SECURITY.md): a peer connection from an
//! address that is no peer's is closed before the daemon reads anything, refusals are logged
//! once per address and interval, and a flood of idle connections from a peer's own address
//! does not keep the real peer from reconnecting; the reordered challenge-response connects
//! a three-node mesh.
//!
//! Every node of the harness listens on 127.0.0.1; any other 127.x address is another source
//! on the same loopback device (Linux routes all of 127.0.0.0/8 there).

use std::io::{ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::{Cluster, Spec, RESOURCE};

/// The daemon's unauthenticated handshakes per listener (crates/daemon/src/edge.rs).
const HANDSHAKES_IN_PROGRESS_MAX: usize = 8;
/// The daemon's handshake deadline (crates/daemon/src/peer.rs, `HANDSHAKE_TIMEOUT`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a closed connection may take to be seen closed.
const CLOSE_DEADLINE: Duration = Duration::from_secs(3);
/// How long an idle connection from a peer's address is watched staying open.
const STAYS_OPEN_FOR: Duration = Duration::from_secs(1);
/// How long the real peer may take to reconnect through the flood (connect-int is 1 s).
const RECONNECT_DEADLINE: Duration = Duration::from_secs(15);
/// Idle connections opened at once, well over the limit.
const FLOOD: usize = 64;

const ALICE: usize = 0;
const BOB: usize = 1;

fn sockaddr(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A TCP connection to `target` from `source` (port chosen by the kernel).
fn connect_from(source: Ipv4Addr, target: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(target) = target else {
        return Err(ErrorKind::Unsupported.into());
    };
    // SAFETY: socket(2) takes no pointers; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a socket we just created and own; the stream closes it on drop.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let length = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let local = sockaddr(source, 0);
    // SAFETY: `local` is a valid sockaddr_in of `length` bytes that outlives the call.
    if unsafe { libc::bind(fd, std::ptr::from_ref(&local).cast(), length) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let remote = sockaddr(*target.ip(), target.port());
    // SAFETY: as for bind: a valid sockaddr_in that outlives the call.
    if unsafe { libc::connect(fd, std::ptr::from_ref(&remote).cast(), length) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stream)
}

/// Whether the daemon has closed `stream` (end of file or reset), without waiting.
fn closed_by_daemon(stream: &mut TcpStream) -> bool {
    stream
        .set_nonblocking(true)
        .expect("cannot make the socket non-blocking");
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => error.kind() != ErrorKind::WouldBlock,
    }
}

/// Polls until the daemon closed `stream`; fails after `deadline`.
fn wait_closed(cluster: &Cluster, stream: &mut TcpStream, what: &str, deadline: Duration) {
    cluster.wait_until(what, deadline, || closed_by_daemon(stream));
}

/// The refusal lines of `node`'s log that name `source` (the remote address is logged with
/// its port, `source:port`).
fn refusal_lines(cluster: &Cluster, node: usize, source: Ipv4Addr) -> Vec<String> {
    let needle = format!("{source}:");
    cluster
        .log(node)
        .lines()
        .filter(|line| line.contains("refused") && line.contains(&needle))
        .map(str::to_string)
        .collect()
}

/// DRBD accepts a peer connection only from a configured peer address. A connection from
/// 127.0.0.2 (bob is configured at 127.0.0.1) is closed before the daemon reads anything,
/// though it sent nothing: the daemon's reason is the address, not the protocol. Twenty of
/// them give one log line. The same idle connection from bob's address is read from (it stays
/// open, waiting for a Hello), and the real link stays up throughout.
#[test]
fn a_connection_from_an_unconfigured_address_is_closed_unread() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    let port = cluster.address(ALICE);
    let stranger = Ipv4Addr::new(127, 0, 0, 2);
    for attempt in 0..20 {
        let mut stream = connect_from(stranger, port)
            .unwrap_or_else(|error| panic!("cannot connect from {stranger}: {error}"));
        wait_closed(
            &cluster,
            &mut stream,
            &format!("attempt {attempt} from {stranger} is closed"),
            CLOSE_DEADLINE,
        );
    }
    let lines = refusal_lines(&cluster, ALICE, stranger);
    let first = lines
        .first()
        .unwrap_or_else(|| cluster.fail(&format!("alice logged no refusal of {stranger}")));
    assert!(
        first.contains("not the address of a peer"),
        "the reason is the address: {first}"
    );

    // A later refusal from another unconfigured address: once it is in the log, every
    // refusal of 127.0.0.2 (handled before it by the same accept loop) was too.
    let marker = Ipv4Addr::new(127, 0, 0, 3);
    let mut stream = connect_from(marker, port).expect("cannot connect from 127.0.0.3");
    wait_closed(
        &cluster,
        &mut stream,
        "the connection from 127.0.0.3 is closed",
        CLOSE_DEADLINE,
    );
    cluster.wait_until("the refusal of 127.0.0.3 is logged", CLOSE_DEADLINE, || {
        !refusal_lines(&cluster, ALICE, marker).is_empty()
    });
    let lines = refusal_lines(&cluster, ALICE, stranger);
    assert_eq!(
        lines.len(),
        1,
        "twenty refusals of one address within a minute give one line: {lines:#?}"
    );

    let mut allowed =
        connect_from(Ipv4Addr::LOCALHOST, port).expect("cannot connect from 127.0.0.1");
    cluster.hold_for(
        "an idle connection from bob's address stays open",
        STAYS_OPEN_FOR,
        || !closed_by_daemon(&mut allowed),
    );
    assert!(cluster.all_connected(), "the real link stayed up");
}

/// Opens idle connections from 127.0.0.1 to `target` until `stop`, keeping the newest
/// [`FLOOD`] open; returns those still held.
fn keep_flooding(target: SocketAddr, stop: &AtomicBool) -> Vec<TcpStream> {
    let mut held = std::collections::VecDeque::with_capacity(FLOOD);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(stream) = connect_from(Ipv4Addr::LOCALHOST, target) {
            if held.len() == FLOOD {
                held.pop_front();
            }
            held.push_back(stream);
        }
        // Pacing of the load generator (about 500 connections a second), not a wait for a
        // condition: far more than the limit per handshake of the real peer.
        std::thread::sleep(Duration::from_millis(2));
    }
    held.into()
}

/// At most [`HANDSHAKES_IN_PROGRESS_MAX`] unauthenticated handshakes per listener: of a burst
/// of idle connections from bob's own address all but that many are closed long before the
/// handshake deadline, the rest by the deadline. While idle connections keep coming, bob
/// (the initiator) disconnects and connects again and gets through; the flood costs one
/// log line.
#[test]
fn a_flood_of_idle_connections_does_not_keep_the_peer_out() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    let target = cluster.address(ALICE);
    let started = Instant::now();
    let mut burst: Vec<TcpStream> = (0..FLOOD)
        .map(|_| connect_from(Ipv4Addr::LOCALHOST, target).expect("cannot connect"))
        .collect();
    let evicted = FLOOD - HANDSHAKES_IN_PROGRESS_MAX;
    cluster.wait_until(
        &format!("at least {evicted} of {FLOOD} idle connections are closed"),
        HANDSHAKE_TIMEOUT / 2,
        || {
            burst
                .iter_mut()
                .map(closed_by_daemon)
                .filter(|closed| *closed)
                .count()
                >= evicted
        },
    );
    assert!(
        started.elapsed() < HANDSHAKE_TIMEOUT,
        "closed by the limit, not by the deadline"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || keep_flooding(target, &stop))
    };
    cluster.admin_ok(BOB, &["disconnect", RESOURCE]);
    cluster.wait_until("alice sees bob gone", RECONNECT_DEADLINE, || {
        !cluster.all_connected()
    });
    cluster.admin_ok(BOB, &["connect", RESOURCE]);
    cluster.wait_until(
        "bob reconnects through the flood",
        RECONNECT_DEADLINE,
        || cluster.all_connected(),
    );
    stop.store(true, Ordering::Relaxed);
    let mut held = flood.join().expect("the flood thread panicked");
    assert!(
        held.len() > HANDSHAKES_IN_PROGRESS_MAX,
        "the flood held more connections than the limit"
    );

    // Each handshake has a deadline: the ones still open end by it.
    for (index, stream) in held.iter_mut().chain(burst.iter_mut()).enumerate() {
        wait_closed(
            &cluster,
            stream,
            &format!("idle connection {index} is closed by the deadline"),
            HANDSHAKE_TIMEOUT + CLOSE_DEADLINE,
        );
    }
    let lines = refusal_lines(&cluster, ALICE, Ipv4Addr::LOCALHOST);
    assert!(
        !lines.is_empty() && lines.len() <= 2,
        "hundreds of refusals from one address give a line a minute: {lines:#?}"
    );
    assert!(cluster.all_connected(), "the link is up after the flood");
}

/// The reordered challenge-response (the listener answers only after the initiator proved
/// the secret) between every pair of a three-node mesh, where each node both dials and
/// listens: all three connect, and nobody logs an authentication failure.
#[test]
fn three_nodes_with_a_shared_secret_connect() {
    let spec = Spec::three_nodes('C')
        .net_line_all("cram-hmac-alg sha256;")
        .net_line_all("shared-secret \"edge-secret-27\";");
    let cluster = Cluster::connected(spec);
    for node in 0..3 {
        let log = cluster.log(node).to_lowercase();
        assert!(
            !log.contains("authentication failed"),
            "{} logged an authentication failure",
            cluster.name(node)
        );
    }
}
