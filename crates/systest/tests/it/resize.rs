//! `tandem resize` through real node processes (issue 27 item 5, done-when: "`resize` grows a
//! live two-node resource under load with a replica check afterwards").
//!
//! Both nodes use internal metadata, so the grow moves the superblock, activity log and
//! bitmaps to the new end of each backing file. A client keeps writing to the old area through
//! NBD all the while. Afterwards a new NBD connection sees the new size and writes into the new
//! area, and the backing files must be identical over the whole new export.
//!
//! Invariants of these tests: every wait polls with a deadline (`wait_until`); none sleeps.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::nbd_client;
use crate::tools::{fresh_seed, Rng};

const ALICE: usize = 0;
const BOB: usize = 1;
const MIB: u64 = 1 << 20;
/// What each backing file grows by.
const GROWTH_BYTES: u64 = 32 * MIB;
/// How long the resize (negotiation and both metadata moves) may take.
const RESIZE_DEADLINE: Duration = Duration::from_secs(30);
/// How long the resync of the new area may take on a loaded 2-core machine.
const SYNC_DEADLINE: Duration = Duration::from_secs(60);
/// How long a state change may take to show.
const STATE_DEADLINE: Duration = Duration::from_secs(10);
/// Writes the background writer must have done before the resize, and after it.
const WRITES_BEFORE: u64 = 50;

/// A client writing seeded 4 KiB blocks into the first `area_bytes` of the Primary's export
/// through one NBD connection until stopped; every write must succeed.
struct Writer {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    thread: JoinHandle<Result<u64, String>>,
}

impl Writer {
    fn start(cluster: &Cluster, area_bytes: u64) -> Writer {
        let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE)
            .unwrap_or_else(|refusal| panic!("alice refused NBD: {refusal:?}"));
        let (stop, done) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (stop_flag, counter) = (Arc::clone(&stop), Arc::clone(&done));
        let seed = fresh_seed();
        eprintln!("writer data from seed {seed} (SYSTEST_SEED={seed} replays it)");
        let thread = std::thread::spawn(move || {
            let mut rng = Rng::new(seed);
            let blocks = area_bytes / 4096;
            while !stop_flag.load(Ordering::Acquire) {
                let block = u64::from_le_bytes(rng.bytes(8).try_into().expect("8 bytes")) % blocks;
                let errno = client.write(block * 4096, &rng.bytes(4096));
                if errno != 0 {
                    return Err(format!(
                        "a write at block {block} failed with errno {errno}"
                    ));
                }
                counter.fetch_add(1, Ordering::AcqRel);
            }
            client.disconnect();
            Ok(counter.load(Ordering::Acquire))
        });
        Writer { stop, done, thread }
    }

    fn writes(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Release);
        match self.thread.join() {
            Ok(Ok(writes)) => writes,
            Ok(Err(error)) => panic!("the writer failed during the resize: {error}"),
            Err(_) => panic!("the writer thread panicked"),
        }
    }
}

/// Grows node `index`'s backing file by [`GROWTH_BYTES`], filling the new bytes with `fill`
/// (0 leaves them a hole, as `truncate -s` does).
fn grow_backing(cluster: &Cluster, index: usize, fill: u8) -> u64 {
    let file = OpenOptions::new()
        .write(true)
        .open(cluster.disk(index))
        .expect("open the backing file");
    let old = file.metadata().expect("stat").len();
    let new = old + GROWTH_BYTES;
    file.set_len(new).expect("grow the backing file");
    if fill != 0 {
        file.write_all_at(
            &vec![fill; usize::try_from(GROWTH_BYTES).expect("small")],
            old,
        )
        .expect("fill");
    }
    new
}

/// Two nodes with internal metadata and a fixed resync rate fast enough for the new area
/// (DRBD's default of 250 KiB/s would take minutes), also while the writer keeps the
/// application busy (`c-min-rate` is what a resync gets then).
fn spec() -> Spec {
    fast_resync(Spec::two_nodes('C').internal_metadata())
}

fn fast_resync(spec: Spec) -> Spec {
    spec.disk_line("c-plan-ahead 0;")
        .disk_line("resync-rate 64M;")
        .disk_line("c-min-rate 32M;")
}

fn size_bytes(cluster: &Cluster, index: usize) -> u64 {
    cluster.status(index).size_kib() * 1024
}

