import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    """Takes over the outbox's table from `organization` as it is: state only, no SQL."""

    initial = True

    dependencies = [
        ("organization", "0009_idempotency_key"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="OutboxMessage",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("task_name", models.CharField(max_length=200)),
                        ("args", models.JSONField(blank=True, default=list)),
                        ("kwargs", models.JSONField(blank=True, default=dict)),
                        ("task_id", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("dispatched_at", models.DateTimeField(blank=True, null=True)),
                        ("attempts", models.PositiveIntegerField(default=0)),
                        ("last_error", models.TextField(blank=True, default="")),
                        ("priority", models.PositiveSmallIntegerField(blank=True, null=True)),
                    ],
                    options={
                        "db_table": "organization_outboxmessage",
                        "ordering": ["pk"],
                        "indexes": [
                            models.Index(
                                condition=models.Q(("dispatched_at__isnull", True)),
                                fields=["id"],
                                name="outbox_undispatched_idx",
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
