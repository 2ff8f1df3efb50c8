"""failover (issue 4): the time from SIGKILL of the Primary's node process to the first write
completed on the promoted peer.

Per repetition, a fresh protocol C pair (alice Primary) with DRBD's liveness defaults written
out (`ping-int 10; ping-timeout 5;`, i.e. 10 s and 0.5 s): fio writes 4 KiB at QD1 through
alice's export; once alice's status shows written data, alice's node process gets SIGKILL.
Then, on bob: `status --json` is polled until alice is no longer Connected (detection),
`tandem primary r0` is retried until it succeeds (promotion), and nbdcopy writes one 4 KiB
block at offset 0 of bob's export (first write: nbdcopy's start, the NBD handshake, the write
and the close). Afterwards the block is read back from bob's backing file.

Invariants: every repetition runs on fresh nodes and backing files; the parts are measured on
one monotonic clock and add up to the total; a repetition whose block is not on bob's disk, or
that misses a deadline, is a problem and never a number; only the processes this run started
are signalled (alice's node by its pid).
"""

import os
import signal
import subprocess
import time
from dataclasses import dataclass

from .. import cluster, fio, procs, stats, svg
from ..cluster import Setup
from ..errors import BenchError, SetupError
from ..fio import Job
from ..report import Outcome, fmt, table
from . import common

NAME = "failover"
TITLE = "from SIGKILL of the Primary's node to the first write completed on the promoted peer"
SEED = ("issue 4 (high availability: a peer takes over within seconds with every acknowledged write), "
        "against DRBD users' expectation of a failover in seconds")
MIB = 1 << 20
BLOCK_BYTES = 4096
IMAGE_BYTES_MAX = 64 * MIB
PING_INT_S = 10
PING_TIMEOUT_DS = 5
NET = cluster.DEFAULT_NET + (("ping-int", str(PING_INT_S)), ("ping-timeout", str(PING_TIMEOUT_DS)))
CLIENT_RUNTIME_S = 600
STATE_DEADLINE_S = 30.0
DETECT_DEADLINE_S = 60.0
WRITE_DEADLINE_S = 30.0
PROMOTE_RETRY_S = 0.01
PARTS = ("detection_s", "promotion_s", "first_write_s", "total_s")
PART_LABELS = {"detection_s": "detection", "promotion_s": "promotion", "first_write_s": "first write",
               "total_s": "total"}
REPS = {"smoke": 3, "quick": 5}
REPS_DEFAULT = 10
REP_OVERHEAD_S = 1.5


@dataclass(frozen=True)
class Plan:
    """What one mode runs: repetitions (each on fresh nodes) and the image size."""

    reps: int
    image_bytes: int


def plan(mode):
    """3 repetitions in --smoke, 5 in --quick, 10 otherwise; images of at most 64 MiB (the
    failover does not depend on the size, only the set-up time does)."""
    return Plan(REPS.get(mode.name, REPS_DEFAULT), min(mode.image_bytes, IMAGE_BYTES_MAX))


def parts(t_kill, t_detect, t_promoted, t_written):
    """The parts of one failover from four monotonic instants: detection (kill until bob no
    longer shows alice Connected), promotion (until `tandem primary` succeeded), first write
    (until the 4 KiB write completed) and their total; BenchError if they are out of order."""
    if not t_kill <= t_detect <= t_promoted <= t_written:
        raise BenchError(f"failover instants out of order: {t_kill}, {t_detect}, {t_promoted}, {t_written}")
    return {"detection_s": t_detect - t_kill, "promotion_s": t_promoted - t_detect,
            "first_write_s": t_written - t_promoted, "total_s": t_written - t_kill}


def summary(rows):
    """{part: (median, min, max)} over the rows that verified their write."""
    good = [r for r in rows if r.get("on_bob_disk")]
    return {p: (stats.median([r.get(p) for r in good]),) + stats.spread([r.get(p) for r in good]) for p in PARTS}


def dominant(summ):
    """The part (detection_s, promotion_s or first_write_s) with the largest median, or None."""
    medians = [(summ[p][0], p) for p in PARTS[:3] if summ[p][0] is not None]
    return max(medians)[1] if medians else None


def block(rep):
    """The 4 KiB block repetition rep writes: a readable header, then a rep-dependent pattern."""
    head = f"tandem bench failover repetition {rep}\n".encode()
    body = bytes((rep * 31 + i) % 251 for i in range(BLOCK_BYTES - len(head)))
    return head + body


def peer_state(status):
    """bob's first connection state, or None if bob does not answer or has none."""
    conns = (status or {}).get("connections") or [{}]
    return conns[0].get("connection")


def written_kib(status):
    """KiB written to the first device according to a status dict, or 0."""
    devices = (status or {}).get("devices") or [{}]
    return devices[0].get("written_kib") or 0


