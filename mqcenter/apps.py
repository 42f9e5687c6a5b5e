from django.apps import AppConfig


class MQCenterConfig(AppConfig):
    name = "mqcenter"
    verbose_name = "MQ Center"
    default_auto_field = "django.db.models.BigAutoField"
