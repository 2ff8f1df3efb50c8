//! Mounting and unmounting: one FUSE mount whose files are the exports.
//!
//! Invariants:
//! - An unmount never tears a mount away: it is a plain `umount` (or `fusermount3 -u`
//!   without `-z`). A busy mount (open files, a loop device attached, a process inside it)
//!   stays mounted and served, and the caller gets [`FuseError::Busy`] saying what to do.
//! - Dropping a [`FuseMount`] unmounts it the same way; if that fails, the mount is left
//!   in place and served for as long as this process runs. fuser unmounts only when its
//!   session ends, which happens only once the kernel ended the connection (after an
//!   unmount), so fuser never gets to detach a busy mount lazily.
//! - A stale mount at the mount point (its server died) is unmounted the same way if
//!   nothing uses it, else reported; never mounted over.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{MountOption, SessionUnmounter};
use nbd::ExportRegistry;

use crate::flow::{Completer, Limiter};
use crate::fs::{ExportFs, Handles, Parts};
use crate::{plan, FuseError};

/// One export as a file of the mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFile {
    /// The export's name in the registry (`r0`, `r0/1`); the file is named after it
    /// ([`plan::file_name`]: `r0`, `r0:1`).
    pub export: String,
    /// The file's size: the export's size in bytes.
    pub size_bytes: u64,
}

/// How a mount runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountConfig {
    /// Threads reading requests from the kernel, each with its own cloned /dev/fuse fd.
    pub threads: usize,
    /// Requests submitted to exports and not yet answered, at most (each up to
    /// [`plan::REQUEST_BYTES_MAX`] of data); also the kernel's `max_background`.
    pub in_flight_requests_max: usize,
}

impl Default for MountConfig {
    fn default() -> MountConfig {
        MountConfig {
            threads: 4,
            in_flight_requests_max: 64,
        }
    }
}

/// A mounted directory of exports; see the module documentation for how it goes away.
#[derive(Debug)]
pub struct FuseMount {
    path: PathBuf,
    /// None once unmounted (or left mounted).
    running: Option<Running>,
    handles: Arc<Handles>,
}

impl std::fmt::Debug for Handles {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Handles")
            .field("open", &self.count())
            .finish()
    }
}

/// A live session: the thread that runs it, and fuser's handle on the mount.
#[derive(Debug)]
struct Running {
    thread: std::thread::JoinHandle<std::io::Result<()>>,
    unmounter: SessionUnmounter,
    /// fuser's mount record was used (and consumed) by an unmount attempt.
    record_used: bool,
}

/// How an unmount attempt ended, when it did not.
enum UnmountFailure {
    Busy,
    Other(std::io::Error),
}

impl FuseMount {
    /// Mounts at `path` (absolute; created if missing) a directory with one file per entry
    /// of `files`, whose operations go to the exports `registry` opens.
    pub fn mount(
        path: &Path,
        registry: Arc<dyn ExportRegistry>,
        files: Vec<ExportFile>,
        config: MountConfig,
    ) -> Result<FuseMount, FuseError> {
        prepare_mount_point(path)?;
        let names = file_names(&files)?;
        let mount_error = |source| FuseError::Mount {
            path: path.to_path_buf(),
            source,
        };
        let completer = Completer::start().map_err(mount_error)?;
        let handles = Arc::new(Handles::default());
        let parts = Parts {
            registry,
            files,
            handles: Arc::clone(&handles),
            limiter: Limiter::new(config.in_flight_requests_max),
            completer,
            // SAFETY: geteuid and getegid cannot fail and touch no memory.
            owner: unsafe { (libc::geteuid(), libc::getegid()) },
            mounted_at: SystemTime::now(),
        };
        let mut options = fuser::Config::default();
        options.mount_options = vec![
            MountOption::FSName("tandem".into()),
            MountOption::Subtype("tandem".into()),
            MountOption::DefaultPermissions,
            MountOption::NoSuid,
            MountOption::NoDev,
            MountOption::NoExec,
            MountOption::RW,
        ];
        options.n_threads = Some(config.threads.max(1));
        options.clone_fd = true;
        let mut session = fuser::Session::new(ExportFs::new(parts, names.clone()), path, &options)
            .map_err(mount_error)?;
        let unmounter = session.unmount_callable();
        let thread = std::thread::Builder::new()
            .name("tandem-fuse".into())
            .spawn(move || session.run())
            .map_err(mount_error)?;
        tracing::info!(path = %path.display(), files = %names.join(" "), "FUSE export mounted");
        Ok(FuseMount {
            path: path.to_path_buf(),
            running: Some(Running {
                thread,
                unmounter,
                record_used: false,
            }),
            handles,
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// File handles open through the mount now (a loop device holds one).
    pub fn open_files(&self) -> usize {
        self.handles.count()
    }

    /// Whether the mount is still there (not yet unmounted by this handle).
    pub fn is_mounted(&self) -> bool {
        self.running.is_some()
    }

    /// Leaves the mount in place without trying to unmount it (after a [`FuseError::Busy`]):
    /// it is served until this process exits, and stays mounted after that until someone
    /// runs `umount`.
    pub fn leave_mounted(mut self) {
        // Detaches the session thread; it serves the mount until the process exits.
        drop(self.running.take());
    }

    /// Unmounts, unless the mount is busy: then it stays mounted and served, and the error
    /// says what to do; a later call may succeed. Unmounting twice is fine.
    pub fn unmount(&mut self) -> Result<(), FuseError> {
        let Some(mut running) = self.running.take() else {
            return Ok(());
        };
        match unmount_running(&self.path, &mut running) {
            Ok(()) => {
                // The kernel ended the connection, so every session thread returns.
                match running.thread.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::warn!(
                            path = %self.path.display(),
                            "FUSE session ended with {error}"
                        )
                    }
                    Err(_) => {
                        tracing::warn!(path = %self.path.display(), "FUSE session thread panicked")
                    }
                }
                tracing::info!(path = %self.path.display(), "FUSE export unmounted");
                Ok(())
            }
            Err(failure) => {
                self.running = Some(running);
                Err(match failure {
                    UnmountFailure::Busy => FuseError::Busy {
                        path: self.path.clone(),
                        open_files: self.open_files(),
                    },
                    UnmountFailure::Other(source) => FuseError::Unmount {
                        path: self.path.clone(),
                        source,
                    },
                })
            }
        }
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        if let Err(error) = self.unmount() {
            // Left mounted: the detached session thread serves it until the process exits.
            tracing::error!("{error}");
            drop(self.running.take());
        }
    }
}

/// The file name of every export; an error for a name that cannot be a file or two that
/// collide.
fn file_names(files: &[ExportFile]) -> Result<Vec<String>, FuseError> {
    let mut names: Vec<String> = Vec::with_capacity(files.len());
    for file in files {
        let bad = |reason| FuseError::BadExportName {
            export: file.export.clone(),
            reason,
        };
        let name = plan::file_name(&file.export).map_err(bad)?;
        if names.contains(&name) {
            return Err(bad("another export has the same file name"));
        }
        names.push(name);
    }
    Ok(names)
}

/// Checks the mount point (absolute, a directory, not a stale mount) and creates it if it
/// is missing.
fn prepare_mount_point(path: &Path) -> Result<(), FuseError> {
    if !path.is_absolute() {
        return Err(FuseError::NotAbsolute(path.to_path_buf()));
    }
    let error = |source| FuseError::MountPoint {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => Err(error(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        ))),
        Err(source) if source.raw_os_error() == Some(libc::ENOTCONN) => remove_stale(path),
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path).map_err(error)
        }
        Err(source) => Err(error(source)),
    }
}

