"""activity-log: what tandem's activity log costs the Primary's small random writes, for several
al-extents and against `al-updates no`, with the peer connected and with it disconnected (seed
001's "no secondary"), and how much a Primary crash would resync in exchange.

Per repetition and configuration: a fresh protocol C pair with the configuration's `disk { }`
options; a warm-up that writes one 4 KiB block at the start of every 4 MiB extent (so the log
starts full, as in steady state, and no measured run pays for first touches); fio randwrite 4k at
QD1 and QD32 over the whole device, time-based, without fio's ramp (so every activity-log
transaction counted falls inside fio's runtime); the replica check; `tandem disconnect r0` on
alice; the same two runs disconnected. alice's `status --json` is read before and after every run:
the deltas of `al_writes` (activity-log transactions) and `bm_writes` (bitmap pages) over fio's
runtime give the log's write rate.

Invariants: a configuration is compared with `al-updates no` only within the same repetition,
connectivity and workload; the seed's al-extents 7 is never silently replaced: the report says
that tandem's configuration refuses it, from a live `tandem dump` of such a file; each
configuration gets fresh nodes and backing files; a counter that cannot be read gives no rate
(None), never 0.
"""

import os
import subprocess
from dataclasses import dataclass

from .. import cluster, fio, procs, seeds, stats, svg
from ..errors import BenchError
from ..fio import Job
from ..report import Outcome, cell, fmt, table
from . import common, resync

NAME = "activity-log"
TITLE = "activity-log size (al-extents) and al-updates no, connected and disconnected"
SEED = seeds.cite("001", "the al-extents runs with and without the secondary")
KIB = 1 << 10
MIB = 1 << 20
EXTENT_BYTES = 4 * MIB
WARMUP_BLOCK = "4k"
SEED_AL_EXTENTS = 7
AL_EXTENTS_MIN = 67
DEFAULT_AL_EXTENTS = 1237
ALL_AL_EXTENTS = (67, 127, 1237, 6433)
QDS = (1, 32)
CONNECTED, DISCONNECTED = "connected", "disconnected"
CONNECTIVITIES = (CONNECTED, DISCONNECTED)
NO_AL_LABEL = "al-updates no"
# `tandem disconnect` until alice reports StandAlone: measured at under 50 ms (one status poll).
DISCONNECT_S = 0.1
ADMIN_TIMEOUT_S = 30.0
METRICS = ("iops", "clat_mean_us", "al_writes_per_s", "bm_writes_per_s", "al_writes_per_1k_writes",
           "iops_vs_no_al_pct", "clat_vs_no_al_pct")


@dataclass(frozen=True)
class Config:
    """One activity-log configuration: al-extents, or None for `al-updates no`."""

    al_extents: int = None

    @property
    def label(self):
        """'al-extents 67' or 'al-updates no'."""
        return NO_AL_LABEL if self.al_extents is None else f"al-extents {self.al_extents}"

    def disk_options(self):
        """The `disk { }` options of this configuration, as Setup.disk pairs."""
        if self.al_extents is None:
            return (("al-updates", "no"),)
        return (("al-extents", str(self.al_extents)),)

    def exposure_bytes(self, device_bytes):
        """What a crash of the Primary marks out of sync: every hot extent (al-extents x 4 MiB,
        at most the device), or the whole device without a log."""
        if self.al_extents is None:
            return device_bytes
        return min(self.al_extents * EXTENT_BYTES, device_bytes)

    def exposure_text(self, device_bytes):
        """The crash-exposure cell: '268 MiB', '4,948 MiB (1,024 on this device)' when the log
        is larger than the device, 'whole device (1,024 MiB)' without a log."""
        on_device = fmt(self.exposure_bytes(device_bytes) / MIB)
        if self.al_extents is None:
            return f"whole device ({on_device} MiB)"
        nominal = fmt(self.al_extents * EXTENT_BYTES / MIB)
        return f"{nominal} MiB" if nominal == on_device else f"{nominal} MiB ({on_device} on this device)"


NO_AL = Config(None)


@dataclass(frozen=True)
class Plan:
    """What one mode measures: the configurations (al-updates no last), fio's runtime in
    seconds, and the repetitions."""

    configs: tuple
    runtime_s: int
    reps: int


