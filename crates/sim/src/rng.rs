//! The simulator's only source of randomness: a splitmix64 generator seeded by the run's seed.
//!
//! Invariant: every random choice of a run goes through one [`Rng`] in a fixed order, so the
//! same seed gives the same run.

/// A splitmix64 pseudo-random generator (small, fast, good enough for fault schedules).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `[low, high)` (`low` if the range is empty).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    /// An index below `len` (0 if `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        let len64 = u64::try_from(len).unwrap_or(u64::MAX);
        usize::try_from(self.range(0, len64)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_ranges_hold() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let (x, y) = (a.range(10, 20), b.range(10, 20));
            assert_eq!(x, y);
            assert!((10..20).contains(&x));
        }
        assert_eq!(Rng::new(1).range(5, 5), 5);
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
