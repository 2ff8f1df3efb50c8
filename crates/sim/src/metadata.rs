//! Simulated durable metadata of one node's volume: the superblock (kept as its encoded
//! 4 KiB image), one bitmap per peer slot (4 KiB pages) and the activity-log ring, plus the
//! node's queue of metadata writes.
//!
//! Invariants:
//! - Jobs run one at a time, in the order they were queued (the daemon's one writer per
//!   volume); each has two durable phases: its bitmap pages, then its superblock or
//!   activity-log block. A job is answered only after its last phase.
//! - A crash drops the queue: a job whose first phase was applied keeps it (the pages are on
//!   disk), the rest is lost, as after a power loss between two `fdatasync`s.
//! - [`SimMeta::attach`] rebuilds the engine's view like the daemon's
//!   `MetaStore::volume_config` (reimplemented here from the same `meta` functions, since the
//!   daemon's is private): hot activity-log extents of a crashed Primary are marked in every
//!   peer's bitmap and written, the superblock gets `crashed_primary`, the ring is formatted;
//!   an `in_use` flag found set (every restart here is an unclean stop) marks every block for
//!   each peer whose bitmap was counting.

use std::collections::{BTreeMap, VecDeque};

use meta::{
    ActivityLog, ActivityLogConfig, AlUpdates, Bitmap, Layout, LayoutConfig, Placement, Superblock,
};
use repl::{GenerationFlags, GenerationIds, IoId, PeerBitmap, VolumeConfig, VolumeMeta};

use crate::SimError;

/// Bytes of the simulated external metadata device (more than the layout needs).
const METADATA_DEVICE_BYTES: u64 = 4 << 20;

/// Bitmap pages per peer node id: `(peer, [(page index, 4 KiB image)])`.
pub type PeerPages = Vec<(u8, Vec<(u64, Vec<u8>)>)>;

/// One queued metadata write.
#[derive(Debug, Clone)]
pub enum MetaJob {
    /// Bitmap pages per peer node id, then (if given) the superblock fields; `clears` if a
    /// bit was cleared in one of the pages.
    Persist {
        pages: PeerPages,
        meta: Option<Box<VolumeMeta>>,
        io: Option<IoId>,
        clears: bool,
    },
    /// An activity-log transaction: evicted extents' pages, then the ring block; `evicts` if
    /// it makes any extent cold.
    ActivityLog {
        pages: Vec<(u8, u64, Vec<u8>)>,
        offset_bytes: u64,
        block: Vec<u8>,
        io: IoId,
        evicts: bool,
    },
}

/// What the metadata is created with.
#[derive(Debug, Clone)]
pub struct MetaSpec {
    /// Usable data size.
    pub data_bytes: u64,
    /// This node's id.
    pub node_id: u8,
    /// The peers' node ids (one bitmap slot each).
    pub peers: Vec<u8>,
    /// `al-updates yes`.
    pub al_enabled: bool,
    /// `al-extents`.
    pub al_extents: u32,
}

/// The durable metadata of one node and its write queue.
#[derive(Debug, Clone)]
pub struct SimMeta {
    spec: MetaSpec,
    layout: Layout,
    superblock: Vec<u8>,
    /// (peer slot, page index) → 4 KiB image; absent pages are all zero.
    pages: BTreeMap<(u8, u64), Vec<u8>>,
    ring: Vec<u8>,
    queue: VecDeque<MetaJob>,
    /// Phases of the queue's head already applied.
    phase: u8,
}

fn corrupt(what: &str, error: meta::MetaError) -> SimError {
    SimError::Metadata(format!("{what}: {error}"))
}

impl SimMeta {
    /// Fresh metadata holding generation `current` (UpToDate and consistent when `up_to_date`).
    pub fn create(spec: MetaSpec, current: u64, up_to_date: bool) -> Result<SimMeta, SimError> {
        let peer_slots = u8::try_from(spec.peers.len())
            .map_err(|_| SimError::Config("too many peers".into()))?;
        let layout_config = LayoutConfig {
            al_extents: spec.al_extents,
            bitmap_granularity_bytes: 4096,
            ..LayoutConfig::new(
                Placement::External {
                    metadata_bytes: METADATA_DEVICE_BYTES,
                },
                spec.data_bytes,
                peer_slots,
            )
        };
        let layout = Layout::compute(&layout_config).map_err(|e| corrupt("layout", e))?;
        let mut superblock =
            Superblock::new(layout, spec.node_id).map_err(|e| corrupt("superblock", e))?;
        for (slot, &peer) in superblock.peers.iter_mut().zip(&spec.peers) {
            slot.node_id = Some(peer);
        }
        superblock.current_uuid = current;
        superblock.flags.consistent = up_to_date;
        superblock.flags.was_up_to_date = up_to_date;
        superblock.flags.al_disabled = !spec.al_enabled;
        let ring_bytes = usize::try_from(layout.al_ring().length_bytes).unwrap_or(0);
        let image = superblock.encode().map_err(|e| corrupt("superblock", e))?;
        Ok(SimMeta {
            spec,
            layout,
            superblock: image,
            pages: BTreeMap::new(),
            ring: vec![0; ring_bytes],
            queue: VecDeque::new(),
            phase: 0,
        })
    }

