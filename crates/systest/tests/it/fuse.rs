//! The FUSE export end to end (issue 4 item 6): each node mounts `fuse-mount DIR` with a file
//! per volume; on the Primary, `losetup --direct-io=on` over that file gives a block device
//! that `mkfs.ext4` formats and `mount` uses, and everything written reaches the peer. A
//! Secondary refuses its file with a permission error, a mount that is busy when the node
//! stops is reported and left mounted, never torn away, and the stale mount of a killed node
//! is replaced when it starts again.
//!
//! Needs /dev/fuse, loop devices and root (CI has them); without /dev/fuse each test prints
//! SKIPPED and returns. Every mount, loop device and directory a test makes is removed by a
//! drop guard, also when an assertion fails: guards are declared after the cluster, so they
//! run while the nodes still live.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::tools::{fresh_seed, require, run_ok, run_with_deadline, Rng};

/// How long one external tool (losetup, mkfs.ext4, mount, fsck) may take.
pub(crate) const TOOL_DEADLINE: Duration = Duration::from_secs(120);
/// How long the replicas may take to become identical, or a state change to show.
const SETTLE_DEADLINE: Duration = Duration::from_secs(30);

/// Two nodes, protocol C, each mounting its FUSE export in the cluster directory.
pub(crate) fn fuse_spec() -> Spec {
    Spec::two_nodes('C')
        .host_line(
            0,
            &format!("fuse-mount \"{{dir}}/{}.fuse\";", NODE_NAMES[0]),
        )
        .host_line(
            1,
            &format!("fuse-mount \"{{dir}}/{}.fuse\";", NODE_NAMES[1]),
        )
}

/// The FUSE mount directory of one node.
pub(crate) fn fuse_dir(cluster: &Cluster, index: usize) -> PathBuf {
    cluster.dir().join(format!("{}.fuse", cluster.name(index)))
}

/// The file of volume 0 in one node's FUSE mount.
pub(crate) fn fuse_file(cluster: &Cluster, index: usize) -> PathBuf {
    fuse_dir(cluster, index).join(RESOURCE)
}

/// Whether the kernel offers FUSE here; says SKIPPED when it does not.
pub(crate) fn fuse_available() -> bool {
    if Path::new("/dev/fuse").exists() {
        require("losetup", "mount");
        require("mkfs.ext4", "e2fsprogs");
        return true;
    }
    eprintln!("SKIPPED: /dev/fuse is absent; the FUSE export system tests need it (CI has it)");
    false
}

pub(crate) fn tool(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    command
}

/// Whether `path` is a mount point now (per /proc/self/mountinfo; the test paths have no
/// characters that mountinfo escapes).
pub(crate) fn is_mount_point(path: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("cannot read mountinfo");
    let wanted = path.to_str().expect("test paths are UTF-8");
    mounts
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(wanted))
}

/// A mount point that is unmounted when dropped: plainly, then lazily as a last resort so a
/// failed test leaves nothing behind.
pub(crate) struct MountGuard {
    pub(crate) path: PathBuf,
}

impl MountGuard {
    /// Mounts `device` at `path` (created) with extra `mount` arguments.
    pub(crate) fn mount(device: &str, path: PathBuf, args: &[&str]) -> MountGuard {
        std::fs::create_dir_all(&path).expect("cannot create a mount point");
        let mut command = tool("mount", args);
        command.arg(device).arg(&path);
        run_ok(command, TOOL_DEADLINE);
        MountGuard { path }
    }

    /// Unmounts now; the test fails if that fails.
    pub(crate) fn unmount(self) {
        run_ok(
            tool("umount", &[self.path.to_str().expect("UTF-8 path")]),
            TOOL_DEADLINE,
        );
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        let path = self.path.to_str().expect("UTF-8 path").to_string();
        if !is_mount_point(&self.path) {
            return;
        }
        let _ = run_with_deadline(tool("umount", &[&path]), TOOL_DEADLINE);
        if is_mount_point(&self.path) {
            let _ = run_with_deadline(tool("umount", &["-l", &path]), TOOL_DEADLINE);
        }
    }
}

/// A loop device, detached when dropped.
pub(crate) struct LoopDevice {
    pub(crate) device: String,
    attached: bool,
}

