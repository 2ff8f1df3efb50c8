//! The nbd crate's one integration test binary: an in-memory export served on a unix socket,
//! exercised by a raw byte-level client (`raw`) and by real NBD clients (`clients`).

#![allow(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod clients;
mod raw;
mod support;
