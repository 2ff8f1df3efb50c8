//! Lexer tables: token kinds, text after unescaping, and 1-based line:column of each token
//! (drbd.conf(5) "File Format": words, quoted strings, braces, semicolons, # comments).

use std::path::Path;
use std::sync::Arc;

use super::{quote, tokenize, word_or_quoted, TokenKind};

/// Renders tokens as `kind(text)@line:column` separated by spaces, or the error.
#[track_caller]
fn check(input: &str, expected: &str) {
    let file: Arc<Path> = Arc::from(Path::new("t.res"));
    let actual = match tokenize(input, &file) {
        Ok(tokens) => {
            let rendered: Vec<String> = tokens
                .tokens
                .iter()
                .map(|token| {
                    let kind = match token.kind {
                        TokenKind::Word => "w",
                        TokenKind::Quoted => "q",
                        TokenKind::Open | TokenKind::Close | TokenKind::Semicolon => "p",
                    };
                    format!(
                        "{kind}({})@{}:{}",
                        token.text, token.at.line, token.at.column
                    )
                })
                .collect();
            rendered.join(" ")
        }
        Err(error) => error.to_string(),
    };
    assert_eq!(actual, expected, "input: {input:?}");
}

#[test]
fn tokens() {
    let table: &[(&str, &str)] = &[
        ("", ""),
        ("protocol C;", "w(protocol)@1:1 w(C)@1:10 p(;)@1:11"),
        (
            "net{ping-int 5;}",
            "w(net)@1:1 p({)@1:4 w(ping-int)@1:5 w(5)@1:14 p(;)@1:15 p(})@1:16",
        ),
        ("a # comment ; {\nb", "w(a)@1:1 w(b)@2:1"),
        ("a#b", "w(a)@1:1"),
        ("\"x y\" z", "q(x y)@1:1 w(z)@1:7"),
        (r#""a\"b\\c\nd\te\q""#, "q(a\"b\\c\nd\teq)@1:1"),
        ("\"\"", "q()@1:1"),
        (
            "address ipv6 [fd00::1]:7789;",
            "w(address)@1:1 w(ipv6)@1:9 w([fd00::1]:7789)@1:14 p(;)@1:28",
        ),
        (
            "meta-disk /dev/sdb1[0];",
            "w(meta-disk)@1:1 w(/dev/sdb1[0])@1:11 p(;)@1:23",
        ),
        ("  \t x\r\n  y", "w(x)@1:5 w(y)@2:3"),
        ("é ü;", "w(é)@1:1 w(ü)@1:3 p(;)@1:4"),
        ("x\"y\"", "w(x)@1:1 q(y)@1:2"),
        ("\"open", "t.res:1:1: unterminated string"),
        ("a \"line\nbreak\"", "t.res:1:3: unterminated string"),
        ("\"trailing\\", "t.res:1:1: unterminated string"),
    ];
    for (input, expected) in table {
        check(input, expected);
    }
}

#[test]
fn quoting_reads_back() {
    let table: &[(&str, &str, &str)] = &[
        ("plain", "plain", "\"plain\""),
        ("two words", "\"two words\"", "\"two words\""),
        ("", "\"\"", "\"\""),
        ("a\"b", "\"a\\\"b\"", "\"a\\\"b\""),
        ("semi;colon", "\"semi;colon\"", "\"semi;colon\""),
        ("line\nbreak", "\"line\\nbreak\"", "\"line\\nbreak\""),
        ("back\\slash", "\"back\\\\slash\"", "\"back\\\\slash\""),
    ];
    let file: Arc<Path> = Arc::from(Path::new("t.res"));
    for (text, word, quoted) in table {
        assert_eq!(word_or_quoted(text), *word);
        assert_eq!(quote(text), *quoted);
        for written in [word_or_quoted(text), quote(text)] {
            let tokens = tokenize(&written, &file).map(|tokens| tokens.tokens);
            let texts: Vec<String> = tokens
                .into_iter()
                .flatten()
                .map(|token| token.text)
                .collect();
            assert_eq!(texts, vec![text.to_string()], "written as {written}");
        }
    }
}
