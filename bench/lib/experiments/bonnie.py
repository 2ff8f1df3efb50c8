"""bonnie (seed 004): bonnie++ on ext4 over tandem's FUSE export (a direct-I/O loop device over
alice's `fuse-mount` file, a protocol C pair), through the tuning guide's steps, each applied on
top of the previous one on a fresh pair: baseline (DRBD's defaults), max-buffers and
max-epoch-size 8000, sndbuf-size 512k, al-extents 997, resync-rate 100M; and the same ext4 on a
local preallocated file, the baseline of the run.

bonnie++ runs with `-f` (no per-character tests), `-n 0` (no small-file tests) and `-b` (an
fsync after every write, so block writes measure the device path, not the page cache). Its
`+++++` (an operation too fast to time) is shown as "–".

Invariants: every step starts from fresh backing files; every mount and loop device is undone in
reverse order whatever happens (ext4's Teardown); the replicas are compared after each pair; a
missing bonnie++ skips the experiment with a note, never a number.
"""

import contextlib
import os
import shutil
import subprocess

from .. import cluster, fio, procs, svg
from ..cluster import Setup
from ..errors import BenchError, SetupError
from ..report import Outcome, fmt, table
from . import common
from .ext4 import Teardown, ext4_on, unmount

NAME = "bonnie"
TITLE = "bonnie++ on ext4 over tandem through the tuning guide's steps"
SEED = ("seed 004, \"Tuning DRBD on a Linux System: A Practical Guide for Engineers\" "
        "(`shared/seeds/004_6f30b477539c3d8c.txt`), its bonnie++ runs after each tuning step")
MIB = 1 << 20
LOCAL = "local-file"
DRBD_DEFAULT_NET = (("max-buffers", "2048"), ("max-epoch-size", "2048"))
#: (step name, net options, disk options), each on top of the previous.
STEPS = (
    ("baseline", DRBD_DEFAULT_NET, ()),
    ("buffers-8000", (("max-buffers", "8000"), ("max-epoch-size", "8000")), ()),
    ("sndbuf-512k", (("max-buffers", "8000"), ("max-epoch-size", "8000"), ("sndbuf-size", "512k")), ()),
    ("al-extents-997", (("max-buffers", "8000"), ("max-epoch-size", "8000"), ("sndbuf-size", "512k")),
     (("al-extents", "997"),)),
    ("resync-100M", (("max-buffers", "8000"), ("max-epoch-size", "8000"), ("sndbuf-size", "512k")),
     (("al-extents", "997"), ("resync-rate", "100M"))),
)
#: bonnie++ CSV (format 1.98) columns: (name, index, unit).
COLUMNS = (("block-write", 11, "KiB/s"), ("rewrite", 13, "KiB/s"), ("block-read", 17, "KiB/s"), ("seeks", 19, "/s"))
#: The block-write latency column (the slowest single write), which bonnie++ always reports, even
#: when the throughput was too fast to time (`+++++`, common on a fast machine at smoke sizes).
LATENCY = ("block-write-latency", 39, "µs")
BONNIE_DEADLINE_S = 900.0


