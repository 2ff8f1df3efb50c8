//! What a device holds before `create-md` writes over it: file-system, swap, encryption and
//! partition-table signatures at the start of the area it writes, and DRBD's own metadata
//! where DRBD keeps its superblock. drbdmeta refuses to format over such data without
//! `--force`; so does tandem, naming what it found.
//!
//! Invariants:
//! - Detection is pure: it looks at bytes it is given, and a buffer too short for a
//!   signature's offset simply does not match it (never an index out of range).
//! - More specific signatures are tried first: a GPT disk carries a protective MBR, so GPT is
//!   named before the bare 0x55AA mark.

/// Bytes from the start of an area that [`head_signature`] looks at: btrfs's superblock
/// magic ends at 65,608.
pub(super) const HEAD_BYTES: usize = 68 * 1024;

/// Where DRBD 8 and 9 keep the magic within their metadata superblock (big-endian u32 after
/// the UUIDs, size and flags).
const DRBD_MAGIC_OFFSET: usize = 60;
/// DRBD's superblock magics: 8.x, 8.4 unclean, 9.x.
const DRBD_MAGICS: [(u32, &str); 3] = [
    (0x8374_0267, "DRBD 8 metadata"),
    (0x8374_0268, "DRBD 8.4 metadata (not cleanly detached)"),
    (0x8374_026d, "DRBD 9 metadata"),
];

/// One recognisable signature: `magic` at byte `offset` means `what`.
struct Known {
    offset: usize,
    magic: &'static [u8],
    what: &'static str,
}

/// Most specific first (see the module invariants).
const KNOWN: [Known; 9] = [
    Known {
        offset: 0,
        magic: b"LUKS\xba\xbe",
        what: "a LUKS encrypted volume",
    },
    Known {
        offset: 0,
        magic: b"XFSB",
        what: "an XFS file system",
    },
    Known {
        offset: 1080,
        magic: &[0x53, 0xEF],
        what: "an ext2/ext3/ext4 file system",
    },
    Known {
        offset: 65_600,
        magic: b"_BHRfS_M",
        what: "a btrfs file system",
    },
    Known {
        offset: 4086,
        magic: b"SWAPSPACE2",
        what: "swap space",
    },
    Known {
        offset: 4086,
        magic: b"SWAP-SPACE",
        what: "swap space (old format)",
    },
    Known {
        offset: 512,
        magic: b"EFI PART",
        what: "a GPT partition table",
    },
    Known {
        offset: 510,
        magic: &[0x55, 0xAA],
        what: "an MBR partition table or boot sector",
    },
    Known {
        offset: 0,
        magic: b"TNDMMETA",
        what: "tandem metadata of another layout",
    },
];

const _: () = assert!(65_600 + 8 <= HEAD_BYTES);

/// What the first bytes of an area (`head`, up to [`HEAD_BYTES`]) hold, with where, e.g.
/// "an XFS file system (\"XFSB\" at byte 0)".
pub(super) fn head_signature(head: &[u8]) -> Option<String> {
    KNOWN
        .iter()
        .find(|known| at(head, known.offset, known.magic))
        .map(|known| {
            format!(
                "{} ({} at byte {})",
                known.what,
                shown(known.magic),
                known.offset
            )
        })
}

/// What DRBD metadata a superblock block (4 KiB at DRBD's superblock place) holds, if any.
pub(super) fn drbd_metadata(block: &[u8]) -> Option<&'static str> {
    let bytes = block.get(DRBD_MAGIC_OFFSET..DRBD_MAGIC_OFFSET + 4)?;
    let magic = u32::from_be_bytes(bytes.try_into().ok()?);
    DRBD_MAGICS
        .iter()
        .find(|(known, _)| *known == magic)
        .map(|(_, what)| *what)
}

fn at(head: &[u8], offset: usize, magic: &[u8]) -> bool {
    head.get(offset..offset + magic.len()) == Some(magic)
}

/// A magic as an operator recognises it: quoted text, or hex bytes.
fn shown(magic: &[u8]) -> String {
    if magic
        .iter()
        .all(|byte| byte.is_ascii_graphic() || *byte == b' ')
    {
        format!("\"{}\"", String::from_utf8_lossy(magic))
    } else {
        let hex: Vec<String> = magic.iter().map(|byte| format!("{byte:02X}")).collect();
        format!("0x{}", hex.join(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(offset: usize, magic: &[u8]) -> Vec<u8> {
        let mut head = vec![0; HEAD_BYTES];
        head[offset..offset + magic.len()].copy_from_slice(magic);
        head
    }

    /// The offsets drbdmeta and blkid use (drbd-semantics.md §3 for DRBD's superblock).
    #[test]
    fn each_signature_is_named_with_its_place() {
        let cases: [(usize, &[u8], &str); 9] = [
            (
                1080,
                &[0x53, 0xEF],
                "an ext2/ext3/ext4 file system (0x53EF at byte 1080)",
            ),
            (0, b"XFSB", "an XFS file system (\"XFSB\" at byte 0)"),
            (
                65_600,
                b"_BHRfS_M",
                "a btrfs file system (\"_BHRfS_M\" at byte 65600)",
            ),
            (
                4086,
                b"SWAPSPACE2",
                "swap space (\"SWAPSPACE2\" at byte 4086)",
            ),
            (4086, b"SWAP-SPACE", "swap space (old format)"),
            (
                0,
                b"LUKS\xba\xbe",
                "a LUKS encrypted volume (0x4C554B53BABE at byte 0)",
            ),
            (510, &[0x55, 0xAA], "an MBR partition table"),
            (512, b"EFI PART", "a GPT partition table"),
            (0, b"TNDMMETA", "tandem metadata"),
        ];
        for (offset, magic, expected) in cases {
            let found = head_signature(&with(offset, magic)).unwrap_or_default();
            assert!(found.starts_with(expected), "{expected}: found {found:?}");
        }
        assert_eq!(head_signature(&vec![0; HEAD_BYTES]), None);
    }

    #[test]
    fn gpt_is_named_before_its_protective_mbr() {
        let mut head = with(510, &[0x55, 0xAA]);
        head[512..520].copy_from_slice(b"EFI PART");
        assert!(head_signature(&head)
            .unwrap_or_default()
            .starts_with("a GPT"));
    }

    #[test]
    fn a_short_device_matches_nothing_past_its_end() {
        let head = with(1080, &[0x53, 0xEF]);
        assert_eq!(head_signature(&head[..1081]), None);
        assert!(head_signature(&head[..1082]).is_some());
        assert_eq!(head_signature(&[]), None);
    }

    #[test]
    fn drbd_superblock_magics() {
        for (magic, what) in DRBD_MAGICS {
            let block = with(DRBD_MAGIC_OFFSET, &magic.to_be_bytes());
            assert_eq!(drbd_metadata(&block), Some(what));
        }
        assert_eq!(
            drbd_metadata(&with(DRBD_MAGIC_OFFSET, &0x8374_026du32.to_le_bytes())),
            None
        );
        assert_eq!(drbd_metadata(&[0; 10]), None);
    }
}
