"""Tests of scripts/tidy's detectors: each rule fires on a fixture, and a clean file passes.

Run: python3 -m unittest discover -s scripts -p 'tidy_test.py'
"""

import importlib.machinery
import importlib.util
import os
import unittest

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tidy")
_LOADER = importlib.machinery.SourceFileLoader("tidy", _PATH)
_SPEC = importlib.util.spec_from_loader("tidy", _LOADER)
tidy = importlib.util.module_from_spec(_SPEC)
_LOADER.exec_module(tidy)


def function(name, body_lines, attribute=""):
    """A function of exactly body_lines + 2 lines (the `fn` line and the closing brace)."""
    body = "".join(f"    let x{i} = {i};\n" for i in range(body_lines))
    return f"{attribute}fn {name}() {{\n{body}}}\n"


CLEAN = '''//! A clean module.

/// Braces in strings, chars, raw strings and comments do not count.
fn tricky() -> &'static str {
    let _open = '{';
    let _quote = '\\'';
    let _byte = b'}';
    let _raw = r#"}}} "quoted" {{"#;
    let _bytes = br"}";
    let _escaped = "\\" }";
    /* a block comment with } and /* a nested one } */ still a comment } */
    // a line comment }
    "}"
}

fn with_lifetime<'a>(text: &'a str) -> &'a str {
    'outer: loop {
        break 'outer;
    }
    text
}

trait Shape {
    fn area(&self) -> u32;
}

fn pointer() -> fn(u8) -> u8 {
    |x| x
}
'''


class LineLengths(unittest.TestCase):
    def test_a_line_of_101_columns_is_reported(self):
        text = "//! Doc.\n" + "x" * 100 + "\n" + "y" * 101 + "\n"
        self.assertEqual(
            list(tidy.check_line_lengths(text)), [(3, "line is 101 columns (max 100)")]
        )

    def test_columns_are_characters_not_bytes(self):
        text = "//! " + "é" * 96 + "\n"
        self.assertEqual(list(tidy.check_line_lengths(text)), [])


class ModuleDoc(unittest.TestCase):
    def test_a_file_opening_with_an_inner_doc_comment_passes(self):
        self.assertEqual(list(tidy.check_module_doc("\n//! Doc.\nfn f() {}\n")), [])

    def test_a_file_opening_with_anything_else_is_reported(self):
        for text in ("/// Outer doc.\nfn f() {}\n", "#![no_main]\n//! Doc.\n", "use x;\n"):
            with self.subTest(text=text):
                self.assertEqual(len(list(tidy.check_module_doc(text))), 1)

    def test_an_empty_file_is_reported(self):
        self.assertEqual(len(list(tidy.check_module_doc("\n\n"))), 1)


class FunctionLengths(unittest.TestCase):
    def test_the_clean_fixture_passes_every_check(self):
        self.assertEqual(list(tidy.check_module_doc(CLEAN)), [])
        self.assertEqual(list(tidy.check_line_lengths(CLEAN)), [])
        self.assertEqual(list(tidy.check_function_lengths(CLEAN)), [])

    def test_the_matcher_finds_every_function_and_its_closing_brace(self):
        found = [(name, first, last) for name, first, last, _ in tidy.functions(CLEAN)]
        self.assertEqual(found, [("tricky", 4, 14), ("with_lifetime", 16, 21), ("pointer", 27, 29)])

    def test_80_lines_pass_and_81_are_reported(self):
        text = function("short", 78) + function("long", 79)
        self.assertEqual(
            list(tidy.check_function_lengths(text)),
            [(81, "function `long` is 81 lines (max 80)")],
        )

    def test_braces_in_literals_and_comments_do_not_end_a_function(self):
        filler = "".join(f'    let s{i} = "}}"; // }}\n' for i in range(85))
        text = f"fn long() {{\n{filler}}}\n"
        self.assertEqual(
            list(tidy.check_function_lengths(text)),
            [(1, "function `long` is 87 lines (max 80)")],
        )

    def test_test_functions_may_have_120_lines(self):
        text = function("scenario", 118, "#[test]\n") + function("longer", 119, "#[test]\n")
        self.assertEqual(
            list(tidy.check_function_lengths(text)),
            [(123, "test function `longer` is 121 lines (max 120)")],
        )

    def test_a_function_under_an_attribute_and_doc_is_still_a_test(self):
        text = function("scenario", 100, "/// Doc.\n#[test]\n#[ignore = \"slow\"]\n")
        self.assertEqual(list(tidy.check_function_lengths(text)), [])

    def test_an_attribute_over_several_lines_still_marks_a_test(self):
        attribute = '#[tokio::test(\n    flavor = "multi_thread",\n)]\n'
        text = function("scenario", 100, attribute)
        self.assertEqual(list(tidy.check_function_lengths(text)), [])

    def test_a_helper_in_a_test_module_has_the_plain_limit(self):
        text = "#[cfg(test)]\nmod tests {\n" + function("helper", 90) + "}\n"
        self.assertEqual(len(list(tidy.check_function_lengths(text))), 1)


if __name__ == "__main__":
    unittest.main()
