"""Actors that start slowly, for tests (pickled by value: ``tests/`` is not on an actor's path)."""

import time

from rl_system.checkpoint.writer import Checkpointer


class SlowCheckpointer(Checkpointer):
    """A checkpointer whose process takes 3 s longer to start (a loaded node, a slow import)."""

    def __init__(self, *args, **kwargs):
        time.sleep(3.0)
        super().__init__(*args, **kwargs)
