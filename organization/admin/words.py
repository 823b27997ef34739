"""Forms that read as words: field labels with their acronyms ("LLM provider", "Limit (USD)")
and durations typed and shown as people say them ("5 minutes", "2 hours 30 minutes")."""

import re
from datetime import timedelta

from django import forms
from django.utils.dateparse import parse_duration
from django.utils.text import capfirst


def duration(seconds) -> str:
    """A number of seconds as people say it: "45 seconds", "5 minutes", "2 hours 5 minutes",
    "3 days"; "" for none."""
    if seconds is None:
        return ""
    seconds = int(seconds)

    def unit(n: int, word: str) -> str:
        return f"{n} {word}" if n == 1 else f"{n} {word}s"

    if seconds < 60:
        return unit(seconds, "second")
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return unit(minutes, "minute") + (f" {unit(rest, 'second')}" if rest else "")
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return unit(hours, "hour") + (f" {unit(minutes, 'minute')}" if minutes else "")
    days, hours = divmod(hours, 24)
    return unit(days, "day") + (f" {unit(hours, 'hour')}" if hours else "")


ACRONYMS = {
    "llm": "LLM",
    "usd": "USD",
    "url": "URL",
    "api": "API",
    "id": "ID",
    "mcp": "MCP",
    "mtok": "MTok",
}


def field_label(name: str) -> str:
    """A field's name as a label: `llm_provider` → "LLM provider", `limit_usd` → "Limit (USD)",
    `input_usd_per_mtok` → "Input (USD per MTok)"."""
    words = [ACRONYMS.get(word, word) for word in name.split("_") if word]
    if "USD" in words[1:]:
        at = words.index("USD")
        return capfirst(" ".join(words[:at])) + f" ({' '.join(words[at:])})"
    return capfirst(" ".join(words))


def relabel(db_field, formfield) -> None:
    """Give `formfield` the words of its model field's name ("LLM provider"); a name the model
    gives it itself keeps its words, its acronyms capitalised ("id" → "ID")."""
    if formfield is None:
        return
    named = getattr(db_field, "_verbose_name", None)
    if named is None:
        formfield.label = field_label(db_field.name)
    elif any(word in ACRONYMS for word in str(named).split()):
        formfield.label = capfirst(" ".join(ACRONYMS.get(w, w) for w in str(named).split()))


_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*,?\s*(?:and\s+)?", re.IGNORECASE)


def parse_words(text: str) -> timedelta | None:
    """ "2 hours 30 minutes", "90 s", "1 day" → a timedelta; None if it is not such words."""
    seconds, at = 0.0, 0
    text = text.strip()
    while at < len(text):
        match = _PART.match(text, at)
        if match is None or match.group(2).lower() not in _UNITS:
            return None
        seconds += float(match.group(1)) * _UNITS[match.group(2).lower()]
        at = match.end()
    return timedelta(seconds=seconds) if text else None


class DurationInWordsField(forms.DurationField):
    """A duration shown as words and typed as words ("15 minutes", "4 hours", "1 day 2 hours")
    or as Django's `[DD] HH:MM:SS`."""

    default_error_messages = {
        "invalid": "Enter a duration such as “15 minutes”, “4 hours” or “1 day 2 hours”."
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "For example “15 minutes”, “4 hours”, “2 days”.")
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, timedelta):
            return duration(value.total_seconds())
        return value

    def to_python(self, value):
        if isinstance(value, str) and value.strip() and parse_duration(value.strip()) is None:
            words = parse_words(value)
            if words is not None:
                return words
        return super().to_python(value)

    def has_changed(self, initial, data):
        try:
            return self.to_python(data) != initial
        except forms.ValidationError:
            return True
