//! Scenario tests of the engine: two engines joined by an in-memory link whose delivery the
//! test controls step by step, so each protocol's completion point (drbd-semantics.md §1) and
//! the epoch rules can be checked exactly.

use std::collections::VecDeque;
use std::time::Duration;

use crate::*;

const VOLUME_BYTES: u64 = 1 << 20;
const A: usize = 0;
const B: usize = 1;

mod activity_log;
mod ahead;
mod csums;
mod diskless;
mod fence;
mod forget;
mod lag;
mod leave;
mod outdate;
mod pause;
mod resize;
mod resync;
mod resync_pace;
mod suspend;
mod three;
mod verify;

/// The current generation both test disks start with (equal: in sync).
const SYNCED_UUID: u64 = 0x1000;

fn peer_config(node_id: u8, protocol: Protocol) -> PeerConfig {
    PeerConfig {
        node_id,
        name: format!("node{node_id}"),
        protocol,
        max_epoch_size: 2048,
        ping_interval: Duration::from_secs(10),
        ping_timeout: Duration::from_millis(500),
        timeout: Duration::from_secs(6),
        ko_count: 7,
        max_buffers_pages: 2048,
        // Fast enough that the resync tests finish in a few ticks.
        resync: ResyncRateConfig {
            resync_rate_kib_per_s: 1 << 20,
            c_plan_ahead: Duration::ZERO,
            ..ResyncRateConfig::default()
        },
        split_brain: SplitBrainPolicies::default(),
        csums: false,
        durable_acks: true,
        congestion: None,
    }
}

/// A volume in sync with its peer's (same current generation, UpToDate).
fn synced_volume() -> VolumeConfig {
    let mut ids = GenerationIds::just_created();
    ids.current = SYNCED_UUID;
    VolumeConfig {
        ids,
        disk: DiskState::UpToDate,
        ..VolumeConfig::fresh(0, VOLUME_BYTES)
    }
}

fn engine_with(node_id: u8, peer: PeerConfig, volume: VolumeConfig) -> Engine<Vec<u8>> {
    let config = EngineConfig {
        node_id,
        volumes: vec![volume],
        peers: vec![peer],
        random_seed: 0x5eed + u64::from(node_id),
    };
    Engine::new(config).expect("valid test configuration")
}

fn engine(node_id: u8, peer: u8, protocol: Protocol) -> Engine<Vec<u8>> {
    engine_with(node_id, peer_config(peer, protocol), synced_volume())
}

/// Two engines, their disks, and the messages and I/O in flight between them.
struct Pair {
    nodes: [Engine<Vec<u8>>; 2],
    disks: [Vec<u8>; 2],
    now: Time,
    /// Messages in flight towards node i (data and control in one FIFO each).
    links: [VecDeque<(Kind, PeerMessage<Vec<u8>>)>; 2],
    /// Local I/O issued by node i and not yet performed.
    local: [VecDeque<Action<Vec<u8>>>; 2],
    completed: Vec<(RequestId, Result<(), IoError>)>,
    disconnects: Vec<(usize, ConnState)>,
    /// Why each of `disconnects` happened, in the same order.
    reasons: Vec<DisconnectReason>,
    /// The last metadata each node persisted.
    persisted: [Option<VolumeMeta>; 2],
    /// Split brains each node reported.
    split_brains: Vec<(usize, Resolution)>,
    /// Resync payload bytes each node sent (replies).
    resync_sent_bytes: [u64; 2],
    /// Resync request bytes each node sent.
    resync_requested_bytes: [u64; 2],
    /// Activity-log transactions each node wrote (answered Ok), in order.
    al_written: Vec<(usize, AlRecord)>,
    /// `VerifyFound` and `VerifyFinished` actions, with the node that produced them.
    verify_events: Vec<(usize, Action<Vec<u8>>)>,
    /// Client reads of a Diskless volume answered (`ReadDone`).
    reads_done: Vec<(RequestId, Result<Vec<u8>, IoError>)>,
    /// `FencePeer` actions: (the node that asked, the peer to fence).
    fence_calls: Vec<(usize, u8)>,
}