def plan(mode):
    """The Plan of a mode. smoke: al-extents 67 only, the mode's 1 s. quick: 67 and the default
    1237, 2 s runs (not the mode's 3 s: the quick suite's 10 min budget). default: every value,
    the mode's runtime. full: every value once, 5 s runs (three repetitions would take the full
    suite past its hour). Every plan ends with al-updates no, the baseline."""
    every = tuple(Config(n) for n in ALL_AL_EXTENTS)
    table_ = {"smoke": ((Config(AL_EXTENTS_MIN),), mode.runtime_s, mode.reps),
              "quick": ((Config(AL_EXTENTS_MIN), Config(DEFAULT_AL_EXTENTS)), 2, mode.reps),
              "full": (every, 5, 1)}
    configs, runtime_s, reps = table_.get(mode.name, (every, mode.runtime_s, mode.reps))
    return Plan(configs + (NO_AL,), runtime_s, reps)


def workload_name(qd):
    """'randwrite-4k-qd1' for QD1."""
    return f"randwrite-4k-qd{qd}"


def jobs(mode, p):
    """fio randwrite 4k at each of QDS, whole device, time-based, no ramp."""
    return [Job(workload_name(qd), "randwrite", "4k", qd, mode.image_bytes, p.runtime_s, 0) for qd in QDS]


def warmup_job(mode):
    """One 4 KiB write at the start of every extent, sequentially at QD32 (fio's `write:<skip>`
    with number_ios = the number of extents: fio would otherwise wrap around to fill `size`)."""
    return Job("warm-up-every-extent", f"write:{EXTENT_BYTES // KIB - 4}k", WARMUP_BLOCK, 32, mode.image_bytes)


