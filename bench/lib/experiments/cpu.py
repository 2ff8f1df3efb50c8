"""cpu: the CPU budget of a replicated write (issue 28, item 1). For the standalone export and
protocols A, B and C on loopback, at 1 MiB sequential QD1, 4 KiB random QD1 and QD32: CPU per
MiB and per write of each node and of both summed, the split by thread, voluntary and
involuntary context switches per request, IOPS, MiB/s and mean completion latency, and every
replicated case as a ratio to standalone.

Invariants: the cases alternate (standalone, A, B, C, standalone, ...) on fresh nodes, at least
CPU_REPS_MIN repetitions outside --smoke; every ratio is taken within one repetition and the
report gives their median and min-max; CPU comes from /proc (process totals from
/proc/PID/stat, the split from /proc/PID/task/*/{stat,status,comm}) sampled around each fio run
and scaled to fio's measured runtime, the same way for every case, so the ratios are fair even
though the absolute figures include fio's connect and warm-up share.
"""

import time

from .. import fio, procs, seeds, stats, svg
from ..cluster import Setup
from ..fio import Job
from ..report import Outcome, cell, fmt, table
from . import common

NAME = "cpu"
TITLE = "CPU per request of a replicated write: per node, per thread, context switches"
SEED = seeds.cite("000", "replicated writes at local-disk cost; issue 28's CPU budget")
CASES = ("standalone", "proto-A", "proto-B", "proto-C")
NODES = ("alice", "bob")
CPU_REPS_MIN = 3
# (workload, the request unit the headline CPU figure uses, its label)
UNITS = (("seq1m", "mib", "CPU µs per MiB"), ("rand4k-qd1", "write", "CPU µs per write"),
         ("rand4k-qd32", "write", "CPU µs per write"))
# Issue 28's targets for protocol C against standalone, within one run: (label, workload, metric,
# kind, bound), kind 'ratio_max' (ratio <= bound), 'ratio_min' (ratio >= bound) or 'delta_max'
# (difference <= bound).
TARGETS = (("summed CPU per MiB, 1 MiB seq QD1", "seq1m", "sum_cpu_us_per_mib", "ratio_max", 2.3),
           ("summed CPU per write, 4 KiB rand QD1", "rand4k-qd1", "sum_cpu_us_per_write", "ratio_max", 2.5),
           ("summed CPU per write, 4 KiB rand QD32", "rand4k-qd32", "sum_cpu_us_per_write", "ratio_max", 2.3),
           ("mean completion latency, 4 KiB rand QD1", "rand4k-qd1", "clat_mean_us", "delta_max", 60.0),
           ("IOPS, 4 KiB rand QD32", "rand4k-qd32", "iops", "ratio_min", 0.60),
           ("MiB/s, 1 MiB seq QD1", "seq1m", "mib_s", "ratio_min", 0.75))
PER_NODE = ("cpu_us_per_mib", "cpu_us_per_write", "cs_per_write", "vcs_per_write", "ivcs_per_write", "usr_pct",
            "sys_pct")


def reps_for(mode):
    """Repetitions: the mode's, at least CPU_REPS_MIN outside --smoke."""
    return mode.reps if mode.name == "smoke" else max(mode.reps, CPU_REPS_MIN)


def jobs(mode):
    """seq1m (1 MiB write QD1), rand4k-qd1, rand4k-qd32; all time-based with the mode's run."""
    size, t, ramp = mode.image_bytes, mode.runtime_s, mode.ramp_s
    return [Job("seq1m", "write", "1M", 1, size, t, ramp), Job("rand4k-qd1", "randwrite", "4k", 1, size, t, ramp),
            Job("rand4k-qd32", "randwrite", "4k", 32, size, t, ramp)]


def cases(mode):
    """standalone and protocols A, B, C on loopback."""
    out = [common.Case("standalone", Setup("standalone", size_bytes=mode.image_bytes))]
    return out + [common.Case(f"proto-{p}", Setup("pair", protocol=p, size_bytes=mode.image_bytes)) for p in "ABC"]


def estimate_s(mode):
    """Rough duration in seconds."""
    return reps_for(mode) / mode.reps * common.estimate_s(mode, cases(mode), jobs(mode))


