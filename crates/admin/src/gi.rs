//! Generation identifiers as `tandem get-gi` and `show-gi` print them (drbdsetup's verbs).
//!
//! `get-gi` prints one line per volume and peer in drbdsetup's v9 layout:
//! `CURRENT:BITMAP:HIST1:HIST2:` (16 upper-case hex digits each), then seven digits (0/1) for
//! this node's flags and five for the peer's, all separated by colons. The flag order is
//! drbdsetup's: consistent, was-up-to-date, primary, crashed-primary, al-clean, al-disabled,
//! primary-lost-quorum; then peer connected, outdated, fencing, full-sync, seen. `show-gi`
//! prints the same values with a word for each.
//!
//! Invariant: both formats list the records in the order given and print every field of
//! each record; the daemon decides which records (and how tandem's metadata maps onto
//! DRBD's flags, see `daemon::metadata::gi`).

use serde::{Deserialize, Serialize};

/// The generation identifiers one volume of this node keeps about one peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generations {
    /// Resource name.
    pub resource: String,
    /// Volume number.
    pub volume: u16,
    /// The peer's (connection) name.
    pub peer: String,
    /// The peer's node id.
    pub peer_node_id: u8,
    /// The current generation identifier.
    pub current: u64,
    /// The generation when the peer's bitmap started recording (0: none).
    pub bitmap: u64,
    /// The two newest history identifiers, newest first.
    pub history: [u64; 2],
    /// This node's flags.
    pub local: LocalFlags,
    /// What this node records about the peer.
    pub peer_flags: PeerFlags,
}

/// This node's metadata flags, in get-gi's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalFlags {
    /// The data is consistent.
    pub consistent: bool,
    /// The data was UpToDate when last known.
    pub was_up_to_date: bool,
    /// The node is (or was, when it stopped) Primary.
    pub primary: bool,
    /// The node crashed as Primary and has not resynced since.
    pub crashed_primary: bool,
    /// The activity log needs no recovery (the volume was detached cleanly).
    pub al_clean: bool,
    /// `al-updates no`.
    pub al_disabled: bool,
    /// A Primary lost quorum with this metadata (tandem does not record it: always false).
    pub primary_lost_quorum: bool,
}

/// What this node records about one peer, in get-gi's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerFlags {
    /// Connected now.
    pub connected: bool,
    /// The peer's disk is known to be Outdated.
    pub outdated: bool,
    /// Fencing is configured towards the peer.
    pub fencing: bool,
    /// The peer needs a full resync.
    pub full_sync: bool,
    /// The metadata has a bitmap slot for the peer.
    pub seen: bool,
}

impl Generations {
    fn local_digits(&self) -> [bool; 7] {
        let flags = self.local;
        [
            flags.consistent,
            flags.was_up_to_date,
            flags.primary,
            flags.crashed_primary,
            flags.al_clean,
            flags.al_disabled,
            flags.primary_lost_quorum,
        ]
    }

    fn peer_digits(&self) -> [bool; 5] {
        let flags = self.peer_flags;
        [
            flags.connected,
            flags.outdated,
            flags.fencing,
            flags.full_sync,
            flags.seen,
        ]
    }

    /// The get-gi line, without a newline.
    pub fn line(&self) -> String {
        let ids = [self.current, self.bitmap, self.history[0], self.history[1]];
        let digits = self.local_digits().into_iter().chain(self.peer_digits());
        let fields: Vec<String> = ids
            .iter()
            .map(|id| format!("{id:016X}"))
            .chain(digits.map(|on| u8::from(on).to_string()))
            .collect();
        fields.join(":")
    }

    /// The show-gi block: each value with its meaning, then the get-gi line.
    pub fn explained(&self) -> String {
        const LOCAL: [&str; 7] = [
            "consistent",
            "was-up-to-date",
            "primary",
            "crashed-primary",
            "al-clean",
            "al-disabled",
            "lost-quorum",
        ];
        const PEER: [&str; 5] = ["connected", "outdated", "fencing", "full-sync", "seen"];
        let words = |names: &[&str], values: &[bool]| -> String {
            names
                .iter()
                .zip(values)
                .map(|(name, on)| format!("{name}:{}", if *on { "yes" } else { "no" }))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let peer = &self.peer;
        [
            format!(
                "{}/{} with peer {peer} (node-id {})",
                self.resource, self.volume, self.peer_node_id
            ),
            format!(
                "  current  {:016X}  the generation of the data on this node now",
                self.current
            ),
            format!(
                "  bitmap   {:016X}  the generation when this node began recording for {peer} \
                 what it lacks (0: nothing recorded)",
                self.bitmap
            ),
            format!(
                "  history  {:016X}  {:016X}  earlier generations, newest first",
                self.history[0], self.history[1]
            ),
            format!("  local    {}", words(&LOCAL, &self.local_digits())),
            format!("  peer     {}", words(&PEER, &self.peer_digits())),
            format!("  get-gi   {}", self.line()),
        ]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect()
    }
}

/// What `get-gi` prints: one line per record.
pub fn format_get_gi(records: &[Generations]) -> String {
    records
        .iter()
        .map(|record| format!("{}\n", record.line()))
        .collect()
}

/// What `show-gi` prints: one explained block per record, blank lines between them.
pub fn format_show_gi(records: &[Generations]) -> String {
    records
        .iter()
        .map(Generations::explained)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Generations {
        Generations {
            resource: "r0".into(),
            volume: 0,
            peer: "bob".into(),
            peer_node_id: 1,
            current: 0xE54E_3151_3A64_A2EE,
            bitmap: 0,
            history: [0x35BC_9714_2AF7_A8A4, 0],
            local: LocalFlags {
                consistent: true,
                was_up_to_date: true,
                al_clean: true,
                ..LocalFlags::default()
            },
            peer_flags: PeerFlags {
                connected: true,
                seen: true,
                ..PeerFlags::default()
            },
        }
    }

    /// drbdsetup's v9 get-gi layout: four 16-digit upper-case hex UUIDs, seven local flag
    /// digits, five peer flag digits.
    #[test]
    fn get_gi_is_drbdsetups_colon_line() {
        assert_eq!(
            format_get_gi(&[record()]),
            "E54E31513A64A2EE:0000000000000000:35BC97142AF7A8A4:0000000000000000:\
             1:1:0:0:1:0:0:1:0:0:0:1\n"
        );
        let fields = record().line().split(':').count();
        assert_eq!(fields, 4 + 7 + 5);
    }

    #[test]
    fn show_gi_names_every_value() {
        let text = format_show_gi(&[record(), record()]);
        for part in [
            "r0/0 with peer bob (node-id 1)",
            "current  E54E31513A64A2EE",
            "history  35BC97142AF7A8A4  0000000000000000",
            "was-up-to-date:yes",
            "crashed-primary:no",
            "connected:yes",
            "full-sync:no",
            "get-gi   E54E",
        ] {
            assert!(text.contains(part), "{part} missing from\n{text}");
        }
        assert_eq!(
            text.matches("\n\nr0/0").count(),
            1,
            "blocks are separated by one blank line:\n{text}"
        );
    }
}
