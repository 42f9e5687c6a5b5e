"""django-q2 tasks and the enqueuer: `python -m bench.workloads.dq_tasks RUN COUNT THREADS`."""

from __future__ import annotations

import os
import sys
import threading
import time

from bench.workloads.counter import handled_counter

_handled = handled_counter()


def noop(run: str) -> None:
    _handled.add(run)


def main(run: str, count: int, threads: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.workloads.dq_settings")
    django.setup()
    from django.db import connection
    from django_q.tasks import async_task

    share = count // threads

    def work() -> None:
        for _ in range(share):
            async_task("bench.workloads.dq_tasks.noop", run)
        connection.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(share * threads / (time.perf_counter() - began))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
