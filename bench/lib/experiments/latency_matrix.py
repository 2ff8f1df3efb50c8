"""latency-matrix: added round-trip latency x iodepth x block size x randwrite/write, protocol C,
through the link emulator (seed 002: 0/2/5/10/20 ms x QD 1/8/16/32 x 4k..1M x randwrite/write);
IOPS and mean completion latency, one line chart per (pattern, block size) with the added
latency on x and a line per iodepth, like the seed's spreadsheet.

Invariants: every latency point, 0 ms included, goes through tandem-linkemu, so all points pay
the same relay cost and differ only in the delay; the added round trip is split evenly between
the two directions (the seed added it with netem on one interface: the same round trip); each
latency point gets fresh nodes; the grid comes from the mode (Matrix) and runs its own number of
repetitions (1 by default, see modes).
"""

from dataclasses import replace

from .. import seeds, svg
from ..cluster import Setup
from ..fio import Job
from ..report import Outcome, cell, table
from . import common

NAME = "latency-matrix"
TITLE = "added latency x iodepth x block size x randwrite/write, protocol C"
SEED = seeds.cite("002", "the fio matrix with tc netem delay between the peers")
IMPLEMENTED = True
METRICS = ("iops", "mib_s", "clat_mean_us", "clat_p99_us")


def plan(mode):
    """(cases, jobs): one case per added latency, every (pattern, bs, iodepth) as a job."""
    g = mode.matrix
    cases = [common.Case(f"+{lat:g} ms", Setup("pair", protocol="C", size_bytes=mode.image_bytes, link_rtt_ms=lat),
                         (("latency_ms", lat),)) for lat in g.latencies_ms]
    jobs = [Job(f"{rw}-{bs}-qd{qd}", rw, bs, qd, mode.image_bytes, g.runtime_s, g.ramp_s)
            for rw, bs in g.patterns for qd in g.iodepths]
    return cases, jobs


def estimate_s(mode):
    """Rough duration in seconds."""
    return common.estimate_s(replace(mode, reps=mode.matrix.reps), *plan(mode))


def run(ctx):
    """Measures the grid; a table per pattern and a line chart per (pattern, block size)."""
    g = ctx.mode.matrix
    cases, jobs = plan(ctx.mode)
    by_name = {j.name: j for j in jobs}
    rows, problems, checks = common.measure(ctx, NAME, cases, jobs, reps=g.reps)
    for r in rows:
        j = by_name[r["workload"]]
        r.update(rw=j.rw, bs=j.bs, iodepth=j.iodepth)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(cases) * len(jobs) * g.reps)
    o.method = [f"Protocol C, alice and bob each behind one `tandem-linkemu` relay (`--pair LISTEN=TARGET "
                "--delay RTT/2`, one process for both directions); every point, 0 ms included, goes through the "
                f"relay. fio nbd engine, time-based {g.runtime_s} s runs after a {g.ramp_s} s warm-up, "
                f"{g.reps} repetition(s) per cell. Grid: added round trip {', '.join(f'{x:g}' for x in g.latencies_ms)} ms "
                f"x iodepth {', '.join(map(str, g.iodepths))} x {', '.join(f'{rw} {bs}' for rw, bs in g.patterns)}. "
                "The seed ran this on EC2 across availability zones (1.3 ms base round trip) with EBS disks; here "
                "the base is loopback."]
    aggs = common.aggregate(rows, ["rw", "bs", "iodepth", "latency_ms"], METRICS)
    _tables(o, aggs, g, ctx.mode.reps > 1 and g.reps > 1)
    o.lines += [""] + common.replica_lines(checks)
    for rw, bs in g.patterns:
        part = [a for a in aggs if a["rw"] == rw and a["bs"] == bs]
        series = [(f"QD{qd}", [(a["latency_ms"], a["iops"]) for a in part if a["iodepth"] == qd and a["iops"] is not None])
                  for qd in g.iodepths]
        series = [s for s in series if s[1]]
        common.try_plot(ctx, o, f"latency-matrix-{rw}-{bs}.svg", f"{rw} {bs}: IOPS vs added latency",
                        lambda rw=rw, bs=bs, series=series: svg.line_chart(
                            f"latency-matrix: {rw} {bs}, protocol C", "added round-trip latency (ms)", "IOPS", series))
    return o


def _tables(o, aggs, g, spread):
    last = g.latencies_ms[-1]
    reps = 2 if spread else 1
    for rw, bs in g.patterns:
        body = []
        for qd in g.iodepths:
            cells = {a["latency_ms"]: a for a in aggs if (a["rw"], a["bs"], a["iodepth"]) == (rw, bs, qd)}
            base, worst = cells.get(g.latencies_ms[0], {}).get("iops"), cells.get(last, {}).get("iops")
            kept = f"{100 * worst / base:.0f}%" if base and worst is not None else "–"
            body.append([f"QD{qd}"] + [f"{cell(cells.get(x, {}), 'iops', 0, reps)} / "
                                       f"{cell(cells.get(x, {}), 'clat_mean_us', 0, reps)}" for x in g.latencies_ms] + [kept])
        heads = ["iodepth"] + [f"+{x:g} ms" for x in g.latencies_ms] + [f"IOPS kept at +{last:g} ms"]
        o.lines += [f"{rw} {bs}: IOPS / mean completion latency µs:", ""] + table(heads, body) + [""]
