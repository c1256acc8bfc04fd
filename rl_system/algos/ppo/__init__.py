"""PPO (``algo: ppo``), one package read top to bottom:

* :mod:`.policy` -- :class:`ActorCritic`, the weights shipped per policy version;
* :mod:`.buffer` -- :class:`RolloutBuffer`, the preallocated ``[T, N, ...]`` columns;
* :mod:`.sampler` -- :class:`PolicySampler`, worker side: fills the buffer from an env batch;
* :mod:`.trainer` -- :class:`PPO`, learner side: GAE and the clipped-surrogate epochs.

The three factories below make it an :class:`~rl_system.algos.protocols.AlgorithmModule`.
"""

from __future__ import annotations

import torch

from rl_system.algos.ppo.policy import ActorCritic
from rl_system.algos.ppo.sampler import PolicySampler
from rl_system.algos.ppo.trainer import PPO
from rl_system.config import RunConfig

__all__ = ["ActorCritic", "PPO", "PolicySampler", "make_policy", "make_sampler", "make_trainer"]


def make_policy(obs_spec, action_spec, cfg: RunConfig) -> ActorCritic:
    return ActorCritic(obs_spec, action_spec, cfg.model)


def make_sampler(env, policy: ActorCritic, cfg: RunConfig, device: torch.device) -> PolicySampler:
    return PolicySampler(env, policy, cfg.workers.rollout_len, device)


def make_trainer(policy: ActorCritic, cfg: RunConfig) -> PPO:
    return PPO(policy, cfg.ppo)