def extent_count(device_bytes):
    """The 4 MiB extents of a device (a partial last one counts)."""
    return -(-device_bytes // EXTENT_BYTES)


# ----- counters and ratios (pure) -------------------------------------------------------------

def counters(status):
    """(al_writes, bm_writes) of alice's first device in a status dict, or None if absent."""
    devices = (status or {}).get("devices") or [{}]
    al, bm = devices[0].get("al_writes"), devices[0].get("bm_writes")
    if not isinstance(al, int) or not isinstance(bm, int):
        return None
    return al, bm


def log_rates(before, after, metrics):
    """The counter columns of one run: deltas, per second of fio's runtime, AL transactions per
    1000 writes; every value None if a counter is missing or went backwards."""
    keys = ("al_writes", "bm_writes", "al_writes_per_s", "bm_writes_per_s", "al_writes_per_1k_writes")
    if before is None or after is None or after[0] < before[0] or after[1] < before[1]:
        return dict.fromkeys(keys)
    al, bm = after[0] - before[0], after[1] - before[1]
    runtime_s, ios = metrics.get("runtime_s"), metrics.get("ios")
    per_s = (lambda n: n / runtime_s) if runtime_s else (lambda n: None)
    return {"al_writes": al, "bm_writes": bm, "al_writes_per_s": per_s(al), "bm_writes_per_s": per_s(bm),
            "al_writes_per_1k_writes": 1000 * al / ios if ios else None}


def with_ratios(rows):
    """rows with iops_vs_no_al_pct and clat_vs_no_al_pct set on every measured row: the ratio to
    the al-updates no row of the same repetition, connectivity and workload (None without one)."""
    base = {(r.get("rep"), r.get("connectivity"), r.get("workload")): r for r in rows if r.get("case") == NO_AL_LABEL}
    out = []
    for row in rows:
        row = dict(row)
        if row.get("connectivity") in CONNECTIVITIES:
            b = base.get((row.get("rep"), row.get("connectivity"), row.get("workload")), {})
            for metric, col in (("iops", "iops_vs_no_al_pct"), ("clat_mean_us", "clat_vs_no_al_pct")):
                r = stats.ratio(row.get(metric), b.get(metric))
                row[col] = None if r is None else 100 * r
        out.append(row)
    return out


def rejection_sentence(returncode, stderr, res_dir):
    """The report's sentence on the seed's al-extents 7 from `tandem dump`'s result."""
    if returncode == 0:
        return (f"The seed's smallest value, al-extents {SEED_AL_EXTENTS}, was accepted by `tandem dump` in this "
                f"checkout but is not measured here; the smallest value measured is {AL_EXTENTS_MIN}.")
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    message = (lines[-1] if lines else f"exit {returncode}").replace(res_dir + os.sep, "")
    return (f"The seed's smallest value, al-extents {SEED_AL_EXTENTS}, is not measured: tandem's configuration "
            f"refuses it (`tandem dump` of such a file: `{message}`), as DRBD 9 does; {AL_EXTENTS_MIN} is the "
            "smallest value both accept.")


# ----- measurements ---------------------------------------------------------------------------

def check_seed_value(ctx):
    """Runs `tandem dump` on a resource with the seed's al-extents 7; returns rejection_sentence."""
    wd = ctx.workdir(NAME, f"al-extents-{SEED_AL_EXTENTS}")
    res = os.path.join(wd, "r0.res")
    cluster.write_res(res, "C", [os.path.join(wd, "alice.img"), os.path.join(wd, "bob.img")],
                      procs.free_ports(2), disk_options=(("al-extents", str(SEED_AL_EXTENTS)),))
    proc = subprocess.run([cluster.binary(), "dump", "--config", res, "r0"], capture_output=True, text=True,
                          timeout=ADMIN_TIMEOUT_S)
    return rejection_sentence(proc.returncode, proc.stderr, wd)


def warm_up(ctx, c, cfg, rep):
    """The warm-up run (every extent touched once); returns its row (counters, no fio metrics)."""
    job = warmup_job(ctx.mode)
    out = ctx.fio_json(NAME, cfg.label, job.name, f"r{rep}")
    log_path = out[:-5] + ".log"
    before = counters(cluster.tandem_status(c.dirs["alice"]))
    argv = fio.args(job, c.uri, out) + [f"--number_ios={extent_count(ctx.mode.image_bytes)}"]
    proc = ctx.reaper.spawn(argv, log_path)
    rc = proc.wait()
    ctx.reaper.stop(proc)
    err = procs.tail(log_path, 10).strip()
    os.remove(log_path)
    if rc != 0:
        raise BenchError(f"fio {job.name}: exit {rc}: {err[-800:]}")
    m = fio.parse_file(out)
    after = counters(cluster.tandem_status(c.dirs["alice"]))
    return {"case": cfg.label, "al_extents": cfg.al_extents, "connectivity": "warm-up", "workload": job.name,
            "rep": rep, "ios": m["ios"], **log_rates(before, after, m)}


def run_jobs(ctx, c, cfg, connectivity, js, rep):
    """Each job once on the running pair; one row per job with fio's metrics and the counters."""
    rows = []
    exposure = cfg.exposure_bytes(ctx.mode.image_bytes) / MIB
    nominal = None if cfg.al_extents is None else cfg.al_extents * EXTENT_BYTES / MIB
    for job in js:
        before = counters(cluster.tandem_status(c.dirs["alice"]))
        m = fio.run_job(ctx.reaper, job, c.uri, ctx.fio_json(NAME, cfg.label, connectivity, job.name, f"r{rep}"),
                        c.watch)
        after = counters(cluster.tandem_status(c.dirs["alice"]))
        row = {"case": cfg.label, "al_extents": cfg.al_extents, "connectivity": connectivity, "workload": job.name,
               "rep": rep, "crash_exposure_mib": nominal, "crash_exposure_device_mib": exposure,
               **common.flatten(m), **log_rates(before, after, m)}
        rows.append(row)
        procs.log(f"  {NAME} {cfg.label:16} {connectivity:12} {job.name:17} {m['iops']:9.0f} IOPS  "
                  f"mean {m['clat_mean_us']:8.1f} us  AL {fmt(row['al_writes_per_s'])}/s")
    return rows


def disconnect(c):
    """`tandem disconnect r0` on alice, then waits until she is StandAlone."""
    alice = c.dirs["alice"]
    cluster.tandem_admin(alice, "disconnect", "r0")
    resync.wait_state(alice, "alice StandAlone", lambda s: resync.connection_state(s) == "StandAlone")


def run_config(ctx, cfg, js, rep):
    """A fresh pair with cfg: warm-up, the jobs connected, the replica check, disconnect, the
    jobs again; returns (rows, problems, replica check or None)."""
    rows, problems, check = [], [], None
    setup = cluster.Setup("pair", size_bytes=ctx.mode.image_bytes, disk=cfg.disk_options(), label=cfg.label)
    try:
        with cluster.Cluster(ctx.reaper, ctx.workdir(NAME, cfg.label, f"r{rep}"), setup) as c:
            rows.append(warm_up(ctx, c, cfg, rep))
            rows += run_jobs(ctx, c, cfg, CONNECTED, js, rep)
            check = c.check_replicas()
            if check["result"] != "IDENTICAL":
                problems.append(f"{cfg.label} (rep {rep}): replicas DIFFERENT: {check.get('first_difference')}")
            disconnect(c)
            rows += run_jobs(ctx, c, cfg, DISCONNECTED, js, rep)
        problems += [f"{cfg.label} (rep {rep}): {n}" for n in c.notes]
    except (BenchError, OSError) as exc:
        problems.append(f"{cfg.label} (rep {rep}): FAILED: {str(exc).strip().splitlines()[0][:400]}")
        procs.log(f"{NAME} {cfg.label}: FAILED: {exc}")
    problems += [f"{cfg.label} (rep {rep}), {r['connectivity']} {r['workload']}: activity-log counters "
                 "unreadable in `status --json`" for r in rows if r.get("al_writes") is None]
    return rows, problems, check


def measure(ctx, p):
    """Every repetition, every configuration round-robin. Returns (rows, problems, checks)."""
    rows, problems, checks = [], [], []
    js = jobs(ctx.mode, p)
    for rep in range(1, p.reps + 1):
        for cfg in p.configs:
            procs.log(f"{NAME}: {cfg.label} (repetition {rep}/{p.reps})")
            r, pr, check = run_config(ctx, cfg, js, rep)
            rows, problems = rows + r, problems + pr
            if check:
                checks.append((cfg.label, rep, check))
    return with_ratios(rows), problems, checks


# ----- report -----------------------------------------------------------------------------------

def estimate_s(mode):
    """Rough duration: per configuration a fresh pair, the warm-up, the jobs twice, the replica
    check (both backing files read once) and the disconnect."""
    p = plan(mode)
    js = jobs(mode, p)
    check_s = 2 * mode.image_bytes / (common.SEQ_MIB_PER_S * MIB)
    per_config = (common.case_setup_s(mode) + common.JOB_OVERHEAD_S + 2 * sum(common.job_seconds(j) for j in js)
                  + check_s + DISCONNECT_S)
    return p.reps * len(p.configs) * per_config


def columns():
    """(connectivity, workload) of every table column, in order."""
    return [(conn, workload_name(qd)) for conn in CONNECTIVITIES for qd in QDS]


def column_title(conn, workload):
    """'connected QD1' for (connected, randwrite-4k-qd1)."""
    return f"{conn} QD{workload.rsplit('qd', 1)[1]}"


def _pct(agg, metric):
    v = agg.get(metric)
    return "" if v is None else f" ({v:.0f}%)"


def tables(rows, reps, configs, device_bytes):
    """The report's tables: IOPS with the ratio to al-updates no and the crash exposure of each
    configuration, mean latency likewise, activity-log transactions and bitmap pages per second."""
    aggs = {(a["case"], a["connectivity"], a["workload"]): a
            for a in common.aggregate(rows, ["case", "connectivity", "workload"], METRICS)}
    heads = [column_title(*col) for col in columns()]

    def body(render):
        return [[cfg.label] + [render(aggs.get((cfg.label, *col), {})) for col in columns()] for cfg in configs]

    lines = ["IOPS (in parentheses: % of `al-updates no` in the same connectivity, workload and repetition), and "
             "the crash exposure: what a crash of the Primary marks out of sync for its peers (al-extents × 4 MiB, "
             "at most the device; without a log, everything):", ""]
    iops = body(lambda a: cell(a, "iops", 0, reps) + _pct(a, "iops_vs_no_al_pct"))
    lines += table(["configuration"] + heads + ["crash exposure"],
                   [row + [cfg.exposure_text(device_bytes)] for row, cfg in zip(iops, configs)])
    lines += ["", "Mean completion latency, µs (in parentheses: % of `al-updates no`):", ""]
    lines += table(["configuration"] + heads, body(lambda a: cell(a, "clat_mean_us", 0, reps)
                                                   + _pct(a, "clat_vs_no_al_pct")))
    lines += ["", "Activity-log transactions per second / bitmap pages written per second (deltas of alice's "
              "`al_writes` / `bm_writes` over fio's runtime), and AL transactions per 1000 writes:", ""]
    lines += table(["configuration"] + heads, body(
        lambda a: f"{cell(a, 'al_writes_per_s', 0, reps)} / {cell(a, 'bm_writes_per_s', 0, reps)} "
                  f"({cell(a, 'al_writes_per_1k_writes', 0, reps)}‰)"))
    return lines


def run(ctx):
    """The seed-value check, the measurements, the tables and one chart."""
    p = plan(ctx.mode)
    problems = []
    try:
        seed_note = check_seed_value(ctx)
    except (BenchError, OSError, subprocess.SubprocessError) as exc:
        seed_note = f"The check of the seed's al-extents {SEED_AL_EXTENTS} failed: {exc}"
        problems.append(seed_note)
    rows, measured_problems, checks = measure(ctx, p)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems + measured_problems)
    o.status = common.status_of(rows, o.problems, p.reps * len(p.configs) * (1 + 2 * len(QDS)))
    o.method = method_lines(ctx.mode, p, seed_note)
    o.lines += tables(rows, p.reps, p.configs, ctx.mode.image_bytes)
    o.lines += [""] + common.replica_lines(checks)
    plot(ctx, o, rows, p)
    return o