/// An [`Action::WriteActivityLog`] as the test driver performed it.
#[derive(Debug, Clone)]
struct AlRecord {
    offset_bytes: u64,
    block: Vec<u8>,
    bitmap_pages: Vec<(u8, u64, Vec<u8>)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Data,
    Control,
}

impl Pair {
    /// Two engines, not connected.
    fn unconnected(nodes: [Engine<Vec<u8>>; 2]) -> Pair {
        let disk_bytes = |node: &Engine<Vec<u8>>| node.status().volumes[0].size_bytes as usize;
        Pair {
            disks: [
                vec![0; disk_bytes(&nodes[A])],
                vec![0; disk_bytes(&nodes[B])],
            ],
            nodes,
            now: Time(1),
            links: [VecDeque::new(), VecDeque::new()],
            local: [VecDeque::new(), VecDeque::new()],
            completed: Vec::new(),
            disconnects: Vec::new(),
            reasons: Vec::new(),
            persisted: [None, None],
            split_brains: Vec::new(),
            resync_sent_bytes: [0, 0],
            resync_requested_bytes: [0, 0],
            al_written: Vec::new(),
            verify_events: Vec::new(),
            reads_done: Vec::new(),
            fence_calls: Vec::new(),
        }
    }

    /// Connected, in sync, A Primary.
    fn new(protocol: Protocol) -> Pair {
        let mut pair = Pair::unconnected([engine(0, 1, protocol), engine(1, 0, protocol)]);
        pair.connect();
        let mut out = Vec::new();
        pair.nodes[A]
            .promote(Promotion::Normal, &mut out)
            .expect("promote");
        pair.route(A, out);
        pair.deliver_all();
        pair
    }

    fn connect(&mut self) {
        for node in [A, B] {
            let mut out = Vec::new();
            self.nodes[node].peer_connected(self.now, 1 - node as u8, &mut out);
            self.route(node, out);
        }
        self.deliver_all();
    }

    fn route(&mut self, from: usize, actions: Vec<Action<Vec<u8>>>) {
        let to = 1 - from;
        for action in actions {
            match action {
                Action::LocalWrite { .. }
                | Action::LocalFlush { .. }
                | Action::LocalRead { .. }
                | Action::PersistMeta { .. }
                | Action::WriteActivityLog { .. } => self.local[from].push_back(action),
                Action::SendOnData { message, .. } => {
                    match &message {
                        PeerMessage::ResyncReply { length, .. } => {
                            self.resync_sent_bytes[from] += length
                        }
                        PeerMessage::ResyncRequest { length, .. } => {
                            self.resync_requested_bytes[from] += length
                        }
                        _ => {}
                    }
                    self.links[to].push_back((Kind::Data, message));
                }
                Action::SplitBrain { resolution, .. } => self.split_brains.push((from, resolution)),
                Action::SendData {
                    seq,
                    epoch,
                    volume,
                    op,
                    ..
                } => {
                    let offset = match &op {
                        DiskOp::Write { offset, .. }
                        | DiskOp::Trim { offset, .. }
                        | DiskOp::WriteZeroes { offset, .. } => *offset,
                    };
                    self.links[to].push_back((
                        Kind::Data,
                        PeerMessage::Data {
                            seq,
                            epoch,
                            volume,
                            offset,
                            op,
                        },
                    ));
                    // The in-memory socket takes the frame at once.
                    let mut out = Vec::new();
                    self.nodes[from].peer_sent(self.now, to as u8, seq, &mut out);
                    self.route(from, out);
                }
                Action::SendBarrier { epoch, flush, .. } => {
                    self.links[to].push_back((Kind::Data, PeerMessage::Barrier { epoch, flush }));
                }
                Action::SendControl { message, .. } => {
                    self.links[to].push_back((Kind::Control, message))
                }
                Action::Complete { request, result } => self.completed.push((request, result)),
                Action::Disconnect { state, reason, .. } => {
                    self.disconnects.push((from, state));
                    self.reasons.push(reason);
                }
                Action::StateChanged | Action::Detached { .. } => {}
                Action::ReadDone { request, result } => self.reads_done.push((request, result)),
                Action::LocalDigest { .. } | Action::ResizeOffer { .. } | Action::Grow { .. } => {
                    self.local[from].push_back(action)
                }
                Action::VerifyFound { .. } | Action::VerifyFinished { .. } => {
                    self.verify_events.push((from, action))
                }
                Action::FencePeer { peer } => self.fence_calls.push((from, peer)),
            }
        }
    }

