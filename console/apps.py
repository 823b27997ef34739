from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class ConsoleConfig(AppConfig):
    default = True
    name = "console"
    verbose_name = "Console"

    def ready(self) -> None:
        # The dashboard's counts, and the reasons they add to the tasks list's attention filter,
        # are registered before the first request reads either.
        from . import metrics  # noqa: F401


class ConsoleAdminConfig(admin_apps.AdminConfig):
    """`django.contrib.admin` with the console's site as `admin.site` (Django's documented way
    to replace the default admin site): listed in INSTALLED_APPS in its place."""

    default = False
    default_site = "console.site.ConsoleAdminSite"
