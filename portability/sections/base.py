"""What a section's functions are given: the import's context and one item of the file."""

from dataclasses import dataclass, field

from organization.caller import Caller
from organization.models import Organization


@dataclass
class Context:
    """What an import's sections share: who writes (the organization's humans) and the file."""

    caller: Caller
    document: dict
    cache: dict = field(default_factory=dict)
    # The remote A2A agents' cards by URL, fetched before the import's transaction (or why not).
    cards: dict = field(default_factory=dict)

    @property
    def org(self) -> Organization:
        return self.caller.organization


@dataclass(frozen=True)
class Entry:
    """One item of the file: where it is, its name, and the organization's item it matches
    (as `export` shows it; None for a new one). `occurrence` counts items sharing a name."""

    index: int
    key: str
    item: dict
    before: dict | None
    occurrence: int = 1

    @property
    def is_new(self) -> bool:
        return self.before is None

    @property
    def changed(self) -> set[str]:
        """The item's fields whose value the organization's item does not have yet."""
        before = self.before or {}
        return {name for name, value in self.item.items() if before.get(name) != value}
