from django.apps import AppConfig


class MessagesConfig(AppConfig):
    # django.contrib.messages already owns the label "messages".
    name = "messages"
    label = "mq_messages"
    verbose_name = "MQ messages"
    default_auto_field = "django.db.models.BigAutoField"
