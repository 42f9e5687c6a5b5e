"""Time every console list page against a seeded database (bench/console_seed.py).

    .venv/bin/python bench/console_seed.py --database mq_bench_console --rows 1000000
    .venv/bin/python bench/console_bench.py --database mq_bench_console

Requests go through Django's full stack in-process (middleware, view, selectors, template
rendering) as a signed-in admin and as an operator limited to one business line; each page
is fetched once to warm up, then REPEAT times. Prints median and worst milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPEAT = 7


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="mq_bench_console")
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--snapshot", action="store_true",
                        help="take the flush job's backlog snapshot first (as beat does every minute)")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = f"mysql://root@127.0.0.1:3306/{args.database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "*")
    import django

    django.setup()
    import re

    from django.contrib.auth.models import User
    from django.test import Client

    from messages.models import Message
    from mqcenter.models import ConsoleGrant
    from topics.models import Biz

    admin, _ = User.objects.get_or_create(username="bench-admin", defaults={"is_superuser": True, "is_staff": True})
    operator, created = User.objects.get_or_create(username="bench-operator")
    if created:
        ConsoleGrant.objects.create(user=operator, role="operator", biz=Biz.objects.order_by("id").first())
    if args.snapshot:
        from django.utils import timezone

        from messages.services.stats import stats_snapshot

        start = time.perf_counter()
        stats_snapshot(now=timezone.now())
        print(f"backlog snapshot (flush job, not a page): {(time.perf_counter() - start) * 1000:.0f} ms")
    total = Message.objects.order_by("-id").values_list("id", flat=True).first() or 0
    middle = total // 2
    as_admin, as_operator = Client(), Client()
    as_admin.force_login(admin)
    as_operator.force_login(operator)
    first = as_admin.get("/messages/").content.decode()
    older = re.search(r'href="(\?cursor=[^"]+)"', first).group(1)
    pages = [
        ("dashboard", as_admin, "/"),
        ("messages (no filter)", as_admin, "/messages/"),
        ("messages page 2 (cursor)", as_admin, f"/messages/{older}"),
        ("messages status=FAIL", as_admin, "/messages/?status=FAIL"),
        ("messages dead (FAIL,TIMEOUT)", as_admin, "/messages/?status=FAIL,TIMEOUT"),
        ("messages topic", as_admin, "/messages/?topic=topic07"),
        ("messages topic+group+status", as_admin, "/messages/?topic=topic07&group=billing&status=NEW"),
        ("messages key", as_admin, f"/messages/?key=key-{middle}"),
        ("messages id", as_admin, f"/messages/?id={middle}"),
        ("messages date range", as_admin, "/messages/?added_after=2000-01-01T00:00&added_before=2100-01-01T00:00"),
        ("messages payload text (common)", as_admin, "/messages/?text=SKU-1"),
        ("messages payload text+topic", as_admin, "/messages/?topic=topic07&text=SKU-42"),
        ("message detail", as_admin, f"/messages/{middle}/"),
        ("dead letters", as_admin, "/dead/"),
        ("topics", as_admin, "/topics/"),
        ("business lines", as_admin, "/biz/"),
        ("registry", as_admin, "/registry/"),
        ("jobs", as_admin, "/jobs/"),
        ("audit", as_admin, "/audit/"),
        ("tokens", as_admin, "/tokens/"),
        ("operator (1 biz): messages", as_operator, "/messages/"),
        ("operator (1 biz): dead", as_operator, "/messages/?status=FAIL,TIMEOUT"),
        ("operator (1 biz): dashboard", as_operator, "/"),
    ]
    print(f"{total} messages in {args.database}; {args.repeat} runs per page after a warm-up")
    print(f"{'page':40} {'median ms':>10} {'worst ms':>10}")
    for name, client, url in pages:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
        print(f"{name:40} {statistics.median(times):10.1f} {max(times):10.1f}")


if __name__ == "__main__":
    main()
