//! admin crate (skeleton).
