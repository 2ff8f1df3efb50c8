//! The digests of `verify-alg` and `csums-alg`: one digest per bitmap block of a range, so
//! only digests cross the wire (online verify) or identical blocks are not sent (csums).
//!
//! Invariant: an algorithm name is checked once at start-up ([`DigestKind::from_name`]); a
//! node never runs with a name it cannot compute, so both ends of a verify either compute the
//! same function or the engine sees digests of different lengths and drops the link.

use sha2::Digest as _;

/// The algorithms tandem computes, by DRBD's (kernel crypto) names.
pub(crate) const DIGEST_NAMES: &[&str] = &["crc32c", "sha1", "sha256", "sha512"];

/// One supported digest algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DigestKind {
    Crc32c,
    Sha1,
    Sha256,
    Sha512,
}

impl DigestKind {
    /// The algorithm of a configured name, or `None` if tandem does not compute it.
    pub(crate) fn from_name(name: &str) -> Option<DigestKind> {
        match name {
            "crc32c" => Some(DigestKind::Crc32c),
            "sha1" => Some(DigestKind::Sha1),
            "sha256" => Some(DigestKind::Sha256),
            "sha512" => Some(DigestKind::Sha512),
            _ => None,
        }
    }

    /// The digests of `data`, one per `block_bytes` (the last block may be shorter),
    /// concatenated.
    pub(crate) fn digest_blocks(self, data: &[u8], block_bytes: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for block in data.chunks(block_bytes.max(1)) {
            match self {
                DigestKind::Crc32c => out.extend_from_slice(&crc32c::crc32c(block).to_le_bytes()),
                DigestKind::Sha1 => out.extend_from_slice(&sha1::Sha1::digest(block)),
                DigestKind::Sha256 => out.extend_from_slice(&sha2::Sha256::digest(block)),
                DigestKind::Sha512 => out.extend_from_slice(&sha2::Sha512::digest(block)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_digest_per_block_of_the_algorithm_s_length() {
        let data = vec![7u8; 3 * 4096];
        for (name, length) in [("crc32c", 4), ("sha1", 20), ("sha256", 32), ("sha512", 64)] {
            let kind = DigestKind::from_name(name).expect("supported");
            let digests = kind.digest_blocks(&data, 4096);
            assert_eq!(digests.len(), 3 * length, "{name}");
            assert_eq!(
                digests[..length],
                digests[length..2 * length],
                "{name}: equal blocks, equal digests"
            );
        }
        assert_eq!(DigestKind::from_name("md5"), None);
    }

    #[test]
    fn a_changed_byte_changes_only_its_block_s_digest() {
        let mut data = vec![0u8; 2 * 4096];
        let before = DigestKind::Sha256.digest_blocks(&data, 4096);
        data[4096 + 9] = 1;
        let after = DigestKind::Sha256.digest_blocks(&data, 4096);
        assert_eq!(before[..32], after[..32]);
        assert_ne!(before[32..], after[32..]);
    }
}
