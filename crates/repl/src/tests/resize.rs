//! Online resize (`engine/resize.rs`, issue 27 item 5): the nodes agree on the smallest size
//! every grown device offers (or `--size`), the peers grow before the initiator, the new area
//! is resynced from the Primary (or, with `assume_clean`, taken as identical), and a resize
//! that cannot be agreed is refused without anyone growing.

use super::*;

const GROWN_BYTES: u64 = 2 * VOLUME_BYTES;

impl Pair {
    /// The test driver's side of a resize: the disk vector is the backing device, so its
    /// length is what it offers; a grow marks the whole new area unless `assume_clean`.
    pub(super) fn perform_resize(&mut self, node: usize, action: Action<Vec<u8>>) {
        let mut out = Vec::new();
        match action {
            Action::ResizeOffer { peer, volume } => {
                let offer = self.disks[node].len() as u64;
                self.nodes[node].resize_offer(peer, volume, offer, &mut out);
            }
            Action::Grow {
                volume,
                size_bytes,
                assume_clean,
            } => {
                let old = self.nodes[node].status().volumes[0].size_bytes;
                let resync = (!assume_clean).then_some((old, size_bytes - old));
                let bitmaps = self.nodes[node].grown_bitmaps(volume, size_bytes, resync);
                assert!(
                    self.disks[node].len() as u64 >= size_bytes,
                    "grown past the backing device"
                );
                self.nodes[node].grown(self.now, volume, bitmaps, &mut out);
            }
            _ => unreachable!("only resize actions come here"),
        }
        self.route(node, out);
    }

    /// Grows node `node`'s backing device to `bytes`, the new bytes `fill`.
    fn grow_disk(&mut self, node: usize, bytes: u64, fill: u8) {
        self.disks[node].resize(bytes as usize, fill);
    }

    fn resize(
        &mut self,
        node: usize,
        size_max: Option<u64>,
        assume_clean: bool,
    ) -> Result<(), StateError> {
        self.resize_with(
            node,
            request(self.disks[node].len() as u64, size_max, assume_clean),
        )
    }

    fn resize_with(&mut self, node: usize, request: ResizeRequest) -> Result<(), StateError> {
        let mut out = Vec::new();
        let started = self.nodes[node].start_resize(request, &mut out);
        self.route(node, out);
        self.deliver_all();
        started
    }

    fn size(&self, node: usize) -> u64 {
        self.nodes[node].status().volumes[0].size_bytes
    }

    /// Ticks until no resync runs (a bounded number of times).
    fn settle_resize(&mut self) {
        for _ in 0..50 {
            self.tick(A, TICK_INTERVAL);
            self.tick(B, TICK_INTERVAL);
            self.deliver_all();
        }
    }
}

fn request(offer_bytes: u64, size_max: Option<u64>, assume_clean: bool) -> ResizeRequest {
    ResizeRequest {
        volume: 0,
        offer_bytes,
        size_max,
        assume_clean,
        assume_peer_has_space: false,
    }
}

#[test]
fn resize_grows_both_nodes_and_resyncs_the_new_area_from_the_primary() {
    let mut pair = Pair::new(Protocol::C);
    pair.grow_disk(A, GROWN_BYTES, 0x11);
    pair.grow_disk(B, GROWN_BYTES, 0xEE);
    pair.resize(A, None, false).expect("starts");
    assert_eq!(pair.nodes[A].take_resize_outcome(0), Some(Ok(GROWN_BYTES)));
    assert_eq!((pair.size(A), pair.size(B)), (GROWN_BYTES, GROWN_BYTES));
    pair.settle_resize();
    assert_eq!(pair.out_of_sync(), 0);
    assert_eq!(
        pair.nodes[B].status().peers[0].volumes[0].out_of_sync_bytes,
        0,
        "the target's marks cleared too"
    );
    assert!(
        pair.resync_sent_bytes[A] >= VOLUME_BYTES,
        "the new area came from the Primary"
    );
    assert!(
        pair.disks[A] == pair.disks[B],
        "replicas identical after the resync"
    );
    pair.write(1, GROWN_BYTES - 4096, 0x42, 4096);
    pair.deliver_all();
    assert!(pair.is_complete(1), "a write in the new area completes");
    assert!(pair.disks[A] == pair.disks[B]);
}

/// A Secondary refuses while its peer is Primary (the Primary must grow last); with no
/// Primary any node may start it, and the replicas end identical.
#[test]
fn resize_on_a_secondary_needs_no_primary_peer() {
    let mut pair = Pair::new(Protocol::C);
    pair.grow_disk(A, GROWN_BYTES, 0x11);
    pair.grow_disk(B, GROWN_BYTES, 0xEE);
    let refused = pair.resize(B, None, false);
    assert!(
        matches!(&refused, Err(StateError::Resize(e)) if e.contains("is Primary")),
        "{refused:?}"
    );
    let mut out = Vec::new();
    pair.nodes[A].demote(&mut out).expect("demote");
    pair.route(A, out);
    pair.deliver_all();
    pair.resize(B, None, false).expect("starts");
    assert_eq!(pair.nodes[B].take_resize_outcome(0), Some(Ok(GROWN_BYTES)));
    pair.settle_resize();
    assert_eq!((pair.size(A), pair.size(B)), (GROWN_BYTES, GROWN_BYTES));
    assert!(pair.disks[A] == pair.disks[B]);
}

