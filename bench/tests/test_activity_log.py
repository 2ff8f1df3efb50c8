"""The activity-log experiment's pure parts: the plan per mode, configurations (disk options,
crash exposure), counters from `status --json`, rates, ratios to al-updates no within one
repetition and connectivity, the sentence on the seed's al-extents 7, the tables and the chart."""

import os
import tempfile
import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import cluster, fio, report
from lib.experiments import activity_log as al
from lib.experiments.common import Context
from lib.modes import MODES

MIB = 1 << 20
GIB = 1 << 30


def status(al_writes=0, bm_writes=0):
    """A `tandem status --json` resource with one device carrying the two counters."""
    return {"devices": [{"volume": 0, "al_writes": al_writes, "bm_writes": bm_writes}]}


class Plans(unittest.TestCase):
    def test_modes(self):
        every = [67, 127, 1237, 6433, None]
        rows = [("smoke", [67, None], 1, 1), ("quick", [67, 1237, None], 2, 1),
                ("default", every, MODES["default"].runtime_s, 1), ("full", every, 5, 1)]
        for mode, extents, runtime_s, reps in rows:
            with self.subTest(mode=mode):
                p = al.plan(MODES[mode])
                self.assertEqual([c.al_extents for c in p.configs], extents)
                self.assertEqual((p.runtime_s, p.reps), (runtime_s, reps))
                self.assertEqual(p.configs[-1], al.NO_AL, "the baseline is always measured")

    def test_reps_follow_the_mode_except_full(self):
        from dataclasses import replace
        self.assertEqual(al.plan(replace(MODES["quick"], reps=3)).reps, 3)
        self.assertEqual(al.plan(MODES["full"]).reps, 1)

    def test_seed_minimum_is_below_the_accepted_range(self):
        self.assertLess(al.SEED_AL_EXTENTS, al.AL_EXTENTS_MIN)
        self.assertEqual(min(al.ALL_AL_EXTENTS), al.AL_EXTENTS_MIN)
        self.assertIn(al.DEFAULT_AL_EXTENTS, al.ALL_AL_EXTENTS)

    def test_jobs(self):
        mode = MODES["quick"]
        js = al.jobs(mode, al.plan(mode))
        self.assertEqual([(j.name, j.rw, j.bs, j.iodepth, j.runtime_s, j.ramp_s, j.size_bytes) for j in js],
                         [("randwrite-4k-qd1", "randwrite", "4k", 1, 2, 0, GIB),
                          ("randwrite-4k-qd32", "randwrite", "4k", 32, 2, 0, GIB)])

    def test_warmup_touches_each_extent_once(self):
        job = al.warmup_job(MODES["smoke"])
        argv = fio.args(job, "nbd://x", "/o.json")
        self.assertIn("--rw=write:4092k", argv, "4 KiB written, 4092 KiB skipped: one write per 4 MiB")
        self.assertIn("--bs=4k", argv)
        self.assertNotIn("--time_based", argv)
        self.assertEqual([al.extent_count(n) for n in (64 * MIB, GIB, GIB + 1, 1)], [16, 256, 257, 1])

    def test_estimates_grow_with_the_plan(self):
        est = {m: al.estimate_s(MODES[m]) for m in ("smoke", "quick", "default", "full")}
        self.assertLess(est["smoke"], est["quick"])
        self.assertLess(est["quick"], est["default"])
        self.assertGreater(est["smoke"], 0)


class HotSentence(unittest.TestCase):
    def test_table(self):
        rows = [("smoke: 67 covers 16 extents", "smoke", ["al-extents 67 (at least the device's 16"], ["evicts"]),
                ("quick: 67 evicts, 1237 covers", "quick",
                 ["al-extents 1237 (at least the device's 256", "al-extents 67 a uniformly", "/ 256"], []),
                ("default: two of each", "default", ["al-extents 1237 and 6433 (", "al-extents 67 and 127 a"], [])]
        for name, mode, present, absent in rows:
            with self.subTest(name):
                text = al.hot_sentence(al.plan(MODES[mode]), al.extent_count(MODES[mode].image_bytes))
                for needle in present:
                    self.assertIn(needle, text)
                for needle in absent:
                    self.assertNotIn(needle, text)


