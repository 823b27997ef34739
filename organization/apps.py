from django.apps import AppConfig


class OrganizationConfig(AppConfig):
    name = "organization"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (  # noqa: F401  registers the tools and schema extensions
            schema,
            signals,  # noqa: F401  manifest refresh on commit + discover_experts (seed 002)
            tools,
        )
