"""resync: how fast a bitmap resync runs after a disconnect (issue 3), against what the machine
can do (min of the disk's sequential write speed and the loopback link's TCP throughput), and
what it costs the application writing during it.

Per repetition: the two baselines (fio 1 MiB sequential writes on a preallocated file of the
dirty size in the same temporary directory, flushed at the end; a Python TCP sender/receiver
pair on 127.0.0.1), then for each resync configuration a fresh pair: `tandem disconnect r0` on
alice, fio writes the dirty region through alice's export, `tandem connect r0`, and alice's
`status --json` is polled every 50 ms until the peer device is Established with
out_of_sync_kib 0. With DRBD's defaults the same pair then runs fio randwrite 4k QD8 with no
resync, and again during a second identical resync.

Invariants: every number compared comes from the same repetition (the reference is that
repetition's min(disk, link)); a resync that misses its deadline is reported with the rate of
what it did move and a problem, never as finished; each configuration gets fresh nodes and
backing files, and a replica check (`cmp`) at the end.
"""

import os
import socket
import threading
import time
from dataclasses import dataclass

from .. import cluster, fio, procs, seeds, stats, svg
from ..cluster import Setup
from ..errors import BenchError, SetupError
from ..fio import Job
from ..report import Outcome, cell, fmt, table
from . import common

NAME = "resync"
TITLE = "bitmap resync after a disconnect: rate against min(disk, link), application I/O during it"
SEED = seeds.cite("004", "adjusting the resync rate (syncer-rate); target from issue 3")
MIB = 1 << 20
KIB = 1 << 10
TARGET_RATIO = 0.8
POLL_S = 0.05
STATE_DEADLINE_S = 30.0
LINK_CHUNK_BYTES = 1 << 20
LINK_JOIN_S = 30.0
RESYNC_MIB_PER_S_GUESS = 100.0
APP_START_S = 0.5
DEFAULTS = "drbd-defaults"
FIXED = "fixed-4G"
# (label, `disk { }` options): DRBD's defaults (c-plan-ahead 2 s, c-fill-target 100 sectors =
# 50 KiB in flight, c-max-rate 100 MiB/s, c-min-rate 250 KiB/s), and a fixed rate so high that
# only max-buffers bounds the resync.
CONFIGS = ((DEFAULTS, ()), (FIXED, (("c-plan-ahead", "0"), ("resync-rate", "4G"))))
APP_WORKLOAD = "randwrite-4k-qd8"


@dataclass(frozen=True)
class Sizes:
    """What one mode measures: bytes made dirty, seconds of the link test, the deadline of one
    resync, and the configurations (smoke runs only DRBD's defaults, to stay in its budget)."""

    dirty_bytes: int
    link_s: float
    deadline_s: float
    configs: tuple


def sizes(mode):
    """The Sizes of a run mode: 1 GiB dirty by default and in --full, 256 MiB in --quick, 8 MiB
    in --smoke (never more than the device)."""
    table_ = {"smoke": (8 * MIB, 1.0, 60.0, CONFIGS[:1]), "quick": (256 * MIB, 2.0, 120.0, CONFIGS)}
    dirty, link_s, deadline_s, configs = table_.get(mode.name, (1 << 30, 3.0, 300.0, CONFIGS))
    return Sizes(min(dirty, mode.image_bytes), link_s, deadline_s, configs)


def options_text(options):
    """'c-plan-ahead 0; resync-rate 4G' or 'defaults' for the report and CSV."""
    return "; ".join(f"{k} {v}" for k, v in options) or "defaults"


def peer_device(status):
    """The first peer device of alice's first connection in a status dict, or {}."""
    conns = (status or {}).get("connections") or [{}]
    devices = conns[0].get("peer_devices") or [{}]
    return devices[0]


def connection_state(status):
    """alice's first connection state ('Connected', 'StandAlone', ...) or None."""
    conns = (status or {}).get("connections") or [{}]
    return conns[0].get("connection")


def out_of_sync_kib(status):
    """KiB alice's bitmap still marks for the peer, or None if the status lacks it."""
    return peer_device(status).get("out_of_sync_kib")


def sync_started(status):
    """True once the resync runs or already finished (the connection is back)."""
    return connection_state(status) == "Connected" and peer_device(status).get("replication") in (
        "SyncSource", "Established")


