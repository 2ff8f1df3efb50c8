"""The cpu experiment's pure parts (issue 28, item 1): /proc per-thread parsing, thread groups,
per-node costs per request, the CSV flattening, ratios and differences within a repetition,
the targets, and the chart's input."""

import os
import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import procs, svg
from lib.experiments import common, cpu
from lib.modes import MODES

TICKS = os.sysconf("SC_CLK_TCK")
STATUS = """Name:\ttandem
State:\tS (sleeping)
Tgid:\t42
voluntary_ctxt_switches:\t1200
nonvoluntary_ctxt_switches:\t34
"""


class ProcParsing(unittest.TestCase):
    def test_task_status(self):
        self.assertEqual(procs.parse_task_status(STATUS), (1200, 34))
        self.assertEqual(procs.parse_task_status("Name:\tx\n"), (0, 0))

    def test_thread_group(self):
        cases = [((42, 42, "tandem\n"), "main"), ((42, 43, "tandem\n"), "tandem"), ((42, 44, "io-r0-2\n"), "io-r0"),
                 ((42, 45, "tandem-meta-r0\n"), "tandem-meta-r0"), ((42, 46, "\n"), "?"), ((42, 47, "-3"), "-3")]
        for args, want in cases:
            with self.subTest(args=args):
                self.assertEqual(procs.thread_group(*args), want)

    def test_thread_delta(self):
        before = {1: ("main", 1.0, 10, 1), 2: ("io-r0", 0.5, 100, 2), 3: ("io-r0", 0.25, 50, 0),
                  4: ("tandem", 2.0, 7, 7)}
        # thread 4 exits, thread 5 is born during the interval
        after = {1: ("main", 1.0, 10, 1), 2: ("io-r0", 1.5, 300, 4), 3: ("io-r0", 0.75, 150, 1),
                 5: ("tandem", 0.5, 20, 0)}
        d = procs.thread_delta(before, after)
        self.assertEqual(d["main"], (0.0, 0, 0))
        self.assertEqual(d["io-r0"], (1.5, 300, 3))
        self.assertEqual(d["tandem"], (0.5, 20, 0))

    def test_thread_snapshot_of_this_process(self):
        snap = procs.thread_snapshot(os.getpid())
        self.assertIn(os.getpid(), snap)
        self.assertEqual(snap[os.getpid()][0], "main")
        self.assertEqual(procs.thread_snapshot(2**30), {})


METRICS = {"ios": 1000, "io_mib": 4000 / 1024, "runtime_s": 1.0}


class Costs(unittest.TestCase):
    def test_node_costs(self):
        threads_before = {1: ("main", 0.0, 0, 0), 2: ("io-r0", 0.0, 0, 0)}
        threads_after = {1: ("main", 0.01, 100, 0), 2: ("io-r0", 0.03, 1500, 400)}
        c = cpu.node_costs((1.0, 1.0), (1.03, 1.02), threads_before, threads_after, 0.5, METRICS)
        self.assertAlmostEqual(c["cpu_s"], 0.025)
        self.assertAlmostEqual(c["cpu_us_per_write"], 25.0)
        self.assertAlmostEqual(c["cpu_us_per_mib"], 1e6 * 0.025 / (4000 / 1024))
        self.assertAlmostEqual(c["cs_per_write"], 1.0)
        self.assertAlmostEqual(c["vcs_per_write"], 0.8)
        self.assertAlmostEqual(c["ivcs_per_write"], 0.2)
        self.assertAlmostEqual(c["threads"]["io-r0"]["us_per_write"], 15.0)
        self.assertAlmostEqual(c["threads"]["io-r0"]["cs_per_write"], 0.95)
        self.assertIsNone(cpu.node_costs(None, (1, 1), {}, {}, 1.0, METRICS))
        self.assertIsNone(cpu.node_costs((1, 1), (2, 2), {}, {}, 1.0, {"ios": 0})["cpu_us_per_write"])

    def test_flatten_sums_nodes(self):
        a = {"cpu_us_per_mib": 10.0, "cpu_us_per_write": 2.0, "cs_per_write": 1.0, "vcs_per_write": 0.5,
             "ivcs_per_write": 0.5, "usr_pct": 5.0, "sys_pct": 6.0,
             "threads": {"io-r0": {"us_per_write": 1.0, "cs_per_write": 0.25}}}
        b = dict(a, cpu_us_per_write=3.0, threads={})
        row = cpu.flatten_costs({"alice": a, "bob": b}, 2.0)
        self.assertEqual(row["sum_cpu_us_per_write"], 5.0)
        self.assertEqual(row["sum_cpu_us_per_mib"], 20.0)
        self.assertEqual(row["alice_usr_pct"], 5.0)
        self.assertEqual(row["alice_thread_io_r0_us_per_write"], 1.0)
        self.assertEqual(row["alice_thread_io_r0_cs_per_write"], 0.25)
        self.assertNotIn("bob_thread_io_r0_us_per_write", row)
        alone = cpu.flatten_costs({"alice": a, "bob": None}, 2.0)
        self.assertEqual(alone["sum_cpu_us_per_write"], 2.0)
        self.assertIsNone(alone["bob_cpu_us_per_write"])


def rows_of(values):
    """Rows from {(case, workload, rep): {metric: value}}."""
    return [{"case": c, "workload": w, "rep": r, **m} for (c, w, r), m in values.items()]


