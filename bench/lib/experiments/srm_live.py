"""srm-live: the Selective Replication Manager adapting while the link changes under a running
workload (issue 29 item 3), against static protocols C and A under the same schedule.

One fio job (4 KiB randwrite QD32 through alice's NBD export, srm's headline job) runs for the
whole schedule on a fresh pair behind tandem-linkemu; the suite steps the running link through
the emulator's control socket: added round trip 0 ms, +20 ms, +50 ms, back to 0 ms, then 0 ms
with the bandwidth cut to DROP_RATE (each segment the mode's live_segment_s). fio logs IOPS and
mean completion latency every LOG_AVG_MS; alice's Prometheus endpoint is polled every
SAMPLE_INTERVAL_S for the protocol in force, the unreplicated backlog and the age of its oldest
write. The variants (static C, static A, `srm on` with the shipped defaults: no srm-interval,
min-dwell or bound written) run one after another, alternating when repeated.

Target (issue 29): after each step SRM's IOPS settles within SETTLE_S to >= KEEP_MIN of the
better static protocol for that segment, with no acknowledged write beyond the configured lag
bound (srm-max-lag-bytes / srm-max-lag-time, the defaults LAG_BYTES_DEFAULT / LAG_TIME_DEFAULT_S).

Invariants: every variant has the same schedule, job, image and sampling, and runs on fresh
nodes; times are seconds since fio was started (fio's epoch-stamped logs and the polls share
that origin); a segment's figures use only samples inside it; the summary, settle times and
verdicts are pure functions of the recorded series (segment_summary), so they are tested on
fixtures; --smoke's segments are too short for the target, so its verdicts say "not meaningful".
"""

import bisect
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace

from .. import cluster, fio, procs, seeds, stats, svg
from ..cluster import Setup
from ..errors import BenchError
from ..fio import Job
from ..report import Outcome, fmt, table
from . import common

NAME = "srm-live"
TITLE = "live adaptation: the link steps 0 -> 20 -> 50 -> 0 ms and drops its bandwidth while fio runs"
SEED = (seeds.cite("000", "the manager switching protocols as the network changes") + "; issue 29 item 3")
VARIANTS = ("proto-C", "proto-A", "srm-on")
STATIC_VARIANTS = ("proto-C", "proto-A")
SRM_VARIANT = "srm-on"
IMPLEMENTED = True

# The shipped defaults of crates/srm/src/config.rs (a unit test reads them from there).
LAG_BYTES_DEFAULT = 64 << 20
LAG_TIME_DEFAULT_S = 2.0

DROP_RATE = "10MiB/s"
DROP_RATE_LABEL = "10 MiB/s"
SAMPLE_INTERVAL_S = 0.25
LOG_AVG_MS = 250
SETTLE_S = 3.0
SMOOTH_S = 1.0
KEEP_MIN = 0.90
JOB_NAME, JOB_RW, JOB_BS, JOB_IODEPTH = "randwrite-4k-qd32", "randwrite", "4k", 32
FIO_EXIT_GRACE_S = 60.0
METRICS_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Segment:
    """One step of the schedule: its label, the added round trip and the link's rate."""

    label: str
    rtt_ms: float
    rate: str = "unlimited"

    def request(self):
        """The link emulator control request that sets this segment's link."""
        return {"delay_ms": self.rtt_ms / 2, "rate": self.rate}


SCHEDULE = (Segment("0 ms", 0), Segment("+20 ms", 20), Segment("+50 ms", 50), Segment("back to 0 ms", 0),
            Segment(f"0 ms at {DROP_RATE_LABEL}", 0, DROP_RATE))


def variant_setup(variant, image_bytes):
    """The Setup of one variant: a pair behind the link emulator (0 ms to start), alice's
    metrics endpoint on; SRM with `srm on;` alone (every other SRM setting at its default)."""
    base = Setup("pair", protocol="C", size_bytes=image_bytes, link_rtt_ms=0, label=variant, metrics=True)
    if variant == "proto-A":
        return replace(base, protocol="A")
    if variant == SRM_VARIANT:
        return replace(base, options=(("srm", "on"),))
    if variant == "proto-C":
        return base
    raise BenchError(f"unknown srm-live variant {variant!r}")


