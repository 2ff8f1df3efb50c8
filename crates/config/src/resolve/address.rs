//! Network addresses: `address [ipv4|ipv6] ADDR:PORT` and tandem's listener addresses
//! `nbd-address [ADDR:]PORT` and `metrics-address [ADDR:]PORT`.
//!
//! Invariant: every address returned has a port in 1..=65535, and an explicit address
//! family matches the address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::error::ConfigError;
use crate::lexer::Token;

/// Address families DRBD knows; only the IP ones are supported.
const UNSUPPORTED_FAMILIES: &[&str] = &["ssocks", "sdp", "sci"];

/// Parses `[family] ADDR:PORT` from the start of `tokens`; returns the address and how many
/// tokens it used. `keyword` is the token before them (for "missing value" errors).
pub(crate) fn parse_address(
    tokens: &[Token],
    keyword: &Token,
) -> Result<(SocketAddr, usize), ConfigError> {
    let missing = || ConfigError::WrongArity {
        at: keyword.at.clone(),
        name: keyword.text.clone(),
        expected: "an address such as 10.0.0.1:7789 or ipv6 [fd00::1]:7789",
    };
    let first = tokens.first().ok_or_else(missing)?;
    let family = first.text.as_str();
    if UNSUPPORTED_FAMILIES.contains(&family) {
        return Err(ConfigError::Unsupported {
            at: first.at.clone(),
            what: format!("address family '{family}'"),
        });
    }
    if family == "ipv4" || family == "ipv6" {
        let address_token = tokens.get(1).ok_or_else(missing)?;
        let address = socket_address(address_token)?;
        if address.is_ipv6() != (family == "ipv6") {
            return Err(invalid(address_token, format!("not an {family} address")));
        }
        return Ok((address, 2));
    }
    Ok((socket_address(first)?, 1))
}

/// Parses `ADDR:PORT` (IPv6 in brackets).
fn socket_address(token: &Token) -> Result<SocketAddr, ConfigError> {
    let address: SocketAddr = token.text.parse().map_err(|_| {
        invalid(
            token,
            "expected ADDRESS:PORT, e.g. 10.0.0.1:7789 or [fd00::1]:7789".to_string(),
        )
    })?;
    check_port(token, address.port())?;
    Ok(address)
}

fn check_port(token: &Token, port: u16) -> Result<(), ConfigError> {
    if port == 0 {
        return Err(invalid(token, "the port must be 1..=65535".to_string()));
    }
    Ok(())
}

fn invalid(token: &Token, reason: String) -> ConfigError {
    ConfigError::InvalidAddress {
        at: token.at.clone(),
        value: token.text.clone(),
        reason,
    }
}

/// Parses a port number 1..=65535.
pub(crate) fn parse_port(token: &Token) -> Result<u16, ConfigError> {
    let port = super::plain_number(token, "port", (1, u64::from(u16::MAX)))?;
    u16::try_from(port).map_err(|_| invalid(token, "the port must be 1..=65535".to_string()))
}

/// Parses a tandem listener address (`nbd-address`, `metrics-address`): `[ADDR:]PORT`, where
/// a bare port means 127.0.0.1:PORT (loopback unless the administrator says otherwise).
pub(crate) fn parse_listen_address(token: &Token) -> Result<SocketAddr, ConfigError> {
    if token.text.bytes().all(|byte| byte.is_ascii_digit()) {
        let port = parse_port(token)?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    socket_address(token)
}
