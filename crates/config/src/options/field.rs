//! Conversion between checked [`Value`]s and the Rust types of the typed option structs.
//!
//! Invariant: `from_value` never fails. The parser only produces values that fit their
//! table row, and [`OptionField::fits`] lets a test prove that every struct field's type
//! matches its row's kind; a mismatch would otherwise fall back to a neutral value.

use std::time::Duration;

use super::enums::{self, AfterSb0Pri, Quorum};
use super::table::{Kind, OptionSpec, Unit};
use super::value::Value;

/// A Rust type that holds one option's effective value.
pub(crate) trait OptionField: Sized {
    /// Converts the effective value (`None` = unset with no default).
    fn from_value(value: Option<&Value>, spec: &OptionSpec) -> Self;
    /// Converts back, in the option's unit; `None` = unset.
    fn to_value(&self, spec: &OptionSpec) -> Option<Value>;
    /// True if this type can hold every value of `kind` (only tests ask).
    #[cfg_attr(not(test), allow(dead_code))]
    fn fits(kind: &Kind) -> bool;
}

impl OptionField for bool {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        matches!(value, Some(Value::Flag(true)))
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        Some(Value::Flag(*self))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Bool { .. })
    }
}

fn number(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::Number(number)) => *number,
        _ => 0,
    }
}

impl OptionField for u64 {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        number(value)
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        Some(Value::Number(*self))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Integer { unit, .. } if !unit.is_time())
    }
}

impl OptionField for u32 {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        u32::try_from(number(value)).unwrap_or(u32::MAX)
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        Some(Value::Number(u64::from(*self)))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(
            kind,
            Kind::Integer { unit, max, .. } if !unit.is_time() && *max <= u64::from(u32::MAX)
        )
    }
}

/// Milliseconds in one unit of a time option.
fn millis_per_unit(spec: &OptionSpec) -> u64 {
    match spec.kind {
        Kind::Integer {
            unit: Unit::Seconds,
            ..
        } => 1000,
        Kind::Integer {
            unit: Unit::Deciseconds,
            ..
        } => 100,
        _ => 1,
    }
}

impl OptionField for Duration {
    fn from_value(value: Option<&Value>, spec: &OptionSpec) -> Self {
        Duration::from_millis(number(value).saturating_mul(millis_per_unit(spec)))
    }
    fn to_value(&self, spec: &OptionSpec) -> Option<Value> {
        let millis = u64::try_from(self.as_millis()).unwrap_or(u64::MAX);
        Some(Value::Number(millis / millis_per_unit(spec)))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Integer { unit, .. } if unit.is_time())
    }
}

impl OptionField for Option<String> {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        match value {
            Some(Value::Text(text)) => Some(text.clone()),
            _ => None,
        }
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        self.as_ref().map(|text| Value::Text(text.clone()))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Text { .. } | Kind::Enum { default: None, .. })
    }
}

impl OptionField for Vec<String> {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        match value {
            Some(Value::Words(words)) => words.clone(),
            _ => Vec::new(),
        }
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        (!self.is_empty()).then(|| Value::Words(self.clone()))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Words)
    }
}

fn word(value: Option<&Value>) -> &str {
    match value {
        Some(Value::Text(text)) => text,
        _ => "",
    }
}

impl OptionField for Quorum {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        Quorum::from_word(word(value)).unwrap_or_default()
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        Some(Value::Text(self.as_str()))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Quorum)
    }
}

impl OptionField for AfterSb0Pri {
    fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
        AfterSb0Pri::from_word(word(value)).unwrap_or_default()
    }
    fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
        Some(Value::Text(self.as_str()))
    }
    fn fits(kind: &Kind) -> bool {
        matches!(kind, Kind::Enum { values, default: Some(_), .. } if *values == AfterSb0Pri::NAMES)
    }
}

/// Implements [`OptionField`] for enums declared with `word_enum!`.
macro_rules! word_enum_field {
    ($($name:ident),+) => {$(
        impl OptionField for enums::$name {
            fn from_value(value: Option<&Value>, _spec: &OptionSpec) -> Self {
                enums::$name::from_word(word(value)).unwrap_or_default()
            }
            fn to_value(&self, _spec: &OptionSpec) -> Option<Value> {
                Some(Value::Text(self.as_str().to_string()))
            }
            fn fits(kind: &Kind) -> bool {
                matches!(
                    kind,
                    Kind::Enum { values, default: Some(_), .. } if *values == enums::$name::NAMES
                )
            }
        }
    )+};
}

word_enum_field!(
    Protocol,
    Srm,
    AsyncBufferCompress,
    UsageCount,
    OnNoDataAccessible,
    OnNoQuorum,
    OnSuspendedPrimaryOutdated,
    AfterSb1Pri,
    AfterSb2Pri,
    RrConflict,
    OnCongestion,
    Fencing,
    OnIoError,
    DiskIo,
    ReadBalancing
);
