//! repl crate (skeleton).
