"""Synthesis: how a session's answers become its result, one strategy per module.

`STRATEGIES` is the registry (key → (label, class)) the `Synthesis` choices derive from; a new
strategy is a `Strategy` subclass (base.py) and a line here.
"""

from functools import cache

from django.utils.module_loading import import_string

from .base import Strategy

STRATEGIES = {
    "coordinator": ("Coordinator", "collaboration.synthesis.coordinator.Coordinator"),
    "vote": ("Vote", "collaboration.synthesis.vote.Vote"),
    "merge": ("Merge", "collaboration.synthesis.merge.Merge"),
    "best_of": ("Best Of", "collaboration.synthesis.best_of.BestOf"),
}


@cache
def strategy_for(key: str) -> Strategy:
    """The strategy registered under `key` (KeyError for an unknown one)."""
    _, path = STRATEGIES[key]
    return import_string(path)(key)
