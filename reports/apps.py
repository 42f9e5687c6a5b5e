from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "reports"
    label = "mq_reports"
    verbose_name = "MQ Center reports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reports import checks  # noqa: F401 - registers the start-up checks
