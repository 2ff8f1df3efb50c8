//! Typed values of the enumerated options (protocol, split-brain policies, ...).
//!
//! Invariant: each enum's `NAMES` is exactly the value list of its option-table row (a test
//! checks), so a word accepted by the parser always converts to a variant.

use std::fmt;

/// Declares a fieldless enum whose variants are spelled as drbd.conf words.
macro_rules! word_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident = $word:literal,)+
        }
        default = $default:ident;
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $name {
            /// Every accepted word, in DRBD's order.
            pub const NAMES: &'static [&'static str] = &[$($word),+];

            /// The drbd.conf spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }

            /// The variant spelled `word`, if any.
            pub fn from_word(word: &str) -> Option<Self> {
                match word {
                    $($word => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::$default
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(self.as_str())
            }
        }
    };
}

word_enum! {
    /// When a write counts as complete (drbd-semantics.md §1).
    pub enum Protocol {
        /// Local disk plus the local TCP send buffer.
        A = "A",
        /// Local disk plus receipt by every peer.
        B = "B",
        /// Local disk plus every peer's disk.
        C = "C",
    }
    default = C;
}

word_enum! {
    /// `global { usage-count }`.
    pub enum UsageCount {
        /// Take part in LINBIT's usage counter (tandem never contacts it).
        Yes = "yes",
        /// Do not take part.
        No = "no",
        /// Ask interactively (drbdadm only).
        Ask = "ask",
    }
    default = Ask;
}

word_enum! {
    /// `on-no-data-accessible`: what I/O does when no up-to-date data is reachable.
    pub enum OnNoDataAccessible {
        /// Fail the I/O.
        IoError = "io-error",
        /// Queue the I/O until data is reachable again.
        SuspendIo = "suspend-io",
    }
    default = IoError;
}

word_enum! {
    /// `on-no-quorum`: what I/O does after quorum is lost.
    pub enum OnNoQuorum {
        /// Fail the I/O.
        IoError = "io-error",
        /// Freeze the I/O until quorum returns.
        SuspendIo = "suspend-io",
    }
    default = SuspendIo;
}

word_enum! {
    /// `on-suspended-primary-outdated`.
    pub enum OnSuspendedPrimaryOutdated {
        /// Disconnect.
        Disconnect = "disconnect",
        /// Demote the suspended primary.
        ForceSecondary = "force-secondary",
    }
    default = Disconnect;
}

word_enum! {
    /// `after-sb-1pri`: split-brain recovery with one primary.
    pub enum AfterSb1Pri {
        /// Do not recover automatically.
        Disconnect = "disconnect",
        /// Follow after-sb-0pri if that discards the secondary, else disconnect.
        Consensus = "consensus",
        /// Always follow after-sb-0pri, even if that discards the primary's data.
        ViolentlyAs0p = "violently-as0p",
        /// Discard the secondary's changes.
        DiscardSecondary = "discard-secondary",
        /// Call the pri-lost-after-sb handler on the primary.
        CallPriLostAfterSb = "call-pri-lost-after-sb",
    }
    default = Disconnect;
}

word_enum! {
    /// `after-sb-2pri`: split-brain recovery with two primaries.
    pub enum AfterSb2Pri {
        /// Do not recover automatically.
        Disconnect = "disconnect",
        /// Follow after-sb-0pri.
        ViolentlyAs0p = "violently-as0p",
        /// Call the pri-lost-after-sb handler.
        CallPriLostAfterSb = "call-pri-lost-after-sb",
    }
    default = Disconnect;
}

word_enum! {
    /// `rr-conflict`: a resync decision that contradicts the nodes' roles.
    pub enum RrConflict {
        /// Disconnect.
        Disconnect = "disconnect",
        /// Disconnect and try again.
        RetryConnect = "retry-connect",
        /// Resync anyway, even into a primary.
        Violently = "violently",
        /// Call the pri-lost handler.
        CallPriLost = "call-pri-lost",
        /// Discard the local data automatically when safe.
        AutoDiscard = "auto-discard",
    }
    default = Disconnect;
}

word_enum! {
    /// `on-congestion`: what to do when the replication link is congested.
    pub enum OnCongestion {
        /// Block application writes.
        Block = "block",
        /// Go Ahead/Behind: keep writing locally and resync later.
        PullAhead = "pull-ahead",
        /// Drop the connection.
        Disconnect = "disconnect",
    }
    default = Block;
}

word_enum! {
    /// tandem only: `srm`, the Selective Replication Manager's mode.
    pub enum Srm {
        /// The manager decides nothing.
        Off = "off",
        /// The manager logs what it would do and changes nothing.
        Advise = "advise",
        /// The manager retunes replication within the configured bounds.
        On = "on",
    }
    default = Off;
}

word_enum! {
    /// tandem only: `async-buffer-compress`, how the async buffer stores what it holds.
    pub enum AsyncBufferCompress {
        /// Uncompressed.
        None = "none",
        /// LZ4: fast, modest ratio.
        Lz4 = "lz4",
        /// Zstandard: slower, better ratio.
        Zstd = "zstd",
    }
    default = None;
}

