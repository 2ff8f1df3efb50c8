//! Parsers for the human forms of durations (`20ms`), sizes (`64MiB`) and rates (`100mbit`,
//! `12MB`), shared by the command line and the control socket.
//!
//! Invariants:
//! - Arithmetic is exact integer arithmetic on the decimal digits (`1.5ms` is 1 500 000 ns);
//!   a fraction finer than the base unit is truncated.
//! - Every malformed or out-of-range input is a [`LinkError::Parse`] naming the input and what
//!   was expected; nothing panics.
//!
//! Units: durations `ns`, `us` (or `µs`), `ms`, `s`; a bare `0` is zero. Sizes: a bare number
//! is bytes; `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB` are powers of 1000 and `KiB`, `MiB`,
//! `GiB`, `TiB` powers of 1024 (a `B` alone is bytes). Rates: `bit`, `kbit`, `mbit`, `gbit`
//! (case-insensitive, powers of 1000, bits per second), or any size unit (optionally followed
//! by `/s`) for bytes per second; `unlimited` or `none` is no limit.

use std::time::Duration;

use crate::LinkError;

/// A decimal number split at its unit: integer digits, fraction digits, unit.
struct Number<'a> {
    integer: u128,
    fraction: u128,
    fraction_digits: u32,
    unit: &'a str,
}

fn parse_error(kind: &'static str, input: &str, expected: &'static str) -> LinkError {
    LinkError::Parse {
        kind,
        input: input.to_owned(),
        expected,
    }
}

fn split_number<'a>(
    kind: &'static str,
    input: &'a str,
    expected: &'static str,
) -> Result<Number<'a>, LinkError> {
    let trimmed = input.trim();
    let unit_at = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(unit_at);
    let (integer_digits, fraction_digits) = digits.split_once('.').unwrap_or((digits, ""));
    let bad = || parse_error(kind, input, expected);
    // At most 30 digits each way keeps every product below u128::MAX.
    if integer_digits.is_empty() || integer_digits.len() > 30 || fraction_digits.len() > 30 {
        return Err(bad());
    }
    let integer = integer_digits.parse::<u128>().map_err(|_| bad())?;
    let fraction = if fraction_digits.is_empty() {
        0
    } else {
        fraction_digits.parse::<u128>().map_err(|_| bad())?
    };
    let fraction_digits = u32::try_from(fraction_digits.len()).map_err(|_| bad())?;
    Ok(Number {
        integer,
        fraction,
        fraction_digits,
        unit: unit.trim(),
    })
}

/// `number × multiplier`, truncated to an integer, or `None` if it overflows a `u64`.
fn scaled(number: &Number<'_>, multiplier: u128) -> Option<u64> {
    let whole = number.integer.checked_mul(multiplier)?;
    let part =
        number.fraction.checked_mul(multiplier)? / 10u128.checked_pow(number.fraction_digits)?;
    u64::try_from(whole.checked_add(part)?).ok()
}

const DURATION_EXPECTED: &str = "a number with a unit: ns, us, ms or s (for example 20ms)";

/// Parses a duration such as `20ms`, `1.5ms`, `500us` or `2s`.
pub fn duration(input: &str) -> Result<Duration, LinkError> {
    let number = split_number("duration", input, DURATION_EXPECTED)?;
    let multiplier_ns: u128 = match number.unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" if number.integer == 0 && number.fraction == 0 => 1,
        _ => return Err(parse_error("duration", input, DURATION_EXPECTED)),
    };
    scaled(&number, multiplier_ns)
        .map(Duration::from_nanos)
        .ok_or_else(|| parse_error("duration", input, DURATION_EXPECTED))
}

const SIZE_EXPECTED: &str =
    "a number of bytes, optionally with a unit: K, M, G, T (x1000) or KiB, MiB, GiB, TiB (x1024)";

fn size_multiplier(unit: &str) -> Option<u128> {
    Some(match unit {
        "" | "B" => 1,
        "K" | "k" | "KB" | "kB" => 1_000,
        "M" | "MB" => 1_000_000,
        "G" | "GB" => 1_000_000_000,
        "T" | "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return None,
    })
}

/// Parses a size in bytes such as `65536`, `64MiB` or `12MB`.
pub fn size_bytes(input: &str) -> Result<u64, LinkError> {
    let number = split_number("size", input, SIZE_EXPECTED)?;
    size_multiplier(number.unit)
        .and_then(|multiplier| scaled(&number, multiplier))
        .ok_or_else(|| parse_error("size", input, SIZE_EXPECTED))
}

const RATE_EXPECTED: &str =
    "a rate such as 100mbit, 1gbit (bits/s), 12MB or 12MiB/s (bytes/s), or unlimited";

/// Parses a rate into bytes per second; `Ok(None)` is `unlimited`/`none`.
pub fn rate_bytes_per_s(input: &str) -> Result<Option<u64>, LinkError> {
    let trimmed = input.trim();
    if trimmed.eq_ignore_ascii_case("unlimited") || trimmed.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let number = split_number("rate", input, RATE_EXPECTED)?;
    let bits_multiplier: Option<u128> = match number.unit.to_ascii_lowercase().as_str() {
        "bit" => Some(1),
        "kbit" => Some(1_000),
        "mbit" => Some(1_000_000),
        "gbit" => Some(1_000_000_000),
        _ => None,
    };
    let bytes = match bits_multiplier {
        Some(multiplier) => scaled(&number, multiplier).map(|bits| bits / 8),
        None => {
            let unit = number.unit.strip_suffix("/s").unwrap_or(number.unit);
            size_multiplier(unit).and_then(|multiplier| scaled(&number, multiplier))
        }
    };
    match bytes {
        Some(0) => Err(parse_error(
            "rate",
            input,
            "a rate of at least 1 byte/s (8bit)",
        )),
        Some(value) => Ok(Some(value)),
        None => Err(parse_error("rate", input, RATE_EXPECTED)),
    }
}
