//! The metadata of a running volume: turns the engine's [`repl::VolumeMeta`] and dirty bitmap
//! pages into superblock and bitmap writes on the volume's [`MetaFile`], and the superblock and
//! bitmaps found at start-up into the engine's [`VolumeConfig`].
//!
//! Invariants:
//! - Every metadata write of a volume is a [`MetaJob`] whose bitmap page images were taken
//!   from the engine under the engine's lock, and jobs are executed one at a time in the order
//!   they were taken (one writer thread per volume, fed under that lock): an older image of a
//!   page never overwrites a newer one.
//! - Within a job, bitmap pages are written and made durable first, then the superblock or
//!   the activity-log transaction, then made durable (`fdatasync`) before the job is reported
//!   done; the engine completes what depends on it only after that (meta crate, write-ordering
//!   rules 1-3).
//! - **Data before metadata:** with external metadata, the data disk's completed writes are
//!   made durable before a job that may evict an activity-log extent or clear bitmap bits
//!   writes anything (`MetaFile::sync_backing`): the data written there must back it, or on a
//!   power loss the data disk's cache would lose writes that the metadata no longer records
//!   as possibly different. A `Persist` job counts as such if it writes the superblock or a
//!   bitmap page in which a bit was cleared (`clears`); an activity-log transaction only if
//!   it evicts (`evicts`). A page whose bits were only set, like a transaction that only makes
//!   extents hot, promises nothing about data already written: a disconnected Primary's
//!   periodic bitmap write-back and a sequential stream do not flush the data disk.
//!   (Internal metadata shares the data file's `fdatasync` either way.)
//! - **Unclean stop:** the superblock's `in_use` flag is durable before the engine runs and is
//!   cleared only by a clean stop ([`MetaJob::Clean`]). Attach that finds it set marks every
//!   block for each peer whose bitmap was counting, durably (a Secondary marks its absent
//!   peers' bits only in memory), so a returning peer is never handed less than it missed.

use std::sync::{Mutex, RwLock, RwLockReadGuard};

use meta::{ActivityLog, ActivityLogConfig, AlUpdates, Recovery, Superblock};
use repl::{GenerationFlags, GenerationIds, IoError, PeerBitmap, VolumeConfig, VolumeMeta};

use crate::metadata::{Grow, MetaFile, MetadataError};

/// Bitmap pages of one peer: `(page index, 4 KiB image)`.
pub(crate) type Pages = Vec<(u64, Vec<u8>)>;

/// One metadata write of a volume, taken from the engine under its lock.
#[derive(Debug)]
pub(crate) enum MetaJob {
    /// Bitmap pages per peer, then (if given) the superblock fields: `PersistMeta`, the
    /// periodic bitmap write-back, shutdown. `clears` if a bit was cleared in one of the pages
    /// ([`repl::BitmapPages::clears`]).
    Persist {
        pages: Vec<(u8, Pages)>,
        meta: Option<Box<VolumeMeta>>,
        clears: bool,
    },
    /// An activity-log transaction (`block` at `offset_bytes` within the ring), after the
    /// bitmap pages `(peer, page, image)` of the extents it evicts; `evicts` if it makes any
    /// extent cold (even one without dirty pages).
    ActivityLog {
        pages: Vec<(u8, u64, Vec<u8>)>,
        offset_bytes: u64,
        block: Vec<u8>,
        evicts: bool,
    },
    /// A clean stop, after the last `Persist` of the bitmaps: the superblock's `in_use` flag
    /// is cleared.
    Clean,
}

impl MetaJob {
    /// Whether the job writes nothing.
    pub(crate) fn is_empty(&self) -> bool {
        matches!(
            self,
            MetaJob::Persist { pages, meta: None, .. } if pages.iter().all(|(_, p)| p.is_empty())
        )
    }

    /// Whether the data disk's completed writes must be durable before the job writes
    /// anything (the module's data-before-metadata rule).
    pub(crate) fn needs_data_sync(&self) -> bool {
        match self {
            MetaJob::Persist { meta, clears, .. } => meta.is_some() || *clears,
            MetaJob::ActivityLog { evicts, .. } => *evicts,
            MetaJob::Clean => true,
        }
    }
}

