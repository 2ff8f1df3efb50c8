//! Turns an option statement's value tokens into a checked [`Value`], driven by the
//! option's table row: unit suffixes, range, enum membership, string length.
//!
//! Invariant: a `Value` returned here always satisfies its row (in range, an allowed word,
//! short enough), so the typed structs can convert it without failing.

use crate::error::ConfigError;
use crate::lexer::Token;

use super::table::{Kind, OptionSpec, Unit, QUORUM_NODES_MAX};

/// A checked option value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `yes` / `no`.
    Flag(bool),
    /// A number in the option's unit.
    Number(u64),
    /// A word from an enum, a quorum word, or a string.
    Text(String),
    /// A list of words.
    Words(Vec<String>),
}

impl OptionSpec {
    /// The value the option has when nothing sets it; `None` means unset.
    pub fn default_value(&self) -> Option<Value> {
        match self.kind {
            Kind::Bool { default } => Some(Value::Flag(default)),
            Kind::Enum { default, .. } => default.map(|word| Value::Text(word.to_string())),
            Kind::Integer { default, .. } => Some(Value::Number(default)),
            Kind::Quorum => Some(Value::Text("off".to_string())),
            Kind::Text { .. } | Kind::Words => None,
        }
    }
}

/// Parses the values of `keyword` according to `spec`.
pub(crate) fn parse(
    spec: &OptionSpec,
    keyword: &Token,
    args: &[Token],
) -> Result<Value, ConfigError> {
    if let (Kind::Bool { .. }, []) = (&spec.kind, args) {
        return Ok(Value::Flag(true));
    }
    if let Kind::Words = spec.kind {
        if args.is_empty() {
            return Err(arity(spec, keyword, "one or more values"));
        }
        return Ok(Value::Words(
            args.iter().map(|token| token.text.clone()).collect(),
        ));
    }
    let [token] = args else {
        return Err(arity(spec, keyword, "one value"));
    };
    match spec.kind {
        Kind::Bool { .. } => parse_bool(spec, token),
        Kind::Enum {
            values,
            ignore_case,
            ..
        } => parse_enum(spec, token, values, ignore_case),
        Kind::Integer { unit, min, max, .. } => parse_integer(spec, token, unit, (min, max)),
        Kind::Text { max_len } => parse_text(spec, token, max_len),
        Kind::Quorum => parse_quorum(spec, token),
        Kind::Words => Err(arity(spec, keyword, "one or more values")),
    }
}

fn arity(spec: &OptionSpec, keyword: &Token, expected: &'static str) -> ConfigError {
    ConfigError::WrongArity {
        at: keyword.at.clone(),
        name: spec.name.to_string(),
        expected,
    }
}

fn invalid_value(spec: &OptionSpec, token: &Token) -> ConfigError {
    ConfigError::InvalidValue {
        at: token.at.clone(),
        name: spec.name.to_string(),
        value: token.text.clone(),
        allowed: spec.allowed(),
    }
}

fn parse_bool(spec: &OptionSpec, token: &Token) -> Result<Value, ConfigError> {
    match token.text.as_str() {
        "yes" => Ok(Value::Flag(true)),
        "no" => Ok(Value::Flag(false)),
        _ => Err(invalid_value(spec, token)),
    }
}

fn parse_enum(
    spec: &OptionSpec,
    token: &Token,
    values: &[&str],
    ignore_case: bool,
) -> Result<Value, ConfigError> {
    let word = token.text.as_str();
    for value in values {
        let pattern = value
            .strip_suffix("NAME")
            .filter(|prefix| prefix.ends_with('-'));
        if let Some(prefix) = pattern {
            if word.len() > prefix.len() && word.starts_with(prefix) {
                return Ok(Value::Text(word.to_string()));
            }
        } else if *value == word || (ignore_case && value.eq_ignore_ascii_case(word)) {
            return Ok(Value::Text((*value).to_string()));
        }
    }
    Err(invalid_value(spec, token))
}