def sizes(mode):
    """(bonnie++ -s MiB, -r MiB): the file twice the declared RAM, as bonnie++ requires."""
    file_mib = max(256, min(mode.image_bytes // MIB // 2, 1024))
    return file_mib, file_mib // 2


def parse_csv(line):
    """{column: value or None} from bonnie++'s CSV line; `+++++` and empty cells are None. The
    block-write latency (`134us`, `12ms`, `1s`) is in µs."""
    fields = line.strip().split(",")
    out = {}
    for name, index, _ in COLUMNS:
        raw = fields[index] if index < len(fields) else ""
        try:
            out[name] = float(raw)
        except ValueError:
            out[name] = None
    name, index, _ = LATENCY
    out[name] = parse_latency_us(fields[index] if index < len(fields) else "")
    return out


def parse_latency_us(raw):
    """bonnie++'s latency cell in µs (None when empty or malformed)."""
    for suffix, scale in (("us", 1.0), ("ms", 1e3), ("s", 1e6)):
        if raw.endswith(suffix):
            try:
                return float(raw[:-len(suffix)]) * scale
            except ValueError:
                return None
    return None


def run_bonnie(ctx, mnt, label, rep, file_mib, ram_mib):
    """bonnie++ in mnt; the row of its results."""
    log = os.path.join(ctx.workdir(NAME, "logs"), f"{label}-r{rep}.log")
    argv = ["bonnie++", "-d", mnt, "-u", "root", "-s", str(file_mib), "-r", str(ram_mib), "-n", "0", "-f", "-b",
            "-q", "-m", label]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=BONNIE_DEADLINE_S, check=False)
    with open(log, "w", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)
    lines = [line for line in proc.stdout.splitlines() if line.count(",") > 20]
    if proc.returncode != 0 or not lines:
        raise BenchError(f"bonnie++ exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    row = {"case": label, "workload": "bonnie++", "rep": rep, "file_mib": file_mib, **parse_csv(lines[-1])}
    procs.log(f"  {NAME} {label:15} " + " ".join(f"{n} {row[n]}" for n, _, _ in COLUMNS))
    return row


def run_step(ctx, label, net, disk, rep, file_mib, ram_mib, notes):
    """One step (or the local baseline when net is None) on fresh files; (row, replica check)."""
    wd = ctx.workdir(NAME, label, f"r{rep}")
    device_bytes = (file_mib * MIB) * 2
    fuse_dir = os.path.join(wd, "alice.fuse")
    check = None
    with contextlib.ExitStack() as stack:
        td = Teardown(stack, notes)
        if net is None:
            target = os.path.join(wd, "local.img")
            cluster.make_image(target, device_bytes)
            td.push("removing the image", os.remove, target)
            return run_bonnie(ctx, ext4_on(td, target, wd), label, rep, file_mib, ram_mib), None
        td.push(f"umount {fuse_dir} (left by a stopped node)", unmount, fuse_dir)
        setup = Setup("pair", size_bytes=device_bytes, label=label, net=net, disk=disk, fuse_mount=fuse_dir)
        c = stack.enter_context(cluster.Cluster(ctx.reaper, wd, setup))
        with contextlib.ExitStack() as inner:
            mnt = ext4_on(Teardown(inner, notes), os.path.join(fuse_dir, "r0"), wd)
            row = run_bonnie(ctx, mnt, label, rep, file_mib, ram_mib)
        check = c.check_replicas()
    notes += c.notes
    if check and check["result"] != "IDENTICAL":
        notes.append(f"replicas DIFFERENT: {check.get('first_difference')}")
    return row, check


def estimate_s(mode):
    """Rough: per repetition, six fresh set-ups with mkfs and a bonnie++ run of a few seconds per
    64 MiB, plus the replica checks."""
    file_mib, _ = sizes(mode)
    per_step = common.CASE_SETUP_S_FIXED + 3.0 + file_mib / 64 * 4.0
    return mode.reps * (len(STEPS) + 1) * per_step


def run(ctx):
    """The local baseline and every step; tables and a plot."""
    file_mib, ram_mib = sizes(ctx.mode)
    o = Outcome(NAME, TITLE, SEED, rows=[], problems=[])
    if not shutil.which("bonnie++"):
        o.status = "failed"
        o.problems.append("bonnie++ is not installed (`apt-get install bonnie++`); nothing measured")
        return o
    rows, checks = [], []
    for rep in range(1, ctx.mode.reps + 1):
        for label, net, disk in ((LOCAL, None, ()),) + STEPS:
            procs.log(f"{NAME}: {label} (repetition {rep}/{ctx.mode.reps})")
            notes = []
            try:
                row, check = run_step(ctx, label, net, disk, rep, file_mib, ram_mib, notes)
                rows.append(row)
                checks += [(label, rep, check)] if check else []
            except (BenchError, SetupError, OSError, subprocess.SubprocessError) as exc:
                notes.insert(0, f"FAILED: {str(exc).strip().splitlines()[0][:400]}")
            o.problems += [f"{label} (rep {rep}): {n}" for n in notes]
    o.rows = rows
    o.status = common.status_of(rows, o.problems, ctx.mode.reps * (len(STEPS) + 1))
    o.method = [f"bonnie++ `-s {file_mib} -r {ram_mib} -n 0 -f -b` in ext4 on a direct-I/O loop device over alice's "
                "FUSE export file (a fresh protocol C pair per step) and over a local preallocated file. The steps are "
                "seed 004's, each on top of the previous: " + "; ".join(
                    f"`{label}`: net {{ {' '.join(f'{k} {v};' for k, v in net)} }}"
                    + (f" disk {{ {' '.join(f'{k} {v};' for k, v in disk)} }}" if disk else "") for label, net, disk in STEPS)
                + ". The resync-rate step changes nothing bonnie++ measures (no resync runs); it is kept to follow the "
                "guide. Reads are mostly served by the page cache (bonnie++ prints `+++++`, shown as –)."]
    aggs = common.aggregate(rows, ["case"], [n for n, _, _ in COLUMNS] + [LATENCY[0]])
    order = [LOCAL] + [s[0] for s in STEPS]
    body = []
    for label in order:
        a = next((x for x in aggs if x["case"] == label), {})
        body.append([label] + [fmt(a.get(n)) for n, _, _ in COLUMNS])
    o.lines += table(["step"] + [f"{n} ({u})" for n, _, u in COLUMNS], body, "l" + "r" * len(COLUMNS)) + [""]
    local = next((x for x in aggs if x["case"] == LOCAL), {})
    body = [[label] + [fmt(100 * a["block-write"] / local["block-write"]) if a.get("block-write") and local.get("block-write") else "–"]
            for label in order[1:] for a in [next((x for x in aggs if x["case"] == label), {})]]
    o.lines += ["Block writes as % of the local file (same run):", ""] + table(["step", "% of local"], body, "lr") + [""]
    o.lines += ["Seed 004 reports its numbers per tuning step on its own hardware; compare the trend across steps "
                "here, not the absolute values.", ""]
    o.lines += common.replica_lines(checks)
    if any(a.get("block-write") is not None for a in aggs):
        common.try_plot(ctx, o, "bonnie.svg", "bonnie++ block writes per step",
                        lambda: svg.bar_chart("bonnie++ block write per tuning step", "KiB/s",
                                              *common.bars(aggs, "case", "case", "block-write")))
    else:
        # Every block write was too fast for bonnie++ to time (`+++++`): its latency is the
        # measurement left.
        o.lines += ["bonnie++ timed no block-write throughput in this run (`+++++`: too fast at this file size); "
                    "the plot shows the slowest single block write instead.", ""]
        common.try_plot(ctx, o, "bonnie.svg", "bonnie++ slowest block write per step (throughput too fast to time)",
                        lambda: svg.bar_chart("bonnie++ slowest block write per tuning step", "µs",
                                              *common.bars(aggs, "case", "case", LATENCY[0])))
    return o
