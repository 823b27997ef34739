"""What the ledger's columns can hold: token counts and amounts a provider or a price gives."""

from __future__ import annotations

import logging
from decimal import Decimal

from .models import MAX_CALL_TOKENS, MONEY_MAX
from .pricing import Price, round_up

# The ledger's warnings, under the metering's logger.
log = logging.getLogger("costs.metering")


def bounded_tokens(tokens: int, what: str = "tokens", *, unknown=lambda: 0) -> int:
    """A token count a provider reported, as the ledger books it: from 0 to MAX_CALL_TOKENS (more
    would overflow the ledger's columns); no number at all is booked at `unknown()`, not nothing."""
    try:
        tokens = int(tokens or 0)
    except (TypeError, ValueError, OverflowError):
        fallback = min(unknown(), MAX_CALL_TOKENS)
        log.warning("a provider reported %r %s: booked as %s", tokens, what, fallback)
        return fallback
    if 0 <= tokens <= MAX_CALL_TOKENS:
        return tokens
    log.warning("a provider reported %s %s: booked as %s", tokens, what, MAX_CALL_TOKENS)
    return min(max(tokens, 0), MAX_CALL_TOKENS)


def bounded_usd(amount: Decimal | None) -> Decimal | None:
    """An amount as a MONEY column holds it: never past MONEY_MAX (an absurd price in
    LLM_PRICES times a call's tokens must not lose the row; the error log says it happened)."""
    if amount is None or amount <= MONEY_MAX:
        return amount
    log.error("$%s does not fit the ledger: booked as $%s", amount, MONEY_MAX)
    return MONEY_MAX


def worst_case_usd(price: Price, prompt_bound: int, max_tokens: int) -> Decimal | None:
    cost = price.cost(prompt_bound, max_tokens)
    return None if cost is None else round_up(cost)
