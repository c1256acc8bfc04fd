"""The built-in single-agent envs in RLlib's env registry: after :func:`register`,
``PPOConfig().environment("rl_system/Navigation-v0")`` works as it does for a Gymnasium id.

:func:`register` stores one creator per id with ``ray.tune.register_env``. The creators live in
Ray's function registry in the cluster's GCS, so every EnvRunner on every node finds them,
without the ``"rl_system.envs.gym_vector:"`` module prefix that a plain Gymnasium id needs there
(docs/ecosystem.md). Each creator builds the Gymnasium single-env view of :mod:`rl_system.envs.gym_vector`
(:class:`~rl_system.envs.gym_vector.TorchEnv`: one torch env, the plain ``gymnasium.Env`` contract, which
is what RLlib 2.60's ``SingleAgentEnvRunner`` expects). A ``Dict`` observation is flattened
into one vector (Gymnasium's ``FlattenObservation``) so RLlib's default models take it with no
connector; AirCombat's action mask then rides along as 12 0/1 features. ``env_config`` items
are the env's constructor kwargs, plus ``seed``.

AliceBob, multi-agent, is registered as ``rl_system/AliceBob-v0``: RLlib's own
``ParallelPettingZooEnv`` over the PettingZoo view of one env (:mod:`rl_system.envs.pettingzoo_view`), so
``PPOConfig().environment("rl_system/AliceBob-v0").multi_agent(...)`` trains it with RLlib's
multi-agent runners (one shared policy or one per agent, as ``policy_mapping_fn`` says).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation

ENV_IDS = {"rl_system/CartPole-v0": "CartPole", "rl_system/Navigation-v0": "Navigation",
           "rl_system/AirCombat-v0": "AirCombat"}
MULTI_AGENT_IDS = {"rl_system/AliceBob-v0": "AliceBob"}


def make(name: str, env_config: dict | None = None, **kwargs: Any) -> gymnasium.Env:
    """The RLlib-facing env of built-in env ``name``: ``env_config`` (RLlib's ``EnvContext``, a
    dict) and ``kwargs`` are its constructor kwargs, ``seed`` included."""
    from rl_system.envs.gym_vector import TorchEnv

    kwargs = {**dict(env_config or {}), **kwargs}
    env: gymnasium.Env = TorchEnv(name, seed=kwargs.pop("seed", None), **kwargs)
    if isinstance(env.observation_space, spaces.Dict):
        env = FlattenObservation(env)
    return env


def _creator(name: str) -> Callable[..., gymnasium.Env]:
    def create(env_config: dict | None = None) -> gymnasium.Env:
        return make(name, env_config)

    return create


def make_multi_agent(name: str, env_config: dict | None = None, **kwargs: Any) -> Any:
    """RLlib's ``MultiAgentEnv`` of built-in multi-agent env ``name`` (agent ids: the env's
    agent names); ``env_config`` and ``kwargs`` are its constructor kwargs, ``seed`` included."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from rl_system.envs.pettingzoo_view import parallel_env

    kwargs = {**dict(env_config or {}), **kwargs}
    return ParallelPettingZooEnv(parallel_env(name, seed=kwargs.pop("seed", None), **kwargs))


def _multi_agent_creator(name: str) -> Callable[..., Any]:
    def create(env_config: dict | None = None) -> Any:
        return make_multi_agent(name, env_config)

    return create


def register() -> list[str]:
    """Register every id of :data:`ENV_IDS` and :data:`MULTI_AGENT_IDS` with Ray's env registry;
    returns the ids."""
    from ray.tune.registry import register_env

    _registry_on_this_job()
    for env_id, name in ENV_IDS.items():
        register_env(env_id, _creator(name))
    for env_id, name in MULTI_AGENT_IDS.items():
        register_env(env_id, _multi_agent_creator(name))
    return [*ENV_IDS, *MULTI_AGENT_IDS]


def _registry_on_this_job() -> None:
    """Key Tune's registry by the Ray job this process is on now.

    Ray 2.60's registry (``ray/tune/registry.py``) keys its entries by the first job id the process
    saw and keeps it: after ``ray.shutdown()`` and a new ``ray.init()`` in the same process (a
    notebook, a test session) it would store the ids under the old job, and an EnvRunner (on the
    new job) would not find them and fall back to ``gymnasium.make`` (``NamespaceNotFound``)."""
    import ray
    from ray.tune import registry

    store = getattr(registry, "_global_registry", None)
    if store is None or not getattr(store, "_prefix", None):
        return  # no job cached: the registry reads the current one when it stores
    # Before ray.init() a cached id is a past job's; the ids wait for init and are stored then.
    if not ray.is_initialized() or store._prefix != ray.get_runtime_context().get_job_id():
        store._prefix = None
