//! The offline metadata commands, `tandem create-md` and `tandem dump-md`: select the volumes
//! of this node in the configuration, then format or read their metadata.
//!
//! Invariants:
//! - `create-md` checks every selected volume (lock, existing metadata, layout) before it
//!   writes any, and holds every lock until it is done: a refusal writes nothing.
//! - Formatting writes the superblock last, after zeroed bitmaps and a formatted ring are
//!   durable, and first destroys an old superblock: a crash part-way leaves no valid
//!   superblock over stale bitmaps.
//! - Without `--force`, `create-md` refuses an area that holds tandem metadata, DRBD's
//!   metadata, or a file-system, swap, LUKS or partition-table signature, naming it.
//! - `dump-md` only reads, under a shared lock, so it is refused while a node runs.

use std::path::PathBuf;

use meta::superblock::SUPERBLOCK_MAGIC;
use meta::{AlUpdates, DumpSources, Layout, LayoutConfig, MetaDump, Superblock, SuperblockFlags};

use super::device::{Access, Area};
use super::{signature, MetaFile, MetaSpec, MetadataError, BLOCK_LEN};

/// The volumes an offline metadata command acts on.
#[derive(Debug, Clone)]
pub struct MdTarget {
    /// The drbd.conf-style configuration file.
    pub config: PathBuf,
    /// This node's `on NAME` section.
    pub node: String,
    /// One resource, or None for every resource with an `on NAME` section for this node.
    pub resource: Option<String>,
}

/// How `create-md` formats.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateOptions {
    /// Overwrite existing tandem metadata.
    pub force: bool,
    /// Peer bitmap slots to reserve (at least the configured peers, at most 31).
    pub max_peers: Option<u8>,
    /// Bytes per bitmap bit (None: 4 KiB).
    pub bitmap_granularity_bytes: Option<u32>,
}

/// The metadata of one volume, as `dump-md` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VolumeDump {
    /// Resource name.
    pub resource: String,
    /// Volume number.
    pub volume: u16,
    /// Where the metadata is, in words ("at the end of /dev/x").
    pub location: String,
    /// The decoded metadata.
    pub metadata: MetaDump,
}

impl VolumeDump {
    /// A `RES/VOL: ...` header line, then the dump's text.
    pub fn render_text(&self) -> String {
        format!(
            "# {}/{}: metadata {}\n{}",
            self.resource,
            self.volume,
            self.location,
            self.metadata.render_text()
        )
    }
}

/// One selected volume.
pub(super) struct Selected {
    pub(super) resource: String,
    pub(super) volume: u16,
    pub(super) spec: MetaSpec,
    al_updates: bool,
    /// The configured peers' names and node ids.
    pub(super) peer_names: Vec<(String, u8)>,
}

impl Selected {
    pub(super) fn name(&self) -> String {
        format!("{}/{}", self.resource, self.volume)
    }

    pub(super) fn error(&self, source: MetadataError) -> MetadataError {
        MetadataError::Volume {
            volume: self.name(),
            source: Box::new(source),
        }
    }
}

/// Format the metadata of every volume `target` selects; `report` gets one line per volume.
pub fn create_md(
    target: &MdTarget,
    options: CreateOptions,
    report: &mut dyn FnMut(&str),
) -> Result<(), MetadataError> {
    let selected = select(target, report)?;
    let mut prepared = Vec::with_capacity(selected.len());
    for volume in &selected {
        prepared.push(prepare_create(volume, options).map_err(|error| volume.error(error))?);
    }
    for (volume, (file, superblock)) in selected.iter().zip(prepared) {
        format(&file, &superblock).map_err(|error| volume.error(error))?;
        let layout = file.layout();
        let placement = match layout.config().placement {
            meta::Placement::Internal => "internal",
            meta::Placement::External { .. } => "external",
        };
        report(&format!(
            "{}: metadata created ({placement}, {} {}; {} of data)",
            volume.name(),
            human_bytes(layout.metadata_bytes()),
            file.area.describe(),
            human_bytes(layout.data_bytes())
        ));
    }
    Ok(())
}

