//! The offline edits of a stopped node's metadata: `outdate` (as drbdmeta's `outdate`) and
//! `wipe-md` (as drbdmeta's `wipe-md`).
//!
//! Invariants:
//! - Both lock every selected volume's metadata exclusively (refused while a node runs the
//!   resource) and check every volume before they write any: a refusal writes nothing.
//! - `outdate` changes one flag (`was_up_to_date` cleared) of consistent metadata and syncs
//!   it; inconsistent data is refused, Outdated data is left as it is.
//! - `wipe-md` overwrites the superblock with zeros and syncs: without it nothing on the
//!   device is tandem metadata any more (the bitmaps and ring left behind are unreadable
//!   without the superblock's layout, and `create-md` formats them anew).

use meta::Superblock;

use super::device::{Access, Area};
use super::offline::{select, MdTarget, Selected};
use super::{MetaFile, MetadataError, BLOCK_LEN};

/// `outdate` with the node stopped: every selected volume's consistent data is marked
/// Outdated on disk; `report` gets one line per volume.
pub fn outdate_md(target: &MdTarget, report: &mut dyn FnMut(&str)) -> Result<(), MetadataError> {
    let opened = open_all(target, report)?;
    if let Some((volume, ..)) = opened
        .iter()
        .find(|(_, _, superblock)| !superblock.flags.consistent)
    {
        let problem =
            "the data is Inconsistent; only consistent data can be marked Outdated".to_string();
        return Err(volume.error(MetadataError::Select(problem)));
    }
    for (volume, area, mut superblock) in opened {
        let was = superblock.flags.was_up_to_date;
        superblock.flags.was_up_to_date = false;
        let place = area.describe();
        let file = MetaFile::over(area, superblock.layout);
        file.write_superblock(&superblock)
            .map_err(|error| volume.error(error))?;
        file.sync()
            .map_err(|source| volume.error(file.io("cannot sync", source)))?;
        let what = if was {
            "marked Outdated"
        } else {
            "already Outdated"
        };
        report(&format!("{}: {what} (metadata {place})", volume.name()));
    }
    Ok(())
}

/// `wipe-md`: the superblock of every selected volume is overwritten with zeros; `report` gets
/// one line per volume. Metadata that is missing is refused (nothing to wipe); damaged
/// metadata is wiped.
pub fn wipe_md(target: &MdTarget, report: &mut dyn FnMut(&str)) -> Result<(), MetadataError> {
    let selected = select(target, report)?;
    let mut opened = Vec::with_capacity(selected.len());
    for volume in &selected {
        let mut area = Area::open(&volume.spec.disk, &volume.spec.meta_disk, Access::Write)
            .map_err(|error| volume.error(error))?;
        match area.read_superblock() {
            Ok(_) | Err(MetadataError::Corrupt { .. }) => opened.push((volume, area)),
            Err(error) => return Err(volume.error(error)),
        }
    }
    for (volume, area) in opened {
        let offset = area.superblock_offset().unwrap_or_default();
        let io = |what: &str, source| {
            volume.error(MetadataError::Io {
                what: format!("{what} {}", area.describe()),
                source,
            })
        };
        area.write_at(offset, &[0; BLOCK_LEN])
            .map_err(|source| io("cannot wipe the superblock", source))?;
        area.sync().map_err(|source| io("cannot sync", source))?;
        report(&format!(
            "{}: metadata wiped ({})",
            volume.name(),
            area.describe()
        ));
    }
    Ok(())
}

/// Every selected volume's metadata, locked for writing and read.
fn open_all(
    target: &MdTarget,
    report: &mut dyn FnMut(&str),
) -> Result<Vec<(Selected, Area, Superblock)>, MetadataError> {
    let selected = select(target, report)?;
    let mut opened = Vec::with_capacity(selected.len());
    for volume in selected {
        let mut area = match Area::open(&volume.spec.disk, &volume.spec.meta_disk, Access::Write) {
            Ok(area) => area,
            Err(error) => return Err(volume.error(error)),
        };
        let superblock = area
            .read_superblock()
            .map_err(|error| volume.error(error))?;
        opened.push((volume, area, superblock));
    }
    Ok(opened)
}
