//! Raw-socket tests: handshake options, every bad-input case (each followed by a read that must
//! still return the right data), pipelining, out-of-order completion, backpressure and
//! disconnect. Section names refer to proto.md of NetworkBlockDevice/nbd.

use std::sync::Arc;

use nbd::protocol::{
    option, BlockSizes, ClientOption, ExportQuery, InfoReply, InfoType, OptionError,
    OptionReplyBody, TransmissionFlags,
};
use nbd::{Errno, ExportInfo, ServerConfig};
use tokio::io::AsyncWriteExt;

use crate::support::{
    pattern, wait_until, within, Behaviour, MemExport, MemRegistry, RawClient, Server,
};

const SIZE: u64 = 1 << 20;
const READ: u16 = 0;
const WRITE: u16 = 1;
const DISC: u16 = 2;
const FLUSH: u16 = 3;
const TRIM: u16 = 4;
const WRITE_ZEROES: u16 = 6;
const FUA: u16 = 1;

/// A server with a full export "disk" (filled with a pattern), a read-only export "ro", a bare
/// export "bare" (no flush, FUA, trim or zeroes) and a policy-refused "secondary".
async fn server(config: ServerConfig) -> (Server, Arc<MemExport>) {
    let disk = MemExport::full(SIZE);
    disk.fill_with(&pattern(SIZE as usize, 1));
    let read_only = MemExport::new(
        ExportInfo {
            size: SIZE,
            read_only: true,
            ..ExportInfo::default()
        },
        7,
    );
    let bare = MemExport::new(
        ExportInfo {
            size: SIZE,
            ..ExportInfo::default()
        },
        9,
    );
    let registry = MemRegistry::default()
        .with("disk", &disk)
        .with("ro", &read_only)
        .with("bare", &bare)
        .with("info-shy", &disk)
        .refusing_info("info-shy")
        .refusing("secondary", "this node is Secondary");
    (Server::start(registry, config).await, disk)
}

fn small() -> ServerConfig {
    crate::support::small_config()
}

/// "Option types", NBD_OPT_GO: INFO_EXPORT, INFO_BLOCK_SIZE and (on request) INFO_NAME, then ACK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_reports_size_flags_block_sizes_and_name() {
    let (server, _) = server(small()).await;
    let mut client = RawClient::connect(&server.socket).await;
    let replies = client
        .go("disk", &[InfoType::BlockSize, InfoType::Name])
        .await;
    let bodies: Vec<_> = replies.iter().map(|reply| reply.body.clone()).collect();
    assert!(replies.iter().all(|reply| reply.option == option::GO));
    let flags = TransmissionFlags(0b1_0110_1101);
    assert_eq!(
        bodies,
        [
            OptionReplyBody::Info(InfoReply::Export { size: SIZE, flags }),
            OptionReplyBody::Info(InfoReply::BlockSize(BlockSizes {
                minimum: 1,
                preferred: 4096,
                maximum: 1 << 20
            })),
            OptionReplyBody::Info(InfoReply::Name("disk".to_owned())),
            OptionReplyBody::Ack,
        ]
    );
    assert_eq!(client.read(0, 16).await, Ok(pattern(16, 1)));
}

/// The error type of an option reply, if it is an error.
fn error_of(body: &OptionReplyBody) -> Option<OptionError> {
    match body {
        OptionReplyBody::Error { error, .. } => Some(*error),
        _ => None,
    }
}

/// NBD_OPT_LIST, NBD_OPT_INFO and NBD_OPT_ABORT ("Option types").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_info_and_abort() {
    let (server, _) = server(small()).await;
    let mut client = RawClient::connect(&server.socket).await;
    client.send_option(&ClientOption::List).await;
    let replies = client.final_replies().await;
    let names: Vec<_> = replies.into_iter().map(|reply| reply.body).collect();
    let entry = |name: &str| OptionReplyBody::Server {
        name: name.to_owned(),
    };
    let expected = [
        entry("disk"),
        entry("ro"),
        entry("bare"),
        entry("info-shy"),
        OptionReplyBody::Ack,
    ];
    assert_eq!(names, expected);
    let query = ExportQuery {
        name: "ro".to_owned(),
        items: vec![],
    };
    client.send_option(&ClientOption::Info(query)).await;
    let info = client.final_replies().await;
    let flags = TransmissionFlags(0b11);
    assert_eq!(
        info[0].body,
        OptionReplyBody::Info(InfoReply::Export { size: SIZE, flags })
    );
    assert_eq!(
        info.last().map(|reply| &reply.body),
        Some(&OptionReplyBody::Ack)
    );
    client.send_option(&ClientOption::Abort).await;
    assert_eq!(client.option_reply().await.body, OptionReplyBody::Ack);
    client.expect_closed().await;
}