    /// Deliver one message to `node`; false if none was waiting.
    fn deliver(&mut self, node: usize) -> bool {
        let Some((_, message)) = self.links[node].pop_front() else {
            return false;
        };
        let mut out = Vec::new();
        self.nodes[node].peer_message(self.now, 1 - node as u8, message, &mut out);
        self.route(node, out);
        true
    }

    /// Perform one local I/O of `node`; false if none was waiting.
    fn run_local(&mut self, node: usize) -> bool {
        let Some(action) = self.local[node].pop_front() else {
            return false;
        };
        self.perform(node, action);
        true
    }

    /// Performs one local I/O action of `node` and answers it.
    fn perform(&mut self, node: usize, action: Action<Vec<u8>>) {
        let mut out = Vec::new();
        let io = match action {
            Action::LocalWrite {
                io,
                op: DiskOp::Write { offset, data, .. },
                ..
            } => {
                let start = offset as usize;
                let Some(target) = self.disks[node].get_mut(start..start + data.len()) else {
                    // No such blocks (a diskless node): the write fails, as the driver's would.
                    self.nodes[node].local_done(self.now, io, Err(IoError::Invalid), &mut out);
                    self.route(node, out);
                    return;
                };
                target.copy_from_slice(&data);
                io
            }
            Action::LocalRead {
                io, offset, length, ..
            } => {
                let data = self.disks[node][offset as usize..(offset + length) as usize].to_vec();
                self.nodes[node].local_read_done(self.now, io, Ok(data), &mut out);
                self.route(node, out);
                return;
            }
            Action::PersistMeta { io, meta, .. } => {
                self.persisted[node] = Some(*meta);
                io
            }
            Action::WriteActivityLog {
                io,
                offset_bytes,
                block,
                bitmap_pages,
                ..
            } => {
                self.al_written.push((
                    node,
                    AlRecord {
                        offset_bytes,
                        block,
                        bitmap_pages,
                    },
                ));
                io
            }
            Action::LocalWrite { io, .. } | Action::LocalFlush { io } => io,
            Action::LocalDigest {
                io,
                offset,
                length,
                block_bytes,
                ..
            } => {
                let data = &self.disks[node][offset as usize..(offset + length) as usize];
                self.nodes[node].local_digest_done(
                    self.now,
                    io,
                    Ok(verify::block_digests(data, block_bytes)),
                    &mut out,
                );
                self.route(node, out);
                return;
            }
            Action::ResizeOffer { .. } | Action::Grow { .. } => {
                self.perform_resize(node, action);
                return;
            }
            _ => unreachable!("only local I/O is queued"),
        };
        self.nodes[node].local_done(self.now, io, Ok(()), &mut out);
        self.route(node, out);
    }

    /// Runs `node`'s queued local I/O, failing with EIO every data write whose id `fails`
    /// picks (a disk error), performing the rest.
    fn run_local_failing(&mut self, node: usize, fails: impl Fn(&IoId) -> bool) {
        self.run_local_failing_with(node, IoError::Io, fails);
    }

