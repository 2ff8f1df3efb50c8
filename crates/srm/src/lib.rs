//! The Selective Replication Manager (SRM): the pure decision logic that retunes a
//! resource's replication while it runs (issue 5; the idea is seed 000's, the need for it
//! seeds 002 and 004's: protocol C loses most of its IOPS on a 20 ms link, and people tune
//! buffers by hand).
//!
//! # Model
//! Once per `srm-interval` the driver (the daemon) measures the host, every peer link and
//! the write pattern into an [`Observation`] and calls [`Manager::observe`]. The manager
//! runs its rules per peer, in peer order, and returns an [`Outcome`]: [`Decision`]s to apply
//! in order (each with a reason and the [`Measurement`]s behind it, for the event log and
//! `tandem srm status`), and one [`Gate`] per connected peer saying how many more bytes may
//! be admitted before the next observation. Nothing here does I/O or reads a clock; the
//! same observations always give the same decisions. [`procfs`] turns the text of /proc
//! files into the host-wide measurements.
//!
//! Modes ([`Mode`]): `off` decides nothing; `advise` makes the same decisions as `on`, all
//! marked advisory (log them, apply nothing, hold no write back); `on` expects the driver to
//! apply every non-advisory decision before the next observation. When `tandem adjust`
//! turns a manager that was `on` to `advise` or `off` ([`Manager::reconfigure`]), the next
//! observations undo what it applied, with non-advisory decisions: async peers return to
//! the configured protocol, Ahead is left, tuned buffers return to the configured values,
//! and possibly-stale marks are cleared once the peers caught up.
//!
//! # Rules and their defaults
//! **Protocol** (`manager/protocol.rs`, model in `manager/gain.rs`). Going async must earn
//! its risk (issue 29): a peer goes to protocol A only when the link's round trip or the
//! peer — not the local disk, not the client, not a throughput limit — bounds completion
//! time. Two conditions, both for `enter_intervals` (3) consecutive intervals:
//! - the network's share of write latency is at or over `srm-latency-high` (5 ms). That
//!   share is the ping RTT (else TCP's) or the ack latency minus the disk's share (the
//!   peer's reported write latency, else ours), whichever is larger; the ack latency is the
//!   interval's fastest ack when measured, else the mean;
//! - the gain model predicts at least `gain_enter_permille` (1.5×). Model: a synchronous
//!   write completes in `T_sync = Q + max(L, R)` (local write `L` and the unqueued round
//!   trip `R` — the fastest ack — run in parallel; `Q` is everything else: the client's
//!   queueing, the NBD path, queueing behind a full send queue or a busy peer). Async saves
//!   at most `R - L` per write, so `T_async = max(T_sync - (R - L), L)` and the predicted
//!   gain is `T_sync / T_async`. `T_sync` is the measured mean completion time of client
//!   writes, else `max(L, mean ack)`. Queueing is in `T_sync` but not in the saving, because
//!   async replication cannot remove it: once the backlog reaches the lag bound, writes
//!   are admitted as fast as the link drains, the throughput sync already had.
//!
//! So a full send queue on a fast link (fastest ack ≪ completion time: seed 002's 0 ms case
//! with 1 MiB QD8 writes) predicts ~1× and stays synchronous whatever the fill; a 20 ms
//! link under 4 KiB writes (completion 21 ms, 20 ms of it the round trip) predicts ~20×; a
//! local disk slower than the round trip predicts nothing.
//!
//! Each switch records its predicted gain (the least of its streak) and a baseline (the
//! streak's mean write throughput and completion time). From the second interval after the
//! switch, `verify_intervals` (3) intervals with writes are measured; the observed gain is
//! the larger of the throughput ratio (a closed-loop client turns shorter completions into
//! IOPS) and the completion-time ratio (an open-loop client keeps its rate). At or over
//! `gain_keep_permille` (1.2×) the switch is kept (an [`Action::GainObserved`] report);
//! under it the switch is undone at once (protocol back to the configured one, whatever
//! the dwell: it is the safe direction) and no switch to A is made for
//! `max(srm-min-dwell, srm-interval) × 2^n` after the `n`th undone switch in a row (n
//! capped at 5: at most 32×); a kept switch resets `n`. Both gains appear in the switch
//! and verdict decisions and in [`PeerStatus::last_switch`] (`tandem srm status`). In
//! `advise` mode nothing is applied, so advice is never judged.
//!
//! The peer returns to the configured protocol after `return_intervals` (5) consecutive
//! intervals with latency at or under `srm-latency-low` (2 ms) and the queue at or under
//! `srm-fill-low` (30%); never sooner than `srm-min-dwell` (10 s) after its last switch. Why:
//! a LAN or a same-region link is well under 2 ms (seed 002 measured 1.3 ms between
//! availability zones), so a healthy link never triggers; seed 002's metro links (5–8 ms)
//! and its +20 ms case, where protocol C keeps 41% of its IOPS, do. The 2.5× gap, the
//! streaks and the dwell mean a signal must be clearly and lastingly on one side to move
//! the protocol, so a flapping signal cannot flap it (at most one switch per dwell). A slow
//! local disk raises ack latency but not the network's share, and leaves nothing to gain,
//! so it never sends a peer async. Latency measured while this host's CPU is saturated
//! (busy ≥ 95% or steal ≥ 25%) counts towards async only at twice the enter threshold
//! (the delay may be the host's own); recovery always counts, since returning is the safe
//! direction.
//!
//! **Possibly-stale mark.** Before the first write a peer may miss is acknowledged, the
//! peer must be durably marked possibly-stale (promotion refused without `--force`): the
//! outcome that switches a peer to A (or into Ahead) carries [`Action::MarkPossiblyStale`]
//! first, and the driver must make it durable before applying what follows. The mark is
//! cleared ([`Action::ClearPossiblyStale`]) by an observation taken after the switch back
//! that shows no unreplicated and no out-of-sync bytes, with the peer not Ahead.
//!
//! **Lag gate** (`manager/lag.rs`). While a peer runs protocol A, its unreplicated bytes
//! stay at or under `srm-max-lag-bytes` (64 MiB) — a hard bound — and its oldest
//! unreplicated write younger than `srm-max-lag-time` (2 s), kept by admitting no more than
//! the link drains in that time at the measured goodput and by closing the gate once the
//! oldest write would pass the bound before the next observation. At the bound writes wait;
//! the bound is never broken. Before the bound, the throttle ([`ThrottleCurve`]) slows
//! admission smoothly: past `throttle_start_permille` (50%) of either bound, admission is
//! clocked by the peer's confirmations, each confirmed byte letting in 2× down to 0× new
//! bytes as the backlog nears the bound, so the backlog settles where admission matches
//! the drain (between 50% and 75% of the bound) instead of running into the bound and stopping
//! there (issue 29: the +20 ms runs that collapsed with the backlog at its 64 MiB bound). The
//! engine applies the curve the driver hands it with the bound. Why 64 MiB / 2 s: 64 MiB covers the
//! bandwidth-delay product of a 10 Gbit/s link at 20 ms RTT (25 MB) with room for bursts, and is
//! half a second of a 1 Gbit/s link; 2 s is a hundred round trips at 20 ms, long enough for async
//! to absorb bursts, short enough that the data a failover can lose stays "the last two seconds",
//! an RPO an administrator can state. Both are per connection and meant to be set. With
//! `protocol A` configured the administrator already chose asynchronous replication: the
//! gate bounds its lag too, but the manager does not mark the peer possibly-stale for it
//! (the peer would never be promotable); only Ahead marks such a peer.
//!
//! **Congestion** (`manager/congestion.rs`). With `on-congestion pull-ahead` and an async
//! peer whose in-flight data reaches `congestion-fill`, the peer goes Ahead (data marked
//! out of sync, not shipped) after being marked possibly-stale, and leaves Ahead to resync
//! once the queue drained, no sooner than a hold of `srm-min-dwell`. The hold doubles on
//! every re-entry that comes while the catch-up resync is unfinished or within a minute of
//! leaving (up to 32×), which ends the Ahead/resync loop of LINBIT/drbd issue 46.
//!
//! **Resync bandwidth** (`manager/resync.rs`). A running resync is capped at
//! `srm-resync-share` (50%) of the link's capacity (known, or the measured peak of goodput
//! plus resync), never below `c-min-rate` nor above `c-max-rate`. Half leaves application
//! replication the other half, which is what it needs while the resync runs (seed 000's
//! point that a resync at full NIC speed starves other services).
//!
//! **Buffers** (`manager/buffers.rs`). Large sequential writes (mean ≥ 64 KiB, ≥ 70%
//! sequential) move `max-buffers`, `max-epoch-size` and `sndbuf-size` to their maximum,
//! small writes (mean ≤ 16 KiB) to their minimum, within the configured bounds (defaults
//! 2048–8192 pages, 2048–8192 writes, 128 KiB–2 MiB: seed 000's sweeps found gains up to
//! max-buffers 8000 and a 2 MiB send buffer, and a regression beyond 2 MiB); short memory
//! sends them to the minimum at once.
//!
//! **MTU** (`manager/mtu.rs`). When large writes carry ≥ 70% of the bytes and the
//! replication interface's MTU is under 9000, jumbo frames are advised once. Advice only:
//! host network settings are never changed.
//!
//! # Errors
//! [`SrmError`]: contradictory settings ([`SrmConfig::validate`], also run by
//! [`Manager::new`]) and unparsable /proc text.

mod config;
mod decision;
mod error;
mod manager;
mod observation;
pub mod procfs;

pub use config::*;
pub use decision::{Action, Admit, Decision, Gate, LagBudget, Measurement, Outcome, Value};
pub use error::SrmError;
pub use manager::lag::{
    backlog_share_permille, ThrottleCurve, THROTTLE_ADMIT_PER_ACK_PERMILLE_MAX, THROTTLE_STEPS,
};
pub use manager::{Manager, PeerStatus, SwitchRecord, SwitchVerdict};
pub use observation::*;
