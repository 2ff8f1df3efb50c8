"""Aggregation of repeated measurements: median and min-max spread, grouped by the columns that
identify a case.

Invariants: pure functions; groups come out in the order their first row went in (never in
hash order), so reports and CSVs are stable for the same input; None values (a metric a run did
not produce) are ignored, and a group with no value for a metric gets None, never 0.
"""

import math


def median(values):
    """Median of the non-None values, or None if there are none."""
    xs = sorted(v for v in values if v is not None)
    n = len(xs)
    if n == 0:
        return None
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


def spread(values):
    """(min, max) of the non-None values, or (None, None)."""
    xs = [v for v in values if v is not None]
    if not xs:
        return (None, None)
    return (min(xs), max(xs))


def group_rows(rows, keys):
    """Groups rows (dicts) by the tuple of their values at `keys`; returns a list of
    (key tuple, [rows]) in first-appearance order."""
    order = []
    groups = {}
    for row in rows:
        k = tuple(row.get(key) for key in keys)
        if k not in groups:
            groups[k] = []
            order.append(k)
        groups[k].append(row)
    return [(k, groups[k]) for k in order]


def aggregate(rows, keys, metrics):
    """One dict per group: the key columns, then for each metric m: m (median), m_min, m_max,
    and n (the number of rows in the group)."""
    out = []
    for k, members in group_rows(rows, keys):
        agg = dict(zip(keys, k))
        agg["n"] = len(members)
        for m in metrics:
            vals = [finite_or_none(r.get(m)) for r in members]
            agg[m] = median(vals)
            agg[m + "_min"], agg[m + "_max"] = spread(vals)
        out.append(agg)
    return out


def finite_or_none(value):
    """value as a float if it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def ratio(numerator, denominator):
    """numerator / denominator, or None if either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def paired_ratios(rows, metric, match, base):
    """Per repetition, the ratio of metric between the row matching `match` and the row matching
    `base` (both dicts of column values) with the same `rep`; returns the list of ratios in
    repetition order. This is how a comparison stays within one repetition."""
    def pick(spec):
        return {r["rep"]: r.get(metric) for r in rows if all(r.get(c) == v for c, v in spec.items())}
    num, den = pick(match), pick(base)
    return [x for x in (ratio(num[i], den.get(i)) for i in sorted(num)) if x is not None]
