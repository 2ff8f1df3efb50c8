"""srm-live: fio log and metrics parsing, the per-segment summary (settled medians, settle
times, backlog against the bound, verdicts), CSV rows and the plot, on synthetic traces and a
recorded metrics exposition; no cluster."""

import os
import re
import unittest
import xml.etree.ElementTree as ET

import helpers

from lib import cluster, fio
from lib.experiments import srm_live as live
from lib.modes import MODES

SEGMENT_S = 10
NS = "{http://www.w3.org/2000/svg}"


def series(levels, step_s=0.25, segment_s=SEGMENT_S):
    """[(t, value)] at step_s, the value of each segment given by levels[k] (a number or a
    function of the time since the segment started)."""
    out = []
    n = int(len(levels) * segment_s / step_s)
    for i in range(1, n + 1):
        t = i * step_s
        k = min(int((t - 1e-9) // segment_s), len(levels) - 1)
        level = levels[k]
        out.append((t, level(t - k * segment_s) if callable(level) else float(level)))
    return out


def polls(protocols, backlog_mib, oldest_s=0.1, stale=None, segment_s=SEGMENT_S):
    """Polls every 0.25 s: per segment the protocol, backlog (MiB) and oldest age."""
    out = []
    for i in range(int(len(protocols) * segment_s / 0.25)):
        t = i * 0.25
        k = int(t // segment_s)
        p = protocols[k]
        out.append((t, {"protocol": p, "unreplicated_bytes": backlog_mib[k] * (1 << 20), "oldest_s": oldest_s,
                        "possibly_stale": (p == "A") if stale is None else stale, "waiting_writes": 0}))
    return out


def trace(iops_levels, protocols="CCCCC", backlog_mib=(0, 0, 0, 0, 0), oldest_s=0.1):
    steps = [k * SEGMENT_S + 0.02 * bool(k) for k in range(5)]
    iops = series(iops_levels)
    return {"iops": iops, "clat_us": [(t, 32e6 / v) for t, v in iops if v], "polls": polls(protocols, backlog_mib,
                                                                                           oldest_s),
            "steps": steps, "end": 5 * SEGMENT_S}


class Parsing(unittest.TestCase):
    def test_fio_log(self):
        text = "1795828373083, 1004, 1, 0, 0\n1795828373333, 998, 1, 0, 0\n1795828373333, 5, 0, 0, 0\nbad\n"
        self.assertEqual(fio.parse_log(text), [(1795828373083, 1004.0), (1795828373333, 998.0)])
        self.assertEqual(fio.log_paths("/x/fio"), ("/x/fio_iops.1.log", "/x/fio_clat.1.log"))
        self.assertIn("--log_unix_epoch=1", fio.log_args("/x/fio", 250))

    def test_metrics_exposition(self):
        m = live.parse_metrics(helpers.fixture("metrics-srm.txt"))
        self.assertEqual(m["protocol"], "C")
        self.assertIsInstance(m["unreplicated_bytes"], float)
        self.assertIsNotNone(m["oldest_s"])
        self.assertIs(m["possibly_stale"], False)
        text = ('tandem_connection_protocol{resource="r0",peer="bob",protocol="A"} 1\n'
                'tandem_connection_protocol{resource="r0",peer="bob",protocol="C"} 0\n'
                'tandem_connection_unreplicated_bytes{resource="r0",peer="bob"} 65536\n'
                'tandem_connection_oldest_unreplicated_seconds{resource="r0",peer="bob"} 1.500\n'
                'tandem_connection_peer_possibly_stale{resource="r0",peer="bob"} 1\n')
        self.assertEqual(live.parse_metrics(text), {"protocol": "A", "unreplicated_bytes": 65536.0, "oldest_s": 1.5,
                                                    "possibly_stale": True, "waiting_writes": None})
        self.assertEqual(live.parse_metrics("")["protocol"], None)

    def test_defaults_match_the_srm_crate(self):
        path = os.path.join(os.path.dirname(helpers.BENCH), "crates", "srm", "src", "config.rs")
        with open(path, encoding="utf-8") as f:
            src = f.read()
        self.assertIn("LAG_BYTES_DEFAULT: u64 = 64 << 20;", src)
        self.assertEqual(live.LAG_BYTES_DEFAULT, 64 << 20)
        seconds = re.search(r"LAG_TIME_DEFAULT: Duration = Duration::from_secs\((\d+)\)", src)
        self.assertEqual(float(seconds.group(1)), live.LAG_TIME_DEFAULT_S)


class Schedule(unittest.TestCase):
    def test_requests(self):
        self.assertEqual([s.rtt_ms for s in live.SCHEDULE], [0, 20, 50, 0, 0])
        self.assertEqual(live.SCHEDULE[1].request(), {"delay_ms": 10, "rate": "unlimited"})
        self.assertEqual(live.SCHEDULE[-1].request(), {"delay_ms": 0, "rate": live.DROP_RATE})

    def test_setups(self):
        srm = live.variant_setup("srm-on", 1 << 20)
        self.assertEqual(srm.options, (("srm", "on"),))
        self.assertTrue(srm.metrics and srm.link_rtt_ms == 0)
        self.assertEqual(live.variant_setup("proto-A", 1 << 20).protocol, "A")
        text = cluster.resource_text("C", (), ["/a", "/b"], [1, 2], metrics_address="127.0.0.1:9")
        self.assertEqual(text.count("metrics-address 127.0.0.1:9;"), 1)
        self.assertLess(text.index("metrics-address"), text.index("on bob"))

    def test_job_and_estimates(self):
        self.assertEqual(live.job(MODES["default"]).runtime_s, 50)
        self.assertEqual(live.job(MODES["smoke"]).runtime_s, 5)
        est = {m: live.estimate_s(MODES[m]) for m in ("smoke", "quick", "default")}
        self.assertLess(est["smoke"], est["quick"])
        self.assertLess(est["quick"], est["default"])

    def test_nearest_and_settle_window(self):
        pts = [(0.25, 1.0), (0.5, 2.0), (0.753, 3.0)]
        self.assertEqual([live.nearest(pts, t, 0.125) for t in (0.248, 0.75, 0.9, 0.0)], [1.0, 3.0, None, None])
        self.assertEqual([live.settle_window_s(s) for s in (1, 6, 10)], [0.5, 3.0, 3.0])

    def test_segment_of(self):
        steps = [0.0, 10.01, 20.02]
        self.assertEqual([live.segment_of(t, steps) for t in (0.25, 10.0, 10.25, 25)], [0, 0, 1, 2])


class Summary(unittest.TestCase):
    def traces(self, srm_levels, srm_protocols="CAAAA", backlog=(0, 2, 4, 1, 60), oldest_s=0.1):
        return {"proto-C": trace([1000, 300, 150, 1000, 400]),
                "proto-A": trace([950, 900, 880, 950, 420], "AAAAA", (1, 2, 4, 1, 64)),
                "srm-on": trace(srm_levels, srm_protocols, backlog, oldest_s)}

    def test_srm_that_follows_the_better_static_passes(self):
        # SRM at C's level, then 2 s at C's rate after each step before reaching A's.
        slow_start = [lambda t, lo=lo, hi=hi: lo if t < 2 else hi for lo, hi in ((300, 890), (150, 870))]
        rows = live.segment_summary(self.traces([990] + slow_start + [990, 410]), SEGMENT_S)
        self.assertEqual([r["best_name"] for r in rows], ["proto-C", "proto-A", "proto-A", "proto-C", "proto-A"])
        self.assertEqual([r["verdict"] for r in rows], ["PASS"] * 5)
        self.assertAlmostEqual(rows[1]["ratio"], 890 / 900)
        self.assertGreater(rows[1]["settle_s"], 2.0)
        self.assertLessEqual(rows[1]["settle_s"], 3.0)
        self.assertEqual(rows[1]["protocols"], "A")

    def test_dip_share(self):
        pts = [(t / 4, 100.0 if t % 8 else 10.0) for t in range(1, 41)]
        self.assertEqual(live.dip_share([(t / 4, 5.0) for t in range(1, 41)], 0, 10, 3), 0.0)
        share = live.dip_share(pts, 0, 10, 3)
        self.assertGreater(share, 0.3)
        self.assertLess(share, 0.7)
        self.assertIsNone(live.dip_share([], 0, 10, 3))
        rows = live.segment_summary(self.traces([990, 890, 870, 990, 410]), SEGMENT_S)
        self.assertEqual([r["best_dips"] for r in rows], [0.0] * 5)

    def test_slow_settle_and_low_ratio_fail(self):
        late = lambda t: 300 if t < 5 else 890  # noqa: E731
        rows = live.segment_summary(self.traces([990, late, 500, 990, 410]), SEGMENT_S)
        self.assertEqual(rows[1]["verdict"], "FAIL")
        self.assertGreater(rows[1]["settle_s"], 5.0)
        self.assertEqual(rows[2]["verdict"], "FAIL")
        self.assertIsNone(rows[2]["settle_s"])
        self.assertEqual(live.shortfalls(rows[1]), ["settled in 5.7 s > 3 s"])
        self.assertEqual(live.shortfalls(rows[2]), ["never reached 90%", "ratio 0.57 < 0.90"])
        self.assertEqual(live.shortfalls(rows[0]), [])
        self.assertAlmostEqual(rows[2]["ratio"], 500 / 880)

    def test_backlog_beyond_the_bound_fails(self):
        rows = live.segment_summary(self.traces([990, 890, 870, 990, 410], backlog=(0, 2, 4, 1, 65)), SEGMENT_S)
        self.assertEqual(rows[4]["backlog_acked_max"], 65 << 20)
        self.assertEqual(rows[4]["verdict"], "FAIL")
        rows = live.segment_summary(self.traces([990, 890, 870, 990, 410], oldest_s=2.5), SEGMENT_S)
        self.assertEqual(rows[1]["verdict"], "FAIL")
        self.assertEqual(live.shortfalls(rows[1]), ["oldest acked write 2.50 s > 2 s"])
        # Under protocol C nothing unreplicated is acknowledged: a large backlog there is no breach.
        rows = live.segment_summary(self.traces([990, 890, 870, 990, 410], "CCCCC", (0, 0, 0, 0, 100)), SEGMENT_S)
        self.assertIsNone(rows[4]["backlog_acked_max"])
        self.assertEqual(rows[4]["backlog_max"], 100 << 20)
        self.assertEqual(rows[4]["verdict"], "PASS")

    def test_smoke_and_missing_variants(self):
        rows = live.segment_summary(self.traces([990, 890, 870, 990, 410]), SEGMENT_S, smoke=True)
        self.assertEqual({r["verdict"] for r in rows}, {"not meaningful (smoke)"})
        traces = self.traces([990, 890, 870, 990, 410])
        del traces["srm-on"]
        rows = live.segment_summary(traces, SEGMENT_S)
        self.assertEqual({r["verdict"] for r in rows}, {"not measured"})
        self.assertEqual(live._verdict_sentence(rows), "no verdict (not measured).")

    def test_report_lines(self):
        rows = live.segment_summary(self.traces([990, 890, 500, 990, 410]), SEGMENT_S)
        text = "\n".join(live.summary_lines(rows, 1, 1, SEGMENT_S))
        self.assertIn("| 2: +50 ms |", text)
        self.assertIn("**FAIL** (never reached 90%; ratio 0.57 < 0.90)", text)
        self.assertEqual(live._verdict_sentence(rows), "SRM meets the target in 4 of 5 segments; it misses it in: "
                                                       "+50 ms.")
        self.assertEqual(live.SCHEDULE[-1].label, "0 ms at 10 MiB/s")


class Across(unittest.TestCase):
    def test_across_repetitions(self):
        make = Summary().traces
        good = live.segment_summary(make([990, 890, 870, 990, 410]), SEGMENT_S)
        bad = live.segment_summary(make([990, 890, 500, 990, 410]), SEGMENT_S)
        text = "\n".join(live.across_lines([good, bad, good]))
        self.assertIn("Across the 3 repetitions:", text)
        self.assertIn("| 2: +50 ms | 0.99 (0.57–0.99) |", text)
        self.assertIn("(1 never)", text)
        self.assertIn("| 2 of 3 |", text)
        self.assertIn("| 3 of 3 |", text)


class RowsAndPlot(unittest.TestCase):
    def test_rows(self):
        tr = trace([1000, 300, 150, 1000, 400], "CAAAA", (0, 2, 4, 1, 60))
        tr["clat_us"] = [(t + 0.003, v) for t, v in tr["clat_us"]]
        rows = live.rows_of(tr, "srm-on", 1)
        self.assertEqual(len(rows), len(tr["iops"]))
        r = next(r for r in rows if r["time_s"] == 15.0)
        self.assertEqual((r["segment"], r["segment_label"], r["rtt_ms"], r["protocol"]), (1, "+20 ms", 20, "A"))
        self.assertEqual((r["unreplicated_kib"], r["bound_kib"], r["bound_ms"]), (2048, 65536, 2000))
        self.assertAlmostEqual(r["clat_mean_us"], 32e6 / 300)
        self.assertIsNone(live.rows_of(tr, "proto-C", 1)[0]["bound_kib"])

    def test_plot(self):
        traces = {v: trace([1000, 300, 150, 1000, 400], p, (0, 2, 4, 1, 60))
                  for v, p in (("proto-C", "CCCCC"), ("proto-A", "AAAAA"), ("srm-on", "CAAAC"))}
        root = ET.fromstring(live.plot(traces, SEGMENT_S))
        panels = [g for g in root.iter(f"{NS}g") if g.get("class") == "panel"]
        self.assertEqual(len(panels), 4)
        names = [[s.get("data-name") for s in p.iter(f"{NS}g") if s.get("class") == "series"] for p in panels]
        self.assertEqual(names, [list(live.VARIANTS), list(live.VARIANTS), ["srm-on"], ["srm-on", "proto-A"]])
        markers = [e for e in root.iter(f"{NS}line") if e.get("class") == "marker"]
        self.assertEqual(len(markers), len(live.SCHEDULE))


if __name__ == "__main__":
    unittest.main()


class Gaps(unittest.TestCase):
    def test_fill_gaps(self):
        pts = [(0.25, 5.0), (0.5, 6.0), (1.5, 7.0), (1.75, 8.0)]
        self.assertEqual(live.fill_gaps(pts, 0.25, 0.0), [(0.25, 5.0), (0.5, 6.0), (0.75, 0.0), (1.0, 0.0),
                                                          (1.25, 0.0), (1.5, 7.0), (1.75, 8.0)])
        self.assertEqual(live.fill_gaps(pts[:2], 0.25, None), pts[:2])
        self.assertEqual(live.fill_gaps([], 0.25, 0.0), [])
