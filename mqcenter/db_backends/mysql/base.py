"""Django's MySQL/MariaDB backend, beginning each transaction with one START TRANSACTION.

Django runs a transaction by switching the session's autocommit off and back on: with
mysqlclient that is a `SET autocommit=0` before the first statement and a `SET autocommit=1`
after the COMMIT, two round trips on top of the transaction's own. Every produce, pull and
ack is one short transaction, so those two were two of a produce's seven statements. Here
an atomic block opens an explicit transaction instead, through the hook Django gives SQLite
for the same purpose (`_start_transaction_under_autocommit`), and the session stays in
autocommit: COMMIT or ROLLBACK ends the transaction, and switching autocommit back on is
then a no-op (mysqlclient asks the server only when the session's state differs).

Django uses the hook for `atomic` only: `transaction.set_autocommit(False)` called by hand
still turns the session's autocommit off, as Django documents.
"""

from __future__ import annotations

from django.db.backends.mysql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def _start_transaction_under_autocommit(self) -> None:
        with self.wrap_database_errors, self.connection.cursor() as cursor:
            cursor.execute("START TRANSACTION")
