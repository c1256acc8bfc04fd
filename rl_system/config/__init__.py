"""Typed run configuration: YAML file + ``--set a.b=value`` overrides, validated by pydantic.

Every bad input becomes one :class:`ConfigError` line naming the key and what was expected,
e.g. ``config error: workers.num_envs: Input should be greater than 0 (got -3)``.

* :mod:`.base` -- :class:`ConfigError`, the strict base of every section;
* :mod:`.sections` -- the sections no one algorithm owns (env, workers, learner, checkpoint, ...);
* :mod:`.run` -- :class:`RunConfig`, all sections together and the checks that span them;
* :mod:`.load` -- :func:`load_config` (file + overrides) and :func:`build_config` (a dict).

Each algorithm's own settings live beside it (:mod:`rl_system.algos.ppo.config`,
:mod:`rl_system.algos.hmasd.config`) and are re-exported here with the rest.
"""

from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.ppo.config import EncoderConfig, ModelConfig, PPOConfig
from rl_system.config.base import ConfigError, Strict, Threads
from rl_system.config.load import apply_override, build_config, load_config, set_key
from rl_system.config.run import RunConfig
from rl_system.config.sections import (
    CheckpointConfig,
    EnvConfig,
    LearnerConfig,
    MlflowConfig,
    ReseedConfig,
    RollbackConfig,
    SelfPlayConfig,
    TrackersConfig,
    WandbConfig,
    WorkersConfig,
    attempt_seed,
)

__all__ = [
    "CheckpointConfig", "ConfigError", "EncoderConfig", "EnvConfig", "HMASDConfig", "LearnerConfig", "MlflowConfig",
    "ModelConfig", "PPOConfig", "ReseedConfig", "RollbackConfig", "RunConfig", "SelfPlayConfig", "Strict", "Threads",
    "TrackersConfig", "WandbConfig", "WorkersConfig", "apply_override", "attempt_seed", "build_config", "load_config",
    "set_key",
]
