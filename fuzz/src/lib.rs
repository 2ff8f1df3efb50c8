//! The bodies of tandem's fuzz targets, one module per parser of untrusted input, and the
//! generator of their seed corpora.
//!
//! Each `fuzz_targets/<name>.rs` is a one-line libFuzzer wrapper around the function of the
//! same name here, so the checks also run on stable Rust in this crate's tests (over the
//! committed corpus), without libFuzzer.
//!
//! Invariants:
//! - A target panics only when a property of the parser under test is broken: decoding
//!   panicked, a decoded value re-encodes to something else, or a decoded length or count lies
//!   outside its bounds. Rejecting the input with a typed error is always fine.
//! - No target touches the file system, the network or a clock (the config target uses
//!   [`config::parse_str_isolated`], which refuses `include`).
//! - Work per input is bounded by the input's length (loops are capped), so a slow input is a
//!   real slowness of the parser, not of the harness.

pub mod admin_line;
pub mod config_parse;
pub mod input;
pub mod linkemu_control;
pub mod meta_activity_log;
pub mod meta_bitmap;
pub mod meta_superblock;
pub mod nbd_handshake;
pub mod nbd_request;
pub mod nbd_server;
pub mod seeds;
pub mod wire_message;
pub mod wire_stream;

/// A target's body: panics when a property of its parser is broken.
pub type Body = fn(&[u8]);

/// Every target's name with its body.
pub const TARGETS: [(&str, Body); 11] = [
    ("nbd_handshake", nbd_handshake::run),
    ("nbd_request", nbd_request::run),
    ("nbd_server", nbd_server::run),
    ("wire_stream", wire_stream::run),
    ("wire_message", wire_message::run),
    ("config_parse", config_parse::run),
    ("meta_superblock", meta_superblock::run),
    ("meta_activity_log", meta_activity_log::run),
    ("meta_bitmap", meta_bitmap::run),
    ("linkemu_control", linkemu_control::run),
    ("admin_line", admin_line::run),
];
