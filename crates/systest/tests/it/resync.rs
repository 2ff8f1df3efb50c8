//! Persistent metadata and resync through real node processes (issue 3): generation
//! identifiers and bitmaps survive restarts, a peer that missed writes gets exactly the blocks
//! it missed, a crashed Primary resyncs everything, `primary --force` makes the initial full
//! sync, split brain is detected and recovered by hand or by `after-sb-0pri`, and a node
//! refuses a disk without valid metadata.
//!
//! Invariants of these tests:
//! - Every wait polls with a deadline (the harness's `wait_until`); none sleeps.
//! - Resyncs that a test wants to watch run at a fixed, low `resync-rate` (`c-plan-ahead 0`),
//!   so the states in between last long enough for a poll to see them.
//! - What a resync moved is read from the status counters (`sent_kib` / `received_kib`,
//!   cumulative since the node started), so "only the changed blocks" is an exact assertion.

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use crate::cluster::{Cluster, Metadata, Spec, Status, CONNECT_DEADLINE, NODE_NAMES, RESOURCE};
use crate::nbd_client;
use crate::tools::{fio_verify, fresh_seed, require_fio, Background, Rng};

/// How long a state change (disconnect, role, connect) may take to show.
const STATE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a resync of a test disk may take (64 MiB, loaded 2-core machine).
const SYNC_DEADLINE: Duration = Duration::from_secs(60);
/// How long one fio run may take.
const FIO_DEADLINE: Duration = Duration::from_secs(25);
/// How long a node may take to refuse a disk.
const EXIT_DEADLINE: Duration = Duration::from_secs(10);
/// How long the split-brain test checks that both sides stay StandAlone (connect-int is
/// 1 s, so this spans several reconnect attempts a buggy node would make).
const STANDALONE_HOLD: Duration = Duration::from_secs(3);
/// The bitmap granularity and the unit of every test write: 4 KiB.
const BLOCK_BYTES: u64 = 4096;
/// Blocks written while disconnected in the changed-blocks test.
const SCATTERED_BLOCKS: u64 = 64;
const MIB: u64 = 1 << 20;
const ALICE: usize = 0;
const BOB: usize = 1;

/// Lines for the resource's `disk { }` section: a fixed resync rate of `rate` (e.g. `4M`).
fn fixed_rate(spec: Spec, rate: &str) -> Spec {
    spec.disk_line("c-plan-ahead 0;")
        .disk_line(&format!("resync-rate {rate};"))
}

/// What a test saw while it waited for a resync to finish.
#[derive(Debug, Default)]
struct Observed {
    /// `node>peer:State` for every replication state seen on a connected link.
    states: BTreeSet<String>,
    /// `done_percent` values seen strictly between 0 and 100.
    partial_done: Vec<f64>,
}

impl Observed {
    fn saw(&self, node: usize, peer: usize, state: &str) -> bool {
        let key = format!("{}>{}:{state}", NODE_NAMES[node], NODE_NAMES[peer]);
        self.states.contains(&key)
    }

    fn saw_any_sync(&self) -> bool {
        self.states
            .iter()
            .any(|key| key.ends_with(":SyncSource") || key.ends_with(":SyncTarget"))
    }

    fn record(&mut self, node: usize, peer: usize, status: &Status) {
        let name = NODE_NAMES[peer];
        if status.connection_state(name) != "Connected" {
            return;
        }
        let state = status.replication(name);
        self.states
            .insert(format!("{}>{name}:{state}", NODE_NAMES[node]));
        if let Some(done) = status.done_percent(name) {
            if done > 0.0 && done < 100.0 {
                self.partial_done.push(done);
            }
        }
    }
}

/// Whether `status` shows an UpToDate disk, and every peer Connected, Established, UpToDate
/// and nothing out of sync.
fn in_sync(cluster: &Cluster, index: usize, status: &Status) -> bool {
    status.disk() == "UpToDate"
        && cluster.peers_of(index).all(|peer| {
            let name = cluster.name(peer);
            status.connection_state(name) == "Connected"
                && status.replication(name) == "Established"
                && status.peer_disk(name) == "UpToDate"
                && status.out_of_sync_kib(name) == 0
        })
}

/// Polls every node until all are in sync with each other ([`in_sync`]), recording the
/// replication states and progress seen on the way.
fn watch_until_in_sync(cluster: &Cluster, deadline: Duration) -> Observed {
    let mut observed = Observed::default();
    cluster.wait_until(
        "every node is UpToDate, Established and in sync with every peer",
        deadline,
        || {
            let mut all = true;
            for index in 0..2 {
                let status = cluster.status(index);
                for peer in cluster.peers_of(index) {
                    observed.record(index, peer, &status);
                }
                all &= in_sync(cluster, index, &status);
            }
            all
        },
    );
    observed
}

/// `disconnect` on both nodes; waits until each shows the other StandAlone.
fn disconnect_both(cluster: &Cluster) {
    for index in [ALICE, BOB] {
        cluster.admin_ok(index, &["disconnect", RESOURCE]);
    }
    cluster.wait_until("alice and bob are StandAlone", STATE_DEADLINE, || {
        [ALICE, BOB].iter().all(|&index| {
            let peer = NODE_NAMES[1 - index];
            cluster.status(index).connection_state(peer) == "StandAlone"
        })
    });
}

/// Writes every `(offset, data)` through the NBD export of `index` (which must be Primary),
/// each acknowledged without error, then closes the export and waits until it shows closed.
fn write_through_nbd(cluster: &Cluster, index: usize, writes: &[(u64, Vec<u8>)]) {
    let mut client = nbd_client::open(&cluster.nbd_socket(index), RESOURCE)
        .unwrap_or_else(|refusal| panic!("{} refused NBD: {refusal:?}", cluster.name(index)));
    for (offset, data) in writes {
        let errno = client.write(*offset, data);
        assert_eq!(errno, 0, "the write at {offset} failed with errno {errno}");
    }
    client.disconnect();
    let what = format!("{}'s export is closed", cluster.name(index));
    cluster.wait_until(&what, STATE_DEADLINE, || !cluster.status(index).open());
}