impl LoopDevice {
    /// `losetup --direct-io=on --find --show [-r] FILE`.
    pub(crate) fn attach(file: &Path, read_only: bool) -> LoopDevice {
        let mut command = tool("losetup", &["--direct-io=on", "--find", "--show"]);
        if read_only {
            command.arg("--read-only");
        }
        command.arg(file);
        let output = run_ok(command, TOOL_DEADLINE);
        let device = String::from_utf8_lossy(&output.stdout).trim().to_string();
        assert!(
            device.starts_with("/dev/loop"),
            "losetup printed {device:?}"
        );
        LoopDevice {
            device,
            attached: true,
        }
    }

    /// Whether the loop driver does direct I/O on its file (`/sys/block/loopN/loop/dio`).
    fn direct_io(&self) -> bool {
        let name = self.device.trim_start_matches("/dev/");
        let flag =
            std::fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap_or_default();
        flag.trim() == "1"
    }

    /// Detaches now; the test fails if that fails.
    pub(crate) fn detach(mut self) {
        self.attached = false;
        run_ok(tool("losetup", &["-d", &self.device]), TOOL_DEADLINE);
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if self.attached {
            let _ = run_with_deadline(tool("losetup", &["-d", &self.device]), TOOL_DEADLINE);
        }
    }
}

/// The test's files: names and seeded contents, a few MiB in all, odd sizes included.
fn test_files(seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut rng = Rng::new(seed);
    let sizes = [1 << 20, (5 << 19) + 123, 4096, 300_000, 1];
    sizes
        .iter()
        .enumerate()
        .map(|(index, size)| (format!("file-{index}"), rng.bytes(*size)))
        .collect()
}

/// drbd-semantics.md §1 (protocol C: a completed write is on the peer's disk): ext4 built and
/// written through the Primary's FUSE file and a direct-I/O loop device arrives on the peer
/// byte for byte, and the peer, once Primary, serves the same file system with the same
/// files through its own FUSE file.
#[test]
fn ext4_on_the_primarys_fuse_file_reaches_the_peer() {
    if !fuse_available() {
        return;
    }
    let cluster = Cluster::with_primary(fuse_spec());
    let _fuse_mounts = [
        MountGuard {
            path: fuse_dir(&cluster, 0),
        },
        MountGuard {
            path: fuse_dir(&cluster, 1),
        },
    ];
    let seed = fresh_seed();
    eprintln!("SYSTEST_SEED={seed}");
    let files = test_files(seed);
    let device = LoopDevice::attach(&fuse_file(&cluster, 0), false);
    assert!(
        device.direct_io(),
        "{} does not do direct I/O on the FUSE file",
        device.device
    );
    run_ok(
        tool("mkfs.ext4", &["-q", "-F", &device.device]),
        TOOL_DEADLINE,
    );
    let ext4 = MountGuard::mount(&device.device, cluster.dir().join("ext4-alice"), &[]);
    for (name, contents) in &files {
        let mut file = File::create(ext4.path.join(name)).expect("cannot create a file on ext4");
        file.write_all(contents)
            .expect("cannot write a file on ext4");
        file.sync_all().expect("cannot fsync a file on ext4");
    }
    run_ok(tool("sync", &[]), TOOL_DEADLINE);
    ext4.unmount();
    device.detach();
    cluster.wait_until("alice's export is closed", SETTLE_DEADLINE, || {
        !cluster.status(0).open()
    });
    cluster.wait_identical(0, 1, SETTLE_DEADLINE);

    cluster.admin_ok(0, &["secondary", RESOURCE]);
    cluster.wait_until("bob sees alice as Secondary", SETTLE_DEADLINE, || {
        cluster.status(1).peer_role(NODE_NAMES[0]) == "Secondary"
    });
    cluster.admin_ok(1, &["primary", RESOURCE]);
    let device = LoopDevice::attach(&fuse_file(&cluster, 1), true);
    run_ok(
        tool("fsck.ext4", &["-n", "-f", &device.device]),
        TOOL_DEADLINE,
    );
    let ext4 = MountGuard::mount(
        &device.device,
        cluster.dir().join("ext4-bob"),
        &["-o", "ro"],
    );
    for (name, contents) in &files {
        let read = std::fs::read(ext4.path.join(name)).expect("a file is missing on the peer");
        assert!(
            read == *contents,
            "{name} differs on the peer ({} bytes read, {} written)",
            read.len(),
            contents.len()
        );
    }
    ext4.unmount();
    device.detach();
}

