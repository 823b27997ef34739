"""`{{ text|markdown }}`: model-written Markdown rendered safely (organization/admin/markup.py);
`{{ name|event_words }}`: a session event's name in words."""

from django import template

from ..admin.display import human
from ..admin.markup import markdown_html

register = template.Library()


@register.filter(name="markdown")
def markdown(text):
    return markdown_html(text)


@register.filter(name="event_words")
def event_words(name):
    """A session event's name in words: `tool:collaborative:agent:start` → "Agent start"."""
    kind = str(name or "").removeprefix("tool:collaborative:")
    return human(kind.replace(":", "_"))
