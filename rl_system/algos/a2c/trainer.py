"""The A2C trainer (learner side): one gradient step per round on the whole batch, as
Stable-Baselines3's ``A2C.train``:

    loss = -mean(advantage * log pi(a|s)) - ent_coef * mean(entropy) + vf_coef * mean((return - V(s))^2)

with the advantages and returns of GAE (``gae_lambda`` 1: n-step returns bootstrapped from the
value after the rollout and, on time-limit truncations, from ``V(final_obs)``), the gradients
clipped to ``max_grad_norm`` and RMSprop (``alpha`` 0.99, ``eps`` 1e-5). The value loss is the
mean squared error, not half of it (SB3's ``F.mse_loss``).

The batch is ``[T, N]`` columns joined along the env axis (:func:`rl_system.rollout.contract.concat`).
In a learner group each learner sums its rows' terms and divides by the whole round's rows; the
update core all-reduces the gradients, so every learner takes the one-learner step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from rl_system import collective
from rl_system.algos.a2c.config import A2CConfig
from rl_system.algos.advantages import compute_gae
from rl_system.algos.ppo.trainer import RoundObserver
from rl_system.algos.surrogate import actor_critic_loss
from rl_system.algos.update import Minibatch, OptimizerSpec, Trainer, UpdateCore
from rl_system.rollout import contract as col
from rl_system.rollout.contract import OBS, observations

A2C_STATS = ("policy_loss", "value_loss", "entropy")
"""The statistics of a step, minibatch means (``train/``)."""


class A2C(Trainer):
    """A :class:`~rl_system.algos.protocols.Trainer` on the shared update core: one epoch, one
    minibatch (the whole round, in its own order)."""

    stat_names = A2C_STATS

    def __init__(self, policy: nn.Module, cfg: A2CConfig, group: collective.Collective = collective.SOLO):
        self.policy, self.cfg = policy, cfg
        spec = OptimizerSpec(lr=cfg.lr, eps=cfg.eps, kind=cfg.optimizer, alpha=cfg.rms_prop_alpha)
        self.core = UpdateCore(policy.parameters(), spec, anneal_lr=cfg.anneal_lr, max_grad_norm=cfg.max_grad_norm,
                               group=group)
        self.observe_round = RoundObserver(policy)

    def prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Advantages and returns of the round, every column flattened to ``[T*N, ...]``."""
        cfg = self.cfg
        done = batch[col.TERMINATED] | batch[col.TRUNCATED]
        reward = batch[col.REWARD] + cfg.gamma * batch[col.TRUNC_VALUE]
        adv, ret = compute_gae(reward, batch[col.VALUE], done, batch[col.LAST_VALUE], cfg.gamma, cfg.gae_lambda)
        data = {k: v for k, v in batch.items() if k.startswith(OBS)}
        data.update({col.ACTION: batch[col.ACTION], col.VALUE: batch[col.VALUE], col.ADVANTAGE: adv, col.RETURN: ret})
        return {k: v.flatten(0, 1) for k, v in data.items()}

    def epochs(self, data: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> Callable[[], list[Minibatch]]:
        """The whole round as one minibatch of the group's ``T * N`` rows."""
        shard = collective.Shard.of(batch[col.REWARD].shape, self.group)
        return lambda: [Minibatch(data, shard.global_envs * shard.T)]

    def loss(self, mb: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
        """This learner's share of the round's loss (its rows' terms over the group's rows) and
        the sums of :data:`A2C_STATS`."""
        cfg, data, rows = self.cfg, mb.data, mb.rows
        logp, entropy, value = self.policy.evaluate(observations(data), data[col.ACTION])
        adv = data[col.ADVANTAGE]
        if cfg.normalize_advantage and rows > 1:
            mean, std = self.group.mean_std(adv)
            adv = (adv - mean) / (std + 1e-8)
        pg = -(adv * logp).sum()
        v = (data[col.RETURN] - value).square().sum()
        return actor_critic_loss(pg, v, entropy.sum(), cfg.ent_coef, cfg.vf_coef, rows)

    def round_metrics(self, batch: dict[str, torch.Tensor], data: dict[str, torch.Tensor]) -> dict[str, float]:
        """The round's observations to the observation normaliser (``model.normalize_obs``), as
        PPO's; the critic's explained variance."""
        self.observe_round(batch, self.group)
        return {"explained_variance": self.group.explained_variance(data[col.VALUE], data[col.RETURN])}
