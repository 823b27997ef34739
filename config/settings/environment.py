"""The strict readers of the environment (healthchecks' `envbool`): a value they do not
understand stops start-up naming the variable; unset or empty means the default. Every
variable read is listed in docs/configuration.md."""

import json
import math
import os
import re
from datetime import timedelta
from decimal import Decimal

from django.core.exceptions import ImproperlyConfigured

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})
# The beat keeps an interval's seconds in an integer column (django_celery_beat's
# IntervalSchedule.every), and timedelta stops at 999999999 days.
MAX_INTERVAL_SECONDS = 2**31 - 1


def env_str(name: str, default: str = "") -> str:
    """The variable's value without surrounding spaces; unset, empty or blank: the default."""
    return os.environ.get(name, "").strip() or default


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in TRUE_WORDS:
        return True
    if raw.lower() in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: use true or false (or 1/0, yes/no, on/off).")


def _matching(name: str, pattern: str, expected: str) -> str | None:
    """The variable's value if it matches `pattern` in full; None when unset or blank."""
    raw = os.environ.get(name, "").strip()
    if raw and not re.fullmatch(pattern, raw):
        raise ImproperlyConfigured(f"{name}={raw!r}: must be {expected}.")
    return raw or None


def env_int(
    name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = _matching(name, r"[+-]?[0-9]+", f"a whole number, e.g. {default}")
    if raw is None:
        return default
    value = int(raw)
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at most {maximum}.")
    return value


def env_interval(name: str, default: int) -> timedelta:
    """Seconds (a beat job's interval, a grace) as a timedelta: a whole number from 1 to
    MAX_INTERVAL_SECONDS."""
    return timedelta(seconds=env_int(name, default, minimum=1, maximum=MAX_INTERVAL_SECONDS))


def env_float(name: str, default: float, *, minimum: float = 0) -> float:
    raw = _matching(
        name, r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", f"a number, e.g. {default:g}"
    )
    if raw is None:
        return default
    value = float(raw)
    if not math.isfinite(value):  # 1e999 is infinity: no limit or timeout can be
        raise ImproperlyConfigured(f"{name}={raw!r}: must be a number, e.g. {default:g}.")
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: must be at least {minimum:g}.")
    return value


def env_list(name: str, default: str = "") -> list[str]:
    return [v.strip() for v in env_str(name, default).split(",") if v.strip()]


def env_prices(name: str) -> dict[str, dict[str, Decimal]]:
    """LLM_PRICES: `{"<provider>/<model>": {"input": <USD per 1M tokens>, "output": <…>}}` for
    models genai-prices does not know (a local Ollama or vLLM model); it wins over the table."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return {}
    example = '{"openai/llama3:8b": {"input": 0.1, "output": 0.2}}'
    try:
        data = json.loads(raw, parse_float=Decimal, parse_int=Decimal)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: not JSON ({exc}); e.g. {example}") from exc
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f"{name}: must be a JSON object, e.g. {example}")
    prices = {}
    for key, price in data.items():
        if "/" not in key:
            raise ImproperlyConfigured(f"{name}: {key!r} must read <provider>/<model>.")
        if (
            not isinstance(price, dict)
            or set(price) != {"input", "output"}
            or not all(isinstance(v, Decimal) and v >= 0 for v in price.values())
        ):
            raise ImproperlyConfigured(
                f'{name}: {key!r} must be {{"input": <USD per 1M tokens>, "output": <…>}} '
                "with numbers of at least 0."
            )
        prices[key] = price
    return prices


def env_counts(name: str, names) -> dict[str, int]:
    """`<name>=<count>,…` (e.g. `openai=200,anthropic=50`): a whole number ≥ 1 for some of
    `names`."""
    counts = {}
    for item in env_list(name):
        key, _, value = (part.strip() for part in item.partition("="))
        if key not in names or not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
            raise ImproperlyConfigured(
                f"{name}: {item!r} must read <provider>=<count ≥ 1> with a provider of "
                f"{', '.join(names)}, e.g. openai=200,anthropic=50."
            )
        counts[key] = int(value)
    return counts
