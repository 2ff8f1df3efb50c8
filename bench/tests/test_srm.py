"""The srm experiment's pure parts: its plan per mode, the SRM configuration text, the backlog
watch and bound check, and the two targets' ratios and verdicts."""

import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import cluster
from lib.errors import BenchError
from lib.experiments import registry, srm
from lib.modes import MODES

DISKS, PORTS = ["/a.img", "/b.img"], [7000, 7001]


def agg(variant, latency, iops, workload=srm.HEADLINE_JOB, backlog=0):
    """An aggregated row as run() builds them."""
    return {"variant": variant, "workload": workload, "latency_ms": latency, "iops": iops,
            "max_unreplicated_kib": backlog}


def grid(c0, c20, a0, a20, s0, s20, backlog=0):
    return [agg("proto-C", 0, c0), agg("proto-C", 20, c20), agg("proto-A", 0, a0), agg("proto-A", 20, a20),
            agg("srm-on", 0, s0), agg("srm-on", 20, s20, backlog=backlog)]


class Plan(unittest.TestCase):
    def test_cases_per_mode(self):
        for mode, latencies, jobs in (("smoke", (0, 5), 2), ("quick", (0, 20), 3), ("default", (0, 2, 5, 10, 20), 5),
                                      ("full", (0, 2, 5, 10, 20), 32)):
            cases, js = srm.plan(MODES[mode])
            with self.subTest(mode=mode):
                self.assertEqual(len(cases), 3 * len(latencies))
                self.assertEqual(tuple(dict.fromkeys(dict(c.params)["latency_ms"] for c in cases)), latencies)
                self.assertEqual(len(js), jobs)
                self.assertIn(srm.HEADLINE_JOB, [j.name for j in js])
                self.assertTrue(all(c.setup.link_rtt_ms == dict(c.params)["latency_ms"] for c in cases))
                self.assertEqual(len({c.label for c in cases}), len(cases))

    def test_quick_jobs_and_warm_up(self):
        _, js = srm.plan(MODES["quick"])
        self.assertEqual([j.name for j in js], ["randwrite-4k-qd32", "randwrite-4k-qd1", "write-1M-qd8"])
        for mode in ("quick", "default", "full"):
            with self.subTest(mode=mode):
                self.assertGreaterEqual(MODES[mode].srm.ramp_s, 2)
                self.assertTrue(all(j.ramp_s == MODES[mode].srm.ramp_s for j in srm.plan(MODES[mode])[1]))

    def test_full_is_seed_002s_matrix(self):
        _, js = srm.plan(MODES["full"])
        self.assertEqual({j.bs for j in js}, {"4k", "16k", "64k", "1M"})
        self.assertEqual({j.rw for j in js}, {"randwrite", "write"})
        self.assertEqual({j.iodepth for j in js}, {1, 8, 16, 32})

    def test_variants(self):
        cases, _ = srm.plan(MODES["quick"])
        by = {c.label: c.setup for c in cases}
        self.assertEqual(by["proto-A +20 ms"].protocol, "A")
        self.assertEqual(by["proto-C +20 ms"].options, ())
        self.assertEqual(by["proto-C +20 ms"].net, cluster.DEFAULT_NET)
        s = by["srm-on +20 ms"]
        self.assertEqual((s.protocol, s.options), ("C", (("srm", "on"), ("srm-interval", "200"))))
        self.assertIn(("srm-max-lag-bytes", str(64 << 20)), s.net)
        self.assertEqual(dict(s.net)["srm-max-lag-bytes"], str(srm.SRM_MAX_LAG_BYTES))
        with self.assertRaises(BenchError):
            srm.variant_setup("proto-B", 0, 1 << 20)

    def test_estimates(self):
        est = {m: srm.estimate_s(MODES[m]) for m in ("smoke", "quick", "default", "full")}
        self.assertLess(est["smoke"], est["quick"])
        self.assertLess(est["quick"], est["default"])
        self.assertLess(est["default"], est["full"])
        self.assertLess(est["quick"], 2 * 60)

    def test_plot_files(self):
        self.assertEqual(srm.plot_files(MODES["smoke"]), ["srm-randwrite-4k-qd32.svg", "srm-randwrite-4k-qd1.svg"])


class Registration(unittest.TestCase):
    def test_only_with_the_link_emulator(self):
        with_emulator, pending = registry("/path/to/tandem-linkemu")
        self.assertEqual(list(with_emulator)[2:4], ["latency-matrix", "srm"])
        self.assertNotIn("srm", [p.name for p in pending])
        without, pending = registry(None)
        self.assertNotIn("srm", without)
        self.assertIn("tandem-linkemu", next(p for p in pending if p.name == "srm").needs)


class OptionsText(unittest.TestCase):
    def test_options_section_before_net(self):
        text = cluster.resource_text("C", srm.srm_net(), DISKS, PORTS, (), srm.srm_options())
        self.assertIn("  options {\n    srm on;\n    srm-interval 200;\n  }\n  net {", text)
        self.assertIn("    srm-max-lag-bytes 67108864;\n", text)
        self.assertEqual(text.count("{"), text.count("}"))

    def test_no_options_no_section(self):
        text = cluster.resource_text("C", (), DISKS, PORTS)
        self.assertNotIn("options", text)
        self.assertEqual(text, cluster.resource_text("C", (), DISKS, PORTS, (), ()))
        self.assertEqual(cluster.Setup("pair").options, ())

    def test_disk_and_options_together(self):
        text = cluster.resource_text("C", (), DISKS, PORTS, (("al-extents", "67"),), (("srm", "advise"),))
        self.assertLess(text.index("options {"), text.index("net {"))
        self.assertLess(text.index("net {"), text.index("disk {"))


