"""The experiments of issue 6 (and issue 5's srm): the ones the landed features allow, in the order bench/run runs
them, and the pending ones with what each needs.

Invariant: an experiment is either in AVAILABLE (it measures) or in PENDING (it is listed in the
report with what it needs, and no number); never both, and never an estimate.
"""

from .. import seeds
from ..report import Pending
from . import activity_log, buffers, latency_matrix, peers, protocols, resync, small_write, srm, streaming
from .common import Context

AVAILABLE = {m.NAME: m for m in (peers, protocols, streaming, buffers, small_write, resync, activity_log)}
ORDER = ("peers", "protocols", "latency-matrix", "srm", "streaming", "buffers", "small-write-latency", "resync",
         "activity-log")

PENDING = (
    Pending("heterogeneous-disks", "a slow primary with a fast secondary and the reverse",
            seeds.cite("000", "section 4.3"),
            "a throttled backing: a blkio-cgroup-limited loop device or a test-only throttle in tandem's file backend"),
    Pending("bonnie", "bonnie++ on ext4 over tandem through the tuning guide's steps", seeds.cite("004"),
            "the FUSE export (issue 4) and bonnie++ (not installed here)"),
)


def registry(linkemu_binary):
    """(available {name: module}, pending list) given the link emulator binary path or None."""
    available = dict(AVAILABLE)
    pending = list(PENDING)
    for position, module in enumerate((latency_matrix, srm)):
        if linkemu_binary and module.IMPLEMENTED:
            available[module.NAME] = module
        else:
            pending.insert(position, Pending(module.NAME, module.TITLE, module.SEED,
                                             "the link emulator (crate crates/linkemu, binary tandem-linkemu), "
                                             "not committed or not built in this checkout"))
    available = {n: available[n] for n in ORDER if n in available}
    return available, pending
