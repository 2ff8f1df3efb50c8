"""The experiments of issue 6 (and issue 5's srm): the ones the landed features allow, in the order bench/run runs
them, and the pending ones with what each needs.

Invariant: an experiment is either in AVAILABLE (it measures) or in PENDING (it is listed in the
report with what it needs, and no number); never both, and never an estimate. NAMED_ONLY lists,
per mode, the available experiments that run only when named on the command line: issue 6's
experiments fill --quick's 10 minutes, so issue 4's (failover, ext4) are left out of a plain
`bench/run --quick` and listed in its report as such; heterogeneous-disks (six fresh pairs) is
run by name in every mode.
"""

from .. import seeds
from ..report import Pending
from . import (activity_log, bonnie, buffers, cpu, direct_io, ext4, failover, heterogeneous_disks, latency_matrix,
               peers, protocols, resync, small_write, srm, srm_live, streaming)
from .common import Context

AVAILABLE = {m.NAME: m for m in (peers, cpu, direct_io, protocols, streaming, buffers, small_write, resync,
                                  activity_log, heterogeneous_disks, failover, ext4, bonnie)}
ORDER = ("peers", "protocols", "latency-matrix", "srm", "srm-live", "streaming", "buffers", "small-write-latency", "resync",
         "activity-log", "cpu", "direct-io", "heterogeneous-disks", "failover", "ext4", "bonnie")
# heterogeneous-disks (six fresh pairs) does not fit beside the others in any mode's budget.
# cpu (issue 28) runs in a plain --smoke (CI), the default mode and --full (on top of their budgets,
# like issue 4's); --quick's 10 minutes are full, so there it runs by name.
# direct-io (issue 28 item 2, io direct against buffered) runs by name in every mode: it answers
# one question (is O_DIRECT worth it on this machine) and would take --smoke past its budget.
# srm-live (issue 29 item 3, SRM adapting to a link schedule while fio runs) runs in a plain --smoke
# (CI) and the default mode, on top of their budgets like cpu; --quick's 10 minutes are full, and
# --full's 3 alternating repetitions (about 10 minutes) would take it further past its hour, so
# there it runs by name (`bench/run --full srm-live` is how to get repetitions).
NAMED_ONLY = {"smoke": ("heterogeneous-disks", "bonnie", "direct-io"),
              "quick": ("heterogeneous-disks", "failover", "ext4", "bonnie", "cpu", "direct-io", "srm-live"),
              "default": ("direct-io",),
              "full": ("heterogeneous-disks", "bonnie", "direct-io", "srm-live")}

PENDING = (
)


def registry(linkemu_binary):
    """(available {name: module}, pending list) given the link emulator binary path or None."""
    available = dict(AVAILABLE)
    pending = list(PENDING)
    for position, module in enumerate((latency_matrix, srm, srm_live)):
        if linkemu_binary and module.IMPLEMENTED:
            available[module.NAME] = module
        else:
            pending.insert(position, Pending(module.NAME, module.TITLE, module.SEED,
                                             "the link emulator (crate crates/linkemu, binary tandem-linkemu), "
                                             "not committed or not built in this checkout"))
    available = {n: available[n] for n in ORDER if n in available}
    return available, pending


def default_selection(names, mode_name):
    """The experiments a run without names executes: names less the mode's NAMED_ONLY."""
    return [n for n in names if n not in NAMED_ONLY.get(mode_name, ())]


def named_only_pending(names, mode_name):
    """Pending entries for the available experiments a plain run of this mode leaves out."""
    left = [n for n in names if n in NAMED_ONLY.get(mode_name, ())]
    return [Pending(n, AVAILABLE[n].TITLE, AVAILABLE[n].SEED,
                    f"not in a plain `bench/run --{mode_name}` (the mode's time budget is taken by the other experiments); "
                    f"run it by name: `bench/run --{mode_name} {n}`") for n in left]
