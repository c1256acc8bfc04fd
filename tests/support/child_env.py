"""The environment of a child process that starts Ray of its own (a CLI run, ``ray start``): this
one's without ``RAY_ADDRESS``, which points at the tests' shared Ray (``tests/conftest.py``), plus
``extra``; and a child that takes Ctrl-C as a terminal's foreground process does. Imported by the
tests as ``child_env``."""

from __future__ import annotations

import os
import signal


def own_ray_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(extra)
    return env


def foreground_sigint() -> None:
    """A ``preexec_fn``: SIGINT at its default in the child, so Python raises KeyboardInterrupt there.
    A shell without job control starts its background jobs with SIGINT ignored, and children
    inherit that: a test sending Ctrl-C would then be ignored wherever the suite runs in the
    background."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
