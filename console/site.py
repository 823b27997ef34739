"""The admin site of Agent Org: its index is the manager's dashboard (dashboard.py), the apps
of the organization come first and Django's own (users and groups, periodic tasks) last, under
"System"."""

from django.contrib import admin

# The apps of the service, in the order a manager uses them; any other app follows them, and
# these last of all (Django's own models: seen by superusers only).
APP_ORDER = ["organization", "tasks", "runtime", "collaboration", "costs"]
SYSTEM_APPS = {"auth", "django_celery_beat"}


class ConsoleAdminSite(admin.AdminSite):
    site_header = "Agent Org"
    site_title = "Agent Org"
    index_title = "Dashboard"
    index_template = "admin/console/dashboard.html"
    # The front page: links to the console, the API docs and the health check.
    site_url = "/"

    def register(self, model_or_iterable, admin_class=None, **options):
        """Django's own apps' admins (users, periodic tasks) get the lists' guard too: a lookup
        their database cannot run (`?name__iregex=[`) is a bad filter, not a 500."""
        from organization.admin.scoping import BoundedLookups  # the models are loaded by now

        admin_class = admin_class or admin.ModelAdmin
        if not issubclass(admin_class, BoundedLookups):
            admin_class = type(
                admin_class.__name__,
                (BoundedLookups, admin_class),
                {"__module__": admin_class.__module__},
            )
        super().register(model_or_iterable, admin_class, **options)

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)

        def place(app):
            label = app["app_label"]
            if label in SYSTEM_APPS:
                return (2, 0, app["name"])
            if label in APP_ORDER:
                return (0, APP_ORDER.index(label), app["name"])
            return (1, 0, app["name"])

        apps.sort(key=place)
        for app in apps:
            app["is_system"] = app["app_label"] in SYSTEM_APPS
        return apps

    def index(self, request, extra_context=None):
        # The models are loaded once a request comes.
        from .charts import dashboard_charts
        from .dashboard import dashboard_context

        context = dashboard_context(request)
        if context.get("organization") is not None:
            context["charts"] = dashboard_charts(context["organization"])
        return super().index(request, {**context, **(extra_context or {})})
