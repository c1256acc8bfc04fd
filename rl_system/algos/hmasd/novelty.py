"""Random network distillation (Burda et al., "Exploration by Random Network Distillation", ICLR
2019) as an optional novelty bonus for the low level (``hmasd.novelty_coef``; not in HMASD).

A fixed, randomly initialised *target* network embeds each agent's observation; a *predictor*
network is trained to match it on the observations the agents reach. Its error stays high on
observations seen rarely -- on Alice_and_Bob, the rooms for a team whose skills all live in the
start hall -- so the error is a count-free novelty signal over the local views. The bonus added to
``r_i`` is ``novelty_coef * e_i / scale`` (``novelty_norm``):

* ``round``: ``scale`` is the round's mean error. The bonus has mean 1 every round, however
  familiar the map has become, so it keeps pushing the agents towards their least visited views.
* ``initial``: ``scale`` is the mean error of the first round the learner saw, when nothing was
  familiar (kept in the checkpoint). The bonus is then "how unfamiliar, against a view never
  seen" and fades as the predictor learns the map, so holding a well-known place (a button) stops
  costing anything against wandering.

``novelty_gate: success`` multiplies the bonus by ``1 - p``, where ``p`` is the share of the
round's finished episodes that *succeeded* (terminated on a step with a positive team reward, the
shape of sparse-reward tasks such as Alice_and_Bob). The bonus then explores while the task is
unsolved and steps aside once it is solved, when the skills must hold still (a button) on views the
predictor knows well -- which a constant bonus pays them to leave (docs/hmasd.md).
"""

from __future__ import annotations

import torch
from torch import nn

from rl_system import collective


def _mlp(obs_dim: int, hidden: int) -> nn.Sequential:
    # LayerNorm without affine weights: the stateless stand-in for RND's observation whitening.
    return nn.Sequential(nn.LayerNorm(obs_dim, elementwise_affine=False), nn.Linear(obs_dim, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))


class RandomNetworkDistillation(nn.Module):
    """Target (frozen) and predictor networks over one agent's observation ``[..., O]``."""

    def __init__(self, obs_dim: int, hidden: int, norm: str = "round"):
        super().__init__()
        self.target = _mlp(obs_dim, hidden).requires_grad_(False)
        self.predictor = _mlp(obs_dim, hidden)
        if norm == "initial":
            # The first round's mean error (0 until then), in the checkpoint. Only for this norm:
            # "round" needs no state, and its checkpoints (older than this option) have none.
            self.register_buffer("initial_error", torch.zeros(()))

    def error(self, obs: torch.Tensor) -> torch.Tensor:
        """Prediction error per observation: ``[..., O]`` -> ``[...]`` (the predictor's loss)."""
        return (self.predictor(obs) - self.target(obs)).square().mean(-1)


@torch.no_grad()
def novelty_bonus(rnd: RandomNetworkDistillation, error: torch.Tensor, norm: str,
                  group: collective.Collective = collective.SOLO) -> torch.Tensor:
    """The round's errors ``[...]`` divided by the scale of ``norm`` ("round": their mean;
    "initial": the first round's mean, recorded in ``rnd`` on the first call) -> ``[...]``. The
    mean is the learner ``group``'s (:mod:`rl_system.collective`), so every learner scales alike."""
    if norm == "round":
        return error / group.mean(error).clamp_min(1e-12)
    if float(rnd.initial_error) == 0.0:
        rnd.initial_error.copy_(group.mean(error).clamp_min(1e-12))
    return error / rnd.initial_error


def success_share(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                  group: collective.Collective = collective.SOLO) -> torch.Tensor:
    """Share of the episodes ending in ``[T, N]`` (over ``group``'s learners) that terminated on a
    positive reward (0 when none ended) -> ``[]``."""
    counts = torch.stack([(terminated & (reward > 0)).sum(), (terminated | truncated).sum()]).float()
    won, ended = group.all_reduce(counts)
    return won / ended.clamp_min(1)
