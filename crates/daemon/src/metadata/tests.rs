//! Tests of the metadata I/O layer against sparse temporary files: create → open round trips,
//! bitmap and superblock persistence, every refusal `open` and `create-md` make, external
//! metadata with and without an index, and `dump-md`.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use meta::{Superblock, UUID_JUST_CREATED};
use proptest::prelude::*;
use tempfile::TempDir;

use super::offline::human_bytes;
use super::*;

const MIB: u64 = 1 << 20;
const BACKING_BYTES: u64 = 64 * MIB;

/// A directory with backing files and a configuration for hosts alice (0), bob (1) and
/// carol (2), all in one connection mesh; `meta` is alice's `meta-disk` line, where `META`
/// stands for the file `alice.meta` of the directory.
struct Fixture {
    dir: TempDir,
    config: PathBuf,
}

impl Fixture {
    fn new(meta: &str) -> Fixture {
        Fixture::with_hosts(meta, &["bob", "carol"])
    }

    /// alice plus `peers` (a subset of bob, carol, dave with node ids 1, 2, 3).
    fn with_hosts(meta: &str, peers: &[&str]) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut hosts = String::new();
        let mut names = vec!["alice"];
        for (id, name) in ["alice", "bob", "carol", "dave"].iter().enumerate() {
            if *name != "alice" && !peers.contains(name) {
                continue;
            }
            if *name != "alice" {
                names.push(name);
            }
            let disk = dir.path().join(format!("{name}.img"));
            let meta_path = dir.path().join("alice.meta");
            let meta_line = if *name == "alice" {
                meta.replace("META", &meta_path.display().to_string())
            } else {
                "meta-disk internal;".into()
            };
            hosts += &format!(
                "  on {name} {{\n    node-id {id};\n    address 127.0.0.1:{};\n    volume 0 \
                 {{\n      device /dev/drbd0;\n      disk {};\n      {meta_line}\n    }}\n  }}\n",
                7789 + id,
                disk.display()
            );
        }
        let mesh = if names.len() > 2 {
            format!(
                "  connection-mesh {{\n    hosts {};\n  }}\n",
                names.join(" ")
            )
        } else {
            String::new()
        };
        let text = format!("resource r0 {{\n{hosts}{mesh}}}\n");
        let config = dir.path().join("tandem.conf");
        std::fs::write(&config, text).expect("write config");
        let fixture = Fixture { dir, config };
        fixture.set_size(&fixture.disk(), BACKING_BYTES);
        fixture
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn disk(&self) -> PathBuf {
        self.path("alice.img")
    }

    fn set_size(&self, path: &Path, bytes: u64) {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("open for size");
        file.set_len(bytes).expect("set_len");
    }

    fn target(&self) -> MdTarget {
        MdTarget {
            config: self.config.clone(),
            node: "alice".into(),
            resource: Some("r0".into()),
        }
    }

    fn create(&self, options: CreateOptions) -> Result<Vec<String>, MetadataError> {
        let mut lines = Vec::new();
        create_md(&self.target(), options, &mut |line| {
            lines.push(line.to_string())
        })?;
        Ok(lines)
    }

    fn spec(&self, meta_disk: config::MetaDisk) -> MetaSpec {
        MetaSpec {
            disk: self.disk(),
            meta_disk,
            node_id: 0,
            peers: vec![1, 2],
            al_extents: 1237,
        }
    }

    fn internal(&self) -> MetaSpec {
        self.spec(config::MetaDisk::Internal)
    }
}

fn open(spec: &MetaSpec) -> (MetaFile, Superblock) {
    match MetaFile::open(spec) {
        Ok(opened) => opened,
        Err(error) => panic!("open failed: {error}"),
    }
}

fn open_error(spec: &MetaSpec) -> MetadataError {
    match MetaFile::open(spec) {
        Ok(_) => panic!("open succeeded where it must fail"),
        Err(error) => error,
    }
}

fn created(fixture: &Fixture) -> Vec<String> {
    fixture
        .create(CreateOptions::default())
        .unwrap_or_else(|error| panic!("create-md failed: {error}"))
}

