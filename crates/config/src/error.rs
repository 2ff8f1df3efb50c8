//! The crate's one error type and the source location every error carries.
//!
//! Invariant: every variant except [`ConfigError::Io`] holds a [`Location`], and its
//! `Display` starts with `file:line:column: ` (1-based, pointing at the offending token),
//! so an operator can jump straight to the culprit.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A position in a configuration file: the file as it was named, a 1-based line and a
/// 1-based column counted in characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The file, as named by the caller or by the `include` statement that reached it.
    pub file: Arc<Path>,
    /// Line number, starting at 1.
    pub line: u32,
    /// Column number in characters, starting at 1.
    pub column: u32,
}

impl fmt::Display for Location {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}:{}:{}",
            self.file.display(),
            self.line,
            self.column
        )
    }
}

/// Everything that can go wrong while reading, parsing or resolving a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be opened or read.
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid UTF-8; the location is the first bad byte.
    #[error("{at}: file is not valid UTF-8")]
    NotUtf8 {
        /// Where the first invalid byte is.
        at: Location,
    },
    /// A file is larger than the input bound.
    #[error("{at}: file is larger than {limit_bytes} bytes")]
    FileTooLarge {
        /// The file (line 1, column 1) or the include statement that named it.
        at: Location,
        /// The bound that was exceeded.
        limit_bytes: u64,
    },
    /// A double-quoted string is not closed before the end of its line.
    #[error("{at}: unterminated string")]
    UnterminatedString {
        /// Where the opening quote is.
        at: Location,
    },
    /// The token at `at` does not fit the grammar.
    #[error("{at}: expected {expected}, found {found}")]
    Unexpected {
        /// Where the unexpected token is.
        at: Location,
        /// What the grammar allows here.
        expected: &'static str,
        /// What was found, already quoted for the message.
        found: String,
    },
    /// Sections are nested deeper than the bound.
    #[error("{at}: sections are nested deeper than {limit} levels")]
    TooDeep {
        /// The brace that opened one level too many.
        at: Location,
        /// The nesting bound.
        limit: usize,
    },
    /// `include` statements are nested deeper than the bound (this also stops include loops).
    #[error("{at}: includes are nested deeper than {limit} levels")]
    IncludeTooDeep {
        /// The include statement that went one level too deep.
        at: Location,
        /// The include depth bound.
        limit: usize,
    },
    /// More files were included than the bound allows.
    #[error("{at}: more than {limit} files are included")]
    TooManyFiles {
        /// The include statement that crossed the bound.
        at: Location,
        /// The bound on the number of files.
        limit: usize,
    },
    /// An include pattern is not a valid glob.
    #[error("{at}: invalid include pattern '{pattern}': {reason}")]
    BadPattern {
        /// The include statement's pattern token.
        at: Location,
        /// The pattern as written.
        pattern: String,
        /// Why the glob library rejected it.
        reason: String,
    },
    /// An include pattern matched something that is not a regular file.
    #[error("{at}: included path '{}' is not a regular file", path.display())]
    NotAFile {
        /// The include statement's pattern token.
        at: Location,
        /// The matched path.
        path: PathBuf,
    },
    /// An option name that no section knows.
    #[error("{at}: unknown option '{name}' in {section} section")]
    UnknownOption {
        /// The option keyword.
        at: Location,
        /// The option name as written.
        name: String,
        /// The section kind, e.g. `net`.
        section: &'static str,
    },
    /// A known option written in a section that does not take it.
    #[error("{at}: option '{name}' is not allowed in {section} section (it belongs in {home})")]
    OptionNotAllowed {
        /// The option keyword.
        at: Location,
        /// The option name.
        name: String,
        /// A description of the section it was found in.
        section: String,
        /// Where the option may be written instead.
        home: &'static str,
    },
    /// A keyword or section that is not part of the grammar at this place.
    #[error("{at}: unknown keyword '{keyword}' in {context}")]
    UnknownKeyword {
        /// The keyword.
        at: Location,
        /// The keyword as written.
        keyword: String,
        /// Where it was found, e.g. `resource 'r0'`.
        context: String,
    },
    /// Valid DRBD syntax for a feature tandem does not implement.
    #[error("{at}: {what} is not supported by tandem")]
    Unsupported {
        /// The keyword.
        at: Location,
        /// The feature.
        what: String,
    },
    /// A number outside its option's range (after unit conversion).
    #[error("{at}: {name} {value} is out of range {min}..={max}{unit}")]
    OutOfRange {
        /// The value token.
        at: Location,
        /// The option or keyword.
        name: String,
        /// The value as written, with its converted form when a suffix was used.
        value: String,
        /// Smallest allowed value, in the option's unit.
        min: u64,
        /// Largest allowed value, in the option's unit.
        max: u64,
        /// The unit in parentheses with a leading space, or empty for plain counts.
        unit: String,
    },
    /// A value that should be a number is not one.
    #[error("{at}: {name}: '{value}' is not a valid number: {reason}")]
    InvalidNumber {
        /// The value token.
        at: Location,
        /// The option or keyword.
        name: String,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value outside an enumeration.
    #[error("{at}: {name} '{value}' is not valid; allowed values are: {allowed}")]
    InvalidValue {
        /// The value token.
        at: Location,
        /// The option or keyword.
        name: String,
        /// The value as written.
        value: String,
        /// The allowed values, separated by ` | `.
        allowed: String,
    },
    /// A string longer than its option allows.
    #[error("{at}: {name} is longer than {max_len} characters")]
    TooLong {
        /// The value token.
        at: Location,
        /// The option.
        name: String,
        /// The length bound.
        max_len: usize,
    },
    /// A statement with the wrong number of values.
    #[error("{at}: {name} expects {expected}")]
    WrongArity {
        /// The keyword.
        at: Location,
        /// The keyword as written.
        name: String,
        /// What it expects, e.g. `one value`.
        expected: &'static str,
    },
    /// Something that must be unique is defined twice.
    #[error("{at}: {what} is defined twice (first at {first})")]
    Duplicate {
        /// The second definition.
        at: Location,
        /// What is duplicated.
        what: String,
        /// The first definition.
        first: Location,
    },
    /// A resource or host name with characters outside the allowed set.
    #[error("{at}: invalid {kind} name '{name}': use only A-Z a-z 0-9 _ . -")]
    InvalidName {
        /// The name token.
        at: Location,
        /// `resource` or `host`.
        kind: &'static str,
        /// The name as written.
        name: String,
    },
    /// A network address that does not parse or is not usable.
    #[error("{at}: invalid address '{value}': {reason}")]
    InvalidAddress {
        /// The address token.
        at: Location,
        /// The address as written.
        value: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A host name referenced by a connection or mesh that has no `on` section.
    #[error("{at}: host '{name}' is not defined in resource '{resource}'")]
    UnknownHost {
        /// The reference.
        at: Location,
        /// The host name.
        name: String,
        /// The resource being resolved.
        resource: String,
    },
    /// A rule across several statements is broken (missing node-id, volume without disk, ...).
    #[error("{at}: {message}")]
    Invalid {
        /// The statement or section the rule is about.
        at: Location,
        /// The rule that is broken.
        message: String,
    },
}

impl ConfigError {
    /// The location the error points at; `None` only for [`ConfigError::Io`].
    pub fn location(&self) -> Option<&Location> {
        match self {
            Self::Io { .. } => None,
            Self::NotUtf8 { at }
            | Self::FileTooLarge { at, .. }
            | Self::UnterminatedString { at }
            | Self::Unexpected { at, .. }
            | Self::TooDeep { at, .. }
            | Self::IncludeTooDeep { at, .. }
            | Self::TooManyFiles { at, .. }
            | Self::BadPattern { at, .. }
            | Self::NotAFile { at, .. }
            | Self::UnknownOption { at, .. }
            | Self::OptionNotAllowed { at, .. }
            | Self::UnknownKeyword { at, .. }
            | Self::Unsupported { at, .. }
            | Self::OutOfRange { at, .. }
            | Self::InvalidNumber { at, .. }
            | Self::InvalidValue { at, .. }
            | Self::TooLong { at, .. }
            | Self::WrongArity { at, .. }
            | Self::Duplicate { at, .. }
            | Self::InvalidName { at, .. }
            | Self::InvalidAddress { at, .. }
            | Self::UnknownHost { at, .. }
            | Self::Invalid { at, .. } => Some(at),
        }
    }

    /// Shorthand for [`ConfigError::Invalid`].
    pub(crate) fn invalid(at: &Location, message: impl Into<String>) -> Self {
        Self::Invalid {
            at: at.clone(),
            message: message.into(),
        }
    }
}
