"""The app's Celery tasks live in its slices, each a thin door that takes ids and calls a
service; importing them here registers them with the worker (Celery imports `<app>.tasks`)."""

from messages.alarms import tasks as alarms_tasks  # noqa: F401
from messages.archive import tasks as archive_tasks  # noqa: F401
from messages.delivery import tasks as delivery_tasks  # noqa: F401
from messages.maintenance import tasks as maintenance_tasks  # noqa: F401
from messages.operations import tasks as operations_tasks  # noqa: F401
from messages.schedules import tasks as schedules_tasks  # noqa: F401
from messages.stats import tasks as stats_tasks  # noqa: F401
from messages.transactions import tasks as transactions_tasks  # noqa: F401