/// `length` seeded random bytes as 1 MiB writes starting at `offset`.
fn random_writes(rng: &mut Rng, offset: u64, length: u64) -> Vec<(u64, Vec<u8>)> {
    (0..length / MIB)
        .map(|chunk| (offset + chunk * MIB, rng.bytes(MIB as usize)))
        .collect()
}

/// Bytes `offset..offset + length` of a file.
fn read_range(path: &Path, offset: u64, length: u64) -> Vec<u8> {
    let file = std::fs::File::open(path)
        .unwrap_or_else(|error| panic!("cannot open {}: {error}", path.display()));
    let mut bytes = vec![0; usize::try_from(length).expect("length fits usize")];
    file.read_exact_at(&mut bytes, offset)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    bytes
}

/// Asserts that `writes` are what the backing file of `index` holds.
fn assert_holds(cluster: &Cluster, index: usize, writes: &[(u64, Vec<u8>)], what: &str) {
    for (offset, data) in writes {
        let length = u64::try_from(data.len()).expect("length fits u64");
        assert!(
            read_range(cluster.disk(index), *offset, length) == *data,
            "{}'s backing file does not hold {what} at byte {offset}",
            cluster.name(index)
        );
    }
}

/// Asserts that the backing file of `index` is zero over `offset..offset + length`.
fn assert_zero(cluster: &Cluster, index: usize, offset: u64, length: u64, what: &str) {
    let bytes = read_range(cluster.disk(index), offset, length);
    let at = bytes.iter().position(|byte| *byte != 0);
    assert!(
        at.is_none(),
        "{}'s backing file is not zero at byte {} ({what})",
        cluster.name(index),
        offset + u64::try_from(at.unwrap_or_default()).expect("fits u64")
    );
}

/// 4 KiB blocks of the first `length` bytes of a backing file that hold a non-zero byte.
fn nonzero_blocks(cluster: &Cluster, index: usize, length: u64) -> usize {
    read_range(cluster.disk(index), 0, length)
        .chunks(4096)
        .filter(|block| block.iter().any(|byte| *byte != 0))
        .count()
}

/// drbd-semantics.md §3 "Bitmap": writes while the peer is away set its bits, one per
/// 4 KiB; on reconnect only those blocks move (bitmap resync), then replication is
/// Established again.
#[test]
fn only_the_blocks_written_while_disconnected_are_resynced() {
    only_changed_blocks_are_resynced(Spec::two_nodes('C'));
}

/// The same with the metadata at the end of the backing file (`meta-disk internal`): the
/// export shrinks and the replicas compare over the exported bytes only.
#[test]
fn only_the_blocks_written_while_disconnected_are_resynced_with_internal_metadata() {
    only_changed_blocks_are_resynced(Spec::two_nodes('C').internal_metadata());
}

fn only_changed_blocks_are_resynced(spec: Spec) {
    let cluster = Cluster::with_primary(spec);
    let bob = NODE_NAMES[BOB];
    cluster.admin_ok(ALICE, &["disconnect", RESOURCE]);
    cluster.wait_until(
        "alice is StandAlone and bob no longer Connected",
        STATE_DEADLINE,
        || {
            cluster.status(ALICE).connection_state(bob) == "StandAlone"
                && cluster.status(BOB).connection_state(NODE_NAMES[ALICE]) != "Connected"
        },
    );
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    // Blocks `stride` apart (plus a small skew), so no two are adjacent or equal.
    let stride = cluster.export_bytes() / BLOCK_BYTES / SCATTERED_BLOCKS;
    let writes: Vec<(u64, Vec<u8>)> = (0..SCATTERED_BLOCKS)
        .map(|i| ((i * stride + i % 7) * BLOCK_BYTES, rng.bytes(4096)))
        .collect();
    write_through_nbd(&cluster, ALICE, &writes);
    assert_eq!(
        cluster.out_of_sync_kib(ALICE, BOB),
        SCATTERED_BLOCKS * BLOCK_BYTES / 1024,
        "alice must count exactly the written blocks out of sync for bob"
    );
    let status = cluster.status(ALICE);
    assert!(
        crate::cluster::first_difference(cluster.disk(ALICE), cluster.disk(BOB)).is_some(),
        "bob's backing file got the writes although alice was disconnected"
    );
    let sent_before = status.sent_kib(bob);
    cluster.admin_ok(ALICE, &["connect", RESOURCE]);
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    let sent = cluster.status(ALICE).sent_kib(bob) - sent_before;
    assert_eq!(
        sent,
        SCATTERED_BLOCKS * BLOCK_BYTES / 1024,
        "the resync must move exactly the out-of-sync blocks (KiB sent to bob)"
    );
}

