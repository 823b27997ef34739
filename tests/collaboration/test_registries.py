"""The registries of the collaboration app: synthesis strategies, modes, providers.

Each is the one list of its kind: the model's choices (the API enum) agree with it, and every entry
loads and works — a strategy added with a module and a line is run here without more tests.
"""

import pytest

from collaboration.models import CollaborationSession, Mode, Synthesis
from collaboration.providers import PROVIDERS, Provider, ProviderError
from collaboration.runner.modes import MODES, mode_for
from collaboration.runner.modes.base import SessionMode
from collaboration.synthesis import STRATEGIES, strategy_for
from collaboration.synthesis.base import Answer, Ballot, Outcome, Strategy
from collaboration.synthesis.consensus import consensus_of

ANSWERS = [
    Answer("alex", "backend", "Use a read replica.\nVERDICT: yes\nCONFIDENCE: 0.8", 0.8, "yes", 0),
    Answer("sarah", "frontend", "Keep one database.\nVERDICT: no\nCONFIDENCE: 0.6", 0.6, "no", 1),
    Answer(
        "jordan",
        "infra",
        "A replica, with lag alerts.\nVERDICT: yes\nCONFIDENCE: 0.8",
        0.8,
        "yes",
        2,
    ),
]


def ballot(ask) -> Ballot:
    return Ballot(
        task="Move reporting to a read replica?",
        answers=ANSWERS,
        consensus=consensus_of(ANSWERS),
        ask_coordinator=ask,
        coordinator_configured=True,
    )


def coordinator_says(purpose: str, prompt: str, hints: dict) -> str:
    return "BEST: jordan" if purpose == "judge" else "The coordinator's synthesis."


def coordinator_fails(purpose: str, prompt: str, hints: dict) -> str:
    raise ProviderError("the coordinator is away")


def test_the_synthesis_choices_are_the_registry():
    assert list(STRATEGIES) == Synthesis.values
    assert [label for label, _ in STRATEGIES.values()] == Synthesis.labels
    field = CollaborationSession._meta.get_field("synthesis")
    assert [value for value, _ in field.choices] == list(STRATEGIES)


@pytest.mark.parametrize("key", list(STRATEGIES))
@pytest.mark.parametrize("ask", [coordinator_says, coordinator_fails])
def test_every_strategy_combines_a_fixed_set_of_answers(key, ask):
    strategy = strategy_for(key)
    assert isinstance(strategy, Strategy)
    assert strategy.key == key
    outcome = strategy.combine(ballot(ask))
    assert isinstance(outcome, Outcome)
    assert outcome.result.strip()
    # A failed coordinator call is never silent: the result is a fallback, recorded as such.
    assert bool(outcome.degraded) <= bool(outcome.fallbacks)
    for fallback in outcome.fallbacks:
        assert set(fallback) == {"stage", "reason", "action"}
        assert fallback["reason"] == "the coordinator is away"


def test_strategy_results_are_what_each_promises():
    assert strategy_for(Synthesis.COORDINATOR).combine(ballot(coordinator_says)).result == (
        "The coordinator's synthesis."
    )
    fallen_back = strategy_for(Synthesis.COORDINATOR).combine(ballot(coordinator_fails))
    assert fallen_back.result == strategy_for(Synthesis.MERGE).combine(ballot(None)).result
    assert fallen_back.degraded
    assert "VERDICT: yes" in strategy_for(Synthesis.VOTE).combine(ballot(None)).result
    best = strategy_for(Synthesis.BEST_OF).combine(ballot(coordinator_says))
    assert best.extra["best_of"]["agent"] == "jordan"
    assert best.extra["best_of"]["tied"] == ["alex", "jordan"]
    earliest = strategy_for(Synthesis.BEST_OF).combine(ballot(coordinator_fails))
    assert earliest.extra["best_of"]["agent"] == "alex"
    assert [s for s in STRATEGIES if strategy_for(s).asks_verdict] == [Synthesis.VOTE]


def test_the_modes_registry_is_the_mode_enum():
    assert sorted(MODES) == sorted(Mode.values)
    for key in MODES:
        assert isinstance(mode_for(key), SessionMode)


def test_the_providers_registry_is_the_provider_enum():
    assert list(PROVIDERS) == [p.value for p in Provider]


def test_a_provider_is_one_registry_entry_the_settings_and_prices_read():
    from django.conf import settings

    from collaboration import providers
    from costs import pricing

    assert settings.LLM_DEFAULT_MODELS == providers.default_models()
    assert settings.LLM_PRICE_IDS == providers.price_ids()
    assert providers.FREE == pricing.FREE
    assert providers.SDK_KEYS == {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