def node_costs(proc_before, proc_after, threads_before, threads_after, scale, metrics):
    """The costs of one node over one fio run: total CPU seconds (process, from /proc/PID/stat),
    CPU µs per MiB and per write, context switches per write (all threads), and per thread group
    CPU µs and context switches per write. scale: fio's runtime / the sampled wall time (the
    share of the interval fio measured). None if the process could not be sampled."""
    if proc_before is None or proc_after is None:
        return None
    ios, mib = metrics.get("ios") or 0, metrics.get("io_mib") or 0
    cpu_s = (proc_after[0] - proc_before[0] + proc_after[1] - proc_before[1]) * scale
    split = procs.thread_delta(threads_before, threads_after)
    vol = sum(v for _, v, _ in split.values()) * scale
    invol = sum(i for _, _, i in split.values()) * scale
    out = {"cpu_s": cpu_s, "cpu_us_per_mib": 1e6 * cpu_s / mib if mib else None,
           "cpu_us_per_write": 1e6 * cpu_s / ios if ios else None,
           "cs_per_write": (vol + invol) / ios if ios else None, "vcs_per_write": vol / ios if ios else None,
           "ivcs_per_write": invol / ios if ios else None,
           "threads": {g: {"us_per_write": 1e6 * c * scale / ios if ios else None,
                           "cs_per_write": (v + i) * scale / ios if ios else None} for g, (c, v, i) in split.items()}}
    return out


def flatten_costs(costs, wall_s):
    """CSV columns from {node: node_costs()}: <node>_<metric>, <node>_thread_<group>_{us,cs}_per_write,
    and sum_<metric> over the nodes that were sampled (None when none was)."""
    row = {}
    present = {n: c for n, c in costs.items() if c}
    for node, c in costs.items():
        for key in PER_NODE:
            row[f"{node}_{key}"] = c.get(key) if c else None
    for key in PER_NODE[:5]:
        vals = [c[key] for c in present.values() if c.get(key) is not None]
        row[f"sum_{key}"] = sum(vals) if vals else None
    for node, c in present.items():
        for group, t in sorted(c["threads"].items()):
            safe = "".join(ch if ch.isalnum() else "_" for ch in group)
            row[f"{node}_thread_{safe}_us_per_write"] = t["us_per_write"]
            row[f"{node}_thread_{safe}_cs_per_write"] = t["cs_per_write"]
    row["sampled_wall_s"] = wall_s
    return row


def measure_job(ctx, experiment, c, case, job, rep):
    """One fio job on cluster c with the per-thread samples around it; the CSV row."""
    path = ctx.fio_json(experiment, case.label, job.name, f"r{rep}")
    before = {n: (procs.proc_cpu(p), procs.thread_snapshot(p)) for n, p in c.watch.items()}
    t0 = time.monotonic()
    m = fio.run_job(ctx.reaper, job, c.uri, path, c.watch)
    wall_s = time.monotonic() - t0
    after = {n: (procs.proc_cpu(p), procs.thread_snapshot(p)) for n, p in c.watch.items()}
    scale = min(1.0, m["runtime_s"] / wall_s) if wall_s > 0 else 1.0
    costs = {}
    for node in NODES:
        if node not in c.watch:
            continue
        costs[node] = node_costs(before[node][0], after[node][0], before[node][1], after[node][1], scale, m)
        srv = (m.get("server_cpu") or {}).get(node) or {}
        if costs[node]:
            costs[node].update(usr_pct=srv.get("usr_pct"), sys_pct=srv.get("sys_pct"))
    keep = ("mib_s", "iops", "clat_mean_us", "clat_p99_us", "ios", "io_mib", "runtime_s", "fio_usr_cpu_pct",
            "fio_sys_cpu_pct")
    row = {"case": case.label, "workload": job.name, "rep": rep, **{k: m.get(k) for k in keep},
           "machine_busy_pct": (m.get("machine_cpu") or {}).get("busy_pct"),
           "machine_steal_pct": (m.get("machine_cpu") or {}).get("steal_pct"), **flatten_costs(costs, wall_s)}
    procs.log(f"  {experiment} {case.label:10} {job.name:12} {m['mib_s']:8.1f} MiB/s {m['iops']:8.0f} IOPS "
              f"mean {m['clat_mean_us']:7.1f} us  CPU {row['sum_cpu_us_per_write'] or 0:8.1f} us/write "
              f"{row['sum_cs_per_write'] or 0:5.2f} cs/write")
    return row


def paired_differences(rows, metric, match, base):
    """Per repetition, metric of the row matching `match` minus that of the `base` row with the
    same rep, in repetition order (like stats.paired_ratios)."""
    def pick(spec):
        return {r["rep"]: r.get(metric) for r in rows if all(r.get(k) == v for k, v in spec.items())}
    num, den = pick(match), pick(base)
    return [num[i] - den[i] for i in sorted(num) if num[i] is not None and den.get(i) is not None]


