"""small-write-latency: 512-byte synchronous writes, one at a time, N times (seed 000 section
4.6 used dd with 100,000 writes): the local backing file with dd against tandem's export.

dd cannot speak NBD, so tandem is driven by fio's nbd engine with the same pattern (bs=512,
iodepth=1, sequential, N writes), once without and once with an NBD FLUSH after every write;
the local file is written by dd with oflag=direct and with oflag=dsync. Average time per write
is total time / N for both tools.

Invariant: the overhead columns compare like with like: a plain write with dd oflag=direct, a
write+flush with dd oflag=dsync, and protocol C with the standalone export measured the same way.
"""

import os
import re
import time

from .. import cluster, procs, seeds, svg
from ..cluster import Setup
from ..errors import BenchError
from ..fio import Job
from ..report import Outcome, cell, fmt, table
from . import common

NAME = "small-write-latency"
TITLE = "512-byte synchronous writes: local file vs through tandem"
SEED = seeds.cite("000", "section 4.6 (latency optimization, dd of 512 bytes x 100,000)")
DD_FLAGS = (("write", "direct"), ("write+flush", "dsync"))
# Rough per-write costs on the development VM, for estimates only (µs): dd direct + dd dsync,
# then plain write and write+flush through standalone and protocol C.
ESTIMATE_US_PER_WRITE = 30 + 100 + 25 + 250 + 100 + 500
DD_SECONDS = re.compile(r"copied, ([0-9.]+(?:e-?[0-9]+)?) s")


def parse_dd(text):
    """Seconds dd reports for its copy ('... copied, 0.52 s, ...'); BenchError if absent."""
    found = DD_SECONDS.findall(text)
    if not found:
        raise BenchError(f"no 'copied, N s' in dd output: {text.strip()[-300:]}")
    return float(found[-1])


def run_dd(ctx, count, flag, rep):
    """dd of count 512-byte blocks into a preallocated file with oflag=flag; returns a row."""
    wd = ctx.workdir(NAME, "dd", flag, f"r{rep}")
    path = os.path.join(wd, "local.img")
    cluster.make_image(path, max(1 << 20, count * 512))
    log = os.path.join(wd, "dd.log")
    t0 = time.monotonic()
    proc = ctx.reaper.spawn(["dd", "if=/dev/zero", f"of={path}", "bs=512", f"count={count}", f"oflag={flag}",
                             "conv=notrunc"], log)
    rc = proc.wait()
    ctx.reaper.stop(proc)
    wall = time.monotonic() - t0
    text = procs.tail(log, 10)
    os.remove(path)
    if rc != 0:
        raise BenchError(f"dd oflag={flag}: exit {rc}: {text.strip()[-300:]}")
    secs = parse_dd(text)
    return {"case": "local dd", "how": f"dd oflag={flag}", "rep": rep, "writes": count, "seconds": secs,
            "us_per_write": 1e6 * secs / count, "wall_s": wall}


def estimate_s(mode):
    """Rough duration in seconds."""
    per_rep = mode.small_write_count * ESTIMATE_US_PER_WRITE / 1e6 + 2 * common.case_setup_s(mode) + 2
    return mode.reps * per_rep


def run(ctx):
    """dd on a local file, then fio through standalone and protocol C, every repetition."""
    m = ctx.mode
    n = m.small_write_count
    js = [Job("write", "write", "512", 1, n * 512), Job("write+flush", "write", "512", 1, n * 512, fsync_every=1)]
    cs = [common.Case("standalone", Setup("standalone", size_bytes=m.image_bytes)),
          common.Case("proto-C", Setup("pair", protocol="C", size_bytes=m.image_bytes))]
    rows, problems, checks = [], [], []
    skipped = 0
    for rep in range(1, m.reps + 1):
        for workload, flag in DD_FLAGS:
            try:
                row = run_dd(ctx, n, flag, rep)
                rows.append({**row, "workload": workload})
                procs.log(f"  {NAME} local dd oflag={flag:6} {row['us_per_write']:8.1f} us per write")
            except (BenchError, OSError) as exc:
                if flag == "direct" and "Invalid argument" in str(exc):
                    skipped += 1
                    problems.append(f"local dd oflag=direct (rep {rep}) not measured: the temporary directory's "
                                    "filesystem refuses O_DIRECT (tmpfs?)")
                else:
                    problems.append(f"local dd oflag={flag} (rep {rep}): FAILED: {exc}")
        for case in cs:
            r, p, check = common.run_case(ctx, NAME, case, js, rep)
            rows += [{**x, "how": "fio nbd, flush after each write" if x["workload"] == "write+flush"
                      else "fio nbd"} for x in r]
            problems += p
            if check:
                checks.append((case.label, rep, check))
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, (2 + 2 * len(cs)) * m.reps - skipped)
    _describe(o, n)
    _tables(o, rows, m.reps)
    o.lines += [""] + common.replica_lines(checks)
    aggs = common.aggregate(rows, ["workload", "case"], ["us_per_write"])
    common.try_plot(ctx, o, "small-write-latency.svg", "average time per 512-byte write",
                    lambda: svg.bar_chart(f"small writes: 512 B x {n}, average per write", "µs per write",
                                          *common.bars(aggs, "workload", "case", "us_per_write")))
    return o


def _describe(o, n):
    o.method = [f"{n:,} sequential 512-byte writes, one at a time. Local: `dd if=/dev/zero of=FILE bs=512 count={n} "
                "oflag=direct|dsync conv=notrunc` on a preallocated file in the same filesystem as tandem's backing "
                "files. tandem: dd cannot open an NBD export, so fio's nbd engine writes the same pattern "
                f"(`--rw=write --bs=512 --iodepth=1 --size={n * 512}`), once plainly (the reply comes when the "
                "protocol says the write is done) and once with `--fsync=1` (an NBD FLUSH after every write, which "
                "is what oflag=dsync asks of a local disk). tandem writes its backing files through the page cache "
                "and a FLUSH makes it sync them, so `write` is compared with dd oflag=direct and `write+flush` "
                "with dd oflag=dsync. The fairest replication overhead is proto-C against standalone: same client, "
                "same server code, one peer more."]


def _tables(o, rows, reps):
    aggs = common.aggregate(rows, ["workload", "case", "how"], ["us_per_write"])
    body = []
    for a in aggs:
        local = next((x for x in aggs if x["case"] == "local dd" and x["workload"] == a["workload"]), {})
        alone = next((x for x in aggs if x["case"] == "standalone" and x["workload"] == a["workload"]), {})
        body.append([a["workload"], a["case"], a["how"], cell(a, "us_per_write", 1, reps),
                     _overhead(a, local), _overhead(a, alone) if a["case"] == "proto-C" else "–"])
    o.lines += table(["workload", "case", "how", "µs per write", "vs local dd", "vs tandem standalone"], body, "lllrrr")


def _overhead(a, base):
    v, b = a.get("us_per_write"), base.get("us_per_write")
    if a is base or v is None or not b or a.get("case") == base.get("case"):
        return "–"
    return f"{'+' if v >= b else ''}{fmt(100 * (v - b) / b, 1)}%"
