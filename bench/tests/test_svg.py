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


class TimeseriesChart(unittest.TestCase):
    def panels(self, log=True):
        return [svg.Panel("IOPS", (("C", [(0, 100), (1, 200), (2, 150)]), ("A", [(2, 90), (0, 300)]))),
                svg.Panel("latency (µs)", (("C", [(0, 100), (1, 20000), (2, 150)]),), log=log),
                svg.Panel("protocol", (("SRM", [(0, 1), (1, 0), (2, 1)]),), step=True, y_names=((0, "A"), (1, "C"))),
                svg.Panel("backlog (MiB)", (("SRM", [(0, 1), (1, 30)]),), reference=(64, "bound 64 MiB"))]

    def test_panels_series_colours_and_markers(self):
        root = parse(svg.timeseries_chart("live", "time (s)", self.panels(), [(0, "0 ms"), (1, "+20 ms")]))
        panels = [g for g in root.iter(f"{NS}g") if g.get("class") == "panel"]
        self.assertEqual([p.get("data-y-label") for p in panels], ["IOPS", "latency (µs)", "protocol", "backlog (MiB)"])
        groups = series(root)
        self.assertEqual([g.get("data-name") for g in groups], ["C", "A", "C", "SRM", "SRM"])
        colour = {g.get("data-name"): marks(g, "polyline", "line")[0].get("stroke") for g in groups}
        self.assertEqual(len(set(colour.values())), 3)
        self.assertEqual(marks(groups[0], "polyline", "line")[0].get("stroke"),
                         marks(groups[2], "polyline", "line")[0].get("stroke"))
        # A step line holds each value until the next point: 3 points become 5 vertices.
        self.assertEqual(len(marks(groups[3], "polyline", "line")[0].get("points").split()), 5)
        self.assertEqual(len([e for e in root.iter(f"{NS}line") if e.get("class") == "marker"]), 2)
        ticks = [t.text for t in panels[2].iter(f"{NS}text") if t.get("class") == "tick"]
        self.assertEqual(ticks, ["A", "C"])
        legend = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "legend-entry"]
        self.assertEqual(legend, ["C", "A", "SRM"])

    def test_log_axis(self):
        self.assertEqual(svg.log_ticks(100, 20000), [100.0, 1000.0, 10000.0, 100000.0])
        self.assertEqual(svg.log_ticks(5, 5), [1.0, 10.0])
        root = parse(svg.timeseries_chart("live", "t", self.panels()))
        lat = [g for g in root.iter(f"{NS}g") if g.get("class") == "panel"][1]
        ticks = [t.text for t in lat.iter(f"{NS}text") if t.get("class") == "tick"]
        self.assertEqual(ticks, ["100", "1000", "10k", "100k"])
        ys = [float(p.split(",")[1]) for p in marks(series(lat)[0], "polyline", "line")[0].get("points").split()]
        # 100 and 150 sit close together at the bottom, 20000 high up: a log scale.
        self.assertLess(abs(ys[0] - ys[2]), 0.2 * abs(ys[0] - ys[1]))

    def test_bad_input(self):
        with self.assertRaises(PlotError):
            svg.timeseries_chart("t", "x", [])
        with self.assertRaises(PlotError):
            svg.timeseries_chart("t", "x", [svg.Panel("y", (("a", [(0, 0)]),), log=True)])
        with self.assertRaises(PlotError):
            svg.timeseries_chart("t", "x", [svg.Panel("y", (("a", []),))])
        with self.assertRaises(PlotError):
            svg.timeseries_chart("t", "x", [svg.Panel("y", (("a", [(0, math.nan)]),))])

    def test_deterministic(self):
        self.assertEqual(svg.timeseries_chart("t", "x", self.panels()), svg.timeseries_chart("t", "x", self.panels()))

    def test_reference_inside_its_panel(self):
        root = parse(svg.timeseries_chart("t", "x", self.panels()))
        panel = [g for g in root.iter(f"{NS}g") if g.get("class") == "panel"][3]
        frame = panel.find(f"{NS}g/{NS}rect")
        top, height = float(frame.get("y")), float(frame.get("height"))
        line = [g for g in panel.iter(f"{NS}g") if g.get("class") == "reference"][0].find(f"{NS}line")
        self.assertTrue(top <= float(line.get("y1")) <= top + height)

    def test_gaps_break_the_line(self):
        root = parse(svg.timeseries_chart("t", "x", [svg.Panel("y", (("a", [(0, 1), (1, 2), (2, None), (3, 4)]),))]))
        lines = marks(series(root)[0], "polyline", "line")
        self.assertEqual([len(l.get("points").split()) for l in lines], [2, 1])
