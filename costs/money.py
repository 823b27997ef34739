"""Dollars as people read them, in every text the costs app writes (admin, alerts, refusals)."""

from decimal import Decimal


def usd(amount) -> str:
    """$1,234.56 from a dollar up; under one, to the ledger's precision without trailing zeros
    ($0.50, $0.004, $0.00003): with two decimals a small budget read "$0.00 spent of $0.00"."""
    if amount is None:
        return "—"
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    whole, _, decimals = f"{Decimal(amount):.9f}".partition(".")
    return f"${whole}.{decimals.rstrip('0').ljust(2, '0')}"
