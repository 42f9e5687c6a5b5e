"""Django's MySQL/MariaDB backend, with two round trips less per request.

**One START TRANSACTION per transaction.** Django runs a transaction by switching the
session's autocommit off and back on: with mysqlclient that is a `SET autocommit=0` before
the first statement and a `SET autocommit=1` after the COMMIT, two round trips on top of the
transaction's own. Every produce, pull and ack is one short transaction, so those two were
two of a produce's six statements. Here an atomic block opens an explicit transaction
instead, through the hook Django gives SQLite for the same purpose
(`_start_transaction_under_autocommit`), and the session stays in autocommit: COMMIT or
ROLLBACK ends the transaction, and switching autocommit back on is then a no-op (mysqlclient
asks the server only when the session's state differs). Django uses the hook for `atomic`
only: `transaction.set_autocommit(False)` called by hand still turns the session's
autocommit off, as Django documents.

**A health check that asks the socket first.** With CONN_HEALTH_CHECKS, Django pings the
server before the first query of every request, to replace a connection the server closed
(a restart, wait_timeout, KILL) instead of failing the request on it. A server that closes
a connection sends something first (an error packet, or just the end of the stream), and an
idle healthy connection never has anything to read. So a connection with nothing to read is
usable without a round trip, and one with something to read is pinged as before. After
an error in a request, Django's own check (a ping) decides, as before.
"""

from __future__ import annotations

import select

from django.db.backends.mysql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def _start_transaction_under_autocommit(self) -> None:
        with self.wrap_database_errors, self.connection.cursor() as cursor:
            cursor.execute("START TRANSACTION")

    def close_if_health_check_failed(self) -> None:
        # Only the per-request check: after an error Django pings through is_usable() as before.
        due = self.connection is not None and self.health_check_enabled and not self.health_check_done
        if due and self._nothing_to_read():
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _nothing_to_read(self) -> bool:
        try:
            fd = self.connection.fileno()
            if fd < 0:
                return False
            poller = select.poll()  # not select(): a broker holds more than 1,024 sockets
            poller.register(fd, select.POLLIN)
            return not poller.poll(0)  # also reports a reset or hang-up (POLLERR, POLLHUP)
        except (OSError, ValueError, base.Database.Error):
            return False
