"""streaming: 1 MiB sequential writes at queue depth 1, the benchmark of seed 003: throughput,
completion-latency percentiles, bandwidth standard deviation and the CPU (user and system) of
each node, for the standalone export and protocols A and C.

Invariant: CPU is sampled from /proc/<pid>/stat around each fio run, per node, so the Secondary's
cost (the subject of seed 003) is shown separately from the Primary's.
"""

from .. import seeds, svg
from ..cluster import Setup
from ..fio import Job
from ..report import Outcome, cell, table
from . import common

NAME = "streaming"
TITLE = "1 MiB sequential writes at QD1: throughput, tail latency, CPU per node"
SEED = seeds.cite("003", "fio --rw=write --bs=1m --numjobs=1 with psync at I/O depth 1")
PCTS = (("clat_p50_us", "p50"), ("clat_p90_us", "p90"), ("clat_p99_us", "p99"), ("clat_p999_us", "p99.9"),
        ("clat_max_us", "max"))
CPU = ("alice_usr_pct", "alice_sys_pct", "bob_usr_pct", "bob_sys_pct")
METRICS = ("mib_s", "bw_stddev_mib_s", "clat_mean_us") + tuple(k for k, _ in PCTS) + CPU + (
    "alice_cpu_us_per_io", "bob_cpu_us_per_io")


def plan(m):
    """(cases, jobs): standalone, proto-A, proto-C; one time-based 1 MiB QD1 job."""
    js = [Job("write-1m-qd1", "write", "1M", 1, m.image_bytes, m.runtime_s, m.ramp_s)]
    cs = [common.Case("standalone", Setup("standalone", size_bytes=m.image_bytes))]
    cs += [common.Case(f"proto-{p}", Setup("pair", protocol=p, size_bytes=m.image_bytes)) for p in "AC"]
    return cs, js


def estimate_s(mode):
    """Rough duration in seconds."""
    return common.estimate_s(mode, *plan(mode))


def run(ctx):
    """Measures standalone, proto-A and proto-C; tables of throughput, latency and CPU; charts."""
    m = ctx.mode
    cs, js = plan(m)
    rows, problems, checks = common.measure(ctx, NAME, cs, js)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(cs) * m.reps)
    o.method = [f"fio nbd engine, {js[0].describe()}: one request in flight, like psync at depth 1 in the seed "
                "(the seed compares two DRBD versions; here the comparison is replication's cost against the "
                "standalone export). Time-based, so the device wraps around instead of stopping at its end.",
                "",
                "Buffer allocations per request: not measured. tandem exposes no allocation counter; its design "
                "(crates/bufpool) is one pooled buffer per request, which a counter in `status --statistics` could "
                "confirm."]
    aggs = common.aggregate(rows, ["case"], METRICS)
    r = m.reps
    body = [[a["case"], cell(a, "mib_s", 0, r), cell(a, "bw_stddev_mib_s", 1, r), cell(a, "clat_mean_us", 0, r)]
            + [cell(a, k, 0, r) for k, _ in PCTS] for a in aggs]
    o.lines += table(["case", "MiB/s", "bw stddev MiB/s", "clat mean µs"] + [f"clat {n} µs" for _, n in PCTS], body)
    o.lines += ["", "CPU of each node during the run (% of one core; CPU µs per 1 MiB request):", ""]
    body = [[a["case"]] + [cell(a, k, 0, r) for k in CPU] + [cell(a, "alice_cpu_us_per_io", 0, r),
                                                             cell(a, "bob_cpu_us_per_io", 0, r)] for a in aggs]
    o.lines += table(["case", "alice usr %", "alice sys %", "bob usr %", "bob sys %", "alice µs/req", "bob µs/req"], body)
    o.lines += [""] + common.replica_lines(checks)
    _plots(ctx, o, aggs)
    return o


def _plots(ctx, o, aggs):
    def series(keys):
        return [(a["case"], [a.get(k) for k in keys],
                 [(a.get(k + "_min"), a.get(k + "_max")) if a.get("n", 1) > 1 else None for k in keys]) for a in aggs]
    common.try_plot(ctx, o, "streaming-latency.svg", "completion latency percentiles, 1 MiB QD1",
                    lambda: svg.bar_chart("streaming: completion latency, 1 MiB writes QD1", "µs",
                                          [n for _, n in PCTS], series([k for k, _ in PCTS])))
    common.try_plot(ctx, o, "streaming-cpu.svg", "CPU per node, 1 MiB QD1",
                    lambda: svg.bar_chart("streaming: CPU per node (% of one core)", "% of one core",
                                          ["alice usr", "alice sys", "bob usr", "bob sys"],
                                          series(CPU)))
