//! Automatic split-brain recovery: the `after-sb-0pri`, `after-sb-1pri` and `after-sb-2pri`
//! policies (drbd-semantics.md §1), and manual recovery with `--discard-my-data`.
//!
//! When [`compare`](crate::compare) finds a split brain, both nodes run
//! [`resolve_split_brain`] on the same facts, each from its own side, and must reach
//! complementary answers: one discards its changes (becomes sync target of a bitmap resync),
//! the other keeps them, or both disconnect.
//! Pure logic: no I/O.
//!
//! # Invariants
//! - Mirror: [`resolve_split_brain`] on mirrored facts gives the mirrored resolution. Never
//!   both sides discard, never both keep (checked by a property test). Every tie is broken by
//!   node id, which both sides know and which differ.
//! - A policy that may not decide falls back to [`Resolution::Disconnect`]: data is never
//!   discarded without a rule that chose it.
//! - A primary's data is discarded only by `violently-as0p`, `call-pri-lost-after-sb` (which
//!   asks the engine to demote first) or the administrator's `--discard-my-data`. The engine
//!   still applies `rr-conflict` when a resync would overwrite a Primary.

use crate::state::Role;
use crate::uuid::{NodeId, Side, UUID_PRIMARY};

/// `after-sb-0pri`: split brain detected while neither node is Primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AfterSb0Pri {
    /// Do not recover automatically.
    #[default]
    Disconnect,
    /// Discard the changes of the node that became Primary after the split.
    DiscardYoungerPrimary,
    /// Discard the changes of the node that was Primary when they split.
    DiscardOlderPrimary,
    /// Discard the node that changed nothing; if both changed something, disconnect.
    DiscardZeroChanges,
    /// Discard the node that changed fewer blocks.
    DiscardLeastChanges,
    /// Discard the changes of this node (`discard-node-NAME`, the name resolved to its id).
    DiscardNode(NodeId),
}

/// `after-sb-1pri`: split brain detected while exactly one node is Primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AfterSb1Pri {
    /// Do not recover automatically.
    #[default]
    Disconnect,
    /// Follow `after-sb-0pri` if it discards the Secondary; otherwise disconnect.
    Consensus,
    /// Follow `after-sb-0pri` even if it discards the Primary.
    ViolentlyAs0p,
    /// Discard the Secondary.
    DiscardSecondary,
    /// Follow `after-sb-0pri`; if that discards the Primary, it must demote first or run the
    /// `pri-lost-after-sb` handler.
    CallPriLostAfterSb,
}

/// `after-sb-2pri`: split brain detected while both nodes are Primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AfterSb2Pri {
    /// Do not recover automatically.
    #[default]
    Disconnect,
    /// Follow `after-sb-0pri`.
    ViolentlyAs0p,
    /// Follow `after-sb-0pri`; the discarded Primary must demote first or run the
    /// `pri-lost-after-sb` handler.
    CallPriLostAfterSb,
}

/// The three policies of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SplitBrainPolicies {
    /// `after-sb-0pri`.
    pub zero_primaries: AfterSb0Pri,
    /// `after-sb-1pri`.
    pub one_primary: AfterSb1Pri,
    /// `after-sb-2pri`.
    pub two_primaries: AfterSb2Pri,
}

/// What one side brings to the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SideFacts {
    /// Its node id.
    pub node_id: NodeId,
    /// Its role now.
    pub role: Role,
    /// Blocks it changed since the split: the bits set in its bitmap for the other side.
    pub changed_blocks: u64,
    /// It was connected with `--discard-my-data` (the handshake flag of that name).
    pub discard_my_data: bool,
}

/// Everything [`resolve_split_brain`] needs, from this node's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitBrainFacts {
    /// This node.
    pub local: SideFacts,
    /// The peer.
    pub peer: SideFacts,
    /// Which side became Primary after the split, if that can be told: pass
    /// [`younger_primary`] of the two bitmap identifiers exchanged in the handshake.
    pub younger_primary: Option<Side>,
    /// The handshake's `SplitBrain { auto_recoverable }`: false (history-both) leaves only
    /// manual recovery.
    pub auto_recoverable: bool,
}

