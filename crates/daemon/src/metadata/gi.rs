//! Generation identifiers for `get-gi`/`show-gi`, from a superblock: the one a running node
//! holds (with the engine's live identifiers applied) or, with the node stopped, the one on
//! disk.
//!
//! How tandem's metadata maps onto drbdsetup's flags: `al-clean` is the absence of tandem's
//! `in_use` flag (set while a node has the volume attached, cleared by a clean stop);
//! `primary-lost-quorum` is not recorded by tandem (always 0); the peer's `connected` and
//! `fencing` are the running node's view (0 from disk); `seen` means the metadata has a bitmap
//! slot for the peer.
//!
//! Invariant: the records come per volume in the order selected, then per peer sorted by
//! name; a peer filter that matches no configured peer is an error, never an empty answer.

use admin::{Generations, LocalFlags, PeerFlags};
use meta::Superblock;

use super::device::{Access, Area};
use super::offline::{select, MdTarget};
use super::MetadataError;

/// One peer as the generation identifiers are shown for it.
#[derive(Debug, Clone)]
pub(crate) struct GiPeer {
    /// Connection (host) name.
    pub(crate) name: String,
    /// Node id.
    pub(crate) node_id: u8,
    /// Connected now (false from disk).
    pub(crate) connected: bool,
    /// Fencing configured towards it (false from disk).
    pub(crate) fencing: bool,
}

/// Which peers and volumes to show.
#[derive(Debug, Clone, Default)]
pub struct GiFilter {
    /// Only this peer (connection name).
    pub peer: Option<String>,
    /// Only this volume.
    pub volume: Option<u16>,
}

/// The records of one volume for the peers `filter` names (all, sorted by name, without one).
pub(crate) fn volume_generations(
    superblock: &Superblock,
    (resource, volume): (&str, u16),
    peers: &[GiPeer],
    filter: &GiFilter,
) -> Result<Vec<Generations>, String> {
    let mut chosen: Vec<&GiPeer> = peers
        .iter()
        .filter(|peer| filter.peer.as_ref().is_none_or(|name| &peer.name == name))
        .collect();
    if let (Some(name), true) = (&filter.peer, chosen.is_empty()) {
        return Err(format!(
            "resource '{resource}' has no connection named '{name}'"
        ));
    }
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    let flags = superblock.flags;
    let local = LocalFlags {
        consistent: flags.consistent,
        was_up_to_date: flags.was_up_to_date,
        primary: flags.primary_indicator,
        crashed_primary: flags.crashed_primary,
        al_clean: !flags.in_use,
        al_disabled: flags.al_disabled,
        primary_lost_quorum: false,
    };
    let records = chosen.into_iter().map(|peer| {
        let slot = superblock
            .peers
            .iter()
            .find(|slot| slot.node_id == Some(peer.node_id));
        Generations {
            resource: resource.to_string(),
            volume,
            peer: peer.name.clone(),
            peer_node_id: peer.node_id,
            current: superblock.current_uuid,
            bitmap: slot.map_or(0, |slot| slot.bitmap_uuid),
            history: [superblock.history_uuids[0], superblock.history_uuids[1]],
            local,
            peer_flags: PeerFlags {
                connected: peer.connected,
                outdated: slot.is_some_and(|slot| slot.flags.outdated),
                fencing: peer.fencing,
                full_sync: slot.is_some_and(|slot| slot.flags.full_sync),
                seen: slot.is_some(),
            },
        }
    });
    Ok(records.collect())
}

/// The records of one resource read from disk (the node stopped: the metadata is read under
/// a shared lock, refused while a node holds it).
pub fn read_generations(
    target: &MdTarget,
    filter: &GiFilter,
) -> Result<Vec<Generations>, MetadataError> {
    if target.resource.is_none() {
        return Err(MetadataError::Select(
            "get-gi needs one resource name".into(),
        ));
    }
    let selected = select(target, &mut |_| {})?;
    let mut records = Vec::new();
    let mut volume_found = false;
    for volume in selected
        .iter()
        .filter(|volume| filter.volume.is_none_or(|number| volume.volume == number))
    {
        volume_found = true;
        let mut area = Area::open(&volume.spec.disk, &volume.spec.meta_disk, Access::Read)
            .map_err(|error| volume.error(error))?;
        let superblock = area
            .read_superblock()
            .map_err(|error| volume.error(error))?;
        let peers: Vec<GiPeer> = volume
            .peer_names
            .iter()
            .map(|(name, node_id)| GiPeer {
                name: name.clone(),
                node_id: *node_id,
                connected: false,
                fencing: false,
            })
            .collect();
        let found = volume_generations(
            &superblock,
            (&volume.resource, volume.volume),
            &peers,
            filter,
        )
        .map_err(MetadataError::Select)?;
        records.extend(found);
    }
    match (filter.volume, volume_found) {
        (Some(number), false) => Err(MetadataError::Select(format!(
            "no volume {number} with a disk on this node"
        ))),
        _ => Ok(records),
    }
}
