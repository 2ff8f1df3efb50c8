"""The resync experiment's pure parts: mode sizes, status predicates, rates, the per-repetition
reference and ratios, the target table, and the `disk { }` options in the generated drbd.conf."""

import os
import tempfile
import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import cluster, report
from lib.experiments import resync
from lib.experiments.common import Context
from lib.modes import MODES

MIB = 1 << 20


def status(connection="Connected", replication="Established", oos=0):
    """A `tandem status --json` resource as alice reports it, with one peer device."""
    return {"connections": [{"connection": connection,
                             "peer_devices": [{"replication": replication, "out_of_sync_kib": oos}]}]}


class Sizes(unittest.TestCase):
    def test_modes(self):
        both = [resync.DEFAULTS, resync.FIXED]
        rows = [("smoke", 8 * MIB, [resync.DEFAULTS]), ("quick", 256 * MIB, both), ("default", 1 << 30, both),
                ("full", 1 << 30, both)]
        for mode, dirty, labels in rows:
            with self.subTest(mode=mode):
                sz = resync.sizes(MODES[mode])
                self.assertEqual(sz.dirty_bytes, dirty)
                self.assertLessEqual(sz.dirty_bytes, MODES[mode].image_bytes)
                self.assertEqual([label for label, _ in sz.configs], labels)
                self.assertGreater(sz.deadline_s, 0)

    def test_options_text(self):
        self.assertEqual(resync.options_text(()), "defaults")
        self.assertEqual(resync.options_text(resync.CONFIGS[1][1]), "c-plan-ahead 0; resync-rate 4G")


class StatusPredicates(unittest.TestCase):
    def test_table(self):
        rows = [
            ("in sync", status(), True, True, 0),
            ("resync running", status(replication="SyncSource", oos=4096), False, True, 4096),
            ("established, bits left", status(oos=4), False, True, 4),
            ("disconnected", status(connection="StandAlone", replication="Off", oos=4096), False, False, 4096),
            ("connecting", status(connection="Connecting", replication="Off", oos=4096), False, False, 4096),
            ("no answer", None, False, False, None),
            ("no connections", {"connections": []}, False, False, None),
        ]
        for name, st, done, started, oos in rows:
            with self.subTest(name):
                self.assertEqual(resync.sync_done(st), done)
                self.assertEqual(resync.sync_started(st), started)
                self.assertEqual(resync.out_of_sync_kib(st), oos)


class Rates(unittest.TestCase):
    def test_rate(self):
        self.assertEqual(resync.rate_mib_s(1024, 2.0), 0.5)
        self.assertIsNone(resync.rate_mib_s(1024, 0))
        self.assertIsNone(resync.rate_mib_s(None, 1.0))

    def rows(self):
        return [
            {"case": "baseline", "workload": "disk-seq-1M", "rep": 1, "mib_s": 400.0},
            {"case": "baseline", "workload": "link-tcp", "rep": 1, "mib_s": 1000.0},
            {"case": "baseline", "workload": "disk-seq-1M", "rep": 2, "mib_s": 900.0},
            {"case": "baseline", "workload": "link-tcp", "rep": 2, "mib_s": 800.0},
            {"case": resync.DEFAULTS, "workload": "resync", "rep": 1, "mib_s": 100.0},
            {"case": resync.DEFAULTS, "workload": "resync", "rep": 2, "mib_s": 200.0},
            {"case": resync.FIXED, "workload": "resync", "rep": 1, "mib_s": 360.0},
            {"case": resync.FIXED, "workload": "resync", "rep": 2, "mib_s": 640.0},
            {"case": resync.DEFAULTS, "workload": resync.APP_WORKLOAD, "rep": 1, "mib_s": 30.0},
        ]

    def test_reference_is_the_slower_baseline_of_the_same_repetition(self):
        rows = self.rows()
        self.assertEqual([resync.reference(rows, 1), resync.reference(rows, 2)], [400.0, 800.0])
        self.assertIsNone(resync.reference(rows[:1], 1), "a missing baseline gives no reference")

    def test_ratios_pair_within_a_repetition(self):
        out = resync.with_ratios(self.rows())
        pcts = [(r["case"], r["rep"], r["pct_of_reference"]) for r in out if "pct_of_reference" in r]
        self.assertEqual(pcts, [(resync.DEFAULTS, 1, 25.0), (resync.DEFAULTS, 2, 25.0), (resync.FIXED, 1, 90.0),
                                (resync.FIXED, 2, 80.0)])
        self.assertNotIn("pct_of_reference", out[-1], "application rows are not resyncs")

    def test_target_rows(self):
        out = resync.with_ratios(self.rows())
        body = resync.target_rows(out, [resync.DEFAULTS, resync.FIXED, "absent"])
        self.assertEqual([row[1:] for row in body], [["25%", "≥ 80%", "**NO**"], ["85%", "≥ 80%", "yes"],
                                                     ["–", "≥ 80%", "not measured"]])


