//! config crate (skeleton).
