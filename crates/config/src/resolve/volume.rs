//! Volume declarations: `volume N { device; disk; meta-disk; disk { } }`, and the same
//! three statements written directly in a resource or `on` section (DRBD 8.4 style, which
//! declares volume 0).
//!
//! Invariant: each of device, disk and meta-disk is given at most once per declaration;
//! volume numbers are 0..=65534; minors are 0..=2^20-1.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{ConfigError, Location};
use crate::lexer::{Token, TokenKind};
use crate::model::MetaDisk;
use crate::options::set::OptionSet;
use crate::options::table::Class;
use crate::syntax::Node;

use super::sections::add_all;
use super::{plain_number, section_body, unknown_keyword};

/// Highest volume number (DRBD_VOLUME_MAX).
pub const VOLUME_NUMBER_MAX: u16 = 65534;
/// Highest minor number (DRBD_MINOR_NUMBER_MAX).
const MINOR_MAX: u64 = (1 << 20) - 1;

/// `device [PATH] [minor N]` as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeviceDecl {
    pub path: Option<String>,
    pub minor: Option<u32>,
}

/// One volume declaration at one level (resource, `on`, or implicit volume 0).
#[derive(Clone, Debug)]
pub(crate) struct VolumeDecl {
    pub number: u16,
    pub at: Location,
    pub device: Option<(DeviceDecl, Location)>,
    /// `Some(None)` is `disk none;`.
    pub disk: Option<(Option<PathBuf>, Location)>,
    pub meta_disk: Option<(MetaDisk, Location)>,
    /// The volume's `disk { }` options.
    pub options: OptionSet,
}

impl VolumeDecl {
    pub fn new(number: u16, at: Location) -> VolumeDecl {
        VolumeDecl {
            number,
            at,
            device: None,
            disk: None,
            meta_disk: None,
            options: OptionSet::default(),
        }
    }

    /// True if any of device, disk or meta-disk is set.
    pub fn has_fields(&self) -> bool {
        self.device.is_some() || self.disk.is_some() || self.meta_disk.is_some()
    }

    /// Takes `node` if it is `device`, `disk` (without a body), `meta-disk` or
    /// `flexible-meta-disk`; returns whether it did.
    pub fn try_field(&mut self, node: &Node) -> Result<bool, ConfigError> {
        match node.name() {
            "device" => set_once(&mut self.device, parse_device(node)?, node),
            "disk" if node.body.is_none() => set_once(&mut self.disk, parse_disk(node)?, node),
            "meta-disk" | "flexible-meta-disk" => {
                set_once(&mut self.meta_disk, parse_meta_disk(node)?, node)
            }
            _ => return Ok(false),
        }?;
        Ok(true)
    }
}

fn set_once<T>(slot: &mut Option<(T, Location)>, value: T, node: &Node) -> Result<(), ConfigError> {
    if let Some((_, first)) = slot {
        let what = format!("'{}'", node.name());
        return Err(ConfigError::Duplicate {
            at: node.at().clone(),
            what,
            first: first.clone(),
        });
    }
    *slot = Some((value, node.at().clone()));
    Ok(())
}

/// Parses `volume N { ... }`; its `disk { }` section accepts `disk_classes`.
pub(crate) fn parse_volume(node: &Node, disk_classes: &[Class]) -> Result<VolumeDecl, ConfigError> {
    let body = section_body(node, 1)?;
    let mut decl = VolumeDecl::new(volume_number(node)?, node.at().clone());
    for statement in body {
        if decl.try_field(statement)? {
            continue;
        }
        if statement.name() == "disk" {
            add_all(&mut decl.options, statement, disk_classes, "volume disk")?;
        } else {
            return Err(unknown_keyword(
                statement,
                &format!("volume {}", decl.number),
            ));
        }
    }
    Ok(decl)
}