class Timing(unittest.TestCase):
    def test_slope_uses_the_window_only(self):
        samples = [(0.0, 10240), (1.0, 9216), (2.0, 9216 - 512), (3.0, 9216 - 1024), (4.0, 0)]
        self.assertEqual(resync.slope_mib_s(samples, 1.0, 3.0), 0.5)
        self.assertEqual(resync.slope_mib_s(samples, 0.5, 3.5), 0.5, "samples outside are ignored")
        self.assertIsNone(resync.slope_mib_s(samples, 1.5, 2.5), "one sample is no rate")
        self.assertIsNone(resync.slope_mib_s([], 0.0, 9.0))
        self.assertIsNone(resync.slope_mib_s([(0.0, 0), (1.0, 0)], 0.0, 1.0), "finished before the window")

    def test_resync_metrics(self):
        done = {"seconds": 4.0, "connect_s": 1.0, "remaining_kib": 0, "finished": True}
        m = resync.resync_metrics(300 * 1024, done)
        self.assertEqual((m["dirty_mib"], m["mib_s"], m["running_mib_s"], m["finished"]), (300.0, 75.0, 100.0, True))
        late = {"seconds": 10.0, "connect_s": None, "remaining_kib": 100 * 1024, "finished": False}
        m = resync.resync_metrics(300 * 1024, late)
        self.assertEqual((m["mib_s"], m["running_mib_s"], m["finished"]), (20.0, None, False),
                         "a missed deadline counts what moved")


class Report(unittest.TestCase):
    """The report's tables and chart from synthetic rows of one repetition (no nodes started)."""

    ROWS = [
        {"case": "baseline", "workload": "disk-seq-1M", "rep": 1, "mib_s": 500.0, "seconds": 2.0},
        {"case": "baseline", "workload": "link-tcp", "rep": 1, "mib_s": 2000.0, "seconds": 3.0},
        {"case": resync.DEFAULTS, "workload": "resync", "rep": 1, "mib_s": 100.0, "seconds": 10.0,
         "dirty_mib": 1024.0, "connect_s": 0.5, "running_mib_s": 105.0},
        {"case": resync.DEFAULTS, "workload": resync.APP_WORKLOAD, "resync": "none", "rep": 1, "iops": 20000.0},
        {"case": resync.DEFAULTS, "workload": resync.APP_WORKLOAD, "resync": "running", "rep": 1, "iops": 15000.0,
         "resync_mib_s_during": 0.25},
        {"case": resync.DEFAULTS, "workload": "resync+randwrite", "rep": 1, "mib_s": 50.0, "dirty_mib": 1024.0},
        {"case": resync.FIXED, "workload": "resync", "rep": 1, "mib_s": 450.0, "dirty_mib": 1024.0},
    ]

    def test_tables_and_chart(self):
        rows = resync.with_ratios(self.ROWS)
        labels = [resync.DEFAULTS, resync.FIXED]
        text = "\n".join(resync._tables(rows, 1, labels) + resync._app_lines(rows, 1))
        for needle in ("| disk-seq-1M | 500 |", f"| {resync.DEFAULTS} | resync | 1,024 | 10.00 | 100.0 | 20 |",
                       f"| {resync.FIXED} | resync | 1,024 | – | 450.0 | 90 |", "| running | 15,000 |",
                       "IOPS during the resync: 75% of IOPS without one."):
            self.assertIn(needle, text)
        with tempfile.TemporaryDirectory() as out:
            ctx = Context(MODES["quick"], None, out, out)
            o = report.Outcome(resync.NAME, resync.TITLE, resync.SEED)
            resync._plot(ctx, o, rows, labels)
            self.assertEqual(o.problems, [])
            with open(os.path.join(out, "resync.svg"), encoding="utf-8") as f:
                svg_text = f.read()
        self.assertEqual(svg_text.count('class="bar"'), 5)
        self.assertIn("80% of min(disk, link)", svg_text)


class ResourceText(unittest.TestCase):
    def test_disk_options_become_a_disk_section(self):
        text = cluster.resource_text("C", (), ["/a.img", "/b.img"], [7000, 7001],
                                     (("c-plan-ahead", "0"), ("resync-rate", "4G")))
        self.assertIn("  disk {\n    c-plan-ahead 0;\n    resync-rate 4G;\n  }\n  volume 0 {", text)

    def test_no_disk_section_without_options(self):
        text = cluster.resource_text("C", (), ["/a.img", "/b.img"], [7000, 7001])
        self.assertNotIn("disk {", text)
        self.assertEqual(text, cluster.resource_text("C", (), ["/a.img", "/b.img"], [7000, 7001], ()))

    def test_setup_carries_disk_options(self):
        setup = cluster.Setup("pair", disk=resync.CONFIGS[1][1])
        self.assertEqual(setup.disk, (("c-plan-ahead", "0"), ("resync-rate", "4G")))
        self.assertEqual(cluster.Setup("pair").disk, ())


class Link(unittest.TestCase):
    def test_loopback_stream_is_measured(self):
        row = resync.measure_link(1, 0.1)
        self.assertEqual((row["case"], row["workload"], row["rep"]), ("baseline", "link-tcp", 1))
        self.assertGreater(row["mib_s"], 0)


if __name__ == "__main__":
    unittest.main()