def sync_done(status):
    """True when alice is Connected and the peer device Established with nothing out of sync."""
    device = peer_device(status)
    return (connection_state(status) == "Connected" and device.get("replication") == "Established"
            and device.get("out_of_sync_kib") == 0)


def rate_mib_s(moved_kib, seconds):
    """MiB/s of moved_kib over seconds, or None without a positive duration."""
    if moved_kib is None or not seconds or seconds <= 0:
        return None
    return moved_kib / KIB / seconds


def reference(rows, rep):
    """min(disk, link) MiB/s of repetition rep from its baseline rows, or None if one is missing."""
    values = [r.get("mib_s") for r in rows if r.get("case") == "baseline" and r.get("rep") == rep]
    values = [v for v in values if v is not None]
    return min(values) if len(values) == 2 else None


def with_ratios(rows):
    """rows with reference_mib_s and pct_of_reference set on every resync row (same repetition)."""
    out = []
    for row in rows:
        row = dict(row)
        if row.get("workload", "").startswith("resync"):
            ref = reference(rows, row["rep"])
            row["reference_mib_s"] = ref
            ratio = stats.ratio(row.get("mib_s"), ref)
            row["pct_of_reference"] = None if ratio is None else 100 * ratio
        out.append(row)
    return out


def target_rows(rows, labels):
    """[label, value, target, met?] per configuration: the median over repetitions of the resync
    rate as a share of that repetition's min(disk, link)."""
    out = []
    for label in labels:
        pcts = [r.get("pct_of_reference") for r in rows if r.get("case") == label and r.get("workload") == "resync"]
        v = stats.median(pcts)
        met = "not measured" if v is None else ("yes" if v >= 100 * TARGET_RATIO else "**NO**")
        out.append([f"{label}: resync / min(disk, link)", "–" if v is None else f"{v:.0f}%",
                    f"≥ {100 * TARGET_RATIO:.0f}%", met])
    return out


# ----- measurements ---------------------------------------------------------------------------

def measure_disk(ctx, rep, sz):
    """The baseline row of the disk: fio 1 MiB sequential writes over a preallocated file of the
    dirty size, flushed at the end (end_fsync); the rate counts the flush (wall time of fio)."""
    wd = ctx.workdir(NAME, "disk", f"r{rep}")
    path = os.path.join(wd, "disk.img")
    cluster.make_image(path, sz.dirty_bytes)
    out = ctx.fio_json(NAME, "baseline", "disk-seq-1M", f"r{rep}")
    argv = ["fio", "--name=disk-seq-1M", f"--filename={path}", "--rw=write", "--bs=1M",
            f"--size={sz.dirty_bytes}", "--ioengine=psync", "--end_fsync=1", "--output-format=json",
            f"--output={out}"]
    t0 = time.monotonic()
    proc = ctx.reaper.spawn(argv, out[:-5] + ".log")
    rc = proc.wait()
    ctx.reaper.stop(proc)
    wall_s = time.monotonic() - t0
    os.remove(path)
    if rc != 0:
        raise BenchError(f"fio disk baseline: exit {rc}: {procs.tail(out[:-5] + '.log', 10).strip()}")
    m = fio.parse_file(out)
    return {"case": "baseline", "workload": "disk-seq-1M", "rep": rep, "mib_s": sz.dirty_bytes / MIB / wall_s,
            "seconds": wall_s, "fio_mib_s": m["mib_s"]}


def measure_link(rep, seconds):
    """The baseline row of the link: one TCP stream through 127.0.0.1 for `seconds`, 1 MiB
    sends, counted at the receiver."""
    received = [0]
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(LINK_JOIN_S)
        port = server.getsockname()[1]

        def receive():
            conn, _ = server.accept()
            with conn:
                conn.settimeout(LINK_JOIN_S)
                view = memoryview(bytearray(LINK_CHUNK_BYTES))
                while (n := conn.recv_into(view)) > 0:
                    received[0] += n

        thread = threading.Thread(target=receive, daemon=True)
        thread.start()
        payload = bytes(LINK_CHUNK_BYTES)
        with socket.create_connection(("127.0.0.1", port), timeout=LINK_JOIN_S) as sender:
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                sender.sendall(payload)
            sender.shutdown(socket.SHUT_WR)
            thread.join(LINK_JOIN_S)
            wall_s = time.monotonic() - t0
    if thread.is_alive() or not received[0]:
        raise BenchError("link baseline: the receiver did not finish")
    return {"case": "baseline", "workload": "link-tcp", "rep": rep, "mib_s": received[0] / MIB / wall_s,
            "seconds": wall_s}