def method_lines(mode, p, seed_note):
    """The method paragraph of the report."""
    extents = extent_count(mode.image_bytes)
    js = jobs(mode, p)
    return [
        f"Per configuration a fresh pair (`net {{ protocol C; max-buffers 8000; max-epoch-size 8000; }}`, "
        f"{fio.human_bytes(mode.image_bytes)} devices = {extents} extents of 4 MiB, external metadata) with "
        f"`disk {{ }}` options: {'; '.join(f'`{cfg.label}`' for cfg in p.configs)}. First a warm-up writes 4 KiB "
        f"at the start of each of the {extents} extents (fio `write:4092k`, QD32), so the log is as full as in "
        f"steady state. Then {'; '.join(j.describe() for j in js)}, over the whole device, with no ramp (every "
        "counted transaction falls inside fio's runtime); the replica check; `tandem disconnect r0` on alice (the "
        "seed's \"no secondary\": the writes are then marked out of sync in the bitmap) and the same runs again. "
        "alice's `status --json` is read before and after each run for `al_writes` and `bm_writes`.",
        "",
        hot_sentence(p, extents),
        "",
        seed_note + f" This mode runs {p.runtime_s} s per run and {p.reps} repetition(s)."]


def hot_sentence(p, extents):
    """Which configurations hold the whole device hot after the warm-up, and which evict."""
    logs = [c.al_extents for c in p.configs if c.al_extents is not None]
    whole = [str(n) for n in logs if n >= extents]
    evict = [str(n) for n in logs if n < extents]
    out = []
    if whole:
        out.append(f"With al-extents {' and '.join(whole)} (at least the device's {extents} extents) every extent is hot "
                   "after the warm-up, so the measured runs should write no transaction (the third table shows "
                   "whether they did).")
    if evict:
        out.append(f"With al-extents {' and '.join(evict)} a uniformly random write finds its extent hot with "
                   f"probability al-extents / {extents}; every miss evicts an extent and costs a transaction.")
    return " ".join(out + ["The seed ran a mail server on ext4 (a small working set); here the writes are uniform "
                           "over the device, the worst case for a small log."])


