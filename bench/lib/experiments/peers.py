"""peers: where tandem stands. The standalone export, protocols A/B/C, QEMU's write-blocking
mirror (../shared/reference/qemu-peer, run unchanged) and nbdkit's file plugin (a plain C NBD
server, no replication), with the same three fio workloads, plus the issue-2 targets as ratios
within the same run. This is the original spine benchmark of bench/run.

Invariants: the workloads are exactly the QEMU script's (seq 1M QD1 over 1 GiB; 4k random QD1
and QD32, time-based, no warm-up), so its numbers and ours compare; every ratio is computed
within one repetition and then the median is taken; qemu-mirror is skipped, with a note, when
the script or qemu-storage-daemon is missing and in --smoke (the script always writes 1 GiB per
phase).
"""

import hashlib
import os
import shutil
import subprocess
import time

from .. import cluster, fio, procs, seeds, stats, svg
from ..cluster import Setup
from ..errors import BenchError
from ..fio import Job
from ..report import Outcome, cell, table
from . import common, cpu

NAME = "peers"
TITLE = "tandem against a standalone export, QEMU's write-blocking mirror and nbdkit"
SEED = seeds.cite("000", "the product idea, replicated writes at local-disk cost; targets from issue 2")
CONFIGS = ("standalone", "proto-A", "proto-B", "proto-C", "qemu-mirror", "nbdkit-file")
QEMU_PHASES = (("C-mirror-write-blocking", "qemu-mirror"), ("A-primary-alone", "qemu-alone"),
               ("B-secondary-direct", "qemu-secondary-direct"), ("D-mirror-background", "qemu-mirror-background"))
COLUMNS = (("seq1m", "mib_s", "seq 1M QD1 MiB/s", 0), ("rand4k-qd1", "iops", "4k QD1 IOPS", 0),
           ("rand4k-qd1", "clat_mean_us", "4k QD1 mean µs", 1), ("rand4k-qd32", "iops", "4k QD32 IOPS", 0),
           ("rand4k-qd32", "clat_p99_us", "4k QD32 p99 µs", 0))
TARGETS = (("proto-C seq 1M QD1 as % of standalone", "proto-C", "standalone", "seq1m", "mib_s", 0.80),
           ("proto-C 4k QD32 IOPS as % of standalone", "proto-C", "standalone", "rand4k-qd32", "iops", 0.70),
           ("proto-C ÷ qemu-mirror, seq 1M QD1", "proto-C", "qemu-mirror", "seq1m", "mib_s", 2.0),
           ("proto-C ÷ qemu-mirror, 4k QD32 IOPS", "proto-C", "qemu-mirror", "rand4k-qd32", "iops", 2.0))
METRICS = ("mib_s", "iops", "clat_mean_us", "clat_p99_us", "alice_cpu_pct", "bob_cpu_pct", "nbdkit_cpu_pct",
           "alice_cpu_us_per_io", "bob_cpu_us_per_io", "nbdkit_cpu_us_per_io", "machine_busy_pct")
QEMU_TIMEOUT_S = 1800
QEMU_ATTEMPTS = 3


def jobs(mode):
    """seq1m (the whole device once), rand4k-qd1 and rand4k-qd32 (time-based)."""
    size, t = mode.image_bytes, mode.peers_runtime_s
    return [Job("seq1m", "write", "1M", 1, size), Job("rand4k-qd1", "randwrite", "4k", 1, size, t),
            Job("rand4k-qd32", "randwrite", "4k", 32, size, t)]


def estimate_s(mode):
    """Rough duration in seconds: four tandem configurations, nbdkit, and the QEMU script's four
    phases (each writes 1 GiB and runs the two time-based jobs)."""
    js = jobs(mode)
    per_config = common.case_setup_s(mode) + sum(common.job_seconds(j) for j in js)
    qemu = 4 * (2 + 2 * mode.peers_runtime_s) + 10 if mode.qemu_mirror else 0
    return mode.reps * (5 * per_config + qemu)