def wait_state(run_dir, what, predicate):
    """Polls alice's status every POLL_S until predicate(status) holds; returns that status."""
    def probe():
        status = cluster.tandem_status(run_dir)
        return status if predicate(status) else None
    return procs.wait_for(what, probe, STATE_DEADLINE_S, interval_s=POLL_S)


def wait_resync(run_dir, t0, deadline_s):
    """Polls every POLL_S until sync_done or the deadline. Returns seconds (since t0),
    connect_s (until the resync was first seen running, or None), remaining_kib, finished."""
    remaining, connect_s = None, None
    while True:
        st = cluster.tandem_status(run_dir)
        now = time.monotonic()
        remaining = out_of_sync_kib(st) if st else remaining
        if connect_s is None and sync_started(st):
            connect_s = now - t0
        if sync_done(st):
            return {"seconds": now - t0, "connect_s": connect_s, "remaining_kib": 0, "finished": True}
        if now - t0 > deadline_s:
            return {"seconds": now - t0, "connect_s": connect_s, "remaining_kib": remaining, "finished": False}
        time.sleep(POLL_S)


def slope_mib_s(samples, t_from, t_to):
    """The resync rate from (time, out_of_sync_kib) samples: KiB cleared between the first sample
    at or after t_from and the last at or before t_to, per second; None with fewer than two, or
    if nothing was left to resync at the first (it finished before the window)."""
    window = [(t, kib) for t, kib in samples if t_from <= t <= t_to]
    if len(window) < 2 or window[-1][0] <= window[0][0] or window[0][1] == 0:
        return None
    return rate_mib_s(window[0][1] - window[-1][1], window[-1][0] - window[0][0])


class Sampler:
    """Samples alice's out_of_sync_kib every POLL_S on a thread while a workload runs (it runs
    in the runs without a resync too, so both pay for the status calls)."""

    def __init__(self, run_dir):
        self.run_dir, self.samples = run_dir, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_exc):
        self._stop.set()
        self._thread.join(STATE_DEADLINE_S)
        return False

    def _run(self):
        while not self._stop.is_set():
            kib = out_of_sync_kib(cluster.tandem_status(self.run_dir))
            if kib is not None:
                self.samples.append((time.monotonic(), kib))
            self._stop.wait(POLL_S)


def dirty(ctx, c, label, rep, tag):
    """Disconnects alice, writes the dirty region through her export; returns the KiB marked."""
    alice = c.dirs["alice"]
    cluster.tandem_admin(alice, "disconnect", "r0")
    wait_state(alice, "alice StandAlone", lambda s: connection_state(s) == "StandAlone")
    job = Job(f"dirty-{tag}", "write", "1M", 8, sizes(ctx.mode).dirty_bytes)
    fio.run_job(ctx.reaper, job, c.uri, ctx.fio_json(NAME, label, job.name, f"r{rep}"), c.watch)
    kib = out_of_sync_kib(cluster.tandem_status(alice))
    if not kib:
        raise SetupError(f"{label}: nothing out of sync after writing while disconnected")
    return kib


def resync_row(ctx, c, label, options, rep):
    """One resync measured from `tandem connect` to Established with nothing out of sync."""
    sz = sizes(ctx.mode)
    dirty_kib = dirty(ctx, c, label, rep, "resync")
    t0 = time.monotonic()
    cluster.tandem_admin(c.dirs["alice"], "connect", "r0")
    row = {"case": label, "workload": "resync", "rep": rep, "options": options_text(options),
           **resync_metrics(dirty_kib, wait_resync(c.dirs["alice"], t0, sz.deadline_s))}
    procs.log(f"  {NAME} {label:14} resync {dirty_kib / KIB:8.1f} MiB in {row['seconds']:6.2f} s"
              f" = {row['mib_s'] or 0:8.1f} MiB/s{'' if row['finished'] else ' (DEADLINE)'}")
    return row


