//! Framing tests: the exact JSON of each message kind, round trips, and the line bound.

use super::*;
use crate::fixtures::{report, two_nodes};

#[track_caller]
fn check_request(request: Request, expected: &str) {
    let line = encode_line(&request);
    assert_eq!(String::from_utf8_lossy(&line), format!("{expected}\n"));
    let back: Request = decode_line(&line).expect("decodes");
    assert_eq!(back, request);
}

#[track_caller]
fn check_reply(reply: Reply, expected: &str) {
    let line = encode_line(&reply);
    assert_eq!(String::from_utf8_lossy(&line), format!("{expected}\n"));
    let back: Reply = decode_line(&line).expect("decodes");
    assert_eq!(back, reply);
}

#[test]
fn requests_are_tagged_by_cmd() {
    check_request(
        Request::Status { resource: None },
        r#"{"cmd":"status","resource":null}"#,
    );
    check_request(
        Request::Primary {
            resource: Some("r0".to_string()),
            force: true,
        },
        r#"{"cmd":"primary","resource":"r0","force":true}"#,
    );
    check_request(
        Request::Disconnect {
            resource: None,
            peer: Some("bob".to_string()),
        },
        r#"{"cmd":"disconnect","resource":null,"peer":"bob"}"#,
    );
    check_request(
        Request::NewCurrentUuid {
            resource: Some("r0".to_string()),
            clear_bitmap: true,
        },
        r#"{"cmd":"new-current-uuid","resource":"r0","clear_bitmap":true}"#,
    );
    check_request(
        Request::Connect {
            resource: None,
            peer: None,
            discard_my_data: true,
        },
        r#"{"cmd":"connect","resource":null,"peer":null,"discard_my_data":true}"#,
    );
    check_request(
        Request::Detach {
            resource: Some("r0".to_string()),
        },
        r#"{"cmd":"detach","resource":"r0"}"#,
    );
    check_request(
        Request::Attach { resource: None },
        r#"{"cmd":"attach","resource":null}"#,
    );
    check_request(
        Request::InvalidateRemote {
            resource: None,
            peer: Some("bob".to_string()),
        },
        r#"{"cmd":"invalidate-remote","resource":null,"peer":"bob"}"#,
    );
    check_request(
        Request::PauseSync {
            resource: Some("r0".to_string()),
            peer: None,
        },
        r#"{"cmd":"pause-sync","resource":"r0","peer":null}"#,
    );
    check_request(
        Request::ResumeSync {
            resource: None,
            peer: Some("bob".to_string()),
        },
        r#"{"cmd":"resume-sync","resource":null,"peer":"bob"}"#,
    );
    check_request(
        Request::ResumeIo {
            resource: Some("r0".to_string()),
        },
        r#"{"cmd":"resume-io","resource":"r0"}"#,
    );
    check_request(
        Request::Resize {
            resource: Some("r0".to_string()),
            volume: None,
            size_bytes: Some(1 << 30),
            assume_clean: true,
            assume_peer_has_space: false,
        },
        concat!(
            r#"{"cmd":"resize","resource":"r0","volume":null,"size_bytes":1073741824,"#,
            r#""assume_clean":true,"assume_peer_has_space":false}"#,
        ),
    );
    check_request(
        Request::Events {
            resource: None,
            statistics: false,
            full: false,
        },
        r#"{"cmd":"events","resource":null,"statistics":false}"#,
    );
    check_request(
        Request::Events {
            resource: None,
            statistics: false,
            full: true,
        },
        r#"{"cmd":"events","resource":null,"statistics":false,"full":true}"#,
    );
}

#[test]
fn replies_are_tagged_by_reply() {
    check_reply(
        Reply::Ok { message: None },
        r#"{"reply":"ok","message":null}"#,
    );
    check_reply(
        Reply::Error {
            message: "r9: no such resource".to_string(),
        },
        r#"{"reply":"error","message":"r9: no such resource"}"#,
    );
    check_reply(
        Reply::Event {
            line: "exists -".to_string(),
        },
        r#"{"reply":"event","line":"exists -"}"#,
    );
    let status = Reply::Status(report(vec![two_nodes()]));
    let line = encode_line(&status);
    assert!(line.starts_with(br#"{"reply":"status","resources":[{"name":"r0""#));
    assert_eq!(decode_line::<Reply>(&line).expect("decodes"), status);
    check_reply(
        Reply::Generations {
            records: Vec::new(),
        },
        r#"{"reply":"generations","records":[]}"#,
    );
}

#[test]
fn optional_fields_may_be_left_out_and_line_endings_vary() {
    let request: Request = decode_line(b"{\"cmd\":\"primary\",\"resource\":\"r0\"}\r\n")
        .expect("force defaults to false");
    assert_eq!(
        request,
        Request::Primary {
            resource: Some("r0".to_string()),
            force: false
        }
    );
    let request: Request = decode_line(br#"{"cmd":"up"}"#).expect("resource defaults to all");
    assert_eq!(request, Request::Up { resource: None });
}

#[test]
fn malformed_lines_are_errors() {
    for line in [
        &b""[..],
        b"{",
        b"{\"cmd\":\"reboot\"}",
        b"{} {}",
        b"\"status\"",
    ] {
        let result = decode_line::<Request>(line);
        assert!(
            matches!(result, Err(AdminError::Malformed(_))),
            "{line:?}: {result:?}"
        );
    }
}

#[test]
fn lines_longer_than_the_bound_are_refused_unparsed() {
    let mut line = encode_line(&Reply::Event {
        line: "x".repeat(LINE_BYTES_MAX),
    });
    let bytes = line.len();
    assert!(matches!(
        decode_line::<Reply>(&line),
        Err(AdminError::LineTooLong { bytes: refused }) if refused == bytes
    ));
    // Exactly at the bound, newline included, still decodes.
    let overhead = bytes - LINE_BYTES_MAX;
    line = encode_line(&Reply::Event {
        line: "x".repeat(LINE_BYTES_MAX - overhead),
    });
    assert_eq!(line.len(), LINE_BYTES_MAX);
    assert!(decode_line::<Reply>(&line).is_ok());
}

#[test]
fn connect_from_an_older_client_does_not_discard_data() {
    let request = crate::decode_line(br#"{"cmd":"connect","resource":"r0","peer":null}"#);
    assert!(
        matches!(
            request,
            Ok(Request::Connect {
                discard_my_data: false,
                ..
            })
        ),
        "{request:?}"
    );
}
