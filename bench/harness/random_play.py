"""Random play on a multi-agent env: the return a task gives without learning, the floor a trained
policy is read against (``bench/bench_marl.py``'s *random* rows, ``bench/bench_pettingzoo.py``)."""

from __future__ import annotations

import math
from typing import Any

import torch


def random_actions(spec: Any, n: int, gen: torch.Generator, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``n`` rows of uniform random actions of the multi-agent ``spec``; discrete ones only among
    the actions ``mask`` (``[n, agents, width]``) allows, where given."""
    from rl_system.envs.base import AgentBox, AgentDiscrete, AgentMultiDiscrete

    if isinstance(spec, AgentDiscrete):
        if mask is None:
            return torch.randint(0, spec.n, (n, spec.num_agents), generator=gen)
        return torch.multinomial(mask.reshape(-1, spec.n).float(), 1, generator=gen).reshape(n, spec.num_agents)
    if isinstance(spec, AgentMultiDiscrete):
        high = torch.tensor(spec.nvec)
        return (torch.rand(n, *spec.shape, generator=gen) * high).long()
    if isinstance(spec, AgentBox):
        low, high = torch.tensor(spec.low), torch.tensor(spec.high)
        return low + torch.rand(n, *spec.shape, generator=gen) * (high - low).reshape(spec.agent_shape)
    raise TypeError(f"no random play for the action spec {spec} (a multi-agent spec was expected)")


def random_play(name: str, kwargs: dict[str, Any], episodes: int, num_envs: int = 8,
                seed: int = 0) -> tuple[float, float]:
    """Mean and standard error of the agents' mean episode return of uniform random actions on env
    ``name`` (``kwargs``) over ``episodes`` episodes of ``num_envs`` copies, seeded."""
    from rl_system.envs import make_env
    from rl_system.envs.base import ACTION_MASK

    env = make_env(name, num_envs, seed=seed, **kwargs)
    obs = env.reset()
    gen = torch.Generator().manual_seed(seed)
    running, returns = torch.zeros(num_envs), []
    while len(returns) < episodes:
        res = env.step(random_actions(env.action_spec, num_envs, gen, obs.get(ACTION_MASK)))
        obs = res.obs
        running += res.reward.mean(-1) if res.reward.dim() > 1 else res.reward
        done = res.terminated | res.truncated
        returns += running[done].tolist()
        running[done] = 0.0
    env.close()
    r = torch.tensor(returns[:episodes], dtype=torch.float64)
    return float(r.mean()), float(r.std() / math.sqrt(len(r)))
