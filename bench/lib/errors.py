"""The suite's one exception hierarchy. Every failure bench/run can report is one of these;
anything else escaping is a bug in the suite.
"""


class BenchError(Exception):
    """A benchmark step failed; the message says which and why. Base of the others."""


class FioParseError(BenchError):
    """fio's output was not the JSON document expected (truncated, no write job, error set)."""


class PlotError(BenchError):
    """A chart was asked for with no data, mismatched lengths or non-finite values."""


class SetupError(BenchError):
    """A node, export or tool could not be started or did not reach the wanted state."""
