"""latency-matrix: added link latency x iodepth x block size x randwrite/write (seed 002),
through the link emulator. Pending until crates/linkemu (tandem-linkemu) lands.
"""

from .. import seeds

NAME = "latency-matrix"
TITLE = "added latency 0/2/5/10/20 ms x iodepth 1/8/16/32 x block size 4k..1M x randwrite/write"
SEED = seeds.cite("002")


def run(ctx):
    """Not available yet: registry() lists this experiment as pending while no emulator exists."""
    raise NotImplementedError(f"{NAME} needs the link emulator; {ctx.mode.name} run cannot measure it")
