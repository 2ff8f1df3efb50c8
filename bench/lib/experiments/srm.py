"""srm: the Selective Replication Manager against plain protocols C and A through the link
emulator (issue 5's benchmark): seed 002's matrix (added round trip x iodepth x block size x
randwrite/write) for three variants, protocol C, protocol A, and protocol C with `srm on`; IOPS
and mean / p99 completion latency per cell, a table per (pattern, block size), a line chart per
job (IOPS vs added latency, a line per variant) and the issue's two targets as ratios within
this run:

1. with SRM on, 4 KiB randwrite QD32 at +20 ms keeps >= 90% of its IOPS at 0 ms (protocol C
   keeps 41% in seed 002), with the unreplicated backlog under its bound;
2. at 0 ms, SRM costs <= 3% against plain protocol C (SRM / C >= 0.97).

Invariants: every point, 0 ms included, goes through tandem-linkemu (same relay cost, only the
delay differs); each (latency, variant) gets fresh nodes, and the three variants of one latency
run one after another so a comparison spans seconds, not the whole run; the SRM variant's bound
is explicit in its configuration (SRM_MAX_LAG_BYTES) and the backlog sampled from alice's
`status --json` during every job is checked against that same constant; every variant is
sampled the same way, so the sampling's small cost does not bias the ratios; the ratios and
verdicts are pure functions of the aggregated rows (targets, backlog_problem), and in --smoke
they are printed but marked not meaningful. The grid comes from the mode (modes.SrmGrid);
`--reps N` repeats the whole set of cases N times round-robin (fresh nodes each time) and every
cell is the median over the repetitions (--full runs its large grid once).
"""

import threading
from dataclasses import replace

from .. import cluster, fio, procs, seeds, stats, svg
from ..cluster import DEFAULT_NET, Setup
from ..errors import BenchError
from ..fio import Job
from ..report import Outcome, fmt, table
from . import common

NAME = "srm"
TITLE = "protocol C vs protocol A vs SRM on, added latency x iodepth x block size"
SEED = (seeds.cite("002", "the fio matrix with tc netem delay between the peers") + "; the manager itself: "
        + seeds.cite("000", "adaptive switching between synchronous and asynchronous replication"))
METRICS = ("iops", "mib_s", "clat_mean_us", "clat_p99_us", "max_unreplicated_kib")
VARIANTS = ("proto-C", "proto-A", "srm-on")
SRM_VARIANT = "srm-on"
IMPLEMENTED = True

SRM_INTERVAL_MS = 200
SRM_MAX_LAG_BYTES = 64 << 20
SRM_MAX_LAG_TIME_MS = 2000
SRM_MIN_DWELL_S = 1
SRM_LATENCY_HIGH_MS = 5
SRM_LATENCY_LOW_MS = 2
STATUS_SAMPLE_INTERVAL_S = 0.5

HEADLINE_JOB = "randwrite-4k-qd32"
TARGET_LATENCY_MS = 20
KEEP_RATIO_MIN = 0.90
COST_RATIO_MIN = 0.97
SEED_C_KEPT_RATIO = 0.41


def srm_options():
    """The resource `options { }` lines of the SRM variant."""
    return (("srm", "on"), ("srm-interval", str(SRM_INTERVAL_MS)))


def srm_net():
    """The SRM variant's `net { }` options: the suite's defaults plus every SRM bound, explicit."""
    return DEFAULT_NET + (("srm-max-lag-bytes", str(SRM_MAX_LAG_BYTES)), ("srm-max-lag-time", str(SRM_MAX_LAG_TIME_MS)),
                          ("srm-min-dwell", str(SRM_MIN_DWELL_S)), ("srm-latency-high", str(SRM_LATENCY_HIGH_MS)),
                          ("srm-latency-low", str(SRM_LATENCY_LOW_MS)))


def variant_setup(variant, latency_ms, image_bytes):
    """The Setup of one variant behind the link emulator with latency_ms added."""
    base = Setup("pair", protocol="C", size_bytes=image_bytes, link_rtt_ms=latency_ms, label=variant)
    if variant == "proto-A":
        return replace(base, protocol="A")
    if variant == SRM_VARIANT:
        return replace(base, net=srm_net(), options=srm_options())
    if variant == "proto-C":
        return base
    raise BenchError(f"unknown srm variant {variant!r}")


