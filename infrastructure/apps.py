from django.apps import AppConfig


class InfrastructureConfig(AppConfig):
    name = "infrastructure"
    default_auto_field = "django.db.models.BigAutoField"