/// drbd-semantics.md §2/§3: a Secondary that dies (SIGKILL) in the middle of a workload
/// comes back with its metadata, reconnects, and gets the blocks it missed from the Primary
/// by a bitmap resync (not a full one: fio only touched the first 16 MiB).
#[test]
fn a_secondary_killed_during_writes_catches_up() {
    require_fio();
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let bob = NODE_NAMES[BOB];
    let mut fio = fio_verify(
        &cluster.nbd_uri(ALICE),
        cluster.dir(),
        "randwrite",
        "4k",
        "16M",
    );
    // 4096 writes at 2000/s: about 2 s of writing, so the kill lands in the middle. One
    // process (--thread): a deadline kill then reaches the job, which holds the output pipes.
    fio.args(["--rate_iops=2000", "--thread"]);
    let mut fio = Background::spawn(fio);
    cluster.wait_until(
        "bob's backing file holds at least 128 written blocks",
        STATE_DEADLINE,
        || nonzero_blocks(&cluster, BOB, 16 * MIB) >= 128,
    );
    assert!(
        fio.is_running(),
        "fio finished before the kill: the workload is too short for this test"
    );
    cluster.kill(BOB);
    let output = fio.wait(FIO_DEADLINE);
    assert!(
        output.status.success(),
        "fio failed after the secondary was killed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let status = cluster.status(ALICE);
    let missed_kib = status.out_of_sync_kib(bob);
    assert!(
        missed_kib > 0,
        "alice counts nothing out of sync: {}",
        status.0
    );
    let sent_before = status.sent_kib(bob);
    cluster.start_node(BOB);
    let observed = watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    let sent = cluster.status(ALICE).sent_kib(bob) - sent_before;
    assert!(
        sent >= missed_kib && sent <= 16 * 1024,
        "the resync moved {sent} KiB; alice counted {missed_kib} KiB out of sync, all within \
         the first 16 MiB (seen: {observed:?})"
    );
}

/// drbd-semantics.md §2 rule 2 (crashed primary) and §3 "Activity log": a node killed as
/// Primary resyncs to its peer, when it comes back, every block it may have written without
/// the peer (everything without an activity log, the hot extents with one). It restarts
/// UpToDate (as Secondary), it is the source, and the replicas end identical.
#[test]
fn a_primary_killed_during_writes_resyncs_its_hot_blocks_when_it_returns() {
    require_fio();
    // A fixed rate: the default c-plan-ahead controller moves about 0.5 MiB/s on loopback
    // here, too slow for a whole 64 MiB disk within the deadline.
    let cluster = Cluster::with_primary(fixed_rate(Spec::two_nodes('C'), "32M"));
    let (alice, bob) = (NODE_NAMES[ALICE], NODE_NAMES[BOB]);
    let mut fio = fio_verify(
        &cluster.nbd_uri(ALICE),
        cluster.dir(),
        "randwrite",
        "4k",
        "16M",
    );
    fio.args(["--rate_iops=2000", "--thread"]);
    let mut fio = Background::spawn(fio);
    cluster.wait_until(
        "bob's backing file holds at least 128 written blocks",
        STATE_DEADLINE,
        || nonzero_blocks(&cluster, BOB, 16 * MIB) >= 128,
    );
    assert!(fio.is_running(), "fio finished before the kill");
    cluster.kill(ALICE);
    // fio's server died under it. Its outcome does not matter here, and fio 3.33's nbd
    // engine may wait forever for replies from a dead server: kill it (dropping does).
    drop(fio);
    cluster.wait_until("bob sees alice gone", STATE_DEADLINE, || {
        cluster.status(BOB).connection_state(alice) != "Connected"
    });
    cluster.start_node(ALICE);
    let status = cluster.status(ALICE);
    assert_eq!(status.role(), "Secondary", "{}", status.0);
    assert_eq!(status.disk(), "UpToDate", "{}", status.0);
    let observed = watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    // Everything without an activity log; with one, at least the 4 MiB extents fio wrote
    // in (all four of the first 16 MiB), which were hot when alice died.
    let sent = cluster.status(ALICE).sent_kib(bob);
    eprintln!("the crashed Primary resynced {sent} KiB (seen: {observed:?})");
    assert!(
        sent >= 16 * 1024 && sent <= cluster.export_bytes() / 1024,
        "the restarted crashed Primary sent {sent} KiB to bob, not at least the 16 MiB fio \
         wrote in (seen: {observed:?})"
    );
    assert!(
        !observed.saw(BOB, ALICE, "SyncSource") && !observed.saw(ALICE, BOB, "SyncTarget"),
        "the resync ran the wrong way: {observed:?}"
    );
}

/// drbd-semantics.md §3: generation identifiers and bitmaps are on disk, so two nodes that
/// were in sync and are restarted cleanly come back UpToDate and reconnect with nothing to
/// resync: no SyncSource/SyncTarget, nothing out of sync, and not one byte sent or received.
#[test]
fn a_clean_restart_of_an_in_sync_pair_needs_no_resync() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let writes = random_writes(&mut Rng::new(seed), 5 * MIB, 2 * MIB);
    write_through_nbd(&cluster, ALICE, &writes);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    watch_until_in_sync(&cluster, STATE_DEADLINE);
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    cluster.wait_until("bob sees alice Secondary", STATE_DEADLINE, || {
        cluster.status(BOB).peer_role(NODE_NAMES[ALICE]) == "Secondary"
    });
    cluster.stop(ALICE);
    cluster.stop(BOB);
    for index in [ALICE, BOB] {
        cluster.start_node(index);
        let status = cluster.status(index);
        assert_eq!(
            status.disk(),
            "UpToDate",
            "after a clean restart: {}",
            status.0
        );
    }
    let observed = watch_until_in_sync(&cluster, CONNECT_DEADLINE);
    assert!(!observed.saw_any_sync(), "a resync ran: {observed:?}");
    for index in [ALICE, BOB] {
        let status = cluster.status(index);
        let peer = NODE_NAMES[1 - index];
        assert_eq!(
            (status.sent_kib(peer), status.received_kib(peer)),
            (0, 0),
            "data moved between in-sync nodes after a clean restart: {}",
            status.0
        );
    }
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_holds(
        &cluster,
        BOB,
        &writes,
        "the data written before the restart",
    );
}

/// drbd-semantics.md §3 "Initial sync": two fresh nodes stay Inconsistent/Inconsistent
/// (nobody is a sync source) and `primary` without --force is refused; `primary --force`
/// makes the node UpToDate and fully syncs the peer, which shows as SyncTarget with
/// `done` between 0 and 100 while it runs (the rate is held at 8 MiB/s for 32 MiB).
#[test]
fn primary_force_makes_the_initial_full_sync() {
    let spec = fixed_rate(Spec::two_nodes('C').disk_bytes(32 * MIB), "8M");
    let cluster = Cluster::create(spec);
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let data = Rng::new(seed).bytes(usize::try_from(32 * MIB).expect("fits usize"));
    std::fs::write(cluster.disk(ALICE), &data).expect("cannot fill alice's backing file");
    cluster.start_all();
    cluster.wait_connected();
    cluster.hold_for(
        "both fresh disks stay Inconsistent and no resync starts",
        Duration::from_secs(1),
        || {
            [ALICE, BOB].iter().all(|&index| {
                let status = cluster.status(index);
                let replication = status.replication(NODE_NAMES[1 - index]);
                status.disk() == "Inconsistent"
                    && replication != "SyncSource"
                    && replication != "SyncTarget"
            })
        },
    );
    let refused = cluster.admin(ALICE, &["primary", RESOURCE]);
    assert!(
        !refused.status.success(),
        "'primary' without --force on an Inconsistent disk succeeded"
    );
    assert_eq!(cluster.status(ALICE).role(), "Secondary");
    cluster.admin_ok(ALICE, &["primary", "--force", RESOURCE]);
    cluster.wait_disk(ALICE, "UpToDate", STATE_DEADLINE);
    cluster.wait_replication(BOB, ALICE, "SyncTarget", STATE_DEADLINE);
    let observed = watch_until_in_sync(&cluster, SYNC_DEADLINE);
    assert!(
        observed.saw(BOB, ALICE, "SyncTarget") && observed.saw(ALICE, BOB, "SyncSource"),
        "bob was never seen SyncTarget of alice: {observed:?}"
    );
    assert!(
        !observed.partial_done.is_empty(),
        "done_percent was never seen strictly between 0 and 100: {observed:?}"
    );
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_holds(&cluster, BOB, &[(0, data)], "alice's data");
    let status = cluster.status(ALICE);
    assert_eq!(
        (status.role(), status.disk()),
        ("Primary".into(), "UpToDate".into())
    );
}

