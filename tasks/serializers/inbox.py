"""The inbox: its params, items, page and the read marks."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from infrastructure.inputs import BIGINT_MAX

from ..models import InboxItem
from .fields import limit_field


class InboxParamsSerializer(serializers.Serializer):
    unread_only = serializers.BooleanField(required=False, help_text="Only unread items.")
    mark_read = serializers.BooleanField(required=False, help_text="Mark the returned items read.")
    limit = limit_field()


class InboxItemSerializer(serializers.ModelSerializer):
    task = serializers.SerializerMethodField()
    read = serializers.BooleanField(source="is_read")
    actor = serializers.CharField(source="event.actor_label")

    class Meta:
        model = InboxItem
        fields = ["id", "kind", "message", "actor", "task", "read", "read_at", "created_at"]
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "title": {"type": "string"},
                "status": {"type": "string"},
                "urgency": {"type": "string"},
            },
        }
    )
    def get_task(self, item: InboxItem) -> dict:
        t = item.task
        return {"id": t.pk, "title": t.title, "status": t.status, "urgency": t.urgency}


class InboxPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = InboxItemSerializer(many=True)


class InboxQuerySerializer(serializers.Serializer):
    unread = serializers.BooleanField(required=False, allow_null=True, default=None)


class InboxReadSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=BIGINT_MAX),
        max_length=500,
        required=False,
        allow_null=True,
        default=None,
        help_text="Items to mark read; omit to mark every unread item read.",
    )
