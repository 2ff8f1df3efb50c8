//! The node daemon: wires the replication engine to real sockets, disks and clocks.

use std::path::PathBuf;

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
    /// Not implemented yet.
    #[error("not implemented yet")]
    NotImplemented,
}

/// Run a node in the foreground until SIGINT/SIGTERM.
pub fn run_node(options: NodeOptions) -> Result<(), DaemonError> {
    let _ = options;
    Err(DaemonError::NotImplemented)
}
