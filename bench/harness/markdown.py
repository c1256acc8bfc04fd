"""Markdown tables and the number formats the suites' tables share."""

from __future__ import annotations

import math
from typing import Any


def cell(v: Any) -> str:
    """A table cell: ``|`` escaped, newlines as spaces."""
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A GitHub Markdown table: header, separator, one line per row (``|`` in cells escaped)."""
    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def num(v: Any, digits: int = 0) -> str:
    """``1,234.5``-style, or ``–`` for None and non-finite values."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:,.{digits}f}"


def steps(v: Any) -> str:
    """Env steps: 135,168 -> 135k; 3,000,000 -> 3.00M."""
    if v is None:
        return "–"
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k" if v >= 1e4 else f"{v:,}"


def code(c: str | None) -> str:
    """A command as inline code, or ``–``."""
    return f"`{c}`" if c else "–"
