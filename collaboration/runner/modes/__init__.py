"""The modes of a session: how its agents take turns. A registry keyed by `models.Mode`.

A mode's class is imported on first use. Adding a mode is a module with a `SessionMode` subclass
(see `base.py`), a line here and its value in `models.Mode` (the API enum; a test checks that the
two agree).
"""

from functools import cache

from django.utils.module_loading import import_string

from ...models import Mode
from .base import SessionMode

MODES = {
    Mode.PARALLEL: "collaboration.runner.modes.parallel.Parallel",
    Mode.SEQUENTIAL: "collaboration.runner.modes.sequential.Sequential",
    Mode.HIERARCHICAL: "collaboration.runner.modes.hierarchical.Hierarchical",
}


@cache
def mode_for(key: str) -> SessionMode:
    """The mode registered under `key` (KeyError for an unknown one)."""
    return import_string(MODES[key])()
