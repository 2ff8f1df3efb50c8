//! Table tests of the request plans, and properties of the range arithmetic.

use nbd::{Command, Errno, ExportInfo, OpenError};
use proptest::prelude::*;

use super::*;

const SIZE: u64 = 64 << 20;
const MIB: u64 = 1 << 20;

fn info() -> ExportInfo {
    ExportInfo {
        size: SIZE,
        can_flush: true,
        can_fua: true,
        can_trim: true,
        can_write_zeroes: true,
        ..ExportInfo::default()
    }
}

/// Requests as (offset, length, no_hole) triples, for comparison.
fn zeroes(commands: &[Command]) -> Vec<(u64, u32, bool)> {
    commands
        .iter()
        .map(|command| match command {
            Command::WriteZeroes {
                offset,
                length,
                no_hole,
            } => (*offset, *length, *no_hole),
            other => panic!("not a WriteZeroes: {other:?}"),
        })
        .collect()
}

#[test]
fn file_names() {
    let cases: [(&str, Result<&str, ()>); 6] = [
        ("r0", Ok("r0")),
        ("r0/1", Ok("r0:1")),
        ("data.v2-x_y/65534", Ok("data.v2-x_y:65534")),
        ("", Err(())),
        ("..", Err(())),
        ("a:b", Err(())),
    ];
    for (export, wanted) in cases {
        assert_eq!(
            file_name(export).map_err(|_| ()),
            wanted.map(str::to_string),
            "{export:?}"
        );
    }
}

#[test]
fn errnos() {
    let cases = [
        (Errno::Perm, libc::EPERM),
        (Errno::Io, libc::EIO),
        (Errno::NoMem, libc::ENOMEM),
        (Errno::Inval, libc::EINVAL),
        (Errno::NoSpc, libc::ENOSPC),
        (Errno::Overflow, libc::EOVERFLOW),
        (Errno::NotSup, libc::EOPNOTSUPP),
        (Errno::Shutdown, libc::ESHUTDOWN),
    ];
    for (errno, wanted) in cases {
        assert_eq!(errno_of(errno), wanted, "{errno:?}");
    }
    assert_eq!(open_errno(&OpenError::Unknown), libc::ENOENT);
    assert_eq!(
        open_errno(&OpenError::Policy("r0 is Secondary".into())),
        libc::EACCES
    );
}

#[test]
fn durable_writes_follow_o_dsync_and_o_sync() {
    let cases = [
        (libc::O_RDWR, false),
        (libc::O_RDWR | libc::O_DIRECT, false),
        (libc::O_RDWR | libc::O_DSYNC, true),
        (libc::O_WRONLY | libc::O_SYNC, true),
    ];
    for (flags, wanted) in cases {
        assert_eq!(wants_durable(flags), wanted, "{flags:#x}");
    }
}

#[test]
fn reads_are_cut_at_the_end() {
    type Case = (u64, u32, Result<Option<(u64, u32)>, i32>);
    let cases: [Case; 6] = [
        (0, 4096, Ok(Some((0, 4096)))),
        (SIZE - 4096, 8192, Ok(Some((SIZE - 4096, 4096)))),
        (SIZE, 4096, Ok(None)),
        (u64::MAX, 4096, Ok(None)),
        (0, 0, Ok(None)),
        (0, REQUEST_BYTES_MAX + 1, Err(libc::EINVAL)),
    ];
    for (offset, length, wanted) in cases {
        let got = read(SIZE, offset, length).map(|command| {
            command.map(|command| match command {
                Command::Read { offset, length } => (offset, length),
                other => panic!("not a read: {other:?}"),
            })
        });
        assert_eq!(got, wanted, "read({offset}, {length})");
    }
}

#[test]
fn writes_are_cut_at_the_end() {
    let cases: [(u64, usize, Result<usize, i32>); 6] = [
        (0, 4096, Ok(4096)),
        (SIZE - 512, 4096, Ok(512)),
        (SIZE, 4096, Err(libc::ENOSPC)),
        (u64::MAX - 1, 4096, Err(libc::ENOSPC)),
        (0, 0, Err(libc::EINVAL)),
        (0, (REQUEST_BYTES_MAX as usize) + 1, Err(libc::EINVAL)),
    ];
    for (offset, length, wanted) in cases {
        assert_eq!(
            write(SIZE, offset, length),
            wanted,
            "write({offset}, {length})"
        );
    }
}

