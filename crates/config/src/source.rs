//! Reads configuration files and splices `include` statements into one statement list.
//!
//! Invariants (the input bounds): no file larger than [`MAX_FILE_BYTES`] is read, includes
//! nest at most [`MAX_INCLUDE_DEPTH`] levels (which also ends include loops), and at most
//! [`MAX_FILES`] files are read per load. `include` is only recognised at top level; a
//! relative pattern is taken relative to the including file's directory; matches are read in
//! sorted order; a pattern matching nothing is not an error (as in drbdadm).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{ConfigError, Location};
use crate::lexer;
use crate::syntax::{self, Node};

/// Largest file, in bytes, that is read.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// Deepest chain of includes (the top-level file is depth 0).
pub const MAX_INCLUDE_DEPTH: usize = 8;
/// Most files read for one configuration, the top-level file included.
pub const MAX_FILES: usize = 1024;

/// Reads `path` and everything it includes.
pub(crate) fn load(path: &Path) -> Result<Vec<Node>, ConfigError> {
    let file: Arc<Path> = Arc::from(path);
    let start = Location {
        file: Arc::clone(&file),
        line: 1,
        column: 1,
    };
    let text = read_bounded(path, &start)?;
    Loader {
        files_read: 1,
        follow_includes: true,
    }
    .expand(&text, &file, 0)
}

/// Parses `text` as the contents of `file_name`; includes are read from disk when
/// `follow_includes`, and are an error otherwise (then nothing is read from disk).
pub(crate) fn parse_text(
    text: &str,
    file_name: &Path,
    follow_includes: bool,
) -> Result<Vec<Node>, ConfigError> {
    let file: Arc<Path> = Arc::from(file_name);
    if u64::try_from(text.len()).map_or(true, |length| length > MAX_FILE_BYTES) {
        let at = Location {
            file,
            line: 1,
            column: 1,
        };
        return Err(ConfigError::FileTooLarge {
            at,
            limit_bytes: MAX_FILE_BYTES,
        });
    }
    Loader {
        files_read: 1,
        follow_includes,
    }
    .expand(text, &file, 0)
}

/// Reads a whole file, refusing more than [`MAX_FILE_BYTES`] (reported at `at`) and invalid
/// UTF-8 (reported at the offending byte of `path`).
fn read_bounded(path: &Path, at: &Location) -> Result<String, ConfigError> {
    let io_error = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error)?;
    if u64::try_from(bytes.len()).map_or(true, |length| length > MAX_FILE_BYTES) {
        return Err(ConfigError::FileTooLarge {
            at: at.clone(),
            limit_bytes: MAX_FILE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|error| ConfigError::NotUtf8 {
        at: position_of(
            error.as_bytes(),
            error.utf8_error().valid_up_to(),
            &Arc::from(path),
        ),
    })
}

/// The line and column of byte `offset`, all of whose preceding bytes are valid UTF-8.
fn position_of(bytes: &[u8], offset: usize, file: &Arc<Path>) -> Location {
    let valid = std::str::from_utf8(bytes.get(..offset).unwrap_or_default()).unwrap_or_default();
    let line = valid.matches('\n').count() + 1;
    let column = valid
        .rsplit('\n')
        .next()
        .map_or(0, |tail| tail.chars().count())
        + 1;
    let to_u32 = |value: usize| u32::try_from(value).unwrap_or(u32::MAX);
    Location {
        file: Arc::clone(file),
        line: to_u32(line),
        column: to_u32(column),
    }
}

struct Loader {
    files_read: usize,
    /// False for text parsed without file access: an `include` is then an error.
    follow_includes: bool,
}

impl Loader {
    /// Parses one file's text and replaces its top-level includes by the included statements.
    fn expand(
        &mut self,
        text: &str,
        file: &Arc<Path>,
        depth: usize,
    ) -> Result<Vec<Node>, ConfigError> {
        let nodes = syntax::parse(lexer::tokenize(text, file)?)?;
        let mut expanded = Vec::with_capacity(nodes.len());
        for node in nodes {
            if node.name() == "include" {
                expanded.extend(self.include(&node, file, depth)?);
            } else {
                expanded.push(node);
            }
        }
        Ok(expanded)
    }

    fn include(
        &mut self,
        node: &Node,
        file: &Path,
        depth: usize,
    ) -> Result<Vec<Node>, ConfigError> {
        if !self.follow_includes {
            return Err(ConfigError::invalid(
                node.at(),
                "include is not allowed in text parsed without file access",
            ));
        }
        let pattern = match (node.args.as_slice(), &node.body) {
            ([pattern], None) => pattern,
            _ => {
                let name = node.name().to_string();
                return Err(ConfigError::WrongArity {
                    at: node.at().clone(),
                    name,
                    expected: "one file pattern",
                });
            }
        };
        if depth + 1 > MAX_INCLUDE_DEPTH {
            return Err(ConfigError::IncludeTooDeep {
                at: node.at().clone(),
                limit: MAX_INCLUDE_DEPTH,
            });
        }
        let mut nodes = Vec::new();
        for path in matching_files(&pattern.text, file, &pattern.at)? {
            self.files_read += 1;
            if self.files_read > MAX_FILES {
                return Err(ConfigError::TooManyFiles {
                    at: node.at().clone(),
                    limit: MAX_FILES,
                });
            }
            let included: Arc<Path> = Arc::from(path.as_path());
            let text = read_bounded(&path, &pattern.at)?;
            nodes.extend(self.expand(&text, &included, depth + 1)?);
        }
        Ok(nodes)
    }
}

/// The files `pattern` matches, relative to `including`'s directory, sorted.
fn matching_files(
    pattern: &str,
    including: &Path,
    at: &Location,
) -> Result<Vec<PathBuf>, ConfigError> {
    let full = if Path::new(pattern).is_absolute() {
        pattern.to_string()
    } else {
        let directory = including
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty());
        let directory = directory.unwrap_or(Path::new("."));
        format!(
            "{}/{}",
            glob::Pattern::escape(&directory.to_string_lossy()),
            pattern
        )
    };
    let bad = |reason: String| ConfigError::BadPattern {
        at: at.clone(),
        pattern: pattern.to_string(),
        reason,
    };
    // Like glob(3) as drbdadm uses it, `*` does not match a leading dot (editor backups).
    let options = glob::MatchOptions {
        require_literal_leading_dot: true,
        ..glob::MatchOptions::new()
    };
    let paths = glob::glob_with(&full, options).map_err(|error| bad(error.to_string()))?;
    let mut files = Vec::new();
    for entry in paths {
        let path = entry.map_err(|error| ConfigError::Io {
            path: error.path().to_path_buf(),
            source: error.into(),
        })?;
        let metadata = std::fs::metadata(&path).map_err(|source| ConfigError::Io {
            path: path.clone(),
            source,
        })?;
        if !metadata.is_file() {
            return Err(ConfigError::NotAFile {
                at: at.clone(),
                path,
            });
        }
        files.push(path);
    }
    files.sort();
    Ok(files)
}
