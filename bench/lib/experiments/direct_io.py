"""direct-io: `disk { io direct; }` (O_DIRECT backing files) against the default `io buffered;`
(issue 28, item 2), standalone and protocol C on loopback, with cpu's three workloads (1 MiB
sequential QD1, 4 KiB random QD1 and QD32) and cpu's per-node CPU accounting.

Invariants: the cases alternate (standalone, standalone-direct, proto-C, proto-C-direct, ...)
on fresh nodes with fresh preallocated images; every direct/buffered ratio is taken within one
repetition (same protocol, same workload) and the report gives their median and min-max. The
images live in the suite's temporary directory, so the figures are those of its file system
(the report's machine section names it); on tmpfs before Linux 6.6 the direct cases fail at `up`.
"""

from .. import stats
from ..cluster import Setup
from ..report import Outcome, cell, table
from . import common, cpu

NAME = "direct-io"
TITLE = "Direct I/O (O_DIRECT) against buffered backing files: throughput, latency, CPU"
SEED = cpu.SEED
DIRECT = (("io", "direct"),)
BASES = ("standalone", "proto-C")


def cases(mode):
    """standalone and protocol C, each buffered and direct."""
    size = mode.image_bytes
    out = []
    for base in BASES:
        kind = "standalone" if base == "standalone" else "pair"
        out.append(common.Case(base, Setup(kind, size_bytes=size), (("io", "buffered"),)))
        out.append(common.Case(f"{base}-direct", Setup(kind, size_bytes=size, disk=DIRECT), (("io", "direct"),)))
    return out


def estimate_s(mode):
    """Rough duration in seconds."""
    return common.estimate_s(mode, cases(mode), cpu.jobs(mode))


def direct_ratio(rows, base, workload, metric):
    """{'value', 'min', 'max', 'values'} of metric(direct) / metric(buffered) per repetition."""
    vs = stats.paired_ratios(rows, metric, {"case": f"{base}-direct", "workload": workload},
                             {"case": base, "workload": workload})
    if not vs:
        return None
    return {"value": stats.median(vs), "min": min(vs), "max": max(vs), "values": vs}


def ratio_rows(rows):
    """Per base case and workload: direct ÷ buffered for IOPS, mean latency and summed CPU."""
    body = []
    for base in BASES:
        for wl, unit, _ in cpu.UNITS:
            body.append([base, wl] + [cpu.show(direct_ratio(rows, base, wl, m))
                                      for m in ("iops", "clat_mean_us", f"sum_cpu_us_per_{unit}")])
    return body


def run(ctx):
    """Measures the four cases alternately; absolute medians and direct ÷ buffered ratios."""
    js, cs = cpu.jobs(ctx.mode), cases(ctx.mode)
    reps = ctx.mode.reps
    rows, problems, checks = common.measure(ctx, NAME, cs, js, reps, cpu.measure_job)
    for row in rows:
        row["io"] = "direct" if row["case"].endswith("-direct") else "buffered"
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(js) * len(cs) * reps)
    o.method = [f"Fresh nodes per case on loopback as in `cpu`; the `-direct` cases add `disk {{ io direct; }}` "
                f"on every node. fio's nbd engine on alice's export: {'; '.join(j.describe() for j in js)}. "
                f"{reps} repetition(s), cases in round-robin order; CPU as in `cpu`."]
    present = [c.label for c in cs if any(r["case"] == c.label for r in rows)]
    metrics = sorted({k for r in rows for k, v in r.items() if isinstance(v, (int, float)) and k != "rep"})
    aggs = common.aggregate(rows, ["case", "workload"], metrics)
    body = []
    for wl, unit, _ in cpu.UNITS:
        for case in present:
            a = cpu._find(aggs, case, wl)
            body.append([wl, case, cell(a, "iops", 0, reps), cell(a, "mib_s", 0, reps),
                         cell(a, "clat_mean_us", 1, reps), cell(a, "clat_p99_us", 0, reps),
                         cell(a, f"sum_cpu_us_per_{unit}", 1, reps), cell(a, "machine_busy_pct", 0, reps)])
    o.lines += ["Medians per case and workload (a request is 1 MiB for seq1m, 4 KiB otherwise):", ""]
    o.lines += table(["workload", "case", "IOPS", "MiB/s", "mean µs", "p99 µs", "summed CPU µs/req",
                      "machine busy %"], body, "llrrrrrr")
    o.lines += ["", "Direct ÷ buffered within one repetition, median (min–max):", ""]
    o.lines += table(["case", "workload", "IOPS", "mean latency", "summed CPU per request"], ratio_rows(rows),
                     "llrrr")
    o.lines += [""] + common.replica_lines(checks)
    return o
