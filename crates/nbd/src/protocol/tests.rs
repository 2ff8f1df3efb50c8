//! Tests of the sans-IO protocol layer: encode→parse round trips and "arbitrary bytes never
//! panic" for every parser (property tests), plus table tests of [`Verdict::decide`] that cite
//! the proto.md sections they check.

use proptest::prelude::*;

use super::*;
use crate::{Errno, ExportInfo};
use CommandKind::{Read, Trim, Write, WriteZeroes};

const ERRNOS: [Errno; 8] = [
    Errno::Perm,
    Errno::Io,
    Errno::NoMem,
    Errno::Inval,
    Errno::NoSpc,
    Errno::Overflow,
    Errno::NotSup,
    Errno::Shutdown,
];

const OPTION_ERRORS: [OptionError; 9] = [
    OptionError::Unsup,
    OptionError::Policy,
    OptionError::Invalid,
    OptionError::Platform,
    OptionError::TlsReqd,
    OptionError::Unknown,
    OptionError::Shutdown,
    OptionError::BlockSizeReqd,
    OptionError::TooBig,
];

fn errno() -> impl Strategy<Value = Errno> {
    proptest::sample::select(&ERRNOS[..])
}

fn info_type() -> impl Strategy<Value = InfoType> {
    prop_oneof![
        Just(InfoType::Export),
        Just(InfoType::Name),
        Just(InfoType::Description),
        Just(InfoType::BlockSize),
        (4..=u16::MAX).prop_map(InfoType::Other),
    ]
}

fn query() -> impl Strategy<Value = ExportQuery> {
    ("\\PC{0,40}", proptest::collection::vec(info_type(), 0..8))
        .prop_map(|(name, items)| ExportQuery { name, items })
}

fn client_option() -> impl Strategy<Value = ClientOption> {
    let known = [1, 2, 3, 5, 6, 7, 8];
    prop_oneof![
        "\\PC{0,40}".prop_map(|name| ClientOption::ExportName { name }),
        Just(ClientOption::Abort),
        Just(ClientOption::List),
        Just(ClientOption::StartTls),
        query().prop_map(ClientOption::Info),
        query().prop_map(ClientOption::Go),
        Just(ClientOption::StructuredReply),
        any::<u32>()
            .prop_filter("unknown code", move |code| !known.contains(code))
            .prop_map(|option| ClientOption::Other { option }),
    ]
}

fn option_reply_body() -> impl Strategy<Value = OptionReplyBody> {
    let sizes =
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(minimum, preferred, maximum)| {
            BlockSizes {
                minimum,
                preferred,
                maximum,
            }
        });
    prop_oneof![
        Just(OptionReplyBody::Ack),
        "\\PC{0,40}".prop_map(|name| OptionReplyBody::Server { name }),
        (any::<u64>(), any::<u16>()).prop_map(|(size, flags)| OptionReplyBody::Info(
            InfoReply::Export {
                size,
                flags: TransmissionFlags(flags)
            }
        )),
        "\\PC{0,40}".prop_map(|name| OptionReplyBody::Info(InfoReply::Name(name))),
        sizes.prop_map(|sizes| OptionReplyBody::Info(InfoReply::BlockSize(sizes))),
        (proptest::sample::select(&OPTION_ERRORS[..]), "\\PC{0,40}")
            .prop_map(|(error, message)| OptionReplyBody::Error { error, message }),
    ]
}

fn request_header() -> impl Strategy<Value = RequestHeader> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
    )
        .prop_map(|(flags, kind, cookie, offset, length)| RequestHeader {
            flags,
            kind,
            cookie,
            offset,
            length,
        })
}

