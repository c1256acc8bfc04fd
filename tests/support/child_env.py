"""The environment of a child process that starts Ray of its own (a CLI run, ``ray start``): this
one's without ``RAY_ADDRESS``, which points at the tests' shared Ray (``tests/conftest.py``), plus
``extra``. Imported by the tests as ``child_env``."""

from __future__ import annotations

import os


def own_ray_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(extra)
    return env
