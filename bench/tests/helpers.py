"""Shared test helpers: puts bench/ on sys.path so `lib` imports, and locates the fixtures.

The fixtures are real fio 3.33 JSON outputs recorded on the development VM: a 1 MiB sequential
QD1 run through tandem protocol C, a 4 KiB random QD32 run through nbdkit's file plugin (both
from bench/results/2026-11-22-spine-final) and a 512-byte write run with --fsync=1 against
nbdkit's memory plugin. `metrics-srm.txt` is alice's Prometheus exposition (`metrics-address`)
of an idle `srm on` pair behind the link emulator, recorded for srm-live's parser.
"""

import os
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(BENCH, "tests", "fixtures")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)


def fixture(name):
    """The text of a fixture file."""
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()
