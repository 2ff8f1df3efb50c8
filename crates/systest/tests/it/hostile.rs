//! Hostile input on the two sockets anyone on the host (or network) can reach: the peer port
//! and the NBD socket. Random bytes, frames with a wrong magic, an absurd length or the wrong
//! kind, broken NBD handshakes and garbage in the transmission phase must cost the daemon
//! nothing: it stays alive, the link to the real peer stays (or comes back) Connected, and
//! replication still verifies afterwards.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::nbd_client::{self, option_bytes, CLIENT_FLAGS};
use crate::tools::{fio_verify, fresh_seed, require_fio, run_ok, Rng};

/// How long one fio run may take.
const FIO_DEADLINE: Duration = Duration::from_secs(25);
/// How long a reconnect may take (connect-int is 1 s).
const RECONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// The frame magic of the peer protocol, "TNDM" (crates/wire: frame header layout).
const FRAME_MAGIC: [u8; 4] = *b"TNDM";
/// Kind numbers of the peer protocol (crates/wire: kinds table).
const KIND_HELLO: u16 = 0x0001;
const KIND_DATA: u16 = 0x0100;

/// A peer-protocol frame header: magic, kind, flags, body length, CRC-32C of bytes 0..12,
/// all big-endian, with a valid CRC so the frame gets past the header check to what follows.
fn frame_header(magic: [u8; 4], kind: u16, body_len: u32) -> Vec<u8> {
    let mut header = magic.to_vec();
    header.extend_from_slice(&kind.to_be_bytes());
    header.extend_from_slice(&0u16.to_be_bytes());
    header.extend_from_slice(&body_len.to_be_bytes());
    let crc = crc32c::crc32c(&header);
    header.extend_from_slice(&crc.to_be_bytes());
    header
}

/// The byte strings sent to the peer port, one connection each, with what they are.
fn peer_garbage(rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    let mut wrong_magic = frame_header(*b"XNDM", KIND_HELLO, 64);
    wrong_magic.extend(rng.bytes(64));
    let mut garbage_hello = frame_header(FRAME_MAGIC, KIND_HELLO, 200);
    garbage_hello.extend(rng.bytes(200));
    let mut data_before_hello = frame_header(FRAME_MAGIC, KIND_DATA, 4096 + 28);
    data_before_hello.extend(rng.bytes(4096 + 28));
    vec![
        ("64 KiB of random bytes", rng.bytes(64 << 10)),
        ("a frame with a wrong magic", wrong_magic),
        (
            "a Hello claiming a 4 GiB body",
            frame_header(FRAME_MAGIC, KIND_HELLO, u32::MAX),
        ),
        ("a Hello with a random body", garbage_hello),
        ("a Data frame before any Hello", data_before_hello),
        ("a header with a bad CRC", {
            let mut header = frame_header(FRAME_MAGIC, KIND_HELLO, 16);
            header[12] ^= 0xff;
            header
        }),
    ]
}

/// How long to wait for the daemon to hang up after we have sent our garbage and our FIN.
const HANG_UP_WAIT: Duration = Duration::from_secs(1);

/// Sends `bytes` on a fresh connection to `address`, half-closes, and reads whatever comes
/// back until the daemon hangs up or [`HANG_UP_WAIT`] passes.
fn send_to_peer_port(address: SocketAddr, what: &str, bytes: &[u8]) {
    let mut stream = TcpStream::connect(address).unwrap_or_else(|error| {
        panic!("cannot connect to the peer port {address} to send {what}: {error}")
    });
    // The daemon may close mid-write after rejecting the first bytes; that is fine.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    stream
        .set_read_timeout(Some(HANG_UP_WAIT))
        .expect("cannot set a timeout");
    drain(&mut stream);
}

/// Half-closes a unix stream after garbage and reads until the daemon hangs up.
fn finish_unix(mut stream: UnixStream) {
    let _ = stream.shutdown(Shutdown::Write);
    stream
        .set_read_timeout(Some(HANG_UP_WAIT))
        .expect("cannot set a timeout");
    drain(&mut stream);
}

fn drain(stream: &mut impl Read) {
    let mut sink = [0u8; 4096];
    while let Ok(count) = stream.read(&mut sink) {
        if count == 0 {
            break;
        }
    }
}

