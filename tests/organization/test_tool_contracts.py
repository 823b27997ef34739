"""One definition per contract: every tool's params are validated by one serializer, and its
`inputSchema` is the JSON Schema generated from that serializer (the REST request schema is
drf-spectacular's mapping of the same serializer)."""

import pytest
from rest_framework import serializers

from infrastructure.errors import DomainError, first_error
from organization.caller import Caller
from organization.registry import REGISTRY, call_tool
from organization.schema import input_schema_of
from tests.factories import make_agent, make_org


def test_every_tool_has_a_validator_and_its_schema_is_generated_from_it():
    assert REGISTRY, "no tool registered"
    for name, tool in REGISTRY.items():
        assert tool.validator is not None, f"{name} has no validator serializer"
        assert issubclass(tool.validator, serializers.Serializer), name
        assert tool.input_schema == input_schema_of(tool.validator), name


def test_the_tools_and_their_rest_twins_share_one_serializer():
    from collaboration.serializers import StartCollaborationSerializer
    from organization.serializers import (
        AvailabilitySerializer,
        DiscoverQuerySerializer,
        RosterQuerySerializer,
    )
    from tasks.serializers import (
        AssignSerializer,
        CommentSerializer,
        DelegateSerializer,
        EscalateSerializer,
        QueueSerializer,
        StatusSerializer,
        TaskCreateSerializer,
    )

    assert REGISTRY["get_organization_roster"].validator is RosterQuerySerializer
    assert REGISTRY["set_my_availability"].validator is AvailabilitySerializer
    assert REGISTRY["discover_experts"].validator is DiscoverQuerySerializer
    assert REGISTRY["create_task"].validator is TaskCreateSerializer
    assert REGISTRY["start_collaboration"].validator is StartCollaborationSerializer
    # A move's tool takes its REST body plus the task_id the REST path names.
    for name, body in [
        ("assign_task", AssignSerializer),
        ("delegate_task", DelegateSerializer),
        ("queue_task", QueueSerializer),
        ("escalate_task", EscalateSerializer),
        ("update_task_status", StatusSerializer),
        ("complete_task", StatusSerializer),
        ("comment_on_task", CommentSerializer),
    ]:
        assert issubclass(REGISTRY[name].validator, body), name
        assert set(REGISTRY[name].validator().fields) == {*body().fields, "task_id"}, name
    # A subtask is a task with its parent required.
    assert issubclass(REGISTRY["create_subtask"].validator, TaskCreateSerializer)
    assert set(REGISTRY["create_subtask"].validator().fields) == set(TaskCreateSerializer().fields)


class Config(serializers.Serializer):
    level = serializers.ChoiceField(choices=["low", "high"], help_text="How much.")


class Sample(serializers.Serializer):
    """A docstring the tool does without."""

    name = serializers.CharField(max_length=5, help_text="A name.")
    count = serializers.IntegerField(required=False, min_value=1, default=3, help_text="How many.")
    when = serializers.DateTimeField(required=False, allow_null=True, help_text="When.")
    tags = serializers.ListField(child=serializers.CharField(), required=False, help_text="Tags.")
    config = Config(required=False, help_text="Settings.")
    items = Config(many=True, required=False, help_text="Several.")
    extra = serializers.DictField(required=False, help_text="Anything.")


def test_the_generated_schema_is_closed_json_schema_without_defaults_or_refs():
    level = {"type": "string", "enum": ["low", "high"], "description": "How much."}
    config = {
        "type": "object",
        "properties": {"level": level},
        "required": ["level"],
        "additionalProperties": False,
    }
    schema = input_schema_of(Sample)
    assert schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 5, "description": "A name."},
            "count": {"type": "integer", "minimum": 1, "description": "How many."},
            "when": {"type": ["string", "null"], "format": "date-time", "description": "When."},
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Tags.",
            },
            "config": {**config, "description": "Settings."},
            "items": {"type": "array", "items": config, "description": "Several."},
            "extra": {"type": "object", "description": "Anything."},
        },
        "required": ["name"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "detail, expected",
    [
        ({"name": ["Too long."]}, ("name", "Too long.")),
        ({"items": [{}, {"level": ["Bad."]}]}, ("items.1.level", "Bad.")),
        ({"non_field_errors": ["Both."]}, ("", "Both.")),
        ({"tags": {"2": ["Blank."]}}, ("tags.2", "Blank.")),
    ],
)
def test_first_error_names_the_field_path(detail, expected):
    assert first_error(detail) == expected


def test_a_value_the_serializer_refuses_is_400_invalid_naming_the_param(db):
    org = make_org()
    caller = Caller(organization=org, agent=make_agent(org, "agent-sarah"))
    with pytest.raises(DomainError) as refused:
        call_tool(caller, "create_task", {"title": "t", "deadline": "next week"})
    assert (refused.value.status, refused.value.code) == (400, "invalid")
    assert refused.value.message.startswith("Invalid param 'deadline': ")
    with pytest.raises(DomainError) as refused:
        call_tool(caller, "set_my_availability", {"availability_until": "soon"})
    assert refused.value.message.startswith("Invalid param 'availability_until': ")


def test_a_huge_refused_value_is_not_repeated_whole_in_the_error(db):
    """jsonschema quotes the value it refuses: a 100,000-character title came back whole in the
    400 (and in a managed run's record of the call)."""
    org = make_org()
    caller = Caller(organization=org, agent=make_agent(org, "agent-sarah"))
    with pytest.raises(DomainError) as refused:
        call_tool(caller, "create_task", {"title": "x" * 100_000})
    assert (refused.value.status, refused.value.code) == (400, "invalid")
    message = refused.value.message
    assert message.startswith("Invalid param 'title': 'xxx")
    assert "… (100,002 characters) is too long" in message
    assert len(message) < 300


def test_the_handler_receives_the_validated_params(db):
    org = make_org()
    caller = Caller(organization=org, agent=make_agent(org, "agent-sarah"))
    task = call_tool(caller, "create_task", {"title": "t", "deadline": "2030-01-02T03:04:05Z"})
    assert task["deadline"].startswith("2030-01-02T03:04:05")
    assert task["urgency"] == "normal"
