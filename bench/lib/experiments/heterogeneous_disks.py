"""heterogeneous-disks (seed 000 section 4.3): a slow primary with a fast secondary and the
reverse. A slow disk is emulated by tandem's benchmark-only `disk-throttle-latency` (every
local data write of that node takes at least that long, on one of its three I/O threads), so
it limits both latency and parallelism the way a slow device does; the fast disk is the plain
backing file.

Cases, each on fresh nodes, protocols A and C: fast-fast (the baseline), slow primary + fast
secondary, fast primary + slow secondary. Jobs: 4 KiB random writes at QD16 and 1 MiB
sequential writes at QD1. Reported: IOPS and throughput, and each case's ratio to fast-fast
of the same protocol, within the run.

Invariant: every ratio compares cases of the same repetition set and protocol; the slow
latency is the same constant (SLOW_US) in every slow case.
"""

from .. import seeds, svg
from ..cluster import Setup
from ..fio import Job
from ..report import Outcome, cell, fmt, table
from . import common

NAME = "heterogeneous-disks"
TITLE = "a slow primary with a fast secondary and the reverse"
SEED = seeds.cite("000", "section 4.3")
METRICS = ("iops", "mib_s", "clat_mean_us", "clat_p99_us")
#: Per-write latency of the slow disk, microseconds (a busy SATA disk's write latency).
SLOW_US = 2000
SHAPES = (("fast-fast", (0, 0)), ("slow-primary", (SLOW_US, 0)), ("slow-secondary", (0, SLOW_US)))


def jobs(mode):
    """rand-4k-qd16 and seq-1m-qd1, time-based."""
    size, t, ramp = mode.image_bytes, mode.runtime_s, mode.ramp_s
    return [Job("rand-4k-qd16", "randwrite", "4k", 16, size, t, ramp),
            Job("seq-1m-qd1", "write", "1M", 1, size, t, ramp)]


def label(shape, protocol):
    return f"{shape} proto-{protocol}"


def cases(mode):
    """Every shape for protocols A and C."""
    return [common.Case(label(shape, p), Setup("pair", protocol=p, size_bytes=mode.image_bytes, throttle_us=slow,
                                               label=label(shape, p)))
            for p in "AC" for shape, slow in SHAPES]


def estimate_s(mode):
    """Rough duration in seconds."""
    return common.estimate_s(mode, cases(mode), jobs(mode))


def ratios(aggs, js):
    """{(protocol, shape, job): case IOPS / fast-fast IOPS of the same protocol} where both exist."""
    out = {}
    for p in "AC":
        for j in js:
            base = _find(aggs, label("fast-fast", p), j.name).get("iops")
            for shape, _ in SHAPES:
                value = _find(aggs, label(shape, p), j.name).get("iops")
                if base and value is not None:
                    out[(p, shape, j.name)] = value / base
    return out


def run(ctx):
    """Measures, then a table of IOPS / MiB/s, the ratios to fast-fast, and a bar chart."""
    js, cs = jobs(ctx.mode), cases(ctx.mode)
    rows, problems, checks = common.measure(ctx, NAME, cs, js)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(js) * len(cs) * ctx.mode.reps)
    o.method = [f"Each case on fresh nodes on loopback, protocols A and C; the slow node's every local data write "
                f"takes at least {SLOW_US} µs (`disk-throttle-latency {SLOW_US};` in its `on` section, a benchmark-only "
                f"tandem setting), the other node writes at full speed. fio nbd engine on alice (the Primary): "
                f"{'; '.join(j.describe() for j in js)}. The paper compared a slow and a fast server; here both "
                "nodes share one machine, so only the disk differs."]
    aggs = common.aggregate(rows, ["case", "workload"], METRICS)
    reps = ctx.mode.reps
    labels = [c.label for c in cs]
    for metric, title, digits in (("iops", "IOPS", 0), ("mib_s", "MiB/s", 1), ("clat_mean_us", "mean completion latency, µs", 1)):
        body = [[lab] + [cell(_find(aggs, lab, j.name), metric, digits, reps) for j in js] for lab in labels]
        o.lines += [f"{title}:", ""] + table(["case"] + [j.name for j in js], body) + [""]
    r = ratios(aggs, js)
    body = [[label(shape, p)] + [fmt(r.get((p, shape, j.name)), 2) for j in js] for p in "AC" for shape, _ in SHAPES]
    o.lines += ["IOPS as a fraction of fast-fast with the same protocol (within this run):", ""]
    o.lines += table(["case"] + [j.name for j in js], body) + [""]
    o.lines += ["What to read: under protocol C every write waits for both disks, so a slow disk on either node "
                "limits the pair (the paper's finding that the slower server sets the pace); under protocol A only "
                "the Primary's disk is in the write path, so a slow secondary costs little while the link keeps up.", ""]
    o.lines += common.replica_lines(checks)
    common.try_plot(ctx, o, "heterogeneous-disks.svg", "IOPS per case",
                    lambda: svg.bar_chart("heterogeneous disks: IOPS", "IOPS",
                                          *common.bars(aggs, "workload", "case", "iops")))
    return o


def _find(aggs, case, workload):
    return next((a for a in aggs if a["case"] == case and a["workload"] == workload), {})
