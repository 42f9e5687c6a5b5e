"""Bulk jobs run by a Celery worker: a thin door that takes the job's id."""

from __future__ import annotations

from celery import shared_task

from messages.operations.bulk import bulk_job_run


@shared_task(name="messages.bulk_job", ignore_result=True, acks_late=True)
def bulk_job_task(job_id: int) -> None:
    bulk_job_run(job_id=job_id)