    /// [`Pair::run_local_failing`] with `error` (ENOSPC, say) instead of EIO.
    fn run_local_failing_with(
        &mut self,
        node: usize,
        error: IoError,
        fails: impl Fn(&IoId) -> bool,
    ) {
        while let Some(action) = self.local[node].pop_front() {
            match action {
                Action::LocalWrite { io, .. } if fails(&io) => {
                    let mut out = Vec::new();
                    self.nodes[node].local_done(self.now, io, Err(error), &mut out);
                    self.route(node, out);
                }
                other => self.perform(node, other),
            }
        }
    }

    fn deliver_all(&mut self) {
        while self.deliver(A) | self.deliver(B) | self.run_local(A) | self.run_local(B) {}
    }

    fn write(&mut self, request: RequestId, offset: u64, byte: u8, length: usize) {
        let op = Op::Write {
            offset,
            length: length as u64,
            data: vec![byte; length],
            flags: WriteFlags::default(),
        };
        let mut out = Vec::new();
        self.nodes[A].submit(self.now, request, 0, op, &mut out);
        self.route(A, out);
    }

    fn flush(&mut self, request: RequestId) {
        let mut out = Vec::new();
        self.nodes[A].submit(self.now, request, 0, Op::Flush, &mut out);
        self.route(A, out);
    }

    fn is_complete(&self, request: RequestId) -> bool {
        self.completed
            .iter()
            .any(|(r, result)| *r == request && result.is_ok())
    }

    fn disconnect(&mut self) {
        for node in [A, B] {
            let mut out = Vec::new();
            let reason = "test cut the link".to_string();
            self.nodes[node].peer_disconnected(
                self.now,
                1 - node as u8,
                ConnState::NetworkFailure,
                reason,
                &mut out,
            );
            self.route(node, out);
        }
        self.links = [VecDeque::new(), VecDeque::new()];
    }

    fn tick(&mut self, node: usize, after: Duration) {
        self.now = self.now.after(after);
        let mut out = Vec::new();
        self.nodes[node].tick(self.now, &mut out);
        self.route(node, out);
    }

    /// Closes A's idle epoch and delivers everything, a few times: every write sent so far is
    /// then durably confirmed by B (its barrier acked after B's group flush).
    fn confirm_all(&mut self) {
        for _ in 0..3 {
            self.tick(A, TICK_INTERVAL);
            self.deliver_all();
        }
    }

    fn out_of_sync(&self) -> u64 {
        self.nodes[A].status().peers[0].volumes[0].out_of_sync_bytes
    }
}

/// drbd-semantics.md §1: protocol C completes after the local write and the peer's write ack.
#[test]
fn protocol_c_completes_only_after_the_peer_wrote() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 7, 4096);
    assert!(pair.run_local(A), "local write issued");
    assert!(!pair.is_complete(1), "local alone is not enough under C");
    assert!(pair.deliver(B), "data reaches the peer");
    assert!(!pair.is_complete(1));
    assert!(pair.run_local(B), "peer writes");
    assert_eq!(pair.disks[B][0], 7);
    assert!(pair.deliver(A), "write ack arrives");
    assert!(pair.is_complete(1));
}

/// drbd-semantics.md §1: protocol B completes on the peer's receipt, before its disk write.
#[test]
fn protocol_b_completes_on_receipt() {
    let mut pair = Pair::new(Protocol::B);
    pair.write(1, 0, 7, 4096);
    pair.run_local(A);
    pair.deliver(B);
    assert!(pair.deliver(A), "receipt ack arrives");
    assert!(pair.is_complete(1));
    assert_eq!(pair.disks[B][0], 0, "the peer has not written yet");
}

#[test]
fn both_nodes_count_replicated_bytes_as_written() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 7, 8192);
    pair.deliver_all();
    assert_eq!(pair.nodes[A].status().volumes[0].written_bytes, 8192);
    assert_eq!(pair.nodes[B].status().volumes[0].written_bytes, 8192);
    assert_eq!(
        pair.nodes[B].status().peers[0].volumes[0].received_bytes,
        8192
    );
}

