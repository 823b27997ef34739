"""Synthesis: how a session's answers become its result, one strategy per module.

`STRATEGIES` is the registry (healthchecks' `TRANSPORTS`): key → (label, class). The model's
`Synthesis` choices (the API enum, the admin form, the settings check) are derived from it, and a
strategy's class is imported on first use. Adding a strategy is a module with a `Strategy`
subclass (see `base.py`) and a line here.

The rest of the package is pure text work the strategies and the runner share: `parsing` (what is
read out of a reply), `consensus` (how far the answers agree), `prompts`.
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