def qemu_script(ctx):
    """Path of the QEMU reference script, or None with the reason it cannot run."""
    if not ctx.mode.qemu_mirror:
        return None, "qemu-mirror skipped in --smoke: the reference script always writes 1 GiB per phase"
    path = os.path.join(ctx.shared_dir or "", "reference", "qemu-peer", "qemu_mirror_bench.sh")
    if not ctx.shared_dir or not os.path.isfile(path):
        return None, f"qemu-mirror skipped: {path} not found (../shared absent)"
    if not shutil.which("qemu-storage-daemon"):
        return None, "qemu-mirror skipped: qemu-storage-daemon not installed (Debian: qemu-system-common)"
    return path, None


def run_nbdkit(ctx, js, rep):
    """nbdkit's file plugin on a preallocated image; returns (rows, problems)."""
    if not shutil.which("nbdkit"):
        return [], ["nbdkit-file skipped: nbdkit not installed (Debian package nbdkit)"]
    wd = ctx.workdir(NAME, "nbdkit", f"r{rep}")
    img, sock = os.path.join(wd, "disk.img"), os.path.join(wd, "nbd.sock")
    cluster.make_image(img, ctx.mode.image_bytes)
    proc = ctx.reaper.spawn(["nbdkit", "--foreground", "--unix", sock, "file", f"file={img}"],
                            os.path.join(wd, "nbdkit.log"))
    uri = f"nbd+unix:///?socket={sock}"
    rows = []
    try:
        procs.wait_for("nbdkit socket", lambda: os.path.exists(sock) and subprocess.run(
            ["nbdinfo", "--size", uri], capture_output=True).returncode == 0, 20, procs=[proc])
        for job in js:
            m = fio.run_job(ctx.reaper, job, uri, ctx.fio_json(NAME, "nbdkit-file", job.name, f"r{rep}"),
                            {"nbdkit": proc.pid})
            rows.append({"case": "nbdkit-file", "workload": job.name, "rep": rep, **common.flatten(m)})
        return rows, []
    except BenchError as exc:
        return rows, [f"nbdkit-file (rep {rep}): FAILED: {exc}"]
    finally:
        ctx.reaper.stop(proc)
        os.remove(img)