/// drbd-semantics.md §1: protocol A completes once local and in the socket.
#[test]
fn protocol_a_completes_when_sent() {
    let mut pair = Pair::new(Protocol::A);
    pair.write(1, 0, 7, 4096);
    assert!(!pair.is_complete(1), "the local write is still pending");
    pair.run_local(A);
    assert!(pair.is_complete(1));
    assert_eq!(pair.links[B].len(), 1, "nothing delivered yet");
}

#[test]
fn local_and_remote_writes_are_issued_together() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 7, 4096);
    assert_eq!(pair.local[A].len(), 1, "the local write is issued");
    assert_eq!(
        pair.links[B].len(),
        1,
        "the peer send is issued before the local write finished"
    );
}

#[test]
fn disconnected_peer_does_not_block_writes_and_is_marked_out_of_sync() {
    let mut pair = Pair::new(Protocol::C);
    pair.disconnect();
    pair.write(1, 8192, 7, 8192);
    // drbd-semantics.md §2: the first write with the peer away starts a new generation, which
    // is persisted before the write completes.
    while pair.run_local(A) {}
    assert!(pair.is_complete(1));
    assert_eq!(pair.out_of_sync(), 8192);
}

#[test]
fn peer_lost_mid_write_completes_the_write_and_marks_it() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 7, 4096);
    pair.run_local(A);
    assert!(!pair.is_complete(1));
    pair.disconnect();
    // drbd-semantics.md §2: losing the peer with the write unconfirmed starts a new
    // generation at once; the write completes when it is persisted.
    assert!(
        !pair.is_complete(1),
        "waits for the new generation to be persisted"
    );
    while pair.run_local(A) {}
    assert!(
        pair.is_complete(1),
        "the write no longer waits for the lost peer"
    );
    assert_eq!(pair.out_of_sync(), 4096);
}

#[test]
fn overlapping_writes_never_run_concurrently() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 1, 8192);
    pair.write(2, 4096, 2, 8192);
    pair.write(3, 65536, 3, 4096);
    assert_eq!(
        pair.local[A].len(),
        2,
        "write 2 overlaps write 1 and waits; write 3 does not"
    );
    pair.deliver_all();
    assert!(pair.is_complete(1) && pair.is_complete(2) && pair.is_complete(3));
    assert_eq!(pair.disks[A], pair.disks[B]);
    assert_eq!(pair.disks[B][4096], 2, "the later write wins on both sides");
}

#[test]
fn a_write_after_a_completion_is_held_on_the_peer_until_the_earlier_epoch_finished() {
    let mut pair = Pair::new(Protocol::A);
    pair.write(1, 0, 1, 4096);
    pair.run_local(A);
    assert!(pair.is_complete(1));
    pair.write(2, 8192, 2, 4096);
    // To the peer: data(1), barrier(epoch of 1), data(2).
    assert!(pair.deliver(B) && pair.deliver(B) && pair.deliver(B));
    assert_eq!(
        pair.local[B].len(),
        1,
        "only write 1 is issued; write 2 waits for its epoch"
    );
    pair.run_local(B);
    // Epoch 1 finished: write 2 is issued now, and a flush makes epoch 1 durable before its
    // barrier is acknowledged.
    assert_eq!(pair.local[B].len(), 2, "write 2 and the group flush");
    assert!(pair.local[B].iter().any(|a| matches!(
        a,
        Action::LocalFlush {
            io: IoId::PeerGroupFlush { .. }
        }
    )));
    assert_eq!(pair.disks[B][0], 1);
    assert_eq!(pair.disks[B][8192], 0);
}

#[test]
fn flush_waits_for_the_peer_under_c_but_not_under_a() {
    for (protocol, waits) in [
        (Protocol::C, true),
        (Protocol::B, true),
        (Protocol::A, false),
    ] {
        let mut pair = Pair::new(protocol);
        pair.write(1, 0, 1, 4096);
        pair.deliver_all();
        pair.flush(2);
        pair.run_local(A);
        assert_eq!(!pair.is_complete(2), waits, "protocol {protocol}");
        pair.deliver_all();
        assert!(pair.is_complete(2), "protocol {protocol}");
    }
}