#[test]
fn fallocate_modes() {
    let keep = libc::FALLOC_FL_KEEP_SIZE;
    let punch = libc::FALLOC_FL_PUNCH_HOLE | keep;
    let zero = libc::FALLOC_FL_ZERO_RANGE;
    type Case = (
        &'static str,
        i32,
        u64,
        u64,
        Result<Vec<(u64, u32, bool)>, i32>,
    );
    let cases: [Case; 10] = [
        ("allocate inside", 0, 0, MIB, Ok(vec![])),
        ("allocate past the end", 0, SIZE - 1, 2, Err(libc::EFBIG)),
        (
            "allocate past the end, keep size",
            keep,
            SIZE - 1,
            2,
            Ok(vec![]),
        ),
        ("punch", punch, MIB, MIB, Ok(vec![(MIB, 1 << 20, false)])),
        (
            "punch past the end is cut",
            punch,
            SIZE - 4096,
            MIB,
            Ok(vec![(SIZE - 4096, 4096, false)]),
        ),
        (
            "punch without keep size",
            libc::FALLOC_FL_PUNCH_HOLE,
            0,
            MIB,
            Err(libc::EOPNOTSUPP),
        ),
        ("zero range", zero, 0, 4096, Ok(vec![(0, 4096, true)])),
        (
            "zero range past the end",
            zero,
            SIZE - 4096,
            MIB,
            Err(libc::EFBIG),
        ),
        (
            "zero range past the end, keep size",
            zero | keep,
            SIZE,
            MIB,
            Ok(vec![]),
        ),
        (
            "collapse",
            libc::FALLOC_FL_COLLAPSE_RANGE,
            0,
            MIB,
            Err(libc::EOPNOTSUPP),
        ),
    ];
    for (name, mode, offset, length, wanted) in cases {
        assert_eq!(
            fallocate(&info(), mode, offset, length).map(|c| zeroes(&c)),
            wanted,
            "{name}"
        );
    }
}

#[test]
fn fallocate_needs_write_zeroes_and_a_writable_export() {
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    let without = ExportInfo {
        can_write_zeroes: false,
        ..info()
    };
    assert_eq!(
        fallocate(&without, punch, 0, MIB).map(|c| c.len()),
        Err(libc::EOPNOTSUPP)
    );
    let read_only = ExportInfo {
        read_only: true,
        ..info()
    };
    assert_eq!(
        fallocate(&read_only, punch, 0, MIB).map(|c| c.len()),
        Err(libc::EROFS)
    );
}

#[test]
fn large_fallocate_ranges_are_cut_into_chunks() {
    let big = ExportInfo {
        size: 5 << 30,
        ..info()
    };
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    let chunk = u64::from(FALLOCATE_CHUNK_BYTES);
    let got = zeroes(&fallocate(&big, punch, 4096, (5 << 30) - 4096).unwrap());
    assert_eq!(got.len(), 5);
    assert_eq!(got[0], (4096, FALLOCATE_CHUNK_BYTES, false));
    assert_eq!(
        got[4],
        (
            4096 + 4 * chunk,
            u32::try_from(chunk - 4096).unwrap(),
            false
        )
    );
}

proptest! {
    /// Whatever the arguments, the chunks of a punch cover exactly the part of the range
    /// inside the export, in order, each non-empty and at most one chunk long.
    #[test]
    fn punch_chunks_tile_the_range(
        size in 0u64..(8 << 30),
        offset in 0u64..(9 << 30),
        length in 0u64..(9 << 30),
    ) {
        let info = ExportInfo { size, ..info() };
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let got = zeroes(&fallocate(&info, punch, offset, length).unwrap());
        let end = offset.saturating_add(length).min(size);
        let mut at = offset;
        for (start, count, _) in &got {
            prop_assert_eq!(*start, at);
            prop_assert!(*count > 0 && *count <= FALLOCATE_CHUNK_BYTES);
            at += u64::from(*count);
        }
        prop_assert_eq!(at, if offset < end { end } else { offset });
    }

    /// A read never leaves the export and is never empty.
    #[test]
    fn reads_stay_inside(size in 0u64..(1 << 40), offset: u64, length in 0u32..=REQUEST_BYTES_MAX) {
        let planned = read(size, offset, length);
        if let Ok(Some(Command::Read { offset: start, length: count })) = planned {
            prop_assert!(count > 0 && count <= length);
            prop_assert!(start + u64::from(count) <= size);
        }
    }
}