#[test]
fn create_then_open_round_trips() {
    let fixture = Fixture::new("meta-disk internal;");
    let lines = created(&fixture);
    let (file, superblock) = open(&fixture.internal());
    let layout = *file.layout();
    assert_eq!(superblock.node_id, 0);
    assert_eq!(superblock.current_uuid, UUID_JUST_CREATED);
    assert_eq!(superblock.peer_slot_of(1), Some(0));
    assert_eq!(superblock.peer_slot_of(2), Some(1));
    assert_eq!(layout.config().peer_slots, 2);
    assert!(layout.data_bytes() + layout.metadata_bytes() <= BACKING_BYTES);
    assert_eq!(layout.superblock().offset_bytes, BACKING_BYTES - 4096);
    let expected = format!(
        "r0/0: metadata created (internal, {} at the end of {}; {} of data)",
        human_bytes(layout.metadata_bytes()),
        fixture.disk().display(),
        human_bytes(layout.data_bytes())
    );
    assert_eq!(lines, vec![expected]);
    for slot in 0..2 {
        let bitmap = file.read_bitmap(slot).expect("read bitmap");
        assert_eq!(bitmap.count_set_blocks(), 0);
        assert_eq!(bitmap.data_bytes(), layout.data_bytes());
    }
    let recovery = meta::recover(
        &file.read_al_ring().expect("ring"),
        meta::AlUpdates::Enabled,
    )
    .expect("recover");
    assert_eq!(
        recovery.full_resync, None,
        "a formatted ring recovers with no hot extent"
    );
    assert!(recovery.hot_extents.is_empty());
}

#[test]
fn bitmap_pages_round_trip_across_io_chunks() {
    let fixture = Fixture::new("meta-disk internal;");
    // 10 GiB of data at 4 KiB per bit is 80 bitmap pages per peer: two read chunks.
    fixture.set_size(&fixture.disk(), 10 << 30);
    created(&fixture);
    let (file, _) = open(&fixture.internal());
    let mut bitmap = file.read_bitmap(1).expect("read");
    assert!(bitmap.page_count() > IO_CHUNK_PAGES);
    let data_bytes = file.layout().data_bytes();
    for (offset, length) in [(0, 4096), (5 << 30, 3 * MIB), (data_bytes - 8192, 8192)] {
        bitmap.set(offset, length).expect("set");
    }
    let pages: Vec<(u64, Vec<u8>)> = bitmap
        .take_dirty_pages()
        .map(|(page, image)| (page, image.to_vec()))
        .collect();
    assert_eq!(pages.len(), 3);
    file.write_bitmap_pages(1, &pages).expect("write pages");
    file.sync().expect("sync");
    drop(file);
    let (file, _) = open(&fixture.internal());
    let read = file.read_bitmap(1).expect("read again");
    assert_eq!(read.count_set_blocks(), 1 + 768 + 2);
    assert_eq!(
        read.runs().collect::<Vec<_>>(),
        bitmap.runs().collect::<Vec<_>>()
    );
    assert_eq!(
        file.read_bitmap(0).expect("slot 0").count_set_blocks(),
        0,
        "another slot is untouched"
    );
}

#[test]
fn bad_bitmap_page_writes_are_refused() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (file, _) = open(&fixture.internal());
    let pages_per_slot = file.layout().bitmap_bytes_per_peer() / 4096;
    let cases: [(u8, u64, usize); 3] = [(0, pages_per_slot, 4096), (0, 0, 100), (2, 0, 4096)];
    for (slot, page, length) in cases {
        let error = file
            .write_bitmap_pages(slot, &[(page, vec![0; length])])
            .expect_err("must be refused");
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::InvalidInput,
            "slot {slot} page {page} length {length}"
        );
    }
}

#[test]
fn superblock_writes_survive_reopen() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (file, mut superblock) = open(&fixture.internal());
    superblock.current_uuid = 0x1234_5678_9ABC_DEF0;
    superblock.history_uuids[0] = UUID_JUST_CREATED;
    superblock.flags.consistent = true;
    superblock.flags.was_up_to_date = true;
    if let Some(slot) = superblock.peers.get_mut(1) {
        slot.bitmap_uuid = 0x42;
    }
    file.write_superblock(&superblock).expect("write");
    file.sync().expect("sync");
    drop(file);
    let (_, reread) = open(&fixture.internal());
    assert_eq!(reread, superblock);
}

