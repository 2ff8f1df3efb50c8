//! The states tandem reports, named exactly as DRBD 9 names them (drbd-semantics.md §2).
//!
//! These are plain values shared by the engine, the admin protocol and the status printer.
//! `Display` prints DRBD's spelling; the `code` numbers travel in peer-state messages and must
//! never be reused for another meaning.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! named_states {
    (
        $(#[$meta:meta])* $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $code:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every state, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// DRBD's name of the state.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => stringify!($variant)),+ }
            }

            /// The stable number used on the wire.
            pub fn code(self) -> u8 {
                match self { $($name::$variant => $code),+ }
            }

            /// The state with this wire number, if any.
            pub fn from_code(code: u8) -> Option<$name> {
                match code { $($code => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_states! {
    /// The role of a node for one resource.
    Role {
        /// Serves the export for writing; replicates every write.
        Primary = 1,
        /// Receives replicated writes; its export is closed to clients.
        Secondary = 2,
        /// Not known (a disconnected peer).
        Unknown = 0,
    }
}

named_states! {
    /// The state of a backing disk (local, or a peer's as we see it).
    DiskState {
        /// No backing disk.
        Diskless = 0,
        /// Being attached.
        Attaching = 1,
        /// Being detached.
        Detaching = 2,
        /// Failed after an I/O error.
        Failed = 3,
        /// Waiting for the handshake to decide.
        Negotiating = 4,
        /// Known to be incomplete (a resync target, or never synced).
        Inconsistent = 5,
        /// Consistent but known to miss writes.
        Outdated = 6,
        /// A peer's disk we cannot see.
        DUnknown = 7,
        /// Consistent; whether it is up to date is not known yet.
        Consistent = 8,
        /// Has every write.
        UpToDate = 9,
    }
}

named_states! {
    /// The state of the connection to one peer.
    ConnState {
        /// Not trying to connect (administratively disconnected).
        StandAlone = 0,
        /// Shutting the connection down.
        Disconnecting = 1,
        /// About to try again.
        Unconnected = 2,
        /// The peer did not answer in time.
        Timeout = 3,
        /// The connection broke while sending.
        BrokenPipe = 4,
        /// The connection failed (reset, refused, ping timeout).
        NetworkFailure = 5,
        /// The peer broke the protocol.
        ProtocolError = 6,
        /// Being torn down.
        TearDown = 7,
        /// Trying to connect.
        Connecting = 8,
        /// Connected and handshaken.
        Connected = 9,
    }
}

named_states! {
    /// The replication state of one volume towards one peer.
    ReplState {
        /// Not replicating (no connection).
        Off = 0,
        /// Connected; new writes replicate.
        Established = 1,
        /// About to start a resync as source.
        StartingSyncS = 2,
        /// About to start a resync as target.
        StartingSyncT = 3,
        /// Waiting for the bitmap (source side).
        WFBitMapS = 4,
        /// Waiting for the bitmap (target side).
        WFBitMapT = 5,
        /// Waiting for the sync generation identifier.
        WFSyncUUID = 6,
        /// Sending a resync.
        SyncSource = 7,
        /// Receiving a resync.
        SyncTarget = 8,
        /// Online verify, source side.
        VerifyS = 9,
        /// Online verify, target side.
        VerifyT = 10,
        /// Resync paused, source side.
        PausedSyncS = 11,
        /// Resync paused, target side.
        PausedSyncT = 12,
        /// Not shipping data (congestion); marking it out of sync instead.
        Ahead = 13,
        /// The peer of an Ahead node.
        Behind = 14,
    }
}

/// DRBD's replication protocols: where a write completes (drbd-semantics.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Protocol {
    /// Local disk plus the data handed to the TCP send buffer.
    A,
    /// Local disk plus the peer's acknowledgement of receipt.
    B,
    /// Local disk plus the peer's acknowledgement of its disk write.
    C,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::A => "A",
            Protocol::B => "B",
            Protocol::C => "C",
        })
    }
}
