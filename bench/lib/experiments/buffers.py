"""buffers: the max-buffers sweep and the sndbuf-size sweep of seed 000 (sections 4.4 and 4.5),
sequential and random 4 KiB writes on a 1 GiB device at queue depth 16, protocol C.

Invariants: one option varies per case, everything else is held fixed (max-buffers sweep:
sndbuf-size left at its default, i.e. kernel autotuning; sndbuf-size sweep: max-buffers 8000);
max-epoch-size is 8000 throughout so it never caps an epoch before max-buffers does.
"""

from .. import seeds, svg
from ..cluster import Setup
from ..fio import Job
from ..report import Outcome, cell, table
from . import common

NAME = "buffers"
TITLE = "max-buffers and sndbuf-size sweeps, sequential and random 4 KiB writes"
SEED = seeds.cite("000", "sections 4.4 (max-buffers) and 4.5 (TCP send buffer)")
METRICS = ("mib_s", "iops", "clat_mean_us", "alice_cpu_pct", "bob_cpu_pct")


def cases(mode):
    """One Case per swept value, max-buffers first."""
    out = []
    for mb in mode.max_buffers:
        net = (("max-buffers", str(mb)), ("max-epoch-size", "8000"))
        out.append(common.Case(f"max-buffers {mb}", Setup("pair", net=net, size_bytes=mode.image_bytes),
                               (("sweep", "max-buffers"), ("value", str(mb)))))
    for sb in mode.sndbuf_sizes:
        net = (("max-buffers", "8000"), ("max-epoch-size", "8000"), ("sndbuf-size", sb))
        out.append(common.Case(f"sndbuf-size {sb}", Setup("pair", net=net, size_bytes=mode.image_bytes),
                               (("sweep", "sndbuf-size"), ("value", sb))))
    return out


def jobs(m):
    """seq-4k-qd16 and rand-4k-qd16, time-based."""
    return [Job("seq-4k-qd16", "write", "4k", 16, m.image_bytes, m.runtime_s, m.ramp_s),
            Job("rand-4k-qd16", "randwrite", "4k", 16, m.image_bytes, m.runtime_s, m.ramp_s)]


def estimate_s(mode):
    """Rough duration in seconds."""
    return common.estimate_s(mode, cases(mode), jobs(mode))


def run(ctx):
    """Measures every swept value; a table and a bar chart per sweep."""
    m = ctx.mode
    js, cs = jobs(m), cases(m)
    rows, problems, checks = common.measure(ctx, NAME, cs, js)
    o = Outcome(NAME, TITLE, SEED, rows=rows, problems=problems)
    o.status = common.status_of(rows, problems, len(js) * len(cs) * m.reps)
    o.method = [f"Protocol C on loopback, fresh nodes per value, fio nbd engine: {'; '.join(j.describe() for j in js)}, "
                f"on a {m.image_bytes >> 20} MiB preallocated device (the paper: Iozone on a 1 GiB file). "
                "In tandem, max-buffers bounds the Secondary's received-but-unwritten data (4 KiB pages) and "
                "sndbuf-size sets SO_SNDBUF on the peer sockets (0, the default, leaves it to the kernel). "
                "The max-buffers sweep leaves sndbuf-size at its default; the sndbuf-size sweep uses max-buffers 8000."]
    aggs = common.aggregate(rows, ["sweep", "value", "workload"], METRICS)
    for sweep in ("max-buffers", "sndbuf-size"):
        part = [a for a in aggs if a["sweep"] == sweep]
        values = list(dict.fromkeys(a["value"] for a in part))
        body = [[v] + [cell(_find(part, v, j.name), k, d, m.reps) for j in js for k, d in (("mib_s", 1), ("clat_mean_us", 0))]
                for v in values]
        heads = [sweep] + [f"{j.name} {h}" for j in js for h in ("MiB/s", "mean µs")]
        o.lines += [f"{sweep} sweep:", ""] + table(heads, body) + [""]
        file_name = f"buffers-{sweep}.svg"
        common.try_plot(ctx, o, file_name, f"{sweep} sweep",
                        lambda part=part, sweep=sweep: svg.bar_chart(
                            f"buffers: {sweep} sweep (protocol C, 4 KiB QD16)", "MiB/s",
                            *common.bars(part, "value", "workload", "mib_s")))
    o.lines += common.replica_lines(checks)
    return o


def _find(aggs, value, workload):
    return next((a for a in aggs if a["value"] == value and a["workload"] == workload), {})