/// Unsupported, refused and malformed options get errors and negotiation goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_options_get_errors_and_negotiation_continues() {
    let (server, _) = server(small()).await;
    let mut client = RawClient::connect(&server.socket).await;
    for (option, expected) in [
        (ClientOption::StructuredReply, OptionError::Unsup),
        (ClientOption::Other { option: 9 }, OptionError::Unsup),
        (ClientOption::StartTls, OptionError::Policy),
    ] {
        client.send_option(&option).await;
        assert_eq!(error_of(&client.option_reply().await.body), Some(expected));
    }
    // A malformed GO (name length past the data) is ERR_INVALID.
    let malformed = [
        &b"IHAVEOPT"[..],
        &[0, 0, 0, 7, 0, 0, 0, 5, 0, 0, 0, 9, b'x'],
    ]
    .concat();
    client.send(&malformed).await;
    assert_eq!(
        error_of(&client.option_reply().await.body),
        Some(OptionError::Invalid)
    );
    // Several exports: the empty name has no default.
    for name in ["", "nope"] {
        let replies = client.go(name, &[]).await;
        assert_eq!(
            error_of(&replies[0].body),
            Some(OptionError::Unknown),
            "{name:?}"
        );
    }
    let replies = client.go("disk", &[]).await;
    assert_eq!(
        replies.last().map(|reply| &reply.body),
        Some(&OptionReplyBody::Ack)
    );
    assert_eq!(client.read(0, 4).await, Ok(pattern(4, 1)));
}

/// The empty name means the only export, when there is exactly one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_name_is_the_single_default_export() {
    let disk = MemExport::full(4096);
    let server = Server::start(MemRegistry::default().with("only", &disk), small()).await;
    let mut client = RawClient::open(&server.socket, "").await;
    assert_eq!(client.read(0, 4096).await, Ok(vec![0; 4096]));
}

/// "Option types", NBD_REP_ERR_POLICY: a refused export's message reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_refusal_carries_the_message() {
    let (server, _) = server(small()).await;
    let mut client = RawClient::connect(&server.socket).await;
    let replies = client.go("secondary", &[]).await;
    let expected = OptionReplyBody::Error {
        error: OptionError::Policy,
        message: "this node is Secondary".to_owned(),
    };
    assert_eq!(replies.last().map(|reply| &reply.body), Some(&expected));
    assert_eq!(replies.len(), 1, "no NBD_REP_INFO before the error");
    // The connection is still in negotiation: another export works.
    assert!(matches!(
        client.go("disk", &[]).await.last().map(|reply| &reply.body),
        Some(OptionReplyBody::Ack)
    ));
}

/// NBD_OPT_EXPORT_NAME: size, flags, and 124 zeroes unless NO_ZEROES was negotiated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_name_enters_transmission() {
    let (server, _) = server(small()).await;
    for (client_flags, zeroes) in [(1_u32, 124_usize), (3, 0)] {
        let mut client = RawClient::connect_with_flags(&server.socket, client_flags).await;
        client
            .send_option(&ClientOption::ExportName {
                name: "disk".to_owned(),
            })
            .await;
        let mut reply = vec![0; 10 + zeroes];
        within(
            "export name reply",
            tokio::io::AsyncReadExt::read_exact(&mut client.stream, &mut reply),
        )
        .await
        .unwrap();
        assert_eq!(reply[..8], SIZE.to_be_bytes());
        assert_eq!(reply[8..10], 0b1_0110_1101_u16.to_be_bytes());
        assert!(reply[10..].iter().all(|&byte| byte == 0));
        assert_eq!(
            client.read(4096, 8).await,
            Ok(pattern(4104, 1)[4096..].to_vec())
        );
    }
    // A refused EXPORT_NAME cannot carry an error: the session ends.
    let mut client = RawClient::connect(&server.socket).await;
    client
        .send_option(&ClientOption::ExportName {
            name: "secondary".to_owned(),
        })
        .await;
    client.expect_closed().await;
}

