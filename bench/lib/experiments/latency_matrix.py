"""latency-matrix: added link latency x iodepth x block size x randwrite/write (seed 002),
through the link emulator. Pending: crates/linkemu (tandem-linkemu) was not committed when the
suite was written, so there is no driver yet (IMPLEMENTED is False and registry() lists the
experiment as pending even if an emulator binary exists).

How to add it: run `tandem-linkemu --pair LISTEN=TARGET --delay D` twice (alice -> bob and
bob -> alice), give each node its own drbd.conf in which the peer's address is the relay's
listening address, and sweep D over 0/1/2.5/5/10 ms one way (0/2/5/10/20 ms round trip) x
iodepth 1/8/16/32 x bs 4k..1M x write/randwrite; plot one line chart per block size (x: added
latency, a line per iodepth) with svg.line_chart.
"""

from .. import seeds

NAME = "latency-matrix"
TITLE = "added latency 0/2/5/10/20 ms x iodepth 1/8/16/32 x block size 4k..1M x randwrite/write"
SEED = seeds.cite("002")
IMPLEMENTED = False


def run(ctx):
    """Not available yet: registry() lists this experiment as pending while no emulator exists."""
    raise NotImplementedError(f"{NAME} needs the link emulator; {ctx.mode.name} run cannot measure it")