proptest! {
    #[test]
    fn client_options_round_trip(option in client_option()) {
        let mut bytes = Vec::new();
        option.encode(&mut bytes);
        let header = parse_option_header(&bytes)?;
        prop_assert_eq!(header.option, option.code());
        prop_assert_eq!(usize::try_from(header.length)?, bytes.len() - OPTION_HEADER_LEN);
        prop_assert_eq!(parse_option(header.option, &bytes[OPTION_HEADER_LEN..])?, option);
    }

    #[test]
    fn option_replies_round_trip(option in any::<u32>(), body in option_reply_body()) {
        let reply = OptionReply { option, body };
        let mut bytes = Vec::new();
        reply.encode(&mut bytes);
        let (parsed, used) = parse_option_reply(&bytes)?;
        prop_assert_eq!(parsed, reply);
        prop_assert_eq!(used, bytes.len());
    }

    #[test]
    fn request_headers_round_trip(header in request_header()) {
        prop_assert_eq!(parse_request_header(&header.encode())?, header);
    }

    #[test]
    fn simple_replies_round_trip(cookie in any::<u64>(), error in proptest::option::of(errno())) {
        let header = SimpleReplyHeader { cookie, error };
        prop_assert_eq!(parse_simple_reply_header(&header.encode())?, header);
    }

    #[test]
    fn client_flags_round_trip(fixed_newstyle in any::<bool>(), no_zeroes in any::<bool>()) {
        let flags = ClientFlags { fixed_newstyle, no_zeroes };
        prop_assert_eq!(parse_client_flags(&flags.to_wire())?, flags);
    }

    #[test]
    fn parsers_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..256),
        code in 0..12_u32,
    ) {
        let _ = parse_client_flags(&bytes);
        let _ = parse_option_header(&bytes);
        let _ = parse_option(code, &bytes);
        let _ = parse_option_reply(&bytes);
        let _ = parse_request_header(&bytes);
        let _ = parse_simple_reply_header(&bytes);
    }

    /// Valid magic followed by arbitrary bytes reaches the deeper branches of each parser.
    #[test]
    fn parsers_never_panic_past_the_magic(tail in proptest::collection::vec(any::<u8>(), 0..128)) {
        let mut reply = OPTION_REPLY_MAGIC.to_be_bytes().to_vec();
        reply.extend_from_slice(&tail);
        let _ = parse_option_reply(&reply);
        let mut request = REQUEST_MAGIC.to_be_bytes().to_vec();
        request.extend_from_slice(&tail);
        let _ = parse_request_header(&request);
        for code in [option::INFO, option::GO, option::EXPORT_NAME] {
            let _ = parse_option(code, &tail);
        }
    }

    /// Whatever the header, a Submit verdict is in bounds and non-empty (proto.md, "Request
    /// types"), and only writes ever leave payload to discard.
    #[test]
    fn submitted_commands_are_in_bounds(
        header in request_header(),
        size in any::<u64>(),
        bits in any::<u16>(),
    ) {
        let limits =
            ExportLimits { size, flags: TransmissionFlags(bits), request_bytes_max: 1 << 25 };
        match Verdict::decide(&header, &limits) {
            Verdict::Submit { command: Admitted::Flush, .. } => {}
            Verdict::Submit { .. } => {
                prop_assert!(header.length > 0);
                let end = header.offset.checked_add(u64::from(header.length));
                prop_assert!(end.is_some_and(|end| end <= size));
            }
            Verdict::Reject { discard_bytes, .. } if discard_bytes > 0 => {
                prop_assert_eq!(header.kind, 1)
            }
            _ => {}
        }
    }
}

fn limits(info: ExportInfo) -> ExportLimits {
    ExportLimits {
        size: info.size,
        flags: TransmissionFlags::from_info(&info),
        request_bytes_max: 1 << 20,
    }
}

fn full() -> ExportInfo {
    ExportInfo {
        size: 1 << 20,
        read_only: false,
        can_flush: true,
        can_fua: true,
        can_trim: true,
        can_write_zeroes: true,
        can_multi_conn: true,
    }
}

fn header(kind: u16, flags: u16, offset: u64, length: u32) -> RequestHeader {
    RequestHeader {
        flags,
        kind,
        cookie: 7,
        offset,
        length,
    }
}