word_enum! {
    /// `fencing`: what a primary does when it loses its peer.
    pub enum Fencing {
        /// Nothing.
        DontCare = "dont-care",
        /// Call the fence-peer handler.
        ResourceOnly = "resource-only",
        /// Freeze I/O and call the fence-peer handler.
        ResourceAndStonith = "resource-and-stonith",
    }
    default = DontCare;
}

word_enum! {
    /// `on-io-error`: what a local disk error does.
    pub enum OnIoError {
        /// Report the error upwards.
        PassOn = "pass_on",
        /// Call the local-io-error handler.
        CallLocalIoError = "call-local-io-error",
        /// Detach the disk and go diskless.
        Detach = "detach",
    }
    default = Detach;
}

word_enum! {
    /// tandem only: `io`, how the backing device is opened.
    pub enum DiskIo {
        /// Through the page cache.
        Buffered = "buffered",
        /// With `O_DIRECT`: data I/O bypasses the page cache.
        Direct = "direct",
    }
    default = Buffered;
}

word_enum! {
    /// `read-balancing`: where reads are served.
    pub enum ReadBalancing {
        /// Local disk.
        PreferLocal = "prefer-local",
        /// Peer.
        PreferRemote = "prefer-remote",
        /// Alternate.
        RoundRobin = "round-robin",
        /// Whichever has fewer requests pending.
        LeastPending = "least-pending",
        /// The peer when the local disk is congested.
        WhenCongestedRemote = "when-congested-remote",
        /// Stripe by 32 KiB.
        Striping32K = "32K-striping",
        /// Stripe by 64 KiB.
        Striping64K = "64K-striping",
        /// Stripe by 128 KiB.
        Striping128K = "128K-striping",
        /// Stripe by 256 KiB.
        Striping256K = "256K-striping",
        /// Stripe by 512 KiB.
        Striping512K = "512K-striping",
        /// Stripe by 1 MiB.
        Striping1M = "1M-striping",
    }
    default = PreferLocal;
}

/// `after-sb-0pri`: split-brain recovery with no primary.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum AfterSb0Pri {
    /// Do not recover automatically.
    #[default]
    Disconnect,
    /// Discard the changes of the node that became primary last.
    DiscardYoungerPrimary,
    /// Discard the older primary.
    DiscardOlderPrimary,
    /// Discard the node without changes, if exactly one has none.
    DiscardZeroChanges,
    /// Discard the node with fewer changed blocks.
    DiscardLeastChanges,
    /// Discard the named node's changes (`discard-node-NAME`).
    DiscardNode(String),
}

impl AfterSb0Pri {
    /// The accepted words; the last stands for `discard-node-` followed by a host name.
    pub const NAMES: &'static [&'static str] = &[
        "disconnect",
        "discard-younger-primary",
        "discard-older-primary",
        "discard-zero-changes",
        "discard-least-changes",
        "discard-node-NAME",
    ];
    const DISCARD_NODE: &'static str = "discard-node-";

    /// The drbd.conf spelling.
    pub fn as_str(&self) -> String {
        match self {
            Self::Disconnect => "disconnect".to_string(),
            Self::DiscardYoungerPrimary => "discard-younger-primary".to_string(),
            Self::DiscardOlderPrimary => "discard-older-primary".to_string(),
            Self::DiscardZeroChanges => "discard-zero-changes".to_string(),
            Self::DiscardLeastChanges => "discard-least-changes".to_string(),
            Self::DiscardNode(host) => format!("{}{host}", Self::DISCARD_NODE),
        }
    }

    /// The policy spelled `word`, if any.
    pub fn from_word(word: &str) -> Option<Self> {
        match word {
            "disconnect" => Some(Self::Disconnect),
            "discard-younger-primary" => Some(Self::DiscardYoungerPrimary),
            "discard-older-primary" => Some(Self::DiscardOlderPrimary),
            "discard-zero-changes" => Some(Self::DiscardZeroChanges),
            "discard-least-changes" => Some(Self::DiscardLeastChanges),
            _ => word
                .strip_prefix(Self::DISCARD_NODE)
                .filter(|host| !host.is_empty())
                .map(|host| Self::DiscardNode(host.to_string())),
        }
    }
}

/// `quorum` and `quorum-minimum-redundancy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Quorum {
    /// No quorum rule.
    #[default]
    Off,
    /// More than half of the nodes.
    Majority,
    /// Every node.
    All,
    /// At least this many nodes (1..=32).
    Nodes(u8),
}

impl Quorum {
    /// The drbd.conf spelling.
    pub fn as_str(&self) -> String {
        match self {
            Self::Off => "off".to_string(),
            Self::Majority => "majority".to_string(),
            Self::All => "all".to_string(),
            Self::Nodes(count) => count.to_string(),
        }
    }

    /// The rule spelled `word`, if any (numbers are not range-checked here).
    pub fn from_word(word: &str) -> Option<Self> {
        match word {
            "off" => Some(Self::Off),
            "majority" => Some(Self::Majority),
            "all" => Some(Self::All),
            _ => word.parse::<u8>().ok().map(Self::Nodes),
        }
    }
}
