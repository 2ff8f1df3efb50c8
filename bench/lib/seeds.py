"""Citations of the five seed documents (../shared/seeds) that every experiment reproduces.

Invariant: the titles are written here, not read from ../shared, so a report can be produced on
a machine without the shared directory; the file names match /work/shared/seeds/README.md.
"""

SEEDS = {
    "000": ("Selective Replication Manager (SRM): a paper on adaptive replication on top of DRBD",
            "000_3468a18bd548d42c.txt"),
    "001": ("More DRBD Performance tests (etbe's blog, a mail-server workload)", "001_3cc44a8f90d8b3ae.txt"),
    "002": ("The Impact of Network Latency on Write Performance When Using DRBD (LINBIT blog)",
            "002_62c76bd603baa06d.txt"),
    "003": ("Replication Speed and CPU Efficiency Improvements in DRBD 9.3.1 (LINBIT blog)",
            "003_4b2c13fbec04c25e.txt"),
    "004": ("Tuning DRBD on a Linux System: A Practical Guide for Engineers", "004_6f30b477539c3d8c.txt"),
}


def cite(number, where=""):
    """'seed 003, "Title" (shared/seeds/003_….txt)[, where]' for a report line."""
    title, path = SEEDS[number]
    extra = f", {where}" if where else ""
    return f'seed {number}, "{title}" (`shared/seeds/{path}`){extra}'