/// Lock, refuse existing metadata without `force`, and compute the new superblock.
fn prepare_create(
    volume: &Selected,
    options: CreateOptions,
) -> Result<(MetaFile, Superblock), MetadataError> {
    let area = Area::open(&volume.spec.disk, &volume.spec.meta_disk, Access::Write)?;
    if !options.force {
        if let Some(found) = existing(&area)? {
            return Err(MetadataError::Exists {
                place: area.describe(),
                found,
            });
        }
        refuse_foreign_data(&area)?;
    }
    let peers = u8::try_from(volume.spec.peers.len()).unwrap_or(u8::MAX);
    let peer_slots = peers
        .max(options.max_peers.unwrap_or(0))
        .max(meta::layout::PEER_SLOTS_MIN);
    let defaults = LayoutConfig::new(area.placement, area.backing_bytes, peer_slots);
    let config = LayoutConfig {
        al_extents: volume.spec.al_extents,
        bitmap_granularity_bytes: options
            .bitmap_granularity_bytes
            .unwrap_or(defaults.bitmap_granularity_bytes),
        ..defaults
    };
    let path = area.path_text();
    let layout = Layout::compute(&config).map_err(|source| MetadataError::Layout {
        path: path.clone(),
        source,
    })?;
    let mut superblock =
        Superblock::new(layout, volume.spec.node_id).map_err(|source| MetadataError::Layout {
            path: path.clone(),
            source,
        })?;
    let mut peer_ids = volume.spec.peers.clone();
    peer_ids.sort_unstable();
    for (slot, peer) in superblock.peers.iter_mut().zip(peer_ids) {
        slot.node_id = Some(peer);
    }
    superblock.flags.al_disabled = !volume.al_updates;
    Ok((MetaFile::over(area, layout), superblock))
}

/// What tandem metadata `area` holds already, in words, or None.
fn existing(area: &Area) -> Result<Option<String>, MetadataError> {
    let Some(block) = area.read_superblock_block()? else {
        return Ok(None);
    };
    if block.get(..SUPERBLOCK_MAGIC.len()) != Some(&SUPERBLOCK_MAGIC[..]) {
        return Ok(None);
    }
    Ok(Some(match Superblock::decode(&block) {
        Ok(superblock) => format!(
            "node-id {}, current UUID {}, flags: {}",
            superblock.node_id,
            meta::superblock::uuid_hex(superblock.current_uuid),
            flag_words(superblock.flags)
        ),
        Err(error) => format!("damaged: {error}"),
    }))
}

/// Refuses an area holding DRBD's metadata where DRBD keeps its superblock, or a file
/// system, swap, LUKS or partition-table signature at the start of what `create-md` writes
/// over (see `signature.rs`). With external metadata that is the metadata device, not the
/// data disk: a file system there is the data tandem will replicate.
fn refuse_foreign_data(area: &Area) -> Result<(), MetadataError> {
    let drbd = area
        .read_superblock_block()?
        .as_deref()
        .and_then(signature::drbd_metadata);
    let found = match drbd {
        Some(what) => Some(format!("{what} {}", area.describe())),
        None => signature::head_signature(&area.read_head(signature::HEAD_BYTES)?),
    };
    match found {
        Some(found) => Err(MetadataError::ForeignData {
            place: area.path_text(),
            found,
        }),
        None => Ok(()),
    }
}

fn flag_words(flags: SuperblockFlags) -> String {
    let words = [
        (flags.consistent, "consistent"),
        (flags.was_up_to_date, "was-up-to-date"),
        (flags.primary_indicator, "primary"),
        (flags.crashed_primary, "crashed-primary"),
        (flags.al_disabled, "al-disabled"),
        (flags.possibly_stale, "possibly-stale"),
        (flags.in_use, "in-use"),
    ];
    let set: Vec<&str> = words
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, word)| *word)
        .collect();
    if set.is_empty() {
        "none".into()
    } else {
        set.join(" ")
    }
}

/// Destroy the old superblock, write zeroed bitmaps and a formatted ring, sync, then write
/// the new superblock and sync.
fn format(file: &MetaFile, superblock: &Superblock) -> Result<(), MetadataError> {
    let io = |what: &str, source| file.io(what, source);
    let layout = file.layout();
    file.area
        .write_at(layout.superblock().offset_bytes, &[0; BLOCK_LEN])
        .map_err(|source| io("cannot clear the superblock", source))?;
    file.sync().map_err(|source| io("cannot sync", source))?;
    file.zero(layout.bitmaps())
        .map_err(|source| io("cannot clear the bitmaps", source))?;
    let al_extents = u16::try_from(layout.config().al_extents).unwrap_or(u16::MAX);
    let ring = meta::format_ring(layout.al_ring_blocks(), al_extents, 0)
        .map_err(|source| file.layout_error(source))?;
    file.write_al_ring(&ring)
        .map_err(|source| io("cannot write the activity log", source))?;
    file.sync().map_err(|source| io("cannot sync", source))?;
    file.write_superblock(superblock)?;
    file.sync().map_err(|source| io("cannot sync", source))
}