/// One bad request and the error it must get.
struct Bad<'a> {
    what: &'static str,
    kind: u16,
    offset: u64,
    length: u32,
    payload: &'a [u8],
    errno: Errno,
}

fn bad_requests(big: &[u8]) -> [Bad<'_>; 8] {
    let bad = |what, kind, offset, length, payload, errno| Bad {
        what,
        kind,
        offset,
        length,
        payload,
        errno,
    };
    [
        bad(
            "read past the end",
            READ,
            SIZE - 4,
            8,
            &[][..],
            Errno::Inval,
        ),
        bad(
            "read with offset overflow",
            READ,
            u64::MAX,
            8,
            &[],
            Errno::Inval,
        ),
        bad(
            "write past the end",
            WRITE,
            SIZE - 4,
            8,
            &[0xaa; 8],
            Errno::NoSpc,
        ),
        bad("trim past the end", TRIM, SIZE, 1, &[], Errno::Inval),
        bad(
            "write-zeroes past the end",
            WRITE_ZEROES,
            SIZE,
            4096,
            &[],
            Errno::NoSpc,
        ),
        bad(
            "read above request_bytes_max",
            READ,
            0,
            (1 << 20) + 1,
            &[],
            Errno::Inval,
        ),
        bad(
            "write above request_bytes_max",
            WRITE,
            0,
            big.len() as u32,
            big,
            Errno::Inval,
        ),
        bad("unknown command", 42, 0, 4096, &[], Errno::Inval),
    ]
}

/// Every bad request gets its errno without reaching the export, and the connection keeps
/// working: the following read returns the right data ("Error values", "Request types").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_errors_and_the_connection_keeps_working() {
    let (server, disk) = server(small()).await;
    let expected = pattern(SIZE as usize, 1);
    let mut client = RawClient::open(&server.socket, "disk").await;
    let big = vec![0xee_u8; (1 << 20) + 4096];
    let cases = bad_requests(&big);
    for case in &cases {
        let status = client
            .command(case.kind, 0, case.offset, case.length, case.payload)
            .await;
        assert_eq!(status, Err(case.errno), "{}", case.what);
        assert_eq!(
            client.read(4096, 4096).await,
            Ok(expected[4096..8192].to_vec()),
            "after {}",
            case.what
        );
    }
    assert_eq!(
        disk.submitted(),
        cases.len(),
        "only the follow-up reads reached the export"
    );
    assert_eq!(
        disk.contents(),
        expected,
        "no rejected write changed the export"
    );
}

/// Zero-length requests: the spec leaves them open but forbids disconnecting; they succeed
/// without reaching the export.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_length_requests_succeed_without_submitting() {
    let (server, disk) = server(small()).await;
    let mut client = RawClient::open(&server.socket, "disk").await;
    assert_eq!(client.read(SIZE, 0).await, Ok(vec![]));
    assert_eq!(client.write(0, &[]).await, Ok(()));
    assert_eq!(client.command(TRIM, 0, 0, 0, &[]).await, Ok(()));
    assert_eq!(client.command(WRITE_ZEROES, 0, 0, 0, &[]).await, Ok(()));
    assert_eq!(disk.submitted(), 0);
    assert_eq!(client.read(0, 4).await, Ok(pattern(4, 1)));
}