/// The number of `volume N` (the section's one value).
pub(crate) fn volume_number(node: &Node) -> Result<u16, ConfigError> {
    let token = node.args.first().ok_or_else(|| ConfigError::WrongArity {
        at: node.at().clone(),
        name: "volume".to_string(),
        expected: "a volume number",
    })?;
    let number = plain_number(token, "volume", (0, u64::from(VOLUME_NUMBER_MAX)))?;
    Ok(u16::try_from(number).unwrap_or(VOLUME_NUMBER_MAX))
}

/// Adds `decl` to `volumes`, refusing a second declaration of the same number.
pub(crate) fn insert_volume(
    volumes: &mut BTreeMap<u16, VolumeDecl>,
    decl: VolumeDecl,
) -> Result<(), ConfigError> {
    if let Some(first) = volumes.get(&decl.number) {
        let what = format!("volume {}", decl.number);
        return Err(ConfigError::Duplicate {
            at: decl.at.clone(),
            what,
            first: first.at.clone(),
        });
    }
    volumes.insert(decl.number, decl);
    Ok(())
}

fn parse_device(node: &Node) -> Result<DeviceDecl, ConfigError> {
    let arity = || ConfigError::WrongArity {
        at: node.at().clone(),
        name: "device".to_string(),
        expected: "a path, 'minor N', or a path and 'minor N'",
    };
    let (path, minor_tokens) = match node.args.as_slice() {
        [minor, number] if is_word(minor, "minor") => (None, Some(number)),
        [path] => (Some(path), None),
        [path, minor, number] if is_word(minor, "minor") => (Some(path), Some(number)),
        _ => return Err(arity()),
    };
    let minor = match minor_tokens {
        Some(token) => Some(plain_number(token, "minor", (0, MINOR_MAX))?),
        None => path.and_then(|path| minor_from_path(&path.text)),
    };
    let minor = minor.and_then(|minor| u32::try_from(minor).ok());
    let path = path
        .map(|path| path.text.clone())
        .or_else(|| minor.map(|minor| format!("/dev/drbd{minor}")));
    Ok(DeviceDecl { path, minor })
}

/// The minor of a `/dev/drbdN` path.
fn minor_from_path(path: &str) -> Option<u64> {
    let digits = path.strip_prefix("/dev/drbd")?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|minor| *minor <= MINOR_MAX)
}

fn is_word(token: &Token, word: &str) -> bool {
    token.kind == TokenKind::Word && token.text == word
}

fn parse_disk(node: &Node) -> Result<Option<PathBuf>, ConfigError> {
    let token = super::single_value(node, "a device path or 'none'")?;
    if is_word(token, "none") {
        return Ok(None);
    }
    Ok(Some(PathBuf::from(&token.text)))
}

/// Parses `internal`, `PATH`, `PATH [N]`, `PATH[N]` or `PATH [ N ]`.
fn parse_meta_disk(node: &Node) -> Result<MetaDisk, ConfigError> {
    let Some((first, rest)) = node.args.split_first() else {
        return Err(ConfigError::WrongArity {
            at: node.at().clone(),
            name: node.name().to_string(),
            expected: "'internal' or a device path with an optional [index]",
        });
    };
    if is_word(first, "internal") && rest.is_empty() {
        return Ok(MetaDisk::Internal);
    }
    let mut path = first.text.clone();
    let mut index_text: String = rest.iter().map(|token| token.text.as_str()).collect();
    if rest.is_empty() && first.kind == TokenKind::Word && path.ends_with(']') {
        if let Some(open) = path.rfind('[') {
            index_text = path.split_off(open);
        }
    }
    if index_text.is_empty() {
        return Ok(MetaDisk::External {
            path: PathBuf::from(path),
            index: None,
        });
    }
    let at = rest.first().map_or(&first.at, |token| &token.at);
    let index = parse_index(&index_text, at)?;
    Ok(MetaDisk::External {
        path: PathBuf::from(path),
        index: Some(index),
    })
}

fn parse_index(text: &str, at: &Location) -> Result<u32, ConfigError> {
    let inner = text
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'));
    let number = inner
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()));
    number
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| ConfigError::InvalidNumber {
            at: at.clone(),
            name: "meta-disk index".to_string(),
            value: text.to_string(),
            reason: "expected [N] with N a number".to_string(),
        })
}