def plot(ctx, o, rows, p):
    """One grouped bar chart: IOPS of each al-extents configuration as % of al-updates no."""
    aggs = common.aggregate([r for r in rows if r.get("connectivity") in CONNECTIVITIES],
                            ["connectivity", "workload", "case"], ["iops_vs_no_al_pct"])
    groups = [column_title(*col) for col in columns()]
    series = []
    for cfg in p.configs:
        if cfg.al_extents is None:
            continue
        picked = [next((a for a in aggs if (a["connectivity"], a["workload"], a["case"]) == (*col, cfg.label)), {})
                  for col in columns()]
        whiskers = [(a["iops_vs_no_al_pct_min"], a["iops_vs_no_al_pct_max"])
                    if p.reps > 1 and a.get("n", 0) > 1 and a.get("iops_vs_no_al_pct_min") is not None else None
                    for a in picked]
        series.append((cfg.label, [a.get("iops_vs_no_al_pct") for a in picked], whiskers))
    common.try_plot(ctx, o, "activity-log.svg", "IOPS with an activity log as % of al-updates no",
                    lambda: svg.bar_chart("activity-log: IOPS as % of al-updates no (same connectivity)",
                                          "% of al-updates no", groups, series,
                                          reference=(100.0, NO_AL_LABEL)))