#[test]
fn missing_metadata_says_to_run_create_md() {
    let fixture = Fixture::new("meta-disk internal;");
    let error = open_error(&fixture.internal());
    assert!(matches!(error, MetadataError::Missing { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("tandem create-md"), "{message}");
    assert!(
        message.contains(&fixture.disk().display().to_string()),
        "{message}"
    );
}

#[test]
fn a_damaged_superblock_is_corrupt_not_missing() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let file = OpenOptions::new()
        .write(true)
        .open(fixture.disk())
        .expect("open");
    file.write_all_at(&[0xAA], BACKING_BYTES - 4096 + 200)
        .expect("flip a byte");
    let error = open_error(&fixture.internal());
    assert!(
        matches!(
            error,
            MetadataError::Corrupt {
                source: meta::MetaError::ChecksumMismatch { .. },
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("checksum"), "{error}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Anything where the superblock belongs, magic included or not, is a clean refusal.
    #[test]
    fn garbage_superblocks_are_refused_cleanly(
        mut block in proptest::collection::vec(any::<u8>(), 4096),
        with_magic in any::<bool>(),
    ) {
        let fixture = Fixture::new("meta-disk internal;");
        if with_magic {
            block[..8].copy_from_slice(&meta::superblock::SUPERBLOCK_MAGIC);
        }
        let file = OpenOptions::new().write(true).open(fixture.disk()).expect("open");
        file.write_all_at(&block, BACKING_BYTES - 4096).expect("write garbage");
        let error = open_error(&fixture.internal());
        prop_assert!(
            matches!(error, MetadataError::Missing { .. } | MetadataError::Corrupt { .. }),
            "{:?}",
            error
        );
        let dumped = dump_md(&fixture.target());
        prop_assert!(dumped.is_err());
    }
}

#[test]
fn another_node_id_is_refused() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let spec = MetaSpec {
        node_id: 3,
        ..fixture.internal()
    };
    let error = open_error(&spec);
    assert!(
        matches!(
            error,
            MetadataError::NodeIdMismatch {
                on_disk: 0,
                configured: 3,
                ..
            }
        ),
        "{error:?}"
    );
}

/// A backing device that grew while the node was down (or before `resize` ran) attaches at
/// its old size: the superblock is found where it was (issue 27 item 5).
#[test]
fn a_grown_internal_backing_file_attaches_at_its_old_size() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (file, _) = open(&fixture.internal());
    let layout = *file.layout();
    drop(file);
    fixture.set_size(&fixture.disk(), BACKING_BYTES + MIB);
    let (file, _) = open(&fixture.internal());
    assert_eq!(*file.layout(), layout);
    assert_eq!(file.area.device_bytes, BACKING_BYTES + MIB);
}

#[test]
fn no_metadata_anywhere_is_missing() {
    let fixture = Fixture::new("meta-disk internal;");
    let error = open_error(&fixture.internal());
    assert!(matches!(error, MetadataError::Missing { .. }), "{error:?}");
}

#[test]
fn a_grown_backing_file_with_external_metadata_attaches_at_its_old_size() {
    let fixture = Fixture::new("meta-disk META;");
    let meta_path = fixture.path("alice.meta");
    fixture.set_size(&meta_path, MIB);
    created(&fixture);
    let spec = fixture.spec(config::MetaDisk::External {
        path: meta_path,
        index: None,
    });
    let (file, _) = open(&spec);
    let layout = *file.layout();
    drop(file);
    fixture.set_size(&fixture.disk(), BACKING_BYTES * 2);
    let (file, _) = open(&spec);
    assert_eq!(*file.layout(), layout);
    drop(file);
    fixture.set_size(&fixture.disk(), BACKING_BYTES / 2);
    let error = open_error(&spec);
    assert!(
        matches!(
            error,
            MetadataError::LayoutMismatch {
                source: meta::MetaError::LayoutMismatch {
                    field: "backing size",
                    ..
                },
                ..
            }
        ),
        "a device that shrank is refused: {error:?}"
    );
}

#[test]
fn a_second_opener_is_told_a_node_runs() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (_held, _) = open(&fixture.internal());
    let error = open_error(&fixture.internal());
    assert!(matches!(error, MetadataError::Locked { .. }), "{error:?}");
    for refused in [
        fixture
            .create(CreateOptions {
                force: true,
                max_peers: None,
                bitmap_granularity_bytes: None,
            })
            .map(|_| ()),
        dump_md(&fixture.target()).map(|_| ()),
    ] {
        let error = refused.expect_err("must be refused while the node holds the metadata");
        assert!(
            matches!(
                &error,
                MetadataError::Volume { volume, source }
                    if volume == "r0/0" && matches!(**source, MetadataError::Locked { .. })
            ),
            "{error:?}"
        );
        assert!(
            error.to_string().starts_with("r0/0: ")
                && error
                    .to_string()
                    .contains("in use by a running tandem node"),
            "{error}"
        );
    }
}

#[test]
fn dump_md_readers_share_the_lock() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let area = device::Area::open(
        &fixture.disk(),
        &config::MetaDisk::Internal,
        device::Access::Read,
    )
    .expect("read lock");
    assert!(dump_md(&fixture.target()).is_ok(), "two readers at once");
    let error = open_error(&fixture.internal());
    assert!(
        matches!(error, MetadataError::Locked { .. }),
        "a writer waits for readers: {error:?}"
    );
    drop(area);
    open(&fixture.internal());
}

