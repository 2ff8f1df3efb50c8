//! The five option sections that `common` and `resource` share: `options`, `net`, `disk`,
//! `startup` and `handlers`.
//!
//! Invariant: a section may be written more than once at one level (its settings are
//! pooled), but each option and each handler at most once per level.

use std::collections::BTreeMap;

use crate::error::{ConfigError, Location};
use crate::options::add_setting;
use crate::options::set::OptionSet;
use crate::options::table::Class;
use crate::syntax::Node;

use super::{section_body, unknown_keyword};

/// Handler name → (command, where it was written).
#[derive(Clone, Debug, Default)]
pub(crate) struct HandlerSet(pub BTreeMap<String, (String, Location)>);

impl HandlerSet {
    /// Merges `layers`, later ones winning, into name → command.
    pub fn layered(layers: &[&HandlerSet]) -> BTreeMap<String, String> {
        let mut merged = BTreeMap::new();
        for layer in layers {
            for (name, (command, _)) in &layer.0 {
                merged.insert(name.clone(), command.clone());
            }
        }
        merged
    }

    fn add(&mut self, node: &Node) -> Result<(), ConfigError> {
        let command = match (node.args.as_slice(), &node.body) {
            ([command], None) => command,
            _ => {
                let name = node.name().to_string();
                return Err(ConfigError::WrongArity {
                    at: node.at().clone(),
                    name,
                    expected: "one command string",
                });
            }
        };
        if let Some((_, first)) = self.0.get(node.name()) {
            let what = format!("handler '{}'", node.name());
            return Err(ConfigError::Duplicate {
                at: node.at().clone(),
                what,
                first: first.clone(),
            });
        }
        self.0.insert(
            node.name().to_string(),
            (command.text.clone(), node.at().clone()),
        );
        Ok(())
    }
}

/// The option sections of one level (common or one resource).
#[derive(Clone, Debug, Default)]
pub(crate) struct Sections {
    pub options: OptionSet,
    pub net: OptionSet,
    /// Disk and peer-device options together, as DRBD allows.
    pub disk: OptionSet,
    pub startup: OptionSet,
    pub handlers: HandlerSet,
}

impl Sections {
    /// Parses the body of `common { }`.
    pub fn parse_common(body: &[Node]) -> Result<Sections, ConfigError> {
        let mut sections = Sections::default();
        for node in body {
            if !sections.try_add(node)? {
                return Err(unknown_keyword(node, "common section"));
            }
        }
        Ok(sections)
    }

    /// Takes `node` if it is one of the five sections (a `disk` without a body is not);
    /// returns whether it did.
    pub fn try_add(&mut self, node: &Node) -> Result<bool, ConfigError> {
        let (set, classes, name): (&mut OptionSet, &[Class], &'static str) = match node.name() {
            "options" => (&mut self.options, &[Class::Resource], "options"),
            "net" => (&mut self.net, &[Class::Net], "net"),
            "disk" if node.body.is_some() => {
                (&mut self.disk, &[Class::Disk, Class::PeerDevice], "disk")
            }
            "startup" => (&mut self.startup, &[Class::Startup], "startup"),
            "handlers" => {
                for handler in section_body(node, 0)? {
                    self.handlers.add(handler)?;
                }
                return Ok(true);
            }
            _ => return Ok(false),
        };
        add_all(set, node, classes, name)?;
        Ok(true)
    }
}

/// Adds every statement of section `node` (which takes no values) to `set`.
pub(crate) fn add_all(
    set: &mut OptionSet,
    node: &Node,
    classes: &[Class],
    name: &'static str,
) -> Result<(), ConfigError> {
    for statement in section_body(node, 0)? {
        add_setting(set, statement, classes, name)?;
    }
    Ok(())
}
