//! The FUSE export mounted for real over an in-memory registry: file names and sizes, data
//! round trips, durability requests, fallocate, refused opens, backpressure, and busy
//! unmounts.
//!
//! Needs /dev/fuse and the right to mount (root in CI); without /dev/fuse every test says so
//! and returns (the kernel-gated exception to "never skip").
//!
//! The in-memory export completes requests on its own thread while holding its own lock,
//! and closing it takes that lock too, as the daemon's export does: a FUSE reply path that
//! dropped the export or submitted inside a completion would deadlock these tests.

#![allow(clippy::unwrap_used)]

mod memory;

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use fuse::{ExportFile, FuseError, FuseMount, MountConfig};
use memory::{Kind, MemoryRegistry};
use tempfile::TempDir;

const MIB: usize = 1 << 20;
/// How long a step that should finish may take.
const STEP_DEADLINE: Duration = Duration::from_secs(20);
/// How long to watch for something that must not happen (a reply while the export holds
/// the request).
const QUIET_WINDOW: Duration = Duration::from_millis(300);

/// A mount in a tempdir; the mount goes first when dropped.
struct Fixture {
    mount: FuseMount,
    registry: Arc<MemoryRegistry>,
    _dir: TempDir,
}

impl Fixture {
    fn file(&self, name: &str) -> std::path::PathBuf {
        self.mount.path().join(name)
    }
}

/// None (and a message) when this machine has no FUSE.
fn mounted(registry: MemoryRegistry, config: MountConfig) -> Option<Fixture> {
    if !Path::new("/dev/fuse").exists() {
        eprintln!("SKIPPED: /dev/fuse is absent; the FUSE export tests need it (CI has it)");
        return None;
    }
    let registry = Arc::new(registry);
    let dir = tempfile::tempdir().unwrap();
    let files = registry.files();
    let mount = FuseMount::mount(&dir.path().join("mnt"), registry.clone(), files, config).unwrap();
    Some(Fixture {
        mount,
        registry,
        _dir: dir,
    })
}

fn two_volumes() -> MemoryRegistry {
    MemoryRegistry::new(&[("r0", 4 * MIB), ("r0/1", MIB + 4096)])
}

fn open_rw(path: &Path, extra_flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(extra_flags)
        .open(path)
}

fn pattern(seed: u8, length: usize) -> Vec<u8> {
    (0..length)
        .map(|index| seed.wrapping_add((index % 251) as u8))
        .collect()
}