/// Both nodes write while apart: alice 4 MiB as Primary, then bob 2 MiB as Primary.
/// Returns what each wrote.
type Divergence = (Vec<(u64, Vec<u8>)>, Vec<(u64, Vec<u8>)>);

fn split_brain(cluster: &Cluster) -> Divergence {
    disconnect_both(cluster);
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    let alice_writes = random_writes(&mut rng, 0, 4 * MIB);
    write_through_nbd(cluster, ALICE, &alice_writes);
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    cluster.promote_and_wait(BOB);
    let bob_writes = random_writes(&mut rng, 16 * MIB, 2 * MIB);
    write_through_nbd(cluster, BOB, &bob_writes);
    cluster.admin_ok(BOB, &["secondary", RESOURCE]);
    (alice_writes, bob_writes)
}

/// drbd-semantics.md §2 split-brain detection (bitmap-both) with the default
/// `after-sb-0pri disconnect`, and the manual recovery: both sides wrote while apart, so on
/// connect both go StandAlone, say so in their logs and keep their own data; then the victim
/// (bob) connects with `--discard-my-data`, the survivor connects, bob becomes SyncTarget and
/// only the blocks either side changed move.
#[test]
fn split_brain_is_detected_and_recovered_with_discard_my_data() {
    let spec = fixed_rate(Spec::two_nodes('C'), "4M").handler(
        "split-brain",
        "echo \\\"$DRBD_RESOURCE $DRBD_PEER $DRBD_VOLUME $DRBD_PEER_NODE_ID $DRBD_MY_NODE_ID \
         $DRBD_PEER_AF $DRBD_MINOR\\\" >> {dir}/split-brain.out",
    );
    let cluster = Cluster::with_primary(spec);
    let (alice, bob) = (NODE_NAMES[ALICE], NODE_NAMES[BOB]);
    let (alice_writes, bob_writes) = split_brain(&cluster);
    for index in [ALICE, BOB] {
        cluster.admin_ok(index, &["connect", RESOURCE]);
    }
    cluster.wait_until(
        "both logs report a split brain and both are StandAlone",
        CONNECT_DEADLINE,
        || {
            [ALICE, BOB].iter().all(|&index| {
                cluster.log(index).to_lowercase().contains("split brain")
                    && cluster
                        .status(index)
                        .connection_state(NODE_NAMES[1 - index])
                        == "StandAlone"
            })
        },
    );
    cluster.hold_for("both stay StandAlone", STANDALONE_HOLD, || {
        cluster.status(ALICE).connection_state(bob) == "StandAlone"
            && cluster.status(BOB).connection_state(alice) == "StandAlone"
    });
    for index in [ALICE, BOB] {
        let error = cluster.status(index).last_error(NODE_NAMES[1 - index]);
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.to_lowercase().contains("split brain")),
            "{}'s connection error does not say split brain: {error:?}",
            cluster.name(index)
        );
    }
    let handler_out = cluster.dir().join("split-brain.out");
    cluster.wait_until("both split-brain handlers ran", CONNECT_DEADLINE, || {
        std::fs::read_to_string(&handler_out).is_ok_and(|text| {
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort_unstable();
            lines
                == [
                    format!("{RESOURCE} {alice} 0 0 1 ipv4 0"),
                    format!("{RESOURCE} {bob} 0 1 0 ipv4 0"),
                ]
        })
    });
    assert_holds(&cluster, ALICE, &alice_writes, "its own writes");
    assert_holds(&cluster, BOB, &bob_writes, "its own writes");
    assert_zero(
        &cluster,
        ALICE,
        16 * MIB,
        2 * MIB,
        "bob's writes must not reach alice",
    );
    let received_before = cluster.status(BOB).received_kib(alice);
    cluster.admin_ok(BOB, &["secondary", RESOURCE]);
    cluster.admin_ok(BOB, &["connect", "--discard-my-data", RESOURCE]);
    cluster.admin_ok(ALICE, &["connect", RESOURCE]);
    let observed = watch_until_in_sync(&cluster, SYNC_DEADLINE);
    assert!(
        observed.saw(BOB, ALICE, "SyncTarget"),
        "bob was never seen SyncTarget: {observed:?}"
    );
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_holds(&cluster, BOB, &alice_writes, "alice's writes");
    assert_zero(
        &cluster,
        BOB,
        16 * MIB,
        2 * MIB,
        "bob's changes are rolled back",
    );
    let received = cluster.status(BOB).received_kib(alice) - received_before;
    assert_eq!(
        received,
        6 * 1024,
        "the recovery must move alice's 4 MiB and bob's 2 MiB, nothing else (KiB)"
    );
}

