//! Pull-ahead on congestion (`on-congestion pull-ahead`, issue 5): when a peer under protocol
//! A cannot keep up, the Primary stops shipping writes to it (Ahead), marks them out of sync
//! instead, and resyncs them once the link is quiet again.
//!
//! - **Congested**: the data sent to the peer and not yet confirmed would pass
//!   `congestion-fill`, or the activity log holds `congestion-extents` or more hot extents.
//!   Only a connected peer with protocol A in effect, no handshake or resync running and no
//!   cool-down pending goes Ahead.
//! - **Marked first**: before the first write the peer misses completes, the peer is durably
//!   marked possibly stale (the mark of `lag.rs`, reused): it then refuses promotion without
//!   `--force` until it has caught up. A peer already marked (the manager's protocol A) goes
//!   Ahead at once; otherwise writes keep being shipped until its `StaleMarkAck` arrives.
//! - **Leaving**: once every write shipped before is confirmed and the episode lasted its
//!   dwell time, a new handshake with the peer starts a bitmap resync from this node (equal
//!   current generations with bits: this side is the source). New writes are shipped again
//!   from that moment.
//! - **No endless loop** (LINBIT/drbd issue 46, where Ahead and a restarted resync alternate
//!   for ever and the resync never finishes): a resync started by leaving Ahead runs to its
//!   end — congestion meanwhile holds writes back through `max-buffers` and the lag bound,
//!   it never re-enters Ahead — and the next episode may start only after a cool-down that
//!   doubles with each episode following closely on the previous one (up to
//!   [`COOL_DOWN_MAX`]).
//!
//! Invariants:
//! - A write skipped for an Ahead peer is in that peer's bitmap before it completes, and the
//!   peer is durably marked possibly stale while any such bit is unresolved.
//! - The mark is cleared (through `lag.rs`'s draining) only after the resync that leaving
//!   Ahead started has finished and every write shipped is confirmed.
//!
//! Pull-ahead is DRBD's explicit trade: an Ahead peer is not held to the manager's lag bound.

use std::time::Duration;

use super::*;

/// Shortest Ahead episode: the link gets this long to drain before a resync loads it again.
pub const AHEAD_DWELL_MIN: Duration = Duration::from_secs(1);
/// Longest wait between episodes.
pub const COOL_DOWN_MAX: Duration = Duration::from_secs(60);
/// Episodes starting within this long after the previous one ended count as a streak.
const STREAK_WINDOW: Duration = Duration::from_secs(60);

/// What a congested peer leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CongestionPolicy {
    /// `pull-ahead`: go Ahead (this module).
    PullAhead,
    /// `disconnect`: drop the connection; the reconnect resyncs what was marked meanwhile.
    Disconnect,
}

/// What `on-congestion` watches (None in [`PeerConfig`]: `block`, DRBD's default, where the
/// peer's `max-buffers` simply holds writes back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Congestion {
    /// What congestion leads to.
    pub policy: CongestionPolicy,
    /// Unconfirmed bytes that count as congestion (`congestion-fill`; 0 = not watched).
    pub fill_bytes: u64,
    /// Hot activity-log extents that count as congestion (`congestion-extents`; 0 = not
    /// watched).
    pub extents: u32,
}

/// Where a peer stands with respect to pull-ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum AheadState {
    /// Writes are shipped.
    #[default]
    Calm,
    /// Congested: waiting for the peer's possibly-stale mark to be durable; writes are still
    /// shipped meanwhile.
    Marking,
    /// Writes are not shipped, only marked out of sync.
    Ahead { since: Time },
    /// Left Ahead: the resync of what was skipped runs; no new episode until it is done.
    CatchingUp { ahead_for: Duration },
}

/// The pull-ahead bookkeeping of one peer.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct AheadTrack {
    pub(super) state: AheadState,
    /// Episodes in the current streak (reset when one starts long after the last ended).
    streak: u32,
    /// No new episode before this time.
    cool_until: Time,
    /// The peer told us it is Ahead of this node: this node is Behind (status only).
    pub(super) behind: bool,
}

impl AheadTrack {
    /// Whether writes to this peer are skipped (and marked) rather than shipped.
    pub(super) fn is_ahead(&self) -> bool {
        matches!(self.state, AheadState::Ahead { .. })
    }

    /// Not in an episode nor catching up after one.
    pub(super) fn is_calm(&self) -> bool {
        self.state == AheadState::Calm
    }

    /// A disconnect ends any episode; the bits stay for the next handshake, and the mark
    /// stays on the peer until a Primary clears it after catching it up.
    pub(super) fn connection_lost(&mut self) {
        self.state = AheadState::Calm;
        self.behind = false;
    }
}