/// Runs `resize` on alice with `extra` arguments (under load with `load`: a writer runs before,
/// during and after it), waits until both nodes export the new size and the resync (if any)
/// is done; returns (old size, new size, KiB alice sent bob meanwhile).
fn resize_and_settle(
    cluster: &Cluster,
    extra: &[&str],
    fill_bob: u8,
    load: bool,
) -> (u64, u64, u64) {
    let bob = NODE_NAMES[BOB];
    let old_bytes = cluster.export_bytes();
    let writer = load.then(|| Writer::start(cluster, old_bytes));
    let writes = || writer.as_ref().map_or(u64::MAX, Writer::writes);
    cluster.wait_until("the writer is under way", STATE_DEADLINE, || {
        writes() >= WRITES_BEFORE
    });
    grow_backing(cluster, ALICE, 0);
    grow_backing(cluster, BOB, fill_bob);
    let sent_before = cluster.status(ALICE).sent_kib(bob);
    let mut args = vec!["resize"];
    args.extend_from_slice(extra);
    args.push(RESOURCE);
    let output = cluster.admin_ok(ALICE, &args);
    assert!(output.contains("grown to"), "resize said: {output}");
    let new_bytes = size_bytes(cluster, ALICE);
    assert!(
        new_bytes > old_bytes + GROWTH_BYTES / 2,
        "{old_bytes} -> {new_bytes}: the export must grow by about the growth"
    );
    cluster.wait_until("bob exports the new size", RESIZE_DEADLINE, || {
        size_bytes(cluster, BOB) == new_bytes
    });
    let at_resize = writes();
    cluster.wait_until("alice and bob are in sync again", SYNC_DEADLINE, || {
        let status = cluster.status(ALICE);
        status.out_of_sync_kib(bob) == 0 && status.replication(bob) == "Established"
    });
    if let Some(writer) = writer {
        let what = "the writer went on after the resize";
        cluster.wait_until(what, STATE_DEADLINE, || {
            writer.writes() >= at_resize.saturating_add(WRITES_BEFORE)
        });
        writer.finish();
    }
    let sent = cluster.status(ALICE).sent_kib(bob) - sent_before;
    (old_bytes, new_bytes, sent)
}

/// A new NBD connection sees `new_bytes` and writes its last block; the replicas then match
/// over all of it.
fn write_the_new_area_and_compare(cluster: &Cluster, new_bytes: u64) {
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE)
        .unwrap_or_else(|refusal| panic!("alice refused NBD: {refusal:?}"));
    assert_eq!(
        client.size, new_bytes,
        "a new NBD connection sees the new size"
    );
    let pattern = vec![0x5A; 4096];
    assert_eq!(
        client.write(new_bytes - 4096, &pattern),
        0,
        "a write at the new end"
    );
    assert_eq!(client.flush(), 0);
    client.disconnect();
    cluster.wait_identical_within(ALICE, BOB, new_bytes, STATE_DEADLINE);
    let mut last = vec![0; 4096];
    let bob_file = std::fs::File::open(cluster.disk(BOB)).expect("open bob's backing file");
    bob_file
        .read_exact_at(&mut last, new_bytes - 4096)
        .expect("read");
    assert_eq!(last, pattern, "bob holds the write in the new area");
}

#[test]
fn resize_grows_a_live_two_node_resource_under_load_and_resyncs_the_new_area() {
    let cluster = Cluster::with_primary(spec());
    // Bob's new bytes are garbage: only a resync of the new area makes the replicas equal.
    let (old_bytes, new_bytes, sent_kib) = resize_and_settle(&cluster, &[], 0xEE, true);
    assert!(
        sent_kib >= (new_bytes - old_bytes) / 1024,
        "the new area ({} KiB) must be resynced; {sent_kib} KiB were sent (with the writer's)",
        (new_bytes - old_bytes) / 1024
    );
    write_the_new_area_and_compare(&cluster, new_bytes);
}

/// With `--assume-clean` (both files grew as holes, so the new bytes read as zeros on both)
/// only the old metadata's bytes, which are now data and differ between the nodes, are
/// resynced: no writer runs, so what alice sends is that resync alone.
#[test]
fn resize_with_assume_clean_resyncs_only_the_old_metadata() {
    let cluster = Cluster::with_primary(spec());
    let backing_before = std::fs::metadata(cluster.disk(ALICE)).expect("stat").len();
    let (old_bytes, new_bytes, sent_kib) =
        resize_and_settle(&cluster, &["--assume-clean"], 0, false);
    let old_tail_kib = (backing_before - old_bytes) / 1024;
    assert!(new_bytes - old_bytes >= GROWTH_BYTES / 2);
    assert!(
        sent_kib <= old_tail_kib,
        "only the old metadata ({old_tail_kib} KiB) may be resynced, not the new area; {sent_kib} \
         KiB were sent"
    );
    write_the_new_area_and_compare(&cluster, new_bytes);
}

#[test]
fn resize_refuses_on_a_secondary_when_a_peer_did_not_grow_and_when_it_is_not_connected() {
    let cluster = Cluster::with_primary(spec());
    let old_bytes = cluster.export_bytes();
    let output = cluster.admin(BOB, &["resize", RESOURCE]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("is Primary"),
        "a Secondary refuses while alice is Primary: {stderr}"
    );
    grow_backing(&cluster, ALICE, 0);
    let output = cluster.admin(ALICE, &["resize", RESOURCE]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "resize must fail when bob's device did not grow"
    );
    assert!(stderr.contains("nothing to grow"), "stderr: {stderr}");
    assert_eq!(
        (size_bytes(&cluster, ALICE), size_bytes(&cluster, BOB)),
        (old_bytes, old_bytes)
    );
    cluster.admin_ok(ALICE, &["disconnect", RESOURCE]);
    let bob = NODE_NAMES[BOB];
    cluster.wait_until("alice is StandAlone", STATE_DEADLINE, || {
        cluster.status(ALICE).connection_state(bob) == "StandAlone"
    });
    grow_backing(&cluster, BOB, 0);
    let output = cluster.admin(ALICE, &["resize", RESOURCE]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains(bob),
        "refused naming bob: {stderr}"
    );
    assert_eq!(size_bytes(&cluster, ALICE), old_bytes);
}