def compare(rows, case, workload, metric, kind="ratio"):
    """{'value': median, 'min', 'max', 'values'} of the per-repetition ratio (or difference) of
    metric between case and standalone, or None if no repetition has both."""
    pair = ({"case": case, "workload": workload}, {"case": "standalone", "workload": workload})
    vs = stats.paired_ratios(rows, metric, *pair) if kind == "ratio" else paired_differences(rows, metric, *pair)
    if not vs:
        return None
    return {"value": stats.median(vs), "min": min(vs), "max": max(vs), "values": vs}


def show(comparison, kind="ratio"):
    """'3.50x (3.20–4.10)' for a ratio, '+138 µs (+52–+140)' for a difference, '–' when missing."""
    if comparison is None:
        return "–"
    if kind == "ratio":
        body = f"{comparison['value']:.2f}x"
        return body if len(comparison["values"]) < 2 else f"{body} ({comparison['min']:.2f}–{comparison['max']:.2f})"
    body = f"{comparison['value']:+.0f} µs"
    return body if len(comparison["values"]) < 2 else f"{body} ({comparison['min']:+.0f}–{comparison['max']:+.0f})"


def target_rows(rows):
    """Issue 28's targets for protocol C: [label, value, target, met?]."""
    out = []
    for label, wl, metric, kind, bound in TARGETS:
        delta = kind == "delta_max"
        c = compare(rows, "proto-C", wl, metric, "difference" if delta else "ratio")
        text = show(c, "difference" if delta else "ratio")
        want = {"ratio_max": f"≤ {bound:.2f}x", "ratio_min": f"≥ {bound:.2f}x", "delta_max": f"≤ +{bound:.0f} µs"}[kind]
        if c is None:
            met = "not measured"
        else:
            ok = c["value"] >= bound if kind == "ratio_min" else c["value"] <= bound
            met = "yes" if ok else "**NO**"
        out.append([label, text, want, met])
    return out


def ratio_table(rows, present):
    """Every replicated case against standalone, per workload."""
    body = []
    for case in present[1:]:
        for wl, unit, _ in UNITS:
            body.append([case, wl, show(compare(rows, case, wl, f"sum_cpu_us_per_{unit}")),
                         show(compare(rows, case, wl, f"alice_cpu_us_per_{unit}")),
                         show(compare(rows, case, wl, "sum_cs_per_write")),
                         show(compare(rows, case, wl, "iops")),
                         show(compare(rows, case, wl, "clat_mean_us", "difference"), "difference")])
    return table(["case", "workload", "CPU per request, summed", "CPU per request, alice",
                  "context switches per request, summed", "IOPS (= MiB/s)", "mean latency"], body, "llrrrrr")


def _find(aggs, case, workload):
    return next((a for a in aggs if a["case"] == case and a["workload"] == workload), {})


def main_table(aggs, present, reps):
    """Absolute medians (spread in parentheses) per case and workload."""
    body = []
    for wl, unit, _ in UNITS:
        for case in present:
            a = _find(aggs, case, wl)
            body.append([wl, case, cell(a, "iops", 0, reps), cell(a, "mib_s", 0, reps), cell(a, "clat_mean_us", 1, reps),
                         cell(a, f"alice_cpu_us_per_{unit}", 1, reps), cell(a, f"bob_cpu_us_per_{unit}", 1, reps),
                         cell(a, f"sum_cpu_us_per_{unit}", 1, reps), cell(a, "sum_cs_per_write", 2, reps),
                         cell(a, "machine_busy_pct", 0, reps)])
    return table(["workload", "case", "IOPS", "MiB/s", "mean µs", "alice CPU µs/req", "bob CPU µs/req",
                  "summed CPU µs/req", "ctx switches/req", "machine busy %"], body, "llrrrrrrrr")


def thread_metrics(rows):
    """The per-thread column names present in rows, in first-appearance order."""
    seen = []
    for r in rows:
        for k in r:
            if "_thread_" in k and k not in seen:
                seen.append(k)
    return seen