#[test]
fn a_new_peer_gets_a_free_slot_and_no_free_slot_is_refused() {
    let fixture = Fixture::with_hosts("meta-disk internal;", &["bob"]);
    fixture
        .create(CreateOptions {
            force: false,
            max_peers: Some(2),
            bitmap_granularity_bytes: None,
        })
        .expect("create");
    let spec = MetaSpec {
        peers: vec![1],
        ..fixture.internal()
    };
    let (_, superblock) = open(&spec);
    assert_eq!(
        superblock
            .peers
            .iter()
            .filter(|slot| slot.node_id.is_some())
            .count(),
        1
    );
    let spec = MetaSpec {
        peers: vec![3, 1],
        ..fixture.internal()
    };
    let (file, superblock) = open(&spec);
    assert_eq!(superblock.peer_slot_of(3), Some(1));
    assert_eq!(file.read_bitmap(1).expect("new slot").count_set_blocks(), 0);
    drop(file);
    let (_, reread) = open(&spec);
    assert_eq!(
        reread.peer_slot_of(3),
        Some(1),
        "the assignment is persistent"
    );
    let spec = MetaSpec {
        peers: vec![1, 2, 3],
        ..fixture.internal()
    };
    let error = open_error(&spec);
    assert!(
        matches!(
            error,
            MetadataError::NoPeerSlot {
                peer: 2,
                slots: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("--max-peers"), "{error}");
}

#[test]
fn an_al_extents_the_ring_cannot_hold_is_refused() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let spec = MetaSpec {
        al_extents: 65534,
        ..fixture.internal()
    };
    let error = open_error(&spec);
    assert!(
        matches!(
            error,
            MetadataError::Layout {
                source: meta::MetaError::AlExtentsExceedRing { .. },
                ..
            }
        ),
        "{error:?}"
    );
    let spec = MetaSpec {
        al_extents: 257,
        ..fixture.internal()
    };
    let (file, _) = open(&spec);
    assert_eq!(
        file.layout().config().al_extents,
        257,
        "a changed al-extents is taken from the configuration"
    );
}

#[test]
fn external_metadata_with_and_without_index() {
    let cases = [
        ("meta-disk META;", None, 0, "at the start of"),
        (
            "meta-disk META [2];",
            Some(2),
            256 * MIB,
            "in slot 2 (offset 256 MiB) of",
        ),
    ];
    for (line, index, base, words) in cases {
        let fixture = Fixture::new(line);
        let meta_path = fixture.path("alice.meta");
        fixture.set_size(&meta_path, 3 * 128 * MIB);
        let lines = created(&fixture);
        assert!(
            lines[0].contains(&format!(
                "(external, 44 KiB {words} {};",
                meta_path.display()
            )),
            "{lines:?}"
        );
        let spec = fixture.spec(config::MetaDisk::External {
            path: meta_path.clone(),
            index,
        });
        let (file, superblock) = open(&spec);
        assert_eq!(
            file.layout().data_bytes(),
            BACKING_BYTES,
            "all of the backing file is data"
        );
        assert_eq!(superblock.layout.superblock().offset_bytes, 0);
        let mut magic = [0; 8];
        std::fs::File::open(&meta_path)
            .expect("open")
            .read_exact_at(&mut magic, base)
            .expect("read");
        assert_eq!(
            magic,
            meta::superblock::SUPERBLOCK_MAGIC,
            "superblock at {base}"
        );
        let backing = std::fs::read(fixture.disk()).expect("read backing");
        assert!(
            backing.iter().all(|&byte| byte == 0),
            "external metadata leaves the backing file alone"
        );
    }
}

#[test]
fn indexed_slots_of_one_device_lock_independently() {
    let fixture = Fixture::new("meta-disk internal;");
    let meta_path = fixture.path("shared.meta");
    fixture.set_size(&meta_path, 2 * 128 * MIB);
    let slot = |index| {
        device::Area::open(
            &fixture.disk(),
            &config::MetaDisk::External {
                path: meta_path.clone(),
                index: Some(index),
            },
            device::Access::Write,
        )
    };
    let first = slot(0).expect("slot 0");
    let second = slot(1).expect("slot 1 of the same device while slot 0 is held");
    assert!(matches!(slot(1), Err(MetadataError::Locked { .. })));
    drop((first, second));
    let error = slot(2).expect_err("slot 2 is past the end");
    assert!(
        matches!(
            error,
            MetadataError::IndexOutOfRange { index: 2, needed_bytes, .. }
                if needed_bytes == 3 * 128 * MIB
        ),
        "{error:?}"
    );
}

#[test]
fn create_md_refuses_existing_metadata_unless_forced() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (file, mut superblock) = open(&fixture.internal());
    superblock.current_uuid = 0xABCD;
    superblock.flags.consistent = true;
    file.write_superblock(&superblock).expect("write");
    drop(file);
    let error = fixture
        .create(CreateOptions::default())
        .expect_err("must refuse");
    let message = error.to_string();
    assert!(
        message.contains("000000000000ABCD")
            && message.contains("consistent")
            && message.contains("--force"),
        "{message}"
    );
    let (_, unchanged) = open(&fixture.internal());
    assert_eq!(
        unchanged.current_uuid, 0xABCD,
        "a refused create-md writes nothing"
    );
    drop(unchanged);
    fixture
        .create(CreateOptions {
            force: true,
            max_peers: Some(4),
            bitmap_granularity_bytes: None,
        })
        .expect("forced");
    let (file, fresh) = open(&fixture.internal());
    assert_eq!(fresh.current_uuid, UUID_JUST_CREATED);
    assert_eq!(file.layout().config().peer_slots, 4);
}