def resync_metrics(dirty_kib, timing):
    """The columns of a resync row from wait_resync's result: dirty MiB, seconds, MiB/s (what
    moved over the whole time), and the rate once running (time to the first poll that saw it
    running left out: connection set-up, handshake and bitmap exchange)."""
    moved = dirty_kib - (timing["remaining_kib"] or 0)
    connect_s = timing["connect_s"]
    running_s = None if connect_s is None else timing["seconds"] - connect_s
    return {"dirty_mib": dirty_kib / KIB, "seconds": timing["seconds"], "mib_s": rate_mib_s(moved, timing["seconds"]),
            "connect_s": connect_s, "running_mib_s": rate_mib_s(moved, running_s), "finished": timing["finished"]}


def app_rows(ctx, c, label, rep):
    """fio randwrite 4k QD8 on the pair in sync, then the same during a second identical resync:
    the application rows and the resync row (its rate during the fio run, and overall)."""
    m, sz = ctx.mode, sizes(ctx.mode)
    job = Job(APP_WORKLOAD, "randwrite", "4k", 8, m.image_bytes, max(m.runtime_s, 1), m.ramp_s)
    alice = c.dirs["alice"]
    with Sampler(alice):
        quiet = fio.run_job(ctx.reaper, job, c.uri, ctx.fio_json(NAME, label, job.name, "no-resync", f"r{rep}"),
                            c.watch)
    rows = [{"case": label, "workload": APP_WORKLOAD, "resync": "none", "rep": rep, **common.flatten(quiet)}]
    dirty_kib = dirty(ctx, c, label, rep, "under-app")
    t0 = time.monotonic()
    cluster.tandem_admin(alice, "connect", "r0")
    wait_state(alice, "the resync to start", sync_started)
    t_app = time.monotonic()
    with Sampler(alice) as sampler:
        busy = fio.run_job(ctx.reaper, job, c.uri, ctx.fio_json(NAME, label, job.name, "resync", f"r{rep}"), c.watch)
    app_s = time.monotonic() - t_app
    # fio's start-up (and warm-up) left out: the resync runs at full speed until the first write.
    during = slope_mib_s(sampler.samples, t_app + m.ramp_s + APP_START_S, t_app + app_s)
    rows.append({"case": label, "workload": APP_WORKLOAD, "resync": "running", "rep": rep,
                 "resync_mib_s_during": during, **common.flatten(busy)})
    timing = wait_resync(alice, t0, sz.deadline_s + app_s)
    timing["connect_s"] = t_app - t0  # seen running before fio started, not after it ended
    rows.append({"case": label, "workload": "resync+randwrite", "rep": rep, **resync_metrics(dirty_kib, timing),
                 "resync_mib_s_during": during, "app_seconds": app_s})
    procs.log(f"  {NAME} {label:14} randwrite {quiet['iops']:8.0f} IOPS alone, {busy['iops']:8.0f} during the "
              f"resync (resync {during or 0:.2f} MiB/s meanwhile)")
    return rows


def run_config(ctx, label, options, rep):
    """A fresh pair with `options`: the resync, and with DRBD's defaults the application runs;
    returns (rows, problems, replica check or None)."""
    rows, problems, check = [], [], None
    setup = Setup("pair", size_bytes=ctx.mode.image_bytes, disk=options, label=label)
    try:
        with cluster.Cluster(ctx.reaper, ctx.workdir(NAME, label, f"r{rep}"), setup) as c:
            rows.append(resync_row(ctx, c, label, options, rep))
            if label == DEFAULTS:
                rows += app_rows(ctx, c, label, rep)
            check = c.check_replicas()
            if check["result"] != "IDENTICAL":
                problems.append(f"{label} (rep {rep}): replicas DIFFERENT: {check.get('first_difference')}")
        problems += [f"{label} (rep {rep}): {n}" for n in c.notes]
    except (BenchError, OSError) as exc:
        problems.append(f"{label} (rep {rep}): FAILED: {str(exc).strip().splitlines()[0][:400]}")
        procs.log(f"{NAME} {label}: FAILED: {exc}")
    problems += [f"{label} (rep {rep}): the resync did not finish within the deadline ({r['seconds']:.0f} s); "
                 "its rate counts what it moved" for r in rows if r.get("finished") is False]
    return rows, problems, check