/// Unmounts a running session's mount, never lazily. As root the first attempt goes through
/// fuser's record (a plain umount(2)), which also keeps the session's end from unmounting
/// again; the record is consumed even when the mount is busy, so later attempts (and
/// non-root ones, where fuser would fall back to a lazy unmount) use [`unmount_path`].
fn unmount_running(path: &Path, running: &mut Running) -> Result<(), UnmountFailure> {
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !running.record_used {
        running.record_used = true;
        return running
            .unmounter
            .unmount()
            .or_else(|error| classify(error, path));
    }
    unmount_path(path)
}

/// What a failed umount(2) means: busy, already unmounted (fine), not permitted (try
/// `fusermount3 -u`), or another failure.
fn classify(error: std::io::Error, path: &Path) -> Result<(), UnmountFailure> {
    match error.raw_os_error() {
        Some(libc::EBUSY) => Err(UnmountFailure::Busy),
        // Not a mount point any more: someone unmounted it already.
        Some(libc::EINVAL) => Ok(()),
        Some(libc::EPERM) => fusermount_unmount(path),
        _ => Err(UnmountFailure::Other(error)),
    }
}

/// Unmounts a mount whose server died (a crashed earlier run), unless something still uses
/// it (a loop device on a file of it): then it is [`FuseError::Stale`], for the operator.
fn remove_stale(path: &Path) -> Result<(), FuseError> {
    match unmount_path(path) {
        Ok(()) => {
            tracing::warn!(
                path = %path.display(),
                "unmounted a stale FUSE mount left by an earlier run"
            );
            Ok(())
        }
        Err(_) => Err(FuseError::Stale(path.to_path_buf())),
    }
}

/// `umount PATH`, never lazy: with umount2(2), else (not permitted) with `fusermount3 -u`.
fn unmount_path(path: &Path) -> Result<(), UnmountFailure> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        UnmountFailure::Other(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "NUL in path",
        ))
    })?;
    // SAFETY: c_path is a valid NUL-terminated string that lives across the call.
    let rc = unsafe { libc::umount2(c_path.as_ptr(), 0) };
    if rc == 0 {
        return Ok(());
    }
    classify(std::io::Error::last_os_error(), path)
}

/// `fusermount3 -u PATH` for an unprivileged mount (no `-z`: a busy mount stays).
fn fusermount_unmount(path: &Path) -> Result<(), UnmountFailure> {
    let output = Command::new("fusermount3")
        .arg("-u")
        .arg("--")
        .arg(path)
        .output()
        .map_err(UnmountFailure::Other)?;
    if output.status.success() {
        return Ok(());
    }
    let message = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if message.contains("busy") {
        return Err(UnmountFailure::Busy);
    }
    Err(UnmountFailure::Other(std::io::Error::other(format!(
        "fusermount3 -u: {message}"
    ))))
}