#[test]
fn selection_errors_are_clear() {
    let fixture = Fixture::new("meta-disk internal;");
    let cases = [
        (
            MdTarget {
                resource: Some("nope".into()),
                ..fixture.target()
            },
            "'nope' not defined in",
        ),
        (
            MdTarget {
                node: "zed".into(),
                ..fixture.target()
            },
            "has no 'on zed' section",
        ),
        (
            MdTarget {
                node: "zed".into(),
                resource: None,
                ..fixture.target()
            },
            "no resource has an 'on zed' section",
        ),
    ];
    for (target, expected) in cases {
        let message = dump_md(&target).expect_err("must fail").to_string();
        assert!(message.contains(expected), "{message} lacks {expected}");
    }
}

#[test]
fn dump_md_shows_the_superblock_bitmaps_and_activity_log() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (file, _) = open(&fixture.internal());
    let mut bitmap = file.read_bitmap(0).expect("read");
    bitmap.set(0, 8 * MIB).expect("set");
    let pages: Vec<(u64, Vec<u8>)> = bitmap
        .take_dirty_pages()
        .map(|(page, image)| (page, image.to_vec()))
        .collect();
    file.write_bitmap_pages(0, &pages).expect("write");
    drop(file);
    let dumps = dump_md(&MdTarget {
        resource: None,
        ..fixture.target()
    })
    .expect("dump");
    assert_eq!(dumps.len(), 1);
    let dump = &dumps[0];
    assert_eq!((dump.resource.as_str(), dump.volume), ("r0", 0));
    assert_eq!(dump.metadata.peers[0].node_id, Some(1));
    assert_eq!(dump.metadata.peers[0].out_of_sync_bytes, Some(8 * MIB));
    assert_eq!(dump.metadata.peers[1].out_of_sync_bytes, Some(0));
    assert!(dump.metadata.activity_log.is_some());
    let text = dump.render_text();
    assert!(
        text.starts_with(&format!(
            "# r0/0: metadata at the end of {}\n",
            fixture.disk().display()
        )),
        "{text}"
    );
    let json = serde_json::to_value(&dumps).expect("json");
    assert_eq!(json[0]["metadata"]["node_id"], 0);
}

#[test]
fn human_bytes_picks_the_unit_and_rounds_down() {
    let cases = [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (36 * 1024, "36 KiB"),
        (1536, "1.5 KiB"),
        (MIB - 1, "1023.9 KiB"),
        (1024 * MIB - 68 * 1024, "1023.9 MiB"),
        (3 << 30, "3 GiB"),
        (u64::MAX, "15.9 EiB"),
    ];
    for (bytes, expected) in cases {
        assert_eq!(human_bytes(bytes), expected, "{bytes}");
    }
}

fn write_bytes(path: &Path, offset: u64, bytes: &[u8]) {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for write");
    file.write_all_at(bytes, offset).expect("write");
}