# ----- one repetition -----------------------------------------------------------------------------

def start_client(ctx, c, rep):
    """fio randwrite 4k QD1 on alice's export, time-based (it ends with alice); returns its Popen
    once alice's status shows written data."""
    job = Job("client", "randwrite", "4k", 1, c.setup.size_bytes, CLIENT_RUNTIME_S)
    out = ctx.fio_json(NAME, "client", f"r{rep}")
    proc = ctx.reaper.spawn(fio.args(job, c.uri, out), out[:-5] + ".log")
    procs.wait_for("the client writing on alice", lambda: written_kib(cluster.tandem_status(c.dirs["alice"])) > 0,
                   STATE_DEADLINE_S, procs=[proc])
    return proc


def kill_alice(ctx, c):
    """SIGKILL alice's node process (by pid), reap it and forget it in the Cluster; returns the
    monotonic instant of the kill."""
    proc = dict(c.nodes)["alice"]
    t_kill = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ctx.reaper.stop(proc)
    c.nodes = [(n, p) for n, p in c.nodes if n != "alice"]
    return t_kill


def wait_detected(bob_dir):
    """Polls bob's status without pause until alice is no longer Connected; returns the instant."""
    end = time.monotonic() + DETECT_DEADLINE_S
    while time.monotonic() < end:
        st = cluster.tandem_status(bob_dir)
        if st is not None and peer_state(st) != "Connected":
            return time.monotonic()
    raise SetupError(f"bob still shows alice Connected {DETECT_DEADLINE_S:g} s after the kill")


def promote(bob_dir):
    """Retries `tandem primary r0` on bob until it succeeds; returns (instant, attempts)."""
    end = time.monotonic() + STATE_DEADLINE_S
    attempts = 0
    while True:
        attempts += 1
        proc = cluster.tandem_admin(bob_dir, "primary", "r0", check=False)
        if proc.returncode == 0:
            return time.monotonic(), attempts
        if time.monotonic() > end:
            raise SetupError(f"tandem primary r0 on bob still refused after {STATE_DEADLINE_S:g} s: "
                             f"{proc.stderr.strip()[:300]}")
        time.sleep(PROMOTE_RETRY_S)


def write_block(ctx, wd, bob_dir, data):
    """nbdcopy of data (one block) to offset 0 of bob's export; returns the instant it finished."""
    src = os.path.join(wd, "block.bin")
    with open(src, "wb") as f:
        f.write(data)
    log = os.path.join(wd, "nbdcopy.log")
    proc = ctx.reaper.spawn(["nbdcopy", src, f"nbd+unix:///r0?socket={bob_dir}/nbd.sock"], log)
    try:
        rc = proc.wait(timeout=WRITE_DEADLINE_S)
    except subprocess.TimeoutExpired as exc:
        raise SetupError(f"nbdcopy to bob did not finish within {WRITE_DEADLINE_S:g} s") from exc
    finally:
        ctx.reaper.stop(proc)
    t_written = time.monotonic()
    if rc != 0:
        raise SetupError(f"nbdcopy to bob: exit {rc}: {procs.tail(log, 5).strip()}")
    return t_written


def on_disk(path, data):
    """True if the backing file at path starts with data."""
    with open(path, "rb") as f:
        return f.read(len(data)) == data


def run_once(ctx, rep, pl):
    """One failover on a fresh pair; returns (row or None, problems)."""
    setup = Setup("pair", size_bytes=pl.image_bytes, net=NET, label="proto-C")
    problems, row = [], None
    try:
        with cluster.Cluster(ctx.reaper, ctx.workdir(NAME, f"r{rep}"), setup) as c:
            client = start_client(ctx, c, rep)
            try:
                before_kib = written_kib(cluster.tandem_status(c.dirs["alice"]))
                t_kill = kill_alice(ctx, c)
                bob = c.dirs["bob"]
                t_detect = wait_detected(bob)
                t_promoted, attempts = promote(bob)
                data = block(rep)
                t_written = write_block(ctx, c.wd, bob, data)
            finally:
                ctx.reaper.stop(client)
            role = (cluster.tandem_status(bob) or {}).get("role")
            row = {"case": "sigkill", "rep": rep, **parts(t_kill, t_detect, t_promoted, t_written),
                   "promote_attempts": attempts, "bob_role": role, "on_bob_disk": on_disk(c.disks[1], data),
                   "client_written_kib_before_kill": before_kib, "ping_int_s": PING_INT_S,
                   "ping_timeout_s": PING_TIMEOUT_DS / 10}
        problems += [f"rep {rep}: {n}" for n in c.notes]
    except (BenchError, OSError) as exc:
        problems.append(f"rep {rep}: FAILED: {str(exc).strip().splitlines()[0][:400]}")
        procs.log(f"{NAME} rep {rep}: FAILED: {exc}")
    if row and not row["on_bob_disk"]:
        problems.append(f"rep {rep}: the 4 KiB block written through bob's export is NOT on bob's backing file")
    if row:
        procs.log(f"  {NAME} rep {rep}: detection {row['detection_s'] * 1000:7.1f} ms, promotion "
                  f"{row['promotion_s'] * 1000:7.1f} ms, first write {row['first_write_s'] * 1000:7.1f} ms, "
                  f"total {row['total_s'] * 1000:7.1f} ms")
    return row, problems