/// The open metadata of one volume.
pub(crate) struct MetaStore {
    /// Written through a shared reference by every job; replaced only by `resize`'s move
    /// (which holds `written` too, so no job runs meanwhile).
    file: RwLock<MetaFile>,
    /// The superblock as last written; its lock serializes every metadata write.
    written: Mutex<Superblock>,
}

impl std::fmt::Debug for MetaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaStore").finish_non_exhaustive()
    }
}

impl MetaStore {
    pub(crate) fn new(file: MetaFile, superblock: Superblock) -> MetaStore {
        MetaStore {
            file: RwLock::new(file),
            written: Mutex::new(superblock),
        }
    }

    fn file(&self) -> RwLockReadGuard<'_, MetaFile> {
        self.file
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The superblock as last written.
    pub(crate) fn written(&self) -> Superblock {
        self.written
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Bytes of data the volume exports.
    pub(crate) fn data_bytes(&self) -> u64 {
        self.file().layout().data_bytes()
    }

    /// `resize`: the largest data size the backing device gives now (this node's offer).
    pub(crate) fn offer_bytes(&self) -> Result<u64, MetadataError> {
        Ok(self.file().plan_grow(None)?.data_bytes())
    }

    /// `resize`: the layout for exactly `size_bytes` of data on the grown device, and the range
    /// the move must mark out of sync ([`meta::Layout::grow_resync_range`]).
    pub(crate) fn plan_grow(
        &self,
        size_bytes: u64,
        assume_clean: bool,
    ) -> Result<(meta::Layout, Option<(u64, u64)>), String> {
        let file = self.file();
        let offer = file.plan_grow(None).map_err(|e| e.to_string())?;
        let cap = (size_bytes < offer.data_bytes()).then_some(size_bytes);
        let layout = file.plan_grow(cap).map_err(|e| e.to_string())?;
        if layout.data_bytes() != size_bytes {
            return Err(format!(
                "this node's backing device gives {} bytes of data, not the {size_bytes} agreed",
                layout.data_bytes()
            ));
        }
        Ok((
            layout,
            file.layout().grow_resync_range(&layout, assume_clean),
        ))
    }

    /// `resize`: moves the metadata to `layout` with the grown `bitmaps` (crash-safe, see
    /// `metadata/grow.rs`), after every job queued before it (it holds the writer's lock).
    pub(crate) fn grow(
        &self,
        layout: meta::Layout,
        bitmaps: &[PeerBitmap],
    ) -> Result<(), MetadataError> {
        let mut superblock = self
            .written
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut file = self
            .file
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.sync_backing().map_err(|source| MetadataError::Io {
            what: "resize: sync the data disk".into(),
            source,
        })?;
        let by_slot: Vec<(u8, meta::Bitmap)> = bitmaps
            .iter()
            .filter_map(|entry| Some((superblock.peer_slot_of(entry.peer)?, entry.bitmap.clone())))
            .collect();
        let grow = Grow {
            layout,
            superblock: &superblock,
            bitmaps: &by_slot,
        };
        let moved = file.grow(&grow, &mut |_| Ok(()))?;
        *superblock = moved;
        Ok(())
    }

    /// Carry out one job durably (see the module invariants). Called by the volume's one
    /// writer thread, in the order the jobs were taken.
    pub(crate) fn execute(&self, job: &MetaJob) -> Result<(), IoError> {
        let mut superblock = self
            .written
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if job.needs_data_sync() {
            self.file().sync_backing().map_err(io_error)?;
        }
        match job {
            MetaJob::Persist { pages, meta, .. } => {
                let mut wrote = false;
                for (peer, pages) in pages.iter().filter(|(_, pages)| !pages.is_empty()) {
                    let Some(slot) = superblock.peer_slot_of(*peer) else {
                        continue;
                    };
                    self.file()
                        .write_bitmap_pages(slot, pages)
                        .map_err(io_error)?;
                    wrote = true;
                }
                if let Some(meta) = meta {
                    let mut updated = superblock.clone();
                    meta.apply_to(&mut updated);
                    self.file().write_superblock(&updated).map_err(meta_error)?;
                    *superblock = updated;
                    wrote = true;
                }
                if wrote {
                    self.file().sync().map_err(io_error)?;
                }
            }
            MetaJob::ActivityLog {
                pages,
                offset_bytes,
                block,
                ..
            } => {
                for (peer, page, image) in pages {
                    let Some(slot) = superblock.peer_slot_of(*peer) else {
                        continue;
                    };
                    self.file()
                        .write_bitmap_pages(slot, &[(*page, image.clone())])
                        .map_err(io_error)?;
                }
                if !pages.is_empty() {
                    self.file().sync().map_err(io_error)?;
                }
                self.file()
                    .write_al_block(*offset_bytes, block)
                    .map_err(io_error)?;
                self.file().sync().map_err(io_error)?;
            }
            MetaJob::Clean => {
                let mut updated = superblock.clone();
                updated.flags.in_use = false;
                self.file().write_superblock(&updated).map_err(meta_error)?;
                self.file().sync().map_err(io_error)?;
                *superblock = updated;
            }
        }
        Ok(())
    }

    /// The engine's start-up view of the volume: identifiers, disk state, every peer's
    /// bitmap, and a fresh activity log.
    ///
    /// A primary indicator found set means this node crashed as Primary (meta crate, rule 4):
    /// the extents the activity log calls hot (everything, with `al-updates no` or a ring that
    /// cannot be read back) are marked in every peer's bitmap and those pages made durable;
    /// then the superblock is rewritten with the indicator cleared and `crashed_primary` set;
    /// then the ring is formatted empty. Each step is durable before the next, so a crash in
    /// between repeats the recovery rather than losing it.
    ///
    /// An `in_use` flag found set means the node went down uncleanly in any role. With more
    /// than one peer, the hot extents are marked in every peer's bitmap as for a crashed
    /// Primary (a Secondary keeps the extents of replicated writes some peer may lack hot).
    /// And the bits a Secondary marked in memory for absent peers may be lost, so every
    /// peer whose bitmap was counting (a bitmap identifier is set) gets every block marked,
    /// durably. The flag is set (durably) before the engine
    /// runs, and cleared only by a clean stop ([`MetaJob::Clean`]).
    pub(crate) fn volume_config(
        &self,
        number: u16,
        peers: &[u8],
        al_updates: bool,
    ) -> Result<VolumeConfig, MetadataError> {
        let mut superblock = self
            .written
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let crashed_now = superblock.flags.primary_indicator;
        let crashed_primary = crashed_now || superblock.flags.crashed_primary;
        let mut bitmaps = self.peer_bitmaps(&superblock, peers)?;
        let updates = if al_updates {
            AlUpdates::Enabled
        } else {
            AlUpdates::Disabled
        };
        let place = || format!("the activity log of volume {number}");
        let recovery = meta::recover(&self.file().read_al_ring()?, updates).map_err(|source| {
            MetadataError::Corrupt {
                place: place(),
                source,
            }
        })?;
        let in_place = |error: MetadataError| match error {
            MetadataError::Corrupt { source, .. } => MetadataError::Corrupt {
                place: place(),
                source,
            },
            other => other,
        };
        if crashed_now {
            self.recover_crashed_primary(&mut superblock, &recovery, &mut bitmaps, &in_place)?;
        }
        let unclean = superblock.flags.in_use && !crashed_now && peers.len() > 1;
        self.mark_after_unclean_stop(
            &mut superblock,
            crashed_now,
            peers,
            &recovery,
            &mut bitmaps,
            &in_place,
        )?;
        let activity_log = self.format_activity_log(updates, recovery.next_seq, &place)?;
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
        let activity_log = al_updates.then_some(activity_log);
        let possibly_stale = superblock.flags.possibly_stale;
        let departed = VolumeMeta::departed_in(&superblock);
        let followed = VolumeMeta::followed_in(&superblock);
        Ok(VolumeConfig {
            number,
            size_bytes: self.data_bytes(),
            ids,
            disk,
            bitmaps,
            crashed_primary,
            unclean,
            activity_log,
            possibly_stale,
            departed,
            followed,
        })
    }

    /// Each peer's bitmap, for the peers that have a slot.
    fn peer_bitmaps(
        &self,
        superblock: &Superblock,
        peers: &[u8],
    ) -> Result<Vec<PeerBitmap>, MetadataError> {
        let mut bitmaps = Vec::new();
        for &peer in peers {
            let Some(slot) = superblock.peer_slot_of(peer) else {
                continue;
            };
            bitmaps.push(PeerBitmap {
                peer,
                bitmap: self.file().read_bitmap(slot)?,
            });
        }
        Ok(bitmaps)
    }

    /// A crash as Primary: marks the hot extents, then durably clears the indicator and sets
    /// `crashed_primary` (see [`MetaStore::volume_config`]).
    fn recover_crashed_primary(
        &self,
        superblock: &mut Superblock,
        recovery: &Recovery,
        bitmaps: &mut [PeerBitmap],
        in_place: &dyn Fn(MetadataError) -> MetadataError,
    ) -> Result<(), MetadataError> {
        match recovery.full_resync {
            Some(reason) => tracing::warn!(
                "this node crashed as Primary; the activity log cannot say what changed \
                 ({reason:?}): every block will be resynced"
            ),
            None => tracing::warn!(
                "this node crashed as Primary; {} hot activity-log extents (4 MiB each) will be \
                 resynced",
                recovery.hot_extents.len()
            ),
        }
        self.mark_hot_extents(superblock, recovery, bitmaps)
            .map_err(in_place)?;
        superblock.flags.primary_indicator = false;
        superblock.flags.crashed_primary = true;
        self.file().write_superblock(superblock)?;
        self.file().sync().map_err(|source| MetadataError::Io {
            what: "sync after crash recovery".into(),
            source,
        })?;
        Ok(())
    }

    /// An unclean stop found (`in_use` set): marks what the peers may lack; otherwise sets
    /// `in_use` durably (see [`MetaStore::volume_config`]).
    fn mark_after_unclean_stop(
        &self,
        superblock: &mut Superblock,
        crashed_now: bool,
        peers: &[u8],
        recovery: &Recovery,
        bitmaps: &mut [PeerBitmap],
        in_place: &dyn Fn(MetadataError) -> MetadataError,
    ) -> Result<(), MetadataError> {
        if superblock.flags.in_use {
            // A Secondary with more than one peer keeps the extents of unsettled replicated
            // writes hot (repl's `secondary_log`): another Secondary may lack them.
            if !crashed_now && peers.len() > 1 {
                match recovery.full_resync {
                    Some(reason) => tracing::warn!(
                        "this node went down uncleanly; the activity log cannot say which \
                         replicated writes its peers may lack ({reason:?}): every block will be \
                         resynced"
                    ),
                    None if recovery.hot_extents.is_empty() => {}
                    None => tracing::warn!(
                        "this node went down uncleanly; {} hot activity-log extents (4 MiB each) \
                         will be resynced with its peers",
                        recovery.hot_extents.len()
                    ),
                }
                self.mark_hot_extents(superblock, recovery, bitmaps)
                    .map_err(in_place)?;
            }
            self.mark_counting_peers(superblock, bitmaps)?;
        } else {
            superblock.flags.in_use = true;
            self.file().write_superblock(superblock)?;
            self.file().sync().map_err(|source| MetadataError::Io {
                what: "sync the in-use flag".into(),
                source,
            })?;
        }
        Ok(())
    }

    /// Formats the activity-log ring empty from `first_seq` on, durably, and the log to use.
    fn format_activity_log(
        &self,
        updates: AlUpdates,
        first_seq: u64,
        place: &dyn Fn() -> String,
    ) -> Result<ActivityLog, MetadataError> {
        let config = ActivityLogConfig::from_layout(self.file().layout(), updates);
        let ring = meta::format_ring(config.al_ring_blocks, config.al_extents, first_seq).map_err(
            |source| MetadataError::Corrupt {
                place: place(),
                source,
            },
        )?;
        self.file()
            .write_al_ring(&ring)
            .map_err(|source| MetadataError::Io {
                what: "format the activity log".into(),
                source,
            })?;
        self.file().sync().map_err(|source| MetadataError::Io {
            what: "sync the activity log".into(),
            source,
        })?;
        ActivityLog::new(
            config,
            first_seq.saturating_add(u64::from(config.al_ring_blocks)),
        )
        .map_err(|source| MetadataError::Corrupt {
            place: place(),
            source,
        })
    }

    /// After an unclean stop: every block of each counting peer's bitmap, written durably.
    fn mark_counting_peers(
        &self,
        superblock: &Superblock,
        bitmaps: &mut [PeerBitmap],
    ) -> Result<(), MetadataError> {
        for entry in bitmaps
            .iter_mut()
            .filter(|entry| superblock.counts_for(entry.peer))
        {
            tracing::warn!(
                peer = entry.peer,
                "this node went down uncleanly while counting changes for an absent peer: every \
                 block will be resynced to it"
            );
            entry.bitmap.set_all();
            let Some(slot) = superblock.peer_slot_of(entry.peer) else {
                continue;
            };
            let pages: Pages = entry
                .bitmap
                .take_dirty_pages()
                .map(|(page, image)| (page, image.to_vec()))
                .collect();
            self.file()
                .write_bitmap_pages(slot, &pages)
                .map_err(|source| MetadataError::Io {
                    what: "write the bitmap after an unclean stop".into(),
                    source,
                })?;
        }
        self.file().sync().map_err(|source| MetadataError::Io {
            what: "sync the bitmap after an unclean stop".into(),
            source,
        })
    }

    /// After a crash: what the activity log says may differ, set in every peer's bitmap and
    /// written back durably.
    fn mark_hot_extents(
        &self,
        superblock: &Superblock,
        recovery: &Recovery,
        bitmaps: &mut [PeerBitmap],
    ) -> Result<(), MetadataError> {
        for entry in bitmaps.iter_mut() {
            recovery
                .mark_out_of_sync(&mut entry.bitmap)
                .map_err(|source| MetadataError::Corrupt {
                    place: String::new(),
                    source,
                })?;
            let Some(slot) = superblock.peer_slot_of(entry.peer) else {
                continue;
            };
            let pages: Pages = entry
                .bitmap
                .take_dirty_pages()
                .map(|(page, image)| (page, image.to_vec()))
                .collect();
            self.file()
                .write_bitmap_pages(slot, &pages)
                .map_err(|source| MetadataError::Io {
                    what: "write the recovered bitmap".into(),
                    source,
                })?;
        }
        self.file().sync().map_err(|source| MetadataError::Io {
            what: "sync the recovered bitmap".into(),
            source,
        })
    }
}

fn io_error(error: std::io::Error) -> IoError {
    tracing::error!("metadata write failed: {error}");
    if error.raw_os_error() == Some(libc::ENOSPC) {
        IoError::NoSpace
    } else {
        IoError::Io
    }
}

fn meta_error(error: MetadataError) -> IoError {
    tracing::error!("metadata write failed: {error}");
    IoError::Io
}

#[cfg(test)]
mod tests {
    use super::MetaJob;

