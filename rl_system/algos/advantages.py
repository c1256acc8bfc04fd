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
    not_done = (~done).to(reward.dtype)
    next_value = torch.cat([value[1:], last_value.unsqueeze(0)], dim=0)
    delta = reward + gamma * next_value * not_done - value
    adv = _discounted_sums(delta, gamma * lam * not_done)
    return adv, adv + value


@torch.no_grad()
def compute_vtrace(reward: torch.Tensor, value: torch.Tensor, done: torch.Tensor, last_value: torch.Tensor,
                   log_rho: torch.Tensor, gamma: float, lam: float, rho_bar: float = 1.0,
                   c_bar: float = 1.0) -> torch.Tensor:
    """V-trace value targets (Espeholt et al. 2018, eq. 1, with IMPALA's lambda) for all envs at once.

    ``reward``, ``value``, ``done``, ``last_value`` as in :func:`compute_gae` (``value`` the
    critic's estimates stored with the rollout); ``log_rho``: ``[T, N]`` log importance ratios
    ``log pi(a|s) - log mu(a|s)`` of the learner's policy ``pi`` against the one that sampled,
    ``mu``. Returns ``vs [T, N]``::

        delta_t = min(rho_bar, rho_t) * (r_t + gamma * V_{t+1} * (1 - done_t) - V_t)
        vs_t - V_t = delta_t + gamma * lam * min(c_bar, rho_t) * (1 - done_t) * (vs_{t+1} - V_{t+1})

    With ``log_rho = 0`` (on-policy) and ``rho_bar, c_bar >= 1`` these are GAE's returns exactly.
    """
    rho = log_rho.to(reward.dtype).exp()
    not_done = (~done).to(reward.dtype)
    next_value = torch.cat([value[1:], last_value.unsqueeze(0)], dim=0)
    delta = rho.clamp(max=rho_bar) * (reward + gamma * next_value * not_done - value)
    return value + _discounted_sums(delta, gamma * lam * rho.clamp(max=c_bar) * not_done)


def _discounted_sums(delta: torch.Tensor, discount: torch.Tensor) -> torch.Tensor:
    """``out[t] = delta[t] + discount[t] * out[t + 1]`` (``out[T] = 0``) for ``[T, N]`` tensors: the
    backward recursion behind GAE and V-trace. The loop runs over T only; each step is N-wide."""
    out = torch.empty_like(delta)
    # Rows as views made once, and the step's two ops writing in place: 2 ATen calls a step
    # instead of 6 (CartPole's 32-step rollout: ~70 calls instead of ~190, of an update's ~2,200).
    deltas, discounts, outs = delta.unbind(0), discount.unbind(0), out.unbind(0)
    running, scaled = torch.zeros_like(deltas[0]), torch.empty_like(deltas[0])
    for t in range(len(outs) - 1, -1, -1):
        torch.mul(discounts[t], running, out=scaled)
        running = torch.add(deltas[t], scaled, out=outs[t])
    return out