# ----- report -------------------------------------------------------------------------------------

def estimate_s(mode):
    """Rough duration: per repetition a fresh pair, the client's start, the failover, the stop."""
    pl = plan(mode)
    setup_s = common.CASE_SETUP_S_FIXED + common.CASE_SETUP_S_PER_GIB * pl.image_bytes / (1 << 30)
    return pl.reps * (setup_s + REP_OVERHEAD_S)


def summary_lines(rows, n_reps):
    """The parts table (ms) and the sentence on what dominates."""
    summ = summary(rows)
    body = [[PART_LABELS[p]] + [fmt(None if v is None else 1000 * v, 1) for v in summ[p]] for p in PARTS]
    lines = table(["part", "median ms", "min ms", "max ms"], body)
    good = sum(1 for r in rows if r.get("on_bob_disk"))
    lines += ["", f"{good} of {n_reps} repetitions completed with the block verified on bob's backing file."]
    top = dominant(summ)
    if top:
        lines += ["", f"What dominates: **{PART_LABELS[top]}** ({fmt(1000 * summ[top][0], 1)} ms median). "
                  f"SIGKILL ends alice's process, so the kernel closes her TCP connections and bob sees the "
                  f"connection end at once: ping-int ({PING_INT_S} s) and ping-timeout "
                  f"({PING_TIMEOUT_DS / 10:g} s) play no part here. They bound detection only when the Primary "
                  f"goes silent without closing its sockets (power loss, a cut link): then bob notices after up "
                  f"to ping-int + ping-timeout = {PING_INT_S + PING_TIMEOUT_DS / 10:g} s, which would dominate "
                  "such a failover (not measured here)."]
    return lines


def run(ctx):
    """The repetitions, the parts table, the plot."""
    pl = plan(ctx.mode)
    rows, problems = [], []
    for rep in range(1, pl.reps + 1):
        procs.log(f"{NAME}: repetition {rep}/{pl.reps}")
        row, p = run_once(ctx, rep, pl)
        rows += [row] if row else []
        problems += p
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, pl.reps)
    o.method = [
        f"{pl.reps} repetitions, each on a fresh protocol C pair ({fio.human_bytes(pl.image_bytes)} devices, "
        f"`net {{ protocol C; max-buffers 8000; max-epoch-size 8000; ping-int {PING_INT_S}; "
        f"ping-timeout {PING_TIMEOUT_DS}; }}`: DRBD's defaults of 10 s and 0.5 s, written out), alice Primary. "
        "fio writes 4 KiB at QD1 through alice's export; once alice's status shows written data, her node "
        "process gets SIGKILL. On bob, `tandem status --json` is polled without pause until alice is no "
        "longer Connected (**detection**), `tandem primary r0` is retried every 10 ms until it succeeds "
        "(**promotion**), and `nbdcopy` writes one 4 KiB block at offset 0 of bob's export (**first write**: "
        "nbdcopy's start, the NBD handshake, the write, the close). Total = kill to the write's completion, "
        "one monotonic clock. Afterwards the block is read back from bob's backing file.",
        "",
        "Issue 4's promise is a takeover \"within seconds\"; DRBD users expect a failover in seconds, "
        "most of it the cluster manager's detection. Here no cluster manager runs: the promotion is "
        "issued as soon as bob sees the loss, so this is tandem's own share of a failover."]
    o.lines += summary_lines(rows, pl.reps)
    _plot(ctx, o, rows)
    return o


def _plot(ctx, o, rows):
    summ = summary(rows)
    groups = [PART_LABELS[p] for p in PARTS]
    vals = [None if summ[p][0] is None else 1000 * summ[p][0] for p in PARTS]
    errs = [None if summ[p][1] is None else (1000 * summ[p][1], 1000 * summ[p][2]) for p in PARTS]
    common.try_plot(ctx, o, "failover.svg", "failover: median ms per part, whiskers min-max",
                    lambda: svg.bar_chart("failover: SIGKILL of the Primary to the first write on the peer",
                                          "ms (median, min-max)", groups, [("ms", vals, errs)]))
