"""Aggregation: median, spread, grouping order, per-repetition ratios."""

import math
import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import stats


class Median(unittest.TestCase):
    def test_table(self):
        cases = [([], None), ([None], None), ([3], 3), ([3, 1, 2], 2), ([4, 1, 3, 2], 2.5),
                 ([1, None, 5], 3.0), ([-1, -3], -2.0)]
        for values, want in cases:
            with self.subTest(values=values):
                self.assertEqual(stats.median(values), want)

    def test_spread(self):
        self.assertEqual(stats.spread([3, None, 1, 2]), (1, 3))
        self.assertEqual(stats.spread([None]), (None, None))


class Aggregate(unittest.TestCase):
    rows = [
        {"case": "b", "workload": "w", "rep": 1, "iops": 10.0},
        {"case": "a", "workload": "w", "rep": 1, "iops": 1.0},
        {"case": "b", "workload": "w", "rep": 2, "iops": 30.0},
        {"case": "b", "workload": "w", "rep": 3, "iops": 20.0},
        {"case": "a", "workload": "w", "rep": 2, "iops": None},
        {"case": "a", "workload": "w", "rep": 3, "iops": math.nan},
    ]

    def test_groups_in_first_appearance_order(self):
        aggs = stats.aggregate(self.rows, ["case", "workload"], ["iops"])
        self.assertEqual([a["case"] for a in aggs], ["b", "a"])

    def test_median_and_spread(self):
        b, a = stats.aggregate(self.rows, ["case", "workload"], ["iops", "absent"])
        self.assertEqual((b["iops"], b["iops_min"], b["iops_max"], b["n"]), (20.0, 10.0, 30.0, 3))
        self.assertEqual((a["iops"], a["iops_min"], a["iops_max"], a["n"]), (1.0, 1.0, 1.0, 3))
        self.assertIsNone(b["absent"])

    def test_paired_ratios_stay_within_a_repetition(self):
        rows = [{"case": "x", "rep": 1, "v": 50}, {"case": "base", "rep": 1, "v": 100},
                {"case": "x", "rep": 2, "v": 90}, {"case": "base", "rep": 2, "v": 100},
                {"case": "x", "rep": 3, "v": 10}, {"case": "base", "rep": 3, "v": 0}]
        self.assertEqual(stats.paired_ratios(rows, "v", {"case": "x"}, {"case": "base"}), [0.5, 0.9])
        self.assertEqual(stats.paired_ratios(rows, "v", {"case": "nothing"}, {"case": "base"}), [])

    def test_ratio(self):
        self.assertIsNone(stats.ratio(None, 2))
        self.assertIsNone(stats.ratio(1, 0))
        self.assertEqual(stats.ratio(1, 4), 0.25)


if __name__ == "__main__":
    unittest.main()
