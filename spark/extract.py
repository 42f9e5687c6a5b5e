"""Extract: the live tables over JDBC in id-range partitions, and the archive as Parquet.

Each JDBC partition is one `WHERE id >= a AND id < b` range query on the primary key, so
the database answers many short range scans instead of one huge query, and Spark reads them
in parallel. Only the columns the reports use are read (never the message bodies).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

MESSAGE_TABLE = "mq_message"
# Finished messages past retention move here (same columns, same id); Parquet holds what
# was purged from it.
ARCHIVE_TABLE = "mq_message_archive"
TRACE_TABLE = "mq_message_trace"

MESSAGE_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("topic", T.StringType()),
        T.StructField("group_name", T.StringType()),
        T.StructField("status", T.StringType()),
        T.StructField("attempt", T.IntegerType()),
        T.StructField("effect_time", T.TimestampType()),
        T.StructField("add_time", T.TimestampType()),
        T.StructField("update_time", T.TimestampType()),
        # With pulled_at, the "pulled" event a row holds, and with status, attempt and update_time
        # a first delivery's "acked" event (see `trace.row_pulls`, `trace.row_acks`).
        T.StructField("lease_owner", T.StringType()),
        T.StructField("pulled_at", T.TimestampType()),
        # A copy's (replay, archive redrive, move): when it was made; it enters the heap then.
        T.StructField("copied_at", T.TimestampType()),
    ]
)
TRACE_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("message_id", T.LongType()),
        T.StructField("event", T.StringType()),
        T.StructField("actor", T.StringType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("attempt", T.IntegerType()),
        T.StructField("status_after", T.StringType()),
        T.StructField("log", T.StringType()),
    ]
)
# Logs are read where a report uses them (a failure's reason, a retry's time, a cancel
# before a commit), and only
# their first characters: logs may hold 4000.
LOG_CHARS = 500
LOGGED_EVENTS = ("nacked", "retry_scheduled", "lease_expired", "cancelled")
TRACE_SQL_COLUMNS = (
    "id, message_id, event, actor, at, attempt, status_after, "
    f"CASE WHEN event IN ({', '.join(repr(e) for e in LOGGED_EVENTS)}) THEN SUBSTRING(log, 1, {LOG_CHARS}) "
    "ELSE '' END AS log"
)
MESSAGE_SQL_COLUMNS = (
    "id, topic, group_name, status, attempt, effect_time, add_time, update_time, lease_owner, pulled_at, copied_at"
)


@dataclass(frozen=True)
class JdbcSource:
    """Where the live tables are: a JDBC URL (jdbc:mariadb://host:port/db) and credentials."""

    url: str
    user: str = ""
    password: str = ""
    driver: str = "org.mariadb.jdbc.Driver"
    partitions: int = 8
    fetch_size: int = 10000
    connect_timeout_ms: int = 5000

    def spark_url(self) -> str:
        """The URL as Spark needs it: Spark picks its MySQL dialect (backquoted identifiers)
        only for `jdbc:mysql:` URLs, and Connector/J 3 accepts that scheme only with
        `permitMysqlScheme`."""
        url = self.url
        if url.startswith("jdbc:mariadb:"):
            url = "jdbc:mysql:" + url[len("jdbc:mariadb:") :]
        if url.startswith("jdbc:mysql:") and "permitMysqlScheme" not in url:
            url += ("&" if "?" in url else "?") + "permitMysqlScheme"
        return url

    def options(self) -> dict[str, str]:
        options = {
            "url": self.spark_url(),
            "driver": self.driver,
            "fetchsize": str(self.fetch_size),
            # Connector/J properties: an unreachable database fails fast instead of hanging.
            "connectTimeout": str(self.connect_timeout_ms),
        }
        if self.user:
            options["user"] = self.user
        if self.password:
            options["password"] = self.password
        return options


def sql_datetime(value: datetime) -> str:
    """A SQL literal for a naive UTC datetime (built from a datetime, never from user text)."""
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    return "'" + value.strftime("%Y-%m-%d %H:%M:%S.%f") + "'"


def _id_bounds(spark: SparkSession, source: JdbcSource, table: str) -> tuple[int, int] | None:
    # MIN/MAX of the primary key: answered from the index ends, instant at any size.
    row = (
        spark.read.format("jdbc")
        .options(**source.options())
        .option("query", f"SELECT MIN(id) AS lo, MAX(id) AS hi FROM {table}")  # noqa: S608 - table is a constant
        .load()
        .first()
    )
    if row is None or row["lo"] is None:
        return None
    return int(row["lo"]), int(row["hi"])


def jdbc_rows(
    spark: SparkSession, source: JdbcSource, *, table: str, columns: str, where: str
) -> DataFrame:
    """Read `SELECT columns FROM table WHERE where` in `source.partitions` id ranges."""
    reader = spark.read.format("jdbc").options(**source.options())
    # Table and columns are constants; `where` is built from datetimes (sql_datetime).
    subquery = f"(SELECT {columns} FROM {table} WHERE {where}) AS src"  # noqa: S608
    bounds = _id_bounds(spark, source, table)
    if bounds is None or source.partitions <= 1:
        return reader.option("dbtable", subquery).load()
    lo, hi = bounds
    return (
        reader.option("dbtable", subquery)
        .option("partitionColumn", "id")
        .option("lowerBound", str(lo))
        .option("upperBound", str(hi + 1))
        .option("numPartitions", str(max(1, min(source.partitions, hi - lo + 1))))
        .load()
    )


def live_messages(
    spark: SparkSession, source: JdbcSource, *, where: str, table: str = MESSAGE_TABLE
) -> DataFrame:
    df = jdbc_rows(spark, source, table=table, columns=MESSAGE_SQL_COLUMNS, where=where)
    return conform(df, MESSAGE_SCHEMA)


def live_traces(spark: SparkSession, source: JdbcSource, *, where: str) -> DataFrame:
    df = jdbc_rows(spark, source, table=TRACE_TABLE, columns=TRACE_SQL_COLUMNS, where=where)
    return conform(df, TRACE_SCHEMA)


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """Select and cast to the reports' schema, so every source unions by name. A column a
    source lacks reads as null."""
    return df.select(*[
        (F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ])


def archived(spark: SparkSession, path: str | None, schema: T.StructType) -> DataFrame:
    """The archived rows under `path` (Parquet, partitioned by day and topic), or none.

    The archive is optional: without a directory, or before the first export, the reports
    read the live tables only.
    """
    if not path or not _has_parquet(path):
        return spark.createDataFrame([], schema)
    # Days exported before a column was added lack it: merge the files' schemas.
    df = spark.read.option("basePath", path).option("mergeSchema", "true").parquet(path)
    if "log" in schema.fieldNames() and "log" in df.columns:
        df = df.withColumn(
            "log", F.when(F.col("event").isin(*LOGGED_EVENTS), F.substring("log", 1, LOG_CHARS)).otherwise("")
        )
    return conform(df, schema)


def _has_parquet(path: str) -> bool:
    if "://" in path:
        return True  # a cluster file system (hdfs://, s3a://): let Spark look
    for _root, _dirs, files in os.walk(path):
        if any(name.endswith(".parquet") for name in files):
            return True
    return False


def union_unique(*sources: DataFrame) -> DataFrame:
    """Rows of every source, each id once: the first source that has an id wins.

    Archiving copies rows before it deletes them, so for a moment a row can be in two
    places; the livelier copy (listed first) wins.
    """
    result = sources[0]
    for more in sources[1:]:
        result = result.unionByName(more.join(result.select("id"), on="id", how="left_anti"))
    return result
