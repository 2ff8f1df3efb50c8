//! Options given on a command line (`tandem net-options RES --protocol A`), applied over a
//! typed struct's values with the same checks a file gets.
//!
//! Invariant: an override is accepted only for an option the struct holds and the caller
//! allows, with a value [`value::parse`] accepts; the struct rebuilt from the set therefore
//! satisfies every table row, as one loaded from a file does.

use std::path::Path;
use std::sync::Arc;

use crate::error::Location;
use crate::lexer::{Token, TokenKind};

use super::set::{OptionSet, Setting};
use super::table::{self, OptionSpec};
use super::value::{self, Value};

/// The option set of `values` (a typed struct's [`values`](super::NetOptions)) with
/// `overrides` (`(name, value)`) replacing their options; names outside `allowed` are
/// refused, listing `allowed`.
pub(crate) fn apply(
    values: Vec<(&'static OptionSpec, Option<Value>)>,
    allowed: &[&str],
    overrides: &[(String, String)],
) -> Result<OptionSet, String> {
    let mut set = OptionSet::default();
    for (position, (spec, value)) in values.into_iter().enumerate() {
        if let Some(value) = value {
            set.replace(Setting {
                spec,
                value,
                at: command_line(position),
            });
        }
    }
    for (position, (name, text)) in overrides.iter().enumerate() {
        let spec = table::find(name)
            .filter(|spec| allowed.contains(&spec.name))
            .ok_or_else(|| {
                format!(
                    "unknown option '--{name}'; the options that can change here are: {}",
                    allowed.join(", ")
                )
            })?;
        let at = command_line(position);
        let keyword = Token {
            kind: TokenKind::Word,
            text: name.clone(),
            at: at.clone(),
        };
        let token = Token {
            kind: TokenKind::Word,
            text: text.clone(),
            at: at.clone(),
        };
        let value = value::parse(spec, &keyword, &[token]).map_err(|error| error.to_string())?;
        set.replace(Setting { spec, value, at });
    }
    Ok(set)
}

/// Where a command-line option is, for messages: `command line:1:N` for the Nth option.
fn command_line(position: usize) -> Location {
    let column = u32::try_from(position + 1).unwrap_or(u32::MAX);
    Location {
        file: Arc::from(Path::new("command line")),
        line: 1,
        column,
    }
}
