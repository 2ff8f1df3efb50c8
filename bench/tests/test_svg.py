"""The SVG plotter: well-formed XML, the expected number of series and marks, bad input refused."""

import math
import unittest
import xml.etree.ElementTree as ET

import helpers  # noqa: F401  (sets sys.path)

from lib import svg
from lib.errors import PlotError

NS = "{http://www.w3.org/2000/svg}"


def parse(text):
    return ET.fromstring(text)


def series(root):
    return [g for g in root.iter(f"{NS}g") if g.get("class") == "series"]


def marks(group, tag, cls):
    return [e for e in group.iter(f"{NS}{tag}") if e.get("class") == cls]


class Ticks(unittest.TestCase):
    def test_table(self):
        cases = [((0, 87), [0, 20, 40, 60, 80, 100]), ((0, 1820), [0, 500, 1000, 1500, 2000]),
                 ((0, 0.3), [0, 0.1, 0.2, 0.3]), ((0, 0), [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
                 ((0, 100), [0, 20, 40, 60, 80, 100])]
        for (lo, hi), want in cases:
            with self.subTest(lo=lo, hi=hi):
                got = svg.ticks(lo, hi)
                self.assertEqual(len(got), len(want))
                for g, w in zip(got, want):
                    self.assertAlmostEqual(g, w)
                self.assertLessEqual(got[0], lo)
                self.assertGreaterEqual(got[-1], hi)

    def test_labels(self):
        self.assertEqual([svg.fmt_tick(v) for v in (3, 0.25, 20000, 1.5e6)], ["3", "0.25", "20k", "1.5M"])


class LineChart(unittest.TestCase):
    def test_series_and_points(self):
        text = svg.line_chart("IOPS vs latency", "added latency (ms)", "IOPS",
                              [("QD1", [(0, 100), (2, 50), (5, 20), (10, 9), (20, 4)]),
                               ("QD8", [(20, 30), (0, 800), (2, 400)])])
        root = parse(text)
        groups = series(root)
        self.assertEqual([g.get("data-name") for g in groups], ["QD1", "QD8"])
        self.assertEqual([len(marks(g, "circle", "point")) for g in groups], [5, 3])
        line = marks(groups[1], "polyline", "line")[0]
        xs = [float(p.split(",")[0]) for p in line.get("points").split()]
        self.assertEqual(xs, sorted(xs))
        self.assertEqual(root.find(f"{NS}title").text, "IOPS vs latency")

    def test_deterministic(self):
        args = ("t", "x", "y", [("a", [(1, 2), (3, 4)])])
        self.assertEqual(svg.line_chart(*args), svg.line_chart(*args))

    def test_bad_input(self):
        cases = [[], [("a", [])], [("a", [(0, math.nan)])], [("a", [(math.inf, 1)])], [("a", [(0, "1")])]]
        for s in cases:
            with self.subTest(series=s), self.assertRaises(PlotError):
                svg.line_chart("t", "x", "y", s)


class BarChart(unittest.TestCase):
    def test_bars_whiskers_reference(self):
        text = svg.bar_chart("peers <&> \"quoted\"", "% of standalone", ["seq", "qd1", "qd32"],
                             [("proto-A", [50, 60, 70], [(40, 55), None, (65, 75)]),
                              ("nbdkit & co", [90, None, 80])],
                             reference=(100, "standalone = 100%"))
        root = parse(text)
        groups = series(root)
        self.assertEqual([g.get("data-name") for g in groups], ["proto-A", "nbdkit & co"])
        self.assertEqual([len(marks(g, "rect", "bar")) for g in groups], [3, 2])
        self.assertEqual([len(marks(g, "line", "whisker")) for g in groups], [2, 0])
        self.assertEqual(len([g for g in root.iter(f"{NS}g") if g.get("class") == "reference"]), 1)
        self.assertIn("peers <&>", root.find(f"{NS}title").text)

    def test_taller_value_taller_bar(self):
        root = parse(svg.bar_chart("t", "y", ["g"], [("a", [10]), ("b", [40])]))
        heights = [float(marks(g, "rect", "bar")[0].get("height")) for g in series(root)]
        self.assertAlmostEqual(heights[1], 4 * heights[0], places=0)

    def test_bad_input(self):
        cases = [([], [("a", [])]), (["g"], []), (["g", "h"], [("a", [1])]), (["g"], [("a", [-1])]),
                 (["g"], [("a", [None])]), (["g"], [("a", [math.nan])]), (["g"], [("a", [1], [(0, 1), (0, 2)])])]
        for groups, s in cases:
            with self.subTest(groups=groups, series=s), self.assertRaises(PlotError):
                svg.bar_chart("t", "y", groups, s)


if __name__ == "__main__":
    unittest.main()
