//! The Selective Replication Manager (SRM): the pure decision logic.
//!
//! TODO: crate documentation (model, rules, defaults).

mod config;
mod decision;
mod error;
mod manager;
mod observation;
pub mod procfs;

pub use config::*;
pub use decision::{Action, Admit, Decision, Gate, LagBudget, Measurement, Outcome, Value};
pub use error::SrmError;
pub use manager::{Manager, PeerStatus};
pub use observation::*;
