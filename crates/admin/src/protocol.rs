//! Admin requests and replies, and their framing as bounded JSON lines.
//!
//! Invariants:
//! - [`encode_line`] output is exactly one JSON value followed by one `\n`; serde_json never
//!   emits a raw newline inside a value, so a line never splits.
//! - [`decode_line`] rejects a line longer than [`LINE_BYTES_MAX`] without parsing it, so a
//!   hostile or broken peer cannot make either side buffer or parse unbounded input.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::gi::Generations;
use crate::report::StatusReport;

/// Longest protocol line, in bytes, trailing newline included.
pub const LINE_BYTES_MAX: usize = 1024 * 1024;

/// What a client asks a node to do. `resource: None` means all resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Report the state of the resources (`tandem status`).
    Status {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Bring resources up: attach the disk and start connecting (`tandem up`).
    Up {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Take resources down: disconnect and detach (`tandem down`).
    Down {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Promote this node (`tandem primary [--force]`).
    Primary {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Promote even without UpToDate data (starts a full sync towards the peers).
        #[serde(default)]
        force: bool,
    },
    /// Demote this node (`tandem secondary [--force]`).
    Secondary {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Demote even with the export open, failing every held or pending write with EIO
        /// (a Primary whose I/O is suspended for want of quorum or by fencing).
        #[serde(default)]
        force: bool,
    },
    /// Start connecting to peers (`tandem connect [--peer NAME]`).
    Connect {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which peer (connection name); `None` = all peers.
        peer: Option<String>,
        /// Lose the next split-brain resolution with these peers (`--discard-my-data`).
        #[serde(default)]
        discard_my_data: bool,
    },
    /// Start a new generation of the data (`tandem new-current-uuid [--clear-bitmap]`);
    /// with `clear_bitmap`, connected peers take it over without a resync (the initial sync
    /// of empty disks skipped).
    NewCurrentUuid {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Clear the bitmaps of connected peers and mark everyone UpToDate.
        #[serde(default)]
        clear_bitmap: bool,
    },
    /// Discard this node's data and resync all of it from a peer (`tandem invalidate`).
    Invalidate {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Discard a peer's data and resync all of it from this node (`tandem
    /// invalidate-remote [--peer NAME]`).
    InvalidateRemote {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which peer (connection name); `None` = all peers.
        peer: Option<String>,
    },
    /// Take the backing disks away: the node goes Diskless and serves through its peers
    /// (`tandem detach`; a Primary needs a connected UpToDate peer).
    Detach {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Attach the backing disks again after a detach or disk failure (`tandem attach`): the
    /// node resyncs what it missed from an UpToDate peer.
    Attach {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Start an online verify against peers (`tandem verify [--peer NAME]`): only digests
    /// cross the wire; blocks found different are marked out of sync.
    Verify {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which peer (connection name); `None` = all peers.
        peer: Option<String>,
    },
    /// Re-read the configuration and apply what changed without dropping connections
    /// (`tandem adjust`); the reply's message lists the changes.
    Adjust {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Leave the connections' options alone (`--skip-net`): only disk options change.
        /// Left out of the line when false, so older nodes understand it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        skip_net: bool,
    },
    /// What the Selective Replication Manager measured and decided (`tandem srm status`);
    /// the reply's message is the text.
    SrmStatus {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Suspend resyncs with peers (`tandem pause-sync [--peer NAME]`): PausedSyncS/T with
    /// `resync-suspended:user` until `resume-sync`.
    PauseSync {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which peer (connection name); `None` = all peers.
        peer: Option<String>,
    },
    /// Let paused resyncs run again (`tandem resume-sync [--peer NAME]`).
    ResumeSync {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which peer (connection name); `None` = all peers.
        peer: Option<String>,
    },
    /// Change connection options at run time (`tandem net-options RES[:PEER] --opt value`):
    /// the ones `adjust` applies live, until the next `adjust`.
    NetOptions {
        /// The resource.
        resource: String,
        /// Only this peer (connection name); `None` = every peer.
        peer: Option<String>,
        /// `(option name, value)` pairs, names without the leading `--`.
        options: Vec<(String, String)>,
    },
    /// Change disk options at run time (`tandem disk-options RES[/VOL] --opt value`):
    /// on-io-error and the resync rate options, until the next `adjust`.
    DiskOptions {
        /// The resource.
        resource: String,
        /// Only this volume; `None` = every volume.
        volume: Option<u16>,
        /// `(option name, value)` pairs, names without the leading `--`.
        options: Vec<(String, String)>,
    },
    /// Forget a peer that is not connected (`tandem forget-peer RES:PEER`, drbdadm's verb):
    /// every block is out of sync for it, so a later connect is a full sync.
    ForgetPeer {
        /// The resource.
        resource: String,
        /// The peer (connection name).
        peer: String,
    },
    /// Mark this node's consistent data Outdated, durably (`tandem outdate`, drbdadm's verb):
    /// refused on a Primary and while connected.
    Outdate {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Freeze client I/O (`tandem suspend-io`, drbdadm's verb): new writes and reads wait,
    /// nothing fails, until `resume-io` (`suspended:user`).
    SuspendIo {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// Grow volumes online after every node's backing device grew (`tandem resize`,
    /// drbdadm's verb): the nodes agree on the smallest size their devices offer (or
    /// `size_bytes` if smaller), move their metadata, and resync the new area (unless
    /// `assume_clean`). The reply's message says the new sizes.
    Resize {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which volume; `None` = every volume.
        volume: Option<u16>,
        /// Grow to at most this many bytes (`--size`); `None` = as large as every node allows.
        size_bytes: Option<u64>,
        /// The new area reads the same on every node (e.g. freshly extended, zeroed files):
        /// it is not resynced.
        assume_clean: bool,
        /// Grow this node alone, asking no peer (only while none is connected): a node that
        /// missed its peers' resize.
        #[serde(default)]
        assume_peer_has_space: bool,
    },
    /// Resume client I/O frozen by `suspend-io` or by fencing (`tandem resume-io`, drbdadm's
    /// verb): fencing freezes it after a `fence-peer` failure under `fencing
    /// resource-and-stonith`.
    ResumeIo {
        /// Which resource; `None` = all.
        resource: Option<String>,
    },
    /// The generation identifiers of a resource's volumes, per peer (`tandem get-gi` and
    /// `show-gi`), answered with [`Reply::Generations`].
    GetGi {
        /// The resource.
        resource: String,
        /// Only this peer (connection name); `None` = every peer.
        peer: Option<String>,
        /// Only this volume; `None` = every volume.
        volume: Option<u16>,
    },
    /// Drop connections to peers (`tandem disconnect [--peer NAME]`).
    Disconnect {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Which peer (connection name); `None` = all peers.
        peer: Option<String>,
    },
    /// Stream `events2` lines (`tandem events [--statistics]`) until the client disconnects.
    Events {
        /// Which resource; `None` = all.
        resource: Option<String>,
        /// Include the statistics counters in the event lines.
        #[serde(default)]
        statistics: bool,
        /// `change` lines carry every field of their object (`--full`); implies
        /// `statistics`. Left out of the line when false, so older nodes understand it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        full: bool,
    },
}

/// What a node answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "kebab-case")]
pub enum Reply {
    /// The request was carried out.
    Ok {
        /// Optional text for the operator.
        message: Option<String>,
    },
    /// The request was refused or failed; the text says why.
    Error {
        /// Text for the operator.
        message: String,
    },
    /// The answer to [`Request::Status`].
    Status(StatusReport),
    /// The answer to [`Request::GetGi`]: per volume, then per peer (sorted by name). A
    /// struct variant: the `reply` tag cannot wrap a bare sequence.
    Generations {
        /// The records.
        records: Vec<Generations>,
    },
    /// One `events2` line (without a newline), streamed after [`Request::Events`].
    Event {
        /// The event line, e.g. `change resource name:r0 role:Primary`.
        line: String,
    },
}

/// Why a protocol line could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The line is longer than [`LINE_BYTES_MAX`]; it was not parsed.
    #[error("admin line of {bytes} bytes exceeds the limit of {LINE_BYTES_MAX} bytes")]
    LineTooLong {
        /// Length of the refused line.
        bytes: usize,
    },
    /// The line is not valid JSON for the expected message type.
    #[error("malformed admin line: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Encodes `value` as one JSON line: compact JSON followed by `\n`.
///
/// # Panics
/// Only if `value`'s `Serialize` impl fails, which the protocol types cannot do (no maps
/// with non-string keys, no custom impls). That would be a bug, not an operating error.
pub fn encode_line<T: Serialize>(value: &T) -> Vec<u8> {
    match serde_json::to_vec(value) {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            bytes
        }
        Err(error) => panic!("admin: a protocol value failed to serialize: {error}"),
    }
}

/// Pretty JSON of `value`, ending in `\n`; panics only as [`encode_line`] does.
pub(crate) fn to_json_pretty<T: Serialize>(value: &T) -> String {
    match serde_json::to_string_pretty(value) {
        Ok(mut text) => {
            text.push('\n');
            text
        }
        Err(error) => panic!("admin: a status report failed to serialize: {error}"),
    }
}

/// Decodes one JSON line; a trailing `\n` (or `\r\n`) is optional.
///
/// Lines longer than [`LINE_BYTES_MAX`] are refused before parsing.
pub fn decode_line<T: DeserializeOwned>(line: &[u8]) -> Result<T, AdminError> {
    if line.len() > LINE_BYTES_MAX {
        return Err(AdminError::LineTooLong { bytes: line.len() });
    }
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    Ok(serde_json::from_slice(line)?)
}

#[cfg(test)]
mod tests;