def job(mode):
    """The fio job: the whole schedule, time-based, no warm-up (the first segment is the warm-up)."""
    return Job(JOB_NAME, JOB_RW, JOB_BS, JOB_IODEPTH, mode.srm.image_bytes, len(SCHEDULE) * mode.live_segment_s, 0)


def estimate_s(mode):
    """Rough duration: per variant and repetition, a fresh pair, the schedule and a drain."""
    setup_s = common.CASE_SETUP_S_FIXED + common.CASE_SETUP_S_PER_GIB * mode.srm.image_bytes / (1 << 30)
    return mode.reps * len(VARIANTS) * (setup_s + common.job_seconds(job(mode)) + 2.0)


# ---- alice's metrics -------------------------------------------------------------------------

def _labels(text):
    out = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key.strip():
            out[key.strip()] = value.strip().strip('"')
    return out


def parse_metrics(text):
    """The first connection's state from a Prometheus exposition of tandem's: a dict with
    protocol (the one in force), unreplicated_bytes, oldest_s, possibly_stale (bool) and
    waiting_writes; a value the text lacks is None."""
    out = {"protocol": None, "unreplicated_bytes": None, "oldest_s": None, "possibly_stale": None,
           "waiting_writes": None}
    keys = {"tandem_connection_unreplicated_bytes": "unreplicated_bytes",
            "tandem_connection_oldest_unreplicated_seconds": "oldest_s",
            "tandem_connection_peer_possibly_stale": "possibly_stale",
            "tandem_connection_waiting_writes": "waiting_writes"}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        try:
            number = float(value)
        except ValueError:
            continue
        if name == "tandem_connection_protocol" and number == 1 and out["protocol"] is None:
            out["protocol"] = _labels(labels.rstrip("}")).get("protocol")
        elif name in keys and out[keys[name]] is None:
            out[keys[name]] = bool(number) if keys[name] == "possibly_stale" else number
    return out


def _poll(url, t0, polls, stop):
    """Appends (seconds since t0, parse_metrics) to polls every SAMPLE_INTERVAL_S until stop."""
    while not stop.is_set():
        t = time.time()
        try:
            with urllib.request.urlopen(url, timeout=METRICS_TIMEOUT_S) as reply:
                polls.append((t - t0, parse_metrics(reply.read().decode("utf-8", "replace"))))
        except (urllib.error.URLError, OSError, ValueError):
            polls.append((t - t0, None))
        stop.wait(max(0.0, SAMPLE_INTERVAL_S - (time.time() - t)))


# ---- one run -----------------------------------------------------------------------------------

