from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class TopicsConfig(AppConfig):
    name = "topics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from topics.cache import forget_topic
        from topics.models import Topic, TopicGroup

        for model in (Topic, TopicGroup):
            post_save.connect(forget_topic, sender=model, dispatch_uid=f"topic_cache_{model.__name__}")
            post_delete.connect(forget_topic, sender=model, dispatch_uid=f"topic_cache_del_{model.__name__}")