/// Read-only exports answer writes with EPERM; commands and flags an export did not advertise
/// are EINVAL ("Transmission flags", "Command flags").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unadvertised_capabilities_are_refused() {
    let (server, _) = server(small()).await;
    let mut read_only = RawClient::open(&server.socket, "ro").await;
    assert_eq!(read_only.write(0, &[1; 4096]).await, Err(Errno::Perm));
    assert_eq!(
        read_only.command(WRITE_ZEROES, 0, 0, 4096, &[]).await,
        Err(Errno::Perm)
    );
    assert_eq!(
        read_only.command(TRIM, 0, 0, 4096, &[]).await,
        Err(Errno::Perm)
    );
    assert_eq!(read_only.read(0, 4096).await, Ok(vec![7; 4096]));
    let mut bare = RawClient::open(&server.socket, "bare").await;
    assert_eq!(bare.command(FLUSH, 0, 0, 0, &[]).await, Err(Errno::Inval));
    assert_eq!(
        bare.command(WRITE, FUA, 0, 4, &[1, 2, 3, 4]).await,
        Err(Errno::Inval)
    );
    assert_eq!(bare.command(TRIM, 0, 0, 4096, &[]).await, Err(Errno::Inval));
    assert_eq!(
        bare.command(WRITE_ZEROES, 0, 0, 4096, &[]).await,
        Err(Errno::Inval)
    );
    assert_eq!(bare.read(0, 4096).await, Ok(vec![9; 4096]));
    assert_eq!(bare.write(0, &[1, 2, 3, 4]).await, Ok(()));
    assert_eq!(bare.read(0, 5).await, Ok(vec![1, 2, 3, 4, 9]));
}

/// FUA is passed through when advertised, on writes and (spec: "valid for all commands") reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fua_and_flush_reach_the_export() {
    let (server, disk) = server(small()).await;
    let mut client = RawClient::open(&server.socket, "disk").await;
    assert_eq!(client.command(WRITE, FUA, 0, 3, &[5, 6, 7]).await, Ok(()));
    assert_eq!(client.command(FLUSH, 0, 0, 0, &[]).await, Ok(()));
    assert_eq!(
        client.command(WRITE_ZEROES, FUA | 2, 1, 1, &[]).await,
        Ok(())
    );
    assert_eq!(client.read(0, 4).await, Ok(vec![5, 0, 7, pattern(4, 1)[3]]));
    assert_eq!(disk.fua_requests(), 2);
}

/// A wrong request magic ends that connection only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_request_magic_closes_only_that_connection() {
    let (server, _) = server(small()).await;
    let mut other = RawClient::open(&server.socket, "disk").await;
    let mut client = RawClient::open(&server.socket, "disk").await;
    client.send(&[0x12; 28]).await;
    client.expect_closed().await;
    assert_eq!(other.read(0, 8).await, Ok(pattern(8, 1)));
    let mut fresh = RawClient::open(&server.socket, "disk").await;
    assert_eq!(fresh.read(8, 8).await, Ok(pattern(16, 1)[8..].to_vec()));
}

/// Broken handshakes (unknown client flags, bad option magic, oversized option, truncated
/// option) close only their own connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_handshakes_close_only_their_connection() {
    let (server, _) = server(small()).await;
    let mut established = RawClient::open(&server.socket, "disk").await;
    RawClient::connect_with_flags(&server.socket, 1 << 7)
        .await
        .expect_closed()
        .await;
    let mut bad_magic = RawClient::connect(&server.socket).await;
    bad_magic
        .send(&[&b"IHAVEOPX"[..], &[0, 0, 0, 7, 0, 0, 0, 0]].concat())
        .await;
    bad_magic.expect_closed().await;
    let mut oversized = RawClient::connect(&server.socket).await;
    oversized
        .send(&[&b"IHAVEOPT"[..], &[0, 0, 0, 7, 0, 1, 0, 0]].concat())
        .await;
    assert!(matches!(
        oversized.option_reply().await.body,
        OptionReplyBody::Error {
            error: OptionError::TooBig,
            ..
        }
    ));
    oversized.expect_closed().await;
    let mut truncated = RawClient::connect(&server.socket).await;
    truncated
        .send(&[&b"IHAVEOPT"[..], &[0, 0, 0, 7, 0, 0, 0, 40, 1, 2]].concat())
        .await;
    truncated.stream.shutdown().await.unwrap();
    truncated.expect_closed().await;
    assert_eq!(established.read(0, 8).await, Ok(pattern(8, 1)));
    assert_eq!(
        RawClient::open(&server.socket, "disk")
            .await
            .read(0, 8)
            .await,
        Ok(pattern(8, 1))
    );
}

