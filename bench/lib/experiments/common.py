"""What every experiment shares: the run context, cases measured round-robin over repetitions
on fresh tandem nodes, flattening of fio metrics into CSV rows, and plot helpers.

Invariants: each (repetition, case) gets fresh nodes and fresh preallocated backing files, so no
case inherits another's page cache state or data; cases run in the same order in every
repetition; a failing case is recorded as a problem and the others still run; rows carry the
case label, the case's parameters, the workload and the repetition number (1-based), then the
metrics.
"""

import os
from dataclasses import dataclass, field

from .. import cluster, fio, procs, stats
from ..errors import BenchError


@dataclass
class Context:
    """One bench/run invocation: its mode, process reaper, temporary and output directories."""

    mode: object
    reaper: object
    tmp: str
    out_dir: str
    shared_dir: str = None
    linkemu: str = None
    _counter: list = field(default_factory=lambda: [0])

    def workdir(self, *parts):
        """A new, empty directory under the temporary directory."""
        self._counter[0] += 1
        path = os.path.join(self.tmp, f"{self._counter[0]:03d}-" + "-".join(p.replace(" ", "_") for p in parts))
        os.makedirs(path)
        return path

    def fio_json(self, experiment, *parts):
        """Where fio's raw JSON for one measurement goes: OUT/fio/<experiment>/<parts>.json."""
        d = os.path.join(self.out_dir, "fio", experiment)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, "-".join(p.replace(" ", "_") for p in parts) + ".json")

    def save_plot(self, outcome, file_name, caption, svg_text):
        """Writes an SVG into the result directory and lists it in the outcome."""
        with open(os.path.join(self.out_dir, file_name), "w", encoding="utf-8") as f:
            f.write(svg_text)
        outcome.plots.append((file_name, caption))


@dataclass(frozen=True)
class Case:
    """One configuration under test: a label, what to start, and parameter columns for the CSV."""

    label: str
    setup: cluster.Setup
    params: tuple = ()


CASE_SETUP_S_FIXED = 1.0
CASE_SETUP_S_PER_GIB = 3.0


def case_setup_s(mode):
    """Rough set-up time of one fresh case (images, create-md, nodes, connect): about 4 s
    with 1 GiB preallocated images, mostly the preallocation, so it scales with the image."""
    return CASE_SETUP_S_FIXED + CASE_SETUP_S_PER_GIB * mode.image_bytes / (1 << 30)

SEQ_MIB_PER_S = 800.0
JOB_OVERHEAD_S = 0.5


def job_seconds(job):
    """A rough duration of one fio job on the development VM, for estimates only."""
    if job.runtime_s:
        return job.runtime_s + job.ramp_s + JOB_OVERHEAD_S
    return job.size_bytes / (SEQ_MIB_PER_S * 2**20) + JOB_OVERHEAD_S


def estimate_s(mode, cases, jobs):
    """Rough duration of measure(): fresh nodes per case, every job, every repetition."""
    return mode.reps * len(cases) * (case_setup_s(mode) + sum(job_seconds(j) for j in jobs))


def flatten(metrics):
    """fio metrics with the nested CPU dicts turned into columns: <node>_usr_pct, <node>_sys_pct,
    <node>_cpu_us_per_io, machine_busy_pct, machine_steal_pct."""
    row = {k: v for k, v in metrics.items() if not isinstance(v, dict)}
    for node, cpu in (metrics.get("server_cpu") or {}).items():
        for key in ("usr_pct", "sys_pct", "cpu_pct", "cpu_us_per_io"):
            row[f"{node}_{key}"] = (cpu or {}).get(key)
    mc = metrics.get("machine_cpu") or {}
    row["machine_busy_pct"] = mc.get("busy_pct")
    row["machine_steal_pct"] = mc.get("steal_pct")
    return row


def measure_job(ctx, experiment, c, case, job, rep):
    """One fio job on the running cluster c; its CSV row (fio metrics and per-node CPU)."""
    path = ctx.fio_json(experiment, case.label, job.name, f"r{rep}")
    m = fio.run_job(ctx.reaper, job, c.uri, path, c.watch)
    procs.log(f"  {experiment} {case.label:18} {job.name:14} {m['mib_s']:8.1f} MiB/s "
              f"{m['iops']:9.0f} IOPS  mean {m['clat_mean_us']:8.1f} us")
    return {"case": case.label, **dict(case.params), "workload": job.name, "rep": rep, **flatten(m)}


