"""Fields the tasks' inputs share: null as not given, the note, the limit."""

from rest_framework import serializers
from rest_framework.fields import empty

from organization.serializers import JSONObjectField

from ..models import NOTE_MAX_LENGTH
from ..services import TRANSITIONS

# The statuses a status move can reach (the targets of the lifecycle).
SETTABLE_STATUSES = frozenset().union(*TRANSITIONS.values())


class NullIsNotGiven:
    """A field mixin: null is "not given" (the field's default, or left out), at every door.

    Strict-mode tool clients send null for each optional param; REST takes it the same way.
    """

    def __init__(self, **kwargs):
        super().__init__(allow_null=True, **kwargs)

    def validate_empty_values(self, data):
        return super().validate_empty_values(empty if data is None else data)


class OptionalCharField(NullIsNotGiven, serializers.CharField):
    pass


class OptionalJSONObjectField(NullIsNotGiven, JSONObjectField):
    pass


class OptionalChoiceField(NullIsNotGiven, serializers.ChoiceField):
    pass


class OptionalBooleanField(NullIsNotGiven, serializers.BooleanField):
    pass


def optional_int(**bounds) -> serializers.IntegerField:
    """An optional whole number (`min_value`, `max_value`, `help_text`); null or left out: None."""
    return serializers.IntegerField(required=False, allow_null=True, default=None, **bounds)


def optional_text(max_length: int, help_text: str) -> OptionalCharField:
    """An optional text of at most `max_length` characters; null or left out: ""."""
    return OptionalCharField(
        max_length=max_length, required=False, allow_blank=True, default="", help_text=help_text
    )


def note_field(help_text: str = "A note for the task's log.") -> serializers.CharField:
    return optional_text(NOTE_MAX_LENGTH, help_text)


def limit_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=500, help_text="At most (default 100)."
    )
