//! wire crate (skeleton).