/// drbd-semantics.md §1 `after-sb-0pri discard-zero-changes`: both nodes started a new
/// generation while apart, but only alice wrote (bob's generation comes from
/// `new-current-uuid` without --clear-bitmap, which starts one without writing; a plain
/// promote/demote does not in tandem, since the generation starts at the first write). On
/// connect, with no Primary, the split brain resolves itself: bob, with zero changes, is
/// discarded and resynced from alice; nobody goes StandAlone.
#[test]
fn after_sb_0pri_discard_zero_changes_resolves_a_split_brain_without_writes_on_one_side() {
    let spec =
        fixed_rate(Spec::two_nodes('C'), "2M").net_line_all("after-sb-0pri discard-zero-changes;");
    let cluster = Cluster::with_primary(spec);
    let alice = NODE_NAMES[ALICE];
    disconnect_both(&cluster);
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let writes = random_writes(&mut Rng::new(seed), 8 * MIB, 4 * MIB);
    write_through_nbd(&cluster, ALICE, &writes);
    cluster.admin_ok(ALICE, &["secondary", RESOURCE]);
    cluster.admin_ok(BOB, &["new-current-uuid", RESOURCE]);
    let received_before = cluster.status(BOB).received_kib(alice);
    for index in [ALICE, BOB] {
        cluster.admin_ok(index, &["connect", RESOURCE]);
    }
    let observed = watch_until_in_sync(&cluster, SYNC_DEADLINE);
    for index in [ALICE, BOB] {
        assert!(
            cluster.log(index).to_lowercase().contains("split brain"),
            "{}'s log does not mention the split brain it resolved",
            cluster.name(index)
        );
    }
    assert!(
        observed.saw(BOB, ALICE, "SyncTarget"),
        "bob was never seen SyncTarget: {observed:?}"
    );
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_holds(&cluster, BOB, &writes, "alice's writes");
    let received = cluster.status(BOB).received_kib(alice) - received_before;
    assert_eq!(received, 4 * 1024, "only alice's 4 MiB must move (KiB)");
}

/// What is wrong with the metadata in a start-up refusal case.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// `create-md` was never run.
    NoMetadata,
    /// The superblock block was overwritten with random bytes after `create-md` (nothing
    /// identifies it as metadata any more).
    GarbageSuperblock,
    /// Two bytes inside a valid superblock were changed after `create-md` (its checksum no
    /// longer matches).
    CorruptSuperblock,
}

/// Byte of the superblock that [`Damage::CorruptSuperblock`] changes: past any magic number,
/// inside the checksummed fields.
const CORRUPT_AT_BYTES: u64 = 200;

/// drbd-semantics.md §3 and DRBD's attach: a node refuses to start on a disk without valid
/// metadata. Without metadata the message points to `create-md`; with a damaged superblock
/// it says what is wrong; every message names the metadata file. Either way it exits
/// non-zero, starts nothing, and writes nothing: the backing file and the metadata are byte
/// for byte as before.
#[test]
fn a_node_refuses_a_disk_without_valid_metadata_and_touches_nothing() {
    let cases = [
        (Metadata::External, Damage::NoMetadata, &["create-md"][..]),
        (
            Metadata::External,
            Damage::GarbageSuperblock,
            &["metadata", "superblock"][..],
        ),
        (
            Metadata::External,
            Damage::CorruptSuperblock,
            &["checksum"][..],
        ),
        (Metadata::Internal, Damage::NoMetadata, &["create-md"][..]),
        (
            Metadata::Internal,
            Damage::GarbageSuperblock,
            &["metadata", "superblock"][..],
        ),
        (
            Metadata::Internal,
            Damage::CorruptSuperblock,
            &["checksum"][..],
        ),
    ];
    for (metadata, damage, any_of) in cases {
        refusal_case(metadata, damage, any_of);
    }
}

fn refusal_case(metadata: Metadata, damage: Damage, any_of: &[&str]) {
    let case = format!("{metadata:?} metadata, {damage:?}");
    let mut spec = Spec::two_nodes('C');
    if metadata == Metadata::Internal {
        spec = spec.internal_metadata();
    }
    if let Damage::NoMetadata = damage {
        spec = spec.without_metadata();
    }
    let cluster = Cluster::create(spec);
    let seed = fresh_seed();
    eprintln!("{case}: data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let mut rng = Rng::new(seed);
    let open = |path: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap_or_else(|error| panic!("cannot open {}: {error}", path.display()))
    };
    open(cluster.disk(ALICE))
        .write_all_at(&rng.bytes(usize::try_from(16 * MIB).expect("fits")), 0)
        .expect("cannot write test data");
    let superblock = cluster.superblock_offset();
    match damage {
        Damage::NoMetadata => {}
        Damage::GarbageSuperblock => open(cluster.meta_path(ALICE))
            .write_all_at(&rng.bytes(4096), superblock)
            .expect("cannot overwrite the superblock"),
        Damage::CorruptSuperblock => {
            let at = superblock + CORRUPT_AT_BYTES;
            let bytes = read_range(cluster.meta_path(ALICE), at, 2);
            open(cluster.meta_path(ALICE))
                .write_all_at(&[!bytes[0], bytes[1] ^ 0x5a], at)
                .expect("cannot corrupt the superblock");
        }
    }
    let disk_before = std::fs::read(cluster.disk(ALICE)).expect("cannot read the disk");
    let meta_before = std::fs::read(cluster.meta_path(ALICE)).expect("cannot read the md");
    let output = cluster.run_node_to_exit(ALICE, EXIT_DEADLINE);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{case}: the node started: {said}");
    let lower = said.to_lowercase();
    assert!(
        any_of.iter().any(|word| lower.contains(word)),
        "{case}: the output mentions none of {any_of:?}: {said}"
    );
    let path = cluster.meta_path(ALICE).display().to_string();
    assert!(
        said.contains(&path),
        "{case}: the output does not name {path}: {said}"
    );
    let left: Vec<_> = std::fs::read_dir(cluster.run_dir(ALICE))
        .expect("cannot list the run dir")
        .collect();
    assert!(left.is_empty(), "{case}: the refused node left {left:?}");
    assert!(
        std::fs::read(cluster.disk(ALICE)).expect("cannot read the disk") == disk_before,
        "{case}: the refused node modified its backing file"
    );
    assert!(
        std::fs::read(cluster.meta_path(ALICE)).expect("cannot read the md") == meta_before,
        "{case}: the refused node modified its metadata"
    );
}

/// Blocks of bob's backing file overwritten behind tandem's back, at these 4 KiB blocks.
const CORRUPTED_BLOCKS: [u64; 3] = [5, 700, 9_000];

