//! Unit tests of the RLE exchange format: chunking, varints and hostile chunks (issue 3 item 3,
//! "bitmaps are exchanged (RLE) and OR-ed"; a hostile peer must not make us panic or allocate).

use super::*;

fn bitmap_with(runs: &[std::ops::Range<u64>]) -> Bitmap {
    let mut bitmap = Bitmap::new(1 << 30, 4096).expect("valid");
    for run in runs {
        bitmap.set_blocks(run.clone()).expect("in range");
    }
    bitmap
}

fn header(block_count: u64, start_block: u64) -> Vec<u8> {
    let mut chunk = vec![RLE_VERSION];
    chunk.extend_from_slice(&4096_u32.to_be_bytes());
    chunk.extend_from_slice(&block_count.to_be_bytes());
    chunk.extend_from_slice(&start_block.to_be_bytes());
    chunk
}

#[test]
fn small_chunks_round_trip() {
    let runs: Vec<_> = (0..200).map(|i| i * 1000..i * 1000 + 1 + i % 7).collect();
    let source = bitmap_with(&runs);
    let chunks: Vec<Vec<u8>> = source.rle_chunks(64).expect("valid limit").collect();
    assert!(chunks.len() > 10, "{} chunks", chunks.len());
    assert!(chunks.iter().all(|chunk| chunk.len() <= 64));
    let mut target = Bitmap::new(1 << 30, 4096).expect("valid");
    let mut decoder = RleDecoder::new(&target);
    let mut newly_set = 0;
    for chunk in &chunks {
        assert!(!decoder.is_complete());
        newly_set += decoder.apply(chunk, &mut target).expect("valid chunk");
    }
    assert!(decoder.is_complete());
    assert_eq!(newly_set, source.count_set_blocks());
    assert_eq!(
        target.runs().collect::<Vec<_>>(),
        source.runs().collect::<Vec<_>>()
    );
}

#[test]
fn all_clear_and_all_set_are_one_tiny_chunk() {
    let clear = bitmap_with(&[]);
    let chunks: Vec<_> = clear.rle_chunks(4096).expect("valid").collect();
    assert_eq!(chunks.len(), 1);
    assert!(chunks[0].len() <= RLE_HEADER_BYTES + 4);
    let mut full = bitmap_with(&[]);
    full.set_all();
    let chunks: Vec<_> = full.rle_chunks(4096).expect("valid").collect();
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        chunks[0][RLE_HEADER_BYTES], 0,
        "zero-length first clear run"
    );
}

#[test]
fn chunk_limit_checked() {
    let bitmap = bitmap_with(&[]);
    assert!(bitmap.rle_chunks(RLE_CHUNK_BYTES_MIN - 1).is_err());
    assert!(bitmap.rle_chunks(RLE_CHUNK_BYTES_MAX + 1).is_err());
}

#[test]
fn varints() {
    for value in [0, 1, 127, 128, 16383, 16384, u64::from(u32::MAX), u64::MAX] {
        let mut buffer = [0; VARINT_BYTES_MAX];
        let used = encode_varint(value, &mut buffer);
        assert_eq!(decode_varint(&buffer[..used]), Ok((value, used)));
    }
    assert!(decode_varint(&[0x80; 11]).is_err(), "over-long");
    assert!(
        decode_varint(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]).is_err(),
        "overflow"
    );
    assert!(decode_varint(&[0x80]).is_err(), "truncated");
}

#[test]
fn hostile_chunks_are_refused_without_changes() {
    let blocks = 262_144;
    let with = |runs: &[u8]| [header(blocks, 0), runs.to_vec()].concat();
    let mut too_long = with(&[0]);
    too_long.resize(RLE_CHUNK_BYTES_MAX + 1, 0);
    let mut bad_version = with(&[0, 1]);
    bad_version[0] = 9;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("short header", header(blocks, 0)[..10].to_vec()),
        ("version", bad_version),
        ("geometry", [header(blocks + 1, 0), vec![0, 1]].concat()),
        ("out of order", [header(blocks, 5), vec![0, 1]].concat()),
        ("no block", with(&[])),
        ("zero run", with(&[0, 0])),
        ("zero set run after clear", with(&[3, 0])),
        ("past the end", with(&[0x80, 0x80, 0x10, 0x01])),
        ("truncated varint", with(&[1, 0x80])),
        ("too long", too_long),
    ];
    for (name, chunk) in cases {
        let mut target = Bitmap::new(1 << 30, 4096).expect("valid");
        let mut decoder = RleDecoder::new(&target);
        assert!(decoder.apply(&chunk, &mut target).is_err(), "{name}");
        assert_eq!(target.count_set_blocks(), 0, "{name}: nothing applied");
        assert_eq!(decoder.blocks_received(), 0, "{name}");
    }
}

#[test]
fn decoder_refuses_a_bitmap_of_another_size() {
    let small = Bitmap::new(1 << 20, 4096).expect("valid");
    let mut big = Bitmap::new(1 << 30, 4096).expect("valid");
    let mut decoder = RleDecoder::new(&small);
    let chunk = small
        .rle_chunks(64)
        .expect("valid")
        .next()
        .expect("one chunk");
    assert!(matches!(
        decoder.apply(&chunk, &mut big),
        Err(MetaError::BitmapGeometryMismatch { .. })
    ));
}