impl SplitBrainFacts {
    /// The same facts seen from the peer.
    pub fn mirrored(self) -> SplitBrainFacts {
        SplitBrainFacts {
            local: self.peer,
            peer: self.local,
            younger_primary: self.younger_primary.map(Side::other),
            auto_recoverable: self.auto_recoverable,
        }
    }
}

/// What this node does about the split brain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// Keep both versions; disconnect (run the `split-brain` handler).
    Disconnect,
    /// Discard this node's changes: become sync target of a bitmap resync.
    DiscardLocal,
    /// Keep this node's changes: become sync source; the peer discards its changes.
    DiscardRemote,
    /// Discard this node's changes, but this node is Primary: demote first, and if that is
    /// impossible run the `pri-lost-after-sb` handler; then become sync target.
    CallPriLostAfterSb,
}

impl Resolution {
    /// The peer's resolution given this one (for checks and tests).
    pub fn mirrored(self) -> Resolution {
        match self {
            Resolution::Disconnect => Resolution::Disconnect,
            Resolution::DiscardLocal | Resolution::CallPriLostAfterSb => Resolution::DiscardRemote,
            Resolution::DiscardRemote => Resolution::DiscardLocal,
        }
    }

    /// Whether this node's data is thrown away.
    pub fn discards_local(self) -> bool {
        matches!(
            self,
            Resolution::DiscardLocal | Resolution::CallPriLostAfterSb
        )
    }
}

/// Which side became Primary after the split, told from the bitmap identifiers.
///
/// `local_bitmap` is this node's bitmap identifier for the peer, `peer_bitmap` the peer's for
/// this node, both as exchanged in the handshake. Each is the generation the node held when it
/// started a new one, and bit 0 says whether it was Primary then (see
/// [`GenerationIds::mark_role`](crate::GenerationIds::mark_role)). The side that was not
/// Primary at the split, while the other was, is the younger Primary. `None` when both or
/// neither were.
pub fn younger_primary(local_bitmap: u64, peer_bitmap: u64) -> Option<Side> {
    let local_was_primary = local_bitmap & UUID_PRIMARY != 0;
    let peer_was_primary = peer_bitmap & UUID_PRIMARY != 0;
    match (local_was_primary, peer_was_primary) {
        (false, true) => Some(Side::Local),
        (true, false) => Some(Side::Peer),
        _ => None,
    }
}

/// Decides what this node does about a split brain.
///
/// In order: `--discard-my-data` on exactly one side discards that side (on both, disconnect);
/// a split brain that is not auto-recoverable disconnects; otherwise the policy for the number
/// of Primaries decides.
pub fn resolve_split_brain(facts: &SplitBrainFacts, policies: &SplitBrainPolicies) -> Resolution {
    match (facts.local.discard_my_data, facts.peer.discard_my_data) {
        (true, false) => return Resolution::DiscardLocal,
        (false, true) => return Resolution::DiscardRemote,
        (true, true) => return Resolution::Disconnect,
        (false, false) => {}
    }
    if !facts.auto_recoverable || facts.local.node_id == facts.peer.node_id {
        return Resolution::Disconnect;
    }
    let local_primary = facts.local.role == Role::Primary;
    let peer_primary = facts.peer.role == Role::Primary;
    match (local_primary, peer_primary) {
        (false, false) => zero_primaries(facts, policies.zero_primaries),
        (true, true) => two_primaries(facts, policies),
        _ => one_primary(facts, policies, local_primary),
    }
}