def status(kib, protocol="A"):
    return {"connections": [{"unreplicated_kib": kib, "protocol": protocol}]}


class Backlog(unittest.TestCase):
    def test_watch(self):
        w = srm.BacklogWatch()
        for resource in (status(10, "C"), None, status(500), {"connections": []}, status(True), status(30)):
            w.add(resource)
        self.assertEqual(w.columns(), {"max_unreplicated_kib": 500, "protocol_end": "A", "protocols_seen": "C>A",
                                       "status_samples": 3})
        w.add(status(0, "C"))
        self.assertEqual((w.columns()["protocols_seen"], w.columns()["protocol_end"]), ("C>A>C", "C"))
        self.assertEqual(w.missed, 3)

    def test_empty_watch_has_no_maximum(self):
        self.assertEqual(srm.BacklogWatch().columns()["max_unreplicated_kib"], None)

    def test_bound(self):
        bound_kib = srm.SRM_MAX_LAG_BYTES // 1024
        for kib, over in ((None, False), (0, False), (bound_kib, False), (bound_kib + 1, True)):
            with self.subTest(kib=kib):
                p = srm.backlog_problem("srm-on +20 ms", "randwrite-4k-qd32", kib)
                self.assertEqual(p is not None, over)
                if over:
                    self.assertIn("above srm-max-lag-bytes", p)


class Targets(unittest.TestCase):
    def test_verdicts(self):
        over = srm.SRM_MAX_LAG_BYTES // 1024 + 1
        for name, aggs, smoke, keep, cost in (
                ("both pass", grid(1000, 410, 1050, 1000, 990, 950), False, "PASS", "PASS"),
                ("keep fails", grid(1000, 410, 1050, 1000, 990, 880), False, "FAIL", "PASS"),
                ("cost fails", grid(1000, 410, 1050, 1000, 960, 950), False, "PASS", "FAIL"),
                ("at the thresholds", grid(1000, 410, 1050, 1000, 970, 873), False, "PASS", "PASS"),
                ("backlog over its bound", grid(1000, 410, 1050, 1000, 990, 950, over), False, "FAIL", "PASS"),
                ("smoke", grid(1000, 410, 1050, 1000, 990, 950), True, "not meaningful (smoke)",
                 "not meaningful (smoke)"),
                ("srm missing", grid(1000, 410, 1050, 1000, None, None), False, "not measured", "not measured")):
            with self.subTest(name):
                t = srm.targets(aggs, (0, 20), smoke)
                self.assertEqual([t[0]["verdict"], t[1]["verdict"]], [keep, cost])

    def test_ratios_and_detail(self):
        t = srm.targets(grid(1000, 410, 1050, 1000, 990, 950), (0, 20), False)
        self.assertAlmostEqual(t[0]["ratio"], 950 / 990)
        self.assertAlmostEqual(t[1]["ratio"], 0.99)
        self.assertIn("protocol C kept 41% here", t[0]["detail"])
        self.assertIn("within the 64 MiB bound", t[0]["detail"])

    def test_grid_without_20_ms_is_not_meaningful(self):
        aggs = [agg("srm-on", 0, 100), agg("srm-on", 5, 100), agg("proto-C", 0, 100), agg("proto-C", 5, 50)]
        t = srm.targets(aggs, (0, 5), False)
        self.assertIn("+5 ms", t[0]["name"])
        self.assertEqual(t[0]["verdict"], "not meaningful (smoke)")
        self.assertAlmostEqual(t[0]["ratio"], 1.0)

    def test_lines(self):
        lines = srm.target_lines(srm.targets(grid(1000, 410, 1050, 1000, 990, 950), (0, 20), False))
        self.assertEqual(sum("**PASS**" in line for line in lines), 2)
        aggs = grid(1000, 410, 1050, 1000, 990, 950)
        self.assertIn("| randwrite-4k-qd32 | 1,000 | 990 | 0.99 |", srm.cost_lines(aggs, 0))


class Tables(unittest.TestCase):
    def test_cell_and_backlog_tables(self):
        g = MODES["smoke"].srm
        rows = [{"variant": v, "workload": f"randwrite-4k-qd{qd}", "latency_ms": lat, "iops": 100.0 + lat,
                 "clat_mean_us": 10.0, "clat_p99_us": 20.0, "max_unreplicated_kib": 7, "protocol_end": "A",
                 "protocols_seen": "A"}
                for v in srm.VARIANTS for qd in (32, 1) for lat in g.latencies_ms]
        lines = srm.cell_tables(rows, g)
        self.assertIn("| QD32 srm-on | 100 / 10 / 20 | 105 / 10 / 20 | 105% |", lines)
        self.assertEqual(sum(line.startswith("| QD") for line in lines), 6)
        backlog = srm.backlog_lines(rows, g)
        self.assertIn("| srm-on randwrite-4k-qd32 | 7 (A) | 7 (A) |", backlog)


if __name__ == "__main__":
    unittest.main()
