from django.apps import AppConfig
from django.core.signals import request_finished
from django.db.backends.signals import connection_created


class MQCenterConfig(AppConfig):
    name = "mqcenter"
    verbose_name = "MQ Center"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mqcenter.core.db import cap_persistent_connections, remember_connection

        connection_created.connect(remember_connection, dispatch_uid="mq_remember_connection")
        request_finished.connect(cap_persistent_connections, dispatch_uid="mq_cap_connections")
