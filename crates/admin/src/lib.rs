//! The admin protocol between `tandem` commands and a running node, and the text it prints.
//!
//! A node listens on the unix socket `RUN_DIR/admin.sock`. The protocol is JSON lines: the
//! client sends one [`Request`] line; the node answers with one [`Reply`] line, except for
//! [`Request::Events`], where it streams [`Reply::Event`] lines until the client disconnects.
//!
//! This crate is pure: serde types and text formatting, no I/O, no clock, no randomness. The
//! daemon fills a [`StatusReport`]; the CLI prints it with [`format_status`] (the layout of
//! `drbdsetup status`), [`format_json`] (tandem's schema) or [`format_drbd_json`]
//! (`drbdsetup status --json`'s schema); the daemon turns successive reports into
//! `drbdsetup events2` lines with [`initial_events`] and [`change_events`].
//!
//! Invariants:
//! - A protocol line is at most [`LINE_BYTES_MAX`] bytes, newline included; [`decode_line`]
//!   refuses longer lines before parsing them.
//! - Every formatting function is deterministic: the same report gives the same text,
//!   whatever order the daemon listed objects in (resources and connections are printed
//!   sorted by name, devices and peer devices by volume).

mod drbd_json;
mod events;
mod gi;
mod protocol;
mod report;
mod status;
mod words;

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;

pub use drbd_json::format_drbd_json;
pub use events::{change_events, initial_events, EventsOptions};
pub use gi::{format_get_gi, format_show_gi, Generations, LocalFlags, PeerFlags};
pub use protocol::{decode_line, encode_line, AdminError, Reply, Request, LINE_BYTES_MAX};
pub use report::{
    ConnectionStatus, DeviceStatus, PathStatus, PeerDeviceStatus, ResourceStatus, StatusReport,
    PROMOTION_SCORE_PER_PEER, PROMOTION_SCORE_UP_TO_DATE,
};
pub use status::{format_json, format_status, StatusOptions};
