//! The FUSE export: the exports of an [`nbd::ExportRegistry`] as regular files of one FUSE
//! mount, so `losetup --direct-io=on` turns them into real block devices for `mkfs.ext4` and
//! `mount`.
//!
//! The mount's root directory holds one file per export, named after it with `/` turned into
//! `:` (`r0` for volume 0 of resource r0, `r0:1` for its volume 1; see
//! [`plan::file_name`]), sized like the export and owned by the mounting user (mode 0600).
//! Files are opened with `FOPEN_DIRECT_IO` and `FOPEN_PARALLEL_DIRECT_WRITES`: no page
//! cache, requests of up to 1 MiB, writes in parallel.
//!
//! | file operation | export request |
//! |---|---|
//! | `open` | `ExportRegistry::open`; a policy refusal (e.g. Secondary) is `EACCES`, logged |
//! | `read` / `write` | `Read` / `Write`, cut at the end of the export |
//! | `write` with `O_DSYNC`/`O_SYNC` | `Write` with FUA, or `Write` then `Flush` |
//! | `fsync`, `flush` (close) | `Flush` |
//! | `fallocate` `PUNCH_HOLE` / `ZERO_RANGE` | `WriteZeroes` (may punch / keeps allocated) |
//! | `release` | the export handle is dropped (closed) |
//!
//! Invariants:
//! - No data comes from an export the registry did not open for this file handle: a node
//!   that may not serve (Secondary) refuses the open, so no stale copy is ever read.
//! - A write, fsync, flush or fallocate is answered only after the export completed it.
//! - At most [`MountConfig::in_flight_requests_max`] requests are in flight per mount.
//! - Unmounting never detaches lazily; a busy mount stays and is reported
//!   ([`FuseError::Busy`]).
//!
//! fuser logs through the `log` crate; a `tracing-subscriber` with its default `tracing-log`
//! feature (as the `tandem` binary installs) forwards those records to tracing.
//!
//! **Boundary:** this crate knows NBD's export traits and FUSE, nothing about replication.

#![warn(missing_docs, clippy::cast_possible_truncation)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod flow;
mod fs;
mod mount;
pub mod plan;

pub use error::FuseError;
pub use mount::{ExportFile, FuseMount, MountConfig};
