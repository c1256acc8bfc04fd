"""PPO's clipped surrogate, shared by PPO and both levels of HMASD (the only place it is written),
and the actor-critic loss that PPO, multi-agent PPO and A2C make of their sums."""

from __future__ import annotations

import torch

PPO_STATS = ("pg_loss", "v_loss", "entropy", "approx_kl", "clip_frac")
"""The statistics of a PPO minibatch step, in the order :func:`ppo_sums`' callers stack them
(policy loss, value loss, entropy, approximate KL, clipped share), reported as global minibatch means."""


def actor_critic_loss(pg: torch.Tensor, v: torch.Tensor, ent: torch.Tensor, ent_coef: float, vf_coef: float,
                      rows: int, *more: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, statistics)`` of a minibatch from its sums over this learner's rows: the loss
    ``(pg - ent_coef * ent + vf_coef * v) / rows`` (this learner's share of the mean over the
    group's ``rows``) and ``[pg, v, ent, *more]`` stacked, without grad."""
    loss = (pg - ent_coef * ent + vf_coef * v) / rows
    with torch.no_grad():
        return loss, torch.stack([pg, v, ent, *more]).detach()


def approx_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """Per-row approximate KL of the new policy to the sampling one, ``(r - 1) - log r`` with
    ``r = exp(log_ratio)`` (Schulman's k3 estimator: unbiased and never negative)."""
    return torch.expm1(log_ratio) - log_ratio


def value_error_loss(err: torch.Tensor, huber_delta: float | None = None) -> torch.Tensor:
    """Per row: half the squared error, or with ``huber_delta`` the Huber loss (the same below
    ``delta``, linear beyond it, so a return far from the value estimate moves it by a bounded
    step: MAPPO's and HMASD's papers use delta 10)."""
    if huber_delta is None:
        return 0.5 * err.square()
    return torch.nn.functional.huber_loss(err, torch.zeros_like(err), reduction="none", delta=huber_delta)


def ppo_sums(log_ratio: torch.Tensor, adv: torch.Tensor, new_v: torch.Tensor, old_v: torch.Tensor,
             target: torch.Tensor, clip: float, vclip: float | None, weight: torch.Tensor | None = None,
             huber_delta: float | None = None) -> tuple[torch.Tensor, ...]:
    """``(pg, v, kl, clipped)`` over rows ``[B]``, each a sum over the rows: the clipped policy
    loss (each row's term times ``weight[B]``, where given: the decoupled objective's importance
    weights), the (optionally clipped, by ``vclip``) value error's loss (:func:`value_error_loss`:
    halved square, or Huber with ``huber_delta``), and, without gradients, the approximate KL and
    the number of rows whose ratio left ``[1 - clip, 1 + clip]``.

    Sums, not means: the caller divides by the rows of the whole minibatch, which over a learner
    group are more than this learner holds.
    """
    ratio = log_ratio.exp()
    pg = torch.max(*_pg_terms(ratio, adv, clip))
    pg = (pg if weight is None else pg * weight).sum()
    if vclip is None:
        v = value_error_loss(new_v - target, huber_delta).sum()
    else:
        err, _, err_clipped = _v_terms(new_v, old_v, target, vclip)
        v = torch.max(value_error_loss(err, huber_delta), value_error_loss(err_clipped, huber_delta)).sum()
    with torch.no_grad():
        kl, clipped = _diagnostics(log_ratio, ratio, clip)
    return pg, v, kl, clipped


@torch.no_grad()
def policy_row_grads(log_ratio: torch.Tensor, adv: torch.Tensor, clip: float, weight: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(pg, kl, clipped, d_logp [B])``: the policy loss's sum over rows ``[B]``, the
    approximate KL's and the clipped rows' (:func:`ppo_sums`), and each row's derivative of the
    ``pg`` sum with respect to its new log-probability, for :mod:`rl_system.algos.ppo.analytic`
    (:func:`value_row_grads` has the value loss's).

    Autograd's conventions decide the kinks: ``torch.max`` of two tensors gives each half where
    they tie, and ``clamp`` passes the gradient inside its bounds, the bounds included. For the
    policy term that is exactly ``-A`` where ``-A r >= -A clip(r)`` and 0 elsewhere: inside the
    bounds the two terms are the same float (a tie, whose halves add up), outside they differ
    unless ``A`` is 0."""
    ratio = log_ratio.exp()
    unclipped, clipped_term = _pg_terms(ratio, adv, clip)
    pg_rows = torch.max(unclipped, clipped_term)
    d_ratio = torch.where(unclipped >= clipped_term, -adv, 0.0)
    if weight is not None:
        pg_rows, d_ratio = pg_rows * weight, d_ratio * weight
    kl, clipped = _diagnostics(log_ratio, ratio, clip)
    return pg_rows.sum(), kl, clipped, d_ratio * ratio


@torch.no_grad()
def value_row_grads(new_v: torch.Tensor, old_v: torch.Tensor, target: torch.Tensor, vclip: float | None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(v, d_value [B])``: the value loss's sum over rows (:func:`ppo_sums`, halved squares) and
    each row's derivative of it with respect to its new value. ``old + (new - old)`` need not
    round back to ``new``, so the clipped loss's branch is read off the squares; a tie outside
    the clip range (the target exactly halfway) takes the unclipped branch's whole gradient where
    autograd takes half."""
    if vclip is None:
        err = new_v - target
        return 0.5 * err.square().sum(), err
    err, delta, err_clipped = _v_terms(new_v, old_v, target, vclip)
    sq, sq_clipped = err.square(), err_clipped.square()
    v = 0.5 * torch.max(sq, sq_clipped).sum()
    return v, torch.where(sq >= sq_clipped, err, torch.where(delta.abs() <= vclip, err_clipped, 0.0))


def _pg_terms(ratio: torch.Tensor, adv: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The two policy-loss terms per row, ``(-A r, -A clip(r))``; the loss is their maximum."""
    return -adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)


def _v_terms(new_v: torch.Tensor, old_v: torch.Tensor, target: torch.Tensor, vclip: float):
    """``(err, new - old, clipped err)`` per row of the clipped value loss, whose row term is half
    the larger of the two errors squared."""
    delta = new_v - old_v
    return new_v - target, delta, old_v + delta.clamp(-vclip, vclip) - target


def _diagnostics(log_ratio: torch.Tensor, ratio: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The approximate KL summed over rows, and the rows whose ratio left ``[1 - clip, 1 + clip]``."""
    return approx_kl(log_ratio).sum(), ((ratio - 1).abs() > clip).float().sum()
