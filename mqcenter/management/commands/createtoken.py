"""Issue an API token: `manage.py createtoken --biz shop --scope 'produce:orders.*'`.

Prints the token alone on stdout (it is shown once and stored only as a hash).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mqcenter.core.errors import MQError
from topics.models import Biz
from topics.services import token_create


class Command(BaseCommand):
    help = "Create an API token and print it on stdout."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--biz", help="business line the token belongs to (created if missing); omit for a global token")
        parser.add_argument("--scope", action="append", default=[], help="produce:<glob>, consume:<glob> or admin; repeatable")
        parser.add_argument("--name", default="", help="a label for the token")

    def handle(self, *args: Any, **options: Any) -> None:
        biz = None
        if options["biz"]:
            biz, _ = Biz.objects.get_or_create(name=options["biz"])
        try:
            token, _row = token_create(actor="manage.py createtoken", scopes=options["scope"], biz=biz, name=options["name"])
        except MQError as err:
            raise CommandError(err.message) from err
        self.stdout.write(token)
