//! A cursor over the fuzzer's bytes that never fails: reads past the end give zeros or an
//! empty slice, so a target can draw structured choices from any input.
//!
//! Invariant: every read consumes at most the bytes it names, so a target's loops that stop
//! when the input is empty always end.

/// Reads big-endian integers and slices off the front of the input.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    bytes: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Input<'a> {
        Input { bytes }
    }

    /// Whether every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Bytes left.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Up to `len` bytes (fewer at the end of the input).
    pub fn take(&mut self, len: usize) -> &'a [u8] {
        let (head, tail) = self.bytes.split_at(len.min(self.bytes.len()));
        self.bytes = tail;
        head
    }

    /// Exactly `N` bytes, zero-filled past the end of the input.
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        let head = self.take(N);
        out.get_mut(..head.len())
            .unwrap_or_default()
            .copy_from_slice(head);
        out
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    /// One byte (0 at the end).
    pub fn u8(&mut self) -> u8 {
        u8::from_be_bytes(self.array())
    }

    /// A big-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.array())
    }

    /// A big-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes(self.array())
    }

    /// A big-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from_be_bytes(self.array())
    }

    /// A boolean from the low bit of one byte.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
}
