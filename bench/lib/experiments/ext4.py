"""ext4 (issue 4, seed 004): a real filesystem on tandem. ext4 on a direct-I/O loop device over
three files, in the same run: tandem's FUSE export (`fuse-mount DIR;`, the file DIR/r0), the
NBD export through libnbd's nbdfuse (the file DIR/nbd), and the local backing file alone (the
baseline). fio runs inside the mounted filesystem: 1 MiB sequential writes at QD1 and 4 KiB
random writes at QD16, direct=1, libaio, on one file of the mode's image size (the device is a
quarter larger, for ext4's own blocks). A fourth row, `tandem-nbd`, runs the same jobs with
fio's nbd engine straight on alice's NBD export (no filesystem, no loop device, no FUSE), on the
`tandem-fuse` pair just before its ext4 is made (same pair, same files, same repetition): the ext4
variants are also given as a percentage of it, which is what the filesystem and the FUSE/loop
path cost on top of the replicated device.

Per repetition and variant: fresh backing files (a protocol C pair for the two tandem variants,
alice Primary), `losetup --direct-io=on --find --show FILE`, `mkfs.ext4` (lazy initialisation
off, so no background zeroing competes with fio), `mount`, the fio jobs, then unmount, detach,
and for the pair a replica check (`cmp` of both backing files).

Invariants: whatever happens (a failed tool, an exception, a signal), every mount and loop
device a variant made is undone before its nodes stop, in reverse order of creation (ext4, the
loop device, nbdfuse's mount, the nodes, then a lazy unmount of a FUSE mount a stopped node
left behind); a variant whose tool is missing is skipped with a note, never faked; every number
compared comes from the same repetition.
"""

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass

from .. import cluster, fio, procs, stats, svg
from ..cluster import Setup
from ..errors import BenchError, SetupError
from ..fio import Job
from ..report import Outcome, cell, fmt, table
from . import common

NAME = "ext4"
TITLE = ("ext4 over the FUSE export and a loop device, over the NBD export (nbdfuse), and on the local file; "
         "fio on the raw NBD export")
SEED = "seed 004, \"Tuning DRBD on a Linux System: A Practical Guide for Engineers\" " \
       "(`shared/seeds/004_6f30b477539c3d8c.txt`), a filesystem on the replicated device; issue 4's FUSE export"
MIB = 1 << 20
LOCAL, FUSE, NBD, RAW = "local-file", "tandem-fuse", "tandem-nbdfuse", "tandem-nbd"
#: The variants, each on its own files; `tandem-nbd`'s rows come from the `tandem-fuse` pair.
VARIANTS = (LOCAL, FUSE, NBD)
#: The variants that run on a protocol C pair (each is followed by a replica check).
PAIRS = (FUSE, NBD)
#: Row order in the table and the plot.
ROWS = (LOCAL, RAW, FUSE, NBD)
TOOL_DEADLINE_S = 300.0
MOUNT_DEADLINE_S = 20.0
MKFS_S_FIXED = 0.5
MKFS_S_PER_GIB = 2.0
TEARDOWN_S_GUESS = 1.0
MKFS_ARGS = ("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0")
JOBS = (("seq-1M-qd1", "write", "1M", 1), ("rand-4k-qd16", "randwrite", "4k", 16))


@dataclass(frozen=True)
class Plan:
    """What one mode runs: the file fio writes, the device under ext4, the jobs."""

    file_bytes: int
    device_bytes: int
    jobs: tuple