/// An in-sync pair with `verify-alg` and `csums-alg` (and an out-of-sync handler), alice
/// Primary, random data on the first 8 MiB; then bob's backing file is damaged at
/// [`CORRUPTED_BLOCKS`] without tandem knowing.
fn corrupted_pair() -> Cluster {
    let spec = Spec::two_nodes('C')
        .net_line_all("verify-alg sha256;")
        .net_line_all("csums-alg crc32c;")
        .handler(
            "out-of-sync",
            "echo \\\"$DRBD_RESOURCE $DRBD_PEER\\\" >> {dir}/out-of-sync.out",
        );
    let cluster = Cluster::with_primary(spec);
    let mut rng = Rng::new(fresh_seed());
    write_through_nbd(&cluster, ALICE, &random_writes(&mut rng, 0, 8 * MIB));
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(cluster.disk(BOB))
        .expect("open bob's disk");
    for block in CORRUPTED_BLOCKS {
        file.write_all_at(b"bit rot", block * BLOCK_BYTES + 17)
            .expect("damage bob's disk");
    }
    file.sync_all().expect("sync bob's disk");
    cluster
}

/// Waits until alice's verify against bob is over and returns alice's status then.
fn wait_verify_done(cluster: &Cluster) -> Status {
    let bob = NODE_NAMES[BOB];
    cluster.wait_until(
        "the verify ends (replication back to Established)",
        SYNC_DEADLINE,
        || {
            let status = cluster.status(ALICE);
            status.replication(bob) == "Established"
                && status.peer_device(bob)["done_percent"].is_null()
        },
    );
    cluster.status(ALICE)
}

/// Issue 3: `tandem verify` finds exactly the blocks damaged on the secondary (only digests
/// cross the wire: nothing is resynced by the verify itself), marks them out of sync, runs the
/// out-of-sync handler; a disconnect/connect then resyncs exactly those blocks.
#[test]
fn verify_finds_the_damaged_blocks_and_a_reconnect_repairs_them() {
    let cluster = corrupted_pair();
    let bob = NODE_NAMES[BOB];
    let sent_before = cluster.status(ALICE).sent_kib(bob);
    cluster.admin_ok(ALICE, &["verify", RESOURCE]);
    let status = wait_verify_done(&cluster);
    let found_kib = CORRUPTED_BLOCKS.len() as u64 * BLOCK_BYTES / 1024;
    assert_eq!(
        status.out_of_sync_kib(bob),
        found_kib,
        "exactly the damaged blocks are out of sync: {}",
        status.0
    );
    assert_eq!(
        status.peer_device(bob)["verify_found_kib"],
        found_kib,
        "status counts what the verify found: {}",
        status.0
    );
    assert_eq!(
        status.sent_kib(bob),
        sent_before,
        "a verify sends digests, never data"
    );
    assert!(
        crate::cluster::first_difference(cluster.disk(ALICE), cluster.disk(BOB)).is_some(),
        "the verify must not repair by itself"
    );
    let handler_out = cluster.dir().join("out-of-sync.out");
    cluster.wait_until("the out-of-sync handler ran", STATE_DEADLINE, || {
        std::fs::read_to_string(&handler_out)
            .is_ok_and(|text| text.trim() == format!("{RESOURCE} {bob}"))
    });
    let log = cluster.log(ALICE);
    for block in CORRUPTED_BLOCKS {
        assert!(
            log.contains(&format!("offset={}", block * BLOCK_BYTES)),
            "alice's log does not name block {block}"
        );
    }
    cluster.admin_ok(ALICE, &["disconnect", RESOURCE]);
    cluster.admin_ok(ALICE, &["connect", RESOURCE]);
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    let moved = cluster.status(ALICE).sent_kib(bob) - sent_before;
    assert_eq!(
        moved, found_kib,
        "the repair moves exactly the damaged blocks"
    );
}

/// Issue 3: `tandem invalidate` on the damaged secondary replaces its data by a full resync
/// from the Primary; with `csums-alg` only resync requests (at most 128 KiB each) whose
/// block checksums differ carry data, so of the whole device only the few requests holding a
/// damaged block move.
#[test]
fn invalidate_repairs_a_damaged_secondary_moving_only_differing_blocks_with_csums() {
    let cluster = corrupted_pair();
    let bob = NODE_NAMES[BOB];
    let sent_before = cluster.status(ALICE).sent_kib(bob);
    cluster.admin_ok(BOB, &["invalidate", RESOURCE]);
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_eq!(cluster.status(BOB).disk(), "UpToDate");
    let moved = cluster.status(ALICE).sent_kib(bob) - sent_before;
    let damaged = CORRUPTED_BLOCKS.len() as u64;
    let request_kib = repl_request_kib();
    assert!(
        (damaged * BLOCK_BYTES / 1024..=damaged * request_kib).contains(&moved),
        "csums: {moved} KiB carried data; expected the {damaged} requests holding a damaged block \
         (at most {} KiB) of a {} KiB device",
        damaged * request_kib,
        cluster.export_bytes() / 1024
    );
}

/// The largest resync request, in KiB (`repl::RESYNC_REQUEST_BYTES_MAX`).
fn repl_request_kib() -> u64 {
    128
}

/// `tandem verify` without a verify-alg is refused with what to configure.
#[test]
fn verify_without_verify_alg_is_refused_clearly() {
    let cluster = Cluster::with_primary(Spec::two_nodes('C'));
    let output = cluster.admin(ALICE, &["verify", RESOURCE]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("verify-alg"), "{stderr}");
}

/// Two fresh nodes, alice's disk filled with seeded random data, `primary --force` on alice,
/// and the full sync to bob (4 MiB/s, 32 MiB) past 10%; returns the cluster and the data.
fn full_sync_under_way() -> (Cluster, Vec<u8>) {
    let spec = fixed_rate(Spec::two_nodes('C').disk_bytes(32 * MIB), "4M");
    let cluster = Cluster::create(spec);
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let data = Rng::new(seed).bytes(usize::try_from(32 * MIB).expect("fits usize"));
    std::fs::write(cluster.disk(ALICE), &data).expect("cannot fill alice's backing file");
    cluster.start_all();
    cluster.wait_connected();
    cluster.admin_ok(ALICE, &["primary", "--force", RESOURCE]);
    cluster.wait_replication(BOB, ALICE, "SyncTarget", STATE_DEADLINE);
    cluster.wait_until(
        "the resync is under way (done > 10%)",
        SYNC_DEADLINE,
        || {
            cluster.status(ALICE).peer_device(NODE_NAMES[BOB])["done_percent"]
                .as_f64()
                .is_some_and(|done| done > 10.0)
        },
    );
    (cluster, data)
}

