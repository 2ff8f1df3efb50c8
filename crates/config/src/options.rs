//! Options: the static table, value parsing, sets of settings and the typed structs.
//!
//! Invariant: every option statement goes through [`add_setting`], the one place that
//! decides whether a name is known, whether it is allowed in the section at hand, and
//! whether its value is valid.

pub mod enums;
pub(crate) mod field;
mod overrides;
pub(crate) mod set;
pub mod table;
mod typed;
pub(crate) mod value;

#[cfg(test)]
mod tests;

pub use typed::{DiskOptions, Global, NetOptions, PeerDeviceOptions, ResourceOptions, Startup};

use crate::error::ConfigError;
use crate::syntax::Node;
use set::{OptionSet, Setting};
use table::Class;

/// Parses the option statement `node` into `set`. `classes` are the option classes the
/// section accepts and `section` names it for messages (`net`, `connection disk`, ...).
pub(crate) fn add_setting(
    set: &mut OptionSet,
    node: &Node,
    classes: &[Class],
    section: &'static str,
) -> Result<(), ConfigError> {
    if node.body.is_some() {
        return Err(ConfigError::UnknownKeyword {
            at: node.at().clone(),
            keyword: node.name().to_string(),
            context: format!("{section} section"),
        });
    }
    let Some(spec) = table::find(node.name()) else {
        return Err(ConfigError::UnknownOption {
            at: node.at().clone(),
            name: node.name().to_string(),
            section,
        });
    };
    if !classes.contains(&spec.class) {
        return Err(ConfigError::OptionNotAllowed {
            at: node.at().clone(),
            name: spec.name.to_string(),
            section: section.to_string(),
            home: spec.class.home(),
        });
    }
    let value = value::parse(spec, &node.keyword, &node.args)?;
    set.insert(Setting {
        spec,
        value,
        at: node.at().clone(),
    })
}