/// NBD-socket garbage: random bytes before the greeting is read, unknown client flags, an
/// option with a 4 GiB length, and garbage after a successful NBD_OPT_GO.
fn nbd_garbage(cluster: &Cluster, rng: &mut Rng) {
    let socket = cluster.nbd_socket(0);
    let mut raw = UnixStream::connect(&socket).expect("cannot connect to nbd.sock");
    let _ = raw.write_all(&rng.bytes(64 << 10));
    finish_unix(raw);

    let (mut stream, _) = nbd_client::greet(&socket);
    let _ = stream.write_all(&0xffff_fff0u32.to_be_bytes());
    finish_unix(stream);

    let (mut stream, _) = nbd_client::greet(&socket);
    let mut huge_option = CLIENT_FLAGS.to_be_bytes().to_vec();
    huge_option.extend_from_slice(&option_bytes(7, &[])[..12]);
    huge_option.extend_from_slice(&u32::MAX.to_be_bytes());
    huge_option.extend_from_slice(&rng.bytes(1024));
    let _ = stream.write_all(&huge_option);
    finish_unix(stream);

    let mut client = nbd_client::open(&socket, RESOURCE).expect("the Primary refused NBD_OPT_GO");
    let _ = client.send_raw(&rng.bytes(4096));
    drop(client);
}

/// drbd-semantics.md §2: a connection that fails its handshake (ProtocolError, or a
/// stranger that is not the peer at all) is dropped on its own; it must not tear down the
/// established link nor the node. nbd.md "Handshake"/"Rules": the server closes connections
/// with unknown flags or oversized options and never trusts a request header.
#[test]
fn garbage_on_the_peer_and_nbd_sockets_is_survived() {
    require_fio();
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let seed = fresh_seed();
    eprintln!("garbage from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    for index in 0..2 {
        for (what, bytes) in peer_garbage(&mut rng) {
            send_to_peer_port(cluster.address(index), what, &bytes);
            assert!(
                cluster.is_alive(index),
                "{} died after receiving {what} on its peer port",
                cluster.name(index)
            );
        }
    }
    nbd_garbage(&cluster, &mut rng);
    for index in 0..2 {
        assert!(
            cluster.is_alive(index),
            "{} died after the garbage",
            cluster.name(index)
        );
    }
    cluster.wait_until(
        "the export is no longer open after the garbage client was cut off",
        RECONNECT_DEADLINE,
        || !cluster.status(0).open(),
    );
    cluster.wait_until(
        "alice and bob are Connected again",
        RECONNECT_DEADLINE,
        || cluster.all_connected(),
    );
    run_ok(
        fio_verify(&cluster.nbd_uri(0), cluster.dir(), "randwrite", "4k", "16M"),
        FIO_DEADLINE,
    );
    cluster.wait_identical(0, 1, RECONNECT_DEADLINE);
    assert!(
        cluster.all_connected(),
        "the link dropped during the fio run after the garbage"
    );
}

/// drbd-semantics.md §2 connection states: after the peer restarts, the link goes back to
/// Connected (connect-int). A stranger that opened the peer port and never speaks must not
/// stop that (the daemon may not wait for it before serving the real peer).
#[test]
fn silent_stranger_on_the_peer_port_does_not_block_a_reconnect() {
    let cluster = Cluster::connected(Spec::two_nodes('C'));
    let strangers: Vec<TcpStream> = (0..4)
        .map(|_| {
            TcpStream::connect(cluster.address(0)).expect("cannot connect to alice's peer port")
        })
        .collect();
    cluster.restart(1);
    cluster.wait_until(
        "bob reconnects to alice while strangers hold silent connections",
        RECONNECT_DEADLINE,
        || cluster.all_connected(),
    );
    drop(strangers);
}

/// A large write is replicated while it still arrives (cut-through). A client that goes away
/// in the middle of one never gets it acknowledged, and its blocks may now differ between
/// the replicas (part written here, zero padding there), so the Primary must count them out
/// of sync for the peer rather than claim the replicas agree; it keeps serving everyone else.
#[test]
fn a_client_gone_in_the_middle_of_a_large_write_leaves_its_blocks_out_of_sync() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let socket = cluster.nbd_socket(0);
    let bob = NODE_NAMES[1];
    let mut client = nbd_client::open(&socket, RESOURCE).expect("the Primary refused NBD_OPT_GO");
    client.start_write(1 << 20, 1 << 20, &[0xAB; 300 * 1024]);
    drop(client);
    cluster.wait_until(
        "the Primary counts the cut-short write out of sync for bob",
        RECONNECT_DEADLINE,
        || cluster.status(0).out_of_sync_kib(bob) > 0,
    );
    let status = cluster.status(0);
    assert!(
        status.out_of_sync_kib(bob) <= 1024,
        "more than the 1 MiB write is out of sync: {}",
        status.0
    );
    assert_eq!(
        status.connection_state(bob),
        "Connected",
        "the link must survive a client's abort"
    );
    let mut next = nbd_client::open(&socket, RESOURCE).expect("the Primary refused NBD_OPT_GO");
    assert_eq!(
        next.write(0, &[7; 256 * 1024]),
        0,
        "a later large write fails"
    );
    assert_eq!(next.read(0, 4096), vec![7; 4096]);
    next.disconnect();
}
