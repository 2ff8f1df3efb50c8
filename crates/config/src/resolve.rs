//! Gives the statement tree its meaning: top-level sections, then each resource with
//! common's settings inherited, producing the typed [`Config`].
//!
//! Invariant: everything the model promises (see `model.rs`) is checked here or in the
//! submodules, and every rejection points at the statement responsible. Merge order of
//! options: common < resource < (on | connection | mesh) < volume, later wins.

mod address;
mod connection;
pub(crate) mod host;
mod resource;
mod sections;
mod srm;
mod volume;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::error::{ConfigError, Location};
use crate::model::{Config, Origins, SectionKind, SettingRef};
use crate::options::set::OptionSet;
use crate::options::table::Class;
use crate::options::{add_setting, Global};
use crate::syntax::Node;
use sections::Sections;

/// Resolves a whole configuration from its top-level statements (includes already spliced).
pub(crate) fn resolve(nodes: &[Node]) -> Result<Config, ConfigError> {
    let mut global: Option<(OptionSet, Location)> = None;
    let mut common: Option<(Sections, Location)> = None;
    let mut resources = Vec::new();
    for node in nodes {
        match node.name() {
            "global" => {
                let set = parse_global(node)?;
                once(global.as_ref().map(|(_, at)| at), node, "global section")?;
                global = Some((set, node.at().clone()));
            }
            "common" => {
                let body = section_body(node, 0)?;
                once(common.as_ref().map(|(_, at)| at), node, "common section")?;
                common = Some((Sections::parse_common(body)?, node.at().clone()));
            }
            "resource" => resources.push(node),
            name if name.starts_with("require-drbd-module-version-") => {}
            _ => return Err(unknown_keyword(node, "the top level")),
        }
    }
    let global_set = global.map(|(set, _)| set).unwrap_or_default();
    let common = common.map(|(sections, _)| sections).unwrap_or_default();
    let mut config = Config {
        global: Global::from_set(&global_set),
        ..Config::default()
    };
    let mut origins = global_origins(&global_set);
    let mut names: BTreeMap<String, Location> = BTreeMap::new();
    for node in resources {
        let (resource, settings) = resource::resolve(node, &common)?;
        if let Some(first) = names.insert(resource.name.clone(), node.at().clone()) {
            let what = format!("resource '{}'", resource.name);
            return Err(ConfigError::Duplicate {
                at: node.at().clone(),
                what,
                first,
            });
        }
        origins.extend(settings);
        config.resources.push(resource);
    }
    config.origins = Origins(origins);
    Ok(config)
}

/// Refuses a second `global` or `common` section.
fn once(first: Option<&Location>, node: &Node, what: &str) -> Result<(), ConfigError> {
    match first {
        Some(first) => Err(ConfigError::Duplicate {
            at: node.at().clone(),
            what: what.to_string(),
            first: first.clone(),
        }),
        None => Ok(()),
    }
}

fn parse_global(node: &Node) -> Result<OptionSet, ConfigError> {
    let mut set = OptionSet::default();
    for statement in section_body(node, 0)? {
        add_setting(&mut set, statement, &[Class::Global], "global")?;
    }
    Ok(set)
}

fn global_origins(set: &OptionSet) -> Vec<SettingRef> {
    let to_ref = |setting: &crate::options::set::Setting| SettingRef {
        resource: None,
        section: SectionKind::Global,
        option: setting.spec.name.to_string(),
        at: setting.at.clone(),
    };
    set.settings().map(to_ref).collect()
}

/// The body of section `node`, which must have exactly `arg_count` values before `{`.
pub(crate) fn section_body(node: &Node, arg_count: usize) -> Result<&[Node], ConfigError> {
    if let Some(extra) = node.args.get(arg_count) {
        return Err(ConfigError::Unexpected {
            at: extra.at.clone(),
            expected: "'{'",
            found: extra.describe(),
        });
    }
    match &node.body {
        Some(body) if node.args.len() == arg_count => Ok(body),
        _ => Err(ConfigError::Unexpected {
            at: node.at().clone(),
            expected: "a section with '{ ... }'",
            found: format!("'{}' statement", node.name()),
        }),
    }
}

/// The error for a keyword that does not belong at this place.
pub(crate) fn unknown_keyword(node: &Node, context: &str) -> ConfigError {
    if node.name() == "include" {
        return ConfigError::Unexpected {
            at: node.at().clone(),
            expected: "a section (include is only allowed at top level)",
            found: "'include'".to_string(),
        };
    }
    ConfigError::UnknownKeyword {
        at: node.at().clone(),
        keyword: node.name().to_string(),
        context: context.to_string(),
    }
}

/// The one value of statement `node` (`keyword value;`).
pub(crate) fn single_value<'a>(
    node: &'a Node,
    expected: &'static str,
) -> Result<&'a crate::lexer::Token, ConfigError> {
    match (node.args.as_slice(), &node.body) {
        ([value], None) => Ok(value),
        _ => Err(ConfigError::WrongArity {
            at: node.at().clone(),
            name: node.name().to_string(),
            expected,
        }),
    }
}

/// Parses a plain decimal number (no suffix) within `range`.
pub(crate) fn plain_number(
    token: &crate::lexer::Token,
    what: &str,
    range: (u64, u64),
) -> Result<u64, ConfigError> {
    let digits_only =
        !token.text.is_empty() && token.text.bytes().all(|byte| byte.is_ascii_digit());
    if !digits_only {
        return Err(ConfigError::InvalidNumber {
            at: token.at.clone(),
            name: what.to_string(),
            value: token.text.clone(),
            reason: "expected decimal digits".to_string(),
        });
    }
    let unit = crate::options::table::Unit::Count;
    match token.text.parse::<u64>() {
        Ok(number) if (range.0..=range.1).contains(&number) => Ok(number),
        parsed => Err(crate::options::value::out_of_range(
            what,
            token,
            parsed.ok(),
            unit,
            range,
        )),
    }
}
