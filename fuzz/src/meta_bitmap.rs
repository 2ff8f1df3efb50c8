//! Fuzz target `meta_bitmap`: the bitmap RLE exchange decoder (a peer's chunks applied on
//! connect) and the on-disk bitmap page loader.
//!
//! Input: the geometry (`granularity` shift byte, `data_bytes: u32`), one mode byte, then
//! records `len: u16, bytes`. Mode bit 1 clear: each record is an RLE chunk; with bit 0 set
//! the harness writes the chunk header (version, granularity, block count, the decoder's
//! position), so the fuzzer spends its time on the runs. Bit 1 set: each record is a page
//! number byte and a page image (zero-padded to 4 KiB) given to `load_page`.
//!
//! Properties: nothing panics; a rejected chunk changes neither the bitmap nor the decoder; an
//! applied chunk reports exactly the blocks it newly set and moves the decoder forward, never
//! past the block count; a complete exchange re-encodes (in chunks of a fuzzed size limit)
//! and decodes into a fresh bitmap with the same runs; a loaded page reads back as loaded.

use meta::bitmap::{BITMAP_PAGE_BYTES, RLE_CHUNK_BYTES_MAX, RLE_CHUNK_BYTES_MIN};
use meta::{Bitmap, RleDecoder};

use crate::input::Input;

/// The RLE chunk format version (`meta::bitmap::rle`'s `RLE_VERSION`).
const RLE_VERSION: u8 = 1;
/// Largest data size the target makes a bitmap for: at most 64 Ki blocks of 4 KiB.
const DATA_BYTES_MAX: u64 = 256 << 20;
/// Records per input, to bound the work.
const RECORD_COUNT_MAX: usize = 256;

/// The target's body.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let granularity_bytes = 4096_u32 << (input.u8() % 9);
    let data_bytes = u64::from(input.u32()) % DATA_BYTES_MAX + 1;
    let mode = input.u8();
    let Ok(mut bitmap) = Bitmap::new(data_bytes, granularity_bytes) else {
        panic!("a bitmap of {data_bytes} bytes at {granularity_bytes} is valid");
    };
    if mode & 2 != 0 {
        return load_pages(&mut input, &mut bitmap);
    }
    let mut decoder = RleDecoder::new(&bitmap);
    for _ in 0..RECORD_COUNT_MAX {
        if input.is_empty() {
            break;
        }
        let len = usize::from(input.u16());
        let mut chunk = Vec::new();
        if mode & 1 != 0 {
            chunk.push(RLE_VERSION);
            chunk.extend_from_slice(&bitmap.granularity_bytes().to_be_bytes());
            chunk.extend_from_slice(&bitmap.block_count().to_be_bytes());
            chunk.extend_from_slice(&decoder.blocks_received().to_be_bytes());
        }
        chunk.extend_from_slice(input.take(len));
        apply_chunk(&mut decoder, &mut bitmap, &chunk);
    }
    if decoder.is_complete() {
        let limit = RLE_CHUNK_BYTES_MIN + usize::from(input.u16()) % RLE_CHUNK_BYTES_MAX;
        round_trip(&bitmap, limit.min(RLE_CHUNK_BYTES_MAX));
    }
}

/// Applies one chunk and checks what it did.
fn apply_chunk(decoder: &mut RleDecoder, bitmap: &mut Bitmap, chunk: &[u8]) {
    let (decoder_before, bitmap_before) = (decoder.clone(), bitmap.clone());
    match decoder.apply(chunk, bitmap) {
        Err(error) => {
            let _ = error.to_string();
            assert_eq!(
                decoder, &decoder_before,
                "a rejected chunk leaves the decoder"
            );
            assert_eq!(bitmap, &bitmap_before, "a rejected chunk leaves the bitmap");
        }
        Ok(newly_set) => {
            let grown = bitmap.count_set_blocks() - bitmap_before.count_set_blocks();
            assert_eq!(newly_set, grown, "newly set blocks are counted exactly");
            assert!(decoder.blocks_received() > decoder_before.blocks_received());
            assert!(decoder.blocks_received() <= bitmap.block_count());
        }
    }
}

/// Encodes `bitmap` and decodes it into a fresh one: the runs must match.
fn round_trip(bitmap: &Bitmap, chunk_bytes_max: usize) {
    let Ok(chunks) = bitmap.rle_chunks(chunk_bytes_max) else {
        panic!("chunk limit {chunk_bytes_max} is valid");
    };
    let Ok(mut copy) = Bitmap::new(bitmap.data_bytes(), bitmap.granularity_bytes()) else {
        panic!("a copy of a valid bitmap is valid");
    };
    let mut decoder = RleDecoder::new(&copy);
    for chunk in chunks {
        assert!(chunk.len() <= chunk_bytes_max, "a chunk respects the limit");
        let applied = decoder.apply(&chunk, &mut copy);
        assert!(applied.is_ok(), "an encoded chunk decodes: {applied:?}");
    }
    assert!(
        decoder.is_complete(),
        "the encoded chunks describe every block"
    );
    assert!(
        bitmap.runs().eq(copy.runs()),
        "the RLE round trip keeps every run"
    );
    assert_eq!(copy.count_set_blocks(), bitmap.count_set_blocks());
}

/// Loads fuzzed page images and reads them back.
fn load_pages(input: &mut Input<'_>, bitmap: &mut Bitmap) {
    for _ in 0..RECORD_COUNT_MAX {
        if input.is_empty() {
            break;
        }
        let page = u64::from(input.u8());
        let len = usize::from(input.u16());
        let mut image = input.take(len).to_vec();
        if mode_pads(len) {
            image.resize(BITMAP_PAGE_BYTES, 0);
        }
        let before = bitmap.clone();
        match bitmap.load_page(page, &image) {
            Ok(()) => {
                assert_eq!(bitmap.page(page), Some(&image[..]), "a page reads back");
                let set: u64 = bitmap.runs().map(|run| run.end - run.start).sum();
                assert_eq!(
                    set,
                    bitmap.count_set_blocks(),
                    "the set count follows the pages"
                );
                assert!(bitmap.runs().all(|run| run.end <= bitmap.block_count()));
            }
            Err(error) => {
                let _ = error.to_string();
                assert_eq!(bitmap, &before, "a refused page changes nothing");
            }
        }
    }
}

/// Short images are padded to a page unless their length says otherwise (a length with bit 15
/// set is kept as is, to reach the length check).
fn mode_pads(len: usize) -> bool {
    len & 0x8000 == 0
}
