"""PostgreSQL only: the lists' count estimate and the delegation chain's trigram index
(tasks.sql.POSTGRESQL_EXTRAS)."""

from django.db import migrations


def install(apps, schema_editor):
    from tasks.sql import install_postgresql_extras

    install_postgresql_extras(using=schema_editor.connection.alias)


def remove(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS task_chain_trgm")
        schema_editor.execute("DROP FUNCTION IF EXISTS count_estimate(text)")


class Migration(migrations.Migration):
    dependencies = [("tasks", "0009_field_labels")]

    operations = [migrations.RunPython(install, remove)]
