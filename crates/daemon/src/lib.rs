//! The node daemon: wires the replication engine to real sockets, disks and clocks.
//!
//! `run_node` loads the configuration, opens every backing disk (all checks happen before
//! anything listens, so a bad configuration starts nothing), then serves:
//! - per resource, a TCP listener on this node's address and one supervisor per peer;
//! - one NBD unix socket `RUN_DIR/nbd.sock` with an export per volume, plus the optional TCP
//!   NBD listener of this node (`nbd-address`);
//! - the optional Prometheus metrics listener of this node (`metrics-address`, `metrics`);
//! - per `fuse-mount DIR` of this node, a FUSE mount with a file per volume (`fuse_export`);
//! - the admin socket `RUN_DIR/admin.sock` (mode 0600, callers checked with SO_PEERCRED).
//!
//! **Boundary:** this crate is wiring. Replication decisions live in `repl`; frame layouts in
//! `wire`; NBD in `nbd`; text formats in `admin`.

mod adjust;
mod admin_server;
mod digest;
mod disk;
mod edge;
mod export;
mod fuse_export;
mod handlers;
mod held_reads;
mod io_workers;
mod link_stream;
mod link_tuning;
mod meta_store;
mod metadata;
mod metrics;
mod peer;
mod resource;
mod resync_after;
mod runtime_options;
mod sd_notify;
mod setup;
mod srm_driver;
mod status;
pub mod tls;
mod wire_map;

use std::path::PathBuf;

pub use disk::{DiskError, DISK_BYTES_MIN};
pub use metadata::{
    create_md, dump_md, outdate_md, read_generations, wipe_md, CreateOptions, GiFilter, MdTarget,
    MetadataError, VolumeDump,
};

/// How `tandem node` was invoked.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The drbd.conf-style configuration file.
    pub config: PathBuf,
    /// Which `on NAME` section is this node (default: the host name).
    pub node: Option<String>,
    /// Directory for the admin socket and the NBD socket.
    pub run_dir: PathBuf,
}

/// Why the daemon could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration file is invalid.
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    /// The configuration is valid but cannot run on this node.
    #[error("{0}")]
    Setup(String),
    /// A backing disk cannot be used.
    #[error("{0}")]
    Disk(#[from] DiskError),
    /// A socket could not be created.
    #[error("cannot listen on {what}: {source}")]
    Listen {
        what: String,
        source: std::io::Error,
    },
    /// A FUSE export could not be mounted.
    #[error("{0}")]
    Fuse(#[from] fuse::FuseError),
    /// The async runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// Run a node in the foreground until SIGINT/SIGTERM.
pub fn run_node(options: NodeOptions) -> Result<(), DaemonError> {
    let node = setup::prepare(&options)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(256)
        .enable_all()
        .thread_name("tandem")
        .build()
        .map_err(DaemonError::Runtime)?;
    runtime.block_on(setup::serve(node, options))
}
