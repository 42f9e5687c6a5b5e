"""What the Spark reports need, checked before a run starts: a failing button or a run that
hangs on a missing part says less than a sentence naming the part.

Each check answers with the problem in words, or nothing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections

from spark.session import jdbc_jar

CONNECT_TIMEOUT = 3.0


def report_requirements_missing() -> list[str]:
    """What this installation lacks to run reports at all (none: it can)."""
    problems = reports_not_set_up()
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        problems.append("Java is not installed (Spark needs Java 17; set JAVA_HOME or put java on the PATH)")
    jar = jdbc_jar()
    if "://" not in jar and not os.path.isfile(jar):
        problems.append(
            f"the MariaDB JDBC driver is not at {jar}: install libmariadb-java (Debian) or set MQ_JDBC_JAR"
        )
    return problems


def reports_not_set_up() -> list[str]:
    """Why this installation was never set up for reports: PySpark not installed, or no
    MySQL/MariaDB to read (the quick start on SQLite). Unlike a missing Java or JDBC driver on
    an installation that has both, that is a choice, not a breakage."""
    problems = []
    if importlib.util.find_spec("pyspark") is None:
        problems.append("PySpark is not installed: pip install -e '.[spark]' (PySpark 4.0 and matplotlib)")
    if not settings.MQ_REPORT_JDBC_URL and connections["default"].vendor != "mysql":
        problems.append(
            "the reports read MySQL/MariaDB over JDBC, and this installation runs on "
            f"{connections['default'].vendor}: set DATABASE_URL=mysql://... or MQ_REPORT_JDBC_URL"
        )
    return problems


def report_master_problem(master: str) -> str | None:
    """A standalone master (spark://host:port) that does not accept a connection."""
    if not master.startswith("spark://"):
        return None  # local[*] needs nothing; yarn and k8s:// are checked by Spark itself
    for address in master[len("spark://"):].split(","):
        parts = urlsplit(f"//{address}")
        try:
            with socket.create_connection((parts.hostname or "", parts.port or 7077), timeout=CONNECT_TIMEOUT):
                return None
        except OSError as exc:
            problem = f"the Spark master {master} cannot be reached: {exc.strerror or exc}"
    return problem
