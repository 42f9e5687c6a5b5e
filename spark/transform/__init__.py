"""Pure transforms: DataFrames in, DataFrames out; no I/O, no Django."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

# Exact nearest-rank percentiles up to this many values per group, a bounded-error sketch
# beyond it (Spark's percentile_approx): memory stays flat at any volume.
PERCENTILE_ACCURACY = 100000
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def seconds_between(later: str, earlier: str) -> Column:
    """`later - earlier` in seconds (fractional), for two timestamp columns."""
    return F.col(later).cast("double") - F.col(earlier).cast("double")


def percentile_columns(column: str, prefix: str) -> list[Column]:
    return [
        F.percentile_approx(column, fraction, PERCENTILE_ACCURACY).alias(f"{prefix}_{name}")
        for name, fraction in PERCENTILES
    ]


KEYS = ["topic", "group_name"]