class Configs(unittest.TestCase):
    def test_table(self):
        rows = [(67, "al-extents 67", (("al-extents", "67"),), 268 * MIB, "268 MiB"),
                (1237, "al-extents 1237", (("al-extents", "1237"),), GIB, "4,948 MiB (1,024 on this device)"),
                (256, "al-extents 256", (("al-extents", "256"),), GIB, "1,024 MiB"),
                (None, "al-updates no", (("al-updates", "no"),), GIB, "whole device (1,024 MiB)")]
        for extents, label, options, exposure, text in rows:
            with self.subTest(label):
                cfg = al.Config(extents)
                self.assertEqual(cfg.label, label)
                self.assertEqual(cfg.disk_options(), options)
                self.assertEqual(cfg.exposure_bytes(GIB), exposure)
                self.assertEqual(cfg.exposure_text(GIB), text)

    def test_disk_options_reach_the_resource_file(self):
        text = cluster.resource_text("C", (), ["/a.img", "/b.img"], [7000, 7001], al.NO_AL.disk_options())
        self.assertIn("  disk {\n    al-updates no;\n  }\n", text)


class Counters(unittest.TestCase):
    def test_counters(self):
        rows = [("both", status(5, 7), (5, 7)), ("no answer", None, None), ("no devices", {"devices": []}, None),
                ("missing bm", {"devices": [{"al_writes": 1}]}, None),
                ("not a number", {"devices": [{"al_writes": "1", "bm_writes": 2}]}, None)]
        for name, st, want in rows:
            with self.subTest(name):
                self.assertEqual(al.counters(st), want)

    def test_rates_over_fio_runtime(self):
        r = al.log_rates((100, 10), (600, 30), {"runtime_s": 2.0, "ios": 10000})
        self.assertEqual(r, {"al_writes": 500, "bm_writes": 20, "al_writes_per_s": 250.0, "bm_writes_per_s": 10.0,
                             "al_writes_per_1k_writes": 50.0})

    def test_missing_or_backwards_counters_give_no_rate(self):
        for before, after in (((0, 0), None), (None, (1, 1)), ((5, 0), (4, 0)), ((0, 5), (0, 4))):
            with self.subTest(before=before, after=after):
                self.assertTrue(all(v is None for v in al.log_rates(before, after, {"runtime_s": 1, "ios": 1})
                                    .values()))

    def test_zero_runtime_gives_counts_but_no_rate(self):
        r = al.log_rates((0, 0), (3, 0), {"runtime_s": 0, "ios": 0})
        self.assertEqual((r["al_writes"], r["al_writes_per_s"], r["al_writes_per_1k_writes"]), (3, None, None))


def row(case, conn, qd, rep, iops, clat=100.0, alps=0.0):
    return {"case": case, "connectivity": conn, "workload": al.workload_name(qd), "rep": rep, "iops": iops,
            "clat_mean_us": clat, "al_writes_per_s": alps, "bm_writes_per_s": 0.0, "al_writes_per_1k_writes": 0.0}


class Ratios(unittest.TestCase):
    def rows(self):
        c67 = al.Config(67).label
        return [row(al.NO_AL_LABEL, al.CONNECTED, 1, 1, 1000.0, 100.0),
                row(al.NO_AL_LABEL, al.DISCONNECTED, 1, 1, 4000.0, 25.0),
                row(al.NO_AL_LABEL, al.CONNECTED, 1, 2, 2000.0, 50.0),
                row(c67, al.CONNECTED, 1, 1, 500.0, 200.0),
                row(c67, al.DISCONNECTED, 1, 1, 1000.0, 100.0),
                row(c67, al.CONNECTED, 1, 2, 1500.0, 60.0),
                row(c67, al.CONNECTED, 32, 1, 900.0),
                {"case": c67, "connectivity": "warm-up", "workload": "warm-up-every-extent", "rep": 1}]

    def test_pairs_within_repetition_connectivity_and_workload(self):
        out = al.with_ratios(self.rows())
        got = [(r["case"], r["connectivity"], r["rep"], r["iops_vs_no_al_pct"], r["clat_vs_no_al_pct"])
               for r in out[3:7]]
        self.assertEqual(got, [("al-extents 67", "connected", 1, 50.0, 200.0),
                               ("al-extents 67", "disconnected", 1, 25.0, 400.0),
                               ("al-extents 67", "connected", 2, 75.0, 120.0),
                               ("al-extents 67", "connected", 1, None, None)])
        self.assertEqual(out[0]["iops_vs_no_al_pct"], 100.0)
        self.assertNotIn("iops_vs_no_al_pct", out[-1], "the warm-up is not compared")

    def test_input_rows_are_not_modified(self):
        rows = self.rows()
        al.with_ratios(rows)
        self.assertNotIn("iops_vs_no_al_pct", rows[0])


