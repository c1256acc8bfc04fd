"""PPO as a selectable algorithm: an :class:`ActorCritic`, the single-agent sampler, PPO."""

from __future__ import annotations

import torch

from rl_system.algos.ppo import PPO
from rl_system.config import RunConfig
from rl_system.policy import ActorCritic
from rl_system.sampler import PolicySampler


def make_policy(obs_spec, action_spec, cfg: RunConfig) -> ActorCritic:
    return ActorCritic(obs_spec, action_spec, cfg.model)


def make_sampler(env, policy: ActorCritic, cfg: RunConfig, device: torch.device) -> PolicySampler:
    return PolicySampler(env, policy, cfg.workers.rollout_len, device)


def make_trainer(policy: ActorCritic, cfg: RunConfig) -> PPO:
    return PPO(policy, cfg.ppo)