/// issue 4 "Bad input": opening the FUSE file on a Secondary is a permission error (for
/// reading too: no data from a possibly stale copy), losetup fails the same way, and the node
/// logs why.
#[test]
fn a_secondary_refuses_its_fuse_file() {
    if !fuse_available() {
        return;
    }
    let cluster = Cluster::with_primary(fuse_spec());
    let _fuse_mounts = [
        MountGuard {
            path: fuse_dir(&cluster, 0),
        },
        MountGuard {
            path: fuse_dir(&cluster, 1),
        },
    ];
    let file = fuse_file(&cluster, 1);
    let size = std::fs::metadata(&file)
        .expect("bob's FUSE file is missing")
        .len();
    assert_eq!(
        size,
        cluster.disk_bytes(),
        "the file is not the size of the export"
    );
    for write in [false, true] {
        let error = OpenOptions::new()
            .read(true)
            .write(write)
            .open(&file)
            .expect_err("a Secondary opened its FUSE file");
        assert_eq!(
            error.kind(),
            ErrorKind::PermissionDenied,
            "write {write}: {error}"
        );
    }
    let mut command = tool("losetup", &["--find", "--show", "--read-only"]);
    command.arg(&file);
    let output = run_with_deadline(command, TOOL_DEADLINE);
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if output.status.success() {
        // Detach what should not exist before failing.
        let _ = run_with_deadline(tool("losetup", &["-d", &stdout]), TOOL_DEADLINE);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("Permission denied"),
        "losetup on a Secondary: {stdout} {stderr}"
    );
    let log = cluster.log(1);
    assert!(
        log.contains("FUSE open refused") && log.contains("Secondary"),
        "bob's log does not say why:\n{log}"
    );
}

/// issue 4 item 6: a busy mount is reported, not torn away. With a loop device on the
/// Primary's file, `tandem down` is refused (the export is open) and stopping the node logs
/// that the mount is busy and what to do, and leaves it mounted; once the loop device is
/// detached it unmounts.
#[test]
fn a_busy_mount_at_shutdown_is_reported_and_left() {
    if !fuse_available() {
        return;
    }
    let cluster = Cluster::with_primary(fuse_spec());
    let fuse_mount = MountGuard {
        path: fuse_dir(&cluster, 0),
    };
    let _peer_mount = MountGuard {
        path: fuse_dir(&cluster, 1),
    };
    let device = LoopDevice::attach(&fuse_file(&cluster, 0), false);
    let output = cluster.admin(0, &["down", RESOURCE]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("open"),
        "'tandem down' with a loop device attached: {stderr}"
    );
    cluster.stop(0);
    let log = cluster.log(0);
    let path = fuse_mount.path.display().to_string();
    assert!(
        log.contains("is busy")
            && log.contains("losetup -d")
            && log.contains(&format!("umount {path}")),
        "alice's log does not report the busy mount:\n{log}"
    );
    assert!(
        is_mount_point(&fuse_mount.path),
        "the busy mount was torn away"
    );
    device.detach();
    fuse_mount.unmount();
}

/// A node killed (as in a crash) leaves its FUSE mount behind without a server; started
/// again, it removes that stale mount (nothing uses it) and mounts afresh.
#[test]
fn a_stale_mount_of_a_killed_node_is_replaced_at_start() {
    if !fuse_available() {
        return;
    }
    let cluster = Cluster::start(fuse_spec());
    let _fuse_mounts = [
        MountGuard {
            path: fuse_dir(&cluster, 0),
        },
        MountGuard {
            path: fuse_dir(&cluster, 1),
        },
    ];
    cluster.kill(0);
    let error = std::fs::metadata(fuse_file(&cluster, 0))
        .expect_err("the killed node's mount still serves");
    assert_eq!(
        error.raw_os_error(),
        Some(libc::ENOTCONN),
        "not a stale mount: {error}"
    );
    cluster.start_node(0);
    let size = std::fs::metadata(fuse_file(&cluster, 0))
        .expect("no FUSE file after the restart")
        .len();
    assert_eq!(size, cluster.disk_bytes());
    let log = cluster.log(0);
    assert!(
        log.contains("unmounted a stale FUSE mount"),
        "the restart does not say it removed the stale mount:\n{log}"
    );
}
