"""One CSV file per experiment: one row per measurement (case x workload x repetition).

Invariants: columns are the union of the rows' keys in first-appearance order, so the header is
stable for the same rows; a missing value is an empty cell; floats are written with up to 6
significant digits after the point trimmed of noise (repr of round(x, 6)); nested values (dicts,
lists) are not allowed in a row and raise BenchError.
"""

import csv
import io

from .errors import BenchError


def columns(rows):
    """The header: every key of every row, in first-appearance order."""
    seen = []
    for row in rows:
        for key in row:
            if key not in seen:
                seen.append(key)
    return seen


def cell(value):
    """The text of one CSV cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    if isinstance(value, (int, str)):
        return str(value)
    raise BenchError(f"CSV cell cannot hold a {type(value).__name__}: {value!r}")


def to_csv(rows):
    """The CSV document for rows (a list of flat dicts), as a string with \\n line ends."""
    cols = columns(rows)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    for row in rows:
        writer.writerow([cell(row.get(c)) for c in cols])
    return buf.getvalue()


def write_csv(path, rows):
    """Writes rows to path; returns the number of data rows."""
    text = to_csv(rows)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return len(rows)
