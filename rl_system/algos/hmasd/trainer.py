"""HMASD trainer (learner side): intrinsic rewards, GAE for both levels, one PPO-style update of
the skill coordinator, the skill discoverer and the discriminators per round.

Order of one ``update(batch, progress)``:

1. ``prepare`` (no gradients): next states/observations for the discriminators (``obs[t+1]``,
   the shipped final observation where an episode ended, ``last_obs`` after the last step);
   intrinsic rewards with the current discriminators (the version that sampled the batch);
   low-level GAE per agent step; high-level GAE per skill window (:func:`window_gae`); value
   normalisers updated with the new returns; advantages normalised (low level; the high level
   only with ``high_norm_adv``); the GRU hiddens entering every step, recomputed from the
   shipped initial hiddens with the weights that sampled.
2. ``num_epochs`` x ``num_minibatches`` steps. The low-level and discriminator samples are cut
   into chunks of ``chunk_len`` steps (MAPPO-style: BPTT within a chunk from the hidden entering
   it, hiddens zeroed where an episode began); a minibatch is a random set of chunks plus a random
   share of the skill windows. One loss = low PPO + high PPO + discriminator cross-entropies
   (+ the novelty predictor's error with ``novelty_coef``); the coordinator's entropy bonus is
   ``lambda_h``, times the round's failure share with ``lambda_h_gate: success`` (the actor's,
   ``lambda_l``, likewise with ``lambda_l_gate: success``; both floored at ``gate_floor``); gradients
   clipped per network; non-finite steps skipped. With ``high_target_kl`` each of the
   coordinator's steps is shrunk until its KL to the sampling policy, over all of the round's
   windows, is within that bound (:mod:`rl_system.algos.hmasd.trust`).

In a learner group (:mod:`rl_system.collective`) each learner holds a contiguous range of the
round's envs; the chunk and window permutations are drawn over the global batch (same seed on every
learner), each learner takes its rows of each minibatch, every mean is a global one (losses as
sums over the global count, normalisers and advantage statistics reduced), and the gradients are
all-reduced before the per-network clipping: N learners take the one-learner steps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from rl_system import collective
from rl_system.algos.advantages import compute_gae
from rl_system.algos.hmasd import columns as col
from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.losses import minibatch_losses, stat_keys
from rl_system.algos.hmasd.metrics import skill_usage, value_norm_stats
from rl_system.algos.hmasd.minibatch import MinibatchPlan, chunk_len, take_rows, to_chunks
from rl_system.algos.hmasd.networks import HMASDPolicy
from rl_system.algos.hmasd.novelty import success_share
from rl_system.algos.hmasd.returns import low_level_reward, window_gae
from rl_system.algos.hmasd.trust import TrustRegion
from rl_system.algos.recurrent import episode_starts
from rl_system.algos.surrogate import approx_kl
from rl_system.algos.update import OptimizerSpec, Trainer, UpdateCore

Step = tuple[MinibatchPlan, torch.Tensor | None, torch.Tensor | None, tuple[int, int]]
"""One step's share of a minibatch: the round's plan, this learner's chunks, its windows, and the
whole minibatch's ``(chunks, windows)`` over the group."""


@dataclass
class Prepared:
    """One round's training samples (:meth:`HMASDTrainer.prepare`).

    ``low``: per agent step ``[T, N, ...]``: the observation columns, action, logp, ``reset`` (an
    episode began before this step), ``hid_actor``/``hid_critic`` (the GRU hiddens entering it),
    the skills and next inputs for the discriminators, and ``adv``/``target``/``old_v``.
    ``high``: per skill window ``[W, ...]`` (this learner's, in (t, env) order): ``state``,
    ``obs``, ``Z``, ``z``, ``logp`` and ``adv``/``target``/``old_v``; empty for flat MAPPO.
    ``window_gid``: each window's index among the group's; ``stats``: the round's metrics so far."""

    low: dict[str, torch.Tensor]
    high: dict[str, torch.Tensor]
    window_gid: torch.Tensor | None
    stats: dict[str, float]


