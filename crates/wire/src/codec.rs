//! Bounded big-endian primitives: a `Reader` over a body slice and a `Writer` appending to a
//! `Vec<u8>`.
//!
//! Invariants: the reader never reads past its slice and never allocates more than the bytes it
//! has left (list counts are checked against the remaining bytes before any allocation); every
//! short read is a [`WireError::Truncated`]. The writer refuses what the reader would refuse
//! (over-long strings and lists), so everything written can be read back.

use bytes::BufMut;

use crate::{WireError, STRING_LEN_MAX};

/// Reads fields off the front of a message body.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over the whole of `body`.
    pub(crate) fn new(body: &'a [u8]) -> Reader<'a> {
        Reader { rest: body }
    }

    /// Reads `N` raw bytes.
    pub(crate) fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], WireError> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(WireError::Truncated { field })?;
        self.rest = rest;
        Ok(*head)
    }

    /// Reads one byte.
    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        self.array::<1>(field).map(u8::from_be_bytes)
    }

    /// Reads a big-endian `u16`.
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        self.array(field).map(u16::from_be_bytes)
    }

    /// Reads a big-endian `u32`.
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        self.array(field).map(u32::from_be_bytes)
    }

    /// Reads a big-endian `u64`.
    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        self.array(field).map(u64::from_be_bytes)
    }

    /// Reads a boolean: exactly 0 or 1, anything else is an error so the encoding stays
    /// canonical.
    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(WireError::InvalidBool { field, value }),
        }
    }

    /// Reads a length-prefixed UTF-8 string of at most [`STRING_LEN_MAX`] bytes.
    pub(crate) fn string(&mut self, field: &'static str) -> Result<String, WireError> {
        let len = usize::from(self.u16(field)?);
        if len > STRING_LEN_MAX {
            return Err(WireError::StringTooLong {
                field,
                len,
                max: STRING_LEN_MAX,
            });
        }
        let Some((bytes, rest)) = self.rest.split_at_checked(len) else {
            return Err(WireError::Truncated { field });
        };
        self.rest = rest;
        let text = std::str::from_utf8(bytes).map_err(|_| WireError::InvalidUtf8 { field })?;
        Ok(text.to_owned())
    }

    /// Reads a list count and checks it against `count_max` and against the bytes left, given
    /// that each entry takes `entry_len` bytes. After this, allocating `count` entries is
    /// bounded by the body length.
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        count_max: usize,
        entry_len: usize,
    ) -> Result<usize, WireError> {
        assert!(entry_len > 0);
        let count = usize::from(self.u16(field)?);
        if count > count_max {
            return Err(WireError::TooManyEntries {
                field,
                count,
                max: count_max,
            });
        }
        if count > self.rest.len() / entry_len {
            return Err(WireError::Truncated { field });
        }
        Ok(count)
    }

    /// Takes every byte left (for a field that runs to the end of the body, whose length the
    /// frame header has already bounded).
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// Ends the read: leftover bytes are an error, so each message has one encoding.
    pub(crate) fn finish(self, kind: u16) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(WireError::TrailingBytes {
                kind,
                count: self.rest.len(),
            })
        }
    }
}

/// Appends fields to an output buffer.
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    /// A writer appending to `out`.
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Writer<'a> {
        Writer { out }
    }

    /// Appends raw bytes.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.out.put_slice(bytes);
    }

    /// Appends one byte.
    pub(crate) fn u8(&mut self, value: u8) {
        self.out.put_u8(value);
    }

    /// Appends a big-endian `u16`.
    pub(crate) fn u16(&mut self, value: u16) {
        self.out.put_u16(value);
    }

    /// Appends a big-endian `u32`.
    pub(crate) fn u32(&mut self, value: u32) {
        self.out.put_u32(value);
    }

    /// Appends a big-endian `u64`.
    pub(crate) fn u64(&mut self, value: u64) {
        self.out.put_u64(value);
    }

    /// Appends a boolean as 0 or 1.
    pub(crate) fn bool(&mut self, value: bool) {
        self.out.put_u8(u8::from(value));
    }

    /// Appends a length-prefixed string, refusing one longer than [`STRING_LEN_MAX`].
    pub(crate) fn string(&mut self, field: &'static str, text: &str) -> Result<(), WireError> {
        let too_long = WireError::StringTooLong {
            field,
            len: text.len(),
            max: STRING_LEN_MAX,
        };
        if text.len() > STRING_LEN_MAX {
            return Err(too_long);
        }
        let len = u16::try_from(text.len()).map_err(|_| too_long)?;
        self.out.put_u16(len);
        self.out.put_slice(text.as_bytes());
        Ok(())
    }

    /// Appends a list count, refusing one above `count_max`.
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        count: usize,
        count_max: usize,
    ) -> Result<(), WireError> {
        let too_many = WireError::TooManyEntries {
            field,
            count,
            max: count_max,
        };
        if count > count_max {
            return Err(too_many);
        }
        let count = u16::try_from(count).map_err(|_| too_many)?;
        self.out.put_u16(count);
        Ok(())
    }
}
