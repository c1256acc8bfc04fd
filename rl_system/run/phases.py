"""Where a run's wall time goes before, around and after training: its phases, in order.

A short run on a laptop can spend more time starting Ray and actors and shutting them down than
training; these figures make that visible (``summary.json`` → ``phases_s``, and one line per
phase at ``--log-level debug``) so it can be measured and cut (``bench/bench_startup.py``).

Phases of ``rl-system train``, in order, each the wall seconds it took:

* ``interpreter``: from the process's start to the CLI's first line (Python and the CLI imports);
* ``config``: reading and validating the config;
* ``imports``: the driver's imports (torch, Ray, the run's modules);
* ``probe``: a one-env copy and one policy built from the config, to fail fast on a bad one;
* ``ray_init``: starting the embedded Ray (or joining a cluster);
* ``actors``: creating the workers, learner(s) and checkpointer until all answer;
* ``train``: the rounds;
* ``finish``: cancelling what is in flight, flushing checkpoints and archives, the summary;
* ``stop_actors``: killing the run's actors;
* ``ray_shutdown``: stopping the embedded Ray (nothing to stop when the run joined a cluster).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def process_age_s() -> float | None:
    """Seconds since this process started, from ``/proc`` (None where there is none)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of stat(5): start time, in clock ticks after boot
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime_s - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class PhaseClock:
    """Wall seconds per named phase, in the order they ran.

    >>> clock = PhaseClock()
    >>> with clock.phase("probe"):
    ...     pass
    >>> list(clock.seconds)
    ['probe']
    """

    def __init__(self, say: Callable[[str], None] | None = None):
        self.seconds: dict[str, float] = {}
        self.say = say

    def record(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        if self.say is not None:
            self.say(f"phase {name}: {seconds:.2f}s")

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.record(name, time.perf_counter() - t0)

    def overhead_s(self) -> float:
        """Everything but training."""
        return sum(s for name, s in self.seconds.items() if name != "train")
