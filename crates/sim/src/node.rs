//! One simulated node: its engine (absent while crashed), data disk, metadata, connections
//! and the local I/O it has in flight.
//!
//! Invariants: `inc` (incarnation) grows at every crash, and every event scheduled for the
//! node carries it, so nothing of a previous life reaches the new engine; `conns` mirrors the
//! engine's view (an entry exists exactly while the engine has the peer Connected).

use std::collections::BTreeMap;
use std::time::Duration;

use repl::{
    Action, Engine, EngineConfig, PeerConfig, Protocol, ResyncRateConfig, SplitBrainPolicies,
};

use crate::disk::SimDisk;
use crate::metadata::SimMeta;
use crate::{Payload, SimError};

/// A node of the simulated cluster.
#[derive(Debug)]
pub struct Node {
    /// Node id (also its index).
    pub id: u8,
    /// The running engine; None while crashed.
    pub engine: Option<Engine<Payload>>,
    /// Data disk.
    pub disk: SimDisk,
    /// Durable metadata and its write queue.
    pub meta: SimMeta,
    /// Incarnation: grows at every crash.
    pub inc: u64,
    /// Peer → current connection id.
    pub conns: BTreeMap<u8, u64>,
    /// Local I/O in flight: key → the action.
    pub pending: BTreeMap<u64, Action<Payload>>,
    /// A metadata step is scheduled.
    pub meta_scheduled: bool,
}

/// The connection settings every peer of the simulated cluster uses.
pub fn peer_config(node_id: u8, protocol: Protocol) -> PeerConfig {
    PeerConfig {
        node_id,
        name: format!("node{node_id}"),
        protocol,
        max_epoch_size: 64,
        ping_interval: Duration::from_secs(2),
        ping_timeout: Duration::from_millis(500),
        timeout: Duration::from_secs(6),
        ko_count: 7,
        max_buffers_pages: 2048,
        resync: ResyncRateConfig {
            resync_rate_kib_per_s: 200 * 1024,
            c_plan_ahead: Duration::ZERO,
            ..ResyncRateConfig::default()
        },
        split_brain: SplitBrainPolicies::default(),
        csums: false,
        durable_acks: true,
        congestion: None,
    }
}

impl Node {
    /// A node that is not running yet.
    pub fn new(id: u8, disk: SimDisk, meta: SimMeta) -> Node {
        Node {
            id,
            engine: None,
            disk,
            meta,
            inc: 0,
            conns: BTreeMap::new(),
            pending: BTreeMap::new(),
            meta_scheduled: false,
        }
    }

    /// Whether the node runs.
    pub fn alive(&self) -> bool {
        self.engine.is_some()
    }

    /// Starts the engine from the durable metadata, as the daemon does at attach. A crashed
    /// Primary without an activity log has every bit set by the engine: those pages are
    /// written before anything else (lib.rs of `repl`, "Attach").
    pub fn start(
        &mut self,
        peers: &[u8],
        protocol: Protocol,
        random_seed: u64,
    ) -> Result<(), SimError> {
        let volume = self.meta.attach(0)?;
        let without_log = volume.activity_log.is_none() && volume.crashed_primary;
        let config = EngineConfig {
            node_id: self.id,
            volumes: vec![volume],
            peers: peers.iter().map(|&p| peer_config(p, protocol)).collect(),
            random_seed,
        };
        let mut engine = Engine::new(config)
            .map_err(|e| SimError::Config(format!("engine of node {}: {e}", self.id)))?;
        if without_log {
            for &peer in peers {
                let pages = engine.take_dirty_bitmap_pages(0, peer);
                self.meta.write_pages_now(peer, &pages.pages)?;
            }
        }
        self.engine = Some(engine);
        Ok(())
    }

    /// Whether writes received from peers are still being written here.
    pub fn peer_io_pending(&self) -> bool {
        self.pending.values().any(|a| match a {
            Action::LocalWrite { io, .. } | Action::LocalFlush { io } => matches!(
                io,
                repl::IoId::PeerWrite { .. }
                    | repl::IoId::PeerFlush { .. }
                    | repl::IoId::PeerGroupFlush { .. }
                    | repl::IoId::ResyncWrite { .. }
            ),
            _ => false,
        })
    }
}