class SeedValue(unittest.TestCase):
    def test_rejected(self):
        text = al.rejection_sentence(1, "tandem: /tmp/x/r0.res:10:16: al-extents 7 is out of range 67..=65534\n",
                                     "/tmp/x")
        self.assertIn("`tandem: r0.res:10:16: al-extents 7 is out of range 67..=65534`", text)
        self.assertIn("is not measured", text)

    def test_accepted_is_said_too(self):
        self.assertIn("was accepted", al.rejection_sentence(0, "", "/tmp/x"))

    def test_silent_failure(self):
        self.assertIn("`exit 2`", al.rejection_sentence(2, "\n", "/tmp/x"))


class Report(unittest.TestCase):
    """Tables and chart from synthetic rows of one repetition (no nodes started)."""

    def rows(self):
        out = []
        for case, scale, alps in ((al.Config(67).label, 0.5, 3000.0), (al.NO_AL_LABEL, 1.0, 0.0)):
            for conn, base in ((al.CONNECTED, 10000.0), (al.DISCONNECTED, 40000.0)):
                for qd in al.QDS:
                    out.append(row(case, conn, qd, 1, base * qd * scale, 100.0 / scale, alps))
        return al.with_ratios(out)

    def test_tables(self):
        p = al.plan(MODES["smoke"])
        text = "\n".join(al.tables(self.rows(), 1, p.configs, 64 * MIB))
        for needle in ("| configuration | connected QD1 | connected QD32 | disconnected QD1 | disconnected QD32 | "
                       "crash exposure |",
                       "| al-extents 67 | 5,000 (50%) | 160,000 (50%) | 20,000 (50%) | 640,000 (50%) | 268 MiB (64 on "
                       "this device) |",
                       "| al-updates no | 10,000 (100%) | 320,000 (100%) | 40,000 (100%) | 1,280,000 (100%) | whole "
                       "device (64 MiB) |",
                       "| al-extents 67 | 200 (200%) |",
                       "| al-extents 67 | 3,000 / 0 (0‰) |"):
            self.assertIn(needle, text)

    def test_chart_has_one_bar_per_log_configuration_and_workload(self):
        p = al.plan(MODES["smoke"])
        with tempfile.TemporaryDirectory() as out:
            ctx = Context(MODES["smoke"], None, out, out)
            o = report.Outcome(al.NAME, al.TITLE, al.SEED)
            al.plot(ctx, o, self.rows(), p)
            self.assertEqual(o.problems, [])
            with open(os.path.join(out, "activity-log.svg"), encoding="utf-8") as f:
                svg_text = f.read()
        self.assertEqual(svg_text.count('class="bar"'), 4, "al-updates no is the reference line, not bars")
        self.assertIn("al-extents 67, disconnected QD32: 50", svg_text)
        self.assertIn(al.NO_AL_LABEL, svg_text)

    def test_chart_without_rows_is_a_problem_not_a_crash(self):
        with tempfile.TemporaryDirectory() as out:
            ctx = Context(MODES["smoke"], None, out, out)
            o = report.Outcome(al.NAME, al.TITLE, al.SEED)
            al.plot(ctx, o, [], al.plan(MODES["smoke"]))
        self.assertEqual(len(o.problems), 1)


if __name__ == "__main__":
    unittest.main()
