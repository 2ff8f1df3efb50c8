//! bufpool crate (skeleton).