/// Read the metadata of every volume `target` selects.
pub fn dump_md(target: &MdTarget) -> Result<Vec<VolumeDump>, MetadataError> {
    let selected = select(target, &mut |_| {})?;
    let mut dumps = Vec::with_capacity(selected.len());
    for volume in &selected {
        let dump = dump_volume(volume).map_err(|error| volume.error(error))?;
        dumps.push(dump);
    }
    Ok(dumps)
}

fn dump_volume(volume: &Selected) -> Result<VolumeDump, MetadataError> {
    let mut area = Area::open(&volume.spec.disk, &volume.spec.meta_disk, Access::Read)?;
    let superblock = area.read_superblock()?;
    let location = area.describe();
    let file = MetaFile::over(area, superblock.layout);
    let mut bitmaps = Vec::with_capacity(superblock.peers.len());
    for slot in 0..superblock.layout.config().peer_slots {
        bitmaps.push(file.read_bitmap(slot)?);
    }
    let ring = file.read_al_ring()?;
    let updates = if superblock.flags.al_disabled {
        AlUpdates::Disabled
    } else {
        AlUpdates::Enabled
    };
    let recovery = meta::recover(&ring, updates).map_err(|source| MetadataError::Corrupt {
        place: format!("the activity log {location}"),
        source,
    })?;
    let metadata = MetaDump::new(DumpSources {
        superblock: &superblock,
        activity_log: Some(&recovery),
        bitmaps: &bitmaps,
    });
    Ok(VolumeDump {
        resource: volume.resource.clone(),
        volume: volume.volume,
        location,
        metadata,
    })
}

/// The volumes of `target.node` in the selected resources; diskless ones are reported and
/// skipped.
pub(super) fn select(
    target: &MdTarget,
    report: &mut dyn FnMut(&str),
) -> Result<Vec<Selected>, MetadataError> {
    let config = config::load(&target.config)?;
    let file = target.config.display();
    let node = &target.node;
    if let Some(name) = &target.resource {
        if !config
            .resources
            .iter()
            .any(|resource| &resource.name == name)
        {
            return Err(MetadataError::Select(format!(
                "'{name}' not defined in {file}"
            )));
        }
    }
    let mut selected = Vec::new();
    let mut any_host = false;
    for resource in &config.resources {
        if target
            .resource
            .as_ref()
            .is_some_and(|name| name != &resource.name)
        {
            continue;
        }
        let Some(host) = resource.host(node) else {
            continue;
        };
        any_host = true;
        let peer_names: Vec<(String, u8)> = resource
            .connections_of(&host.name)
            .filter_map(|connection| resource.host(connection.peer_of(&host.name)?))
            .map(|peer| (peer.name.clone(), peer.node_id))
            .collect();
        let peers: Vec<u8> = peer_names.iter().map(|(_, node_id)| *node_id).collect();
        for volume in &host.volumes {
            let Some(disk) = &volume.disk else {
                report(&format!(
                    "{}/{}: diskless, no metadata",
                    resource.name, volume.number
                ));
                continue;
            };
            let spec = MetaSpec {
                disk: disk.clone(),
                meta_disk: volume.meta_disk.clone(),
                node_id: host.node_id,
                peers: peers.clone(),
                al_extents: volume.disk_options.al_extents,
            };
            selected.push(Selected {
                resource: resource.name.clone(),
                volume: volume.number,
                spec,
                al_updates: volume.disk_options.al_updates,
                peer_names: peer_names.clone(),
            });
        }
    }
    if !any_host {
        let which = target.resource.as_deref().map_or_else(
            || "no resource has an".to_string(),
            |name| format!("resource {name} has no"),
        );
        return Err(MetadataError::Select(format!(
            "{file}: {which} 'on {node}' section; pick the node with --node NAME"
        )));
    }
    Ok(selected)
}

/// `bytes` in the largest binary unit it reaches, with one decimal (rounded down) unless whole:
/// `36 KiB`, `1023.9 MiB`.
pub(super) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut unit_bytes: u128 = 1024;
    let mut unit = UNITS[0];
    for (index, name) in UNITS.iter().enumerate().skip(1) {
        let next = 1u128 << (10 * (index + 1));
        if u128::from(bytes) < next {
            break;
        }
        (unit_bytes, unit) = (next, name);
    }
    let tenths = u128::from(bytes) * 10 / unit_bytes;
    if u128::from(bytes) % unit_bytes == 0 {
        format!("{} {unit}", tenths / 10)
    } else {
        format!("{}.{} {unit}", tenths / 10, tenths % 10)
    }
}
