"""What an HMASD round reports besides its losses: how the coordinator used its skills, and the
value normalisers' scales."""

from __future__ import annotations

import math

import torch
from torch import nn

from rl_system import collective


def skill_usage(Z: torch.Tensor, z: torch.Tensor, n_Z: int, n_z: int,
                group: collective.Collective = collective.SOLO) -> dict[str, float]:
    """What the coordinator planned in a round, over its windows (``Z [W]`` team skills,
    ``z [W, n]`` agent skills; a learner group's windows together): the share of each team skill,
    and the entropy of the team- and agent-skill choices relative to uniform (1: every skill used
    equally, 0: one skill only)."""
    out: dict[str, float] = {}
    counts = torch.cat([torch.bincount(Z.reshape(-1), minlength=n_Z), torch.bincount(z.reshape(-1), minlength=n_z)])
    counts = group.all_reduce(counts.double())
    team, agent = counts[:n_Z], counts[n_Z:]
    if team.sum() == 0:
        return out
    for k in range(n_Z):
        out[f"plan_team_skill_{k}_share"] = float(team[k] / team.sum())
    out["plan_team_skill_entropy"] = _relative_entropy(team)
    out["plan_agent_skill_entropy"] = _relative_entropy(agent)
    return out


def _relative_entropy(counts: torch.Tensor) -> float:
    if counts.numel() < 2:
        return 1.0
    p = counts / counts.sum()
    return float(-(p * p.clamp_min(1e-12).log()).sum() / math.log(counts.numel()))


def value_norm_stats(norm: nn.Module, level: str) -> dict[str, float]:
    """The value normaliser's running mean and standard deviation (return units)."""
    mean, std = norm.mean_std()
    return {f"{level}_value_norm_mean": float(mean), f"{level}_value_norm_std": float(std)}