fn parse_text(spec: &OptionSpec, token: &Token, max_len: usize) -> Result<Value, ConfigError> {
    if token.text.chars().count() > max_len {
        return Err(ConfigError::TooLong {
            at: token.at.clone(),
            name: spec.name.to_string(),
            max_len,
        });
    }
    Ok(Value::Text(token.text.clone()))
}

fn parse_quorum(spec: &OptionSpec, token: &Token) -> Result<Value, ConfigError> {
    let word = token.text.as_str();
    if matches!(word, "off" | "majority" | "all") {
        return Ok(Value::Text(word.to_string()));
    }
    if !word.starts_with(|character: char| character.is_ascii_digit()) {
        return Err(invalid_value(spec, token));
    }
    let nodes = parse_integer(spec, token, Unit::Count, (1, QUORUM_NODES_MAX))?;
    match nodes {
        Value::Number(count) => Ok(Value::Text(count.to_string())),
        _ => Err(invalid_value(spec, token)),
    }
}

fn parse_integer(
    spec: &OptionSpec,
    token: &Token,
    unit: Unit,
    range: (u64, u64),
) -> Result<Value, ConfigError> {
    let number_error = |reason: String| ConfigError::InvalidNumber {
        at: token.at.clone(),
        name: spec.name.to_string(),
        value: token.text.clone(),
        reason,
    };
    let scaled = match scale(&token.text, unit) {
        Ok(scaled) => Some(scaled),
        Err(ScaleError::Invalid(reason)) => return Err(number_error(reason)),
        Err(ScaleError::TooBig) => None,
    };
    match scaled {
        Some(number) if (range.0..=range.1).contains(&number) => Ok(Value::Number(number)),
        _ => Err(out_of_range(spec.name, token, scaled, unit, range)),
    }
}

/// The out-of-range error for `token`; `scaled` is its value in `unit` if it fits a u64.
pub(crate) fn out_of_range(
    name: &str,
    token: &Token,
    scaled: Option<u64>,
    unit: Unit,
    range: (u64, u64),
) -> ConfigError {
    let value = match scaled {
        Some(number) if number.to_string() != token.text => format!("{} (= {number})", token.text),
        _ => token.text.clone(),
    };
    let label = unit.label();
    let unit = if label.is_empty() {
        String::new()
    } else {
        format!(" ({label})")
    };
    ConfigError::OutOfRange {
        at: token.at.clone(),
        name: name.to_string(),
        value,
        min: range.0,
        max: range.1,
        unit,
    }
}

/// Why a number could not be scaled.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScaleError {
    /// Not a number at all; the reason is for the message.
    Invalid(String),
    /// Larger than a u64 can hold.
    TooBig,
}

/// Parses decimal digits with an optional suffix (`K`, `M`, `G` = ×1024ⁿ bytes, `s` = 512
/// bytes) and converts the result into `unit`, as drbdsetup does: `100M` of a KiB/s option is
/// 102400. Time units take no suffix. A suffix whose result is not a whole number of units is
/// refused.
pub(crate) fn scale(text: &str, unit: Unit) -> Result<u64, ScaleError> {
    let digits_end = text
        .find(|character: char| !character.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(ScaleError::Invalid("expected decimal digits".to_string()));
    }
    let number: u64 = digits.parse().map_err(|_| ScaleError::TooBig)?;
    if suffix.is_empty() {
        return Ok(number);
    }
    let Some(unit_bytes) = unit.bytes() else {
        return Err(ScaleError::Invalid(format!(
            "no unit suffix is allowed for {}",
            unit.label()
        )));
    };
    let suffix_bytes: u64 = match suffix {
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "s" | "S" if matches!(unit, Unit::Bytes | Unit::Sectors | Unit::KibPerSecond) => 512,
        _ => {
            return Err(ScaleError::Invalid(format!(
                "unknown suffix '{suffix}' (use K, M, G or s)"
            )))
        }
    };
    let bytes = number.checked_mul(suffix_bytes).ok_or(ScaleError::TooBig)?;
    if bytes % unit_bytes != 0 {
        return Err(ScaleError::Invalid(format!(
            "not a whole number of {}",
            unit.label()
        )));
    }
    Ok(bytes / unit_bytes)
}
