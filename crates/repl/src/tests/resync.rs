//! Resync scenario tests (drbd-semantics.md §2, §3).

use super::*;
