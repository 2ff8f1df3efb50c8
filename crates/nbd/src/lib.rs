//! nbd crate (skeleton).