#[test]
fn unanswered_ping_drops_the_connection() {
    let mut pair = Pair::new(Protocol::C);
    pair.tick(A, Duration::from_secs(11));
    assert!(matches!(
        pair.links[B].back(),
        Some((Kind::Control, PeerMessage::Ping))
    ));
    pair.links[B].clear();
    pair.tick(A, Duration::from_millis(600));
    assert_eq!(pair.disconnects, vec![(A, ConnState::NetworkFailure)]);
    assert_eq!(
        pair.nodes[A].status().peers[0].connection,
        ConnState::Connecting
    );
}

#[test]
fn answered_ping_keeps_the_connection() {
    let mut pair = Pair::new(Protocol::C);
    pair.tick(A, Duration::from_secs(11));
    pair.deliver_all();
    pair.tick(A, Duration::from_millis(600));
    assert!(pair.disconnects.is_empty());
}

#[test]
fn a_peer_that_never_answers_a_write_is_dropped_after_ko_count_timeouts() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 1, 4096);
    pair.run_local(A);
    for _ in 0..41 {
        pair.tick(A, Duration::from_secs(1));
        pair.deliver(A); // ping acks keep the link itself alive
        while pair.links[B].iter().any(|(k, _)| *k == Kind::Control) {
            let index = pair.links[B]
                .iter()
                .position(|(k, _)| *k == Kind::Control)
                .unwrap_or(0);
            let (_, message) = pair.links[B].remove(index).expect("present");
            let mut out = Vec::new();
            pair.nodes[B].peer_message(pair.now, 0, message, &mut out);
            pair.route(B, out);
        }
        pair.deliver(A);
    }
    assert!(pair.disconnects.is_empty(), "41 s < 7 x 6 s");
    pair.tick(A, Duration::from_secs(2));
    assert_eq!(pair.disconnects, vec![(A, ConnState::Timeout)]);
    while pair.run_local(A) {}
    assert!(
        pair.is_complete(1),
        "the write completes once the peer is dropped"
    );
}

#[test]
fn role_rules() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    assert!(matches!(
        pair.nodes[B].promote(Promotion::Normal, &mut out),
        Err(StateError::PeerIsPrimary { .. })
    ));
    pair.nodes[A].export_opened(true);
    assert_eq!(
        pair.nodes[A].demote(&mut out),
        Err(StateError::DeviceInUse { count: 1 })
    );
    pair.nodes[A].export_opened(false);
    assert_eq!(pair.nodes[A].demote(&mut out), Ok(()));
}

#[test]
fn secondary_refuses_client_writes() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    let op = Op::Write {
        offset: 0,
        length: 1,
        data: vec![1],
        flags: WriteFlags::default(),
    };
    pair.nodes[B].submit(pair.now, 9, 0, op, &mut out);
    assert!(matches!(
        out.as_slice(),
        [Action::Complete {
            request: 9,
            result: Err(IoError::NotWritable)
        }]
    ));
}

#[test]
fn an_ack_for_a_write_never_sent_is_a_protocol_error() {
    let mut pair = Pair::new(Protocol::C);
    pair.links[A].push_back((Kind::Control, PeerMessage::WriteAck { seq: 999 }));
    pair.deliver(A);
    assert_eq!(pair.disconnects, vec![(A, ConnState::ProtocolError)]);
    let violation = PeerViolation::AckUnknownWrite { seq: 999 };
    assert_eq!(pair.reasons, vec![DisconnectReason::Violation(violation)]);
}

