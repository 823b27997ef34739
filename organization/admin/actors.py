"""Who did it, as the console says it: an organization key by its name, not its API label.

Only the names of the row's own organization's keys are read; any other label is left as it is.
"""

import re

from django.db.models import CharField, OuterRef, Subquery
from django.db.models.functions import Substr

from ..models import ApiKey

ORG_KEY = "org-key:"
_LEADING = re.compile(r"org-key:([0-9A-Za-z_-]+)")


def leading_prefix(text: str | None) -> str | None:
    """The key prefix `text` opens with (`org-key:ab12… created the task`), if any."""
    match = _LEADING.match(text or "")
    return match.group(1) if match else None


def key_names(*, organization_id: int, texts) -> dict[str, str]:
    """Prefix → name of the organization's named keys that open any of `texts` (one query,
    none when no text opens with a key)."""
    prefixes = {p for p in map(leading_prefix, texts) if p}
    if not prefixes:
        return {}
    rows = ApiKey.objects.filter(organization_id=organization_id, prefix__in=prefixes)
    return dict(rows.exclude(name="").values_list("prefix", "name"))


def key_said(prefix: str, name: str | None) -> str:
    return f"key “{name}”" if name else f"organization key {prefix}"


def actor_words(text: str, names: dict[str, str]) -> str:
    """`text` with the key it opens with said by the key's name."""
    prefix = leading_prefix(text)
    if prefix is None:
        return text
    return key_said(prefix, names.get(prefix)) + text[len(ORG_KEY) + len(prefix) :]


def key_name_of(label_field: str, organization_field: str = "organization_id") -> Subquery:
    """The name of the organization's key a row's `label_field` names (`org-key:<prefix>`), as
    a correlated subquery: a list annotates its page in its one query."""
    keys = ApiKey.objects.filter(
        organization_id=OuterRef(organization_field),
        prefix=Substr(OuterRef(label_field), len(ORG_KEY) + 1),
    ).exclude(name="")
    return Subquery(keys.values("name")[:1], output_field=CharField())


def label_words(label: str, name: str | None) -> str:
    """An actor's label for a list cell, with the key's name read by `key_name_of`."""
    prefix = leading_prefix(label)
    if prefix is None or label != f"{ORG_KEY}{prefix}":
        return label
    return key_said(prefix, name)
