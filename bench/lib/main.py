"""bench/run: argument parsing and the run itself (build, private binary copy, experiments in
order, CSV/SVG/report output). See bench/README.md for usage.

Invariants: every process and temporary file is cleaned up at exit, including on SIGINT/SIGTERM;
results go to one directory, replaced as a whole (a stale fio/ or plot from an earlier run with
the same name cannot leak into the report); the exit status is 0 only if every selected
experiment completed with all its cases and every replica check found identical replicas.
"""

import argparse
import atexit
import dataclasses
import datetime
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from . import cluster, csvout, machine, procs, report
from .errors import BenchError
from .experiments import Context, default_selection, named_only_pending, registry
from .modes import MODES

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(BENCH)
TOOLS = (("fio", "fio"), ("qemu-img", "qemu-utils"), ("nbdinfo", "libnbd-bin"), ("cmp", "diffutils"),
         ("dd", "coreutils"))
EMULATION = [
    "- Both nodes, fio and any peer server share this one machine and talk over loopback: the network has "
    "no bandwidth limit and microseconds of latency, and the Secondary's CPU comes out of the Primary's and fio's.",
    "- Link latency, where an experiment adds it (latency-matrix, srm, srm-live, protocols' +N ms cases), comes from "
    "`tandem-linkemu` (crates/linkemu): a userspace TCP relay in front of each node that delays every byte by "
    "half the added round trip in each direction; without it those cases are pending. srm-live also changes the "
    "running relay's delay and rate (a token bucket per direction) through its control socket.",
    "- No disk throttling is emulated (`heterogeneous-disks` is pending).",
    "- Backing files are preallocated raw files (qemu-img preallocation=full) on the filesystem named in the "
    "machine section; tandem and the peers use buffered I/O (except the `-direct` cases of direct-io, "
    "`disk { io direct; }`), so most numbers measure the software path (NBD, replication, copies, system "
    "calls, scheduling) more than the disk, except where a flush or O_DIRECT/O_DSYNC is involved "
    "(small-write-latency, direct-io).",
    "- Time-based fio runs exclude a warm-up (fio ramp_time) except in peers, which measures exactly like the "
    "QEMU reference script, and in --smoke.",
]


def parse_args(argv, names):
    """Parsed command line; exits with a usage error for unknown experiments or --reps < 1."""
    ap = argparse.ArgumentParser(prog="bench/run", description="tandem's benchmark suite (see bench/README.md)")
    mode = ap.add_mutually_exclusive_group()
    for flag in ("smoke", "quick", "full"):
        mode.add_argument(f"--{flag}", dest="mode", action="store_const", const=flag)
    ap.add_argument("experiments", nargs="*", metavar="EXPERIMENT", help=f"any of: {', '.join(names)} (default: all)")
    ap.add_argument("--reps", type=int, help="repetitions per case (default: 3 with --full, else 1)")
    ap.add_argument("--out", help="result directory (default bench/results/<date>-<name>)")
    ap.add_argument("--name", help="result directory name after the date (default suite-<mode>)")
    ap.add_argument("--no-build", action="store_true", help="use the existing target/release/tandem")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory (node logs)")
    ap.add_argument("--list", action="store_true", help="list the experiments and exit")
    args = ap.parse_args(argv)
    args.mode = args.mode or "default"
    for e in args.experiments:
        if e not in names:
            ap.error(f"unknown experiment {e!r}; known: {', '.join(names)}")
    if args.reps is not None and args.reps < 1:
        ap.error("--reps must be at least 1")
    return args


def linkemu_tracked():
    """True if the link emulator's crate is committed in this checkout."""
    out = subprocess.run(["git", "-C", REPO, "ls-files", "crates/linkemu/Cargo.toml"], capture_output=True,
                         text=True, check=False).stdout.strip()
    return bool(out)


