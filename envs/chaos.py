"""Fault injection for testing a training setup: wraps any env and misbehaves on schedule.

``make_env("Chaos", n, env="CartPole", raise_at_step=100, nan_reward_at_step=50)`` behaves like
the inner env, except that step number ``raise_at_step`` (counted per env instance, i.e. per
worker process) raises :class:`ChaosError`, and from step ``nan_reward_at_step`` on every reward is
NaN; ``sleep_s=0.01`` makes every step that much slower, in every copy or (``slow_seeds``) only in
copies built with one of those seeds (a worker's envs are seeded ``run seed * 10007 + worker
index``: ``slow_seeds=[1]`` slows worker 1 of a seed-0 run). Used by the resilience tests; useful
to check that a deployment survives a crashing env or a straggling node.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from rl_system.envs.base import Obs, StepResult, VecEnv


class ChaosError(RuntimeError):
    """The injected failure."""


class ChaosVecEnv(VecEnv):
    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 env: str = "CartPole", raise_at_step: int | None = None, nan_reward_at_step: int | None = None,
                 env_kwargs: dict[str, Any] | None = None, sleep_s: float = 0.0, slow_seeds: list[int] | None = None):
        from rl_system.envs import make_env

        self.inner = make_env(env, num_envs, device, seed=seed, **(env_kwargs or {}))
        self.num_envs, self.device = self.inner.num_envs, self.inner.device
        self.observation_spec, self.action_spec = self.inner.observation_spec, self.inner.action_spec
        self.num_agents, self.episode_stats = self.inner.num_agents, getattr(self.inner, "episode_stats", ())
        self.raise_at_step, self.nan_reward_at_step = raise_at_step, nan_reward_at_step
        self.sleep_s = sleep_s if slow_seeds is None or seed in slow_seeds else 0.0
        self.steps = 0

    def reset(self, seed: int | None = None) -> Obs:
        return self.inner.reset(seed)

    def step(self, action: torch.Tensor) -> StepResult:
        self.steps += 1
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.raise_at_step is not None and self.steps == self.raise_at_step:
            raise ChaosError(f"injected env failure at step {self.steps}")
        out = self.inner.step(action)
        if self.nan_reward_at_step is not None and self.steps >= self.nan_reward_at_step:
            out = out._replace(reward=torch.full_like(out.reward, float("nan")))
        return out

    def close(self) -> None:
        self.inner.close()