#[test]
fn each_export_is_a_file_of_its_size() {
    let Some(fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    let mut names: Vec<String> = std::fs::read_dir(fixture.mount.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["r0", "r0:1"]);
    for (name, size) in [("r0", 4 * MIB), ("r0:1", MIB + 4096)] {
        let metadata = std::fs::metadata(fixture.file(name)).unwrap();
        assert!(metadata.is_file(), "{name}");
        assert_eq!(metadata.len(), size as u64, "{name}");
    }
    let missing = File::open(fixture.file("r9")).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert_eq!(fixture.registry.opened(), 0, "listing opened an export");
}

#[test]
fn data_round_trips_and_reaches_the_export() {
    let Some(fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    let file = open_rw(&fixture.file("r0"), 0).unwrap();
    let cases = [
        (0u64, 4096usize, 1u8),
        (MIB as u64 - 512, MIB, 2),
        (3 * MIB as u64 + 7, 10_000, 3),
    ];
    for (offset, length, seed) in cases {
        let data = pattern(seed, length);
        file.write_all_at(&data, offset).unwrap();
        assert_eq!(
            fixture.registry.contents("r0", offset, length),
            data,
            "export at {offset}"
        );
        let mut back = vec![0u8; length];
        file.read_exact_at(&mut back, offset).unwrap();
        assert_eq!(back, data, "read back at {offset}");
    }
    let largest = fixture.registry.largest_request("r0");
    assert!(
        largest <= MIB,
        "a request of {largest} bytes reached the export"
    );
    // The other volume is its own export.
    let other = open_rw(&fixture.file("r0:1"), 0).unwrap();
    other.write_all_at(b"volume one", 0).unwrap();
    assert_eq!(fixture.registry.contents("r0/1", 0, 10), b"volume one");
    assert_eq!(fixture.registry.contents("r0", 0, 10), pattern(1, 10));
}

#[test]
fn the_end_of_the_export_is_the_end_of_the_file() {
    let Some(fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    let file = open_rw(&fixture.file("r0:1"), 0).unwrap();
    let size = (MIB + 4096) as u64;
    assert_eq!(
        file.write_at(&[7u8; 8192], size - 4096).unwrap(),
        4096,
        "a write across the end is cut"
    );
    let error = file.write_at(&[7u8; 4096], size).unwrap_err();
    assert_eq!(
        error.raw_os_error(),
        Some(libc::ENOSPC),
        "a write at the end"
    );
    let mut buf = vec![0u8; 8192];
    assert_eq!(
        file.read_at(&mut buf, size - 4096).unwrap(),
        4096,
        "a read across the end is cut"
    );
    assert_eq!(
        file.read_at(&mut buf, size).unwrap(),
        0,
        "a read at the end is end of file"
    );
    let error = file.set_len(size + 1).unwrap_err();
    assert_eq!(
        error.raw_os_error(),
        Some(libc::EPERM),
        "the size cannot change"
    );
}

#[test]
fn fsync_flushes_and_synchronous_writes_are_fua_or_followed_by_a_flush() {
    for can_fua in [true, false] {
        let Some(fixture) = mounted(two_volumes().with_fua(can_fua), MountConfig::default()) else {
            return;
        };
        let file = open_rw(&fixture.file("r0"), 0).unwrap();
        file.write_all_at(&[1u8; 4096], 0).unwrap();
        file.sync_all().unwrap();
        let log = fixture.registry.take_log("r0");
        assert_eq!(
            log,
            [(Kind::Write, false), (Kind::Flush, false)],
            "fua {can_fua}: write then fsync"
        );
        let synchronous = open_rw(&fixture.file("r0"), libc::O_DSYNC).unwrap();
        synchronous.write_all_at(&[2u8; 4096], 0).unwrap();
        let log = fixture.registry.take_log("r0");
        let wanted: &[(Kind, bool)] = if can_fua {
            &[(Kind::Write, true)]
        } else {
            &[(Kind::Write, false), (Kind::Flush, false)]
        };
        assert_eq!(log, wanted, "fua {can_fua}: an O_DSYNC write");
    }
}

#[test]
fn punched_holes_and_zeroed_ranges_read_back_as_zeros() {
    let Some(fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    let file = open_rw(&fixture.file("r0"), 0).unwrap();
    file.write_all_at(&pattern(9, 2 * MIB), 0).unwrap();
    let modes = [
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        libc::FALLOC_FL_ZERO_RANGE,
    ];
    for (index, mode) in modes.into_iter().enumerate() {
        let offset = (index * MIB) as i64;
        // SAFETY: fallocate(2) on an fd we own, with plain integers.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset + 4096, 65536) };
        assert_eq!(
            rc,
            0,
            "fallocate mode {mode:#x}: {}",
            std::io::Error::last_os_error()
        );
        let mut back = vec![1u8; 65536 + 8192];
        file.read_exact_at(&mut back, offset as u64).unwrap();
        assert!(
            back[4096..4096 + 65536].iter().all(|byte| *byte == 0),
            "mode {mode:#x}: not zero"
        );
        assert_eq!(
            back[..4096],
            pattern(9, 2 * MIB)[index * MIB..index * MIB + 4096],
            "mode {mode:#x}: before"
        );
        let log = fixture.registry.take_log("r0");
        assert!(
            log.contains(&(Kind::WriteZeroes, false)),
            "mode {mode:#x}: {log:?}"
        );
    }
}

#[test]
fn a_refused_open_is_a_permission_error_and_reads_nothing() {
    let Some(fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    fixture
        .registry
        .refuse(Some("r0 is Secondary on this node; the Primary is bob"));
    for write in [false, true] {
        let error = OpenOptions::new()
            .read(true)
            .write(write)
            .open(fixture.file("r0"))
            .unwrap_err();
        assert_eq!(
            error.kind(),
            ErrorKind::PermissionDenied,
            "write {write}: {error}"
        );
    }
    assert!(
        fixture.registry.take_log("r0").is_empty(),
        "a refused open reached the export"
    );
    fixture.registry.refuse(None);
    let file = File::open(fixture.file("r0")).unwrap();
    let mut buf = [0u8; 512];
    file.read_exact_at(&mut buf, 0).unwrap();
}

#[test]
fn a_write_is_answered_only_after_the_export_completed_it() {
    let Some(fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    let file = open_rw(&fixture.file("r0"), 0).unwrap();
    fixture.registry.hold(true);
    let (done, finished) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        let result = file.write_all_at(&[5u8; 65536], 0);
        done.send(result.map_err(|error| error.to_string()))
            .unwrap();
    });
    fixture.registry.wait_held(1, STEP_DEADLINE);
    assert!(
        finished.recv_timeout(QUIET_WINDOW).is_err(),
        "the write returned before the export completed it"
    );
    fixture.registry.hold(false);
    finished
        .recv_timeout(STEP_DEADLINE)
        .expect("the write never returned")
        .unwrap();
    writer.join().unwrap();
}

#[test]
fn requests_in_flight_are_bounded() {
    let config = MountConfig {
        threads: 4,
        in_flight_requests_max: 2,
    };
    let Some(fixture) = mounted(two_volumes(), config) else {
        return;
    };
    fixture.registry.hold(true);
    let (done, finished) = mpsc::channel();
    let writers: Vec<_> = (0..6)
        .map(|index| {
            let file = open_rw(&fixture.file("r0"), 0).unwrap();
            let done = done.clone();
            std::thread::spawn(move || {
                let result = file.write_all_at(&[index as u8; 4096], (index * 65536) as u64);
                done.send(result.is_ok()).unwrap();
            })
        })
        .collect();
    fixture.registry.wait_held(2, STEP_DEADLINE);
    assert!(
        finished.recv_timeout(QUIET_WINDOW).is_err(),
        "a write returned while held"
    );
    assert_eq!(
        fixture.registry.held(),
        2,
        "more requests in flight than the limit"
    );
    fixture.registry.hold(false);
    for _ in 0..6 {
        assert!(finished
            .recv_timeout(STEP_DEADLINE)
            .expect("a write never returned"));
    }
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(
        fixture.registry.peak_in_flight() <= 2,
        "peak {}",
        fixture.registry.peak_in_flight()
    );
}

#[test]
fn a_busy_mount_is_reported_and_stays_until_the_file_is_closed() {
    let Some(mut fixture) = mounted(two_volumes(), MountConfig::default()) else {
        return;
    };
    let file = open_rw(&fixture.file("r0"), 0).unwrap();
    let error = fixture.mount.unmount().unwrap_err();
    assert!(
        matches!(error, FuseError::Busy { open_files: 1, .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("busy") && message.contains("losetup -d"),
        "{message}"
    );
    assert!(fixture.mount.is_mounted());
    // Still served.
    file.write_all_at(b"still here", 0).unwrap();
    assert_eq!(fixture.registry.contents("r0", 0, 10), b"still here");
    drop(file);
    fixture.registry.wait_closed(STEP_DEADLINE);
    fixture.mount.unmount().unwrap();
    assert!(!fixture.mount.is_mounted());
    assert!(
        std::fs::read_dir(fixture.mount.path())
            .unwrap()
            .next()
            .is_none(),
        "the mount point is not empty"
    );
}

#[test]
fn bad_mount_points_and_names_are_errors() {
    let registry: Arc<MemoryRegistry> = Arc::new(two_volumes());
    let error = FuseMount::mount(
        Path::new("relative/mnt"),
        registry.clone(),
        registry.files(),
        MountConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(error, FuseError::NotAbsolute(_)), "{error}");
    let dir = tempfile::tempdir().unwrap();
    let colliding = vec![ExportFile {
        export: "a:b".into(),
        size_bytes: 4096,
    }];
    let error = FuseMount::mount(
        &dir.path().join("mnt"),
        registry,
        colliding,
        MountConfig::default(),
    )
    .unwrap_err();
    assert!(matches!(error, FuseError::BadExportName { .. }), "{error}");
}