def run_case(ctx, experiment, case, jobs, rep, measure=measure_job):
    """Fresh nodes for case, every job once through measure (measure_job's signature); returns
    (rows, problems, replica check or None)."""
    rows, problems, check = [], [], None
    wd = ctx.workdir(experiment, case.label, f"r{rep}")
    try:
        with cluster.Cluster(ctx.reaper, wd, case.setup) as c:
            for job in jobs:
                rows.append(measure(ctx, experiment, c, case, job, rep))
            state = c.link_state()
            if state and state[0] != "Connected":
                problems.append(f"{case.label} (rep {rep}): peer link {state[0]} after the workloads ({state[1]})")
            if case.setup.kind == "pair":
                check = c.check_replicas()
                if check["result"] != "IDENTICAL":
                    problems.append(f"{case.label} (rep {rep}): replicas DIFFERENT: {check.get('first_difference')}")
        problems += [f"{case.label} (rep {rep}): {n}" for n in c.notes]
    except (BenchError, OSError) as exc:
        problems.append(f"{case.label} (rep {rep}): FAILED: {str(exc).strip().splitlines()[0][:400]}")
        procs.log(f"{experiment} {case.label}: FAILED: {exc}")
    return rows, problems, check


def measure(ctx, experiment, cases, jobs, reps=None, job_measure=measure_job):
    """Every case x every job, repeated reps (default ctx.mode.reps) times round-robin. Returns
    (rows, problems, checks) where checks lists (case label, rep, replica check) for pairs."""
    rows, problems, checks = [], [], []
    reps = reps or ctx.mode.reps
    for rep in range(1, reps + 1):
        for case in cases:
            procs.log(f"{experiment}: {case.label} (repetition {rep}/{reps})")
            r, p, check = run_case(ctx, experiment, case, jobs, rep, job_measure)
            rows += r
            problems += p
            if check:
                checks.append((case.label, rep, check))
    return rows, problems, checks


def status_of(rows, problems, expected):
    """'ok' when every expected row is there, 'failed' when none is, else 'partial'."""
    if not rows:
        return "failed"
    return "ok" if len(rows) >= expected and not any("FAILED" in p for p in problems) else "partial"


def replica_lines(checks):
    """A Markdown sentence on the replica checks: all identical, or which were not."""
    if not checks:
        return []
    bad = [f"{label} (rep {rep}): {c['result']}" for label, rep, c in checks if c["result"] != "IDENTICAL"]
    if bad:
        return ["Replica check (cmp of both backing files after each case): **" + "; ".join(bad) + "**."]
    slowest = max(c["seconds"] for _, _, c in checks)
    return [f"Replica check: after each replicated case ({len(checks)} in all), `cmp` found both backing files "
            f"IDENTICAL (at most {slowest} s after the last write)."]


def bars(aggs, group_key, series_key, metric, scale=1.0):
    """(groups, series) for svg.bar_chart from aggregated rows: one group per distinct value of
    group_key, one series per distinct value of series_key, whiskers from the min-max spread."""
    groups = list(dict.fromkeys(a[group_key] for a in aggs))
    names = list(dict.fromkeys(a[series_key] for a in aggs))
    series = []
    for name in names:
        vals, errs = [], []
        for g in groups:
            a = next((x for x in aggs if x[group_key] == g and x[series_key] == name), None)
            v = a.get(metric) if a else None
            vals.append(None if v is None else v * scale)
            lo, hi = (a.get(metric + "_min"), a.get(metric + "_max")) if a else (None, None)
            errs.append((lo * scale, hi * scale) if a and a.get("n", 1) > 1 and lo is not None else None)
        series.append((name, vals, errs))
    return groups, series


def try_plot(ctx, outcome, file_name, caption, make):
    """Calls make() for an SVG text and saves it; a PlotError (e.g. no data) becomes a problem."""
    try:
        ctx.save_plot(outcome, file_name, caption, make())
    except BenchError as exc:
        outcome.problems.append(f"plot {file_name} not drawn: {exc}")


def aggregate(rows, keys, metrics):
    """stats.aggregate, re-exported for the experiment modules."""
    return stats.aggregate(rows, keys, metrics)

