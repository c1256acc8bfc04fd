"""A2C's :class:`~rl_system.algos.protocols.AlgorithmModule` factories: PPO's actor-critic (the
``model:`` section, or ``model.network``) and sampler, A2C's trainer."""

from __future__ import annotations

import torch
from torch import nn

from rl_system.algos.a2c.config import A2CConfig
from rl_system.algos.a2c.trainer import A2C
from rl_system.algos.ppo import factory as ppo
from rl_system.collective import SOLO, Collective
from rl_system.config import LearnerConfig

POLICY_SECTION = "model"
"""The network is built from the ``model:`` section, as PPO's."""


def make_policy(obs_spec, action_spec, model) -> nn.Module:
    return ppo.make_policy(obs_spec, action_spec, model)


def make_sampler(env, policy: nn.Module, a2c: A2CConfig, rollout_len: int, device: torch.device):
    from rl_system.algos.ppo.sampler import PolicySampler

    return PolicySampler(env, policy, rollout_len, device)


def make_trainer(policy: nn.Module, a2c: A2CConfig, learner: LearnerConfig, group: Collective = SOLO) -> A2C:
    return A2C(policy, a2c, group)
