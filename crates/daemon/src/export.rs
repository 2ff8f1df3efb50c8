//! The NBD face of the resources: one export per volume, named `RES` for volume 0 and `RES/N`
//! for volume N, open for writing only on the Primary.
//!
//! Invariants: a Secondary never opens an export (the client gets `NBD_REP_ERR_POLICY` naming
//! the Primary); every open export is counted in the engine, so the Primary cannot be demoted
//! while a client holds it open; every request is answered exactly once (by the engine's
//! `Complete`, by a read's own completion, or by the completion's drop guard).
//!
//! **Cut-through** (writes of [`STREAM_WRITE_BYTES_MIN`] or more): the write is submitted while
//! its payload still arrives; the local write and every peer send consume it as it fills
//! (`bufpool::Incoming`). It completes only after the whole payload was written locally (and
//! the protocol's peer condition held), so nothing is acknowledged early. A payload that stops
//! arriving fails the local write, which marks its blocks out of sync for every peer (they
//! were sent zero padding for the missing part). The NBD reader that fills the payload also
//! writes it, piece by piece between socket reads (`Disk::piece_writer`): it publishes each
//! piece, yields so the peer senders it woke pass it on, and only then writes it
//! (`Filler::publish`, `Filler::pass_to_sinks`), since the peer's path is the longer one. Only
//! a throttled disk hands the write to an I/O thread, and at most `IO_THREADS - 1` of those
//! wait for arriving payloads (`resource.rs`).

use std::sync::Arc;

use bufpool::Incoming;
use nbd::{Command, Completion, Errno, Export, ExportInfo, ExportRegistry, OpenError, Request};
use repl::{IoError, Op, Role, WriteFlags};

use crate::resource::{Payload, Promoter, Resource};

/// Writes this long or longer are taken while they still arrive: the local write and the
/// peer sends start on the first bytes instead of after the last (cut-through). Smaller
/// writes are read whole first; for them the hand-off would cost more than it saves.
const STREAM_WRITE_BYTES_MIN: usize = 128 * 1024;

/// The one place errors become NBD errnos.
pub(crate) fn errno_of(error: IoError) -> Errno {
    match error {
        IoError::Io => Errno::Io,
        IoError::NoSpace => Errno::NoSpc,
        IoError::NotSupported => Errno::NotSup,
        IoError::Invalid => Errno::Inval,
        IoError::NotWritable => Errno::Perm,
        IoError::Aborted => Errno::Io,
    }
}

/// All resources of this node, as NBD exports.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) resources: Vec<Arc<Resource>>,
}

/// The export name of a volume.
pub(crate) fn export_name(resource: &str, volume: u16) -> String {
    if volume == 0 {
        resource.to_string()
    } else {
        format!("{resource}/{volume}")
    }
}

impl ExportRegistry for Registry {
    fn list(&self) -> Vec<String> {
        let volumes = self
            .resources
            .iter()
            .flat_map(|r| r.volumes.iter().map(|(n, _)| export_name(&r.name, *n)));
        volumes.collect()
    }

    fn open(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        self.open_export(name, true)
    }

    fn open_for_info(&self, name: &str) -> Result<Arc<dyn Export>, OpenError> {
        self.open_export(name, false)
    }

    fn size_now(&self, name: &str) -> Option<u64> {
        self.resources.iter().find_map(|r| {
            let (_, disk) = r
                .volumes
                .iter()
                .find(|(n, _)| export_name(&r.name, *n) == name)?;
            Some(disk.size_bytes())
        })
    }
}

impl Registry {
    /// Opens a volume's export; on a Secondary with `auto-promote yes` (DRBD's default) and
    /// `promote`, the node first becomes Primary, and is demoted again when its last export
    /// closes.
    fn open_export(&self, name: &str, promote: bool) -> Result<Arc<dyn Export>, OpenError> {
        let found = self.resources.iter().find_map(|r| {
            let volume = r
                .volumes
                .iter()
                .find(|(n, _)| export_name(&r.name, *n) == name)?;
            Some((Arc::clone(r), volume.0, volume.1.size_bytes()))
        });
        let Some((resource, volume, size)) = found else {
            return Err(OpenError::Unknown);
        };
        if resource.is_down() {
            return Err(OpenError::Policy(format!(
                "resource {} is down on this node",
                resource.name
            )));
        }
        if promote && resource.options.auto_promote {
            auto_promote(&resource)?;
        }
        let refusal = resource.with_engine(|engine| match engine.role() {
            Role::Primary => None,
            _ => Some(match engine.primary_peer() {
                Some(peer) => format!(
                    "{} is Secondary on this node; the Primary is {peer}",
                    resource.name
                ),
                None => format!(
                    "{} is Secondary on this node and no Primary is connected; run 'tandem \
                     primary {}' on the node that should serve it",
                    resource.name, resource.name
                ),
            }),
        });
        if let Some(message) = refusal {
            return Err(OpenError::Policy(message));
        }
        resource.step(|engine, _, _| engine.export_opened(true));
        Ok(Arc::new(OpenExport {
            resource,
            volume,
            size,
        }))
    }
}

