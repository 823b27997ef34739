from django.apps import AppConfig


class OrganizationConfig(AppConfig):
    name = "organization"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import schema, tools  # noqa: F401  registers the tools and schema extensions
