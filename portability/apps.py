from django.apps import AppConfig


class PortabilityConfig(AppConfig):
    """An organization as a file: export and import (`export_org`, `import_org`, the admin's
    export action and import page). Above every app whose settings the file carries."""

    name = "portability"
    verbose_name = "Organization files"
