"""Fault injection for testing a training setup: wraps any env and misbehaves on schedule.

``make_env("Chaos", n, env="CartPole", raise_at_step=100, nan_reward_at_step=50)`` behaves like
the inner env, except that step number ``raise_at_step`` (counted per env instance, i.e. per
worker process) raises :class:`ChaosError`, and from step ``nan_reward_at_step`` on every reward is
NaN. Used by the resilience tests; useful to check that a deployment survives a crashing env.
"""

from __future__ import annotations

from typing import Any

import torch

from rl_system.envs.base import Obs, StepResult, VecEnv


class ChaosError(RuntimeError):
    """The injected failure."""


class ChaosVecEnv(VecEnv):
    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 env: str = "CartPole", raise_at_step: int | None = None, nan_reward_at_step: int | None = None,
                 env_kwargs: dict[str, Any] | None = None):
        from rl_system.envs import make_env

        self.inner = make_env(env, num_envs, device, seed=seed, **(env_kwargs or {}))
        self.num_envs, self.device = self.inner.num_envs, self.inner.device
        self.observation_spec, self.action_spec = self.inner.observation_spec, self.inner.action_spec
        self.raise_at_step, self.nan_reward_at_step = raise_at_step, nan_reward_at_step
        self.steps = 0

    def reset(self, seed: int | None = None) -> Obs:
        return self.inner.reset(seed)

    def step(self, action: torch.Tensor) -> StepResult:
        self.steps += 1
        if self.raise_at_step is not None and self.steps == self.raise_at_step:
            raise ChaosError(f"injected env failure at step {self.steps}")
        out = self.inner.step(action)
        if self.nan_reward_at_step is not None and self.steps >= self.nan_reward_at_step:
            out = out._replace(reward=torch.full_like(out.reward, float("nan")))
        return out

    def close(self) -> None:
        self.inner.close()
