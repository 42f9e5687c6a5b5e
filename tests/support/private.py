"""Private MariaDB and Redis servers that a fault test may stop and start at will.

The machine's shared services stay untouched, so other tests (and other people's runs)
never see the outage a fault test causes.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.server import free_port


class PrivateMariaDB:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mq-mariadb-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def install(self) -> PrivateMariaDB:
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.dir / 'data'}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            check=True, capture_output=True, timeout=120,
        )
        return self

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["/usr/sbin/mariadbd", "--no-defaults", f"--datadir={self.dir / 'data'}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.dir / 'mysqld.sock'}", "--user=root",
             "--skip-log-bin", "--innodb-buffer-pool-size=64M", "--max-connections=500",
             f"--log-error={self.dir / 'error.log'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.ping():
                return
            time.sleep(0.2)
        raise RuntimeError(f"private MariaDB did not start: {(self.dir / 'error.log').read_text()[-2000:]}")

    def ping(self) -> bool:
        return subprocess.run(
            ["mysqladmin", "-h127.0.0.1", f"-P{self.port}", "-uroot", "--connect-timeout=1", "ping"],
            capture_output=True,
        ).returncode == 0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self.proc = None

    def destroy(self) -> None:
        self.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True).stdout.strip() == b"PONG":
                return
            time.sleep(0.1)
        raise RuntimeError("private Redis did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