#[test]
fn data_beyond_the_volume_is_a_protocol_error_and_never_written() {
    let mut pair = Pair::new(Protocol::C);
    let op = DiskOp::Write {
        offset: VOLUME_BYTES - 1,
        length: 2,
        data: vec![1, 2],
        fua: false,
    };
    pair.links[B].push_back((
        Kind::Data,
        PeerMessage::Data {
            seq: 1,
            epoch: 1,
            volume: 0,
            offset: VOLUME_BYTES - 1,
            op,
        },
    ));
    pair.deliver(B);
    assert_eq!(pair.disconnects, vec![(B, ConnState::ProtocolError)]);
    let violation = PeerViolation::WriteBeyondEnd {
        volume: 0,
        offset: VOLUME_BYTES - 1,
        length: 2,
    };
    assert_eq!(pair.reasons, vec![DisconnectReason::Violation(violation)]);
    assert!(pair.local[B].is_empty());
}

#[test]
fn writes_received_before_a_disconnect_are_still_applied() {
    let mut pair = Pair::new(Protocol::B);
    pair.write(1, 0, 5, 4096);
    pair.run_local(A);
    pair.deliver(B);
    pair.deliver(A);
    assert!(pair.is_complete(1), "protocol B acknowledged receipt");
    pair.disconnect();
    pair.deliver_all();
    assert_eq!(
        pair.disks[B][0], 5,
        "what B acknowledged is written after the disconnect"
    );
}

#[test]
fn replicas_are_identical_after_a_mixed_workload() {
    for protocol in [Protocol::A, Protocol::B, Protocol::C] {
        let mut pair = Pair::new(protocol);
        let mut state = 0x9e37_79b9_u64;
        for request in 0..500 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let offset = (state >> 33) % (VOLUME_BYTES / 4096) * 4096;
            pair.write(
                request,
                offset,
                (state >> 20) as u8,
                4096 * (1 + (state >> 60) as usize % 3)
                    .min(((VOLUME_BYTES - offset) / 4096) as usize),
            );
            if request % 7 == 0 {
                pair.deliver_all();
            }
            if request % 3 == 0 {
                pair.run_local(B);
                pair.deliver(A);
            }
        }
        pair.deliver_all();
        assert_eq!(pair.completed.len(), 500);
        assert!(
            pair.disks[A] == pair.disks[B],
            "protocol {protocol}: replicas differ"
        );
    }
}

