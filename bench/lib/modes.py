"""How big and how long: the four run modes of bench/run.

smoke   seconds per experiment, 64 MiB images, one repetition: proves every experiment runs end
        to end (CI). Its numbers mean nothing.
quick   <= 10 minutes on the 2-vCPU development VM: 1 GiB images, 3 s runs, short sweeps, 1 rep.
default (no flag) 5 s runs, full sweeps, 1 repetition.
full    <= 60 minutes: 10 s runs (the peers' 4k runs 10 s as before), full sweeps, 3 repetitions
        in round-robin order, medians with min-max spread.

Invariant: every size and duration an experiment uses comes from its Mode, so --smoke really is
small everywhere; time-based runs get a warm-up (fio ramp_time) except in smoke.
"""

from dataclasses import dataclass

GIB = 1 << 30
MIB = 1 << 20


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


MODES = {
    "smoke": Mode("smoke", reps=1, runtime_s=1, ramp_s=0, image_bytes=64 * MIB, peers_runtime_s=1,
                  max_buffers=(2048, 8000), sndbuf_sizes=("128k", "2M"), small_write_count=500,
                  qemu_mirror=False),
    "quick": Mode("quick", reps=1, runtime_s=3, ramp_s=1, image_bytes=GIB, peers_runtime_s=5,
                  max_buffers=(2048, 4000, 8000, 16000), sndbuf_sizes=("128k", "512k", "2M", "8M"),
                  small_write_count=10000, qemu_mirror=True),
    "default": Mode("default", reps=1, runtime_s=5, ramp_s=1, image_bytes=GIB, peers_runtime_s=10,
                    max_buffers=(2048, 4000, 8000, 16000, 32000),
                    sndbuf_sizes=("128k", "256k", "512k", "1M", "2M", "4M", "8M"),
                    small_write_count=100000, qemu_mirror=True),
    "full": Mode("full", reps=3, runtime_s=8, ramp_s=2, image_bytes=GIB, peers_runtime_s=10,
                 max_buffers=(2048, 4000, 8000, 16000, 32000),
                 sndbuf_sizes=("128k", "256k", "512k", "1M", "2M", "4M", "8M"),
                 small_write_count=100000, qemu_mirror=True),
}