/// drbdmeta's check before create-md: a file system, partition table or DRBD metadata where
/// create-md would write is named and nothing is written unless `--force`.
#[test]
fn create_md_refuses_foreign_data_unless_forced() {
    let forced = CreateOptions {
        force: true,
        ..CreateOptions::default()
    };
    // Internal metadata: an ext4 file system on the backing device.
    let fixture = Fixture::new("meta-disk internal;");
    write_bytes(&fixture.disk(), 1080, &[0x53, 0xEF]);
    let message = fixture
        .create(CreateOptions::default())
        .expect_err("must refuse")
        .to_string();
    assert!(
        message.contains("ext2/ext3/ext4 file system") && message.contains("--force"),
        "{message}"
    );
    assert!(
        matches!(
            open_error(&fixture.internal()),
            MetadataError::Missing { .. }
        ),
        "a refusal wrote metadata"
    );
    fixture.create(forced).expect("forced over the file system");

    // Internal metadata: DRBD 9's superblock magic where DRBD keeps it (the last 4 KiB).
    let fixture = Fixture::new("meta-disk internal;");
    write_bytes(
        &fixture.disk(),
        BACKING_BYTES - 4096 + 60,
        &0x8374_026du32.to_be_bytes(),
    );
    let message = fixture
        .create(CreateOptions::default())
        .expect_err("must refuse")
        .to_string();
    assert!(
        message.contains("DRBD 9 metadata at the end of"),
        "{message}"
    );

    // External metadata: XFS on the metadata device is refused; a file system on the data
    // disk is the data to replicate and is left alone.
    let fixture = Fixture::new("meta-disk META;");
    let meta = fixture.path("alice.meta");
    fixture.set_size(&meta, 8 * MIB);
    write_bytes(&meta, 0, b"XFSB");
    let message = fixture
        .create(CreateOptions::default())
        .expect_err("must refuse")
        .to_string();
    assert!(
        message.contains("alice.meta holds an XFS file system"),
        "{message}"
    );
    write_bytes(&meta, 0, &[0; 4]);
    write_bytes(&fixture.disk(), 0, b"XFSB");
    created(&fixture);
}

/// get-gi with the node stopped reads the superblock: one record per peer, sorted by name,
/// with the identifiers and flags on disk.
#[test]
fn generations_are_read_from_disk_per_peer() {
    let fixture = Fixture::new("meta-disk internal;");
    created(&fixture);
    let (file, mut superblock) = open(&fixture.internal());
    superblock.current_uuid = 0xAB00;
    superblock.history_uuids[0] = 0x1200;
    superblock.flags.consistent = true;
    if let Some(slot) = superblock
        .peers
        .iter_mut()
        .find(|slot| slot.node_id == Some(2))
    {
        slot.bitmap_uuid = 0x1200;
        slot.flags.outdated = true;
    }
    file.write_superblock(&superblock).expect("write");
    drop(file);
    let all = read_generations(&fixture.target(), &GiFilter::default()).expect("read");
    let lines = admin::format_get_gi(&all);
    assert_eq!(
        lines,
        "000000000000AB00:0000000000000000:0000000000001200:0000000000000000:\
         1:0:0:0:1:0:0:0:0:0:0:1\n\
         000000000000AB00:0000000000001200:0000000000001200:0000000000000000:\
         1:0:0:0:1:0:0:0:1:0:0:1\n"
    );
    assert_eq!(
        all.iter()
            .map(|record| record.peer.as_str())
            .collect::<Vec<_>>(),
        ["bob", "carol"]
    );
    let carol = GiFilter {
        peer: Some("carol".into()),
        volume: Some(0),
    };
    assert_eq!(
        read_generations(&fixture.target(), &carol)
            .expect("carol")
            .len(),
        1
    );
    for (filter, message) in [
        (
            GiFilter {
                peer: Some("zed".into()),
                volume: None,
            },
            "no connection named 'zed'",
        ),
        (
            GiFilter {
                peer: None,
                volume: Some(3),
            },
            "no volume 3",
        ),
    ] {
        let error = read_generations(&fixture.target(), &filter)
            .expect_err("must refuse")
            .to_string();
        assert!(error.contains(message), "{error}");
    }
}
// ----- resize: moving the metadata (issue 27 item 5) ----------------------------------------

/// Opens alice's metadata, sets bits and a generation, grows the file to `grown_bytes`;
/// returns the open file (still on the old layout) and its superblock.
fn grown_fixture(fixture: &Fixture, spec: &MetaSpec, grown_bytes: u64) -> (MetaFile, Superblock) {
    created(fixture);
    let (file, mut superblock) = open(spec);
    let mut bitmap = file.read_bitmap(0).expect("read");
    bitmap.set(0, 3 * 4096).expect("set");
    let pages: Vec<(u64, Vec<u8>)> = bitmap
        .take_dirty_pages()
        .map(|(page, image)| (page, image.to_vec()))
        .collect();
    file.write_bitmap_pages(0, &pages).expect("write bits");
    superblock.current_uuid = 0xABCD_0000_0000_1230;
    file.write_superblock(&superblock)
        .expect("write superblock");
    file.sync().expect("sync");
    drop(file);
    fixture.set_size(&fixture.disk(), grown_bytes);
    open(spec)
}

