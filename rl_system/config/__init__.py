"""Typed run configuration: YAML file + ``--set a.b=value`` overrides, validated by pydantic.

Every bad input becomes one :class:`ConfigError` line naming the key and what was expected,
e.g. ``config error: workers.num_envs: Input should be greater than 0 (got -3)``.

* :mod:`.base` -- :class:`ConfigError`, the strict base of every section;
* :mod:`.sections` -- the sections no one algorithm owns (env, workers, learner, checkpoint, ...);
* :mod:`.run` -- :class:`RunConfig`, all sections together and the checks that span them;
* :mod:`.load` -- :func:`load_config` (file + overrides) and :func:`build_config` (a dict).

Each algorithm's own settings live beside it (:mod:`rl_system.algos.ppo.config`,
:mod:`rl_system.algos.hmasd.config`) and are re-exported here with the rest. Names load on first use, so an algorithm's settings
module can import :mod:`.base` without the whole config.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> module that defines it
_EXPORTS = {
    **dict.fromkeys(("ConfigError", "Strict", "Threads"), "rl_system.config.base"),
    **dict.fromkeys(("CheckpointConfig", "EnvConfig", "LearnerConfig", "MlflowConfig", "ReseedConfig",
                     "RollbackConfig", "SelfPlayConfig", "TrackersConfig", "WandbConfig", "WorkersConfig",
                     "attempt_seed"), "rl_system.config.sections"),
    "RunConfig": "rl_system.config.run",
    **dict.fromkeys(("apply_override", "build_config", "load_config", "set_key"), "rl_system.config.load"),
    **dict.fromkeys(("EncoderConfig", "ModelConfig", "PPOConfig"), "rl_system.algos.ppo.config"),
    "HMASDConfig": "rl_system.algos.hmasd.config",
    "MAPPOConfig": "rl_system.algos.mappo.config",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
