"""How big and how long: the four run modes of bench/run.

smoke   seconds per experiment, 64 MiB images, one repetition: proves every experiment runs end
        to end (CI). Its numbers mean nothing.
quick   <= 10 minutes on the 2-vCPU development VM: 1 GiB images, 3 s runs, short sweeps and
        a reduced latency matrix, 1 rep.
default (no flag) 5 s runs, full sweeps, 1 repetition.
full    <= 60 minutes: 6 s runs (the peers' 4k runs 10 s as before), full sweeps, 3 repetitions
        in round-robin order, medians with min-max spread.

latency-matrix has its own grid (Matrix): its full grid is 240 cells, so it runs every cell
once even in --full (3 repetitions would take it past the hour on the 2-vCPU VM); the report
says so. srm has its own grid too (SrmGrid), one repetition per cell: --smoke 0/5 ms, --quick
0/20 ms with three jobs on 256 MiB images, default the five latencies with 4 KiB randwrite at
every iodepth plus 1M write QD8, --full seed 002's whole matrix (the issue's "full matrix on
request"), which alone takes about 37 minutes and so takes --full past its hour. srm-live's
link schedule has five segments of live_segment_s each (1 s in --smoke, 6 s in --quick, 10 s
otherwise), on srm's image size.

Invariant: every size and duration an experiment uses comes from its Mode, so --smoke really is
small everywhere; time-based runs get a warm-up (fio ramp_time) except in smoke.
"""

from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20
ALL_PATTERNS = tuple((rw, bs) for bs in ("4k", "16k", "32k", "64k", "128k", "1M") for rw in ("randwrite", "write"))
ALL_LATENCIES_MS = (0, 2, 5, 10, 20)
ALL_IODEPTHS = (1, 8, 16, 32)
# --quick's latency matrix keeps three points: srm measures protocol C at 0 and +20 ms with the
# same patterns in the same run, and both must fit quick's 10 minutes.
QUICK_MATRIX_LATENCIES_MS = (0, 5, 20)


@dataclass(frozen=True)
class Matrix:
    """The latency-matrix grid: added round trips (ms), iodepths, (rw, bs) patterns, run length."""

    latencies_ms: tuple
    iodepths: tuple
    patterns: tuple
    runtime_s: int
    ramp_s: int
    reps: int = 1


@dataclass(frozen=True)
class SrmGrid:
    """The srm grid: added round trips (ms), jobs as (rw, bs, iodepth), run length, warm-up
    (at least 2 s outside smoke, so the manager settles before fio measures) and image size."""

    latencies_ms: tuple
    jobs: tuple
    runtime_s: int
    ramp_s: int
    image_bytes: int


SRM_FULL_JOBS = tuple((rw, bs, qd) for bs in ("4k", "16k", "64k", "1M") for rw in ("randwrite", "write")
                      for qd in ALL_IODEPTHS)
SRM_DEFAULT_JOBS = tuple(("randwrite", "4k", qd) for qd in (32, 16, 8, 1)) + (("write", "1M", 8),)


@dataclass(frozen=True)
class Mode:
    """Sizes and durations for one run mode (see the module comment)."""

    name: str
    reps: int
    runtime_s: int
    ramp_s: int
    image_bytes: int
    peers_runtime_s: int
    max_buffers: tuple
    sndbuf_sizes: tuple
    small_write_count: int
    qemu_mirror: bool
    matrix: tuple = ()
    protocols_rtt_ms: float = 5.0
    srm: SrmGrid = None
    live_segment_s: int = 10


MODES = {
    "smoke": Mode("smoke", reps=1, runtime_s=1, ramp_s=0, image_bytes=64 * MIB, peers_runtime_s=1,
                  max_buffers=(2048, 8000), sndbuf_sizes=("128k", "2M"), small_write_count=500,
                  qemu_mirror=False, matrix=Matrix((0, 5), (1, 8), (("randwrite", "4k"),), 1, 0),
                  srm=SrmGrid((0, 5), (("randwrite", "4k", 32), ("randwrite", "4k", 1)), 1, 0, 64 * MIB),
                  live_segment_s=1),
    "quick": Mode("quick", reps=1, runtime_s=3, ramp_s=1, image_bytes=GIB, peers_runtime_s=5,
                  max_buffers=(2048, 8000, 16000), sndbuf_sizes=("128k", "2M", "8M"),
                  small_write_count=10000, qemu_mirror=True,
                  matrix=Matrix(QUICK_MATRIX_LATENCIES_MS, (1, 32), (("randwrite", "4k"),), 2, 1),
                  srm=SrmGrid((0, 20), (("randwrite", "4k", 32), ("randwrite", "4k", 1), ("write", "1M", 8)), 2, 2,
                              256 * MIB), live_segment_s=6),
    "default": Mode("default", reps=1, runtime_s=5, ramp_s=1, image_bytes=GIB, peers_runtime_s=10,
                    max_buffers=(2048, 4000, 8000, 16000, 32000),
                    sndbuf_sizes=("128k", "256k", "512k", "1M", "2M", "4M", "8M"),
                    small_write_count=100000, qemu_mirror=True,
                    matrix=Matrix(ALL_LATENCIES_MS, ALL_IODEPTHS, ALL_PATTERNS, 3, 1),
                    srm=SrmGrid(ALL_LATENCIES_MS, SRM_DEFAULT_JOBS, 3, 2, GIB)),
    "full": Mode("full", reps=3, runtime_s=6, ramp_s=1, image_bytes=GIB, peers_runtime_s=10,
                 max_buffers=(2048, 4000, 8000, 16000, 32000),
                 sndbuf_sizes=("128k", "256k", "512k", "1M", "2M", "4M", "8M"),
                 small_write_count=100000, qemu_mirror=True,
                 matrix=Matrix(ALL_LATENCIES_MS, ALL_IODEPTHS, ALL_PATTERNS, 2, 1),
                 srm=SrmGrid(ALL_LATENCIES_MS, SRM_FULL_JOBS, 2, 2, GIB)),
}
