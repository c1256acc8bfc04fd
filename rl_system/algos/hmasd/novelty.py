"""Random network distillation (Burda et al., "Exploration by Random Network Distillation", ICLR
2019) as an optional novelty bonus for the low level (``hmasd.novelty_coef``; not in HMASD).

A fixed, randomly initialised *target* network embeds each agent's observation; a *predictor*
network is trained to match it on the observations the agents reach. Its error stays high on
observations seen rarely -- on Alice_and_Bob, the rooms for a team whose skills all live in the
start hall -- so the error is a count-free novelty signal over the local views. The bonus added to
``r_i`` is ``novelty_coef * e_i / mean(e)``: the error relative to the round's mean error, so its
scale does not shrink as the predictor fits (and needs no running statistics in the checkpoint).
"""

from __future__ import annotations

import torch
from torch import nn


def _mlp(obs_dim: int, hidden: int) -> nn.Sequential:
    # LayerNorm without affine weights: the stateless stand-in for RND's observation whitening.
    return nn.Sequential(nn.LayerNorm(obs_dim, elementwise_affine=False), nn.Linear(obs_dim, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))


class RandomNetworkDistillation(nn.Module):
    """Target (frozen) and predictor networks over one agent's observation ``[..., O]``."""

    def __init__(self, obs_dim: int, hidden: int):
        super().__init__()
        self.target = _mlp(obs_dim, hidden).requires_grad_(False)
        self.predictor = _mlp(obs_dim, hidden)

    def error(self, obs: torch.Tensor) -> torch.Tensor:
        """Prediction error per observation: ``[..., O]`` -> ``[...]`` (the predictor's loss)."""
        return (self.predictor(obs) - self.target(obs)).square().mean(-1)


def novelty_bonus(error: torch.Tensor) -> torch.Tensor:
    """The error relative to its mean over the round, ``[...]`` -> ``[...]`` (mean 1)."""
    return error / error.mean().clamp_min(1e-12)
