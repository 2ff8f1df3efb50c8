//! NBD error values and the one place where failures become them.
//!
//! Invariant: every error value this crate puts on the wire comes from an [`Errno`], so it is
//! always one the protocol defines (proto.md, "Error values"). Storage failures are mapped by
//! [`Errno::from_io_error`]; requests the server refuses itself are mapped by
//! `Rejection::errno` in the protocol layer, which only picks among these variants.

/// An error value of a reply, with the numbers proto.md assigns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Errno {
    /// `NBD_EPERM`: operation not permitted (a write to a read-only export).
    Perm,
    /// `NBD_EIO`: input/output error.
    Io,
    /// `NBD_ENOMEM`: cannot allocate memory (servers should avoid it).
    NoMem,
    /// `NBD_EINVAL`: invalid argument (bad flags, unknown command, read past the end).
    Inval,
    /// `NBD_ENOSPC`: no space left (a write past the end, or a full disk).
    NoSpc,
    /// `NBD_EOVERFLOW`: value too large.
    Overflow,
    /// `NBD_ENOTSUP`: operation not supported.
    NotSup,
    /// `NBD_ESHUTDOWN`: the server is shutting down; the client must disconnect.
    Shutdown,
}

impl Errno {
    /// The value sent in a reply's error field.
    pub const fn to_wire(self) -> u32 {
        match self {
            Errno::Perm => 1,
            Errno::Io => 5,
            Errno::NoMem => 12,
            Errno::Inval => 22,
            Errno::NoSpc => 28,
            Errno::Overflow => 75,
            Errno::NotSup => 95,
            Errno::Shutdown => 108,
        }
    }

    /// The errno for a wire value, or None for values the protocol does not define (zero, which
    /// means success, included).
    pub const fn from_wire(value: u32) -> Option<Errno> {
        match value {
            1 => Some(Errno::Perm),
            5 => Some(Errno::Io),
            12 => Some(Errno::NoMem),
            22 => Some(Errno::Inval),
            28 => Some(Errno::NoSpc),
            75 => Some(Errno::Overflow),
            95 => Some(Errno::NotSup),
            108 => Some(Errno::Shutdown),
            _ => None,
        }
    }

    /// Maps a storage failure to the NBD error the client should see. Quota and file-size
    /// errors become `ENOSPC` as proto.md asks; anything unrecognised is `EIO`.
    pub fn from_io_error(error: &std::io::Error) -> Errno {
        use std::io::ErrorKind;
        match error.kind() {
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => Errno::Perm,
            ErrorKind::InvalidInput => Errno::Inval,
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
                Errno::NoSpc
            }
            ErrorKind::OutOfMemory => Errno::NoMem,
            ErrorKind::Unsupported => Errno::NotSup,
            _ => Errno::Io,
        }
    }
}

impl From<&std::io::Error> for Errno {
    fn from(error: &std::io::Error) -> Errno {
        Errno::from_io_error(error)
    }
}