#[track_caller]
fn check(info: ExportInfo, request: RequestHeader, expected: Verdict) {
    assert_eq!(
        Verdict::decide(&request, &limits(info)),
        expected,
        "{request:?} on {info:?}"
    );
}

/// The export size in the decide tests.
const END: u64 = 1 << 20;

fn read_only() -> ExportInfo {
    ExportInfo {
        read_only: true,
        ..full()
    }
}

fn bare() -> ExportInfo {
    ExportInfo {
        size: END,
        ..ExportInfo::default()
    }
}

fn submit(command: Admitted) -> Verdict {
    Verdict::Submit {
        command,
        fua: false,
    }
}

fn reject(rejection: Rejection, discard_bytes: u32) -> Verdict {
    Verdict::Reject {
        rejection,
        discard_bytes,
    }
}

#[test]
fn decide_submits_in_range_commands() {
    // "Request types": in-range commands are submitted.
    check(
        full(),
        header(0, 0, 0, 512),
        submit(Admitted::Read {
            offset: 0,
            length: 512,
        }),
    );
    check(
        full(),
        header(1, 0, END - 1, 1),
        submit(Admitted::Write {
            offset: END - 1,
            length: 1,
        }),
    );
    check(full(), header(3, 0, 0, 0), submit(Admitted::Flush));
    check(
        full(),
        header(6, command_flag::NO_HOLE | command_flag::FUA, 0, 9),
        Verdict::Submit {
            command: Admitted::WriteZeroes {
                offset: 0,
                length: 9,
                no_hole: true,
            },
            fua: true,
        },
    );
    check(full(), header(2, 0, 0, 0), Verdict::Disconnect);
}

#[test]
fn decide_rejects_requests_past_the_end() {
    // "Error values": past the END is EINVAL for read and trim, ENOSPC for writes.
    check(
        full(),
        header(0, 0, END, 1),
        reject(Rejection::OutOfBounds(Read), 0),
    );
    check(
        full(),
        header(1, 0, END - 1, 2),
        reject(Rejection::OutOfBounds(Write), 2),
    );
    check(
        full(),
        header(4, 0, u64::MAX, 1),
        reject(Rejection::OutOfBounds(Trim), 0),
    );
    check(
        full(),
        header(6, 0, END, 1),
        reject(Rejection::OutOfBounds(WriteZeroes), 0),
    );
    assert_eq!(Rejection::OutOfBounds(Write).errno(), Errno::NoSpc);
    assert_eq!(Rejection::OutOfBounds(Trim).errno(), Errno::Inval);
}

#[test]
fn decide_answers_zero_length_requests() {
    // Zero length: unspecified, must not disconnect; answered with success.
    check(full(), header(0, 0, 0, 0), Verdict::Empty);
    check(full(), header(1, 0, END, 0), Verdict::Empty);
}

#[test]
fn decide_rejects_oversized_payloads() {
    // "Size constraints": reads and writes above the maximum payload fail.
    check(
        full(),
        header(0, 0, 0, (1 << 20) + 1),
        reject(Rejection::TooLong((1 << 20) + 1), 0),
    );
    check(
        full(),
        header(1, 0, 0, 1 << 21),
        reject(Rejection::TooLong(1 << 21), 1 << 21),
    );
}

#[test]
fn decide_rejects_unknown_commands() {
    // Unknown commands (CACHE, BLOCK_STATUS, anything else) are EINVAL.
    check(
        full(),
        header(5, 0, 0, 1),
        reject(Rejection::UnknownCommand(5), 0),
    );
    check(
        full(),
        header(99, 0, 0, 1 << 30),
        reject(Rejection::UnknownCommand(99), 0),
    );
}

#[test]
fn decide_refuses_writes_on_read_only_exports() {
    // Read-only exports refuse writes, trims and write-zeroes with EPERM.
    check(
        read_only(),
        header(1, 0, 0, 4),
        reject(Rejection::ReadOnly(Write), 4),
    );
    check(
        read_only(),
        header(4, 0, 0, 4),
        reject(Rejection::ReadOnly(Trim), 0),
    );
    assert_eq!(Rejection::ReadOnly(Write).errno(), Errno::Perm);
}

