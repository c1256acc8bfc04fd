"""Paired A/B comparisons of two trees' runs (:mod:`bench.perf_gate`): each pair's ratio oriented
so that above 1 means the second tree is faster, and a verdict that a noisy machine's one slow
pair cannot fail."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

THRESHOLD = 0.95
"""A median ratio below this, by more than the pairs' spread, is a regression."""


@dataclass(frozen=True)
class Metric:
    """One figure of a case's runs, compared pair by pair."""

    name: str
    read: Callable[[dict[str, Any]], float | None]
    """The figure from a run: its ``summary.json`` plus ``process_s`` (the whole process's wall time)."""
    unit: str
    higher_is_better: bool
    gated: bool = True


def ratios(metric: Metric, base: list[dict[str, Any]], head: list[dict[str, Any]]) -> list[float]:
    """Pair by pair, head against base, above 1 where the head is faster."""
    out = []
    for b, h in zip(base, head):
        vb, vh = metric.read(b), metric.read(h)
        if vb and vh:
            out.append(vh / vb if metric.higher_is_better else vb / vh)
    return out


def verdict(rs: list[float], gated: bool) -> tuple[float | None, float | None, str]:
    """``(median, spread, word)``: spread is half the range of the pairs' ratios; ``SLOWER`` where
    the median is below :data:`THRESHOLD` by more than the spread."""
    if not rs:
        return None, None, "no figure"
    med, spread = statistics.median(rs), (max(rs) - min(rs)) / 2
    if not gated:
        return med, spread, "info"
    if med + spread < THRESHOLD:
        return med, spread, "SLOWER"
    return med, spread, "faster" if med - spread > 1 / THRESHOLD else "ok"
