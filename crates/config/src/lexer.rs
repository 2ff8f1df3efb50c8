//! Splits drbd.conf text into tokens: words, double-quoted strings, `{`, `}` and `;`.
//!
//! Invariants: `#` starts a comment to the end of the line anywhere outside a string;
//! a word is a maximal run of characters other than whitespace, `{`, `}`, `;`, `"` and `#`
//! (so `[fd01::1]:7789` and `/dev/sdb1[0]` are single words); strings do not span lines and
//! understand the escapes `\"`, `\\`, `\n` and `\t` (any other escaped character stands for
//! itself). Every token records the 1-based line and character column where it starts.

use std::path::Path;
use std::sync::Arc;

use crate::error::{ConfigError, Location};

#[cfg(test)]
mod tests;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A bare word such as `protocol`, `C` or `10.0.0.1:7789`.
    Word,
    /// A double-quoted string; `text` holds the unescaped contents.
    Quoted,
    /// `{`
    Open,
    /// `}`
    Close,
    /// `;`
    Semicolon,
}

/// One token with its text and where it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    pub text: String,
    pub at: Location,
}

impl Token {
    /// The token as an error message shows it.
    pub fn describe(&self) -> String {
        match self.kind {
            TokenKind::Word => format!("'{}'", self.text),
            TokenKind::Quoted => format!("string \"{}\"", self.text),
            TokenKind::Open => "'{'".to_string(),
            TokenKind::Close => "'}'".to_string(),
            TokenKind::Semicolon => "';'".to_string(),
        }
    }
}

/// The tokens of one file and the location just past its end.
#[derive(Debug)]
pub(crate) struct Tokens {
    pub tokens: Vec<Token>,
    pub end: Location,
}

/// Walks the characters of the input and keeps track of line and column.
struct Cursor<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    file: Arc<Path>,
    line: u32,
    column: u32,
}

impl Cursor<'_> {
    fn here(&self) -> Location {
        Location {
            file: Arc::clone(&self.file),
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let next = self.chars.next()?;
        if next == '\n' {
            self.line = self.line.saturating_add(1);
            self.column = 1;
        } else {
            self.column = self.column.saturating_add(1);
        }
        Some(next)
    }
}

/// True for characters that end a word.
fn is_delimiter(character: char) -> bool {
    character.is_whitespace() || matches!(character, '{' | '}' | ';' | '"' | '#')
}

/// Tokenizes `text`, attributing locations to `file`.
pub(crate) fn tokenize(text: &str, file: &Arc<Path>) -> Result<Tokens, ConfigError> {
    let mut cursor = Cursor {
        chars: text.chars().peekable(),
        file: Arc::clone(file),
        line: 1,
        column: 1,
    };
    let mut tokens = Vec::new();
    while let Some(next) = cursor.peek() {
        let at = cursor.here();
        let simple = match next {
            '{' => Some(TokenKind::Open),
            '}' => Some(TokenKind::Close),
            ';' => Some(TokenKind::Semicolon),
            _ => None,
        };
        if let Some(kind) = simple {
            cursor.bump();
            tokens.push(Token {
                kind,
                text: next.to_string(),
                at,
            });
        } else if next.is_whitespace() {
            cursor.bump();
        } else if next == '#' {
            skip_comment(&mut cursor);
        } else if next == '"' {
            let text = read_string(&mut cursor, &at)?;
            tokens.push(Token {
                kind: TokenKind::Quoted,
                text,
                at,
            });
        } else {
            let text = read_word(&mut cursor);
            tokens.push(Token {
                kind: TokenKind::Word,
                text,
                at,
            });
        }
    }
    Ok(Tokens {
        tokens,
        end: cursor.here(),
    })
}

fn skip_comment(cursor: &mut Cursor<'_>) {
    while let Some(next) = cursor.peek() {
        if next == '\n' {
            return;
        }
        cursor.bump();
    }
}

fn read_word(cursor: &mut Cursor<'_>) -> String {
    let mut word = String::new();
    while let Some(next) = cursor.peek() {
        if is_delimiter(next) {
            break;
        }
        word.push(next);
        cursor.bump();
    }
    word
}

/// Reads a quoted string; the cursor is on the opening quote.
fn read_string(cursor: &mut Cursor<'_>, start: &Location) -> Result<String, ConfigError> {
    let unterminated = || ConfigError::UnterminatedString { at: start.clone() };
    cursor.bump();
    let mut text = String::new();
    loop {
        match cursor.bump() {
            None | Some('\n') => return Err(unterminated()),
            Some('"') => return Ok(text),
            Some('\\') => match cursor.bump() {
                None | Some('\n') => return Err(unterminated()),
                Some('n') => text.push('\n'),
                Some('t') => text.push('\t'),
                Some(other) => text.push(other),
            },
            Some(other) => text.push(other),
        }
    }
}

/// Quotes `text` so that [`tokenize`] reads it back as one token with the same text.
pub(crate) fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// Writes `text` as a bare word when that reads back unchanged, else quoted.
pub(crate) fn word_or_quoted(text: &str) -> String {
    if !text.is_empty() && !text.chars().any(is_delimiter) && !text.contains('\\') {
        text.to_string()
    } else {
        quote(text)
    }
}
