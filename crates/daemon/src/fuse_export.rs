//! The FUSE face of the resources: for every `fuse-mount DIR;` of this node, a FUSE mount at
//! DIR holding one file per volume of the resources that name it (`RES` for volume 0,
//! `RES:N` for volume N), backed by the same exports as NBD (`export::Registry`).
//!
//! Invariants: the files go through `Registry::open`, so a Secondary refuses them as it
//! refuses NBD clients (a permission error, no data), and an open file counts as an open
//! export (the Primary cannot be demoted under it). At shutdown every mount is unmounted
//! before the resources stop; a busy one (a loop device attached, a file open) is left
//! mounted and reported with what to do, never torn away.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use fuse::{ExportFile, FuseError, FuseMount, MountConfig};

use crate::export::{export_name, Registry};
use crate::resource::Resource;

/// Mounts one FUSE export per directory of `mounts` (directory → names of its resources).
/// On an error, the mounts made so far are unmounted again.
pub(crate) fn mount_all(
    mounts: &BTreeMap<PathBuf, Vec<String>>,
    registry: &Arc<Registry>,
) -> Result<Vec<FuseMount>, FuseError> {
    let mut mounted = Vec::with_capacity(mounts.len());
    for (path, names) in mounts {
        let files: Vec<ExportFile> = registry
            .resources
            .iter()
            .filter(|resource| names.contains(&resource.name))
            .flat_map(|resource| files_of(resource))
            .collect();
        let as_registry: Arc<dyn nbd::ExportRegistry> = registry.clone();
        match FuseMount::mount(path, as_registry, files, MountConfig::default()) {
            Ok(mount) => mounted.push(mount),
            Err(error) => {
                unmount_all(mounted);
                return Err(error);
            }
        }
    }
    Ok(mounted)
}

/// The files of one resource: one per volume, sized like its export.
fn files_of(resource: &Resource) -> Vec<ExportFile> {
    let volumes = resource.volumes.iter();
    volumes
        .map(|(number, disk)| ExportFile {
            export: export_name(&resource.name, *number),
            size_bytes: disk.size_bytes(),
        })
        .collect()
}

/// Unmounts every mount; a busy one is logged with what to do and left mounted.
pub(crate) fn unmount_all(mounts: Vec<FuseMount>) {
    for mut mount in mounts {
        match mount.unmount() {
            Ok(()) => {}
            Err(error @ FuseError::Busy { .. }) => {
                tracing::error!(
                    "{error}. The node is stopping, so I/O through it fails from now on"
                );
                mount.leave_mounted();
            }
            Err(error) => {
                tracing::error!("{error}");
                mount.leave_mounted();
            }
        }
    }
}
