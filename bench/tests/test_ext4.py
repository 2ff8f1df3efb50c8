"""The ext4 experiment's pure parts: the plan per mode, fio's command line inside the
filesystem, mountinfo parsing, the tools each variant needs, the clean-up order, the ratio
table, the `fuse-mount` line in the generated drbd.conf, and issue 4's experiments being left
out of a plain --quick."""

import contextlib
import unittest

import helpers  # noqa: F401  (sets sys.path)

from lib import cluster
from lib.errors import BenchError
from lib.experiments import default_selection, ext4, named_only_pending, registry
from lib.modes import MODES

MIB = 1 << 20
GIB = 1 << 30


class Plan(unittest.TestCase):
    def test_modes(self):
        for mode, file_bytes, runtime_s in (("smoke", 64 * MIB, 1), ("quick", GIB, 3), ("default", GIB, 5),
                                            ("full", GIB, 6)):
            with self.subTest(mode=mode):
                pl = ext4.plan(MODES[mode])
                self.assertEqual(pl.file_bytes, file_bytes)
                self.assertEqual(pl.device_bytes, file_bytes + file_bytes // 4)
                self.assertEqual([(j.rw, j.bs, j.iodepth) for j in pl.jobs],
                                 [("write", "1M", 1), ("randwrite", "4k", 16)])
                self.assertTrue(all(j.runtime_s == runtime_s and j.size_bytes == file_bytes for j in pl.jobs))

    def test_fio_args(self):
        job = ext4.plan(MODES["quick"]).jobs[1]
        argv = ext4.fio_args(job, "/m/ext4/fio.dat", "/o/x.json")
        for needle in ("--direct=1", "--ioengine=libaio", "--filename=/m/ext4/fio.dat", f"--size={GIB}",
                       "--rw=randwrite", "--bs=4k", "--iodepth=16", "--time_based", "--runtime=3", "--ramp_time=1",
                       "--output=/o/x.json"):
            self.assertIn(needle, argv)
        smoke = ext4.fio_args(ext4.plan(MODES["smoke"]).jobs[0], "/f", "/o.json")
        self.assertFalse(any(a.startswith("--ramp_time") for a in smoke))

    def test_estimates(self):
        est = {m: ext4.estimate_s(MODES[m]) for m in ("smoke", "quick", "default", "full")}
        self.assertLess(est["smoke"], est["quick"])
        self.assertLess(est["quick"], est["default"])
        self.assertLess(est["default"], est["full"])


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
90 22 0:50 / /tmp/b/alice.fuse rw,nosuid,nodev,relatime shared:60 - fuse /dev/fuse rw,user_id=0
91 22 7:0 / /tmp/b/with\\040space rw,relatime shared:61 - ext4 /dev/loop0 rw
"""


class Mounts(unittest.TestCase):
    def test_mount_points(self):
        self.assertEqual(ext4.mount_points(MOUNTINFO), ["/", "/tmp/b/alice.fuse", "/tmp/b/with space"])
        self.assertEqual(ext4.mount_points(""), [])

    def test_missing_tools(self):
        def none(_tool):
            return None

        def only(*tools):
            return lambda t: f"/usr/bin/{t}" if t in tools else None

        every = only("losetup", "mkfs.ext4", "mount", "umount", "nbdfuse")
        table = [
            (ext4.LOCAL, every, "/dev/null", ""),
            (ext4.FUSE, every, "/dev/null", ""),
            (ext4.NBD, every, "/dev/null", ""),
            (ext4.NBD, only("losetup", "mkfs.ext4", "mount", "umount"), "/dev/null", "nbdfuse"),
            (ext4.FUSE, every, "/nonexistent/fuse", "/nonexistent/fuse"),
            (ext4.LOCAL, every, "/nonexistent/fuse", ""),
            (ext4.LOCAL, none, "/dev/null", "losetup, mkfs.ext4, mount, umount"),
        ]
        for variant, have, dev, want in table:
            with self.subTest(variant=variant, want=want):
                self.assertEqual(ext4.missing_tools(variant, have, dev), want)

    def test_teardown_runs_every_step_in_reverse_and_collects_failures(self):
        done, notes = [], []

        def fail(what):
            done.append(what)
            raise BenchError(f"{what} failed")

        with self.assertRaises(RuntimeError):
            with contextlib.ExitStack() as stack:
                td = ext4.Teardown(stack, notes)
                td.push("detach", done.append, "detach")
                td.push("nbdfuse", fail, "nbdfuse")
                td.push("umount", done.append, "umount")
                raise RuntimeError("the workload failed")
        self.assertEqual(done, ["umount", "nbdfuse", "detach"])
        self.assertEqual(notes, ["clean-up: nbdfuse: nbdfuse failed"])


class Config(unittest.TestCase):
    def test_fuse_mount_in_alices_section_only(self):
        text = cluster.resource_text("C", cluster.DEFAULT_NET, ["/a.img", "/b.img"], [7001, 7002],
                                     fuse_mount="/tmp/x/alice.fuse")
        alice = text.index("  on alice {")
        bob = text.index("  on bob {")
        line = text.index('    fuse-mount "/tmp/x/alice.fuse";\n')
        self.assertLess(alice, line)
        self.assertLess(line, bob)
        self.assertEqual(text.count("fuse-mount"), 1)
        self.assertNotIn("fuse-mount", cluster.resource_text("C", cluster.DEFAULT_NET, ["/a", "/b"], [1, 2]))

    def test_setup_default_has_no_fuse_mount(self):
        self.assertIsNone(cluster.Setup("pair").fuse_mount)


class Ratios(unittest.TestCase):
    def test_percent_of_local_file_within_each_repetition(self):
        rows = [{"case": ext4.LOCAL, "workload": "w", "rep": 1, "mib_s": 100.0, "iops": 100},
                {"case": ext4.FUSE, "workload": "w", "rep": 1, "mib_s": 50.0, "iops": 50},
                {"case": ext4.LOCAL, "workload": "w", "rep": 2, "mib_s": 200.0, "iops": 200},
                {"case": ext4.FUSE, "workload": "w", "rep": 2, "mib_s": 150.0, "iops": 150}]
        out = ext4.ratio_rows(rows, 2)
        self.assertEqual(out[0][0], ext4.LOCAL)
        self.assertEqual(out[0][-2], "100")
        self.assertEqual(out[1][0], ext4.FUSE)
        self.assertEqual(out[1][-2], "62")  # median of 50% and 75%
        self.assertEqual(out[1][2], "100.0 (50.0–150.0)")
        self.assertEqual(out[1][-1], "–")  # no tandem-nbd rows

    def test_percent_of_the_raw_nbd_export_within_each_repetition(self):
        rows = [{"case": ext4.RAW, "workload": "w", "rep": 1, "mib_s": 100.0},
                {"case": ext4.FUSE, "workload": "w", "rep": 1, "mib_s": 80.0},
                {"case": ext4.RAW, "workload": "v", "rep": 1, "mib_s": 10.0},
                {"case": ext4.FUSE, "workload": "v", "rep": 1, "mib_s": 5.0}]
        out = {(r[0], r[1]): r for r in ext4.ratio_rows(rows, 1)}
        self.assertEqual(out[(ext4.FUSE, "w")][-1], "80")
        self.assertEqual(out[(ext4.FUSE, "v")][-1], "50")
        self.assertEqual(out[(ext4.RAW, "w")][-1], "100")
        self.assertEqual(out[(ext4.FUSE, "w")][-2], "–")  # no local-file rows

    def test_no_baseline_prints_a_dash(self):
        out = ext4.ratio_rows([{"case": ext4.FUSE, "workload": "w", "rep": 1, "mib_s": 5.0}], 1)
        self.assertEqual(out[0][-1], "–")
        self.assertEqual(out[0][-2], "–")


class Selection(unittest.TestCase):
    def test_plain_quick_leaves_issue_4_out(self):
        available, _ = registry(None)
        names = list(available)
        self.assertEqual(names[-3:], ["failover", "ext4", "bonnie"])
        quick = default_selection(names, "quick")
        self.assertNotIn("failover", quick)
        self.assertNotIn("ext4", quick)
        by_name = [n for n in names if n not in ("heterogeneous-disks", "bonnie", "direct-io")]
        for mode in ("smoke", "full"):
            self.assertEqual(default_selection(names, mode), by_name)
        self.assertEqual(default_selection(names, "default"), [n for n in names if n != "direct-io"])
        pending = named_only_pending(names, "quick")
        self.assertEqual([p.name for p in pending],
                         ["cpu", "direct-io", "heterogeneous-disks", "failover", "ext4", "bonnie"])
        self.assertIn("bench/run --quick failover", pending[3].needs)
        self.assertEqual([p.name for p in named_only_pending(names, "full")],
                         ["direct-io", "heterogeneous-disks", "bonnie"])

    def test_bonnie_parses_its_csv_line(self):
        from lib.experiments import bonnie
        line = "1.98,2.00a,vm,1,1795358657,256M,,8192,5,,,515123,37,+++++,+++,,,204800,20,1234.5,30,,,,"
        self.assertEqual(bonnie.parse_csv(line),
                         {"block-write": 515123.0, "rewrite": None, "block-read": 204800.0, "seeks": 1234.5,
                          "block-write-latency": None})
        self.assertEqual(bonnie.parse_csv("short,line"),
                         {**{n: None for n, _, _ in bonnie.COLUMNS}, "block-write-latency": None})

    def test_bonnie_latency_is_kept_when_throughput_is_too_fast_to_time(self):
        from lib.experiments import bonnie
        line = ("1.98,2.00a,x,1,1795719081,256M,,8192,5,,,+++++,+++,+++++,+++,,,+++++,+++,+++++,+++,"
                ",,,,,,,,,,,,,,,,,,134us,144us,,236us,10082us,,,,,,")
        parsed = bonnie.parse_csv(line)
        self.assertIsNone(parsed["block-write"])
        self.assertEqual(parsed["block-write-latency"], 134.0)
        self.assertEqual([bonnie.parse_latency_us(r) for r in ("12ms", "2s", "", "x us")], [12000.0, 2e6, None, None])


if __name__ == "__main__":
    unittest.main()