#[test]
fn assume_clean_grows_without_a_resync() {
    let mut pair = Pair::new(Protocol::C);
    pair.grow_disk(A, GROWN_BYTES, 0);
    pair.grow_disk(B, GROWN_BYTES, 0);
    pair.resize(A, None, true).expect("starts");
    pair.settle_resize();
    assert_eq!((pair.size(A), pair.size(B)), (GROWN_BYTES, GROWN_BYTES));
    assert_eq!(pair.resync_sent_bytes, [0, 0]);
    assert_eq!(pair.out_of_sync(), 0);
}

/// The size is the smallest offer, or `--size` when smaller.
#[test]
fn the_smallest_offer_or_size_wins() {
    let cases = [
        (
            "peer offers less",
            GROWN_BYTES,
            VOLUME_BYTES + VOLUME_BYTES / 2,
            None,
            VOLUME_BYTES + VOLUME_BYTES / 2,
        ),
        (
            "initiator offers less",
            VOLUME_BYTES + 8192,
            GROWN_BYTES,
            None,
            VOLUME_BYTES + 8192,
        ),
        (
            "--size below both",
            GROWN_BYTES,
            GROWN_BYTES,
            Some(VOLUME_BYTES + 4096),
            VOLUME_BYTES + 4096,
        ),
    ];
    for (name, a_bytes, b_bytes, size_max, expected) in cases {
        let mut pair = Pair::new(Protocol::C);
        pair.grow_disk(A, a_bytes, 0);
        pair.grow_disk(B, b_bytes, 0);
        pair.resize(A, size_max, true).expect(name);
        assert_eq!(
            pair.nodes[A].take_resize_outcome(0),
            Some(Ok(expected)),
            "{name}"
        );
        assert_eq!((pair.size(A), pair.size(B)), (expected, expected), "{name}");
    }
}

#[test]
fn refusals_leave_every_size_as_it_was() {
    // A peer whose device did not grow: nobody grows.
    let mut pair = Pair::new(Protocol::C);
    pair.grow_disk(A, GROWN_BYTES, 0);
    pair.resize(A, None, false).expect("starts");
    let outcome = pair.nodes[A].take_resize_outcome(0).expect("ended");
    assert!(
        outcome
            .as_ref()
            .is_err_and(|e| e.contains("nothing to grow")),
        "{outcome:?}"
    );
    assert_eq!((pair.size(A), pair.size(B)), (VOLUME_BYTES, VOLUME_BYTES));
    // A peer whose device cannot grow at all (its driver offers 0).
    pair.disks[B].truncate(0);
    pair.resize(A, None, false).expect("starts");
    let outcome = pair.nodes[A].take_resize_outcome(0).expect("ended");
    assert!(
        outcome.as_ref().is_err_and(|e| e.contains("cannot grow")),
        "{outcome:?}"
    );
    // Shrinking, by --size.
    let refused = pair.resize(A, Some(VOLUME_BYTES / 2), false);
    assert!(
        matches!(&refused, Err(StateError::Resize(e)) if e.contains("shrinking")),
        "{refused:?}"
    );
    // A peer that is not connected.
    pair.disconnect();
    let refused = pair.resize(A, None, false);
    assert!(
        matches!(refused, Err(StateError::PeerNotConnected { .. })),
        "{refused:?}"
    );
    assert_eq!(pair.size(A), VOLUME_BYTES);
}

#[test]
fn a_peer_lost_mid_resize_fails_it() {
    let mut pair = Pair::new(Protocol::C);
    pair.grow_disk(A, GROWN_BYTES, 0);
    pair.grow_disk(B, GROWN_BYTES, 0);
    let mut out = Vec::new();
    pair.nodes[A]
        .start_resize(request(GROWN_BYTES, None, false), &mut out)
        .expect("starts");
    pair.route(A, out);
    assert!(pair.nodes[A].resizing(0));
    pair.disconnect();
    let outcome = pair.nodes[A].take_resize_outcome(0).expect("ended");
    assert!(outcome.is_err_and(|e| e.contains("disconnected")));
    assert!(!pair.nodes[A].resizing(0));
    assert_eq!(pair.size(A), VOLUME_BYTES);
}

/// A node that missed its peers' resize (disconnected meanwhile) grows alone with
/// `--assume-peer-has-space` once nobody is connected, and the new area is resynced on
/// reconnect; the flag is refused while a peer is connected.
#[test]
fn assume_peer_has_space_grows_a_lagging_node_alone() {
    let mut pair = Pair::new(Protocol::C);
    pair.grow_disk(A, GROWN_BYTES, 0x11);
    pair.grow_disk(B, GROWN_BYTES, 0xEE);
    let alone = ResizeRequest {
        assume_peer_has_space: true,
        ..request(GROWN_BYTES, None, false)
    };
    let refused = pair.resize_with(A, alone);
    assert!(
        matches!(&refused, Err(StateError::Resize(e)) if e.contains("is connected")),
        "{refused:?}"
    );
    pair.disconnect();
    for node in [A, B] {
        pair.resize_with(node, alone).expect("grows alone");
        assert_eq!(
            pair.nodes[node].take_resize_outcome(0),
            Some(Ok(GROWN_BYTES))
        );
    }
    pair.connect();
    pair.settle_resize();
    assert_eq!((pair.size(A), pair.size(B)), (GROWN_BYTES, GROWN_BYTES));
    assert_eq!(pair.out_of_sync(), 0);
    assert!(
        pair.disks[A] == pair.disks[B],
        "the new area was resynced from the Primary"
    );
}