/// "Transmission": replies need not follow request order. A parked read is overtaken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_arrive_out_of_order() {
    let (server, disk) = server(small()).await;
    disk.set_behaviour(Behaviour {
        park_reads_at: Some(0),
        ..Behaviour::default()
    });
    let mut client = RawClient::open(&server.socket, "disk").await;
    let slow = client.request(READ, 0, 0, 512, &[]).await;
    let fast = client.request(READ, 0, 512, 512, &[]).await;
    let first = client.reply(|_| 512).await;
    assert_eq!(
        (first.cookie, first.data),
        (fast, pattern(1024, 1)[512..].to_vec())
    );
    wait_until("the slow read is parked", || disk.parked() == 1).await;
    disk.release_parked();
    let second = client.reply(|_| 512).await;
    assert_eq!((second.cookie, second.data), (slow, pattern(512, 1)));
}

/// A completion dropped without an answer still produces a reply: EIO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_completion_replies_eio() {
    let (server, disk) = server(small()).await;
    disk.set_behaviour(Behaviour {
        drop_reads_at: Some(4096),
        ..Behaviour::default()
    });
    let mut client = RawClient::open(&server.socket, "disk").await;
    assert_eq!(client.read(4096, 512).await, Err(Errno::Io));
    assert_eq!(client.read(0, 512).await, Ok(pattern(512, 1)));
}

/// NBD_CMD_DISC: outstanding requests are answered before the server closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_waits_for_outstanding_replies() {
    let (server, disk) = server(small()).await;
    disk.set_behaviour(Behaviour {
        park_reads_at: Some(0),
        ..Behaviour::default()
    });
    let mut client = RawClient::open(&server.socket, "disk").await;
    let cookie = client.request(READ, 0, 0, 64, &[]).await;
    client.request(DISC, 0, 0, 0, &[]).await;
    wait_until("the read is parked", || disk.parked() == 1).await;
    disk.release_parked();
    let reply = client.reply(|_| 64).await;
    assert_eq!(
        (reply.cookie, reply.error, reply.data),
        (cookie, None, pattern(64, 1))
    );
    client.expect_closed().await;
}

/// At most in_flight_max_per_connection requests are outstanding; the rest wait unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_limit_applies_backpressure() {
    let config = ServerConfig {
        in_flight_max_per_connection: 2,
        ..small()
    };
    let (server, disk) = server(config).await;
    disk.set_behaviour(Behaviour {
        park_reads_at: Some(0),
        ..Behaviour::default()
    });
    let mut client = RawClient::open(&server.socket, "disk").await;
    for _ in 0..3 {
        client.request(READ, 0, 0, 16, &[]).await;
    }
    wait_until("two reads are parked", || disk.parked() == 2).await;
    // Negative check: give the reader time it would need to take the third request.
    let observe_until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    while std::time::Instant::now() < observe_until {
        assert_eq!(
            disk.submitted(),
            2,
            "a third request was read beyond the limit"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    disk.release_parked();
    for _ in 0..2 {
        assert_eq!(client.reply(|_| 16).await.data, pattern(16, 1));
    }
    wait_until("the third read is parked", || disk.parked() == 1).await;
    disk.release_parked();
    assert_eq!(client.reply(|_| 16).await.data, pattern(16, 1));
}

/// The payload budget is shared by every connection: a read that would exceed it waits, on
/// another connection too, until the budget comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_budget_applies_backpressure_across_connections() {
    let config = ServerConfig {
        payload_budget: ServerConfig::budget(256),
        ..small()
    };
    let (server, disk) = server(config).await;
    disk.set_behaviour(Behaviour {
        park_reads_at: Some(0),
        ..Behaviour::default()
    });
    let mut first = RawClient::open(&server.socket, "disk").await;
    let mut second = RawClient::open(&server.socket, "disk").await;
    first.request(READ, 0, 0, 1 << 20, &[]).await;
    wait_until("the 1 MiB read is parked", || disk.parked() == 1).await;
    second.request(READ, 0, 4096, 4096, &[]).await;
    // Negative check: give the second connection time it would need to submit.
    let observe_until = std::time::Instant::now() + std::time::Duration::from_millis(200);
    while std::time::Instant::now() < observe_until {
        assert_eq!(
            disk.submitted(),
            1,
            "a read was submitted beyond the shared budget"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    disk.release_parked();
    assert_eq!(first.reply(|_| 1 << 20).await.error, None);
    assert_eq!(second.reply(|_| 4096).await.error, None);
}

/// Many pipelined writes and reads on several connections (the export can multi-conn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_on_parallel_connections() {
    let (server, disk) = server(ServerConfig::default()).await;
    let tasks: Vec<_> = (0..4_u8)
        .map(|connection| {
            let socket = server.socket.clone();
            tokio::spawn(async move {
                let mut client = RawClient::open(&socket, "disk").await;
                let base = u64::from(connection) * (SIZE / 4);
                let chunk = pattern(4096, connection + 10);
                for block in 0..64_u64 {
                    client
                        .request(WRITE, 0, base + block * 4096, 4096, &chunk)
                        .await;
                }
                for _ in 0..64 {
                    assert_eq!(client.reply(|_| 0).await.error, None);
                }
                for block in 0..64_u64 {
                    client
                        .request(READ, 0, base + block * 4096, 4096, &[])
                        .await;
                }
                for _ in 0..64 {
                    assert_eq!(client.reply(|_| 4096).await.data, chunk);
                }
            })
        })
        .collect();
    for task in tasks {
        within("connection task", task).await.unwrap();
    }
    let contents = disk.contents();
    for connection in 0..4_u8 {
        let base = usize::from(connection) * (SIZE as usize / 4);
        assert_eq!(
            contents[base..base + 4096],
            pattern(4096, connection + 10)[..]
        );
    }
}

/// A config the pool cannot satisfy is refused before the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_config_is_refused() {
    let config = ServerConfig {
        request_bytes_max: 100,
        ..ServerConfig::default()
    };
    assert!(config.validate().is_err());
    let (a, _b) = tokio::net::UnixStream::pair().unwrap();
    let registry: Arc<dyn nbd::ExportRegistry> = Arc::new(MemRegistry::default());
    let result = nbd::serve_connection(a, registry, Arc::new(config)).await;
    assert!(matches!(result, Err(nbd::NbdError::InvalidConfig(_))));
}

