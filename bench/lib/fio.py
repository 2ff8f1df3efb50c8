"""fio through its nbd engine: job descriptions, command lines, and parsing of the JSON output.

Invariants: a Job is immutable and names every option that changes the measurement; the command
line is a pure function of (job, uri, output path); parse_text accepts fio's JSON document even
when fio printed warnings before it, and raises FioParseError (never KeyError) for anything that
is not a finished write job; latencies are fio's completion latency (clat: submission to reply)
in microseconds, bandwidths in MiB/s (2^20 bytes), bandwidth standard deviation converted from
fio's KiB/s. Time-series logs (log_args, parse_log) are fio's averaged per-interval IOPS and
completion latency logs, stamped in Unix epoch milliseconds so they line up with other clocks.
"""

import json
import os
import time
from dataclasses import dataclass

from . import procs
from .errors import BenchError, FioParseError

PERCENTILES = (("p50", "50.000000"), ("p90", "90.000000"), ("p99", "99.000000"), ("p999", "99.900000"))
MIB = 2**20


@dataclass(frozen=True)
class Job:
    """One fio run. size_bytes bounds the region written; runtime_s (if set) makes it time-based;
    ramp_s is fio's warm-up, excluded from the numbers; fsync_every issues an NBD FLUSH after
    every that many writes (0: none)."""

    name: str
    rw: str
    bs: str
    iodepth: int
    size_bytes: int
    runtime_s: int = 0
    ramp_s: int = 0
    fsync_every: int = 0

    def describe(self):
        """A short human description: 'randwrite 4k QD32, 5 s (+1 s warm-up)'."""
        span = f"{self.runtime_s} s" if self.runtime_s else f"{human_bytes(self.size_bytes)} once"
        ramp = f" (+{self.ramp_s} s warm-up)" if self.ramp_s and self.runtime_s else ""
        sync = f", flush every {self.fsync_every}" if self.fsync_every else ""
        return f"{self.rw} {self.bs} QD{self.iodepth}, {span}{ramp}{sync}"


def human_bytes(n):
    """1073741824 -> '1 GiB', 65536 -> '64 KiB'."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def args(job, uri, out_json):
    """The fio command line for job against an NBD URI."""
    argv = ["fio", f"--name={job.name}", "--ioengine=nbd", f"--uri={uri}", f"--size={job.size_bytes}",
            f"--rw={job.rw}", f"--bs={job.bs}", f"--iodepth={job.iodepth}",
            "--output-format=json", f"--output={out_json}"]
    if job.runtime_s:
        argv += ["--time_based", f"--runtime={job.runtime_s}"]
        if job.ramp_s:
            argv.append(f"--ramp_time={job.ramp_s}")
    if job.fsync_every:
        argv.append(f"--fsync={job.fsync_every}")
    return argv


def log_args(prefix, avg_ms):
    """fio options for per-interval logs: PREFIX_iops.1.log (IOPS averaged over avg_ms) and
    PREFIX_clat.1.log (mean completion latency in ns over avg_ms), with epoch-ms time stamps
    (fio also writes PREFIX_lat.1.log and PREFIX_slat.1.log)."""
    return [f"--write_iops_log={prefix}", f"--write_lat_log={prefix}", f"--log_avg_msec={avg_ms}",
            "--log_unix_epoch=1"]


def log_paths(prefix):
    """(IOPS log, completion latency log) that log_args(prefix, ...) makes fio write."""
    return f"{prefix}_iops.1.log", f"{prefix}_clat.1.log"


def parse_log(text):
    """[(time ms, value)] of the write entries (direction 1) of a fio log ('time, value,
    direction, bs, offset[, prio]' per line); lines that do not parse are skipped."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or parts[2] != "1":
            continue
        try:
            out.append((int(parts[0]), float(parts[1])))
        except ValueError:
            continue
    return out


def _document(text):
    start = text.find("{")
    if start < 0:
        raise FioParseError("no JSON document in fio output")
    try:
        return json.loads(text[start:])
    except ValueError as exc:
        raise FioParseError(f"fio output is not valid JSON: {exc}") from exc


def _num(obj, *path):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            raise FioParseError(f"fio JSON lacks {'.'.join(path)}")
        obj = obj[key]
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise FioParseError(f"fio JSON {'.'.join(path)} is not a number")
    return obj


def parse_text(text):
    """Metrics of the first job's writes in fio's JSON output (see the module invariants)."""
    doc = _document(text)
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not jobs or not isinstance(jobs[0], dict):
        raise FioParseError("fio JSON has no jobs")
    job = jobs[0]
    if job.get("error", 0):
        raise FioParseError(f"fio job {job.get('jobname')!r} reports error {job['error']}")
    w = job.get("write")
    ios = _num(job, "write", "total_ios")
    if ios <= 0:
        raise FioParseError(f"fio job {job.get('jobname')!r} completed no writes")
    pct = w["clat_ns"].get("percentile", {}) if isinstance(w.get("clat_ns"), dict) else {}
    runtime_ms = _num(job, "write", "runtime")
    m = {
        "mib_s": _num(job, "write", "bw_bytes") / MIB,
        "iops": _num(job, "write", "iops"),
        "clat_mean_us": _num(job, "write", "clat_ns", "mean") / 1000,
        "clat_max_us": _num(job, "write", "clat_ns", "max") / 1000,
        "bw_stddev_mib_s": _num(job, "write", "bw_dev") / 1024,
        "io_mib": _num(job, "write", "io_bytes") / MIB,
        "ios": ios,
        "runtime_s": runtime_ms / 1000,
        "us_per_write": 1000 * runtime_ms / ios,
        "fio_usr_cpu_pct": job.get("usr_cpu"),
        "fio_sys_cpu_pct": job.get("sys_cpu"),
    }
    for name, key in PERCENTILES:
        m[f"clat_{name}_us"] = pct[key] / 1000 if key in pct else None
    sync = job.get("sync") or {}
    m["flushes"] = sync.get("total_ios", 0)
    m["flush_mean_us"] = sync["lat_ns"]["mean"] / 1000 if m["flushes"] and "lat_ns" in sync else None
    return m


def parse_file(path):
    """parse_text of a file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_text(f.read())
    except OSError as exc:
        raise FioParseError(f"cannot read {path}: {exc}") from exc


def run_job(reaper, job, uri, out_json, watch_pids):
    """Runs job against uri, writes fio's JSON to out_json and returns its metrics plus the CPU
    use of each process in watch_pids ({name: pid}) and of the whole machine during the run."""
    before = {name: procs.proc_cpu(pid) for name, pid in watch_pids.items()}
    machine_before = procs.cpu_times()
    t0 = time.monotonic()
    fio_log = out_json[:-5] + ".log"
    proc = reaper.spawn(args(job, uri, out_json), fio_log)
    rc = proc.wait()
    reaper.stop(proc)
    wall_s = time.monotonic() - t0
    after = {name: procs.proc_cpu(pid) for name, pid in watch_pids.items()}
    err = procs.tail(fio_log, 20).strip()
    os.remove(fio_log)
    if rc != 0:
        raise BenchError(f"fio {job.name}: exit {rc}: {err[-1500:]}")
    m = parse_file(out_json)
    m["machine_cpu"] = procs.machine_cpu(machine_before, procs.cpu_times())
    m["server_cpu"] = {name: procs.cpu_delta(before[name], after[name], wall_s, m) for name in watch_pids}
    return m