class HMASDTrainer(Trainer):
    """A :class:`~rl_system.algos.protocols.Trainer`: the round's preparation (intrinsic rewards,
    both levels' returns, the chunks' hiddens) and HMASD's loss on the shared update core
    (:mod:`rl_system.algos.update`), each network's gradients clipped on their own."""

    def __init__(self, policy: HMASDPolicy, cfg: HMASDConfig, group: collective.Collective = collective.SOLO):
        self.policy, self.cfg = policy, cfg
        self.groups = policy.param_groups()
        # torch.optim.Adam's default steps (the preset's results were proven on them), not the fused kernel
        self.core = UpdateCore(policy.parameters(), OptimizerSpec(lr=cfg.lr, fused=False), anneal_lr=cfg.anneal_lr,
                               max_grad_norm=cfg.max_grad_norm, clip_groups=list(self.groups.values()), group=group)
        self.num_epochs = cfg.num_epochs
        self.lambda_h = cfg.lambda_h
        """The coordinator's entropy bonus in this update (``lambda_h_gate`` scales it per round)."""
        self.lambda_l = cfg.lambda_l
        """The actor's entropy bonus in this update (``lambda_l_gate`` scales it per round)."""
        self.high_region = (TrustRegion(self.groups["coordinator"], cfg.high_target_kl)
                            if policy.hierarchy and cfg.high_target_kl is not None else None)

    # -- preparation ---------------------------------------------------------------------------
    def prepare(self, batch: dict[str, torch.Tensor]) -> Prepared:
        """What the epochs train on (:meth:`samples`) and the round's entropy bonuses. Rewards,
        advantages and the chunks' initial hiddens in float32 even under bf16 autocast
        (rl_system.algos.precision): a no-grad pass, a small share of the update."""
        with torch.autocast(batch[col.REWARD].device.type, enabled=False):
            prep = self.samples(batch)
        self._set_bonuses(batch, prep.stats)
        return prep

    @torch.no_grad()
    def samples(self, batch: dict[str, torch.Tensor]) -> Prepared:
        """What the epochs train on, computed once per round without gradients (see the module
        docstring, step 1)."""
        cfg, policy, group = self.cfg, self.policy, self.group
        term, trunc = batch[col.TERMINATED], batch[col.TRUNCATED]
        done = term | trunc
        trunc_only = trunc & ~term
        reward = batch[col.REWARD]
        stats: dict[str, float] = {}
        means = collective.Means()  # metrics as the group's means, reduced once
        data = {k: batch[k] for k in (col.STATE, col.AGENT_OBS, col.ACTION, col.LOGP)}
        # Hidden zeroed before step t where an episode began at t (t=0: the shipped init hidden).
        data["reset"] = episode_starts(done)
        Zs, zs = (batch[col.SKILL_TEAM], batch[col.SKILL_AGENT]) if policy.hierarchy else (None, None)
        # Hidden entering every step, with the weights that sampled (the chunks' initial states).
        data["hid_actor"], data["hid_critic"] = policy.low.hiddens(batch[col.STATE], batch[col.AGENT_OBS], Zs, zs,
                                                               batch[col.INIT_H_ACTOR], batch[col.INIT_H_CRITIC],
                                                               data["reset"])

        intr = low_level_reward(policy, cfg, batch, group)
        low_r = intr["reward"]
        if "next_obs" in intr:
            data["next_obs"] = intr["next_obs"]
        if policy.hierarchy:
            Z, z, r_team, r_agent = batch[col.SKILL_TEAM], batch[col.SKILL_AGENT], intr["log_q_team"], intr["log_q_agent"]
            data.update(skill_team=Z, skill_agent=z, next_state=intr["next_state"])
            means.add("intr_team_logq_mean", r_team)
            means.add("intr_agent_logq_mean", r_agent)
            means.add("disc_team_acc", intr["team_correct"].float())
            means.add("disc_agent_acc", intr["agent_correct"].float())
            stats.update(disc_team_chance=1.0 / cfg.n_team_skills, disc_agent_chance=1.0 / cfg.n_agent_skills)
        if policy.novelty is not None:
            error = intr["novelty_error"]
            means.add("novelty_error_mean", error)
            stats.update(novelty_error_max=float(group.all_reduce(error.max().clone(), op="max")),
                         novelty_weight=float(intr["novelty_weight"]))
        means.add("low_reward_mean", low_r)
        # The size of each term of the low-level reward (docs/hmasd.md, "Metrics"): which one
        # moves when a solved run collapses.
        for k, v in intr.get("terms", {}).items():
            means.add(f"reward_term_{k}", v)

        # Low level: per-agent GAE; truncation adds gamma * V(final obs). Values arrive in return
        # units (the sampler denormalised them with its own version's ValueNorm statistics).
        norm = policy.low_norm
        value, tv, lv = batch[col.VALUE], batch[col.TRUNC_VALUE], batch[col.LAST_VALUE]
        low_r = low_r + cfg.gamma * torch.where(trunc_only.unsqueeze(-1), tv, 0.0)
        adv, ret = compute_gae(low_r, value, done.unsqueeze(-1).expand_as(value), lv, cfg.gamma, cfg.gae_lambda)
        stats["low_explained_variance"] = group.explained_variance(value, ret)
        data.update(self._targets(norm, adv, ret, value, level="low"))

        high, window_gid = self._windows(batch, reward, stats, means) if policy.hierarchy else ({}, None)
        if cfg.value_norm:
            stats.update(value_norm_stats(policy.low_norm, "low"))
            if policy.hierarchy:
                stats.update(value_norm_stats(policy.high_norm, "high"))
        stats.update(means.reduce(group))
        return Prepared(data, high, window_gid, stats)

    def _windows(self, batch: dict[str, torch.Tensor], reward: torch.Tensor, stats: dict[str, float],
                 means: collective.Means) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The coordinator's samples, one per skill window, flattened in (t, env) order, and each
        window's index among the group's windows in that order."""
        cfg, policy, group = self.cfg, self.policy, self.group
        start, hv, Z, z = batch[col.WINDOW_START], batch[col.HIGH_VALUE], batch[col.SKILL_TEAM], batch[col.SKILL_AGENT]
        hadv, hret = window_gae(reward, hv, start, batch[col.TERMINATED], batch[col.TRUNCATED], batch[col.HIGH_TRUNC_VALUE],
                                batch[col.LAST_HIGH_VALUE], cfg.high_gamma, cfg.high_gae_lambda)
        pos = start.nonzero()
        t_idx, e_idx = pos[:, 0], pos[:, 1]
        h = {"state": batch[col.STATE][t_idx, e_idx], "obs": batch[col.AGENT_OBS][t_idx, e_idx],
             "Z": Z[t_idx, e_idx], "z": z[t_idx, e_idx], "logp": batch[col.HIGH_LOGP][t_idx, e_idx]}
        h.update(self._targets(policy.high_norm, hadv[t_idx, e_idx], hret[t_idx, e_idx], hv[t_idx, e_idx],
                               level="high"))
        gid, windows = collective.window_ids(start, group)
        steps = sum(group.all_gather_ints(reward.numel()))
        means.add("high_return_mean", hret[t_idx, e_idx])
        stats.update(high_windows=windows,
                     high_explained_variance=group.explained_variance(hv[t_idx, e_idx], hret[t_idx, e_idx]),
                     high_window_len_mean=steps / max(windows, 1))
        stats.update(skill_usage(h["Z"], h["z"], cfg.n_team_skills, cfg.n_agent_skills, group))
        return h, gid

    def _targets(self, norm, adv, ret, value, level: str) -> dict[str, torch.Tensor]:
        """Advantages (normalised if configured for the ``low`` or ``high`` level); value targets
        and old values in the (updated) normaliser's units."""
        cfg, group = self.cfg, self.group
        norm_adv = cfg.norm_adv if level == "low" else cfg.high_norm_adv
        if cfg.value_norm:
            norm.update(ret, group)
            target, old_v = norm.normalize(ret), norm.normalize(value)
        else:
            target, old_v = ret, value
        if norm_adv and sum(group.all_gather_ints(adv.numel())) > 1:
            mean, std = group.mean_std(adv)
            adv = (adv - mean) / (std + 1e-8)
        return {col.ADVANTAGE: adv, col.RETURN: target, col.OLD_VALUE: old_v}

    # -- update --------------------------------------------------------------------------------
    def epochs_context(self, data: Prepared) -> AbstractContextManager:
        """The coordinator's trust region (``high_target_kl``) opens for the round."""
        if self.high_region is not None:
            self.high_region.start()
        return nullcontext()

    def epochs(self, data: Prepared, batch: dict[str, torch.Tensor]) -> Callable[[], Iterator[Step]]:
        """Each epoch a fresh draw of chunks and windows: ``(plan, chunks, windows, rows)`` per step
        (:class:`~.minibatch.MinibatchPlan`)."""
        plan = self._plan(batch, data)
        return lambda: ((plan, *item) for item in plan.minibatches())

    def round_metrics(self, batch: dict[str, torch.Tensor], data: Prepared) -> dict[str, float]:
        """The preparation's statistics, the trust region's, and the chunks' length."""
        metrics = dict(data.stats)
        if self.high_region is not None:
            metrics.update(self.high_region.metrics("high_"))
        metrics["chunk_len"] = chunk_len(batch[col.REWARD].shape[0], self.cfg.chunk_len)  # the plan's L
        return metrics

    def _set_bonuses(self, batch: dict[str, torch.Tensor], stats: dict[str, float]) -> None:
        """The round's entropy bonuses: ``lambda_h`` and ``lambda_l``, each times the round's
        failure share (floored at ``gate_floor``) where its gate is ``success``."""
        cfg = self.cfg
        gate = 1.0
        if "success" in (cfg.lambda_h_gate, cfg.lambda_l_gate):
            failing = 1.0 - float(success_share(batch[col.REWARD], batch[col.TERMINATED], batch[col.TRUNCATED], self.group))
            gate = max(failing, cfg.gate_floor)
        if self.policy.hierarchy:
            self.lambda_h = cfg.lambda_h * (gate if cfg.lambda_h_gate == "success" else 1.0)
            stats["lambda_h"] = self.lambda_h
        self.lambda_l = cfg.lambda_l * (gate if cfg.lambda_l_gate == "success" else 1.0)
        stats["lambda_l"] = self.lambda_l

    def _plan(self, batch: dict[str, torch.Tensor], prep: Prepared) -> MinibatchPlan:
        """The low level's samples cut into chunks ``[L, C, ...]`` (each starting from the hidden
        entering its first step), and the minibatch geometry over the group's chunks and windows."""
        cfg, group = self.cfg, self.group
        T, envs = batch[col.REWARD].shape[:2]
        L = chunk_len(T, cfg.chunk_len)
        low = {k: to_chunks(v, L) for k, v in prep.low.items()}
        low["hid_actor"], low["hid_critic"] = low["hid_actor"][0], low["hid_critic"][0]
        shard = collective.Shard.of((T // L, envs), group)
        C = shard.global_envs * shard.T  # chunk k*N + env, over the group's envs
        W = int(prep.stats.get("high_windows", 0))
        device = low["reset"].device
        to_local = (shard.inverse(device), collective.inverse(prep.window_gid, W)) if group.world > 1 else None
        return MinibatchPlan(low, prep.high, L, C, W, min(cfg.num_minibatches, C), to_local)

    @torch.no_grad()
    def _high_kl(self, hb: dict[str, torch.Tensor]) -> float:
        """The coordinator's approximate KL to the sampling policy over all of the round's windows
        (the group's), with its current weights."""
        total = torch.zeros(2, device=hb["logp"].device)  # [KL sum, rows]
        if hb["Z"].shape[0]:  # a learner of a group may hold none of the windows
            hlogp = self.policy.coordinator.evaluate(hb["state"], hb["obs"], hb["Z"], hb["z"])[0]
            log_ratio = hlogp - hb["logp"]
            total[0], total[1] = approx_kl(log_ratio).sum(), log_ratio.numel()
        total = self.group.all_reduce(total)
        return float(total[0] / total[1].clamp(min=1))

    def step(self, item: Step) -> dict[str, float] | None:  # type: ignore[override]
        """One gradient step on this learner's chunks ``ci`` and windows ``wi`` of a global minibatch
        of ``rows = (chunks, windows)`` (``item``); None (weights untouched) if not finite. Its own,
        not the base's: the statistics a step reports depend on whether it holds windows, and with
        the coordinator's KL bound its step is shrunk or undone after the fact (once undone the
        coordinator sits out the round's other minibatches)."""
        plan, ci, wi, rows = item
        region = self.high_region
        if region is not None and not region.active:
            wi, rows = torch.zeros(0, dtype=torch.long, device=plan.low["reset"].device), (rows[0], 0)
        if region is not None and rows[1]:
            region.before_step()
        mb = take_rows(plan.low, ci, env_major=("hid_actor", "hid_critic"))
        hb = take_rows(plan.high, wi)
        keys = stat_keys(self.policy, with_high=rows[1] > 0)

        def gradients() -> torch.Tensor:
            self.core.zero_grad()
            out = minibatch_losses(self.policy, self.cfg, (self.lambda_l, self.lambda_h), mb, hb, rows)
            zero = torch.zeros((), device=mb["reset"].device)
            return torch.stack([out.get(k, zero).detach().float() for k in keys])

        def drop_idle_coordinator() -> None:
            # No windows anywhere in the group: the coordinator has no gradient, not a zero one
            # (Adam would still move it with its momentum).
            if self.group.world > 1 and self.policy.hierarchy and not rows[1]:
                for p in self.groups["coordinator"]:
                    p.grad = None

        stats = self.core.step(gradients, keys, after_reduce=drop_idle_coordinator)
        if stats is not None and region is not None and rows[1]:
            region.after_step(lambda: self._high_kl(plan.high))
        return stats