/// drbd-semantics.md §2/§3: a sync target killed (SIGKILL) in the middle of a full sync comes
/// back Inconsistent (never UpToDate with half the data), reconnects, and the resync resumes
/// from its source until the replicas are identical; the source stays UpToDate and Primary.
#[test]
fn a_sync_target_killed_mid_resync_resumes_and_ends_identical() {
    let (cluster, data) = full_sync_under_way();
    cluster.kill(BOB);
    cluster.start_node(BOB);
    assert_eq!(
        cluster.status(BOB).disk(),
        "Inconsistent",
        "a half-synced target must not come back UpToDate"
    );
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_holds(&cluster, BOB, &[(0, data)], "alice's data");
    let status = cluster.status(ALICE);
    assert_eq!(
        (status.role(), status.disk()),
        ("Primary".into(), "UpToDate".into())
    );
    assert_eq!(cluster.status(BOB).disk(), "UpToDate");
}

/// The same with the sync source (the Primary) killed mid-resync: it comes back UpToDate,
/// the target is still Inconsistent, and the resync resumes to identical replicas.
#[test]
fn a_sync_source_killed_mid_resync_resumes_and_ends_identical() {
    let (cluster, data) = full_sync_under_way();
    cluster.kill(ALICE);
    assert_eq!(
        cluster.status(BOB).disk(),
        "Inconsistent",
        "the target stays Inconsistent without its source"
    );
    cluster.start_node(ALICE);
    assert_eq!(
        cluster.status(ALICE).disk(),
        "UpToDate",
        "the source's data stays UpToDate across its crash"
    );
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_holds(&cluster, BOB, &[(0, data)], "alice's data");
    assert_eq!(cluster.status(BOB).disk(), "UpToDate");
}

/// `tandem pause-sync` / `resume-sync` (DRBD's PausedSyncS/T): a resync paused on the source
/// shows `resync-suspended:user` there and `:peer` on the target, moves nothing while paused,
/// and finishes with identical replicas once resumed.
#[test]
fn pause_sync_holds_a_resync_and_resume_sync_finishes_it() {
    let cluster = Cluster::with_primary(fixed_rate(Spec::two_nodes('C'), "4M"));
    let (alice, bob) = (NODE_NAMES[ALICE], NODE_NAMES[BOB]);
    disconnect_both(&cluster);
    let mut rng = Rng::new(fresh_seed());
    write_through_nbd(&cluster, ALICE, &random_writes(&mut rng, 0, 8 * MIB));
    cluster.admin_ok(ALICE, &["pause-sync", RESOURCE]);
    for index in [ALICE, BOB] {
        cluster.admin_ok(index, &["connect", RESOURCE]);
    }
    cluster.wait_replication(ALICE, BOB, "PausedSyncS", STATE_DEADLINE);
    cluster.wait_replication(BOB, ALICE, "PausedSyncT", STATE_DEADLINE);
    let suspended = |node: usize, peer: &str| {
        cluster.status(node).peer_device(peer)["resync_suspended"]
            .as_str()
            .map(str::to_owned)
    };
    assert_eq!(suspended(ALICE, bob).as_deref(), Some("user"));
    assert_eq!(suspended(BOB, alice).as_deref(), Some("peer"));
    let text = cluster.admin_ok(BOB, &["status", RESOURCE]);
    assert!(
        text.contains("replication:PausedSyncT") && text.contains("resync-suspended:peer"),
        "status text: {text}"
    );
    let stuck = cluster.out_of_sync_kib(ALICE, BOB);
    assert!(stuck > 0, "alice has blocks to resync");
    // Several polls over 1.5 s: at 4 MiB/s an unpaused resync would move about 6 MiB.
    cluster.hold_for(
        "the paused resync moves nothing",
        Duration::from_millis(1500),
        || cluster.out_of_sync_kib(ALICE, BOB) == stuck,
    );
    cluster.admin_ok(ALICE, &["resume-sync", RESOURCE]);
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    assert_eq!(suspended(BOB, alice).as_deref(), Some("no"));
}

/// `resync-after` must name a volume of this node and must not form a cycle: otherwise the
/// node refuses to start and says which setting is wrong.
#[test]
fn resync_after_naming_an_unknown_resource_is_refused_at_start() {
    let cluster = Cluster::create(Spec::two_nodes('C').disk_line("resync-after r9;"));
    let output = cluster.run_node_to_exit(ALICE, EXIT_DEADLINE);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the node started: {stderr}");
    assert!(
        stderr.contains("resync-after r9: no resource 'r9' runs on this node"),
        "stderr: {stderr}"
    );
}

