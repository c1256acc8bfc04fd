"""Where progress goes: the return window read off finished episodes, and the sinks (console
lines, TensorBoard scalars). What is reported each round is :mod:`rl_system.reporting`."""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Any

from rich.console import Console


class ReturnWindow:
    """Mean of the last ``size`` completed episode returns (the usual "100-episode mean"), and
    the rate of each boolean episode outcome the env reports (success, win...) over the same
    window."""

    def __init__(self, size: int = 100):
        self.size = size
        self.returns: deque[float] = deque(maxlen=size)
        self.lengths: deque[int] = deque(maxlen=size)
        self.outcomes: dict[str, deque[bool]] = {}
        self.episodes = 0

    def extend(self, returns: list[float], lengths: list[int], total_episodes: int,
               outcomes: dict[str, list[bool]] | None = None) -> None:
        self.returns.extend(returns)
        self.lengths.extend(lengths)
        self.episodes += total_episodes
        for key, values in (outcomes or {}).items():
            self.outcomes.setdefault(key, deque(maxlen=self.size)).extend(values)

    def clear(self) -> None:
        """Forget the window's episodes (a reseed on stall); the run's episode count stays."""
        self.returns.clear()
        self.lengths.clear()
        self.outcomes.clear()

    @property
    def rates(self) -> dict[str, float]:
        """``{"success": 0.83, ...}``: the mean of each outcome over the window."""
        return {k: sum(v) / len(v) for k, v in self.outcomes.items() if v}

    @property
    def full(self) -> bool:
        return len(self.returns) == self.returns.maxlen

    @property
    def mean(self) -> float:
        return sum(self.returns) / len(self.returns) if self.returns else math.nan

    @property
    def mean_length(self) -> float:
        return sum(self.lengths) / len(self.lengths) if self.lengths else math.nan


class RunLogger:
    def __init__(self, run_dir: Path, tensorboard: bool = True, quiet: bool = False):
        self.run_dir = run_dir
        self.console = Console(stderr=False, quiet=quiet, highlight=False)
        self.writer = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            # Appending to the same directory keeps the curves of a resumed run continuous.
            self.writer = SummaryWriter(str(run_dir / "tb"), flush_secs=5)

    def scalars(self, step: int, metrics: dict[str, Any], prefix: str = "") -> None:
        if self.writer is None:
            return
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.writer.add_scalar(f"{prefix}{key}", value, step)

    def line(self, text: str) -> None:
        self.console.print(text, soft_wrap=True)  # a log line stays one line in a file

    def progress(self, rnd: int, steps: int, sps: float, window: ReturnWindow, best: float,
                 version: int, dropped: int) -> None:
        self.console.print(
            f"round {rnd:>5} | steps {steps:>11,} | {sps:>10,.0f} steps/s | "
            f"return {window.mean:8.2f} (best {best:8.2f}, {window.episodes:,} eps) | "
            + "".join(f"{k} {v:.2f} | " for k, v in window.rates.items())
            + f"v{version} | dropped {dropped}",
            soft_wrap=True,
        )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