    fn persist(clears: bool, pages: usize) -> MetaJob {
        let pages = (0..pages)
            .map(|page| (page as u64, vec![0xFF; 4096]))
            .collect();
        MetaJob::Persist {
            pages: vec![(1, pages)],
            meta: None,
            clears,
        }
    }

    #[test]
    fn only_metadata_that_vouches_for_data_waits_for_the_data_flush() {
        assert!(persist(false, 0).is_empty());
        assert!(!persist(false, 0).needs_data_sync());
        assert!(
            !persist(false, 2).needs_data_sync(),
            "pages whose bits were only set promise nothing about data"
        );
        assert!(
            persist(true, 2).needs_data_sync(),
            "a cleared bit says the data is there"
        );
        let meta = repl::VolumeMeta {
            ids: repl::GenerationIds::just_created(),
            disk: repl::DiskState::UpToDate,
            primary: false,
            possibly_stale: false,
            departed: repl::NodeSet::EMPTY,
            followed: None,
        };
        let with_superblock = MetaJob::Persist {
            pages: Vec::new(),
            meta: Some(Box::new(meta)),
            clears: false,
        };
        assert!(with_superblock.needs_data_sync(), "every superblock write");
        let hot_only = MetaJob::ActivityLog {
            pages: Vec::new(),
            offset_bytes: 0,
            block: vec![0; 4096],
            evicts: false,
        };
        assert!(!hot_only.needs_data_sync());
        let evicting = MetaJob::ActivityLog {
            pages: Vec::new(),
            offset_bytes: 0,
            block: vec![0; 4096],
            evicts: true,
        };
        assert!(evicting.needs_data_sync());
    }
}