/// A large write to an export that streams writes is submitted before its payload is read,
/// and the export sees every byte; small writes still arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_writes_deliver_every_byte() {
    let (server, disk) = server(small()).await;
    disk.set_behaviour(Behaviour {
        stream_writes_from: Some(64 * 1024),
        ..Behaviour::default()
    });
    let mut client = RawClient::open(&server.socket, "disk").await;
    let big = pattern(256 * 1024, 42);
    assert_eq!(client.write(4096, &big).await, Ok(()));
    assert_eq!(client.write(0, &[1, 2, 3]).await, Ok(()));
    assert_eq!(disk.streamed(), (1, 0));
    assert_eq!(client.read(4096, big.len() as u32).await, Ok(big));
    assert_eq!(client.read(0, 4).await, Ok(vec![1, 2, 3, pattern(4, 1)[3]]));
}

/// A client that goes away in the middle of a streaming write's payload aborts that payload;
/// the export is told, nothing of it is written, and other clients are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_write_cut_short_is_aborted() {
    let (server, disk) = server(small()).await;
    disk.set_behaviour(Behaviour {
        stream_writes_from: Some(64 * 1024),
        ..Behaviour::default()
    });
    let mut client = RawClient::open(&server.socket, "disk").await;
    let header_only = client.request(WRITE, 0, 0, 128 * 1024, &[]).await;
    client.send(&[0xEE; 1000]).await;
    drop((client, header_only));
    wait_until("the export saw the abort", || disk.streamed() == (1, 1)).await;
    let mut other = RawClient::open(&server.socket, "disk").await;
    assert_eq!(other.read(0, 2000).await, Ok(pattern(2000, 1)));
}

/// NBD_OPT_INFO opens through `ExportRegistry::open_for_info` (the daemon does not
/// auto-promote for it), NBD_OPT_GO through `open`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_opens_for_information_only_and_go_opens_for_use() {
    let (server, _) = server(small()).await;
    let mut client = RawClient::connect(&server.socket).await;
    let query = ExportQuery {
        name: "info-shy".to_owned(),
        items: vec![],
    };
    client.send_option(&ClientOption::Info(query)).await;
    let info = client.final_replies().await;
    assert!(
        matches!(
            info.last().map(|reply| &reply.body),
            Some(OptionReplyBody::Error { .. })
        ),
        "INFO went through open_for_info: {info:?}"
    );
    let replies = client.go("info-shy", &[]).await;
    assert_eq!(
        replies.last().map(|reply| &reply.body),
        Some(&OptionReplyBody::Ack),
        "{replies:?}"
    );
}
