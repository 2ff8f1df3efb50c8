//! Inputs, outputs and status values of the replication engine.
//!
//! Everything here is plain data: the driver turns sockets and disks into these values and
//! these values back into I/O.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::state::{ConnState, DiskState, Protocol, ReplState, Role};

/// Monotonic time in nanoseconds since an arbitrary origin chosen by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The time `duration` later (saturating).
    pub fn after(self, duration: Duration) -> Time {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(nanos))
    }

    /// How long since `earlier` (zero if `earlier` is later).
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// The driver's name for one client request; echoed in [`Action::Complete`].
pub type RequestId = u64;

/// Flags of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteFlags {
    /// Force unit access: durable before completion, locally and (protocol C) on peers.
    pub fua: bool,
}

/// A client operation on a volume.
#[derive(Debug, Clone)]
pub enum Op<P> {
    /// Write `data` (of `length` bytes) at `offset`.
    Write { offset: u64, length: u64, data: P, flags: WriteFlags },
    /// Discard a range.
    Trim { offset: u64, length: u64, flags: WriteFlags },
    /// Write zeroes to a range.
    WriteZeroes { offset: u64, length: u64, flags: WriteFlags },
    /// Make every completed write durable, locally and (protocols B and C) on peers.
    Flush,
}

/// A local disk operation the driver must perform.
#[derive(Debug, Clone)]
pub enum DiskOp<P> {
    /// Write `data` (`length` bytes) at `offset`; with `fua`, durably.
    Write { offset: u64, length: u64, data: P, fua: bool },
    /// Discard `length` bytes at `offset`.
    Trim { offset: u64, length: u64, fua: bool },
    /// Zero `length` bytes at `offset`.
    WriteZeroes { offset: u64, length: u64, fua: bool },
}

/// Names a local I/O so its completion can be matched to its cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoId {
    /// The local half of a client write with this sequence number.
    Write { seq: u64 },
    /// The local half of a client flush.
    Flush { seq: u64 },
    /// A write received from a peer.
    PeerWrite { peer: u8, seq: u64 },
    /// The flush that ends a peer's epoch.
    PeerFlush { peer: u8, epoch: u64 },
}

/// Why a local I/O failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    /// The disk reported an I/O error.
    #[error("I/O error")]
    Io,
    /// The disk is full.
    #[error("no space left on the backing device")]
    NoSpace,
    /// The operation is not supported by the backing device.
    #[error("operation not supported by the backing device")]
    NotSupported,
    /// The request was invalid (out of range).
    #[error("invalid request")]
    Invalid,
    /// The resource cannot accept writes (not Primary, or shutting down).
    #[error("resource is not writable here")]
    NotWritable,
    /// The write's data stopped arriving (its client or peer connection broke) before it
    /// was complete; part of it may have been written.
    #[error("the write's data stopped arriving")]
    Aborted,
}

/// A decoded message from a peer, as the engine sees it.
#[derive(Debug, Clone)]
pub enum PeerMessage<P> {
    /// A replicated write (its payload may still be arriving: see the driver's payload type).
    Data { seq: u64, epoch: u64, volume: u16, offset: u64, op: DiskOp<P> },
    /// End of epoch `epoch`; with `flush`, make it durable before acknowledging.
    Barrier { epoch: u64, flush: bool },
    /// Keep-alive request.
    Ping,
    /// Keep-alive answer.
    PingAck,
    /// The peer received write `seq` (protocol B).
    RecvAck { seq: u64 },
    /// The peer wrote `seq` to its disk (protocol C).
    WriteAck { seq: u64 },
    /// The peer failed to write `seq`.
    NegAck { seq: u64 },
    /// The peer finished epoch `epoch`.
    BarrierAck { epoch: u64 },
    /// The peer's role and disk states changed.
    State { role: Role, disks: Vec<(u16, DiskState)> },
}

/// What the engine asks the driver to do.
#[derive(Debug, Clone)]
pub enum Action<P> {
    /// Perform a local disk operation; answer with `local_done(io)`.
    LocalWrite { io: IoId, volume: u16, op: DiskOp<P> },
    /// Make all completed local writes durable; answer with `local_done(io)`.
    LocalFlush { io: IoId },
    /// Send a write to a peer on the data socket; report `peer_sent` once it is in the socket.
    SendData { peer: u8, seq: u64, epoch: u64, volume: u16, op: DiskOp<P> },
    /// Send an epoch boundary on the data socket.
    SendBarrier { peer: u8, epoch: u64, flush: bool },
    /// Send a control message (acks, pings, state) on the control socket.
    SendControl { peer: u8, message: PeerMessage<P> },
    /// Close the connection to a peer (the driver reconnects unless it is StandAlone).
    Disconnect { peer: u8, state: ConnState, reason: String },
    /// Answer a client request.
    Complete { request: RequestId, result: Result<(), IoError> },
    /// Something changed that status and events show.
    StateChanged,
}

/// Why a state change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// A connected peer is Primary and two primaries are not allowed.
    #[error("peer {peer} is Primary; only one Primary is allowed")]
    PeerIsPrimary { peer: String },
    /// The export is open for writing.
    #[error("the device is held open by {count} client(s)")]
    DeviceInUse { count: u32 },
    /// No such peer in this resource.
    #[error("no peer with node-id {0}")]
    NoSuchPeer(u8),
    /// The local disk is not UpToDate and promotion was not forced.
    #[error("local disk is {0}; refusing to become Primary without --force")]
    NotUpToDate(DiskState),
}

/// A snapshot of everything `status` shows for one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineStatus {
    /// Our node id.
    pub node_id: u8,
    /// Our role.
    pub role: Role,
    /// Our volumes.
    pub volumes: Vec<VolumeStatus>,
    /// Our peers.
    pub peers: Vec<PeerStatus>,
}

/// Local state of one volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeStatus {
    /// Volume number.
    pub volume: u16,
    /// Local disk state.
    pub disk: DiskState,
    /// Exported size in bytes.
    pub size_bytes: u64,
    /// Bytes written by clients.
    pub written_bytes: u64,
    /// Client writes in flight.
    pub upper_pending: u64,
    /// Local disk operations in flight.
    pub lower_pending: u64,
}

/// State of one peer connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// Peer node id.
    pub node_id: u8,
    /// Connection state.
    pub connection: ConnState,
    /// Peer's role as last reported.
    pub role: Role,
    /// Replication protocol of this connection.
    pub protocol: Protocol,
    /// Why the last connection ended, if it did.
    pub last_error: Option<String>,
    /// Writes sent and not yet acknowledged as the protocol requires.
    pub unacked: u64,
    /// Per volume.
    pub volumes: Vec<PeerVolumeStatus>,
}

/// State of one volume towards one peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerVolumeStatus {
    /// Volume number.
    pub volume: u16,
    /// Replication state.
    pub replication: ReplState,
    /// The peer's disk state as we know it.
    pub peer_disk: DiskState,
    /// Bytes sent to the peer.
    pub sent_bytes: u64,
    /// Bytes received from the peer.
    pub received_bytes: u64,
    /// Bytes that may differ on the peer.
    pub out_of_sync_bytes: u64,
    /// Writes received from the peer not yet written.
    pub pending: u64,
}
