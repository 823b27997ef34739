"""The price of a model call: `LLM_PRICES` for the models it names, else the `genai-prices`
table (its data ships in the package: no network), else unknown (cost null, flagged).

The offline provider costs nothing. A price is looked up once per (provider, model) and kept
for the process; `calc` prices a usage with it (genai-prices' tiers included).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings

from .models import PriceSource

MTOK = Decimal(1_000_000)
# A provider's price id (settings.LLM_PRICE_IDS, from the providers' registry) is genai-prices'
# provider id, or FREE for a provider whose calls cost nothing; a provider it lacks is unpriced.
FREE = "free"


@dataclass(frozen=True)
class Price:
    source: str
    input_per_mtok: Decimal | None = None
    output_per_mtok: Decimal | None = None
    # genai-prices' model, priced by calc_price (tiers) rather than the flat rates above.
    genai_model: str = ""
    genai_provider: str = ""

    @property
    def known(self) -> bool:
        return self.source != PriceSource.UNKNOWN

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal | None:
        """USD for this usage, or None when the price is unknown."""
        if self.source == PriceSource.FREE:
            return Decimal(0)
        if not self.known:
            return None
        if self.genai_model:
            from genai_prices import Usage, calc_price

            calculation = calc_price(
                Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens),
                self.genai_model,
                provider_id=self.genai_provider,
            )
            return Decimal(calculation.total_price)
        return (
            Decimal(prompt_tokens) * self.input_per_mtok
            + Decimal(completion_tokens) * self.output_per_mtok
        ) / MTOK

    def rates_for(self, prompt_tokens: int, completion_tokens: int) -> tuple:
        """The (input, output) USD per 1M tokens this usage was priced at, to keep on the row."""
        if not self.genai_model:
            return self.input_per_mtok, self.output_per_mtok
        from genai_prices import Usage, calc_price

        calculation = calc_price(
            Usage(input_tokens=max(prompt_tokens, 1), output_tokens=max(completion_tokens, 1)),
            self.genai_model,
            provider_id=self.genai_provider,
        )
        return (
            Decimal(calculation.input_price) * MTOK / max(prompt_tokens, 1),
            Decimal(calculation.output_price) * MTOK / max(completion_tokens, 1),
        )


@functools.lru_cache(maxsize=512)
def _genai_price(provider: str, model: str) -> Price:
    from genai_prices import Usage, calc_price

    provider_id = settings.LLM_PRICE_IDS.get(provider)
    if provider_id is None:
        return Price(PriceSource.UNKNOWN)
    try:
        calc_price(Usage(input_tokens=1, output_tokens=1), model, provider_id=provider_id)
    except LookupError:
        return Price(PriceSource.UNKNOWN)
    return Price(PriceSource.GENAI_PRICES, genai_model=model, genai_provider=provider_id)


def load_price_table() -> None:
    """Load genai-prices' table now (a worker at start-up): its first lookup imports the
    bundled data, ~250 ms that would otherwise delay the process's first metered call."""
    from genai_prices import Usage, calc_price

    try:
        calc_price(Usage(input_tokens=1, output_tokens=1), "", provider_id="openai")
    except LookupError:
        pass  # no such model: the table is loaded all the same


def price_of(provider: str, model: str) -> Price:
    if settings.LLM_PRICE_IDS.get(provider) == FREE:
        return Price(PriceSource.FREE, Decimal(0), Decimal(0))
    configured = settings.LLM_PRICES.get(f"{provider}/{model}")
    if configured is not None:
        return Price(PriceSource.SETTING, configured["input"], configured["output"])
    return _genai_price(provider, model)


# --- the worst case of a call, before it is made ---------------------------------------------

# A token of the byte-level BPE tokenizers (OpenAI's, Anthropic's) covers at least one byte of
# text, so a prompt's UTF-8 length bounds its tokens; each message adds a few framing tokens.
TOKENS_PER_MESSAGE = 8
TOKENS_PER_REQUEST = 32


def worst_case_prompt_tokens(*texts: str, messages: int = 1) -> int:
    """An upper bound of the prompt tokens of a request made of `texts`."""
    return (
        sum(len(text.encode("utf-8")) for text in texts if text)
        + TOKENS_PER_MESSAGE * messages
        + TOKENS_PER_REQUEST
    )


def round_up(amount: Decimal) -> Decimal:
    """To the ledger's 9 decimal places, up (a reservation never rounds below its worst case)."""
    return Decimal(math.ceil(amount * Decimal(10**9))) / Decimal(10**9)
