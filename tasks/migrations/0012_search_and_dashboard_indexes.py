"""Indexes for big organizations: partial indexes for the dashboard (who holds how many tasks,
the queued tasks by urgency and by deadline, the escalated and blocked ones most urgent first);
on PostgreSQL only (tasks.sql.POSTGRESQL_EXTRAS), trigram indexes for the tasks list's search on
the title, the description and the agents' handles (`tasks_searched`), and the names in the
delegation chain in place of its text's trigrams (`infrastructure.prepared.quoted_in_json_text`)."""

from django.db import migrations, models


def install(apps, schema_editor):
    from tasks.sql import install_postgresql_extras

    install_postgresql_extras(using=schema_editor.connection.alias)


def remove(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for index in (
            "task_title_trgm",
            "task_description_trgm",
            "agent_handle_trgm",
            "task_chain_names",
        ):
            schema_editor.execute(f"DROP INDEX IF EXISTS {index}")
        # 0010's index of the chain's text, which task_chain_names replaced.
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS task_chain_trgm ON tasks_task "
            "USING gin ((UPPER(delegation_chain::text)) gin_trgm_ops)"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("organization", "0010_outbox_to_infrastructure"),
        ("tasks", "0011_list_and_dashboard_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("status__in", ("assigned", "in_progress", "blocked"))),
                fields=["organization", "assignee"],
                name="task_org_held",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("status", "queued")),
                fields=["organization", "urgency", "queued_at"],
                name="task_org_queued_urgency",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("status", "queued")),
                fields=["organization", "deadline"],
                name="task_org_queued_deadline",
            ),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(
                condition=models.Q(("status__in", ["escalated", "blocked"])),
                fields=["organization", "-urgency_rank", "updated_at", "id"],
                name="task_org_waiting",
            ),
        ),
        migrations.RunPython(install, remove),
    ]
