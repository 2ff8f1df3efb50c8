//! daemon crate (skeleton).
