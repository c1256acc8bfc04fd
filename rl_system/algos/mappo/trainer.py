"""Multi-agent PPO's trainer (learner side): GAE per agent, then the clipped-surrogate loss on the
shared update core (:mod:`rl_system.algos.update`). The preparation and the loss are all that is
written here.

A minibatch is a set of env steps, each with all its agents (``[B, n, ...]``); the losses are
means over the minibatch's *active* agent steps (an agent that finished before the env's episode
carries no loss after that), over the learner group's whole minibatch.

Recurrent policies (``mappo.recurrent``): a minibatch is a set of whole env sequences
``[T, B, n, ...]``, every agent of an env in it, replayed from the shipped ``init_state`` with the
states zeroed where the env's episode began (BPTT over the rollout, as single-agent recurrent PPO).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from rl_system import collective
from rl_system.algos.advantages import compute_gae
from rl_system.algos.mappo import columns as col
from rl_system.algos.mappo.config import MAPPOConfig
from rl_system.algos.protocols import is_recurrent
from rl_system.algos.recurrent import episode_starts
from rl_system.algos.surrogate import PPO_STATS, actor_critic_loss, ppo_sums
from rl_system.algos.update import Minibatch, Minibatches, OptimizerSpec, Trainer, UpdateCore
from rl_system.envs.base import AGENT_ACTIVE
from rl_system.rollout.contract import OBS, obs_column, observations


class MAPPO(Trainer):
    """A :class:`~rl_system.algos.protocols.Trainer` for :class:`~.networks.MultiAgentActorCritic`."""

    stat_names = PPO_STATS

    def __init__(self, policy: torch.nn.Module, cfg: MAPPOConfig, group: collective.Collective = collective.SOLO):
        self.policy, self.cfg = policy, cfg
        self.core = UpdateCore(policy.parameters(), OptimizerSpec(lr=cfg.lr), anneal_lr=cfg.anneal_lr,
                               max_grad_norm=cfg.max_grad_norm, group=group)
        self.num_epochs, self.target_kl = cfg.num_epochs, cfg.target_kl
        self.recurrent = is_recurrent(policy)

    @torch.no_grad()
    def prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-agent GAE (an agent's return ends where its own episode or the env's does), advantages
        normalised over the group's active agent steps, returns and old values in the critic's units
        (``value_norm``), then every column flat ``[T*N, n, ...]``
        (recurrent policies: kept ``[T, N, n, ...]``, with ``reset`` and ``init_state``)."""
        cfg = self.cfg
        value = batch[col.VALUE]
        env_done = batch[col.TERMINATED] | batch[col.TRUNCATED]
        done = env_done.unsqueeze(-1).expand_as(value)
        if col.AGENT_DONE in batch:
            done = done | batch[col.AGENT_DONE]
        reward = batch[col.REWARD] + cfg.gamma * batch[col.TRUNC_VALUE]
        adv, ret = compute_gae(reward, value, done, batch[col.LAST_VALUE], cfg.gamma, cfg.gae_lambda)
        active = batch.get(obs_column(AGENT_ACTIVE))  # [T, N, n] bool, for envs whose agents can finish early
        if cfg.norm_adv:
            mean, std = self.group.mean_std(adv if active is None else adv[active])
            adv = (adv - mean) / (std + 1e-8)
        norm = getattr(self.policy, "value_norm", None)
        if norm is not None:  # the critic learns normalised targets; old values in the same units
            value = norm.normalize(value)  # the statistics the rollout's version had (at lag 0)
            norm.update(ret if active is None else ret[active], self.group)
            ret = norm.normalize(ret)
        data = {k: v for k, v in batch.items() if k.startswith(OBS)}
        data.update({col.ACTION: batch[col.ACTION], col.LOGP: batch[col.LOGP], col.VALUE: value,
                     col.ADVANTAGE: adv, col.RETURN: ret})
        if active is not None:
            data[col.ACTIVE] = active
        if self.recurrent:
            data.update({col.RESET: episode_starts(env_done), col.INIT_STATE: batch[col.INIT_STATE]})
            return data
        return {k: v.flatten(0, 1) for k, v in data.items()}

    def round_metrics(self, batch: dict[str, torch.Tensor], data: dict[str, torch.Tensor]) -> dict[str, float]:
        """The critic's explained variance over the round's active agent steps."""
        active = data.get(col.ACTIVE)
        value, ret = (data[col.VALUE], data[col.RETURN]) if active is None else (data[col.VALUE][active],
                                                                                 data[col.RETURN][active])
        return {"explained_variance": self.group.explained_variance(value.flatten(), ret.flatten())}

    def epochs(self, data: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]
               ) -> Callable[[], Iterator[Minibatch]]:
        """The epochs over ``prepare(batch)``: minibatches of env steps, or for a recurrent policy of
        whole env sequences (rows are envs, dim 1), every agent of an env in the same one."""
        shard = collective.Shard.of(batch[col.REWARD].shape, self.group)
        source = Minibatches(data, shard, self.cfg.num_minibatches, sequences=self.recurrent,
                             env_major=(col.INIT_STATE,))
        return lambda: self._epoch(source)

    def _epoch(self, source: Minibatches) -> Iterator[Minibatch]:
        """One epoch, each minibatch with its active agent steps over the group (every
        minibatch's count reduced in one call)."""
        epoch = source.epoch()
        logp, active = epoch.shuffled[col.LOGP], epoch.shuffled.get(col.ACTIVE)

        def agent_steps(span: slice) -> float:
            if active is None:
                return float(source.take(col.LOGP, logp, span).numel())
            return float(source.take(col.ACTIVE, active, span).sum())

        counts = torch.tensor([agent_steps(slice(lo, hi)) for lo, hi in epoch.spans], dtype=torch.float64)
        if self.group.world > 1:
            counts = self.group.all_reduce(counts.to(self.group.device)).cpu()
        for (mb, i, _), rows in zip(epoch, counts.tolist()):
            yield Minibatch(mb, max(int(rows), 1), held=epoch.held(i))

    def loss(self, minibatch: Minibatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, sums)``: this learner's share of the minibatch mean (differentiable) and the
        sums of :data:`PPO_STATS` over its active agent steps."""
        cfg, mb, rows = self.cfg, minibatch.data, minibatch.rows
        if self.recurrent:  # [T, B, n] each
            logp, entropy, value = self.policy.evaluate_sequence(observations(mb), mb[col.ACTION], mb[col.INIT_STATE],
                                                                 mb[col.RESET])
        else:
            logp, entropy, value = self.policy.evaluate(observations(mb), mb[col.ACTION])
        old = (mb[col.LOGP], mb[col.ADVANTAGE], mb[col.VALUE], mb[col.RETURN])
        active = mb.get(col.ACTIVE)
        if active is not None:  # only the agents still in their episode
            logp, entropy, value = logp[active], entropy[active], value[active]
            old = tuple(x[active] for x in old)
        old_logp, adv, old_v, ret = old
        vclip = cfg.clip_coef if cfg.clip_vloss else None
        pg, v, kl, clipped = ppo_sums(logp - old_logp, adv, value, old_v, ret, cfg.clip_coef, vclip)
        return actor_critic_loss(pg, v, entropy.sum(), cfg.ent_coef, cfg.vf_coef, rows, kl, clipped)
