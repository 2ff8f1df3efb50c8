//! Fuzz target `admin_line`: the admin protocol's line decoder, for requests (what a node
//! reads from its admin socket) and replies (what the CLI reads back).
//!
//! Input: one line (any bytes; the decoder is given them as read).
//!
//! Properties: decoding never panics; a decoded request encodes to one line (one `\n`, at
//! the end) that decodes back to an equal request; a decoded reply
//! encodes to one line that decodes again (replies carry floats, whose text form serde_json
//! does not promise to round-trip bit for bit, so only the shape is compared).

use admin::{decode_line, encode_line, Reply, Request};

/// The target's body.
pub fn run(data: &[u8]) {
    if let Ok(request) = decode_line::<Request>(data) {
        let line = encode_line(&request);
        check_one_line(&line);
        let again = decode_line::<Request>(&line);
        assert_eq!(again.ok(), Some(request), "request round trip");
    }
    if let Ok(reply) = decode_line::<Reply>(data) {
        let line = encode_line(&reply);
        check_one_line(&line);
        let again = decode_line::<Reply>(&line);
        assert!(again.is_ok(), "an encoded reply decodes: {again:?}");
        let same_kind = again
            .as_ref()
            .is_ok_and(|again| std::mem::discriminant(again) == std::mem::discriminant(&reply));
        assert!(same_kind, "reply round trip keeps the kind");
    }
}

/// `line` is exactly one protocol line.
fn check_one_line(line: &[u8]) {
    assert_eq!(line.last(), Some(&b'\n'));
    let newlines = line.iter().filter(|&&byte| byte == b'\n').count();
    assert_eq!(newlines, 1, "one line");
}
