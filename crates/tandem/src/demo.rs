//! `tandem demo`: a self-contained demonstration on this machine.
//!
//! Placeholder: someone else writes the demonstration. Until then it fails with
//! [`DemoError::NotYet`], so `tandem demo` exits with status 1 and says so.

/// Why the demonstration failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The demonstration is not written yet.
    #[error("demo: not yet")]
    NotYet,
}

/// Runs the demonstration.
pub fn run() -> Result<(), DemoError> {
    Err(DemoError::NotYet)
}
