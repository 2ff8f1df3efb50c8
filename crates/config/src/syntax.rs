//! Builds the generic statement tree from tokens: `keyword value... ;` or
//! `keyword value... { statement... }`.
//!
//! Invariants: sections nest at most [`MAX_NESTING`] levels, so recursion depth is bounded
//! whatever the input; a statement whose keyword is `skip` is parsed (braces must balance) and
//! then dropped together with everything inside it, as drbdadm does. The tree knows nothing
//! about DRBD's sections; `resolve` gives the statements their meaning.

use crate::error::{ConfigError, Location};
use crate::lexer::{Token, TokenKind, Tokens};

/// Sections may nest at most this deep (`resource { on { volume { disk { ... } } } }` is 4).
pub const MAX_NESTING: usize = 16;

/// One statement: a keyword, its values, and a body if it is a section.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub keyword: Token,
    pub args: Vec<Token>,
    pub body: Option<Vec<Node>>,
}

impl Node {
    /// The keyword's text.
    pub fn name(&self) -> &str {
        &self.keyword.text
    }

    /// Where the statement starts.
    pub fn at(&self) -> &Location {
        &self.keyword.at
    }
}

/// Parses a whole file's tokens into top-level statements.
pub(crate) fn parse(tokens: Tokens) -> Result<Vec<Node>, ConfigError> {
    let mut parser = Parser {
        tokens: tokens.tokens.into_iter().peekable(),
        end: tokens.end,
    };
    let nodes = parser.statements(0)?;
    match parser.tokens.next() {
        None => Ok(nodes),
        Some(extra) => Err(unexpected(&extra, "a statement")),
    }
}

fn unexpected(token: &Token, expected: &'static str) -> ConfigError {
    ConfigError::Unexpected {
        at: token.at.clone(),
        expected,
        found: token.describe(),
    }
}

struct Parser {
    tokens: std::iter::Peekable<std::vec::IntoIter<Token>>,
    end: Location,
}

impl Parser {
    fn end_of_file(&self, expected: &'static str) -> ConfigError {
        ConfigError::Unexpected {
            at: self.end.clone(),
            expected,
            found: "end of file".to_string(),
        }
    }

    /// Statements until a `}` (left in place) or the end of input.
    fn statements(&mut self, depth: usize) -> Result<Vec<Node>, ConfigError> {
        let mut nodes = Vec::new();
        while let Some(next) = self.tokens.peek() {
            if next.kind == TokenKind::Close {
                break;
            }
            let node = self.statement(depth)?;
            if node.name() != "skip" {
                nodes.push(node);
            }
        }
        Ok(nodes)
    }

    fn statement(&mut self, depth: usize) -> Result<Node, ConfigError> {
        let keyword = self
            .tokens
            .next()
            .ok_or_else(|| self.end_of_file("a keyword"))?;
        if keyword.kind != TokenKind::Word {
            return Err(unexpected(&keyword, "a keyword"));
        }
        let mut args = Vec::new();
        loop {
            let next = self
                .tokens
                .next()
                .ok_or_else(|| self.end_of_file("';' or '{'"))?;
            match next.kind {
                TokenKind::Word | TokenKind::Quoted => args.push(next),
                TokenKind::Semicolon => {
                    return Ok(Node {
                        keyword,
                        args,
                        body: None,
                    })
                }
                TokenKind::Open => {
                    let body = self.body(&next, depth)?;
                    return Ok(Node {
                        keyword,
                        args,
                        body: Some(body),
                    });
                }
                TokenKind::Close => return Err(unexpected(&next, "';' or '{'")),
            }
        }
    }

    /// The inside of a section whose `{` is `open`, including the closing `}`.
    fn body(&mut self, open: &Token, depth: usize) -> Result<Vec<Node>, ConfigError> {
        let depth = depth + 1;
        if depth > MAX_NESTING {
            return Err(ConfigError::TooDeep {
                at: open.at.clone(),
                limit: MAX_NESTING,
            });
        }
        let nodes = self.statements(depth)?;
        match self.tokens.next() {
            Some(close) if close.kind == TokenKind::Close => Ok(nodes),
            Some(other) => Err(unexpected(&other, "'}'")),
            None => Err(self.end_of_file("'}'")),
        }
    }
}
