"""Model-written Markdown as safe HTML for the console's pages.

Raw HTML in the text is escaped, never passed (`html: False`); a link whose scheme is not a web
or mail one (`javascript:`, `data:`) stays text (markdown-it's own link check); images are off,
so a model's answer cannot make a reader's browser fetch an address of its choosing.
"""

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_MARKDOWN.disable("image")


def markdown_html(text: str | None) -> SafeString:
    """`text` (Markdown, untrusted) as HTML safe to put in a page."""
    return mark_safe(_MARKDOWN.render(text or ""))  # html is off: every tag in it is escaped
