"""Vectorized environments (torch tensors, batched, auto-reset) and adapters.

``make_env(name, num_envs, device, seed, **kwargs)`` builds any of them by name:

* a name registered here (``"CartPole"`` — our torch CartPole), or
* ``"gym:<id>"`` for any Gymnasium env id run through :class:`envs.gym_adapter.GymnasiumVecEnv`,
  e.g. ``"gym:Acrobot-v1"`` or ``"gym:Pendulum-v1"``.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import torch

from envs.base import AgentDiscrete, Box, Discrete, StepResult, TensorSpec, VecEnv

# name -> "module:Class"; imported lazily so that importing ``envs`` stays cheap.
_REGISTRY: dict[str, str] = {
    "CartPole": "envs.cartpole:CartPoleVecEnv",
    "Chaos": "envs.chaos:ChaosVecEnv",
    "AirCombat": "envs.air_combat:AirCombatVecEnv",
    "Navigation": "envs.navigation:NavigationVecEnv",
    "AliceBob": "envs.alice_bob:AliceBobVecEnv",
}

GYM_PREFIX = "gym:"


def register(name: str, target: str | Callable[..., VecEnv]) -> None:
    """Register an env constructor under ``name`` (``"module:Class"`` or a callable)."""
    _REGISTRY[name] = target  # type: ignore[assignment]


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def _resolve(target: str | Callable[..., VecEnv]) -> Callable[..., VecEnv]:
    if callable(target):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def make_env(name: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
             **kwargs: Any) -> VecEnv:
    """Build ``num_envs`` copies of env ``name`` on ``device``; unknown names raise ``KeyError``."""
    if name.startswith(GYM_PREFIX):
        from envs.gym_adapter import GymnasiumVecEnv

        return GymnasiumVecEnv(name[len(GYM_PREFIX):], num_envs=num_envs, device=device, seed=seed, **kwargs)
    if name not in _REGISTRY:
        raise KeyError(f"unknown env {name!r}; known: {', '.join(registered_names())} or 'gym:<Gymnasium id>'")
    return _resolve(_REGISTRY[name])(num_envs=num_envs, device=device, seed=seed, **kwargs)


__all__ = ["AgentDiscrete", "Box", "Discrete", "StepResult", "TensorSpec", "VecEnv", "make_env", "register", "registered_names"]
