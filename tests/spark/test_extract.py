"""Reading the Parquet archive: an export written before a column was added to the message
row (`pulled_at`, `handed_to`) still reads, the column as null; the export reads as one
dataset in pyarrow as in Spark."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark import extract
from tests.spark.conftest import _split


def test_an_older_export_without_the_newer_columns_reads_them_as_null(spark_local: Any, tmp_path: Path) -> None:
    folder = tmp_path / "messages" / "day=2026-01-10" / "topic=orders"
    folder.mkdir(parents=True)
    at = datetime(2026, 1, 10, 12, tzinfo=UTC)
    pq.write_table(pa.table({  # the columns of an export written before those two
        "id": [7], "group_name": ["default"], "status": ["SUCCESS"], "attempt": [1],
        "effect_time": [at], "add_time": [at], "update_time": [at],
    }), folder / "part-0.parquet")

    [row] = extract.archived(spark_local, str(tmp_path / "messages"), extract.MESSAGE_SCHEMA).collect()

    assert (row["id"], row["topic"], row["attempt"]) == (7, "orders", 1)
    assert (row["handed_to"], row["lease_owner"], row["pulled_at"]) == (None, None, None)


@pytest.mark.django_db
def test_the_exported_archive_reads_as_one_pyarrow_dataset(stored: dict[str, Any]) -> None:
    """The topic is in the partition folders only, so a topic named "2024" (a number to
    pyarrow's partition inference) does not clash with a string column in the files."""
    import pyarrow.dataset as ds

    root = Path(stored["archive_dir"])
    _live, archived, _purged = _split(stored["world"])
    assert any(m["topic"] == "2024" for m in archived)
    for name in ("messages", "traces"):
        table = pq.read_table(root / name)  # hive partitions inferred, as a reader gets them
        assert table.num_rows > 0 and "topic" in table.column_names
    strings = ds.partitioning(pa.schema([("day", pa.string()), ("topic", pa.string())]), flavor="hive")
    table = ds.dataset(root / "messages", format="parquet", partitioning=strings).to_table()
    got = sorted(zip(table.column("id").to_pylist(), table.column("topic").to_pylist(), strict=True))
    assert got == sorted((m["id"], m["topic"]) for m in archived)
