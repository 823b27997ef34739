"""Prices: LLM_PRICES, then genai-prices, else unknown; the offline provider is free."""

from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env_prices
from costs.models import PriceSource
from costs.pricing import price_of, worst_case_prompt_tokens


def test_llm_prices_win_and_price_per_million_tokens():
    price = price_of("openai", "fake-model")
    assert price.source == PriceSource.SETTING
    assert price.cost(1_000, 1_000) == Decimal("0.003")


def test_genai_prices_knows_the_big_models():
    price = price_of("openai", "gpt-4o-mini")
    assert price.source == PriceSource.GENAI_PRICES
    # $0.15 in and $0.60 out per 1M tokens in the table this version ships.
    assert price.cost(1_000_000, 0) == Decimal("0.15")
    assert price.cost(0, 1_000_000) == Decimal("0.6")
    assert price_of("anthropic", "claude-sonnet-4-5").cost(1_000, 0) > 0


def test_an_unknown_model_has_no_price():
    price = price_of("openai", "llama3:8b-local")
    assert price.source == PriceSource.UNKNOWN
    assert price.cost(10, 10) is None


def test_offline_is_free():
    price = price_of("offline", "offline")
    assert price.source == PriceSource.FREE
    assert price.cost(10_000, 10_000) == 0


def test_llm_prices_setting_is_checked(monkeypatch):
    monkeypatch.setenv("LLM_PRICES", '{"ollama/llama3": {"input": 0.1, "output": 0.2}}')
    assert env_prices("LLM_PRICES") == {
        "ollama/llama3": {"input": Decimal("0.1"), "output": Decimal("0.2")}
    }
    for bad in (
        '{"llama3": {"input": 1, "output": 1}}',
        '{"a/b": {"input": -1, "output": 1}}',
        '{"a/b": {"input": 1}}',
        "[1]",
        "not json",
    ):
        monkeypatch.setenv("LLM_PRICES", bad)
        with pytest.raises(ImproperlyConfigured):
            env_prices("LLM_PRICES")


def test_the_prompt_bound_is_at_least_the_bytes():
    text = "é" * 100  # 200 bytes
    assert worst_case_prompt_tokens(text) >= 200


def test_a_workers_warm_up_loads_the_price_table():
    """Its first lookup imports the bundled table: done at a worker's start, not in a call."""
    from genai_prices.data_snapshot import _bundled_snapshot

    from collaboration import providers

    _bundled_snapshot.cache_clear()
    providers.warm_up()
    assert _bundled_snapshot.cache_info().currsize == 1