def _read_log(path, t0):
    """[(seconds since t0, value)] of a fio log, or [] if fio did not write it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [(ms / 1000.0 - t0, v) for ms, v in fio.parse_log(f.read())]
    except OSError:
        return []


def _step_link(c, proc, t0, segment_s):
    """Steps the link at t0 + k * segment_s for k = 1..; returns the step times (s since t0,
    the first segment's start 0.0 included). Stops early if fio exits."""
    steps = [0.0]
    for k, segment in enumerate(SCHEDULE[1:], start=1):
        while time.time() < t0 + k * segment_s and proc.poll() is None:
            time.sleep(min(0.05, max(0.0, t0 + k * segment_s - time.time())))
        if proc.poll() is not None:
            break
        c.set_link(segment.request())
        steps.append(time.time() - t0)
    return steps


def fill_gaps(series, interval_s, value):
    """series with a point of `value` every interval_s wherever two points lie more than 1.5
    intervals apart: fio writes no averaged log entry for a window in which nothing completed,
    so a gap in its IOPS log is a stall (0 IOPS), and a gap in its latency log is no data."""
    out = []
    for a, b in zip(series, series[1:] + [None]):
        out.append(a)
        if b is not None and b[0] - a[0] > 1.5 * interval_s:
            t = a[0] + interval_s
            while t < b[0] - interval_s / 2:
                out.append((t, value))
                t += interval_s
    return out


def record(ctx, c, variant, rep, wd):
    """Runs the job with the schedule on cluster c; returns the trace: {"iops": [(t, IOPS)],
    "clat_us": [(t, µs)], "polls": [(t, metrics or None)], "steps": [t], "end": t, "fio": metrics}."""
    j = job(ctx.mode)
    out_json = ctx.fio_json(NAME, variant, f"r{rep}")
    prefix = os.path.join(wd, "fio")
    argv = fio.args(j, c.uri, out_json) + fio.log_args(prefix, LOG_AVG_MS)
    polls, stop = [], threading.Event()
    t0 = time.time()
    proc = ctx.reaper.spawn(argv, os.path.join(wd, "fio.log"))
    thread = threading.Thread(target=_poll, args=(c.metrics_url, t0, polls, stop), daemon=True)
    thread.start()
    try:
        steps = _step_link(c, proc, t0, ctx.mode.live_segment_s)
        try:
            rc = proc.wait(timeout=j.runtime_s + FIO_EXIT_GRACE_S)
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"fio {variant}: still running {FIO_EXIT_GRACE_S:g} s after its runtime") from exc
    finally:
        ctx.reaper.stop(proc)
        stop.set()
        thread.join()
    if rc != 0:
        raise BenchError(f"fio {variant}: exit {rc}: {procs.tail(os.path.join(wd, 'fio.log'), 10).strip()[-800:]}")
    iops_log, clat_log = fio.log_paths(prefix)
    _keep_raw(out_json, iops_log, clat_log, polls, t0)
    interval_s = LOG_AVG_MS / 1000
    trace = {"iops": fill_gaps(_read_log(iops_log, t0), interval_s, 0.0),
             "clat_us": [(t, v / 1000) for t, v in _read_log(clat_log, t0)],
             "polls": polls, "steps": steps, "end": len(SCHEDULE) * ctx.mode.live_segment_s,
             "fio": fio.parse_file(out_json)}
    if not trace["iops"]:
        raise BenchError(f"fio {variant}: no IOPS log written")
    return trace


def _keep_raw(out_json, iops_log, clat_log, polls, t0):
    """Keeps fio's two logs and the polls (with t0, epoch s) beside fio's JSON, for re-analysis."""
    base = out_json[:-5]
    for src, suffix in ((iops_log, "_iops.log"), (clat_log, "_clat.log")):
        if os.path.exists(src):
            shutil.copyfile(src, base + suffix)
    with open(base + "-polls.json", "w", encoding="utf-8") as f:
        json.dump({"t0": t0, "polls": polls}, f)


def run_variant(ctx, variant, rep):
    """Fresh pair, the schedule, then the link back to 0 ms unlimited and a replica check;
    returns (trace or None, problems, replica check or None)."""
    problems, check, trace = [], None, None
    wd = ctx.workdir(NAME, variant, f"r{rep}")
    try:
        with cluster.Cluster(ctx.reaper, wd, variant_setup(variant, ctx.mode.srm.image_bytes)) as c:
            trace = record(ctx, c, variant, rep, wd)
            if variant == SRM_VARIANT:
                _save_srm_status(ctx, c, rep)
            c.set_link({"delay_ms": 0, "rate": "unlimited"})
            state = c.link_state()
            if state and state[0] != "Connected":
                problems.append(f"{variant} (rep {rep}): peer link {state[0]} after the schedule ({state[1]})")
            check = c.check_replicas()
            if check["result"] != "IDENTICAL":
                problems.append(f"{variant} (rep {rep}): replicas DIFFERENT: {check.get('first_difference')}")
        problems += [f"{variant} (rep {rep}): {n}" for n in c.notes]
    except (BenchError, OSError) as exc:
        problems.append(f"{variant} (rep {rep}): FAILED: {str(exc).strip().splitlines()[0][:400]}")
        procs.log(f"{NAME} {variant}: FAILED: {exc}")
    return trace, problems, check


