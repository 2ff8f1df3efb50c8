//! `tandem resize` on a running node: the driver's side of the engine's online resize
//! (`repl` `engine/resize.rs`).
//!
//! - `resize` (the admin verb) asks the engine to start with this node's offer (what its
//!   grown backing device gives) and waits, polling with a deadline, for the outcome.
//! - [`Action::ResizeOffer`]: a peer asks what this node's device offers.
//! - [`Action::Grow`]: grow this node's volume. Order: plan the new layout for exactly the
//!   agreed size; take the engine's bitmaps grown to it with the range to resync marked;
//!   move the metadata (crash-safe, `metadata/grow.rs`) with them; widen the data disk (NBD
//!   clients that connect from now on see the new size, and so do the FUSE file and the
//!   `Hello` to peers); only then tell the engine, which then accepts I/O in the new area.
//!
//! Both actions run on a thread of their own: the move reads and writes the metadata (several
//! MiB of bitmaps for a large device), which must not hold up the engine's lock or a runtime
//! worker. The engine meanwhile keeps serving I/O in the old area.

use std::sync::Arc;
use std::time::{Duration, Instant};

use repl::{Action, PeerBitmap, ResizeRequest};

use super::{Payload, Resource};

/// How long `resize` waits for every node to answer and grow.
const RESIZE_WAIT_MAX: Duration = Duration::from_secs(120);
/// How often it looks.
const RESIZE_POLL: Duration = Duration::from_millis(10);

/// The options of `tandem resize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResizeOptions {
    /// `--size`.
    pub(crate) size_max: Option<u64>,
    /// `--assume-clean`.
    pub(crate) assume_clean: bool,
    /// `--assume-peer-has-space`.
    pub(crate) assume_peer_has_space: bool,
}

impl Resource {
    /// `resize` of `volume` (None: every volume, one after the other); the new sizes as text.
    pub(crate) fn resize(
        self: &Arc<Self>,
        volume: Option<u16>,
        options: ResizeOptions,
    ) -> Result<String, String> {
        if self.is_down() {
            return Err("resource is down; run 'tandem up' first".into());
        }
        let numbers: Vec<u16> = match volume {
            Some(number) if self.volumes.iter().any(|(n, _)| *n == number) => vec![number],
            Some(number) => return Err(format!("no volume {number}")),
            None => self.volumes.iter().map(|(n, _)| *n).collect(),
        };
        let mut lines = Vec::new();
        for number in numbers {
            let bytes = self
                .resize_volume(number, options)
                .map_err(|e| format!("volume {number}: {e}"))?;
            lines.push(format!(
                "{}/{number}: grown to {bytes} bytes ({} KiB)",
                self.name,
                bytes / 1024
            ));
        }
        Ok(lines.join("\n"))
    }

    fn resize_volume(self: &Arc<Self>, volume: u16, options: ResizeOptions) -> Result<u64, String> {
        let meta = self
            .metas
            .iter()
            .find(|(n, _)| *n == volume)
            .map(|(_, m)| Arc::clone(m));
        let Some(meta) = meta else {
            return Err("this node has no disk for it; run resize on a node with one".into());
        };
        let offer_bytes = meta.offer_bytes().map_err(|e| e.to_string())?;
        let ResizeOptions {
            size_max,
            assume_clean,
            assume_peer_has_space,
        } = options;
        let request = ResizeRequest {
            volume,
            offer_bytes,
            size_max,
            assume_clean,
            assume_peer_has_space,
        };
        self.step(|engine, _, out| engine.start_resize(request, out))
            .map_err(|e| format!("State change failed: {e}"))?;
        let deadline = Instant::now() + RESIZE_WAIT_MAX;
        loop {
            if let Some(outcome) = self.step(|engine, _, _| engine.take_resize_outcome(volume)) {
                return outcome;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "no outcome after {} s (see the logs of every node)",
                    RESIZE_WAIT_MAX.as_secs()
                ));
            }
            std::thread::sleep(RESIZE_POLL);
        }
    }

    /// Carries out [`Action::ResizeOffer`] or [`Action::Grow`] on a thread of its own.
    pub(super) fn resize_action(self: &Arc<Self>, action: Action<Payload>) {
        let resource = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("{}-resize", self.name))
            .spawn(move || match action {
                Action::ResizeOffer { peer, volume } => {
                    let offer = resource.offer_of(volume);
                    resource.step(|engine, _, out| engine.resize_offer(peer, volume, offer, out));
                }
                Action::Grow {
                    volume,
                    size_bytes,
                    assume_clean,
                } => {
                    let result = resource.grow_volume(volume, size_bytes, assume_clean);
                    match &result {
                        Ok(_) => tracing::info!(
                            resource = %resource.name, volume, size_bytes, assume_clean,
                            "resize: volume grown"
                        ),
                        Err(error) => tracing::error!(
                            resource = %resource.name, volume, size_bytes,
                            "resize: cannot grow: {error}"
                        ),
                    }
                    resource.step(|engine, now, out| engine.grown(now, volume, result, out));
                }
                _ => {}
            });
        if let Err(error) = spawned {
            tracing::error!(resource = %self.name, "resize: cannot start a thread: {error}");
        }
    }

    /// What this node's device offers for `volume`: unbounded without a disk of its own (it
    /// holds no data to grow), 0 if it cannot grow.
    fn offer_of(&self, volume: u16) -> u64 {
        let Some((_, meta)) = self.metas.iter().find(|(n, _)| *n == volume) else {
            return u64::MAX;
        };
        match meta.offer_bytes() {
            Ok(offer) => offer,
            Err(error) => {
                tracing::warn!(
                    resource = %self.name, volume,
                    "resize: this node's device cannot grow: {error}"
                );
                0
            }
        }
    }

    /// The grow itself (see the module comment for the order).
    fn grow_volume(
        self: &Arc<Self>,
        volume: u16,
        size_bytes: u64,
        assume_clean: bool,
    ) -> Result<Vec<PeerBitmap>, String> {
        let Some((_, meta)) = self.metas.iter().find(|(n, _)| *n == volume) else {
            // No disk of its own: only the engine's view grows.
            return self.with_engine(|engine| engine.grown_bitmaps(volume, size_bytes, None));
        };
        if self.with_engine(|engine| engine.is_diskless(volume)) {
            return Err("the disk is detached".into());
        }
        let (layout, resync) = meta.plan_grow(size_bytes, assume_clean)?;
        let bitmaps =
            self.with_engine(|engine| engine.grown_bitmaps(volume, size_bytes, resync))?;
        meta.grow(layout, &bitmaps).map_err(|e| e.to_string())?;
        if let Some(disk) = self.disk(volume) {
            disk.grow_to(size_bytes).map_err(|e| e.to_string())?;
        }
        Ok(bitmaps)
    }
}
