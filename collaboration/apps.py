from django.apps import AppConfig


class CollaborationConfig(AppConfig):
    name = "collaboration"
    default_auto_field = "django.db.models.BigAutoField"
