"""fio JSON parsing on recorded output, and fio command lines."""

import json
import unittest

from helpers import fixture

from lib import fio
from lib.errors import FioParseError


class ParseRecorded(unittest.TestCase):
    def test_seq1m(self):
        m = fio.parse_text(fixture("fio-seq1m-qd1.json"))
        self.assertAlmostEqual(m["mib_s"], 1014878850 / 2**20, places=6)
        self.assertAlmostEqual(m["iops"], 967.863894)
        self.assertAlmostEqual(m["clat_mean_us"], 860.951505859, places=6)
        self.assertAlmostEqual(m["clat_p99_us"], 1220.608)
        self.assertEqual(m["ios"], 1024)
        self.assertAlmostEqual(m["runtime_s"], 1.058)
        self.assertAlmostEqual(m["bw_stddev_mib_s"], 50587.83334 / 1024)
        self.assertEqual(m["flushes"], 0)
        self.assertIsNone(m["flush_mean_us"])

    def test_rand4k_qd32_percentiles_ordered(self):
        m = fio.parse_text(fixture("fio-rand4k-qd32.json"))
        self.assertAlmostEqual(m["iops"], 63305.738852)
        chain = [m[k] for k in ("clat_p50_us", "clat_p90_us", "clat_p99_us", "clat_p999_us", "clat_max_us")]
        self.assertEqual(chain, sorted(chain))
        self.assertAlmostEqual(m["clat_p99_us"], 4423.68)

    def test_fsync_run_counts_flushes(self):
        m = fio.parse_text(fixture("fio-write512-fsync.json"))
        self.assertEqual(m["ios"], 512)
        self.assertEqual(m["flushes"], 511)
        self.assertGreater(m["flush_mean_us"], 0)
        self.assertAlmostEqual(m["us_per_write"], 1000 * 39 / 512)

    def test_warnings_before_json_are_skipped(self):
        text = "fio: note: both iodepth >= 1 and synchronous I/O engine are selected\n" + fixture("fio-seq1m-qd1.json")
        self.assertEqual(fio.parse_text(text), fio.parse_text(fixture("fio-seq1m-qd1.json")))


class ParseBad(unittest.TestCase):
    def doc(self, mutate):
        d = json.loads(fixture("fio-seq1m-qd1.json"))
        mutate(d)
        return json.dumps(d)

    def test_table(self):
        cases = [
            ("empty", ""),
            ("not json", "fio: engine nbd not loadable\n{ truncated"),
            ("no jobs", self.doc(lambda d: d.update(jobs=[]))),
            ("error set", self.doc(lambda d: d["jobs"][0].update(error=5))),
            ("no writes", self.doc(lambda d: d["jobs"][0]["write"].update(total_ios=0))),
            ("missing clat", self.doc(lambda d: d["jobs"][0]["write"].pop("clat_ns"))),
            ("string number", self.doc(lambda d: d["jobs"][0]["write"].update(bw_bytes="fast"))),
            ("truncated", fixture("fio-seq1m-qd1.json")[:2000]),
        ]
        for name, text in cases:
            with self.subTest(name), self.assertRaises(FioParseError):
                fio.parse_text(text)


class CommandLine(unittest.TestCase):
    def test_table(self):
        cases = [
            (fio.Job("seq", "write", "1M", 1, 1 << 30), [], ["--time_based", "--ramp_time", "--fsync"]),
            (fio.Job("r", "randwrite", "4k", 32, 1 << 26, 5, 1), ["--time_based", "--runtime=5", "--ramp_time=1"],
             ["--fsync"]),
            (fio.Job("f", "write", "512", 1, 512000, fsync_every=1), ["--fsync=1", "--bs=512"], ["--time_based"]),
        ]
        for job, present, absent in cases:
            argv = fio.args(job, "nbd+unix:///r0?socket=/x", "/o.json")
            with self.subTest(job.name):
                self.assertEqual(argv[:3], ["fio", f"--name={job.name}", "--ioengine=nbd"])
                self.assertIn(f"--size={job.size_bytes}", argv)
                self.assertIn(f"--iodepth={job.iodepth}", argv)
                for p in present:
                    self.assertIn(p, argv)
                for a in absent:
                    self.assertFalse(any(x.startswith(a) for x in argv), a)

    def test_describe(self):
        self.assertEqual(fio.Job("r", "randwrite", "4k", 32, 1 << 30, 5, 1).describe(),
                         "randwrite 4k QD32, 5 s (+1 s warm-up)")
        self.assertEqual(fio.Job("s", "write", "1M", 1, 1 << 30).describe(), "write 1M QD1, 1 GiB once")
        self.assertEqual(fio.human_bytes(65536), "64 KiB")
        self.assertEqual(fio.human_bytes(1000), "1000 B")


if __name__ == "__main__":
    unittest.main()
