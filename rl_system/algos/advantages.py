"""Advantage estimation shared by the algorithms (PPO, both levels of HMASD)."""

from __future__ import annotations

import torch


@torch.no_grad()
def compute_gae(reward: torch.Tensor, value: torch.Tensor, done: torch.Tensor,
                last_value: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation for all envs at once.

    reward, value: ``[T, N]`` float; done: ``[T, N]`` bool, True where step t ended an episode
    (terminated or truncated; a truncated step's reward must already include
    ``gamma * V(final_obs)``); last_value: ``[N]`` value of the observation after step T-1.
    Returns ``(advantages[T, N], returns[T, N])``. The loop runs over T only; each step is
    N-wide tensor arithmetic.
    """
    T = reward.shape[0]
    not_done = (~done).to(reward.dtype)
    next_value = torch.cat([value[1:], last_value.unsqueeze(0)], dim=0)
    delta = reward + gamma * next_value * not_done - value
    discount = gamma * lam * not_done
    adv = torch.empty_like(reward)
    running = torch.zeros_like(last_value)
    for t in range(T - 1, -1, -1):
        running = delta[t] + discount[t] * running
        adv[t] = running
    return adv, adv + value
