"""Random play on a multi-agent env: the return a task gives without learning, the floor a trained
policy is read against (``bench/bench_marl.py``'s *random* rows, ``bench/bench_pettingzoo.py``)."""

from __future__ import annotations

import math
from typing import Any

import torch


def random_play(name: str, kwargs: dict[str, Any], episodes: int, num_envs: int = 8,
                seed: int = 0) -> tuple[float, float]:
    """Mean and standard error of the agents' mean episode return of uniform random actions on env
    ``name`` (``kwargs``) over ``episodes`` episodes of ``num_envs`` copies, seeded."""
    from rl_system.envs import make_env
    from rl_system.envs.checker import random_actions

    env = make_env(name, num_envs, seed=seed, **kwargs)
    obs = env.reset()
    gen = torch.Generator().manual_seed(seed)
    running, returns = torch.zeros(num_envs), []
    while len(returns) < episodes:
        res = env.step(random_actions(env, obs, gen))  # uniform over the legal actions, as check-env plays
        obs = res.obs
        running += res.reward.mean(-1) if res.reward.dim() > 1 else res.reward
        done = res.terminated | res.truncated
        returns += running[done].tolist()
        running[done] = 0.0
    env.close()
    r = torch.tensor(returns[:episodes], dtype=torch.float64)
    return float(r.mean()), float(r.std() / math.sqrt(len(r)))
