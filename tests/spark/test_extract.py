"""Reading the Parquet archive: a part file without some of the message schema's columns
reads them as null."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark import extract


def test_a_part_file_without_some_columns_reads_them_as_null(spark_local: Any, tmp_path: Path) -> None:
    folder = tmp_path / "messages" / "day=2026-01-10" / "topic=orders"
    folder.mkdir(parents=True)
    at = datetime(2026, 1, 10, 12, tzinfo=UTC)
    pq.write_table(pa.table({  # no topic (it is the partition), handed_to, lease_owner, pulled_at
        "id": [7], "group_name": ["default"], "status": ["SUCCESS"], "attempt": [1],
        "effect_time": [at], "add_time": [at], "update_time": [at],
    }), folder / "part-0.parquet")

    [row] = extract.archived(spark_local, str(tmp_path / "messages"), extract.MESSAGE_SCHEMA).collect()

    assert (row["id"], row["topic"], row["attempt"]) == (7, "orders", 1)
    assert (row["handed_to"], row["lease_owner"], row["pulled_at"]) == (None, None, None)