def plan(mode):
    """A file of the mode's image size on a device a quarter larger; time-based jobs of the
    mode's run length (at least 1 s) and warm-up."""
    jobs = tuple(Job(name, rw, bs, qd, mode.image_bytes, max(mode.runtime_s, 1), mode.ramp_s)
                 for name, rw, bs, qd in JOBS)
    return Plan(mode.image_bytes, mode.image_bytes + mode.image_bytes // 4, jobs)


def fio_args(job, path, out_json):
    """fio inside the filesystem: direct=1, libaio, one file at path, time-based."""
    argv = ["fio", f"--name={job.name}", "--ioengine=libaio", "--direct=1", f"--filename={path}",
            f"--size={job.size_bytes}", f"--rw={job.rw}", f"--bs={job.bs}", f"--iodepth={job.iodepth}",
            "--output-format=json", f"--output={out_json}", "--time_based", f"--runtime={job.runtime_s}"]
    return argv + ([f"--ramp_time={job.ramp_s}"] if job.ramp_s else [])


def mount_points(mountinfo_text):
    """The mount points listed in /proc/self/mountinfo text (field 5, octal escapes decoded)."""
    out = []
    for line in mountinfo_text.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            out.append(fields[4].encode().decode("unicode_escape"))
    return out


def is_mounted(path):
    """True if path is a mount point now (a stale FUSE mount included, which os.path.ismount
    misses)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            return os.path.abspath(path) in mount_points(f.read())
    except OSError:
        return False


def missing_tools(variant, have=shutil.which, fuse_dev="/dev/fuse"):
    """What a variant lacks on this machine ('' if nothing): /dev/fuse, nbdfuse, losetup, ..."""
    needs = ["losetup", "mkfs.ext4", "mount", "umount"] + (["nbdfuse"] if variant == NBD else [])
    lacking = [t for t in needs if not have(t)]
    if variant != LOCAL and not os.path.exists(fuse_dev):
        lacking.append(fuse_dev)
    return ", ".join(lacking)


def tool(argv, what):
    """Runs a short admin tool; its stdout, or SetupError naming what failed."""
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_DEADLINE_S, check=False)
    if proc.returncode != 0:
        raise SetupError(f"{what}: {' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[:300]}")
    return proc.stdout.strip()


class Teardown:
    """Undo steps run in reverse order; failures are collected as notes, never raised, so every
    step runs."""

    def __init__(self, stack, notes):
        self.stack, self.notes = stack, notes

    def push(self, what, fn, *args):
        def step():
            try:
                fn(*args)
            except (OSError, BenchError, subprocess.SubprocessError) as exc:
                self.notes.append(f"clean-up: {what}: {exc}")
        self.stack.callback(step)


def unmount(path):
    """Unmounts path if it is mounted: plainly, then lazily as a last resort."""
    if not is_mounted(path):
        return
    if subprocess.run(["umount", path], capture_output=True, timeout=TOOL_DEADLINE_S).returncode != 0:
        tool(["umount", "-l", path], f"lazy unmount of {path}")


def detach(device):
    """losetup -d device."""
    tool(["losetup", "-d", device], f"detaching {device}")


def ext4_on(td, file_path, wd):
    """A direct-I/O loop device over file_path, ext4 on it, mounted at wd/ext4; returns the mount
    point. Every step is undone by td."""
    device = tool(["losetup", "--direct-io=on", "--find", "--show", file_path], "losetup")
    if not device.startswith("/dev/loop"):
        raise SetupError(f"losetup printed {device!r}")
    td.push(f"losetup -d {device}", detach, device)
    tool(list(MKFS_ARGS) + [device], "mkfs.ext4")
    mnt = os.path.join(wd, "ext4")
    os.makedirs(mnt, exist_ok=True)
    tool(["mount", device, mnt], "mount")
    td.push(f"umount {mnt}", unmount, mnt)
    return mnt


def nbdfuse_file(ctx, td, uri, wd):
    """nbdfuse over uri at wd/nbd.fuse (a foreground process of this run); returns the file."""
    mnt = os.path.join(wd, "nbd.fuse")
    os.makedirs(mnt)
    proc = ctx.reaper.spawn(["nbdfuse", mnt, uri], os.path.join(wd, "nbdfuse.log"))
    td.push("nbdfuse", ctx.reaper.stop, proc)
    td.push(f"umount {mnt}", unmount, mnt)
    path = os.path.join(mnt, "nbd")
    procs.wait_for("nbdfuse's file", lambda: is_mounted(mnt) and os.path.exists(path), MOUNT_DEADLINE_S, procs=[proc])
    return path


def run_jobs(ctx, argv_of, variant, rep, pl):
    """The fio jobs, each command line from argv_of(job, out_json), each after a `sync` so the
    writeback of earlier work (the preallocated backing files, mkfs, the previous job) does not
    compete with it; returns rows."""
    rows = []
    for job in pl.jobs:
        os.sync()
        out = ctx.fio_json(NAME, variant, job.name, f"r{rep}")
        proc = ctx.reaper.spawn(argv_of(job, out), out[:-5] + ".log")
        rc = proc.wait()
        ctx.reaper.stop(proc)
        if rc != 0:
            raise BenchError(f"fio {job.name}: exit {rc}: {procs.tail(out[:-5] + '.log', 10).strip()[-600:]}")
        m = fio.parse_file(out)
        rows.append({"case": variant, "workload": job.name, "rep": rep, "file_mib": pl.file_bytes // MIB, **m})
        procs.log(f"  {NAME} {variant:15} {job.name:13} {m['mib_s']:8.1f} MiB/s {m['iops']:9.0f} IOPS  "
                  f"mean {m['clat_mean_us']:8.1f} us")
    return rows


def export_open(run_dir):
    """True while an NBD client (or a FUSE opener) holds alice's volume open."""
    devices = (cluster.tandem_status(run_dir) or {}).get("devices") or [{}]
    return devices[0].get("open") is not False


def raw_export_rows(ctx, c, rep, pl):
    """`tandem-nbd`: the jobs with fio's nbd engine on alice's export of pair c; returns once the
    export is closed again, so the FUSE file can be opened."""
    rows = run_jobs(ctx, lambda job, out: fio.args(job, c.uri, out), RAW, rep, pl)
    procs.wait_for("alice's export closed after fio", lambda: not export_open(c.dirs["alice"]), MOUNT_DEADLINE_S)
    return rows


def in_file(mnt):
    """argv_of for run_jobs: fio on the file fio.dat in the filesystem at mnt."""
    return lambda job, out: fio_args(job, os.path.join(mnt, "fio.dat"), out)


def run_variant(ctx, variant, rep, pl, notes):
    """One variant on fresh files; returns (rows, replica check or None) and appends its problems
    to notes (also when it raises)."""
    rows, check = [], None
    wd = ctx.workdir(NAME, variant, f"r{rep}")
    fuse_dir = os.path.join(wd, "alice.fuse")
    with contextlib.ExitStack() as stack:
        td = Teardown(stack, notes)
        if variant == LOCAL:
            target = os.path.join(wd, "local.img")
            cluster.make_image(target, pl.device_bytes)
            td.push("removing the image", os.remove, target)
            mnt = ext4_on(td, target, wd)
            return run_jobs(ctx, in_file(mnt), variant, rep, pl), None
        td.push(f"umount {fuse_dir} (left by a stopped node)", unmount, fuse_dir)
        setup = Setup("pair", size_bytes=pl.device_bytes, label=variant,
                      fuse_mount=fuse_dir if variant == FUSE else None)
        c = stack.enter_context(cluster.Cluster(ctx.reaper, wd, setup))
        if variant == FUSE:
            rows += raw_export_rows(ctx, c, rep, pl)
        target = os.path.join(fuse_dir, "r0") if variant == FUSE else nbdfuse_file(ctx, td, c.uri, wd)
        with contextlib.ExitStack() as inner:
            mnt = ext4_on(Teardown(inner, notes), target, wd)
            rows += run_jobs(ctx, in_file(mnt), variant, rep, pl)
        if variant == NBD:
            unmount(os.path.dirname(target))
        check = c.check_replicas()
    notes += c.notes
    if check and check["result"] != "IDENTICAL":
        notes.append(f"replicas DIFFERENT: {check.get('first_difference')}")
    return rows, check


def measure(ctx, pl):
    """Every repetition: each variant in order. Returns (rows, problems, replica checks, skipped
    {variant: why})."""
    rows, problems, checks = [], [], []
    skipped = {v: why for v in VARIANTS if (why := missing_tools(v))}
    for rep in range(1, ctx.mode.reps + 1):
        for variant in (v for v in VARIANTS if v not in skipped):
            procs.log(f"{NAME}: {variant} (repetition {rep}/{ctx.mode.reps})")
            notes = []
            try:
                r, check = run_variant(ctx, variant, rep, pl, notes)
                rows += r
                checks += [(variant, rep, check)] if check else []
            except (BenchError, OSError, subprocess.SubprocessError) as exc:
                notes.insert(0, f"FAILED: {str(exc).strip().splitlines()[0][:400]}")
                procs.log(f"{NAME} {variant}: FAILED: {exc}")
            problems += [f"{variant} (rep {rep}): {n}" for n in notes]
    return rows, problems, checks, skipped


# ----- report -------------------------------------------------------------------------------------

def estimate_s(mode):
    """Rough duration: per repetition and variant, fresh files, mkfs, the jobs, the clean-up, and
    for the pairs the replica check."""
    pl = plan(mode)
    gib = pl.device_bytes / (1 << 30)
    jobs_s = sum(common.job_seconds(j) for j in pl.jobs)
    mkfs_s = MKFS_S_FIXED + MKFS_S_PER_GIB * gib
    per_variant = common.CASE_SETUP_S_FIXED + common.CASE_SETUP_S_PER_GIB * gib + mkfs_s + jobs_s
    check_s = 2 * pl.device_bytes / (common.SEQ_MIB_PER_S * MIB)
    raw_s = jobs_s  # tandem-nbd: the same jobs on the tandem-fuse pair
    return mode.reps * (len(VARIANTS) * (per_variant + TEARDOWN_S_GUESS) + len(PAIRS) * check_s + raw_s)


def ratio_rows(rows, reps):
    """[variant, workload, MiB/s, IOPS, mean µs, p99 µs, % of local-file, % of tandem-nbd] per
    aggregated row; each percentage is the median of per-repetition ratios of MiB/s to that
    baseline's in the same workload."""
    aggs = common.aggregate(rows, ["case", "workload"], ["mib_s", "iops", "clat_mean_us", "clat_p99_us"])
    out = []
    for a in aggs:
        pcts = []
        for baseline in (LOCAL, RAW):
            ratios = stats.paired_ratios(rows, "mib_s", {"case": a["case"], "workload": a["workload"]},
                                         {"case": baseline, "workload": a["workload"]})
            pct = stats.median(ratios)
            pcts.append(fmt(None if pct is None else 100 * pct))
        out.append([a["case"], a["workload"], cell(a, "mib_s", 1, reps), cell(a, "iops", 0, reps),
                    cell(a, "clat_mean_us", 0, reps), cell(a, "clat_p99_us", 0, reps)] + pcts)
    return out


def run(ctx):
    """The variants, the table, the plot."""
    pl = plan(ctx.mode)
    rows, problems, checks, skipped = measure(ctx, pl)
    ran = [v for v in VARIANTS if v not in skipped]
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, ctx.mode.reps * (len(ran) + (FUSE in ran)) * len(pl.jobs))
    o.method = [
        f"ext4 (`{' '.join(MKFS_ARGS)}`, default mount options) on a direct-I/O loop device "
        f"(`losetup --direct-io=on`) over a {fio.human_bytes(pl.device_bytes)} file: `{FUSE}` is alice's FUSE export "
        f"(`fuse-mount DIR;` in her `on` section, the file DIR/r0), `{NBD}` her NBD export through libnbd's "
        f"`nbdfuse` (the file DIR/nbd), both on a fresh protocol C pair; `{LOCAL}` is a preallocated local "
        "file, the baseline. fio inside the filesystem, libaio, direct=1, one file of "
        f"{fio.human_bytes(pl.file_bytes)}: " + "; ".join(j.describe() for j in pl.jobs)
        + f". `{RAW}` runs the same jobs with fio's nbd engine straight on alice's NBD export of the `{FUSE}` "
        "pair, before its ext4 is made (no filesystem, no loop device): the reference for what ext4 and the "
        "FUSE/loop path add. Every job starts after a `sync`, so the writeback of earlier work (the "
        "preallocated backing files, mkfs, the previous job) does not compete with it. "
        f"The percentages are MiB/s against `{LOCAL}` and against `{RAW}` in the same repetition. After each "
        "pair, the filesystem is unmounted, the loop device detached and both backing files compared.",
        "",
        "Read the sequential numbers with care: the local file's loop device does direct I/O to the disk, "
        "while tandem writes its backing files through the page cache (bench/README.md), so a tandem "
        "variant can beat the baseline on writes the disk has not yet absorbed."]
    o.lines += table(["variant", "workload", "MiB/s", "IOPS", "clat mean µs", "clat p99 µs", f"% of {LOCAL}",
                      f"% of {RAW}"], ratio_rows(rows, ctx.mode.reps), "llrrrrrr")
    for variant, why in skipped.items():
        o.lines += ["", f"Skipped `{variant}`: missing {why}."]
    o.lines += [""] + common.replica_lines(checks)
    _plot(ctx, o, rows, ran)
    return o


def _plot(ctx, o, rows, ran):
    aggs = common.aggregate(rows, ["workload", "case"], ["mib_s"])
    groups, series = common.bars(aggs, "workload", "case", "mib_s")
    order = {v: i for i, v in enumerate(r for r in ROWS if r in ran or (r == RAW and FUSE in ran))}
    series = sorted(series, key=lambda s: order.get(s[0], len(order)))
    common.try_plot(ctx, o, "ext4.svg", "ext4: MiB/s per workload, a bar per variant",
                    lambda: svg.bar_chart("ext4 over tandem (FUSE, nbdfuse), on the local file; tandem's NBD export raw",
                                          "MiB/s",
                                          groups, series))