def measure(ctx):
    """Every repetition: the baselines, then each configuration. Returns (rows, problems, checks)."""
    rows, problems, checks = [], [], []
    sz = sizes(ctx.mode)
    for rep in range(1, ctx.mode.reps + 1):
        procs.log(f"{NAME}: baselines (repetition {rep}/{ctx.mode.reps})")
        try:
            rows.append(measure_disk(ctx, rep, sz))
            rows.append(measure_link(rep, sz.link_s))
        except (BenchError, OSError) as exc:
            problems.append(f"baseline (rep {rep}): FAILED: {exc}")
        for label, options in sz.configs:
            procs.log(f"{NAME}: {label} (repetition {rep}/{ctx.mode.reps})")
            r, p, check = run_config(ctx, label, options, rep)
            rows, problems = rows + r, problems + p
            if check:
                checks.append((label, rep, check))
    return with_ratios(rows), problems, checks


# ----- report -----------------------------------------------------------------------------------

def estimate_s(mode):
    """Rough duration: baselines, then per configuration a fresh pair, the dirty write and the
    resync (at a guessed 100 MiB/s), the replica check; the application runs with the defaults."""
    sz = sizes(mode)
    dirty_s = common.job_seconds(Job("dirty", "write", "1M", 8, sz.dirty_bytes))
    resync_s = sz.dirty_bytes / MIB / RESYNC_MIB_PER_S_GUESS
    check_s = 2 * mode.image_bytes / (common.SEQ_MIB_PER_S * MIB)
    app_s = common.job_seconds(Job(APP_WORKLOAD, "randwrite", "4k", 8, mode.image_bytes, max(mode.runtime_s, 1),
                                   mode.ramp_s))
    per_config = common.case_setup_s(mode) + dirty_s + resync_s + check_s
    per_rep = dirty_s + sz.link_s + len(sz.configs) * per_config + 2 * app_s + dirty_s + resync_s
    return mode.reps * per_rep


def _tables(rows, reps, labels):
    aggs = common.aggregate(rows, ["case", "workload"], ["mib_s", "seconds", "dirty_mib", "pct_of_reference",
                                                         "connect_s", "running_mib_s"])
    base = [a for a in aggs if a["case"] == "baseline"]
    lines = ["Baselines (same repetition):", ""]
    lines += table(["baseline", "MiB/s", "seconds"],
                   [[a["workload"], cell(a, "mib_s", 0, reps), cell(a, "seconds", 2, reps)] for a in base])
    body = [[a["case"], a["workload"], cell(a, "dirty_mib", 0, reps), cell(a, "seconds", 2, reps),
             cell(a, "mib_s", 1, reps), cell(a, "pct_of_reference", 0, reps), cell(a, "connect_s", 2, reps),
             cell(a, "running_mib_s", 1, reps)]
            for a in aggs if a["case"] in labels and a["workload"] in ("resync", "resync+randwrite")]
    lines += ["", "Resyncs (time from `tandem connect` to Established with out_of_sync_kib 0; the last two "
              "columns split off the time until a poll first saw the resync running):", ""]
    lines += table(["configuration", "run", "dirty MiB", "seconds", "MiB/s", "% of min(disk, link)",
                    "s to running", "MiB/s once running"], body)
    return lines


def _app_lines(rows, reps):
    aggs = common.aggregate([r for r in rows if r.get("workload") == APP_WORKLOAD], ["resync"],
                            ["iops", "clat_mean_us", "clat_p99_us", "resync_mib_s_during"])
    if not aggs:
        return []
    ratios = stats.paired_ratios(rows, "iops", {"workload": APP_WORKLOAD, "resync": "running"},
                                 {"workload": APP_WORKLOAD, "resync": "none"})
    body = [[a["resync"], cell(a, "iops", 0, reps), cell(a, "clat_mean_us", 0, reps), cell(a, "clat_p99_us", 0, reps),
             cell(a, "resync_mib_s_during", 2, reps)] for a in aggs]
    ratio = stats.median(ratios)
    return ["", f"Application I/O ({DEFAULTS}: fio randwrite 4k QD8 on alice, without and during a resync; "
            f"the resync's rate while fio ran, from out_of_sync_kib sampled every {POLL_S * 1000:.0f} ms, fio's "
            f"first {APP_START_S:g} s and warm-up left out):", ""] + table(
        ["resync", "IOPS", "clat mean µs", "clat p99 µs", "resync MiB/s meanwhile"], body) + [
        "", f"IOPS during the resync: {fmt(None if ratio is None else 100 * ratio)}% of IOPS without one."]


