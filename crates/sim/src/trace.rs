//! The run's trace: a hash of every line (to prove two runs identical) and the last lines
//! (printed with a failure).

use std::collections::VecDeque;

use repl::Time;

/// Lines kept for a failure report.
pub const TRACE_TAIL_LINES: usize = 40;

/// A run's trace.
#[derive(Debug, Clone)]
pub struct Trace {
    hash: u64,
    lines: u64,
    tail: VecDeque<String>,
    capacity: usize,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::with_tail(TRACE_TAIL_LINES)
    }
}

impl Trace {
    /// A trace keeping the last `capacity` lines.
    pub fn with_tail(capacity: usize) -> Trace {
        Trace {
            hash: 0,
            lines: 0,
            tail: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Records one line at `now`.
    pub fn push(&mut self, now: Time, line: String) {
        let line = format!(
            "{:>12.6}s {line}",
            Duration::from_nanos(now.0).as_secs_f64()
        );
        let mut hash = if self.lines == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.hash
        };
        for byte in line.bytes().chain(std::iter::once(b'\n')) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
        }
        self.hash = hash;
        self.lines += 1;
        if self.tail.len() == self.capacity {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// FNV-1a hash of every line so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// Lines so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The last lines.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}

use std::time::Duration;
