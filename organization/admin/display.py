"""How the admin lists show things: status badges in one colour map, choices in words, wrapping cells."""

import re

from django.contrib import admin
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from ..models import AgentStatus

# --- status badges: one colour map, one helper ---------------------------------------------

DEFAULT_COLOUR = "#6c757d"

# kind of status → {status value: colour}. "agent": the roster's four words (badge, org chart).
STATUS_COLOURS: dict[str, dict[str, str]] = {
    "agent": {
        AgentStatus.IDLE: "#2e7d32",
        AgentStatus.ACTIVE: "#1565c0",
        AgentStatus.BUSY: "#e65100",
        AgentStatus.OFFLINE: "#757575",
    },
}


def colour_of(kind: str, value: str) -> str:
    return STATUS_COLOURS.get(kind, {}).get(value, DEFAULT_COLOUR)


_CHOICE = re.compile(r"[A-Za-z][A-Za-z_]*")


def human(value) -> str:
    """A stored choice as people read it: `in_progress` → "In progress", `DELEGATE` → "Delegate".

    Lists show these, not the values the API speaks (the choices' own labels are title-cased:
    "In Progress")."""
    text = str(value or "")
    if not _CHOICE.fullmatch(text):
        return text or "—"  # already words
    text = text.replace("_", " ").lower()
    return text[:1].upper() + text[1:]


def two_lines(first, second):
    """A list cell of two lines, the second quieter (a model and its provider)."""
    return format_html('{}<br><span class="quiet">{}</span>', first, second)


def badge(value: str, kind: str, label: str | None = None):
    """`value` as a coloured pill reading `label` (default: the value itself), with the CSS
    classes `<kind>-status <kind>-status-<value>`."""
    return format_html(
        '<span class="{}-status {}-status-{}" style="display:inline-block;white-space:nowrap;'
        "padding:1px 8px;border-radius:9px;color:#fff;background:{};font-weight:600;"
        '">{}</span>',
        kind,
        kind,
        value,
        colour_of(kind, value),
        label if label is not None else value,
    )


_BREAK_AFTER = re.compile(r"([/.?&=_:-]+)")


def breakable(text: str):
    """`text` escaped, with a line-break opportunity after each run of an address's or a
    model name's punctuation: a list's column wraps a long token there, never inside a word."""
    parts = _BREAK_AFTER.split(str(text or ""))
    return format_html_join(
        "", "{}{}", ((part, mark_safe("<wbr>") if i % 2 else "") for i, part in enumerate(parts))
    )


class HumanChoicesFilter(admin.ChoicesFieldListFilter):
    """A choices filter reading as the lists do ("In progress", not "In Progress"); a label
    the model gives by hand is kept."""

    def choices(self, changelist):
        readable = {
            str(label): human(value)
            for value, label in self.field.flatchoices
            if str(label) in (str(value), str(value).replace("_", " ").title())
        }
        for choice in super().choices(changelist):
            yield {**choice, "display": readable.get(str(choice["display"]), choice["display"])}