impl<P: Clone> Engine<P> {
    /// Before a write of `length` bytes to `volume` is shipped: peers that are congested
    /// start an episode.
    pub(super) fn check_congestion(
        &mut self,
        now: Time,
        volume: u16,
        length: u64,
        out: &mut Vec<Action<P>>,
    ) {
        let hot_extents = self.hot_extents(volume);
        for slot in 0..self.peers.len() {
            let p = &self.peers[slot];
            let Some(congestion) = p.config.congestion else {
                continue;
            };
            let eligible = p.ahead.state == AheadState::Calm
                && now >= p.ahead.cool_until
                && p.protocol == Protocol::A
                && p.connection == ConnState::Connected
                && p.role != Role::Primary
                && p.syncs
                    .iter()
                    .all(|sync| matches!(sync, SyncState::Established));
            if !eligible {
                continue;
            }
            let fill = lag::unreplicated_bytes(p).saturating_add(length);
            let by_fill = congestion.fill_bytes > 0 && fill > congestion.fill_bytes;
            let by_extents = congestion.extents > 0 && hot_extents >= u64::from(congestion.extents);
            if !(by_fill || by_extents) {
                continue;
            }
            match congestion.policy {
                CongestionPolicy::PullAhead => self.start_episode(now, slot, out),
                CongestionPolicy::Disconnect => {
                    let peer = p.config.node_id;
                    let reason = format!(
                        "congested ({fill} bytes unconfirmed, {hot_extents} hot extents): \
                         on-congestion disconnect"
                    );
                    out.push(Action::Disconnect {
                        peer,
                        state: ConnState::NetworkFailure,
                        reason: reason.clone().into(),
                    });
                    self.peer_disconnected(now, peer, ConnState::NetworkFailure, reason, out);
                }
            }
        }
    }

    /// Hot activity-log extents of `volume` (0 without an activity log).
    fn hot_extents(&self, volume: u16) -> u64 {
        self.activity_log(volume).map_or(0, |log| {
            u64::try_from(log.active_count()).unwrap_or(u64::MAX)
        })
    }

    fn start_episode(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        let p = &mut self.peers[slot];
        let long_after = now.0.saturating_sub(p.ahead.cool_until.0) > duration_nanos(STREAK_WINDOW);
        p.ahead.streak = if long_after {
            1
        } else {
            p.ahead.streak.saturating_add(1)
        };
        if p.async_state == lag::AsyncState::Async {
            p.ahead.state = AheadState::Ahead { since: now };
            out.push(Action::SendControl {
                peer: p.config.node_id,
                message: PeerMessage::Ahead { ahead: true },
            });
            out.push(Action::StateChanged);
            return;
        }
        p.ahead.state = AheadState::Marking;
        let peer = p.config.node_id;
        out.push(Action::SendControl {
            peer,
            message: PeerMessage::StaleMark { stale: true },
        });
    }

    /// The peer says it is Ahead of this node (this node is Behind) or no longer. Shown in
    /// status only: what the Primary skips reaches this node through the resync that ends the
    /// episode (a handshake also ends it here).
    pub(super) fn receive_ahead(&mut self, slot: usize, ahead: bool, out: &mut Vec<Action<P>>) {
        let p = &mut self.peers[slot];
        if p.ahead.behind != ahead {
            p.ahead.behind = ahead;
            out.push(Action::StateChanged);
        }
    }

    /// The peer's mark is durable: a pending episode begins. Returns whether it did.
    pub(super) fn ahead_mark_acked(
        &mut self,
        now: Time,
        slot: usize,
        out: &mut Vec<Action<P>>,
    ) -> bool {
        let p = &mut self.peers[slot];
        if p.ahead.state != AheadState::Marking {
            return false;
        }
        if p.async_state != lag::AsyncState::Async {
            // Ours to clear once caught up: lag.rs's draining does it, and waits while an
            // episode or its resync runs.
            p.async_state = lag::AsyncState::Draining { seq: 0 };
        }
        p.ahead.state = AheadState::Ahead { since: now };
        out.push(Action::SendControl {
            peer: p.config.node_id,
            message: PeerMessage::Ahead { ahead: true },
        });
        out.push(Action::StateChanged);
        true
    }

    /// Every tick: an episode whose link drained ends with a resync; a finished resync lets
    /// the mark be cleared and sets the cool-down.
    pub(super) fn ahead_tick(&mut self, now: Time, slot: usize, out: &mut Vec<Action<P>>) {
        match self.peers[slot].ahead.state {
            AheadState::Ahead { since } => {
                let p = &self.peers[slot];
                let ahead_for = Duration::from_nanos(now.0.saturating_sub(since.0));
                if p.transfer_log.is_empty() && ahead_for >= AHEAD_DWELL_MIN {
                    self.peers[slot].ahead.state = AheadState::CatchingUp { ahead_for };
                    let peer = self.peers[slot].config.node_id;
                    out.push(Action::SendControl {
                        peer,
                        message: PeerMessage::Ahead { ahead: false },
                    });
                    for vslot in 0..self.volumes.len() {
                        self.send_handshake(slot, vslot, out);
                    }
                    out.push(Action::StateChanged);
                }
            }
            AheadState::CatchingUp { ahead_for } => {
                let p = &mut self.peers[slot];
                let done = p
                    .syncs
                    .iter()
                    .all(|sync| matches!(sync, SyncState::Established))
                    && p.bitmaps.iter().all(|bitmap| bitmap.count_set_bytes() == 0);
                if done {
                    let shift = p.ahead.streak.min(6);
                    let cool = ahead_for
                        .max(AHEAD_DWELL_MIN)
                        .saturating_mul(1 << shift)
                        .min(COOL_DOWN_MAX);
                    p.ahead.cool_until = Time(now.0.saturating_add(duration_nanos(cool)));
                    p.ahead.state = AheadState::Calm;
                    out.push(Action::StateChanged);
                    self.drain_check(slot, out);
                }
            }
            AheadState::Calm | AheadState::Marking => {}
        }
    }
}

fn duration_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
