//! Compressed write payloads (`async-buffer-compress lz4|zstd`, issue 5): a `Data` frame whose
//! header has [`DATA_FLAG_LZ4`] or [`DATA_FLAG_ZSTD`] carries, as its payload, the
//! uncompressed length (`u32`, big-endian) followed by the compressed bytes.
//!
//! Invariants:
//! - [`decompress`] writes exactly the announced length, at most [`DATA_PAYLOAD_LEN_MAX`],
//!   into a buffer of that length, or fails: a payload that inflates to more or less is an
//!   error, never a partial or overlong write (no decompression bomb gets past the bound).
//! - [`compress`] returns None when compressing does not make the payload smaller, so the
//!   sender then ships it plain.

use crate::kind::DATA_PAYLOAD_LEN_MAX;
use crate::message::{DATA_FLAG_LZ4, DATA_FLAG_ZSTD};
use crate::WireError;

/// Length of the uncompressed-length prefix of a compressed payload.
pub const COMPRESSED_PREFIX_LEN: usize = 4;
/// zstd's level for replication: fast, as lz4 is (the link, not the CPU, is the bottleneck
/// the async buffer exists for, but the Primary's CPU is shared with the application).
const ZSTD_LEVEL: i32 = 1;

/// A payload compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// LZ4 block format.
    Lz4,
    /// Zstandard, one frame.
    Zstd,
}

impl Compression {
    /// The `DataHeader::flags` bit naming this compression.
    pub const fn flag(self) -> u16 {
        match self {
            Compression::Lz4 => DATA_FLAG_LZ4,
            Compression::Zstd => DATA_FLAG_ZSTD,
        }
    }

    /// The compression a header's flags name (None: plain), or an error for both bits set.
    pub const fn from_flags(flags: u16) -> Result<Option<Compression>, WireError> {
        match (flags & DATA_FLAG_LZ4 != 0, flags & DATA_FLAG_ZSTD != 0) {
            (false, false) => Ok(None),
            (true, false) => Ok(Some(Compression::Lz4)),
            (false, true) => Ok(Some(Compression::Zstd)),
            (true, true) => Err(WireError::UnknownDataFlags { flags }),
        }
    }
}

/// `data` compressed with its length prefix, or None if that is not smaller than `data`.
pub fn compress(compression: Compression, data: &[u8]) -> Option<Vec<u8>> {
    let length = u32::try_from(data.len())
        .ok()
        .filter(|&l| l <= DATA_PAYLOAD_LEN_MAX)?;
    let mut out = Vec::with_capacity(data.len() / 2 + COMPRESSED_PREFIX_LEN);
    out.extend_from_slice(&length.to_be_bytes());
    match compression {
        Compression::Lz4 => out.extend_from_slice(&lz4_flex::block::compress(data)),
        Compression::Zstd => out.extend_from_slice(&zstd::bulk::compress(data, ZSTD_LEVEL).ok()?),
    }
    (out.len() < data.len()).then_some(out)
}

/// The uncompressed length a compressed payload announces (checked against the bound).
pub fn uncompressed_len(payload: &[u8]) -> Result<u32, WireError> {
    let prefix =
        payload
            .first_chunk::<COMPRESSED_PREFIX_LEN>()
            .ok_or(WireError::BadCompressedPayload {
                reason: "shorter than its length prefix",
            })?;
    let length = u32::from_be_bytes(*prefix);
    if length > DATA_PAYLOAD_LEN_MAX {
        return Err(WireError::BadCompressedPayload {
            reason: "announces more than the largest payload",
        });
    }
    Ok(length)
}