def prepare_binaries(args, reaper):
    """Builds (unless --no-build) tandem and, if its crate is committed, tandem-linkemu; copies
    them into the temporary directory (other jobs may rebuild target/ meanwhile). Returns
    (tandem sha256, linkemu path or None)."""
    packages = ["tandem"] + (["linkemu"] if linkemu_tracked() else [])
    if not args.no_build:
        for package in packages:
            procs.log(f"cargo build --release -p {package}")
            subprocess.run(["cargo", "build", "--release", "-p", package], cwd=REPO, check=True)
    copies = {}
    for name in ("tandem", "tandem-linkemu"):
        src = os.path.join(REPO, "target", "release", name)
        if os.access(src, os.X_OK) and (name == "tandem" or "linkemu" in packages):
            copies[name] = os.path.join(reaper.tmp, name)
            shutil.copy2(src, copies[name])
    if "tandem" not in copies:
        raise BenchError("target/release/tandem missing (build it, or drop --no-build)")
    cluster.use_binary(copies["tandem"], copies.get("tandem-linkemu"))
    with open(copies["tandem"], "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), copies.get("tandem-linkemu")


def out_dir_for(args, selected, date, all_names):
    """--out, or bench/results/<date>-<name>[-<mode>] (suite when every experiment is selected)."""
    if args.out:
        return os.path.abspath(args.out)
    name = args.name or ("suite" if selected == all_names else "+".join(selected))
    suffix = "" if args.mode == "default" or args.name else f"-{args.mode}"
    return os.path.join(BENCH, "results", f"{date}-{name}{suffix}")


def run_one(ctx, module):
    """Runs one experiment; an unexpected BenchError becomes a failed outcome."""
    try:
        return module.run(ctx)
    except BenchError as exc:
        procs.log(f"{module.NAME}: FAILED: {exc}")
        return report.Outcome(module.NAME, module.TITLE, module.SEED, problems=[f"FAILED: {exc}"], status="failed")


def write_outputs(ctx, outcome):
    """CSV of the outcome's rows (if any)."""
    if outcome.rows:
        outcome.csv = f"{outcome.name}.csv"
        csvout.write_csv(os.path.join(ctx.out_dir, outcome.csv), outcome.rows)


def git_meta():
    """(HEAD commit, paths outside bench/ with uncommitted changes that the build included)."""
    commit = procs.sh(f"git -C {REPO} rev-parse HEAD")
    proc = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench"],
                          capture_output=True, text=True, check=False)
    return commit, [line[3:] for line in proc.stdout.splitlines() if len(line) > 3]


def command_line(args, selected, all_names):
    """The command as the report quotes it."""
    flags = [f"--{args.mode}"] if args.mode != "default" else []
    flags += [f"--reps {args.reps}"] if args.reps else []
    return " ".join(["bench/run"] + flags + ([] if selected == all_names else selected))


def main(argv=None):
    probe_available, _ = registry(linkemu_tracked())
    names = list(probe_available)
    args = parse_args(sys.argv[1:] if argv is None else argv, names)
    mode = MODES[args.mode]
    if args.reps:
        mode = dataclasses.replace(mode, reps=args.reps)
    defaults = default_selection(names, args.mode)
    selected = args.experiments or defaults
    for tool, pkg in TOOLS:
        if not shutil.which(tool):
            sys.exit(f"bench/run: {tool} not found (Debian package {pkg})")
    if args.list:
        for name in names:
            only = "" if name in defaults else " (only when named)"
            print(f"{name:22} about {probe_available[name].estimate_s(mode) / 60:4.1f} min with --{mode.name}{only}")
        return 0
    reaper = procs.Reaper()
    atexit.register(reaper.cleanup)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, procs.on_signal)
    reaper.keep_tmp = args.keep_tmp
    reaper.tmp = tempfile.mkdtemp(prefix="tandem-bench-")
    sha, linkemu = prepare_binaries(args, reaper)
    date = datetime.date.today().isoformat()
    out = out_dir_for(args, selected, date, defaults)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(os.path.join(out, "fio"))
    shared = os.path.join(os.path.dirname(REPO), "shared")
    ctx = Context(mode, reaper, reaper.tmp, out, shared if os.path.isdir(shared) else None, linkemu)
    return run_all(ctx, args, selected, defaults, {"sha": sha, "date": date})


def run_all(ctx, args, selected, names, run):
    """Runs the selected experiments in order and writes CSVs, report.md and results.json. names:
    what a run without names executes in this mode."""
    available, pending = registry(ctx.linkemu)
    if not args.experiments:
        pending += named_only_pending(list(available), args.mode)
    selected = [n for n in selected if n in available]
    commit, dirty = git_meta()
    meta = {"date": run["date"], "mode": args.mode, "reps": ctx.mode.reps,
            "command": command_line(args, selected, names), "commit": commit, "dirty_paths": dirty,
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "loadavg_start": procs.loadavg(), "tandem_sha256": run["sha"]}
    guess = sum(available[n].estimate_s(ctx.mode) for n in selected) / 60
    procs.log(f"{meta['command']}: about {guess:.0f} min; results -> {ctx.out_dir}; temporary files in {ctx.tmp}")
    outcomes = []
    for name in selected:
        procs.log(f"=== {name}")
        outcome = run_one(ctx, available[name])
        write_outputs(ctx, outcome)
        outcomes.append(outcome)
    meta["finished"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    meta["loadavg_end"] = procs.loadavg()
    items = machine.describe(ctx.tmp)
    text = report.render(meta, outcomes, pending, items, EMULATION)
    with open(os.path.join(ctx.out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(ctx.out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "machine": items, "mode": dataclasses.asdict(ctx.mode),
                   "experiments": [{"name": o.name, "status": o.status, "problems": o.problems, "rows": o.rows}
                                   for o in outcomes],
                   "pending": [p.__dict__ for p in pending]}, f, indent=1)
    procs.log(f"wrote {ctx.out_dir}/report.md")
    bad = [o.name for o in outcomes if o.status != "ok" or any("DIFFERENT" in p for p in o.problems)]
    if bad:
        procs.log(f"experiments with problems: {', '.join(bad)}")
        return 1
    return 0