def _save_srm_status(ctx, c, rep):
    """Saves `tandem srm status r0` of alice (the manager's decisions) beside the fio JSON."""
    proc = cluster.tandem_admin(c.dirs["alice"], "srm", "status", "r0", check=False)
    path = ctx.fio_json(NAME, SRM_VARIANT, f"r{rep}", "srm-status")[:-5] + ".txt"
    with open(path, "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)


# ---- rows and summary (pure) ----------------------------------------------------------------

def segment_of(t, steps):
    """The index of the segment time t falls in, given the step times (steps[0] = 0)."""
    k = 0
    for i, s in enumerate(steps):
        if t >= s:
            k = i
    return k


def _state_at(polls, t, within_s=1.0):
    """The latest poll at or before t (not older than within_s), or {}."""
    best = {}
    for pt, m in polls:
        if pt <= t and t - pt <= within_s and m:
            best = m
        if pt > t:
            break
    return best


def nearest(series, t, within_s):
    """The value of the point of series (sorted by time) nearest to t, if within within_s."""
    times = [u for u, _ in series]
    i = bisect.bisect_left(times, t)
    near = [j for j in (i - 1, i) if 0 <= j < len(series) and abs(times[j] - t) <= within_s]
    return series[min(near, key=lambda j: abs(times[j] - t))][1] if near else None


def rows_of(trace, variant, rep):
    """CSV rows, one per fio interval: time, segment, IOPS, the mean completion latency of the
    same interval (fio's two logs are stamped a few ms apart), and the protocol, backlog and its
    bound from the poll just before it."""
    clat = sorted(trace["clat_us"])
    rows = []
    for t, iops in trace["iops"]:
        k = segment_of(t, trace["steps"])
        seg = SCHEDULE[min(k, len(SCHEDULE) - 1)]
        state = _state_at(trace["polls"], t)
        backlog = state.get("unreplicated_bytes")
        oldest = state.get("oldest_s")
        rows.append({"time_s": round(t, 3), "variant": variant, "rep": rep, "segment": k, "segment_label": seg.label,
                     "rtt_ms": seg.rtt_ms, "rate": seg.rate, "iops": iops,
                     "clat_mean_us": nearest(clat, t, LOG_AVG_MS / 2000),
                     "protocol": state.get("protocol"),
                     "unreplicated_kib": None if backlog is None else int(backlog) // 1024,
                     "oldest_unreplicated_ms": None if oldest is None else round(oldest * 1000),
                     "bound_kib": LAG_BYTES_DEFAULT // 1024 if variant == SRM_VARIANT else None,
                     "bound_ms": round(LAG_TIME_DEFAULT_S * 1000) if variant == SRM_VARIANT else None})
    return rows


def _bounds(steps, end, k):
    start = steps[k] if k < len(steps) else None
    stop = steps[k + 1] if k + 1 < len(steps) else end
    return start, stop


def settle_window_s(segment_s):
    """The settle excluded from a segment's median: SETTLE_S, or half a segment shorter than
    twice that (--smoke's 1 s segments, whose verdicts are not meaningful anyway)."""
    return min(SETTLE_S, segment_s / 2)


def _settled_median(series, start, stop, settle_s):
    return stats.median([v for t, v in series if start + settle_s <= t < stop])


def settle_time(series, start, stop, reference):
    """Seconds from start to the end of the first SMOOTH_S window (entirely inside the segment)
    whose mean IOPS is >= KEEP_MIN x reference; None if no window gets there. That the level
    holds afterwards is the settled median's job (a single noisy window later on, which the
    better static protocol shows as well on this machine, does not unsettle it)."""
    if not reference:
        return None
    pts = [(t, v) for t, v in series if start <= t < stop]
    for t, _ in pts:
        if t < start + SMOOTH_S - 1e-9:
            continue
        window = [v for u, v in pts if t - SMOOTH_S < u <= t]
        if sum(window) / len(window) >= KEEP_MIN * reference:
            return t - start
    return None


def dip_share(series, start, stop, settle_s):
    """The share of the SMOOTH_S windows in [start + settle_s, stop) whose mean IOPS is under
    KEEP_MIN x the median over that span: how noisy a run is against itself; None if empty."""
    pts = [(t, v) for t, v in series if start + settle_s <= t < stop]
    med = stats.median([v for _, v in pts])
    means = []
    for t, _ in pts:
        if t >= start + settle_s + SMOOTH_S - 1e-9:
            window = [v for u, v in pts if t - SMOOTH_S < u <= t]
            means.append(sum(window) / len(window))
    if not means or not med:
        return None
    return sum(m < KEEP_MIN * med for m in means) / len(means)


def _backlog(polls, start, stop):
    """(largest backlog bytes, oldest age s) over the polls in [start, stop) where acknowledged
    writes may be unreplicated (protocol A in force or the peer marked possibly stale), and the
    largest backlog at all; the protocols in force there in order ('C>A')."""
    inside = [m for t, m in polls if start <= t < stop and m]
    acked = [m for m in inside if m.get("protocol") == "A" or m.get("possibly_stale")]
    seq = []
    for m in inside:
        if m.get("protocol") and seq[-1:] != [m["protocol"]]:
            seq.append(m["protocol"])
    biggest = lambda ms, key: max((m.get(key) or 0 for m in ms), default=None)  # noqa: E731
    return {"backlog_acked_max": biggest(acked, "unreplicated_bytes"), "oldest_acked_max_s": biggest(acked, "oldest_s"),
            "backlog_max": biggest(inside, "unreplicated_bytes"), "protocols": ">".join(seq)}


def segment_summary(traces, segment_s, smoke=False):
    """Per segment (SCHEDULE order): each variant's settled median IOPS, the better static
    protocol, SRM's ratio to it, SRM's settle time, SRM's backlog against the bound and the
    verdict. traces: {variant: trace} of one repetition (a variant may be missing)."""
    out = []
    meaningful = not smoke and segment_s > SETTLE_S + SMOOTH_S
    settle_s = settle_window_s(segment_s)
    for k, seg in enumerate(SCHEDULE):
        row = {"segment": k, "label": seg.label}
        for v in VARIANTS:
            tr = traces.get(v)
            start, stop = _bounds(tr["steps"], tr["end"], k) if tr else (None, None)
            row[v] = _settled_median(tr["iops"], start, stop, settle_s) if start is not None else None
        statics = [(row[v], v) for v in STATIC_VARIANTS if row[v] is not None]
        best, best_name = max(statics) if statics else (None, None)
        row.update(best=best, best_name=best_name, ratio=stats.ratio(row[SRM_VARIANT], best))
        ref = traces.get(best_name)
        row["best_dips"] = dip_share(ref["iops"], *_bounds(ref["steps"], ref["end"], k), settle_s) if ref and (
            _bounds(ref["steps"], ref["end"], k)[0] is not None) else None
        srm = traces.get(SRM_VARIANT)
        start, stop = _bounds(srm["steps"], srm["end"], k) if srm else (None, None)
        row["settle_s"] = settle_time(srm["iops"], start, stop, best) if start is not None else None
        row.update(_backlog(srm["polls"], start, stop) if start is not None else _backlog([], 0, 0))
        row["verdict"] = verdict(row, meaningful)
        out.append(row)
    return out


def within_bound(row):
    """True if the backlog of acknowledged writes stayed within both configured lag bounds."""
    b, age = row.get("backlog_acked_max"), row.get("oldest_acked_max_s")
    return (b is None or b <= LAG_BYTES_DEFAULT) and (age is None or age <= LAG_TIME_DEFAULT_S)


def shortfalls(row):
    """Why a segment misses the target: a list of short phrases (empty when it meets it)."""
    out = []
    if row.get("settle_s") is None:
        out.append(f"never reached {KEEP_MIN:.0%}")
    elif row["settle_s"] > SETTLE_S:
        out.append(f"settled in {row['settle_s']:.1f} s > {SETTLE_S:g} s")
    if row.get("ratio") is not None and row["ratio"] < KEEP_MIN:
        out.append(f"ratio {row['ratio']:.2f} < {KEEP_MIN:.2f}")
    b, age = row.get("backlog_acked_max"), row.get("oldest_acked_max_s")
    if b is not None and b > LAG_BYTES_DEFAULT:
        out.append(f"backlog {_mib(b)} MiB > {LAG_BYTES_DEFAULT >> 20} MiB")
    if age is not None and age > LAG_TIME_DEFAULT_S:
        out.append(f"oldest acked write {age:.2f} s > {LAG_TIME_DEFAULT_S:g} s")
    return out


def verdict(row, meaningful):
    """PASS, FAIL, 'not measured' or 'not meaningful (smoke)' for one segment's row."""
    if row.get("ratio") is None:
        return "not measured"
    if not meaningful:
        return "not meaningful (smoke)"
    settled = row.get("settle_s") is not None and row["settle_s"] <= SETTLE_S
    return "PASS" if row["ratio"] >= KEEP_MIN and settled and within_bound(row) else "FAIL"


# ---- report ---------------------------------------------------------------------------------

def _mib(value):
    return "–" if value is None else f"{value / (1 << 20):.1f}"


def summary_lines(summary, rep, reps, segment_s):
    """The per-segment table of one repetition."""
    body = []
    for r in summary:
        age = r.get("oldest_acked_max_s")
        body.append([f"{r['segment']}: {r['label']}", fmt(r["proto-C"]), fmt(r["proto-A"]), fmt(r[SRM_VARIANT]),
                     f"{r['best_name'] or '–'}",
                     "–" if r.get("best_dips") is None else f"{r['best_dips']:.0%}",
                     "–" if r["ratio"] is None else f"{r['ratio']:.2f}",
                     "not settled" if r["settle_s"] is None else f"{r['settle_s']:.2f} s",
                     r["protocols"] or "–", f"{_mib(r['backlog_acked_max'])} / {_mib(r['backlog_max'])}",
                     "–" if age is None else f"{age:.2f} s",
                     f"**{r['verdict']}**" + (f" ({'; '.join(shortfalls(r))})" if r["verdict"] == "FAIL" else "")])
    title = "Per segment" + (f" (repetition {rep} of {reps})" if reps > 1 else "")
    return [f"{title}: median IOPS after a {settle_window_s(segment_s):g} s settle; SRM's ratio to the better static protocol; "
            f"SRM's settle time (from the step to the end of the first {SMOOTH_S:g} s window whose mean IOPS is "
            f">= {KEEP_MIN:.0%} of the better static's median; {SMOOTH_S:g} s is the shortest possible); SRM's protocols in force; SRM's largest backlog "
            f"of acknowledged writes (while A was in force or the peer marked possibly stale) / at all, MiB, and the "
            f"oldest such write (bounds {LAG_BYTES_DEFAULT >> 20} MiB and {LAG_TIME_DEFAULT_S:g} s):", ""] + table(
        ["segment", "C IOPS", "A IOPS", "SRM IOPS", "better static", "its own dips", "SRM / better", "SRM settle",
         "SRM protocols", "SRM backlog MiB (acked / all)", "oldest acked", "verdict"], body, "lrrrlrrrlrrl") + [""]


def across_lines(summaries):
    """With repetitions: per segment, SRM's ratio to the better static (median, min–max), its
    settle time (median, max), the oldest acknowledged write (max) and how many passed."""
    body = []
    for k, seg in enumerate(SCHEDULE):
        rows = [s[k] for s in summaries if k < len(s)]
        ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
        settles = [r["settle_s"] for r in rows if r["settle_s"] is not None]
        ages = [r["oldest_acked_max_s"] for r in rows if r.get("oldest_acked_max_s") is not None]
        lo, hi = stats.spread(ratios)
        body.append([f"{k}: {seg.label}",
                     "–" if not ratios else f"{stats.median(ratios):.2f} ({lo:.2f}–{hi:.2f})",
                     "–" if not settles else f"{stats.median(settles):.2f} s / {max(settles):.2f} s"
                     + (f" ({len(rows) - len(settles)} never)" if len(settles) < len(rows) else ""),
                     "–" if not ages else f"{max(ages):.2f} s",
                     f"{sum(r['verdict'] == 'PASS' for r in rows)} of {len(rows)}"])
    return [f"Across the {len(summaries)} repetitions:", ""] + table(
        ["segment", "SRM / better static, median (min–max)", "SRM settle, median / max", "oldest acked write, max",
         "PASS"], body, "lrrrr") + [""]


def method_lines(mode, reps):
    s = mode.live_segment_s
    steps = " -> ".join(f"{seg.label}" for seg in SCHEDULE)
    return [
        f"Three variants, each on a fresh pair behind `tandem-linkemu` ({fio.human_bytes(mode.srm.image_bytes)} "
        "devices): protocol C, protocol A, and protocol C with `options { srm on; }` and every other SRM setting "
        f"at its shipped default (srm-interval 500 ms, srm-min-dwell 10 s, srm-max-lag-bytes "
        f"{LAG_BYTES_DEFAULT >> 20} MiB, srm-max-lag-time {LAG_TIME_DEFAULT_S:g} s, srm-latency-high 5 ms / "
        "-low 2 ms). One fio job per variant, 4 KiB randwrite QD32 through alice's NBD export, time-based for the "
        f"whole schedule ({len(SCHEDULE)} x {s} s, no warm-up), while the suite steps the running link through the "
        f"emulator's control socket every {s} s: {steps} (added round trip, half each way; the last segment cuts "
        f"the relay's rate to {DROP_RATE_LABEL} per direction, below what the job writes on an open link). fio logs IOPS "
        f"and mean completion latency averaged over {LOG_AVG_MS} ms; alice's Prometheus endpoint is polled every "
        f"{SAMPLE_INTERVAL_S:g} s for the protocol in force, the unreplicated backlog and the age of its oldest "
        "write (a peak between two polls can be missed). After each run the link is set back to 0 ms, unlimited, "
        "and the replicas are compared once alice has drained. "
        + ("One run per variant." if reps == 1 else f"{reps} repetitions, the variants alternating."),
        "",
        f"Target (issue 29): after each step, SRM's IOPS settles within {SETTLE_S:g} s to >= {KEEP_MIN:.0%} of the "
        "better static protocol for that segment, with no acknowledged write beyond the configured lag bound. "
        f"A segment PASSes when SRM's settle time is <= {SETTLE_S:g} s (it got there), its median IOPS from "
        f"{SETTLE_S:g} s after the step to the next step is >= {KEEP_MIN:.0%} of the better static protocol's median "
        "over the same span (it stayed there), and its acknowledged backlog stayed within both bounds. The three "
        "variants are three runs one after another, so the ratio also carries the run-to-run noise of this shared "
        "machine; as a yardstick, the table gives the share of the better static protocol's own 1 s windows (after "
        "the settle) whose mean is under 90% of its median. "
        "Segment 0 is the start of the run, not a step; it is judged the same way."] + (
        ["", "**--smoke: 1 s segments, the verdicts are not meaningful.**"] if mode.name == "smoke" else [])


def run(ctx):
    """Every variant (alternating over repetitions), the summary, the table and the plot."""
    reps = ctx.mode.reps
    rows, problems, checks, per_rep = [], [], [], []
    for rep in range(1, reps + 1):
        traces = {}
        for variant in VARIANTS:
            procs.log(f"{NAME}: {variant} (repetition {rep}/{reps})")
            trace, p, check = run_variant(ctx, variant, rep)
            problems += p
            checks += [(variant, rep, check)] if check else []
            if trace:
                traces[variant] = trace
                rows += rows_of(trace, variant, rep)
                procs.log(f"  {NAME} {variant}: {trace['fio']['iops']:.0f} IOPS over the schedule, "
                          f"steps at {', '.join(f'{s:.2f}' for s in trace['steps'])} s")
        per_rep.append(traces)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems, method=method_lines(ctx.mode, reps))
    o.status = "ok" if all(len(t) == len(VARIANTS) for t in per_rep) and not any(
        "FAILED" in p for p in problems) else ("failed" if not rows else "partial")
    smoke = ctx.mode.name == "smoke"
    for rep, traces in enumerate(per_rep, start=1):
        summary = segment_summary(traces, ctx.mode.live_segment_s, smoke)
        for r in summary:
            ratio = "–" if r["ratio"] is None else f"{r['ratio']:.2f}"
            procs.log(f"{NAME}: rep {rep} segment {r['label']}: SRM / {r['best_name']} {ratio}, "
                      f"settle {r['settle_s']} -> {r['verdict']}")
        o.lines += summary_lines(summary, rep, reps, ctx.mode.live_segment_s)
        o.lines += [f"Summary{f' (repetition {rep})' if reps > 1 else ''}: "
                    + _verdict_sentence(summary), ""]
    if reps > 1:
        o.lines += across_lines([segment_summary(t, ctx.mode.live_segment_s, smoke) for t in per_rep])
    o.lines += common.replica_lines(checks)
    if per_rep and per_rep[0]:
        common.try_plot(ctx, o, f"{NAME}.svg", "IOPS, completion latency, SRM's protocol and backlog over the schedule",
                        lambda: plot(per_rep[0], ctx.mode.live_segment_s))
    return o