/// Inflates `payload` into `out`, whose length must be [`uncompressed_len`]'s.
pub fn decompress(
    compression: Compression,
    payload: &[u8],
    out: &mut [u8],
) -> Result<(), WireError> {
    let length = uncompressed_len(payload)?;
    if usize::try_from(length).ok() != Some(out.len()) {
        return Err(WireError::BadCompressedPayload {
            reason: "output buffer of the wrong length",
        });
    }
    let body = &payload[COMPRESSED_PREFIX_LEN..];
    let written = match compression {
        Compression::Lz4 => lz4_flex::block::decompress_into(body, out).map_err(|_| {
            WireError::BadCompressedPayload {
                reason: "invalid lz4 block",
            }
        })?,
        Compression::Zstd => zstd::bulk::decompress_to_buffer(body, out).map_err(|_| {
            WireError::BadCompressedPayload {
                reason: "invalid zstd frame",
            }
        })?,
    };
    if written != out.len() {
        return Err(WireError::BadCompressedPayload {
            reason: "inflates to less than it announces",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(compression: Compression, data: &[u8]) {
        let Some(packed) = compress(compression, data) else {
            return;
        };
        assert!(packed.len() < data.len());
        let length = usize::try_from(uncompressed_len(&packed).expect("length")).expect("fits");
        let mut out = vec![0; length];
        decompress(compression, &packed, &mut out).expect("decompress");
        assert_eq!(out, data);
    }

    #[test]
    fn repetitive_data_shrinks_and_comes_back() {
        let data: Vec<u8> = (0..256 * 1024).map(|i| (i / 512 % 7) as u8).collect();
        for compression in [Compression::Lz4, Compression::Zstd] {
            let packed = compress(compression, &data).expect("compressible");
            assert!(
                packed.len() < data.len() / 10,
                "{compression:?}: {}",
                packed.len()
            );
            round_trip(compression, &data);
        }
    }

    #[test]
    fn bad_payloads_are_errors_not_panics() {
        let data = vec![7u8; 64 * 1024];
        for compression in [Compression::Lz4, Compression::Zstd] {
            let packed = compress(compression, &data).expect("compressible");
            let mut short = vec![0; data.len() - 1];
            assert!(
                decompress(compression, &packed, &mut short).is_err(),
                "wrong output length"
            );
            let mut lying = packed.clone();
            lying[..4]
                .copy_from_slice(&(u32::try_from(data.len()).expect("fits") + 1).to_be_bytes());
            let mut out = vec![0; data.len() + 1];
            assert!(
                decompress(compression, &lying, &mut out).is_err(),
                "inflates to less than announced"
            );
            let mut bomb = packed.clone();
            bomb[..4].copy_from_slice(&u32::MAX.to_be_bytes());
            assert!(uncompressed_len(&bomb).is_err(), "over the bound");
            assert!(uncompressed_len(&[1, 2]).is_err());
        }
    }

    #[test]
    fn incompressible_data_is_sent_plain() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let data: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()[0]
            })
            .collect();
        assert_eq!(compress(Compression::Lz4, &data), None);
    }

    #[test]
    fn flags_name_one_compression_at_most() {
        assert_eq!(Compression::from_flags(0).ok(), Some(None));
        assert_eq!(
            Compression::from_flags(DATA_FLAG_LZ4).ok(),
            Some(Some(Compression::Lz4))
        );
        assert_eq!(
            Compression::from_flags(DATA_FLAG_ZSTD).ok(),
            Some(Some(Compression::Zstd))
        );
        assert!(Compression::from_flags(DATA_FLAG_LZ4 | DATA_FLAG_ZSTD).is_err());
    }

    proptest! {
        #[test]
        fn any_payload_round_trips(
            data in proptest::collection::vec(0u8..4, 0..8192),
            zstd in any::<bool>(),
        ) {
            round_trip(if zstd { Compression::Zstd } else { Compression::Lz4 }, &data);
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            payload in proptest::collection::vec(any::<u8>(), 0..512),
            zstd in any::<bool>(),
        ) {
            let compression = if zstd { Compression::Zstd } else { Compression::Lz4 };
            if let Ok(length) = uncompressed_len(&payload) {
                let mut out = vec![0; usize::try_from(length.min(1 << 20)).expect("fits")];
                let _ = decompress(compression, &payload, &mut out);
            }
        }
    }
}