#[test]
fn decide_checks_command_flags() {
    // "Command flags": unadvertised FUA, flags of other commands, unknown flags are EINVAL.
    check(
        bare(),
        header(1, command_flag::FUA, 0, 4),
        reject(Rejection::InvalidFlags(1), 4),
    );
    check(
        full(),
        header(0, command_flag::NO_HOLE, 0, 4),
        reject(Rejection::InvalidFlags(2), 0),
    );
    check(
        full(),
        header(0, command_flag::DF, 0, 4),
        reject(Rejection::InvalidFlags(4), 0),
    );
    check(
        full(),
        header(0, command_flag::FUA, 0, 4),
        Verdict::Submit {
            command: Admitted::Read {
                offset: 0,
                length: 4,
            },
            fua: true,
        },
    );
}

#[test]
fn decide_rejects_unadvertised_commands() {
    // Commands the export did not advertise are EINVAL.
    check(
        bare(),
        header(3, 0, 0, 0),
        reject(Rejection::NotAdvertised(CommandKind::Flush), 0),
    );
    check(
        bare(),
        header(4, 0, 0, 1),
        reject(Rejection::NotAdvertised(Trim), 0),
    );
    check(
        bare(),
        header(6, 0, 0, 1),
        reject(Rejection::NotAdvertised(WriteZeroes), 0),
    );
}

#[test]
fn transmission_flags_follow_export_info() {
    assert_eq!(
        TransmissionFlags::from_info(&ExportInfo::default()).0,
        TransmissionFlags::HAS_FLAGS
    );
    assert_eq!(TransmissionFlags::from_info(&full()).0, 0b1_0110_1101);
    let read_only = ExportInfo {
        read_only: true,
        ..ExportInfo::default()
    };
    assert_eq!(TransmissionFlags::from_info(&read_only).0, 0b11);
}

#[test]
fn greeting_is_fixed_newstyle_with_no_zeroes() {
    assert_eq!(&GREETING[..8], b"NBDMAGIC");
    assert_eq!(&GREETING[8..16], b"IHAVEOPT");
    assert_eq!(&GREETING[16..], &[0, 3]);
}

#[test]
fn malformed_options_are_errors_not_panics() {
    // NBD_OPT_GO: name length larger than the data.
    assert!(matches!(
        parse_option(option::GO, &[0, 0, 0, 9, b'a', 0, 0]),
        Err(crate::NbdError::MalformedOption { option: 7, .. })
    ));
    // Item count that disagrees with the data length.
    assert!(parse_option(option::INFO, &[0, 0, 0, 0, 0, 2, 0, 1]).is_err());
    // LIST with data.
    assert!(parse_option(option::LIST, &[1]).is_err());
    // ABORT with data is accepted (the spec says to ignore it).
    assert_eq!(
        parse_option(option::ABORT, &[1, 2]).unwrap(),
        ClientOption::Abort
    );
    // Export names must be UTF-8.
    assert!(matches!(
        parse_option(option::EXPORT_NAME, &[0xff]),
        Err(crate::NbdError::NotUtf8)
    ));
    // Unknown client flags are refused.
    assert!(matches!(
        parse_client_flags(&[0, 0, 0, 4]),
        Err(crate::NbdError::UnknownClientFlags(4))
    ));
}

#[test]
fn errno_wire_values_match_the_spec() {
    let expected = [1, 5, 12, 22, 28, 75, 95, 108];
    for (errno, value) in ERRNOS.iter().zip(expected) {
        assert_eq!(errno.to_wire(), value);
        assert_eq!(Errno::from_wire(value), Some(*errno));
    }
    assert_eq!(Errno::from_wire(0), None);
    let full_disk = std::io::Error::from(std::io::ErrorKind::StorageFull);
    assert_eq!(Errno::from_io_error(&full_disk), Errno::NoSpc);
    assert_eq!(Errno::from_io_error(&std::io::Error::other("x")), Errno::Io);
}
