//! Fuzz target `linkemu_control`: the link emulator's control socket, request lines
//! ([`linkemu::control::parse_request`], [`linkemu::control::apply`],
//! [`linkemu::control::handle_line`]) and the duration, size and rate parsers of
//! `linkemu::parse` they share with the command line.
//!
//! Input: the text of one line (invalid UTF-8 is replaced).
//!
//! Properties: nothing panics; a request that applies gives a link that passes its own
//! checks and renders; every reply serializes; a parsed duration, size or rate, written back
//! in its base unit, parses to the same value, and a rate is at least 1 byte/s.

use linkemu::control::{apply, handle_line, parse_request, LinkView};
use linkemu::{parse, Link};

/// The target's body.
pub fn run(data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    if let Ok(request) = parse_request(&line) {
        if let Ok(link) = apply(Link::default(), &request) {
            assert!(link.check().is_ok(), "an applied link passes its checks");
            assert!(serde_json::to_string(&LinkView::from(&link)).is_ok());
        }
    }
    let reply = handle_line(&[], &line);
    assert!(
        serde_json::to_string(&reply).is_ok(),
        "every reply serializes"
    );
    check_units(&line);
}

/// Round trips of the unit parsers through their base units.
fn check_units(text: &str) {
    if let Ok(duration) = parse::duration(text) {
        let again = parse::duration(&format!("{}ns", duration.as_nanos()));
        assert_eq!(again.ok(), Some(duration), "duration round trip");
    }
    if let Ok(bytes) = parse::size_bytes(text) {
        let again = parse::size_bytes(&bytes.to_string());
        assert_eq!(again.ok(), Some(bytes), "size round trip");
    }
    if let Ok(Some(rate)) = parse::rate_bytes_per_s(text) {
        assert!(rate >= 1, "a rate is at least 1 byte/s");
        let again = parse::rate_bytes_per_s(&rate.to_string());
        assert_eq!(again.ok(), Some(Some(rate)), "rate round trip");
    }
}
