"""Processes, temporary files and CPU accounting.

Invariants: every process the suite starts goes through Reaper.spawn, runs as the leader of its
own process group, and is stopped (SIGTERM, then SIGKILL after a grace period) by Reaper.stop or,
at exit, by Reaper.cleanup; the suite never signals a process it did not start. The temporary
directory is removed at exit unless keep_tmp is set. CPU figures come from /proc: per process
utime and stime (all threads), machine-wide from the first line of /proc/stat.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from .errors import SetupError


def log(msg):
    """A timestamped progress line on stdout."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Reaper:
    """Tracks the process groups and the temporary directory this run created."""

    def __init__(self):
        self.procs = []
        self.tmp = None
        self.keep_tmp = False

    def spawn(self, argv, log_path, env=None):
        """Starts argv in a new session with stdout+stderr appended to log_path."""
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env)
        self.procs.append(proc)
        return proc

    def stop(self, proc, grace_s=10.0):
        """SIGTERM proc's group, SIGKILL after grace_s, then SIGKILL any straggler of the group.
        Returns the leader's exit status."""
        if proc.poll() is None:
            _killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                log(f"pid {proc.pid} ignored SIGTERM for {grace_s}s; SIGKILL")
                _killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        _killpg(proc.pid, signal.SIGKILL)
        if proc in self.procs:
            self.procs.remove(proc)
        return proc.returncode

    def cleanup(self):
        """Stops everything still running and removes the temporary directory."""
        for proc in list(self.procs):
            try:
                self.stop(proc, grace_s=5.0)
            except OSError as exc:
                print(f"cleanup: {exc}", file=sys.stderr)
        if self.tmp and os.path.isdir(self.tmp):
            if self.keep_tmp:
                log(f"keeping {self.tmp}")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = None


def _killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def on_signal(signum, _frame):
    """Signal handler: only unwinds (the interrupted frame may hold a Popen lock); the finally
    blocks and the atexit hook clean up."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    log(f"caught signal {signum}; cleaning up")
    raise SystemExit(128 + signum)


def free_ports(count):
    """count distinct free TCP ports on 127.0.0.1 (fixed ports collide with parallel jobs)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_for(what, predicate, deadline_s, interval_s=0.2, procs=()):
    """Polls predicate until it returns a true value (returned); SetupError if one of procs
    exits or the deadline passes."""
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value:
            return value
        for p in procs:
            if p.poll() is not None:
                raise SetupError(f"while waiting for {what}: pid {p.pid} exited with {p.returncode}")
        if time.monotonic() > end:
            raise SetupError(f"timed out after {deadline_s}s waiting for {what}")
        time.sleep(interval_s)


def sh(cmd, timeout_s=30):
    """stdout of a shell command, stripped, or '(error)' text; for the machine description."""
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout_s).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"({exc})"


def tail(path, lines=30):
    """The last lines of a text file, or '' if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def parse_proc_stat(text):
    """(utime_s, stime_s) from the text of /proc/PID/stat."""
    fields = text.rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) / ticks, int(fields[12]) / ticks)


def proc_cpu(pid):
    """(user s, system s) of a process and all its threads, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return parse_proc_stat(f.read())
    except (OSError, IndexError, ValueError):
        return None


def cpu_delta(before, after, wall_s, metrics):
    """CPU use of one process between two proc_cpu samples taken wall_s apart around a fio job:
    user and system % of one core, and CPU µs per I/O (scaled to fio's measured runtime, so
    warm-up is excluded). None if a sample is missing."""
    if before is None or after is None or wall_s <= 0:
        return None
    usr, sys_ = after[0] - before[0], after[1] - before[1]
    ios = metrics.get("ios") or 0
    busy_s = (usr + sys_) * min(1.0, metrics.get("runtime_s", wall_s) / wall_s)
    return {"usr_pct": 100 * usr / wall_s, "sys_pct": 100 * sys_ / wall_s,
            "cpu_pct": 100 * (usr + sys_) / wall_s,
            "cpu_us_per_io": 1e6 * busy_s / ios if ios else None}


def cpu_times():
    """The aggregate `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def machine_cpu(before, after):
    """Machine-wide busy and steal % of all CPUs between two cpu_times() samples."""
    if not before or not after:
        return None
    d = [b - a for a, b in zip(before, after)]
    total = sum(d) or 1
    return {"busy_pct": 100 * (total - d[3] - d[4]) / total, "steal_pct": 100 * d[7] / total}


def loadavg():
    """The 1/5/15-minute load averages as strings, or None."""
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0:3]
    except OSError:
        return None


def parse_task_status(text):
    """(voluntary, involuntary) context switches from the text of /proc/PID/task/TID/status."""
    counts = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            counts[key] = int(value.split()[0])
    return counts.get("voluntary_ctxt_switches", 0), counts.get("nonvoluntary_ctxt_switches", 0)


def thread_group(pid, tid, comm):
    """The name a thread's costs are summed under: 'main' for the process's first thread, the
    thread name less a trailing '-<index>' otherwise (io-r0-0, io-r0-1 -> io-r0), so threads of
    one pool count together."""
    if tid == pid:
        return "main"
    name = comm.strip() or "?"
    head, sep, tail = name.rpartition("-")
    return head if sep and head and tail.isdigit() else name


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def thread_snapshot(pid):
    """{tid: (group, cpu seconds, voluntary, involuntary)} for every live thread of pid, from
    /proc/PID/task/*/{comm,stat,status}; threads that exit while it is read are left out, and
    an empty dict means the process is gone."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for name in tids:
        base = f"/proc/{pid}/task/{name}"
        try:
            usr, sys_ = parse_proc_stat(_read(f"{base}/stat"))
            vol, invol = parse_task_status(_read(f"{base}/status"))
            comm = _read(f"{base}/comm")
        except (OSError, IndexError, ValueError):
            continue
        out[int(name)] = (thread_group(pid, int(name), comm), usr + sys_, vol, invol)
    return out


def thread_delta(before, after):
    """{group: (cpu seconds, voluntary, involuntary)} between two thread_snapshot()s. A thread
    born during the interval counts from zero; one that died is missing from `after` and so
    uncounted (the process total from /proc/PID/stat still has its CPU time)."""
    out = {}
    for tid, (group, cpu_s, vol, invol) in after.items():
        _, cpu0, vol0, invol0 = before.get(tid, (group, 0.0, 0, 0))
        acc = out.get(group, (0.0, 0, 0))
        out[group] = (acc[0] + cpu_s - cpu0, acc[1] + vol - vol0, acc[2] + invol - invol0)
    return out