/// The FUSE file's size follows the resize (so `losetup -c` on a loop device over it picks the
/// new size up), and a handle opened before the resize can write into the new area.
#[test]
fn the_fuse_file_grows_with_the_volume() {
    if !crate::fuse::fuse_available() {
        return;
    }
    let cluster = Cluster::with_primary(fast_resync(crate::fuse::fuse_spec().internal_metadata()));
    let path = crate::fuse::fuse_file(&cluster, ALICE);
    let old_bytes = cluster.export_bytes();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open alice's FUSE file");
    assert_eq!(file.metadata().expect("stat").len(), old_bytes);
    grow_backing(&cluster, ALICE, 0);
    grow_backing(&cluster, BOB, 0);
    cluster.admin_ok(ALICE, &["resize", "--assume-clean", RESOURCE]);
    let new_bytes = size_bytes(&cluster, ALICE);
    assert!(new_bytes > old_bytes);
    cluster.wait_until("the FUSE file shows the new size", STATE_DEADLINE, || {
        std::fs::metadata(&path).is_ok_and(|m| m.len() == new_bytes)
    });
    let pattern = vec![0xA7; 4096];
    file.write_all_at(&pattern, new_bytes - 4096)
        .expect("a write into the new area through the open file");
    file.sync_data().expect("fsync");
    drop(file);
    cluster.wait_until("bob exports the new size", RESIZE_DEADLINE, || {
        size_bytes(&cluster, BOB) == new_bytes
    });
    cluster.wait_until("alice and bob are in sync again", SYNC_DEADLINE, || {
        cluster.status(ALICE).out_of_sync_kib(NODE_NAMES[BOB]) == 0
    });
    cluster.wait_identical_within(ALICE, BOB, new_bytes, STATE_DEADLINE);
}

/// A node that grew while its peer was away (`--assume-peer-has-space`, nobody connected) and
/// that peer refuse each other's connections over the size difference (at the greeting) until
/// the peer grows the same way; then they connect, the new area is resynced from the Primary
/// and the replicas match.
#[test]
fn nodes_grown_apart_with_assume_peer_has_space_reconnect_and_resync() {
    let cluster = Cluster::with_primary(spec());
    let (alice, bob) = (NODE_NAMES[ALICE], NODE_NAMES[BOB]);
    let old_bytes = cluster.export_bytes();
    cluster.admin_ok(ALICE, &["disconnect", RESOURCE]);
    cluster.wait_until("alice is StandAlone", STATE_DEADLINE, || {
        cluster.status(ALICE).connection_state(bob) == "StandAlone"
    });
    grow_backing(&cluster, ALICE, 0);
    grow_backing(&cluster, BOB, 0xEE);
    cluster.admin_ok(ALICE, &["resize", "--assume-peer-has-space", RESOURCE]);
    let new_bytes = size_bytes(&cluster, ALICE);
    assert!(new_bytes > old_bytes);
    assert_eq!(size_bytes(&cluster, BOB), old_bytes, "bob was not asked");
    cluster.admin_ok(ALICE, &["connect", RESOURCE]);
    cluster.wait_until("the size difference is refused", STATE_DEADLINE, || {
        cluster.log(BOB).contains("bytes on the peer")
    });
    assert_ne!(cluster.status(BOB).connection_state(alice), "Connected");
    cluster.admin_ok(BOB, &["resize", "--assume-peer-has-space", RESOURCE]);
    assert_eq!(size_bytes(&cluster, BOB), new_bytes);
    cluster.wait_until("alice and bob are in sync again", SYNC_DEADLINE, || {
        let status = cluster.status(ALICE);
        status.connection_state(bob) == "Connected"
            && status.out_of_sync_kib(bob) == 0
            && status.replication(bob) == "Established"
    });
    cluster.wait_identical_within(ALICE, BOB, new_bytes, STATE_DEADLINE);
}

/// External metadata (its own file, one peer slot): the bitmap grows in place, the data
/// device's whole new size is exported, and the new area is resynced.
#[test]
fn resize_with_external_metadata_grows_the_bitmap_in_place() {
    let cluster = Cluster::with_primary(fast_resync(Spec::two_nodes('C')));
    let (old_bytes, new_bytes, sent_kib) = resize_and_settle(&cluster, &[], 0xEE, false);
    assert_eq!(
        new_bytes,
        old_bytes + GROWTH_BYTES,
        "external metadata exports the whole device"
    );
    assert!(
        sent_kib >= GROWTH_BYTES / 1024,
        "the new area was resynced ({sent_kib} KiB sent)"
    );
    write_the_new_area_and_compare(&cluster, new_bytes);
}