def _verdict_sentence(summary):
    verdicts = [r["verdict"] for r in summary]
    passed = sum(v == "PASS" for v in verdicts)
    failed = [r["label"] for r in summary if r["verdict"] == "FAIL"]
    if not any(v in ("PASS", "FAIL") for v in verdicts):
        return f"no verdict ({verdicts[0] if verdicts else 'not measured'})."
    return (f"SRM meets the target in {passed} of {len(summary)} segments"
            + (f"; it misses it in: {'; '.join(failed)}." if failed else "."))


def plot(traces, segment_s):
    """The time-series figure of one repetition (see the module comment)."""
    iops = tuple((v, [(t, y) for t, y in traces[v]["iops"]]) for v in VARIANTS if v in traces)
    lat = tuple((v, fill_gaps([(t, y) for t, y in traces[v]["clat_us"] if y > 0], LOG_AVG_MS / 1000, None))
                for v in VARIANTS if v in traces)
    lat = tuple(s for s in lat if s[1])
    ys = [y for _, pts in lat for _, y in pts if y is not None]
    log = bool(ys) and max(ys) / max(min(ys), 1e-9) >= 100
    panels = [svg.Panel("IOPS", iops)]
    if lat:
        panels.append(svg.Panel("mean completion latency (µs)" + (", log" if log else ""), lat, log=log))
    srm = traces.get(SRM_VARIANT)
    if srm:
        codes = {"A": 0.0, "B": 0.5, "C": 1.0}
        proto = [(t, codes[m["protocol"]]) for t, m in srm["polls"] if m and m.get("protocol") in codes]
        names = tuple((v, p) for p, v in codes.items() if p != "B" or v in {y for _, y in proto})
        if proto:
            panels.append(svg.Panel("SRM: protocol in force", ((SRM_VARIANT, proto),), step=True, y_names=names))
    backlog = tuple((v, [(t, (m.get("unreplicated_bytes") or 0) / (1 << 20)) for t, m in traces[v]["polls"] if m])
                    for v in (SRM_VARIANT, "proto-A") if v in traces)
    backlog = tuple(s for s in backlog if s[1])
    if backlog:
        panels.append(svg.Panel("unreplicated backlog (MiB)", backlog,
                                reference=(LAG_BYTES_DEFAULT / (1 << 20), f"SRM bound {LAG_BYTES_DEFAULT >> 20} MiB")))
    markers = [(k * segment_s, seg.label) for k, seg in enumerate(SCHEDULE)]
    return svg.timeseries_chart("srm-live: static C, static A and SRM under one link schedule", "time since fio "
                                "started (s)", panels, markers)


def plot_files(_mode):
    """The SVG file run() writes."""
    return [f"{NAME}.svg"]