def job_name(rw, bs, iodepth):
    """'randwrite-4k-qd32'."""
    return f"{rw}-{bs}-qd{iodepth}"


def plan(mode):
    """(cases, jobs): per added latency, the three variants in VARIANTS order; every job of the
    mode's grid in each case."""
    g = mode.srm
    cases = [common.Case(f"{v} +{lat:g} ms", variant_setup(v, lat, g.image_bytes),
                         (("latency_ms", lat), ("variant", v)))
             for lat in g.latencies_ms for v in VARIANTS]
    jobs = [Job(job_name(rw, bs, qd), rw, bs, qd, g.image_bytes, g.runtime_s, g.ramp_s) for rw, bs, qd in g.jobs]
    return cases, jobs


def estimate_s(mode):
    """Rough duration in seconds (srm_reps repetitions, the grid's image size)."""
    return common.estimate_s(replace(mode, reps=srm_reps(mode), image_bytes=mode.srm.image_bytes), *plan(mode))


def srm_reps(mode):
    """Repetitions: the mode's, except --full, whose large grid runs once to stay in the suite's
    budget (the targets' ratios come from `--quick --reps 3`)."""
    return 1 if mode.name == "full" else mode.reps


class BacklogWatch:
    """What alice's `status --json` said during one job: the largest unreplicated backlog, the
    protocol in effect at the last sample, the protocols in effect in the order they changed
    ('C>A'), and how many samples had no connection."""

    def __init__(self):
        self.max_kib = 0
        self.protocol = None
        self.sequence = []
        self.samples = 0
        self.missed = 0

    def add(self, resource):
        """Records one `status --json` resource (None: the node did not answer)."""
        conns = (resource or {}).get("connections") or []
        kib = conns[0].get("unreplicated_kib") if conns and isinstance(conns[0], dict) else None
        if isinstance(kib, bool) or not isinstance(kib, int):
            self.missed += 1
            return
        self.samples += 1
        self.max_kib = max(self.max_kib, kib)
        self.protocol = conns[0].get("protocol") or self.protocol
        if self.protocol and self.sequence[-1:] != [self.protocol]:
            self.sequence.append(self.protocol)

    def columns(self):
        """The CSV columns of this watch."""
        return {"max_unreplicated_kib": self.max_kib if self.samples else None, "protocol_end": self.protocol,
                "protocols_seen": ">".join(self.sequence), "status_samples": self.samples}


def backlog_problem(label, job, max_kib, bound_bytes=SRM_MAX_LAG_BYTES):
    """A problem sentence if max_kib (KiB) exceeded bound_bytes, else None."""
    if max_kib is None or max_kib * 1024 <= bound_bytes:
        return None
    return (f"{label} {job}: unreplicated backlog reached {max_kib:,} KiB, above srm-max-lag-bytes "
            f"{bound_bytes // 1024:,} KiB")


def _sampler(run_dir, watch, stop):
    """Samples alice's status into watch every STATUS_SAMPLE_INTERVAL_S until stop is set."""
    while not stop.is_set():
        watch.add(cluster.tandem_status(run_dir))
        stop.wait(STATUS_SAMPLE_INTERVAL_S)


def _measure_job(ctx, c, case, job, rep):
    """One fio job with alice's status sampled alongside; returns (row, problem or None)."""
    watch, stop = BacklogWatch(), threading.Event()
    thread = threading.Thread(target=_sampler, args=(c.dirs["alice"], watch, stop), daemon=True)
    thread.start()
    try:
        m = fio.run_job(ctx.reaper, job, c.uri, ctx.fio_json(NAME, case.label, job.name), c.watch)
    finally:
        stop.set()
        thread.join()
    watch.add(cluster.tandem_status(c.dirs["alice"]))
    params = dict(case.params)
    row = {"case": case.label, **params, "workload": job.name, "rep": rep, "rw": job.rw, "bs": job.bs,
           "iodepth": job.iodepth, **common.flatten(m), **watch.columns()}
    procs.log(f"  {NAME} {case.label:16} {job.name:18} {m['iops']:9.0f} IOPS  mean {m['clat_mean_us']:9.1f} us  "
              f"backlog max {watch.max_kib:,} KiB  protocols {'>'.join(watch.sequence)}")
    if params["variant"] != SRM_VARIANT:
        return row, None
    return row, backlog_problem(case.label, job.name, row["max_unreplicated_kib"])


