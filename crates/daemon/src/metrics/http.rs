//! The little HTTP/1.1 the metrics listener speaks, as pure functions: find the end of a
//! request head, parse it, route it, and build the response bytes.
//!
//! Invariants: a head longer than [`REQUEST_HEAD_BYTES_MAX`] is refused before it is parsed;
//! parsing never panics and returns a typed [`BadRequest`] for anything that is not
//! `METHOD TARGET HTTP/1.x` followed by `name: value` lines in printable ASCII; every
//! response carries `Content-Length` and `Connection: close` (one request per connection).

/// The most bytes a request head (request line, headers and the blank line) may take; a
/// scraper's head is a few hundred bytes.
pub(crate) const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// The content type of the exposition format 0.0.4.
pub(crate) const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why a request head is refused (answered `400 Bad Request`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadRequest {
    /// The head did not end within [`REQUEST_HEAD_BYTES_MAX`] bytes.
    #[error("the request head is longer than {REQUEST_HEAD_BYTES_MAX} bytes")]
    TooLarge,
    /// The client closed the connection (or it failed) inside the head.
    #[error("the connection ended inside the request head")]
    Truncated,
    /// The head holds a byte that is neither printable ASCII nor CR, LF or TAB.
    #[error("the request head is not printable ASCII")]
    NotText,
    /// The request line is not `METHOD TARGET VERSION`.
    #[error("malformed request line")]
    RequestLine,
    /// The version is neither HTTP/1.0 nor HTTP/1.1.
    #[error("unsupported HTTP version {0:?}")]
    Version(String),
    /// A header line is not `name: value`.
    #[error("malformed header line")]
    Header,
}

/// A parsed request head: what routing needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestHead {
    /// The method, as sent (methods are case-sensitive).
    pub(crate) method: String,
    /// The request target without its query string.
    pub(crate) path: String,
}

/// What to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `GET /metrics` (with the body) or `HEAD /metrics` (without).
    Metrics { with_body: bool },
    /// Any other path: 404.
    NotFound,
    /// A method other than GET and HEAD: 405.
    MethodNotAllowed,
}

/// Response status codes the listener uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// 200: the metrics.
    Ok,
    /// 400: a head that is not a request (see [`BadRequest`]).
    BadRequest,
    /// 404: a path other than `/metrics`.
    NotFound,
    /// 405: a method other than GET and HEAD.
    MethodNotAllowed,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Status::Ok => "200 OK",
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
        }
    }
}

/// The length of the head at the start of `buffer` (through the blank line that ends it),
/// once it is complete. Bare LF line ends are accepted as well as CRLF.
pub(crate) fn head_end(buffer: &[u8]) -> Option<usize> {
    let mut index = 0;
    while index < buffer.len() {
        if buffer[index] == b'\n' {
            match buffer.get(index + 1..) {
                Some([b'\n', ..]) => return Some(index + 2),
                Some([b'\r', b'\n', ..]) => return Some(index + 3),
                _ => {}
            }
        }
        index += 1;
    }
    None
}

/// tchar of RFC 9110: the characters of methods and header names.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a complete head (as delimited by [`head_end`]).
pub(crate) fn parse_head(head: &[u8]) -> Result<RequestHead, BadRequest> {
    if head.len() > REQUEST_HEAD_BYTES_MAX {
        return Err(BadRequest::TooLarge);
    }
    if !head
        .iter()
        .all(|&b| b == b'\r' || b == b'\n' || b == b'\t' || (b' '..=b'~').contains(&b))
    {
        return Err(BadRequest::NotText);
    }
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::NotText)?;
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Err(BadRequest::RequestLine);
    };
    if !is_token(method) || target.is_empty() || target.contains('\t') {
        return Err(BadRequest::RequestLine);
    }
    if *version != "HTTP/1.1" && *version != "HTTP/1.0" {
        return Err(BadRequest::Version((*version).to_string()));
    }
    for line in lines.take_while(|line| !line.is_empty()) {
        let Some((name, _value)) = line.split_once(':') else {
            return Err(BadRequest::Header);
        };
        if !is_token(name) {
            return Err(BadRequest::Header);
        }
    }
    let path = target
        .split_once('?')
        .map_or(*target, |(path, _query)| path);
    Ok(RequestHead {
        method: (*method).to_string(),
        path: path.to_string(),
    })
}

/// What to answer to `head`: only GET and HEAD, only `/metrics`.
pub(crate) fn route(head: &RequestHead) -> Route {
    let with_body = match head.method.as_str() {
        "GET" => true,
        "HEAD" => false,
        _ => return Route::MethodNotAllowed,
    };
    if head.path == "/metrics" {
        Route::Metrics { with_body }
    } else {
        Route::NotFound
    }
}

/// The bytes of a response: status line, headers, and `body` unless `with_body` is false
/// (HEAD), in which case `Content-Length` still gives the body's length.
pub(crate) fn response(status: Status, content_type: &str, body: &str, with_body: bool) -> Vec<u8> {
    let allow = if status == Status::MethodNotAllowed {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: \
         close\r\n\r\n",
        status.line(),
        body.len()
    );
    let mut bytes = head.into_bytes();
    if with_body {
        bytes.extend_from_slice(body.as_bytes());
    }
    bytes
}

/// A short plain-text error response.
pub(crate) fn error_response(status: Status, message: &str) -> Vec<u8> {
    response(
        status,
        "text/plain; charset=utf-8",
        &format!("{message}\n"),
        true,
    )
}