def thread_table(aggs, rows, present):
    """Per case, node and thread group: CPU µs and context switches per request, each workload."""
    keys = thread_metrics(rows)
    groups = list(dict.fromkeys(k.rsplit("_", 3)[0] for k in keys))
    body = []
    for case in present:
        for g in groups:
            node, thread = g.split("_thread_", 1)
            cells = []
            for wl, _, _ in UNITS:
                a = _find(aggs, case, wl)
                us, cs = a.get(f"{g}_us_per_write"), a.get(f"{g}_cs_per_write")
                cells.append("–" if us is None and cs is None else f"{fmt(us, 1)} µs · {fmt(cs, 2)} cs")
            if any(_busy(_find(aggs, case, wl), g) for wl, _, _ in UNITS):
                body.append([case, node, thread] + cells)
    return table(["case", "node", "thread", "seq1m (per MiB)", "rand4k-qd1 (per write)", "rand4k-qd32 (per write)"],
                 body, "lllrrr")


def _busy(agg, group):
    """Whether a thread group did anything measurable (≥ 0.05 µs or 0.005 switches per request)."""
    us, cs = agg.get(f"{group}_us_per_write"), agg.get(f"{group}_cs_per_write")
    return (us or 0) >= 0.05 or (cs or 0) >= 0.005


def ratio_bars(rows, present):
    """Aggregated-like dicts for common.bars: the summed-CPU ratio per workload and case."""
    out = []
    for case in present[1:]:
        for wl, unit, _ in UNITS:
            c = compare(rows, case, wl, f"sum_cpu_us_per_{unit}")
            if c:
                out.append({"workload": wl, "case": case, "ratio": c["value"], "ratio_min": c["min"],
                            "ratio_max": c["max"], "n": len(c["values"])})
    return out


def run(ctx):
    """Measures the four cases alternately; tables of costs, ratios, targets, thread split; one chart."""
    js, cs = jobs(ctx.mode), cases(ctx.mode)
    reps = reps_for(ctx.mode)
    rows, problems, checks = common.measure(ctx, NAME, cs, js, reps, measure_job)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(js) * len(cs) * reps)
    o.method = method_lines(js, reps, ctx.mode)
    present = [c.label for c in cs if any(r["case"] == c.label for r in rows)]
    metrics = sorted({k for r in rows for k, v in r.items() if isinstance(v, (int, float)) and k != "rep"})
    aggs = common.aggregate(rows, ["case", "workload"], metrics)
    o.lines += ["Medians per case and workload (a request is 1 MiB for seq1m, 4 KiB otherwise):", ""]
    o.lines += main_table(aggs, present, reps)
    o.lines += ["", "Against `standalone`, each ratio (or difference) within one repetition, median and (min–max) "
                "over the repetitions:", ""] + ratio_table(rows, present)
    o.lines += ["", "Issue 28's targets for protocol C (ratios within this run):", ""]
    o.lines += table(["target", "value", "bound", "met?"], target_rows(rows), "lrrl")
    o.lines += ["", "Split by thread (medians; µs of CPU and voluntary+involuntary context switches per request; "
                "`tandem` is tokio's runtime (two workers and the blocking pool share the name), `io_r0` the "
                "resource's three disk I/O threads `io-r0-N`, `tandem_meta_r0` its metadata writer, `main` the "
                "process's first thread; groups idle in every workload are left out):", ""]
    o.lines += thread_table(aggs, rows, present) + [""]
    o.lines += common.replica_lines(checks)
    common.try_plot(ctx, o, "cpu.svg", "summed CPU per request as a multiple of standalone",
                    lambda: svg.bar_chart("cpu: CPU per request, both nodes summed, ÷ standalone (same run)",
                                          "× standalone", *common.bars(ratio_bars(rows, present), "workload", "case",
                                                                      "ratio"),
                                          reference=(1.0, "standalone = 1")))
    return o


def method_lines(js, reps, mode):
    """The method paragraph."""
    smoke = " In --smoke the numbers mean nothing (1 s runs, one repetition)." if mode.name == "smoke" else ""
    return [f"Fresh nodes per case on loopback (`net {{ protocol X; max-buffers 8000; max-epoch-size 8000; }}`; "
            "`standalone` is alice alone after `tandem disconnect`), fio's nbd engine on alice's export: "
            f"{'; '.join(j.describe() for j in js)}. The cases alternate standalone, A, B, C, {reps} "
            "repetition(s). CPU is user+system time of each tandem process from `/proc/PID/stat` (all threads, "
            "exited ones included) between just before fio starts and just after it exits, scaled by fio's "
            "runtime / that interval; the split by thread and the context switches (voluntary + involuntary) "
            "come from `/proc/PID/task/*/{stat,status,comm}` over the same interval (a thread that exits in "
            "between is missing from the split, so the split can sum to less than the total). fio's own CPU is "
            "not counted." + smoke]