def _spawn_qemu(ctx, script, wd, env):
    log = os.path.join(wd, "script.log")
    notes = []
    for attempt in range(1, QEMU_ATTEMPTS + 1):
        if os.path.exists(log):
            os.remove(log)
        proc = ctx.reaper.spawn(["bash", script], log, env=env)
        try:
            rc = proc.wait(timeout=QEMU_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        ctx.reaper.stop(proc)
        text = procs.tail(log, 200)
        if rc == 0 or "failed to start" not in text or attempt == QEMU_ATTEMPTS:
            return rc, text, log, notes
        notes.append(f"qemu-mirror attempt {attempt}: a qemu-storage-daemon failed to start (ports 10809/10810 busy?)")
        time.sleep(20)
    return None, "", log, notes


def run_qemu(ctx, script, rep):
    """The QEMU script once; returns (rows for its four phases, problems, consistency lines)."""
    wd = ctx.workdir(NAME, "qemu", f"r{rep}")
    env = dict(os.environ, WORKDIR=wd, RUNTIME=str(ctx.mode.peers_runtime_s), IMG_SIZE="1G", PREALLOC="full",
               CACHE_DIRECT="off")
    procs.log(f"{NAME}: running {script} (phases A alone, B secondary direct, C write-blocking, D background)")
    rc, text, log, problems = _spawn_qemu(ctx, script, wd, env)
    shutil.copy(log, os.path.join(ctx.out_dir, "fio", NAME, f"qemu_mirror_bench-r{rep}.log"))
    if rc != 0:
        return [], problems + [f"qemu-mirror (rep {rep}): FAILED: script exited {rc}: {text.strip()[-300:]}"], []
    rows = []
    for prefix, name in QEMU_PHASES:
        for wl in ("seq1m", "rand4k-qd1", "rand4k-qd32"):
            src = os.path.join(wd, f"{prefix}-{wl}.json")
            if os.path.exists(src):
                dst = ctx.fio_json(NAME, name, wl, f"r{rep}")
                shutil.copy(src, dst)
                rows.append({"case": name, "workload": wl, "rep": rep, **common.flatten(fio.parse_file(dst))})
    checks = [f"qemu-mirror (rep {rep}): the script's own `cmp` {line.split('consistency check', 1)[-1].strip()}"
              for line in text.splitlines() if "consistency check" in line]
    sha = hashlib.sha256(open(script, "rb").read()).hexdigest()[:16]
    return rows, problems, checks + [f"(script sha256 {sha}…, RUNTIME={env['RUNTIME']}, PREALLOC=full, CACHE_DIRECT=off)"]


def measure_all(ctx):
    """Every configuration, round-robin over repetitions; returns (rows, problems, checks, notes)."""
    js = jobs(ctx.mode)
    script, why_not = qemu_script(ctx)
    rows, problems, checks, notes = [], [], [], [why_not] if why_not else []
    for rep in range(1, ctx.mode.reps + 1):
        for config in CONFIGS:
            procs.log(f"{NAME}: {config} (repetition {rep}/{ctx.mode.reps})")
            if config == "qemu-mirror":
                if script:
                    r, p, c = run_qemu(ctx, script, rep)
                    rows, problems, notes = rows + r, problems + p, notes + c
                continue
            if config == "nbdkit-file":
                r, p = run_nbdkit(ctx, js, rep)
                rows, problems = rows + r, problems + p
                continue
            kind = "standalone" if config == "standalone" else "pair"
            case = common.Case(config, Setup(kind, protocol=config[-1] if kind == "pair" else "C",
                                              size_bytes=ctx.mode.image_bytes))
            r, p, check = common.run_case(ctx, NAME, case, js, rep)
            rows, problems = rows + r, problems + p
            if check:
                checks.append((config, rep, check))
    return rows, problems, checks, notes


def _find(aggs, case, workload):
    return next((a for a in aggs if a["case"] == case and a["workload"] == workload), {})


def _main_table(aggs, cases, reps):
    body = [[c] + [cell(_find(aggs, c, wl), k, d, reps) for wl, k, _, d in COLUMNS] for c in cases]
    return table(["configuration"] + [h for _, _, h, _ in COLUMNS], body)


def _targets(rows, reps):
    body = []
    for label, num, den, wl, metric, target in TARGETS:
        rs = stats.paired_ratios(rows, metric, {"case": num, "workload": wl}, {"case": den, "workload": wl})
        v = stats.median(rs)
        pct = den == "standalone"
        show = (lambda x: f"{100 * x:.0f}%") if pct else (lambda x: f"{x:.2f}x")
        tgt = f"≥ {100 * target:.0f}%" if pct else f"≥ {target:.1f}x"
        met = "not measured" if v is None else ("yes" if v >= target else "**NO**")
        body.append([label, "–" if v is None else show(v), tgt, met] + ([", ".join(show(x) for x in rs)] if reps > 1 else []))
    heads = ["ratio", "value", "target", "met?"] + (["per repetition"] if reps > 1 else [])
    return table(heads, body, "lrrl" + ("l" if reps > 1 else ""))


def _relative(rows, cases):
    """Every configuration against standalone, median of per-repetition ratios (for the table and chart)."""
    out = []
    for c in cases:
        if c == "standalone":
            continue
        for wl, metric, head, _ in COLUMNS[:4]:
            rs = stats.paired_ratios(rows, metric, {"case": c, "workload": wl}, {"case": "standalone", "workload": wl})
            if rs:
                out.append({"case": c, "column": head, "pct": 100 * stats.median(rs), "pct_min": 100 * min(rs),
                            "pct_max": 100 * max(rs), "n": len(rs)})
    return out


def _cpu_table(aggs, cases):
    body = []
    for c in cases:
        for node in ("alice", "bob", "nbdkit"):
            cells = [f"{cell(_find(aggs, c, wl), f'{node}_cpu_pct', 0, 1)}% / {cell(_find(aggs, c, wl), f'{node}_cpu_us_per_io', 0, 1)}"
                     for wl, _, _, _ in (COLUMNS[0], COLUMNS[1], COLUMNS[3])]
            if any(not x.startswith("–") for x in cells):
                busy = [cell(_find(aggs, c, wl), "machine_busy_pct", 0, 1) + "%" for wl, _, _, _ in (COLUMNS[0], COLUMNS[1], COLUMNS[3])]
                body.append([c, node] + cells + [" / ".join(busy)])
    return table(["configuration", "process", "seq 1M: % / µs per I/O", "4k QD1: % / µs per I/O",
                  "4k QD32: % / µs per I/O", "machine busy (seq / QD1 / QD32)"], body, "llrrrr")


def add_summed_cpu(rows):
    """Adds tandem_cpu_us_per_io (alice's plus bob's, bob absent counting 0) to the rows of tandem
    cases; other rows are left as they are."""
    for r in rows:
        if r.get("case") in CONFIGS[:4] and r.get("alice_cpu_us_per_io") is not None:
            r["tandem_cpu_us_per_io"] = r["alice_cpu_us_per_io"] + (r.get("bob_cpu_us_per_io") or 0)
    return rows


def _summed_cpu_table(rows, present):
    body = [[c] + [cpu.show(cpu.compare(rows, c, wl, "tandem_cpu_us_per_io")) for wl, _, _, _ in
                   (COLUMNS[0], COLUMNS[1], COLUMNS[3])] for c in present if c in CONFIGS[1:4]]
    return table(["configuration", "seq 1M QD1 (per MiB)", "4k QD1 (per write)", "4k QD32 (per write)"], body)


def run(ctx):
    """The spine comparison with its tables, target ratios and a chart relative to standalone."""
    rows, problems, checks, notes = measure_all(ctx)
    add_summed_cpu(rows)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems + [n for n in notes if "skipped" in n])
    present = [c for c in CONFIGS if any(r["case"] == c for r in rows)]
    context = [name for _, name in QEMU_PHASES[1:] if any(r["case"] == name for r in rows)]
    expected = 3 * ctx.mode.reps * (len(CONFIGS) - (0 if qemu_script(ctx)[0] else 1))
    o.status = common.status_of(rows, problems, expected)
    js = jobs(ctx.mode)
    o.method = ["Every configuration on fresh, preallocated images, measured with fio's nbd engine exactly as "
                f"the QEMU reference script measures itself: {'; '.join(j.describe() for j in js)}. "
                "tandem pairs use `net { protocol X; connect-int 1; max-buffers 8000; max-epoch-size 8000; }` on "
                "loopback; `standalone` is alice alone after `tandem disconnect`. `qemu-mirror` is phase C of "
                "`shared/reference/qemu-peer/qemu_mirror_bench.sh` (blockdev-mirror copy-mode=write-blocking), "
                "`nbdkit-file` is `nbdkit file` (no replication). Latencies are fio completion latency."]
    aggs = common.aggregate(rows, ["case", "workload"], METRICS)
    reps = ctx.mode.reps
    o.lines += _main_table(aggs, present, reps)
    if context:
        o.lines += ["", "Context from the same QEMU script run (no targets): phase A (`qemu-alone`, no mirror job), "
                    "phase B (`qemu-secondary-direct`), phase D (`qemu-mirror-background`, the asynchronous mirror).",
                    ""] + _main_table(aggs, context, reps)
    o.lines += ["", "Targets (issue 2), each ratio computed within a repetition, median over repetitions:", ""]
    o.lines += _targets(rows, reps)
    rel = _relative(rows, present + context)
    body = [[c] + [next((f"{r['pct']:.0f}%" for r in rel if r["case"] == c and r["column"] == h), "–")
                   for _, _, h, _ in COLUMNS[:4]] for c in present[1:] + context]
    o.lines += ["", "Against `standalone` (same run; for the QD1 latency column lower is better):", ""]
    o.lines += table(["configuration"] + [h for _, _, h, _ in COLUMNS[:4]], body)
    o.lines += ["", "Server CPU per workload (% of one core / CPU µs per I/O, all threads, from /proc) and whole-"
                "machine busy %:", ""] + _cpu_table(aggs, present) + [""]
    o.lines += ["Both tandem nodes' CPU per request summed, as a multiple of standalone's (issue 28's yardstick; "
                "median and min–max of the per-repetition ratios; the `cpu` experiment has the split by thread):",
                ""] + _summed_cpu_table(rows, present) + [""]
    o.lines += common.replica_lines(checks) + [f"- {n}" for n in notes if "skipped" not in n]
    common.try_plot(ctx, o, "peers.svg", "every configuration as % of standalone",
                    lambda: svg.bar_chart("peers: throughput as % of the standalone export (same run)",
                                          "% of standalone",
                                          *common.bars([r for r in rel if "µs" not in r["column"]], "column", "case", "pct"),
                                          reference=(100, "standalone = 100%")))
    return o