    /// The durable superblock.
    pub fn superblock(&self) -> Result<Superblock, SimError> {
        Superblock::decode(&self.superblock).map_err(|e| corrupt("superblock", e))
    }

    fn write_superblock(&mut self, superblock: &Superblock) -> Result<(), SimError> {
        self.superblock = superblock.encode().map_err(|e| corrupt("superblock", e))?;
        Ok(())
    }

    /// Queues a job.
    pub fn push(&mut self, job: MetaJob) {
        self.queue.push_back(job);
    }

    /// Whether a job is queued or running.
    pub fn busy(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Whether the head job needs the data disk's completed writes durable before it (the
    /// daemon's `MetaJob::needs_data_sync`: every superblock write, a bitmap write only if a
    /// bit was cleared in its pages, and an activity-log transaction only if it evicts).
    pub fn head_needs_data_sync(&self) -> bool {
        match self.queue.front() {
            Some(MetaJob::Persist { meta, clears, .. }) => meta.is_some() || *clears,
            Some(MetaJob::ActivityLog { evicts, .. }) => *evicts,
            None => false,
        }
    }

    /// Jobs queued.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Applies the next phase of the head job durably. Returns `Some(io)` when the job is
    /// finished (`io` is what to answer, if anything), None if it needs another phase or the
    /// queue is empty.
    pub fn step(&mut self) -> Result<Option<Option<IoId>>, SimError> {
        let Some(job) = self.queue.front().cloned() else {
            return Ok(None);
        };
        let mut superblock = self.superblock()?;
        if self.phase == 0 {
            self.phase = 1;
            match &job {
                MetaJob::Persist { pages, .. } => {
                    for (peer, pages) in pages {
                        self.store_pages(
                            &superblock,
                            *peer,
                            pages.iter().map(|(p, i)| (*p, i.as_slice())),
                        );
                    }
                }
                MetaJob::ActivityLog { pages, .. } => {
                    for (peer, page, image) in pages {
                        self.store_pages(
                            &superblock,
                            *peer,
                            std::iter::once((*page, image.as_slice())),
                        );
                    }
                }
            }
            return Ok(None);
        }
        self.phase = 0;
        self.queue.pop_front();
        match job {
            MetaJob::Persist { meta, io, .. } => {
                if let Some(meta) = meta {
                    meta.apply_to(&mut superblock);
                    self.write_superblock(&superblock)?;
                }
                Ok(Some(io))
            }
            MetaJob::ActivityLog {
                offset_bytes,
                block,
                io,
                ..
            } => {
                let start = usize::try_from(offset_bytes)
                    .map_err(|_| SimError::Metadata("ring offset".into()))?;
                let slot = self
                    .ring
                    .get_mut(start..start + block.len())
                    .ok_or_else(|| {
                        SimError::Metadata(format!("ring offset {offset_bytes} beyond the ring"))
                    })?;
                slot.copy_from_slice(&block);
                Ok(Some(Some(io)))
            }
        }
    }

    fn store_pages<'a>(
        &mut self,
        superblock: &Superblock,
        peer: u8,
        pages: impl Iterator<Item = (u64, &'a [u8])>,
    ) {
        let Some(slot) = superblock.peer_slot_of(peer) else {
            return;
        };
        for (page, image) in pages {
            self.pages.insert((slot, page), image.to_vec());
        }
    }

    /// Power loss: queued jobs are gone (an applied first phase stays).
    pub fn crash(&mut self) {
        self.queue.clear();
        self.phase = 0;
    }

    fn read_bitmap(&self, slot: u8) -> Result<Bitmap, SimError> {
        let mut bitmap =
            Bitmap::new(self.spec.data_bytes, 4096).map_err(|e| corrupt("bitmap", e))?;
        for ((_, page), image) in self.pages.range((slot, 0)..=(slot, u64::MAX)) {
            bitmap
                .load_page(*page, image)
                .map_err(|e| corrupt("bitmap page", e))?;
        }
        Ok(bitmap)
    }

    /// Writes the dirty pages of `entry`'s bitmap durably at once (attach-time recovery).
    fn store_dirty_pages(&mut self, superblock: &Superblock, entry: &mut PeerBitmap) {
        let pages: Vec<(u64, Vec<u8>)> = entry
            .bitmap
            .take_dirty_pages()
            .map(|(p, i)| (p, i.to_vec()))
            .collect();
        self.store_pages(
            superblock,
            entry.peer,
            pages.iter().map(|(p, i)| (*p, i.as_slice())),
        );
    }

    /// Writes pages durably at once (attach-time recovery).
    pub fn write_pages_now(&mut self, peer: u8, pages: &[(u64, Vec<u8>)]) -> Result<(), SimError> {
        let superblock = self.superblock()?;
        self.store_pages(
            &superblock,
            peer,
            pages.iter().map(|(p, i)| (*p, i.as_slice())),
        );
        Ok(())
    }

    /// The engine's start-up view of volume `number` (see the module invariants).
    pub fn attach(&mut self, number: u16) -> Result<VolumeConfig, SimError> {
        let mut superblock = self.superblock()?;
        let crashed_now = superblock.flags.primary_indicator;
        let crashed_primary = crashed_now || superblock.flags.crashed_primary;
        let mut bitmaps = self.peer_bitmaps(&superblock)?;
        let updates = if self.spec.al_enabled {
            AlUpdates::Enabled
        } else {
            AlUpdates::Disabled
        };
        let recovery =
            meta::recover(&self.ring, updates).map_err(|e| corrupt("activity log", e))?;
        // As the daemon: a crashed Primary, and a node with more than one peer that went down
        // uncleanly (every restart here is one), marks its hot extents for every peer.
        let multi_peer = self.spec.peers.len() > 1 && superblock.flags.in_use;
        if crashed_now || multi_peer {
            for entry in &mut bitmaps {
                recovery
                    .mark_out_of_sync(&mut entry.bitmap)
                    .map_err(|e| corrupt("recovered bitmap", e))?;
                self.store_dirty_pages(&superblock, entry);
            }
        }
        if crashed_now {
            superblock.flags.primary_indicator = false;
            superblock.flags.crashed_primary = true;
            self.write_superblock(&superblock)?;
        }
        // As the daemon: an unclean stop (every restart here is one) marks every block for
        // each peer whose bitmap was counting; the first attach sets the flag.
        if superblock.flags.in_use {
            for entry in bitmaps
                .iter_mut()
                .filter(|entry| superblock.counts_for(entry.peer))
            {
                entry.bitmap.set_all();
                self.store_dirty_pages(&superblock, entry);
            }
        } else {
            superblock.flags.in_use = true;
            self.write_superblock(&superblock)?;
        }
        let log = self.format_ring(updates, recovery.next_seq)?;
        let ids = GenerationIds {
            current: superblock.current_uuid,
            bitmap: superblock.bitmap_uuids_by_node_id(),
            history: superblock.history_uuids,
            flags: GenerationFlags {
                crashed_primary,
                ..GenerationFlags::default()
            },
            resync_goal: superblock.resync_goal_uuid,
        };
        let disk = VolumeMeta::attach_disk_state(
            superblock.flags.consistent,
            superblock.flags.was_up_to_date,
        );
        let activity_log = self.spec.al_enabled.then_some(log);
        let possibly_stale = superblock.flags.possibly_stale;
        let departed = VolumeMeta::departed_in(&superblock);
        let followed = VolumeMeta::followed_in(&superblock);
        Ok(VolumeConfig {
            number,
            size_bytes: self.spec.data_bytes,
            ids,
            disk,
            bitmaps,
            crashed_primary,
            unclean: multi_peer && !crashed_now,
            activity_log,
            possibly_stale,
            departed,
            followed,
        })
    }

    /// Each peer's bitmap, for the peers that have a slot.
    fn peer_bitmaps(&self, superblock: &Superblock) -> Result<Vec<PeerBitmap>, SimError> {
        let mut bitmaps = Vec::new();
        for &peer in &self.spec.peers.clone() {
            let Some(slot) = superblock.peer_slot_of(peer) else {
                continue;
            };
            bitmaps.push(PeerBitmap {
                peer,
                bitmap: self.read_bitmap(slot)?,
            });
        }
        Ok(bitmaps)
    }

    /// Formats the activity-log ring empty from `next_seq` on; the log to use.
    fn format_ring(&mut self, updates: AlUpdates, next_seq: u64) -> Result<ActivityLog, SimError> {
        let config = ActivityLogConfig::from_layout(&self.layout, updates);
        self.ring = meta::format_ring(config.al_ring_blocks, config.al_extents, next_seq)
            .map_err(|e| corrupt("ring", e))?;
        ActivityLog::new(
            config,
            next_seq.saturating_add(u64::from(config.al_ring_blocks)),
        )
        .map_err(|e| corrupt("activity log", e))
    }
}
