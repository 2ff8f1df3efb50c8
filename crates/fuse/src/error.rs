//! The crate's one error type: what can go wrong mounting and unmounting. Errors of single
//! file operations are not here: they are errnos returned to the caller of the system call
//! (see `plan.rs`).

use std::path::PathBuf;

/// Why a mount could not be made or removed.
#[derive(Debug, thiserror::Error)]
pub enum FuseError {
    /// The mount point is not an absolute path.
    #[error("FUSE mount point {} is not an absolute path", .0.display())]
    NotAbsolute(PathBuf),
    /// The mount point directory could not be created or inspected.
    #[error("cannot use {} as the FUSE mount point: {source}", path.display())]
    MountPoint {
        /// The mount point.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A mount of a process that is gone is still there ("Transport endpoint is not
    /// connected") and still in use, so it could not be unmounted; mounting over it would
    /// hide it, so the operator removes it first.
    #[error(
        "{} is a stale FUSE mount (its server is gone) that is still in use; detach the loop \
         devices on its files (losetup -d), unmount what is on them, run 'umount {}' and \
         start again",
        .0.display(),
        .0.display()
    )]
    Stale(PathBuf),
    /// Two exports map to the same file name, or a name cannot be a file name.
    #[error("export {export:?} cannot appear as a file: {reason}")]
    BadExportName {
        /// The export's name.
        export: String,
        /// Why.
        reason: &'static str,
    },
    /// The kernel refused the mount (no /dev/fuse, no permission, ...).
    #[error("cannot mount FUSE at {}: {source}", path.display())]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// What the kernel or fusermount said.
        source: std::io::Error,
    },
    /// The mount is in use (open files, a loop device attached, a process inside it); it
    /// was left mounted and keeps serving while this process runs.
    #[error(
        "FUSE mount {} is busy ({open_files} open file handle(s)); it stays mounted. Detach \
         the loop devices on its files (losetup -d), unmount the file systems on them and close \
         the files, then run 'umount {}'",
        path.display(),
        path.display()
    )]
    Busy {
        /// The mount point.
        path: PathBuf,
        /// File handles open through the mount when the unmount was refused.
        open_files: usize,
    },
    /// Unmounting failed for another reason.
    #[error("cannot unmount FUSE at {}: {source}", path.display())]
    Unmount {
        /// The mount point.
        path: PathBuf,
        /// What the kernel or fusermount said.
        source: std::io::Error,
    },
}