/// `after-sb-0pri`. The younger/older-primary policies fall back to least-changes when the
/// identifiers do not tell who was Primary (as DRBD does); zero-changes does not.
fn zero_primaries(facts: &SplitBrainFacts, policy: AfterSb0Pri) -> Resolution {
    let discard = |side: Side| match side {
        Side::Local => Resolution::DiscardLocal,
        Side::Peer => Resolution::DiscardRemote,
    };
    match policy {
        AfterSb0Pri::Disconnect => Resolution::Disconnect,
        AfterSb0Pri::DiscardYoungerPrimary => facts
            .younger_primary
            .map_or_else(|| least_changes(facts), discard),
        AfterSb0Pri::DiscardOlderPrimary => facts
            .younger_primary
            .map_or_else(|| least_changes(facts), |younger| discard(younger.other())),
        AfterSb0Pri::DiscardZeroChanges => zero_changes(facts),
        AfterSb0Pri::DiscardLeastChanges => least_changes(facts),
        AfterSb0Pri::DiscardNode(node) if node == facts.local.node_id => Resolution::DiscardLocal,
        AfterSb0Pri::DiscardNode(node) if node == facts.peer.node_id => Resolution::DiscardRemote,
        // A node that is not part of this connection: nothing to decide by.
        AfterSb0Pri::DiscardNode(_) => Resolution::Disconnect,
    }
}

/// Discard the side with no changes; both without changes is a tie; both with changes
/// cannot be decided.
fn zero_changes(facts: &SplitBrainFacts) -> Resolution {
    match (facts.local.changed_blocks, facts.peer.changed_blocks) {
        (0, 0) => tie_break(facts),
        (0, _) => Resolution::DiscardLocal,
        (_, 0) => Resolution::DiscardRemote,
        _ => Resolution::Disconnect,
    }
}

/// Discard the side with fewer changes; equal counts are a tie.
fn least_changes(facts: &SplitBrainFacts) -> Resolution {
    use std::cmp::Ordering;
    match facts.local.changed_blocks.cmp(&facts.peer.changed_blocks) {
        Ordering::Less => Resolution::DiscardLocal,
        Ordering::Greater => Resolution::DiscardRemote,
        Ordering::Equal => tie_break(facts),
    }
}

/// An arbitrary rule both sides agree on: the higher node id discards its changes.
fn tie_break(facts: &SplitBrainFacts) -> Resolution {
    if facts.local.node_id > facts.peer.node_id {
        Resolution::DiscardLocal
    } else {
        Resolution::DiscardRemote
    }
}

/// `after-sb-1pri`; `local_primary` says which side is the Primary.
fn one_primary(
    facts: &SplitBrainFacts,
    policies: &SplitBrainPolicies,
    local_primary: bool,
) -> Resolution {
    let as_zero = || zero_primaries(facts, policies.zero_primaries);
    // Whether a resolution throws away the Primary's data.
    let discards_primary = |resolution: Resolution| match resolution {
        Resolution::Disconnect => false,
        Resolution::DiscardLocal | Resolution::CallPriLostAfterSb => local_primary,
        Resolution::DiscardRemote => !local_primary,
    };
    match policies.one_primary {
        AfterSb1Pri::Disconnect => Resolution::Disconnect,
        AfterSb1Pri::Consensus => {
            let resolution = as_zero();
            if discards_primary(resolution) {
                Resolution::Disconnect
            } else {
                resolution
            }
        }
        AfterSb1Pri::ViolentlyAs0p => as_zero(),
        AfterSb1Pri::DiscardSecondary if local_primary => Resolution::DiscardRemote,
        AfterSb1Pri::DiscardSecondary => Resolution::DiscardLocal,
        AfterSb1Pri::CallPriLostAfterSb => primary_lost(as_zero(), local_primary),
    }
}

/// `after-sb-2pri`.
fn two_primaries(facts: &SplitBrainFacts, policies: &SplitBrainPolicies) -> Resolution {
    let as_zero = || zero_primaries(facts, policies.zero_primaries);
    match policies.two_primaries {
        AfterSb2Pri::Disconnect => Resolution::Disconnect,
        AfterSb2Pri::ViolentlyAs0p => as_zero(),
        AfterSb2Pri::CallPriLostAfterSb => primary_lost(as_zero(), true),
    }
}

/// A resolution that discards a local Primary's data becomes [`Resolution::CallPriLostAfterSb`].
fn primary_lost(resolution: Resolution, local_primary: bool) -> Resolution {
    match resolution {
        Resolution::DiscardLocal if local_primary => Resolution::CallPriLostAfterSb,
        other => other,
    }
}

#[cfg(test)]
mod tests;
