"""Numbers and data in the console's words: durations, money, a task's result data."""

import json
from decimal import Decimal


def duration(seconds: float | int | None) -> str:
    """12 s, 12 min, 3 h 5 min, 2 d 4 h."""
    if seconds is None:
        return ""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def usd_figure(amount) -> str:
    """12.34 from a dollar up, 0.0123 under one (a model call costs fractions of a cent: two
    decimals showed most days as 0.00), 0.00 for nothing: every console page's money."""
    return f"{amount:,.2f}" if abs(amount) >= 1 or amount == 0 else f"{amount:.4f}"


def usd(amount) -> str:
    """$0.0123, $12.34; "" for no calls."""
    return "" if amount is None else f"${usd_figure(amount)}"


def money(amount: Decimal | None) -> str:
    """$12.34, or "—" for nothing known."""
    return "—" if amount is None else f"${usd_figure(amount)}"


def readable(data) -> list[tuple[str, str]]:
    """A task's result data as label/value lines (nested values written compactly)."""
    if data in (None, {}, []):
        return []
    if not isinstance(data, dict):
        return [("value", json.dumps(data, ensure_ascii=False))]
    return [
        (
            str(key).replace("_", " "),
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False),
        )
        for key, value in data.items()
    ]