/// Grows alice's metadata with `before_write` as the failure hook.
fn move_metadata(
    file: &mut MetaFile,
    superblock: &Superblock,
    before_write: &mut dyn FnMut(MoveStep) -> std::io::Result<()>,
) -> Result<(Layout, Superblock), MetadataError> {
    let old = *file.layout();
    let new = file.plan_grow(None)?;
    let bitmaps = file.grown_bitmaps(superblock, &new, old.grow_resync_range(&new, false))?;
    let grow = Grow {
        layout: new,
        superblock,
        bitmaps: &bitmaps,
    };
    let moved = file.grow(&grow, before_write)?;
    Ok((new, moved))
}

#[test]
fn internal_metadata_moves_to_the_new_end_with_its_bits_and_generation() {
    let fixture = Fixture::new("meta-disk internal;");
    let (mut file, superblock) = grown_fixture(&fixture, &fixture.internal(), 2 * BACKING_BYTES);
    let old = *file.layout();
    let (new, moved) = move_metadata(&mut file, &superblock, &mut |_| Ok(())).expect("moves");
    assert!(new.data_bytes() > old.data_bytes());
    assert_eq!(*file.layout(), new);
    drop(file);
    let (file, reread) = open(&fixture.internal());
    assert_eq!(*file.layout(), new, "the new end holds the metadata");
    assert_eq!(reread, moved);
    assert_eq!(reread.current_uuid, 0xABCD_0000_0000_1230);
    let bitmap = file.read_bitmap(0).expect("read");
    assert!(
        bitmap.is_set(0) && bitmap.is_set(2) && !bitmap.is_set(3),
        "old bits kept"
    );
    let granularity = u64::from(new.config().bitmap_granularity_bytes);
    let new_blocks = (new.data_bytes() - old.data_bytes()).div_ceil(granularity);
    assert_eq!(
        bitmap.count_set_blocks(),
        3 + new_blocks,
        "the new area is out of sync"
    );
    assert_eq!(
        file.read_bitmap(1).expect("read").count_set_blocks(),
        new_blocks
    );
    let mut old_superblock = vec![0; 4096];
    file.area
        .read_at(
            old.superblock().offset_bytes,
            &mut old_superblock,
            "old superblock",
        )
        .expect("read");
    assert!(
        old_superblock.iter().all(|b| *b == 0),
        "the old metadata is cleared"
    );
}

/// A crash at any step of the move leaves metadata that attaches, at the old size before the
/// commit write and at the new size after it; a torn commit falls back to the old.
#[test]
fn a_move_cut_short_at_any_step_attaches_at_the_old_or_new_size() {
    let steps = [
        (MoveStep::Bitmap(0), false),
        (MoveStep::Bitmap(1), false),
        (MoveStep::Ring, false),
        (MoveStep::SyncBeforeCommit, false),
        (MoveStep::Commit, false),
        (MoveStep::SyncCommit, true),
        (MoveStep::ClearOld, true),
    ];
    for (stop_at, moved) in steps {
        let fixture = Fixture::new("meta-disk internal;");
        let (mut file, superblock) =
            grown_fixture(&fixture, &fixture.internal(), 2 * BACKING_BYTES);
        let old = *file.layout();
        let mut crash = |step| match step == stop_at {
            true => Err(std::io::Error::other("injected crash")),
            false => Ok(()),
        };
        let error = move_metadata(&mut file, &superblock, &mut crash).expect_err("stopped");
        assert!(
            error.to_string().contains("injected crash"),
            "{stop_at:?}: {error}"
        );
        // The open file switches only once the commit is durable (after its sync).
        let durable = stop_at == MoveStep::ClearOld;
        assert_eq!(
            *file.layout() != old,
            durable,
            "{stop_at:?}: the file follows the commit"
        );
        drop(file);
        let (file, reread) = open(&fixture.internal());
        assert_eq!(*file.layout() != old, moved, "{stop_at:?}: old or new size");
        assert_eq!(reread.current_uuid, 0xABCD_0000_0000_1230, "{stop_at:?}");
        assert!(
            file.read_bitmap(0).expect("bits").is_set(2),
            "{stop_at:?}: bits kept"
        );
        if !moved {
            // The node attached at its old size can still resize.
            let mut file = file;
            move_metadata(&mut file, &reread, &mut |_| Ok(())).expect("the retried move");
        }
    }
}

