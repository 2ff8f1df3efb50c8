//! A set of explicitly written options, one section's worth or several merged.
//!
//! Invariants: at most one setting per option name in a set (a second one in the same
//! section is a `Duplicate` error); every setting keeps the location it was written at, so
//! errors and [`crate::Config::settings_not_in`] can point at it. Merging ("layering") lets a
//! later, more specific set win, which is how common < resource < connection works.

use std::collections::BTreeMap;

use crate::error::{ConfigError, Location};

use super::field::OptionField;
use super::table::{self, OptionSpec};
use super::value::Value;

/// One option as written.
#[derive(Clone, Debug)]
pub(crate) struct Setting {
    pub spec: &'static OptionSpec,
    pub value: Value,
    pub at: Location,
}

/// Explicit settings keyed by option name.
#[derive(Clone, Debug, Default)]
pub(crate) struct OptionSet {
    settings: BTreeMap<&'static str, Setting>,
}

impl OptionSet {
    /// Adds a setting; a second setting of the same option is an error.
    pub fn insert(&mut self, setting: Setting) -> Result<(), ConfigError> {
        if let Some(first) = self.settings.get(setting.spec.name) {
            return Err(ConfigError::Duplicate {
                at: setting.at,
                what: format!("option '{}'", setting.spec.name),
                first: first.at.clone(),
            });
        }
        self.settings.insert(setting.spec.name, setting);
        Ok(())
    }

    /// Adds a setting, replacing one of the same option.
    pub fn replace(&mut self, setting: Setting) {
        self.settings.insert(setting.spec.name, setting);
    }

    /// Merges `layers`, later ones winning.
    pub fn layered(layers: &[&OptionSet]) -> OptionSet {
        let mut merged = OptionSet::default();
        for layer in layers {
            for (name, setting) in &layer.settings {
                merged.settings.insert(name, setting.clone());
            }
        }
        merged
    }

    /// The settings in this set, by name.
    pub fn settings(&self) -> impl Iterator<Item = &Setting> {
        self.settings.values()
    }

    /// Where option `name` is set in this set, if it is.
    pub fn location(&self, name: &str) -> Option<&Location> {
        self.settings.get(name).map(|setting| &setting.at)
    }

    /// The typed effective value of option `name`: the setting if present, else the
    /// table default.
    pub fn field<T: OptionField>(&self, name: &str) -> T {
        let Some(spec) = table::find(name) else {
            return T::from_value(None, &UNKNOWN);
        };
        let value = match self.settings.get(name) {
            Some(setting) => Some(setting.value.clone()),
            None => spec.default_value(),
        };
        T::from_value(value.as_ref(), spec)
    }
}

/// Stands in for a name missing from the table; tests check this never happens.
static UNKNOWN: OptionSpec = OptionSpec {
    name: "<unknown>",
    class: table::Class::Global,
    kind: table::Kind::Words,
};
