"""MAPPO's value normalisation (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative
Multi-Agent Games", its ``ValueNorm``): a running mean and variance of the value targets. The
critic predicts targets in these normalised units, so its output layer works at unit scale however
large or small the env's returns are; GAE runs on values turned back into return units.

The statistics are buffers of the policy module: they travel with its weights (each rollout is
turned into return units with the statistics of the version that sampled it) and with its
checkpoints; exported graphs give values in return units."""

from __future__ import annotations

import torch
from torch import nn

from rl_system import collective


class ValueNorm(nn.Module):
    """Running mean/variance of value targets with debiasing (scalar statistics)."""

    def __init__(self, beta: float = 0.99999, epsilon: float = 1e-5):
        super().__init__()
        self.beta, self.epsilon = beta, epsilon
        self.register_buffer("running_mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("running_mean_sq", torch.zeros((), dtype=torch.float64))
        self.register_buffer("debiasing_term", torch.zeros((), dtype=torch.float64))

    def mean_std(self) -> tuple[torch.Tensor, torch.Tensor]:
        debias = self.debiasing_term.clamp(min=self.epsilon)
        mean = self.running_mean / debias
        var = (self.running_mean_sq / debias - mean.square()).clamp(min=1e-2)
        return mean.float(), var.sqrt().float()

    @torch.no_grad()
    def update(self, x: torch.Tensor, group: collective.Collective = collective.SOLO) -> None:
        """Fold a batch of targets in (a learner ``group``'s batches together)."""
        x = x.detach().double()
        w = self.beta
        self.running_mean.mul_(w).add_(group.mean(x) * (1 - w))
        self.running_mean_sq.mul_(w).add_(group.mean(x.square()) * (1 - w))
        self.debiasing_term.mul_(w).add_(1 - w)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.mean_std()
        return (x - mean) / std

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.mean_std()
        return x * std + mean
