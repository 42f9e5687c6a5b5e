"""Reading the Parquet archive: an export written before a column was added to the message
row (`pulled_at`, session 14; `handed_to`, session 12) still reads, the column as null."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark import extract


def test_an_older_export_without_the_newer_columns_reads_them_as_null(spark_local: Any, tmp_path: Path) -> None:
    folder = tmp_path / "messages" / "day=2026-01-10" / "topic=orders"
    folder.mkdir(parents=True)
    at = datetime(2026, 1, 10, 12, tzinfo=UTC)
    pq.write_table(pa.table({  # the columns of an export from before sessions 12 and 14
        "id": [7], "group_name": ["default"], "status": ["SUCCESS"], "attempt": [1],
        "effect_time": [at], "add_time": [at], "update_time": [at],
    }), folder / "part-0.parquet")

    [row] = extract.archived(spark_local, str(tmp_path / "messages"), extract.MESSAGE_SCHEMA).collect()

    assert (row["id"], row["topic"], row["attempt"]) == (7, "orders", 1)
    assert (row["handed_to"], row["lease_owner"], row["pulled_at"]) == (None, None, None)