/// `auto-promote`: a Secondary becomes Primary for the opener (refused with the reason when
/// it cannot: a peer is Primary, no quorum, data not UpToDate or possibly stale).
fn auto_promote(resource: &Arc<Resource>) -> Result<(), OpenError> {
    let promoted = resource.promote(repl::Promotion::Normal, Promoter::Opener);
    match promoted {
        Ok(true) => {
            resource
                .auto_promoted
                .store(true, std::sync::atomic::Ordering::Release);
            tracing::info!(
                resource = %resource.name,
                "auto-promote: Primary for the export's opener"
            );
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(error) => Err(OpenError::Policy(format!(
            "{} is Secondary and auto-promote failed: {error}",
            resource.name
        ))),
    }
}

/// One client's handle on a volume; closing it (drop) is counted by the engine.
#[derive(Debug)]
struct OpenExport {
    resource: Arc<Resource>,
    volume: u16,
    size: u64,
}

impl Drop for OpenExport {
    fn drop(&mut self) {
        let resource = &self.resource;
        let demoted = resource.step(|engine, _, out| {
            engine.export_opened(false);
            let last = !engine.is_open()
                && resource
                    .auto_promoted
                    .load(std::sync::atomic::Ordering::Acquire);
            last.then(|| engine.demote(out))
        });
        match demoted {
            Some(Ok(())) => {
                resource
                    .auto_promoted
                    .store(false, std::sync::atomic::Ordering::Release);
                tracing::info!(
                    resource = %resource.name,
                    "auto-promote: the last opener closed the export; Secondary again"
                );
            }
            Some(Err(error)) => {
                tracing::warn!(resource = %resource.name, "auto-promote: cannot demote: {error}")
            }
            None => {}
        }
    }
}

impl Export for OpenExport {
    fn size_now(&self) -> u64 {
        let disk = self
            .resource
            .volumes
            .iter()
            .find(|(n, _)| *n == self.volume);
        disk.map_or(self.size, |(_, disk)| disk.size_bytes().max(self.size))
    }

    fn info(&self) -> ExportInfo {
        ExportInfo {
            size: self.size,
            read_only: false,
            can_flush: true,
            can_fua: true,
            can_trim: true,
            can_write_zeroes: true,
            can_multi_conn: true,
        }
    }

    fn submit(&self, request: Request, completion: Completion) {
        let flags = WriteFlags { fua: request.fua };
        let op = match request.command {
            Command::Read { offset, length } => {
                self.resource.read(self.volume, offset, length, completion);
                return;
            }
            Command::Write { offset, data } => {
                let length = data.len() as u64;
                self.resource.note_write(offset, length);
                Op::Write {
                    offset,
                    length,
                    data: Payload {
                        data: Incoming::from_bytes(data),
                        _permit: None,
                    },
                    flags,
                }
            }
            Command::WriteStreaming { offset, data } => {
                let length = data.len() as u64;
                self.resource.note_write(offset, length);
                Op::Write {
                    offset,
                    length,
                    data: Payload {
                        data,
                        _permit: None,
                    },
                    flags,
                }
            }
            Command::Flush => Op::Flush,
            Command::Trim { offset, length } => Op::Trim {
                offset,
                length: u64::from(length),
                flags,
            },
            Command::WriteZeroes { offset, length, .. } => Op::WriteZeroes {
                offset,
                length: u64::from(length),
                flags,
            },
        };
        self.resource.submit(self.volume, op, completion);
    }

    fn streaming_write_bytes_min(&self) -> Option<usize> {
        Some(STREAM_WRITE_BYTES_MIN)
    }
}