def run(ctx):
    """Baselines, resyncs per configuration, application I/O during a resync; tables, target, chart."""
    sz = sizes(ctx.mode)
    rows, problems, checks = measure(ctx)
    labels = [label for label, _ in sz.configs]
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, ctx.mode.reps * (2 + len(labels) + 3))
    o.method = [
        f"Per repetition: the disk baseline (fio 1 MiB sequential writes, psync, over a preallocated "
        f"{fio.human_bytes(sz.dirty_bytes)} file in the same temporary directory, `end_fsync=1`; MiB/s = size / "
        f"wall time including the flush) and the link baseline (one Python TCP stream through 127.0.0.1 for "
        f"{sz.link_s:g} s); their minimum is the reference. Then, per configuration, a fresh pair "
        f"(`net {{ protocol C; max-buffers 8000; max-epoch-size 8000; }}`, {fio.human_bytes(ctx.mode.image_bytes)} "
        f"devices): `tandem disconnect r0` on alice, fio writes {fio.human_bytes(sz.dirty_bytes)} (1 MiB QD8) "
        "through her export, `tandem connect r0`, and alice's `status --json` is polled every 50 ms until the "
        "peer device is Established with out_of_sync_kib 0. Rate = dirty bytes / that time (connection set-up "
        "and bitmap exchange included).",
        "",
        "Configurations (`disk { }` options): " + "; ".join(f"`{label}`: {options_text(opts)}"
                                                           for label, opts in sz.configs)
        + ". With DRBD's defaults the same pair then runs fio randwrite 4k QD8 (whole device, "
        f"{max(ctx.mode.runtime_s, 1)} s) in sync, and again during a second identical resync started just before "
        f"it; c-min-rate (250 KiB/s by default) is the resync's budget while application writes arrive."
        + (" --smoke runs only DRBD's defaults." if len(sz.configs) < len(CONFIGS) else "")]
    o.lines += _tables(rows, ctx.mode.reps, labels)
    o.lines += _app_lines(rows, ctx.mode.reps)
    o.lines += ["", "Target (issue 3), each ratio within a repetition, median over repetitions:", ""]
    o.lines += table(["ratio", "value", "target", "met?"], target_rows(rows, labels), "lrrl")
    o.lines += [""] + common.replica_lines(checks)
    _plot(ctx, o, rows, labels)
    return o


def _plot(ctx, o, rows, labels):
    under_app = "defaults + app"  # short: x labels share about 100 px
    groups = ["disk-seq-1M", "link-tcp"] + labels + (
        [under_app] if any(r.get("workload") == "resync+randwrite" for r in rows) else [])

    def value(group):
        if group in ("disk-seq-1M", "link-tcp"):
            pick = [r.get("mib_s") for r in rows if r.get("case") == "baseline" and r.get("workload") == group]
        elif group == under_app:
            pick = [r.get("mib_s") for r in rows if r.get("workload") == "resync+randwrite"]
        else:
            pick = [r.get("mib_s") for r in rows if r.get("case") == group and r.get("workload") == "resync"]
        return stats.median(pick), stats.spread(pick)

    vals = [value(g) for g in groups]
    whiskers = [s if ctx.mode.reps > 1 and s[0] is not None else None for _, s in vals]
    refs = [reference(rows, rep) for rep in range(1, ctx.mode.reps + 1)]
    ref = stats.median(refs)
    common.try_plot(ctx, o, "resync.svg", "resync rate against the disk and link baselines",
                    lambda: svg.bar_chart("resync: MiB/s (bars) against 80% of min(disk, link) (line)", "MiB/s",
                                          groups, [("MiB/s", [v for v, _ in vals], whiskers)],
                                          reference=None if ref is None else (TARGET_RATIO * ref,
                                                                              "80% of min(disk, link)")))
