from django.db import migrations


class Migration(migrations.Migration):
    """The outbox's model now lives in `infrastructure`; its table stays (state only, no SQL)."""

    dependencies = [
        ("organization", "0009_idempotency_key"),
        ("infrastructure", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="OutboxMessage")],
        ),
    ]
