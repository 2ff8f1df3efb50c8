"""The failover experiment's pure parts: the plan per mode, the parts of one failover from its
instants, the summary (median, min, max) and what dominates, the block written, the status
helpers, the liveness settings in the generated drbd.conf, and the estimates."""

import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import cluster
from lib.errors import BenchError
from lib.experiments import failover
from lib.modes import MODES

MIB = 1 << 20


def row(rep, detection, promotion, first_write, verified=True):
    """A failover row as run_once makes it (seconds)."""
    return {"rep": rep, "on_bob_disk": verified,
            **failover.parts(0.0, detection, detection + promotion, detection + promotion + first_write)}


class Plan(unittest.TestCase):
    def test_modes(self):
        for mode, reps, image in (("smoke", 3, 64 * MIB), ("quick", 5, 64 * MIB), ("default", 10, 64 * MIB),
                                  ("full", 10, 64 * MIB)):
            with self.subTest(mode=mode):
                self.assertEqual(failover.plan(MODES[mode]), failover.Plan(reps, image))

    def test_estimates_grow_with_the_repetitions(self):
        est = {m: failover.estimate_s(MODES[m]) for m in ("smoke", "quick", "default")}
        self.assertLess(est["smoke"], est["quick"])
        self.assertLess(est["quick"], est["default"])
        self.assertLess(est["default"] / 60, 1.0)


class Parts(unittest.TestCase):
    def test_parts_add_up(self):
        p = failover.parts(10.0, 10.5, 10.75, 11.0)
        self.assertEqual(p, {"detection_s": 0.5, "promotion_s": 0.25, "first_write_s": 0.25, "total_s": 1.0})
        self.assertAlmostEqual(p["detection_s"] + p["promotion_s"] + p["first_write_s"], p["total_s"])

    def test_out_of_order_instants_are_an_error(self):
        for instants in ((1.0, 0.5, 2.0, 3.0), (0.0, 1.0, 0.5, 3.0), (0.0, 1.0, 2.0, 1.5)):
            with self.subTest(instants=instants):
                with self.assertRaises(BenchError):
                    failover.parts(*instants)

    def test_summary_median_min_max_of_verified_rows(self):
        rows = [row(1, 0.004, 0.002, 0.010), row(2, 0.002, 0.006, 0.030), row(3, 0.006, 0.004, 0.020),
                row(4, 9.0, 9.0, 9.0, verified=False)]
        s = failover.summary(rows)
        self.assertAlmostEqual(s["detection_s"][0], 0.004)
        self.assertAlmostEqual(s["detection_s"][1], 0.002)
        self.assertAlmostEqual(s["detection_s"][2], 0.006)
        self.assertAlmostEqual(s["first_write_s"][0], 0.020)
        self.assertAlmostEqual(s["total_s"][2], 0.038)
        self.assertEqual(failover.dominant(s), "first_write_s")

    def test_summary_without_rows(self):
        s = failover.summary([row(1, 1.0, 1.0, 1.0, verified=False)])
        self.assertEqual(s["total_s"], (None, None, None))
        self.assertIsNone(failover.dominant(s))

    def test_lines_name_what_dominates_and_the_settings(self):
        text = "\n".join(failover.summary_lines([row(1, 0.5, 0.01, 0.02), row(2, 0.7, 0.01, 0.02)], 3))
        self.assertIn("What dominates: **detection** (600.0 ms median)", text)
        self.assertIn("ping-int (10 s) and ping-timeout (0.5 s)", text)
        self.assertIn("2 of 3 repetitions", text)
        self.assertIn("| total | 630.0 | 530.0 | 730.0 |", text)


class Helpers(unittest.TestCase):
    def test_block(self):
        one, two = failover.block(1), failover.block(2)
        self.assertEqual(len(one), failover.BLOCK_BYTES)
        self.assertEqual(len(two), failover.BLOCK_BYTES)
        self.assertNotEqual(one, two)
        self.assertTrue(one.startswith(b"tandem bench failover repetition 1\n"))
        self.assertNotEqual(one, bytes(failover.BLOCK_BYTES))

    def test_status_helpers(self):
        table = [
            ({"connections": [{"connection": "Connected"}], "devices": [{"written_kib": 12}]}, "Connected", 12),
            ({"connections": [{"connection": "NetworkFailure"}], "devices": [{}]}, "NetworkFailure", 0),
            ({"connections": []}, None, 0),
            (None, None, 0),
        ]
        for status, state, kib in table:
            with self.subTest(status=status):
                self.assertEqual(failover.peer_state(status), state)
                self.assertEqual(failover.written_kib(status), kib)

    def test_config_has_drbds_liveness_defaults(self):
        text = cluster.resource_text("C", failover.NET, ["/a.img", "/b.img"], [1, 2])
        self.assertIn("    ping-int 10;\n", text)
        self.assertIn("    ping-timeout 5;\n", text)
        self.assertIn("    protocol C;\n", text)
        self.assertNotIn("fuse-mount", text)


if __name__ == "__main__":
    unittest.main()
