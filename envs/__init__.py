"""Vectorized environments (torch tensors, batched, auto-reset) and adapters.

``make_env(name, num_envs, device, seed, **kwargs)`` builds any of them by name. ``name`` is one of

* a name registered here (``"CartPole"``, ``"Navigation"``, ...; :func:`registered_names`);
* an **entry point** ``"package.module:Name"``: ``Name`` is a :class:`VecEnv` subclass or a
  factory ``(num_envs, device, seed, **kwargs) -> VecEnv``, imported wherever the env is built
  (every worker, on every node);
* ``"gym:<id>"``: a Gymnasium env run through :class:`rl_system.envs.gym_adapter.GymnasiumVecEnv`, e.g.
  ``"gym:Acrobot-v1"``; ``"gym:package.module:EnvId-v0"`` imports ``package.module`` first
  (Gymnasium's own convention), so an env that module registers can be made on every worker.
* ``"envpool:<id>"``: an EnvPool task (``envpool.list_all_envs()``, e.g. ``"envpool:Hopper-v5"``)
  run through :class:`rl_system.envs.envpool_adapter.EnvPoolVecEnv` (the ``envpool`` extra).
* ``"vmas:<scenario>"``: a VMAS scenario (``"vmas:balance"``), VMAS's own torch batch as a
  multi-agent env (:mod:`rl_system.envs.vmas_adapter`, the ``vmas`` extra).
* ``"pettingzoo:<module>:<env_fn>"``: any PettingZoo ``ParallelEnv`` (``"pettingzoo:mpe2.simple_spread_v3:parallel_env"``),
  N copies stepped as one multi-agent batch (:mod:`rl_system.envs.pettingzoo_adapter`).
* ``"magym:[module:]<id>"``: a Gymnasium env whose spaces are Tuples over agents (Level-Based
  Foraging ``"magym:Foraging-8x8-2p-3f-v3"``, the Multi-Robot Warehouse ``"magym:rware-tiny-2ag-v2"``),
  N copies stepped as one multi-agent batch (:mod:`rl_system.envs.magym_adapter`, the ``epymarl`` extra).

A name that cannot be resolved raises :class:`EntryPointError` (a ``ValueError``) with one line
saying what was expected.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from rl_system.envs.base import (
    ACTION_MASK,
    AgentDiscrete,
    Box,
    Discrete,
    MultiDiscrete,
    StepResult,
    TensorSpec,
    VecEnv,
    validate_specs,
)
from rl_system.envs.entry_points import (
    MOVED_MODULES,
    EntryPointError,
    _import_module,
    import_entry_point,
    own_module_name,
)

# name -> "module:Class"; imported lazily so that importing ``rl_system.envs`` stays cheap.
_REGISTRY: dict[str, str | Callable[..., VecEnv]] = {
    "CartPole": "rl_system.envs.cartpole:CartPoleVecEnv",
    "Chaos": "rl_system.envs.chaos:ChaosVecEnv",
    "AirCombat": "rl_system.envs.air_combat:AirCombatVecEnv",
    "Navigation": "rl_system.envs.navigation:NavigationVecEnv",
    "AliceBob": "rl_system.envs.alice_bob:AliceBobVecEnv",
    "Overcooked": "rl_system.envs.overcooked:OvercookedVecEnv",
}

GYM_PREFIX = "gym:"
ENVPOOL_PREFIX = "envpool:"
VMAS_PREFIX = "vmas:"
PETTINGZOO_PREFIX = "pettingzoo:"
MAGYM_PREFIX = "magym:"


def register(name: str, target: str | Callable[..., VecEnv]) -> None:
    """Register an env constructor under ``name`` (``"module:Class"`` or a callable)."""
    _REGISTRY[name] = target


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def _known() -> str:
    return (f"a registered name ({', '.join(registered_names())}), 'package.module:Name', "
            "'gym:<Gymnasium id>', 'envpool:<EnvPool id>', 'vmas:<scenario>', 'pettingzoo:<module>:<env_fn>' or "
            "'magym:<Gymnasium id>'")


def resolve(name: str) -> Callable[..., VecEnv]:
    """The constructor ``name`` stands for (a registered name or an entry point; not ``gym:`` or
    ``envpool:``)."""
    if name in _REGISTRY:
        target = _REGISTRY[name]
        return target if callable(target) else import_entry_point(target, f"env {name!r}")
    if ":" in name:
        ctor = import_entry_point(name, f"env {name!r}")
        if not callable(ctor):
            raise EntryPointError(f"env {name!r}: expected a VecEnv subclass or a factory "
                               f"(num_envs, device, seed, **kwargs) -> VecEnv, got {type(ctor).__name__}")
        return ctor
    raise EntryPointError(f"unknown env {name!r}; expected {_known()}")


def _gym_id(name: str) -> str:
    """The Gymnasium id of ``gym:[module:]Id``, the module imported first (it registers the id)."""
    rest = name[len(GYM_PREFIX):]
    module_name, sep, env_id = rest.rpartition(":")
    if sep:
        if not module_name or not env_id:
            raise EntryPointError(f"env {name!r}: expected 'gym:<id>' or 'gym:package.module:<id>'")
        _import_module(module_name, f"env {name!r}")
        return env_id
    return rest


def make_env(name: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
             **kwargs: Any) -> VecEnv:
    """Build ``num_envs`` copies of env ``name`` on ``device`` (see the module docstring).

    Raises :class:`EntryPointError` for a name that does not resolve or a factory that returns
    something other than a :class:`VecEnv`, and ``TypeError``/``ValueError`` for
    specs that are malformed or disagree (an ``action_mask`` of the wrong width)."""
    if name.startswith(GYM_PREFIX):
        from rl_system.envs.gym_adapter import GymnasiumVecEnv

        env: Any = GymnasiumVecEnv(_gym_id(name), num_envs=num_envs, device=device, seed=seed, **kwargs)
    elif name.startswith(ENVPOOL_PREFIX):
        from rl_system.envs.envpool_adapter import EnvPoolVecEnv

        env = EnvPoolVecEnv(name[len(ENVPOOL_PREFIX):], num_envs=num_envs, device=device, seed=seed, **kwargs)
    elif name.startswith(VMAS_PREFIX):
        from rl_system.envs.vmas_adapter import VmasVecEnv

        env = VmasVecEnv(name[len(VMAS_PREFIX):], num_envs=num_envs, device=device, seed=seed, **kwargs)
    elif name.startswith(PETTINGZOO_PREFIX):
        from rl_system.envs.pettingzoo_adapter import PettingZooVecEnv

        env = PettingZooVecEnv(name[len(PETTINGZOO_PREFIX):], num_envs=num_envs, device=device, seed=seed, **kwargs)
    elif name.startswith(MAGYM_PREFIX):
        from rl_system.envs.magym_adapter import MAGymVecEnv

        env = MAGymVecEnv(name[len(MAGYM_PREFIX):], num_envs=num_envs, device=device, seed=seed, **kwargs)
    else:
        env = resolve(name)(num_envs=num_envs, device=device, seed=seed, **kwargs)
        if not isinstance(env, VecEnv):
            got = type(env).__name__
            if hasattr(env, "close"):
                env.close()
            raise EntryPointError(f"env {name!r}: the factory returned {got}, expected an rl_system.envs.base.VecEnv")
    try:
        validate_specs(env.observation_spec, env.action_spec)
    except (TypeError, ValueError):
        env.close()
        raise
    return env


__all__ = ["ACTION_MASK", "AgentDiscrete", "Box", "Discrete", "EntryPointError", "MultiDiscrete", "StepResult",
           "TensorSpec", "VecEnv", "MOVED_MODULES", "import_entry_point", "make_env", "own_module_name", "register",
           "registered_names", "resolve"]
