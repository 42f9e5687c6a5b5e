"""List open transactions, or run the check-back once (what the beat task does)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from messages.transactions.services import transactions_check, transactions_open
from mqcenter.core.auth import Principal


class Command(BaseCommand):
    help = "List open transactional batches (list), or ask their producers about the due ones now (check)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["list", "check"])

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "check":
            self.stdout.write(" ".join(f"{k}={v}" for k, v in transactions_check().items()))
            return
        system = Principal(name="manage.py", scopes=("admin",), biz_ids=None)
        for txn in transactions_open(principal=system):
            self.stdout.write(
                f"{txn.id} {','.join(txn.topics)} messages={len(txn.message_ids)} attempts={txn.attempts} "
                f"next_check_at={txn.next_check_at:%Y-%m-%d %H:%M:%S} {txn.last_error}"
            )