/// A failover by link cut with nothing written on the old Primary after it: the old Primary's
/// last writes were settled by the peer (only the barrier ack was missing), so losing the peer
/// starts no new generation; when it returns as Secondary it resyncs from the new Primary
/// instead of reporting a split brain, and the replicas end identical.
#[test]
fn a_cut_without_writes_after_it_is_a_failover_not_a_split_brain() {
    let mut pair = Pair::new(Protocol::C);
    pair.write(1, 0, 7, 4096);
    while pair.run_local(A) | pair.deliver(B) | pair.run_local(B) | pair.deliver(A) {}
    assert!(pair.is_complete(1), "B wrote it: protocol C completes");
    let before = pair.persisted[A].clone();
    pair.disconnect();
    pair.deliver_all();
    assert_eq!(
        pair.persisted[A], before,
        "no new generation: nothing is written after the cut"
    );
    assert_eq!(
        pair.out_of_sync(),
        4096,
        "the unconfirmed block is kept in the bitmap"
    );

    let mut out = Vec::new();
    pair.nodes[A]
        .demote(&mut out)
        .expect("demote the old Primary");
    pair.route(A, out);
    let mut out = Vec::new();
    pair.nodes[B]
        .promote(Promotion::Normal, &mut out)
        .expect("promote the survivor");
    pair.route(B, out);
    let op = Op::Write {
        offset: 8192,
        length: 4096,
        data: vec![9; 4096],
        flags: WriteFlags::default(),
    };
    let mut out = Vec::new();
    pair.nodes[B].submit(pair.now, 2, 0, op, &mut out);
    pair.route(B, out);
    pair.deliver_all();
    assert!(pair.is_complete(2), "the new Primary writes");

    pair.connect();
    for _ in 0..20 {
        pair.tick(A, TICK_INTERVAL);
        pair.tick(B, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert!(
        pair.split_brains.is_empty(),
        "no split brain: {:?}",
        pair.split_brains
    );
    assert!(
        pair.disks[A] == pair.disks[B],
        "the old Primary resynced from the new one"
    );
    assert_eq!(pair.disks[A][8192], 9);
    assert_eq!(pair.nodes[A].status().volumes[0].disk, DiskState::UpToDate);
}

/// Quorum returns only when the returning peer's handshake accepted it, not on the TCP
/// connect: the handshake may still refuse it (a split brain), and writes held for want of
/// quorum must not complete on the strength of a connection that is about to be dropped.
#[test]
fn quorum_returns_after_the_handshake_not_on_connect() {
    let mut pair = Pair::new(Protocol::C);
    let config = QuorumConfig {
        rule: QuorumRule::All,
        ..QuorumConfig::default()
    };
    let mut out = Vec::new();
    pair.nodes[A].set_quorum(pair.now, config, &mut out);
    pair.route(A, out);
    assert!(pair.nodes[A].has_quorum());
    pair.disconnect();
    pair.deliver_all();
    assert!(!pair.nodes[A].has_quorum(), "the peer is gone");
    pair.write(1, 0, 3, 4096);
    pair.deliver_all();
    assert!(!pair.is_complete(1), "held for want of quorum");

    let mut out = Vec::new();
    pair.nodes[A].peer_connected(pair.now, 1, &mut out);
    pair.route(A, out);
    assert!(
        !pair.nodes[A].has_quorum(),
        "a connection alone is not a present peer"
    );
    pair.tick(A, TICK_INTERVAL);
    assert!(
        !pair.nodes[A].has_quorum(),
        "nor after a tick while the handshake waits"
    );
    assert!(!pair.is_complete(1));

    let mut out = Vec::new();
    pair.nodes[B].peer_connected(pair.now, 0, &mut out);
    pair.route(B, out);
    pair.deliver_all();
    assert!(
        pair.nodes[A].has_quorum(),
        "the handshake accepted the peer"
    );
    for _ in 0..5 {
        pair.tick(A, TICK_INTERVAL);
        pair.deliver_all();
    }
    assert!(
        pair.is_complete(1),
        "the held write completes with quorum back"
    );
}

/// `secondary --force` on a Primary whose writes are suspended for want of quorum: the held
/// write and a waiting one fail with EIO (never acknowledged), and the node becomes Secondary
/// although a client still has the export open; a plain `secondary` is refused meanwhile.
#[test]
fn forced_demotion_fails_held_writes_and_demotes_an_open_export() {
    let mut pair = Pair::new(Protocol::C);
    let config = QuorumConfig {
        rule: QuorumRule::All,
        ..QuorumConfig::default()
    };
    let mut out = Vec::new();
    pair.nodes[A].set_quorum(pair.now, config, &mut out);
    pair.route(A, out);
    pair.nodes[A].export_opened(true);
    pair.write(1, 0, 3, 4096);
    pair.run_local(A);
    pair.disconnect();
    pair.deliver_all();
    pair.write(2, 8192, 4, 4096);
    pair.deliver_all();
    assert!(
        pair.completed.is_empty(),
        "both writes are held for want of quorum"
    );

    let mut out = Vec::new();
    assert!(
        pair.nodes[A].demote(&mut out).is_err(),
        "a plain demotion is refused while open"
    );
    pair.route(A, out);
    let mut out = Vec::new();
    pair.nodes[A]
        .demote_forced(pair.now, &mut out)
        .expect("forced demotion");
    pair.route(A, out);
    pair.deliver_all();
    assert_eq!(pair.nodes[A].role(), Role::Secondary);
    let results: Vec<_> = [1, 2]
        .iter()
        .map(|r| {
            pair.completed
                .iter()
                .find(|(q, _)| q == r)
                .map(|(_, res)| *res)
        })
        .collect();
    assert_eq!(
        results,
        vec![Some(Err(IoError::Io)), Some(Err(IoError::Io))],
        "{:?}",
        pair.completed
    );
    assert!(
        pair.completed.iter().all(|(_, result)| result.is_err()),
        "nothing acknowledged"
    );
}
