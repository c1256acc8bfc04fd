"""PPO's clipped surrogate, shared by PPO and both levels of HMASD (the only place it is written)."""

from __future__ import annotations

import torch


def approx_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """Per-row approximate KL of the new policy to the sampling one, ``(r - 1) - log r`` with
    ``r = exp(log_ratio)`` (Schulman's k3 estimator: unbiased and never negative)."""
    return torch.expm1(log_ratio) - log_ratio


def ppo_sums(log_ratio: torch.Tensor, adv: torch.Tensor, new_v: torch.Tensor, old_v: torch.Tensor,
             target: torch.Tensor, clip: float, vclip: float | None, weight: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, ...]:
    """``(pg, v, kl, clipped)`` over rows ``[B]``, each a sum over the rows: the clipped policy
    loss (each row's term times ``weight[B]``, where given: the decoupled objective's importance
    weights), the (optionally clipped, by ``vclip``) squared value error halved, and, without
    gradients, the approximate KL and the number of rows whose ratio left ``[1 - clip, 1 + clip]``.

    Sums, not means: the caller divides by the rows of the whole minibatch, which over a learner
    group are more than this learner holds.
    """
    ratio = log_ratio.exp()
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
    pg = (pg if weight is None else pg * weight).sum()
    if vclip is None:
        v = 0.5 * (new_v - target).square().sum()
    else:
        v_clipped = old_v + (new_v - old_v).clamp(-vclip, vclip)
        v = 0.5 * torch.max((new_v - target).square(), (v_clipped - target).square()).sum()
    with torch.no_grad():
        kl = approx_kl(log_ratio).sum()
        clipped = ((ratio - 1).abs() > clip).float().sum()
    return pg, v, kl, clipped
