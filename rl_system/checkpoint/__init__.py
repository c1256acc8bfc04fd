"""Checkpoints: what a run persists and how it gets it back.

* :mod:`.keys` -- the keys of a training checkpoint's state dict;
* :mod:`.format` -- one file: the ``RLCK`` layout (checksummed manifest + LZ4 torch payload),
  safe loading (``weights_only``), RNG capture;
* :mod:`.store` -- a directory of them: atomic writes, pruning, ``latest.json`` / ``best.json``;
* :mod:`.writer` -- the :class:`Checkpointer` Ray actor that writes off the learner's path;
* :mod:`.resume` -- what a ``--resume`` argument names, loaded;
* :mod:`.pick` -- which checkpoint of a run ``eval``, ``export`` and the Python API read (``--pick``).

The names below are imported on first use: the format loads torch, which ``rl-system --help``
(it shows ``--pick``'s help from :mod:`.pick`) has no need of.
"""

from __future__ import annotations

import importlib

_WHERE = {
    "CheckpointError": "format", "capture_rng_state": "format", "checkpoint_name": "format",
    "load_checkpoint": "format", "read_manifest": "format", "restore_rng_state": "format",
    "DEFAULT_PICK": "pick", "PICK_HELP": "pick", "PICKS": "pick", "check_pick": "pick", "pick_checkpoint": "pick",
    "Resume": "resume", "find_resume": "resume",
    "BEST": "store", "LATEST": "store", "CheckpointInfo": "store", "CheckpointStore": "store",
}

__all__ = ["keys", *sorted(_WHERE)]


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
