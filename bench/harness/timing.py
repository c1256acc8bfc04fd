"""Timing a step function the way the env and kernel benches do: warm up, size the timed run from
a short probe, take the best of several runs by the wall clock and by this process's CPU time (the
steadier figure on a shared machine)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_rates(step: Callable[[int], object], items: int, seconds: float, repeats: int, *, warmup: int = 20,
               probe_s: float = 0.05, min_calls: int = 10,
               sync: Callable[[], object] | None = None) -> tuple[float, float, float]:
    """``(wall, cpu, ms)``: the best items/s over ``repeats`` runs of about ``seconds`` each, by
    the wall clock and by this process's CPU time, and the wall milliseconds of one call in the
    best run. ``step(i)`` does one call that handles ``items`` items (env steps of a batch);
    ``warmup`` untimed calls come first, then a ``probe_s`` probe sizes the runs (at least
    ``min_calls`` calls each). ``sync`` (``torch.cuda.synchronize``) ends every timed stretch."""
    sync = sync or (lambda: None)
    for i in range(warmup):
        step(i)
    sync()
    t0, calls = time.perf_counter(), 0
    while time.perf_counter() - t0 < probe_s:
        step(calls)
        calls += 1
    sync()
    iters = max(min_calls, int(seconds / ((time.perf_counter() - t0) / calls)))
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        for i in range(iters):
            step(i)
        sync()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return items * iters / best_wall, items * iters / max(best_cpu, 1e-9), 1e3 * best_wall / iters


def median_us(fn: Callable[[], object], repeats: int = 1000) -> float:
    """Microseconds per call of ``fn``: the median of five timed stretches of ``repeats // 5``
    calls, after 20 untimed ones."""
    for _ in range(20):
        fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats // 5):
            fn()
        times.append((time.perf_counter() - t0) / (repeats // 5) * 1e6)
    return statistics.median(times)


def with_threads(n: int, fn: Callable[[], T]) -> T:
    """``fn()`` with torch on ``n`` threads, the previous count restored after."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn()
    finally:
        torch.set_num_threads(prev)

