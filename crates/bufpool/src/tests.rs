//! Tests of the buffer pool: alignment, exact lengths, reuse and the retention bound.

use super::*;

#[test]
fn buffers_are_aligned_and_exactly_sized() {
    let pool = BufPool::new(PoolConfig::default());
    for len in [0, 1, 511, 4096, 4097, 65536, 1 << 20, BUFFER_BYTES_MAX] {
        let buf = pool.take(len).expect("len within limit");
        assert_eq!(buf.len(), len);
        assert_eq!(buf.as_ptr() as usize % ALIGNMENT, 0, "len {len}");
    }
    assert!(pool.take(BUFFER_BYTES_MAX + 1).is_none());
}

#[test]
fn frozen_clones_share_one_allocation_and_return_it_once() {
    let pool = BufPool::new(PoolConfig::default());
    let mut buf = pool.take(8192).expect("small");
    buf.fill(7);
    let address = buf.as_ptr() as usize;
    let bytes = buf.freeze();
    let clone = bytes.clone();
    assert_eq!(clone.as_ptr() as usize, address);
    assert_eq!(pool.retained_bytes(), 0);
    drop(bytes);
    assert_eq!(pool.retained_bytes(), 0, "a clone is still alive");
    drop(clone);
    assert_eq!(pool.retained_bytes(), 8192);
    let again = pool.take(5000).expect("small");
    assert_eq!(
        again.as_ptr() as usize,
        address,
        "the freed buffer is reused"
    );
    assert_eq!(pool.retained_bytes(), 0);
}

#[test]
fn retention_is_bounded() {
    let pool = BufPool::new(PoolConfig {
        retained_bytes_max: 3 * 4096,
    });
    let buffers: Vec<_> = (0..5).map(|_| pool.take(4096).expect("small")).collect();
    drop(buffers);
    assert_eq!(pool.retained_bytes(), 3 * 4096);
}

#[test]
fn truncate_shortens_only() {
    let pool = BufPool::new(PoolConfig::default());
    let mut buf = pool.take(100).expect("small");
    buf.truncate(10);
    assert_eq!(buf.len(), 10);
    buf.truncate(50);
    assert_eq!(buf.len(), 10);
}
