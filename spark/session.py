"""The SparkSession: local by default, any cluster by configuration.

SPARK_MASTER picks the master (`local[*]` by default, `spark://host:7077`, `yarn`, `k8s://...`).
MQ_JDBC_JAR points at MariaDB Connector/J (Debian's `libmariadb-java` installs it at the
default path); it is shipped to the executors with `spark.jars`, so a cluster needs nothing
installed besides Spark and Java.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_JDBC_JAR = "/usr/share/java/mariadb-java-client.jar"


def spark_master() -> str:
    return os.environ.get("SPARK_MASTER", "").strip() or DEFAULT_MASTER


def jdbc_jar() -> str:
    return os.environ.get("MQ_JDBC_JAR", "").strip() or DEFAULT_JDBC_JAR


def spark_session(*, master: str | None = None, app_name: str = "mqcenter-reports") -> SparkSession:
    """Return the process's SparkSession, creating it on first use.

    Start-up costs seconds, so one session serves every report of a process (a Celery worker,
    the test session). A master asked for after the session exists is ignored by Spark; the
    first caller decides.
    """
    # Imported here: the settings above are read where PySpark may be missing (the
    # console's quick start says what reports need instead).
    from pyspark.sql import SparkSession

    # Datetimes in the tables are naive UTC (Django's USE_TZ on MySQL): the JVMs and the
    # session must read them as UTC, whatever the machine's zone.
    utc = "-Duser.timezone=UTC"
    builder = (
        SparkSession.builder.master(master or spark_master())
        .appName(app_name)
        .config("spark.jars", jdbc_jar())
        .config("spark.driver.extraJavaOptions", utc)
        .config("spark.executor.extraJavaOptions", utc)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", os.environ.get("SPARK_UI_ENABLED", "false"))
        # Workers and commands log to files: no console progress bars.
        .config("spark.ui.showConsoleProgress", "false")
        # The default of 200 shuffle partitions is meant for clusters; on a laptop-sized
        # local master most of them would be empty tasks.
        .config("spark.sql.shuffle.partitions", os.environ.get("MQ_SPARK_SHUFFLE_PARTITIONS", "4"))
        .config("spark.sql.adaptive.enabled", "true")
        # Archive partitions (day=..., topic=...) stay strings: a topic named "2024" is a name.
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    )
    if os.environ.get("SPARK_DRIVER_MEMORY"):
        builder = builder.config("spark.driver.memory", os.environ["SPARK_DRIVER_MEMORY"])
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    return session
