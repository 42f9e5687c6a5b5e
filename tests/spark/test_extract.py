"""Reading the Parquet archive: the export reads as one dataset in pyarrow as in Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.conftest import _split


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
