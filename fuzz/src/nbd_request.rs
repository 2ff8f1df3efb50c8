//! Fuzz target `nbd_request`: the NBD transmission phase, request headers and the server's
//! decision on each ([`Verdict::decide`]), plus the client-side simple-reply parser.
//!
//! Input: export limits (`size: u64`, `flags: u16`, `request_bytes_max: u32`), one mode byte,
//! then a stream of 28-byte request headers as a client sends them; a write's payload follows
//! its header and is skipped as the server skips it. Mode bit 0 set: the harness writes each
//! header's magic, so the fuzzer only chooses the fields. Bit 1 set: each header is followed by
//! 16 bytes parsed as a simple reply header.
//!
//! Properties: headers round-trip byte for byte; a submitted command lies inside the export
//! (no overflow), is non-empty (flush aside), within `request_bytes_max` for reads and writes,
//! carries FUA only when advertised and never on a read-only export as a write; a rejected
//! write discards exactly its payload and nothing else discards; an empty verdict is only for
//! a zero length; a parsed reply header re-encodes to its bytes.

use nbd::protocol::{
    parse_request_header, parse_simple_reply_header, Admitted, CommandKind, ExportLimits,
    TransmissionFlags, Verdict, REQUEST_HEADER_LEN, REQUEST_MAGIC, SIMPLE_REPLY_HEADER_LEN,
};

use crate::input::Input;

/// Requests decided per input, to bound the work.
const REQUEST_COUNT_MAX: usize = 1024;

/// The target's body.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let limits = ExportLimits {
        size: input.u64(),
        flags: TransmissionFlags(input.u16() | TransmissionFlags::HAS_FLAGS),
        request_bytes_max: input.u32(),
    };
    let mode = input.u8();
    for _ in 0..REQUEST_COUNT_MAX {
        if input.is_empty() {
            break;
        }
        let mut bytes = input.array::<REQUEST_HEADER_LEN>();
        if mode & 1 == 1 {
            bytes[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        }
        let Ok(header) = parse_request_header(&bytes) else {
            // A wrong magic ends the connection.
            break;
        };
        assert_eq!(header.encode(), bytes, "request header round trip");
        let verdict = Verdict::decide(&header, &limits);
        check_verdict(&header, &limits, verdict);
        if let Verdict::Reject { discard_bytes, .. } = verdict {
            let skip = usize::try_from(discard_bytes).unwrap_or(usize::MAX);
            input.take(skip);
        } else if let Verdict::Submit {
            command: Admitted::Write { length, .. },
            ..
        } = verdict
        {
            input.take(usize::try_from(length).unwrap_or(usize::MAX));
        }
        if mode & 2 == 2 {
            check_reply(input.take(SIMPLE_REPLY_HEADER_LEN));
        }
    }
}

/// Checks the properties of one verdict.
fn check_verdict(header: &nbd::protocol::RequestHeader, limits: &ExportLimits, verdict: Verdict) {
    let kind = CommandKind::from_wire(header.kind);
    match verdict {
        Verdict::Submit { command, fua } => {
            check_admitted(command, limits);
            if fua {
                assert!(limits.flags.contains(TransmissionFlags::SEND_FUA));
            }
        }
        Verdict::Empty => {
            assert_eq!(header.length, 0, "only a zero length is empty");
            assert_ne!(kind, Some(CommandKind::Flush));
        }
        Verdict::Reject {
            rejection,
            discard_bytes,
        } => {
            let expected = if kind == Some(CommandKind::Write) {
                header.length
            } else {
                0
            };
            assert_eq!(discard_bytes, expected, "only a write's payload is skipped");
            let _ = rejection.errno();
        }
        Verdict::Disconnect => assert_eq!(kind, Some(CommandKind::Disc)),
    }
}

/// An admitted command lies inside the export and within the limits.
fn check_admitted(command: Admitted, limits: &ExportLimits) {
    let read_only = limits.flags.contains(TransmissionFlags::READ_ONLY);
    let (offset, length, payload, writes) = match command {
        Admitted::Read { offset, length } => (offset, length, true, false),
        Admitted::Write { offset, length } => (offset, length, true, true),
        Admitted::Trim { offset, length } => {
            assert!(limits.flags.contains(TransmissionFlags::SEND_TRIM));
            (offset, length, false, true)
        }
        Admitted::WriteZeroes { offset, length, .. } => {
            assert!(limits.flags.contains(TransmissionFlags::SEND_WRITE_ZEROES));
            (offset, length, false, true)
        }
        Admitted::Flush => {
            assert!(limits.flags.contains(TransmissionFlags::SEND_FLUSH));
            return;
        }
    };
    assert!(length > 0, "an admitted command is not empty");
    let end = offset.checked_add(u64::from(length));
    assert!(
        end.is_some_and(|end| end <= limits.size),
        "inside the export"
    );
    if payload {
        assert!(
            length <= limits.request_bytes_max,
            "within request_bytes_max"
        );
    }
    if writes {
        assert!(!read_only, "no write on a read-only export");
    }
}

/// A parsed simple reply header re-encodes to its bytes.
fn check_reply(bytes: &[u8]) {
    if let Ok(reply) = parse_simple_reply_header(bytes) {
        assert_eq!(
            reply.encode().as_slice(),
            bytes.get(..SIMPLE_REPLY_HEADER_LEN).unwrap_or_default(),
            "reply header round trip"
        );
    }
}