#[test]
fn a_torn_commit_attaches_at_the_old_size() {
    let fixture = Fixture::new("meta-disk internal;");
    let (mut file, superblock) = grown_fixture(&fixture, &fixture.internal(), 2 * BACKING_BYTES);
    let old = *file.layout();
    let mut crash = |step| match step {
        MoveStep::Commit => Err(std::io::Error::other("injected crash")),
        _ => Ok(()),
    };
    move_metadata(&mut file, &superblock, &mut crash).expect_err("stopped");
    let new = file.plan_grow(None).expect("plan");
    // Half a superblock: what a torn 4 KiB write may leave.
    let mut block = superblock.clone();
    block.layout = new;
    let mut image = block.encode().expect("encode");
    image[2048..].fill(0xA5);
    file.area
        .write_at(new.superblock().offset_bytes, &image)
        .expect("tear");
    drop(file);
    let (file, _) = open(&fixture.internal());
    assert_eq!(*file.layout(), old);
}

#[test]
fn a_grow_smaller_than_the_metadata_is_refused() {
    let fixture = Fixture::new("meta-disk internal;");
    let (file, _) = grown_fixture(&fixture, &fixture.internal(), BACKING_BYTES + 4096);
    let error = file.plan_grow(None).expect_err("refused");
    assert!(error.to_string().contains("grow it to at least"), "{error}");
}

#[test]
fn external_metadata_grows_its_bitmap_in_place() {
    let fixture = Fixture::with_hosts("meta-disk META;", &["bob"]);
    let meta_path = fixture.path("alice.meta");
    fixture.set_size(&meta_path, MIB);
    let spec = MetaSpec {
        peers: vec![1],
        ..fixture.spec(config::MetaDisk::External {
            path: meta_path,
            index: None,
        })
    };
    let (mut file, superblock) = grown_fixture(&fixture, &spec, 4 * BACKING_BYTES);
    let (new, _) = move_metadata(&mut file, &superblock, &mut |_| Ok(())).expect("grows");
    assert_eq!(new.data_bytes(), 4 * BACKING_BYTES);
    drop(file);
    let (file, reread) = open(&spec);
    assert_eq!(*file.layout(), new);
    assert_eq!(reread.current_uuid, 0xABCD_0000_0000_1230);
    let bitmap = file.read_bitmap(0).expect("bits");
    assert!(bitmap.is_set(2) && !bitmap.is_set(3) && bitmap.is_set(new.bitmap_blocks() - 1));
}

#[test]
fn external_metadata_with_shifting_bitmaps_is_refused() {
    let fixture = Fixture::new("meta-disk META;");
    let meta_path = fixture.path("alice.meta");
    fixture.set_size(&meta_path, MIB);
    let spec = fixture.spec(config::MetaDisk::External {
        path: meta_path,
        index: None,
    });
    let (mut file, superblock) = grown_fixture(&fixture, &spec, 4 * BACKING_BYTES);
    let old = *file.layout();
    let error = move_metadata(&mut file, &superblock, &mut |_| Ok(())).expect_err("refused");
    assert!(
        matches!(error, MetadataError::ResizeRefused { .. }),
        "{error:?}"
    );
    assert_eq!(*file.layout(), old);
}

/// A grow to less than the device gives (the size the nodes agreed, or `--size`) keeps the
/// cap in the superblock: the node reattaches at that size, and dump-md shows it.
#[test]
fn a_capped_grow_is_kept_across_reopen_and_dumped() {
    let fixture = Fixture::new("meta-disk internal;");
    let (mut file, superblock) = grown_fixture(&fixture, &fixture.internal(), 2 * BACKING_BYTES);
    let old = *file.layout();
    let cap = old.data_bytes() + 8 * MIB;
    let new = file.plan_grow(Some(cap)).expect("plan");
    assert_eq!(new.data_bytes(), cap);
    let bitmaps = file
        .grown_bitmaps(&superblock, &new, old.grow_resync_range(&new, false))
        .expect("bitmaps");
    let grow = Grow {
        layout: new,
        superblock: &superblock,
        bitmaps: &bitmaps,
    };
    file.grow(&grow, &mut |_| Ok(())).expect("moves");
    drop(file);
    let (file, reread) = open(&fixture.internal());
    assert_eq!(file.layout().data_bytes(), cap);
    assert_eq!(reread.layout.config().data_bytes_max, Some(cap));
    assert_eq!(reread.format_version(), 3);
    drop(file);
    let dumps = dump_md(&fixture.target()).expect("dump");
    assert_eq!(dumps[0].metadata.layout.data_bytes_max, Some(cap));
    assert!(dumps[0].render_text().contains("data size cap"));
}
