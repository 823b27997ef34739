"""The modes of a session, a registry keyed by `models.Mode`; a mode's class is imported on first
use. A new mode: a `SessionMode` subclass (base.py), a line here, its value in `models.Mode`.
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
