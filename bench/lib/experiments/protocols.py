"""protocols: replication protocols A, B and C against the standalone export, sequential and
random 4 KiB writes at queue depth 16 (Iozone-like) and random 4 KiB at QD1 (latency), on the
bare loopback link and, when the link emulator is available, with an added round trip.

Invariant: the standalone baseline is measured in the same run, with the same jobs.
"""

from .. import seeds, svg
from ..cluster import Setup
from ..fio import Job
from ..report import Outcome, cell, table
from . import common

NAME = "protocols"
TITLE = "protocol A vs B vs C, sequential and random writes"
SEED = seeds.cite("000", "section 4.7 (asynchronous and synchronous comparisons)")
METRICS = ("iops", "mib_s", "clat_mean_us", "clat_p99_us", "alice_cpu_pct", "bob_cpu_pct")


def jobs(mode):
    """seq-4k-qd16, rand-4k-qd16, rand-4k-qd1, time-based."""
    size, t, ramp = mode.image_bytes, mode.runtime_s, mode.ramp_s
    return [Job("seq-4k-qd16", "write", "4k", 16, size, t, ramp),
            Job("rand-4k-qd16", "randwrite", "4k", 16, size, t, ramp),
            Job("rand-4k-qd1", "randwrite", "4k", 1, size, t, ramp)]


def cases(mode, with_link=True):
    """standalone, protocol A, B and C, then (with the link emulator) A, B and C with the mode's
    added round trip."""
    out = [common.Case("standalone", Setup("standalone", size_bytes=mode.image_bytes))]
    out += [common.Case(f"proto-{p}", Setup("pair", protocol=p, size_bytes=mode.image_bytes)) for p in "ABC"]
    if with_link:
        rtt = mode.protocols_rtt_ms
        out += [common.Case(f"proto-{p} +{rtt:g} ms", Setup("pair", protocol=p, size_bytes=mode.image_bytes,
                                                              link_rtt_ms=rtt)) for p in "ABC"]
    return out


def estimate_s(mode):
    """Rough duration in seconds."""
    return common.estimate_s(mode, cases(mode), jobs(mode))


def run(ctx):
    """Measures, then builds the outcome: a table per metric, two bar charts."""
    js, cs = jobs(ctx.mode), cases(ctx.mode, bool(ctx.linkemu))
    rows, problems, checks = common.measure(ctx, NAME, cs, js)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(js) * len(cs) * ctx.mode.reps)
    o.method = [f"Each case on fresh nodes on loopback (`net {{ protocol X; max-buffers 8000; max-epoch-size 8000; }}`), "
                f"fio nbd engine, {'; '.join(j.describe() for j in js)}. The paper ran Iozone on a 1 Gb/s LAN; here "
                "the link is loopback. "
                + (f"The `+{ctx.mode.protocols_rtt_ms:g} ms` cases put `tandem-linkemu` between the peers with that "
                   "round trip added (half each way); the other cases connect directly." if ctx.linkemu else
                   "The added-latency cases need the link emulator (`tandem-linkemu`), which this run did not have.")]
    aggs = common.aggregate(rows, ["case", "workload"], METRICS)
    reps = ctx.mode.reps
    labels = [c.label for c in cs]
    for metric, title, digits in (("iops", "IOPS", 0), ("clat_mean_us", "mean completion latency, µs", 1)):
        body = [[lab] + [cell(_find(aggs, lab, j.name), metric, digits, reps) for j in js] for lab in labels]
        o.lines += [f"{title}:", ""] + table(["case"] + [j.name for j in js], body) + [""]
    o.lines += common.replica_lines(checks)
    common.try_plot(ctx, o, "protocols-iops.svg", "IOPS per protocol",
                    lambda: svg.bar_chart("protocols: IOPS (4 KiB writes)", "IOPS",
                                          *common.bars(aggs, "workload", "case", "iops")))
    common.try_plot(ctx, o, "protocols-latency.svg", "mean completion latency per protocol",
                    lambda: svg.bar_chart("protocols: mean completion latency", "µs",
                                          *common.bars(aggs, "workload", "case", "clat_mean_us")))
    return o


def _find(aggs, case, workload):
    return next((a for a in aggs if a["case"] == case and a["workload"] == workload), {})
