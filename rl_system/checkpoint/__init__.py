"""Checkpoints: what a run persists and how it gets it back.

* :mod:`.keys` -- the keys of a training checkpoint's state dict;
* :mod:`.format` -- one file: the ``RLCK`` layout (checksummed manifest + LZ4 torch payload),
  safe loading (``weights_only``), RNG capture;
* :mod:`.store` -- a directory of them: atomic writes, pruning, ``latest.json`` / ``best.json``;
* :mod:`.writer` -- the :class:`Checkpointer` Ray actor that writes off the learner's path;
* :mod:`.resume` -- what a ``--resume`` / ``eval`` argument names, loaded.
"""

from __future__ import annotations

from rl_system.checkpoint import keys
from rl_system.checkpoint.format import (
    CheckpointError,
    capture_rng_state,
    checkpoint_name,
    load_checkpoint,
    read_manifest,
    restore_rng_state,
)
from rl_system.checkpoint.resume import Resume, find_resume
from rl_system.checkpoint.store import BEST, LATEST, CheckpointInfo, CheckpointStore

__all__ = [
    "BEST", "LATEST", "CheckpointError", "CheckpointInfo", "CheckpointStore", "Resume", "capture_rng_state",
    "checkpoint_name", "find_resume", "keys", "load_checkpoint", "read_manifest", "restore_rng_state",
]