/// Recreates the metadata of `index` (node stopped) with `--bitmap-granularity granularity`.
fn recreate_md_with_granularity(cluster: &Cluster, index: usize, granularity: &str) {
    let mut command = cluster.create_md_command(index);
    command.args(["--force", "--bitmap-granularity", granularity]);
    let output = command.output().expect("cannot run tandem create-md");
    assert!(
        output.status.success(),
        "create-md --bitmap-granularity {granularity}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `create-md --bitmap-granularity`: peers whose bitmaps have different granularities refuse
/// to connect and say why; with the same coarser granularity a write of 4 KiB made while
/// disconnected resyncs its whole 64 KiB bit.
#[test]
fn bitmap_granularity_is_chosen_at_create_md_and_peers_must_agree() {
    const COARSE_KIB: u64 = 64;
    let cluster = Cluster::create(Spec::two_nodes('C'));
    recreate_md_with_granularity(&cluster, ALICE, "64K");
    cluster.start_all();
    cluster.wait_until(
        "both sides refuse the mismatched bitmaps",
        CONNECT_DEADLINE,
        || {
            [ALICE, BOB].iter().all(|&index| {
                let error = cluster
                    .status(index)
                    .last_error(NODE_NAMES[1 - index])
                    .unwrap_or_default();
                error.contains("bytes per bit here")
            })
        },
    );
    for index in [ALICE, BOB] {
        cluster.stop(index);
    }
    recreate_md_with_granularity(&cluster, BOB, "64K");
    cluster.start_all();
    cluster.wait_connected();
    cluster.initial_sync();
    cluster.promote_and_wait(ALICE);
    disconnect_both(&cluster);
    let mut rng = Rng::new(fresh_seed());
    let writes: Vec<(u64, Vec<u8>)> = (0..3)
        .map(|i| (i * 10 * MIB + 8192, rng.bytes(4096)))
        .collect();
    write_through_nbd(&cluster, ALICE, &writes);
    assert_eq!(
        cluster.out_of_sync_kib(ALICE, BOB),
        3 * COARSE_KIB,
        "one 64 KiB bit per 4 KiB write"
    );
    let sent_before = cluster.status(ALICE).sent_kib(NODE_NAMES[BOB]);
    for index in [ALICE, BOB] {
        cluster.admin_ok(index, &["connect", RESOURCE]);
    }
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    cluster.wait_identical(ALICE, BOB, STATE_DEADLINE);
    let sent = cluster.status(ALICE).sent_kib(NODE_NAMES[BOB]) - sent_before;
    assert_eq!(sent, 3 * COARSE_KIB, "the resync moves whole bits");
}

/// The resync handlers (issue 4): `before-resync-target` and `after-resync-target` run on the
/// sync target with DRBD's environment, `before-resync-source` on the source, and `tandem
/// events` shows each call and its exit status as DRBD's `call helper` / `response helper`
/// lines.
#[test]
fn resync_handlers_run_and_show_in_events() {
    let spec = fixed_rate(Spec::two_nodes('C'), "4M")
        .handler(
            "before-resync-target",
            "echo \\\"before $DRBD_RESOURCE $DRBD_PEER\\\" >> {dir}/handlers.out",
        )
        .handler(
            "after-resync-target",
            "echo \\\"after $DRBD_RESOURCE $DRBD_PEER\\\" >> {dir}/handlers.out",
        )
        .handler("before-resync-source", "exit 3");
    let cluster = Cluster::with_primary(spec);
    let events = cluster.events(BOB);
    disconnect_both(&cluster);
    let mut rng = Rng::new(fresh_seed());
    write_through_nbd(&cluster, ALICE, &random_writes(&mut rng, 0, 4 * MIB));
    for index in [ALICE, BOB] {
        cluster.admin_ok(index, &["connect", RESOURCE]);
    }
    watch_until_in_sync(&cluster, SYNC_DEADLINE);
    let handler_out = cluster.dir().join("handlers.out");
    cluster.wait_until(
        "both resync-target handlers ran on bob",
        STATE_DEADLINE,
        || {
            std::fs::read_to_string(&handler_out).is_ok_and(|text| {
                text.contains("before r0 alice") && text.contains("after r0 alice")
            })
        },
    );
    let call =
        "call helper name:r0 peer-node-id:0 conn-name:alice volume:0 helper:before-resync-target";
    let response = "response helper name:r0 peer-node-id:0 conn-name:alice volume:0 \
        helper:after-resync-target status:0";
    events.wait_for(&cluster, call, STATE_DEADLINE);
    events.wait_for(&cluster, response, STATE_DEADLINE);
    drop(events);
    let text = std::fs::read_to_string(&handler_out).unwrap_or_default();
    let before = text.find("before").unwrap_or(usize::MAX);
    let after = text.find("after").unwrap_or(0);
    assert!(
        before < after,
        "before-resync-target ran before after-resync-target: {text}"
    );
    assert!(
        cluster.log(ALICE).contains("before-resync-source"),
        "the source's handler ran"
    );
}

/// A Secondary that takes its Primary's new generation while a third node is away marks every
/// block for that node (it cannot know which writes it applied before it noticed the node was
/// gone), and keeps counting in memory what it applies afterwards. A clean stop writes those
/// bits and clears the superblock's `in-use` flag, so a restart keeps them; after a SIGKILL
/// the flag is found set and every block is marked for the absent peer, so nothing it applied
/// can be missed when that peer comes back through it.
#[test]
fn a_secondary_killed_while_a_peer_is_away_marks_everything_for_that_peer() {
    const ALICE: usize = 0;
    const BOB: usize = 1;
    const CAROL: usize = 2;
    let cluster = Cluster::with_primary(Spec::three_nodes('C'));
    cluster.kill(CAROL);
    for node in [ALICE, BOB] {
        cluster.wait_until("carol is seen gone", CONNECT_DEADLINE, || {
            cluster.status(node).connection_state("carol") != "Connected"
        });
    }
    let full_kib = cluster.export_bytes() / 1024;
    assert_eq!(
        cluster.out_of_sync_kib(BOB, CAROL),
        0,
        "nothing written yet"
    );
    let mut client = nbd_client::open(&cluster.nbd_socket(ALICE), RESOURCE).expect("open");
    assert_eq!(client.write(1 << 20, &[0x5A; 8192]), 0);
    client.disconnect();
    cluster.wait_until(
        "bob marks everything for carol with alice's new generation",
        CONNECT_DEADLINE,
        || cluster.out_of_sync_kib(BOB, CAROL) == full_kib,
    );
    assert!(
        cluster.out_of_sync_kib(ALICE, CAROL) < full_kib,
        "the Primary counts exactly what carol missed"
    );

    cluster.stop(BOB);
    let flags = cluster.dumped_flags(BOB);
    assert!(
        flags.contains("consistent") && !flags.contains("in-use"),
        "a clean stop clears in-use: {flags}"
    );
    cluster.start_node(BOB);
    assert_eq!(
        cluster.out_of_sync_kib(BOB, CAROL),
        full_kib,
        "after a clean stop bob keeps what it counted"
    );
    assert!(
        !cluster.log(BOB).contains("went down uncleanly"),
        "a clean stop is no unclean one:\n{}",
        cluster.log(BOB)
    );

    cluster.kill(BOB);
    cluster.start_node(BOB);
    assert_eq!(
        cluster.out_of_sync_kib(BOB, CAROL),
        full_kib,
        "after a SIGKILL every block is marked for carol"
    );
    assert!(
        cluster.log(BOB).contains("went down uncleanly"),
        "bob says why:\n{}",
        cluster.log(BOB)
    );
}
