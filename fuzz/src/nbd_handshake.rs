//! Fuzz target `nbd_handshake`: the NBD server's side of fixed-newstyle negotiation (client
//! flags, option headers, option data) and the client-side option-reply parser.
//!
//! Input: one mode byte, then a byte stream. Mode bit 0 clear: the stream is exactly what a
//! client sends (4 flag bytes, then option headers with their magic and data), cut the way the
//! server cuts it (at most 256 options of at most 4096 data bytes). Bit 0 set: options are
//! `code: u32, length: u16, data`, and the harness writes the header with the right magic, so
//! the fuzzer spends its time on the option data. Bit 1 set: the rest of the stream after the
//! options is parsed as server option replies.
//!
//! Properties: parsers never panic; a parsed header re-encodes to the bytes it came from;
//! client flags round-trip; a parsed option keeps its code and re-encodes to bytes that parse
//! back to the same option (and, for options whose data is kept, to the same data); a parsed
//! `NBD_OPT_INFO`/`NBD_OPT_GO` query accounts for every data byte; a parsed reply used no more
//! bytes than it was given and re-encodes to a reply that parses back equal.

use nbd::protocol::{
    parse_client_flags, parse_option, parse_option_header, parse_option_reply, ClientOption,
    OptionHeader, OPTION_HEADER_LEN,
};

use crate::input::Input;

/// Options the server reads per connection (its `OPTION_COUNT_MAX`).
const OPTION_COUNT_MAX: usize = 256;
/// Longest option data the server reads (its `OPTION_DATA_BYTES_MAX`).
const OPTION_DATA_BYTES_MAX: u32 = 4096;
/// Replies parsed per input, to bound the work.
const REPLY_COUNT_MAX: usize = 256;

/// The target's body.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let flags = input.array::<4>();
    if let Ok(parsed) = parse_client_flags(&flags) {
        assert_eq!(parsed.to_wire(), flags, "client flags round trip");
    }
    for _ in 0..OPTION_COUNT_MAX {
        if input.is_empty() {
            break;
        }
        let header = if mode & 1 == 0 {
            raw_header(&mut input)
        } else {
            let option = input.u32();
            let length = u32::from(input.u16());
            Some(OptionHeader { option, length })
        };
        let Some(header) = header else { break };
        if header.length > OPTION_DATA_BYTES_MAX {
            break;
        }
        let Ok(length) = usize::try_from(header.length) else {
            break;
        };
        check_option(header.option, input.take(length));
    }
    if mode & 2 != 0 {
        check_replies(input.rest());
    }
}

/// Reads and checks one raw option header; None where the server would close.
fn raw_header(input: &mut Input<'_>) -> Option<OptionHeader> {
    let bytes = input.take(OPTION_HEADER_LEN);
    let header = parse_option_header(bytes).ok()?;
    assert_eq!(
        header.encode().as_slice(),
        bytes,
        "option header round trip"
    );
    Some(header)
}

/// Parses one option's data and checks the round trip.
fn check_option(code: u32, data: &[u8]) {
    let parsed = match parse_option(code, data) {
        Ok(parsed) => parsed,
        Err(error) => {
            let _ = error.to_string();
            return;
        }
    };
    assert_eq!(parsed.code(), code, "an option keeps its code");
    if let ClientOption::Info(query) | ClientOption::Go(query) = &parsed {
        let accounted = 4 + query.name.len() + 2 + 2 * query.items.len();
        assert_eq!(accounted, data.len(), "a query accounts for every byte");
    }
    let mut encoded = Vec::new();
    parsed.encode(&mut encoded);
    let (head, body) = encoded.split_at(OPTION_HEADER_LEN.min(encoded.len()));
    let header = parse_option_header(head);
    assert!(
        header.is_ok(),
        "an encoded option has a valid header: {header:?}"
    );
    let again = parse_option(code, body);
    assert_eq!(again.as_ref().ok(), Some(&parsed), "option round trip");
    let data_kept = matches!(
        parsed,
        ClientOption::ExportName { .. } | ClientOption::Info(_) | ClientOption::Go(_)
    );
    if data_kept {
        assert_eq!(
            body, data,
            "an option with kept data re-encodes to its data"
        );
    }
}

/// Parses option replies off the front of `bytes` until one fails.
fn check_replies(mut bytes: &[u8]) {
    for _ in 0..REPLY_COUNT_MAX {
        let (reply, used) = match parse_option_reply(bytes) {
            Ok(parsed) => parsed,
            Err(error) => {
                let _ = error.to_string();
                return;
            }
        };
        assert!(used <= bytes.len(), "a reply uses only the bytes it has");
        let mut encoded = Vec::new();
        reply.encode(&mut encoded);
        let again = parse_option_reply(&encoded);
        assert_eq!(
            again.as_ref().ok(),
            Some(&(reply, encoded.len())),
            "reply round trip"
        );
        bytes = bytes.get(used..).unwrap_or_default();
    }
}
