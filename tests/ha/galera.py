"""The Galera cluster of the HA lane (`scripts/galera.sh`), as tests drive it: which node
takes writes, SIGKILL a node, start it again, read a node's wsrep status."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "galera.sh"
HAPROXY_PORT = int(os.environ.get("MQ_HAPROXY_PORT", "4300"))
FIRST_NODE_PORT = int(os.environ.get("MQ_GALERA_PORT", "4306"))


def run(*args: str, timeout: float = 240) -> str:
    result = subprocess.run([str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"galera.sh {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout.strip()


def node_port(node: int) -> int:
    return FIRST_NODE_PORT + node - 1


def writer() -> int:
    """The node HAProxy sends connections to now (1, 2 or 3)."""
    name = run("writer", timeout=30)
    assert name.startswith("node"), f"HAProxy reaches no node: {name}"
    return int(name.removeprefix("node"))


def kill(node: int) -> None:
    run("kill-node", str(node), timeout=60)


def restart(node: int) -> None:
    """Start `node` again; returns once it is Synced with the cluster."""
    run("restart-node", str(node))


def status(node: int, *names: str) -> dict[str, str]:
    """Global status variables of one node, read on that node."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", port=node_port(node), user="root", connect_timeout=3)
    try:
        cur = conn.cursor()
        marks = ", ".join(["%s"] * len(names))
        cur.execute(f"SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                    f"WHERE LOWER(VARIABLE_NAME) IN ({marks})", names)
        return dict(cur.fetchall())
    finally:
        conn.close()


def conflicts(nodes: tuple[int, ...] = (1, 2, 3)) -> int:
    """Transactions the cluster rolled back for a write conflict so far: certification
    failures at commit plus local transactions aborted by a replicated one (brute force)."""
    total = 0
    for node in nodes:
        values = status(node, "wsrep_local_cert_failures", "wsrep_local_bf_aborts")
        total += sum(int(v) for v in values.values())
    return total
