"""Model-written Markdown as safe HTML for the console's pages.

Raw HTML is escaped, non-web link schemes stay text and images are off: a model's answer cannot
make a reader's browser run or fetch anything.
"""

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_MARKDOWN.disable("image")


def markdown_html(text: str | None) -> SafeString:
    """`text` (Markdown, untrusted) as HTML safe to put in a page."""
    return mark_safe(_MARKDOWN.render(text or ""))  # html is off: every tag in it is escaped