def _save_srm_status(ctx, c, case):
    """Saves `tandem srm status r0` of alice beside the fio JSON (the manager's decisions)."""
    proc = cluster.tandem_admin(c.dirs["alice"], "srm", "status", "r0", check=False)
    path = ctx.fio_json(NAME, case.label, "srm-status")[:-5] + ".txt"
    with open(path, "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)


def run_case(ctx, case, jobs, rep=1):
    """Fresh nodes for case, every job once; returns (rows, problems, replica check or None)."""
    rows, problems, check = [], [], None
    try:
        with cluster.Cluster(ctx.reaper, ctx.workdir(NAME, case.label), case.setup) as c:
            for job in jobs:
                row, problem = _measure_job(ctx, c, case, job, rep)
                rows.append(row)
                problems += [problem] if problem else []
            if dict(case.params)["variant"] == SRM_VARIANT:
                _save_srm_status(ctx, c, case)
            state = c.link_state()
            if state and state[0] != "Connected":
                problems.append(f"{case.label}: peer link {state[0]} after the workloads ({state[1]})")
            check = c.check_replicas()
            if check["result"] != "IDENTICAL":
                problems.append(f"{case.label}: replicas DIFFERENT: {check.get('first_difference')}")
        problems += [f"{case.label}: {n}" for n in c.notes]
    except (BenchError, OSError) as exc:
        problems.append(f"{case.label}: FAILED: {str(exc).strip().splitlines()[0][:400]}")
        procs.log(f"{NAME} {case.label}: FAILED: {exc}")
    return rows, problems, check


def _find(aggs, variant, job, latency):
    return next((x for x in aggs if (x["variant"], x["workload"], x["latency_ms"]) == (variant, job, latency)), {})


def _iops(aggs, variant, job, latency):
    return _find(aggs, variant, job, latency).get("iops")


def _verdict(ratio, threshold, meaningful, extra_ok=True):
    if ratio is None:
        return "not measured"
    if not meaningful:
        return "not meaningful (smoke)"
    return "PASS" if ratio >= threshold and extra_ok else "FAIL"


def targets(aggs, latencies_ms, smoke):
    """The issue's two targets from aggregated rows (keys variant, workload, latency_ms; iops,
    max_unreplicated_kib): a list of dicts with name, ratio, threshold, verdict and detail.
    Target 1 is taken at +20 ms, or at the grid's largest latency if 20 is not in it (then it
    is not meaningful either)."""
    lat = TARGET_LATENCY_MS if TARGET_LATENCY_MS in latencies_ms else max(latencies_ms)
    base = min(latencies_ms)
    meaningful = not smoke and lat == TARGET_LATENCY_MS and base == 0
    srm_far, srm_0 = _iops(aggs, SRM_VARIANT, HEADLINE_JOB, lat), _iops(aggs, SRM_VARIANT, HEADLINE_JOB, base)
    c_far, c_0 = _iops(aggs, "proto-C", HEADLINE_JOB, lat), _iops(aggs, "proto-C", HEADLINE_JOB, base)
    backlog = _find(aggs, SRM_VARIANT, HEADLINE_JOB, lat).get("max_unreplicated_kib")
    within = backlog is not None and backlog_problem("", "", backlog) is None
    keep, cost = stats.ratio(srm_far, srm_0), stats.ratio(srm_0, c_0)
    c_kept = stats.ratio(c_far, c_0)
    return [
        {"name": f"SRM keeps its 4 KiB randwrite QD32 IOPS at +{lat:g} ms", "ratio": keep,
         "threshold": KEEP_RATIO_MIN, "verdict": _verdict(keep, KEEP_RATIO_MIN, meaningful, within),
         "detail": f"SRM {fmt(srm_far)} / {fmt(srm_0)} IOPS; protocol C kept {_pct(c_kept)} here "
                   f"({SEED_C_KEPT_RATIO:.0%} in seed 002); largest backlog {fmt(backlog)} KiB "
                   f"({'within' if within else 'NOT within'} the {SRM_MAX_LAG_BYTES >> 20} MiB bound)"},
        {"name": f"SRM's cost against protocol C at +{base:g} ms (4 KiB randwrite QD32)", "ratio": cost,
         "threshold": COST_RATIO_MIN, "verdict": _verdict(cost, COST_RATIO_MIN, meaningful),
         "detail": f"SRM {fmt(srm_0)} / protocol C {fmt(c_0)} IOPS"},
    ]


def _pct(ratio):
    return "–" if ratio is None else f"{100 * ratio:.0f}%"


def target_lines(results):
    """Markdown for targets(): a table, one row per target."""
    body = [[t["name"], "–" if t["ratio"] is None else f"{t['ratio']:.2f}", f">= {t['threshold']:.2f}",
             f"**{t['verdict']}**", t["detail"]] for t in results]
    return ["Targets (issue 5), ratios within this run:", ""] + table(
        ["target", "ratio", "needed", "verdict", "from"], body, "lrrll") + [""]


def cost_lines(aggs, base):
    """SRM / protocol C at the base latency for every job (the cost target, per job)."""
    jobs = list(dict.fromkeys(a["workload"] for a in aggs))
    body = [[j, fmt(_iops(aggs, "proto-C", j, base)), fmt(_iops(aggs, SRM_VARIANT, j, base)),
             _ratio_text(stats.ratio(_iops(aggs, SRM_VARIANT, j, base), _iops(aggs, "proto-C", j, base)))]
            for j in jobs]
    return [f"SRM against protocol C at +{base:g} ms, every job:", ""] + table(
        ["job", "protocol C IOPS", "SRM IOPS", "SRM / C"], body) + [""]


def _ratio_text(r):
    return "–" if r is None else f"{r:.2f}"


def cell_tables(aggs, g):
    """A table per (rw, bs): rows (iodepth, variant), columns the latencies with
    'IOPS / mean µs / p99 µs', then the share of IOPS kept at the largest latency."""
    last, first = g.latencies_ms[-1], g.latencies_ms[0]
    out = []
    for rw, bs in dict.fromkeys((rw, bs) for rw, bs, _ in g.jobs):
        body = []
        for qd in sorted({q for r, b, q in g.jobs if (r, b) == (rw, bs)}):
            for v in VARIANTS:
                cells = {a["latency_ms"]: a for a in aggs if (a["workload"], a["variant"]) == (job_name(rw, bs, qd), v)}
                kept = stats.ratio(cells.get(last, {}).get("iops"), cells.get(first, {}).get("iops"))
                body.append([f"QD{qd} {v}"] + [_cell(cells.get(x, {})) for x in g.latencies_ms] + [_pct(kept)])
        heads = ["iodepth, variant"] + [f"+{x:g} ms" for x in g.latencies_ms] + [f"kept at +{last:g} ms"]
        out += [f"{rw} {bs}: IOPS / mean / p99 completion latency (µs):", ""] + table(heads, body) + [""]
    return out


def _cell(a):
    return f"{fmt(a.get('iops'))} / {fmt(a.get('clat_mean_us'))} / {fmt(a.get('clat_p99_us'))}"


def backlog_lines(rows, g):
    """Per SRM and protocol A cell: the largest backlog (KiB) and the protocols in effect during
    the job (the last one at its end)."""
    body = []
    for v in (SRM_VARIANT, "proto-A"):
        for rw, bs, qd in g.jobs:
            cells = {r["latency_ms"]: r for r in rows if (r["variant"], r["workload"]) == (v, job_name(rw, bs, qd))}
            body.append([f"{v} {job_name(rw, bs, qd)}"] + [
                f"{fmt(cells[x].get('max_unreplicated_kib'))} ({cells[x].get('protocols_seen') or '–'})"
                if x in cells else "–" for x in g.latencies_ms])
    return [f"Largest unreplicated backlog during each job, KiB (protocols in effect while it ran, in order: the "
            f"last is the one at its end), sampled from "
            f"alice's `status --json` every {STATUS_SAMPLE_INTERVAL_S:g} s; SRM's bound is "
            f"{SRM_MAX_LAG_BYTES // 1024:,} KiB:", ""] + table(
        ["variant, job"] + [f"+{x:g} ms" for x in g.latencies_ms], body) + [""]


def method_lines(g, mode_name, reps=1):
    """The method paragraph."""
    net = "; ".join(f"{k} {v}" for k, v in srm_net()[len(DEFAULT_NET):])
    return [f"Three variants per added round trip, each on fresh nodes with alice and bob behind one "
            f"`tandem-linkemu` relay (every point, 0 ms included, goes through it): protocol C, protocol A, and "
            f"protocol C with `options {{ srm on; srm-interval {SRM_INTERVAL_MS}; }}` and `net {{ {net}; }}`. "
            f"fio nbd engine, time-based {g.runtime_s} s runs "
            + (f"after a {g.ramp_s} s warm-up (the manager settles in it), " if g.ramp_s else "without warm-up, ")
            + f"{fio.human_bytes(g.image_bytes)} devices, "
            + ("one run per cell" if reps == 1 else f"{reps} repetitions round-robin, each cell the median")
            + ". Grid: added round trip "
            f"{', '.join(f'{x:g}' for x in g.latencies_ms)} ms x "
            f"{', '.join(job_name(*j) for j in g.jobs)}. Seed 002 ran protocol C on EC2 (1.3 ms base round trip); "
            "here the base is loopback."] + (
        ["", "**--smoke: the numbers and ratios below are not meaningful** (1 s runs, no warm-up, tiny images)."]
        if mode_name == "smoke" else [])


def run(ctx):
    """Measures the grid; targets, tables, backlog and plots."""
    g = ctx.mode.srm
    cases, jobs = plan(ctx.mode)
    rows, problems, checks = [], [], []
    reps = srm_reps(ctx.mode)
    for rep in range(1, reps + 1):
        for case in cases:
            procs.log(f"{NAME}: {case.label} (repetition {rep}/{reps})")
            r, p, check = run_case(ctx, case, jobs, rep)
            rows, problems = rows + r, problems + p
            checks += [(case.label, rep, check)] if check else []
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems, method=method_lines(g, ctx.mode.name, reps))
    o.status = common.status_of(rows, problems, reps * len(cases) * len(jobs))
    aggs = common.aggregate(rows, ["variant", "workload", "rw", "bs", "iodepth", "latency_ms"], METRICS)
    results = targets(aggs, g.latencies_ms, ctx.mode.name == "smoke")
    for t in results:
        procs.log(f"{NAME}: {t['name']}: {_ratio_text(t['ratio'])} -> {t['verdict']}")
    o.lines += target_lines(results) + cost_lines(aggs, g.latencies_ms[0]) + cell_tables(aggs, g)
    o.lines += backlog_lines(rows, g) + common.replica_lines(checks)
    _plots(ctx, o, aggs, g)
    return o


def _plots(ctx, o, aggs, g):
    for rw, bs, qd in g.jobs:
        name = job_name(rw, bs, qd)
        series = [(v, [(a["latency_ms"], a["iops"]) for a in aggs
                       if (a["variant"], a["workload"]) == (v, name) and a["iops"] is not None]) for v in VARIANTS]
        series = [s for s in series if s[1]]
        common.try_plot(ctx, o, f"srm-{name}.svg", f"{rw} {bs} QD{qd}: IOPS vs added latency per variant",
                        lambda name=name, series=series: svg.line_chart(
                            f"srm: {name}, C vs A vs SRM", "added round-trip latency (ms)", "IOPS", series))


def plot_files(mode):
    """The SVG file names run() writes for mode (one per job)."""
    return [f"srm-{job_name(rw, bs, qd)}.svg" for rw, bs, qd in mode.srm.jobs]