ROWS = rows_of({("standalone", "seq1m", 1): {"sum_cpu_us_per_mib": 600.0, "mib_s": 1000.0},
                ("proto-C", "seq1m", 1): {"sum_cpu_us_per_mib": 1800.0, "mib_s": 500.0},
                ("standalone", "seq1m", 2): {"sum_cpu_us_per_mib": 500.0, "mib_s": 1000.0},
                ("proto-C", "seq1m", 2): {"sum_cpu_us_per_mib": 2000.0, "mib_s": 800.0},
                ("standalone", "seq1m", 3): {"sum_cpu_us_per_mib": 700.0, "mib_s": 1000.0},
                ("proto-C", "seq1m", 3): {"sum_cpu_us_per_mib": 1400.0, "mib_s": None},
                ("standalone", "rand4k-qd1", 1): {"clat_mean_us": 100.0},
                ("proto-C", "rand4k-qd1", 1): {"clat_mean_us": 150.0},
                ("standalone", "rand4k-qd1", 2): {"clat_mean_us": 90.0},
                ("proto-C", "rand4k-qd1", 2): {"clat_mean_us": 180.0}})


class Comparisons(unittest.TestCase):
    def test_ratio_within_each_repetition(self):
        c = cpu.compare(ROWS, "proto-C", "seq1m", "sum_cpu_us_per_mib")
        self.assertEqual(c["values"], [3.0, 4.0, 2.0])
        self.assertEqual((c["value"], c["min"], c["max"]), (3.0, 2.0, 4.0))
        self.assertEqual(cpu.show(c), "3.00x (2.00–4.00)")
        self.assertEqual(cpu.compare(ROWS, "proto-C", "seq1m", "mib_s")["values"], [0.5, 0.8])
        self.assertIsNone(cpu.compare(ROWS, "proto-A", "seq1m", "mib_s"))
        self.assertEqual(cpu.show(None), "–")

    def test_difference(self):
        c = cpu.compare(ROWS, "proto-C", "rand4k-qd1", "clat_mean_us", "difference")
        self.assertEqual(c["values"], [50.0, 90.0])
        self.assertEqual(cpu.show(c, "difference"), "+70 µs (+50–+90)")

    def test_targets(self):
        got = {r[0]: r for r in cpu.target_rows(ROWS)}
        self.assertEqual(got["summed CPU per MiB, 1 MiB seq QD1"][3], "**NO**")
        self.assertEqual(got["mean completion latency, 4 KiB rand QD1"][3], "**NO**")
        self.assertEqual(got["MiB/s, 1 MiB seq QD1"][1], "0.65x (0.50–0.80)")
        self.assertEqual(got["MiB/s, 1 MiB seq QD1"][3], "**NO**")
        self.assertEqual(got["IOPS, 4 KiB rand QD32"][3], "not measured")
        good = rows_of({("standalone", "seq1m", 1): {"sum_cpu_us_per_mib": 600.0},
                        ("proto-C", "seq1m", 1): {"sum_cpu_us_per_mib": 1200.0}})
        self.assertEqual(cpu.target_rows(good)[0][3], "yes")

    def test_chart_input(self):
        bars = cpu.ratio_bars(ROWS, ["standalone", "proto-C"])
        self.assertEqual(bars, [{"workload": "seq1m", "case": "proto-C", "ratio": 3.0, "ratio_min": 2.0,
                                 "ratio_max": 4.0, "n": 3}])
        text = svg.bar_chart("t", "x", *common.bars(bars, "workload", "case", "ratio"), reference=(1.0, "s"))
        self.assertEqual(text.count('class="bar"'), 1)
        self.assertEqual(text.count('class="whisker"'), 1)


class PeersRows(unittest.TestCase):
    def test_summed_cpu_in_peers(self):
        from lib.experiments import peers
        rows = peers.add_summed_cpu([
            {"case": "standalone", "workload": "seq1m", "rep": 1, "alice_cpu_us_per_io": 500.0, "bob_cpu_us_per_io": None},
            {"case": "proto-C", "workload": "seq1m", "rep": 1, "alice_cpu_us_per_io": 900.0, "bob_cpu_us_per_io": 600.0},
            {"case": "nbdkit-file", "workload": "seq1m", "rep": 1, "nbdkit_cpu_us_per_io": 550.0}])
        self.assertEqual([r.get("tandem_cpu_us_per_io") for r in rows], [500.0, 1500.0, None])
        table = peers._summed_cpu_table(rows, ["standalone", "proto-C", "nbdkit-file"])
        self.assertEqual(len(table), 3)
        self.assertIn("| proto-C | 3.00x | – | – |", table)


class Plan(unittest.TestCase):
    def test_cases_and_jobs(self):
        self.assertEqual([c.label for c in cpu.cases(MODES["smoke"])], ["standalone", "proto-A", "proto-B", "proto-C"])
        js = cpu.jobs(MODES["default"])
        self.assertEqual([(j.rw, j.bs, j.iodepth) for j in js],
                         [("write", "1M", 1), ("randwrite", "4k", 1), ("randwrite", "4k", 32)])
        self.assertTrue(all(j.runtime_s for j in js))

    def test_at_least_three_repetitions_outside_smoke(self):
        self.assertEqual(cpu.reps_for(MODES["smoke"]), 1)
        for mode in ("quick", "default", "full"):
            self.assertGreaterEqual(cpu.reps_for(MODES[mode]), 3)


if __name__ == "__main__":
    unittest.main()
