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

In a learner group (:mod:`rl_system.actors.collective`) each learner holds a contiguous range of the
round's envs; the chunk and window permutations are drawn over the global batch (same seed on every
learner), each learner takes its rows of each minibatch, every mean is a global one (losses as
sums over the global count, normalisers and advantage statistics reduced), and the gradients are
all-reduced before the per-network clipping: N learners take the one-learner steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from rl_system.actors import collective
from rl_system.algos.advantages import compute_gae
from rl_system.algos.hmasd.columns import (
    ACTION,
    AGENT_OBS,
    HIGH_LOGP,
    HIGH_TRUNC_VALUE,
    HIGH_VALUE,
    INIT_H_ACTOR,
    INIT_H_CRITIC,
    LAST_HIGH_VALUE,
    LAST_VALUE,
    LOGP,
    REWARD,
    SKILL_AGENT,
    SKILL_TEAM,
    STATE,
    TERMINATED,
    TRUNC_VALUE,
    TRUNCATED,
    VALUE,
    WINDOW_START,
)
from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.networks import HMASDPolicy
from rl_system.algos.hmasd.novelty import success_share
from rl_system.algos.hmasd.returns import (
    chunk_len,
    low_level_reward,
    to_chunks,
    window_gae,
)
from rl_system.algos.hmasd.trust import TrustRegion
from rl_system.algos.recurrent import episode_starts
from rl_system.algos.surrogate import approx_kl, ppo_sums


def _ppo_terms(new_logp, old_logp, adv, new_v, old_v, target, clip: float, vclip: float | None, count: int):
    """PPO's policy and value losses, KL and clip fraction over these rows, each a sum divided by
    ``count``, the rows of the whole minibatch (over a learner group: its share of the mean)."""
    return tuple(x / count for x in ppo_sums(new_logp - old_logp, adv, new_v, old_v, target, clip, vclip))


def skill_usage(Z: torch.Tensor, z: torch.Tensor, n_Z: int, n_z: int,
                group: collective.Collective | None = None) -> dict[str, float]:
    """What the coordinator planned in a round, over its windows (``Z [W]`` team skills,
    ``z [W, n]`` agent skills; a learner group's windows together): the share of each team skill,
    and the entropy of the team- and agent-skill choices relative to uniform (1: every skill used
    equally, 0: one skill only)."""
    out: dict[str, float] = {}
    counts = torch.cat([torch.bincount(Z.reshape(-1), minlength=n_Z), torch.bincount(z.reshape(-1), minlength=n_z)])
    counts = (group or collective.Collective()).all_reduce(counts.double())
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


@dataclass
class _Plan:
    """The samples an update's epochs draw minibatches from: ``low`` chunked ``[L, C, ...]`` (the
    hiddens ``[C, ...]``), ``high`` per window, ``C`` chunks and ``W`` windows over the group,
    ``M`` minibatches per epoch, ``to_local`` the group's global-to-local row maps (None alone)."""

    low: dict[str, torch.Tensor]
    high: dict[str, torch.Tensor]
    L: int
    C: int
    W: int
    M: int
    to_local: tuple[torch.Tensor, torch.Tensor] | None

    def minibatches(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, tuple[int, int]]]:
        """One epoch: ``(chunk rows, window rows, (chunks, windows) in the global minibatch)``
        for each of ``M`` minibatches; the permutations are drawn over the group's whole batch,
        the same on every learner, which then keeps its own rows."""
        device = self.low["reset"].device
        C, W, M = self.C, self.W, self.M
        chunks = torch.randperm(C, device=device).tensor_split(M) if M > 1 else [torch.arange(C, device=device)]
        windows = torch.randperm(W, device=device).tensor_split(M) if M > 1 else [torch.arange(W, device=device)]
        for ci, wi in zip(chunks, windows):
            rows = (ci.numel(), wi.numel())
            if self.to_local is not None:
                ci, wi = collective.take_local(self.to_local[0], ci), collective.take_local(self.to_local[1], wi)
            yield ci, wi, rows


class HMASDTrainer:
    def __init__(self, policy: HMASDPolicy, cfg: HMASDConfig):
        self.policy, self.cfg = policy, cfg
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)
        self.groups = policy.param_groups()
        self.params = list(policy.parameters())
        self.skipped_updates = 0
        self.lr_scale = 1.0  # a rollback on collapse lowers it (rl_system.run.rollback)
        self.lambda_h = cfg.lambda_h
        """The coordinator's entropy bonus in this update (``lambda_h_gate`` scales it per round)."""
        self.lambda_l = cfg.lambda_l
        """The actor's entropy bonus in this update (``lambda_l_gate`` scales it per round)."""
        self.high_region = (TrustRegion(self.groups["coordinator"], cfg.high_target_kl)
                            if policy.hierarchy and cfg.high_target_kl is not None else None)

    @property
    def group(self) -> collective.Collective:
        """The learner group this trainer reduces over (joined after construction)."""
        return collective.active()

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)

    # -- preparation ---------------------------------------------------------------------------
    @torch.no_grad()
    def prepare(self, batch: dict[str, torch.Tensor]) -> Prepared:
        """What the epochs train on, computed once per round without gradients (see the module
        docstring, step 1)."""
        cfg, policy, group = self.cfg, self.policy, self.group
        term, trunc = batch[TERMINATED], batch[TRUNCATED]
        done = term | trunc
        trunc_only = trunc & ~term
        reward = batch[REWARD]
        stats: dict[str, float] = {}
        means = collective.Means()  # metrics as the group's means, reduced once
        data = {k: batch[k] for k in (STATE, AGENT_OBS, ACTION, LOGP)}
        # Hidden zeroed before step t where an episode began at t (t=0: the shipped init hidden).
        data["reset"] = episode_starts(done)
        Zs, zs = (batch[SKILL_TEAM], batch[SKILL_AGENT]) if policy.hierarchy else (None, None)
        # Hidden entering every step, with the weights that sampled (the chunks' initial states).
        data["hid_actor"], data["hid_critic"] = policy.low.hiddens(batch[STATE], batch[AGENT_OBS], Zs, zs,
                                                               batch[INIT_H_ACTOR], batch[INIT_H_CRITIC],
                                                               data["reset"])

        intr = low_level_reward(policy, cfg, batch)
        low_r = intr["reward"]
        if "next_obs" in intr:
            data["next_obs"] = intr["next_obs"]
        if policy.hierarchy:
            Z, z, r_team, r_agent = batch[SKILL_TEAM], batch[SKILL_AGENT], intr["log_q_team"], intr["log_q_agent"]
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
        # The size of each term of the low-level reward (docs/hmasd.md, "Diagnosis"): which one
        # moves when a solved run collapses.
        for k, v in intr.get("terms", {}).items():
            means.add(f"reward_term_{k}", v)

        # Low level: per-agent GAE; truncation adds gamma * V(final obs). Values arrive in return
        # units (the sampler denormalised them with its own version's ValueNorm statistics).
        norm = policy.low_norm
        value, tv, lv = batch[VALUE], batch[TRUNC_VALUE], batch[LAST_VALUE]
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
        start, hv, Z, z = batch[WINDOW_START], batch[HIGH_VALUE], batch[SKILL_TEAM], batch[SKILL_AGENT]
        hadv, hret = window_gae(reward, hv, start, batch[TERMINATED], batch[TRUNCATED], batch[HIGH_TRUNC_VALUE],
                                batch[LAST_HIGH_VALUE], cfg.high_gamma, cfg.high_gae_lambda)
        pos = start.nonzero()
        t_idx, e_idx = pos[:, 0], pos[:, 1]
        h = {"state": batch[STATE][t_idx, e_idx], "obs": batch[AGENT_OBS][t_idx, e_idx],
             "Z": Z[t_idx, e_idx], "z": z[t_idx, e_idx], "logp": batch[HIGH_LOGP][t_idx, e_idx]}
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
            norm.update(ret)
            target, old_v = norm.normalize(ret), norm.normalize(value)
        else:
            target, old_v = ret, value
        if norm_adv and sum(group.all_gather_ints(adv.numel())) > 1:
            mean, std = group.mean_std(adv)
            adv = (adv - mean) / (std + 1e-8)
        return {"adv": adv, "target": target, "old_v": old_v}

    # -- update --------------------------------------------------------------------------------
    def update(self, batch: dict[str, torch.Tensor], progress: float) -> dict[str, float]:
        """One round: the learning rate for ``progress``, :meth:`prepare`, the entropy bonuses for
        the round, then ``num_epochs`` x ``num_minibatches`` steps over chunks and windows."""
        lr = self._set_lr(progress)
        prep = self.prepare(batch)
        self._set_bonuses(batch, prep.stats)
        plan = self._plan(batch, prep)
        sums, counts, steps, skipped = self._epochs(plan)
        self.skipped_updates += skipped
        metrics = {k: v / counts[k] for k, v in sums.items()}  # each over the minibatches that had it
        metrics.update(prep.stats)
        if self.high_region is not None:
            metrics.update(self.high_region.metrics("high_"))
        metrics.update(lr=lr, minibatch_steps=steps, skipped_minibatches=skipped, chunk_len=plan.L)
        return metrics

    def _set_lr(self, progress: float) -> float:
        cfg = self.cfg
        lr = (cfg.lr * max(1.0 - progress, 0.0) if cfg.anneal_lr else cfg.lr) * self.lr_scale
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        return lr

    def _set_bonuses(self, batch: dict[str, torch.Tensor], stats: dict[str, float]) -> None:
        """The round's entropy bonuses: ``lambda_h`` and ``lambda_l``, each times the round's
        failure share (floored at ``gate_floor``) where its gate is ``success``."""
        cfg = self.cfg
        gate = 1.0
        if "success" in (cfg.lambda_h_gate, cfg.lambda_l_gate):
            failing = 1.0 - float(success_share(batch[REWARD], batch[TERMINATED], batch[TRUNCATED], self.group))
            gate = max(failing, cfg.gate_floor)
        if self.policy.hierarchy:
            self.lambda_h = cfg.lambda_h * (gate if cfg.lambda_h_gate == "success" else 1.0)
            stats["lambda_h"] = self.lambda_h
        self.lambda_l = cfg.lambda_l * (gate if cfg.lambda_l_gate == "success" else 1.0)
        stats["lambda_l"] = self.lambda_l

    def _plan(self, batch: dict[str, torch.Tensor], prep: Prepared) -> _Plan:
        """The low level's samples cut into chunks ``[L, C, ...]`` (each starting from the hidden
        entering its first step), and the minibatch geometry over the group's chunks and windows."""
        cfg, group = self.cfg, self.group
        T, envs = batch[REWARD].shape[:2]
        L = chunk_len(T, cfg.chunk_len)
        low = {k: to_chunks(v, L) for k, v in prep.low.items()}
        low["hid_actor"], low["hid_critic"] = low["hid_actor"][0], low["hid_critic"][0]
        shard = collective.Shard.of((T // L, envs), group)
        C = shard.global_envs * shard.T  # chunk k*N + env, over the group's envs
        W = int(prep.stats.get("high_windows", 0))
        device = low["reset"].device
        to_local = (shard.inverse(device), collective.inverse(prep.window_gid, W)) if group.world > 1 else None
        return _Plan(low, prep.high, L, C, W, min(cfg.num_minibatches, C), to_local)

    def _epochs(self, plan: _Plan) -> tuple[dict[str, float], dict[str, int], int, int]:
        """``num_epochs`` passes of minibatch steps: each a random share of the chunks and of the
        windows (permutations drawn over the group's whole batch). Returns the metric sums, the
        minibatches each was summed over, the steps taken and the steps skipped (not finite)."""
        region = self.high_region
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        steps, skipped = 0, 0
        if region is not None:
            region.start()
        for _ in range(self.cfg.num_epochs):
            for ci, wi, rows in plan.minibatches():
                if region is not None and not region.active:
                    wi, rows = wi[:0], (rows[0], 0)  # the coordinator sits out the rest of the round
                if region is not None and rows[1]:
                    region.before_step()
                out = self._minibatch_step(_take(plan.low, ci, env_major=("hid_actor", "hid_critic")),
                                           _take(plan.high, wi), rows)
                if out is None:
                    skipped += 1
                    continue
                if region is not None and rows[1]:
                    region.after_step(lambda: self._high_kl(plan.high))
                for k, v in out.items():
                    sums[k] = sums.get(k, 0.0) + v
                    counts[k] = counts.get(k, 0) + 1
                steps += 1
        return sums, counts, steps, skipped

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

    def _stat_keys(self, with_high: bool) -> list[str]:
        """The minibatch statistics, in a fixed order (the group reduces them as one vector)."""
        keys = ["low_pg_loss", "low_v_loss", "low_entropy", "low_approx_kl", "low_clip_frac"]
        if self.policy.hierarchy:
            if with_high:
                keys += ["high_pg_loss", "high_v_loss", "high_entropy", "high_entropy_team", "high_entropy_agent",
                         "high_approx_kl", "high_clip_frac"]
            keys += ["disc_team_loss", "disc_agent_loss"]
        if self.policy.novelty is not None:
            keys.append("novelty_loss")
        return keys

    def _minibatch_step(self, mb: dict[str, torch.Tensor], hb: dict[str, torch.Tensor],
                        rows: tuple[int, int]) -> dict[str, float] | None:
        """One gradient step on this learner's chunks ``mb`` and windows ``hb`` of a global
        minibatch of ``rows = (chunks, windows)``; None (weights untouched) if not finite."""
        cfg = self.cfg
        self.optimizer.zero_grad(set_to_none=True)
        out = self._losses(mb, hb, rows)
        keys = self._stat_keys(with_high=rows[1] > 0)
        zero = torch.zeros((), device=mb["reset"].device)
        values = torch.stack([out.get(k, zero).detach().float() for k in keys])
        if self.group.world > 1:
            flat = self.group.all_reduce(torch.cat([collective.flat_grads(self.params), values]))
            collective.set_grads(self.params, flat[:-len(keys)])
            values = flat[-len(keys):]
            if self.policy.hierarchy and not rows[1]:
                # No windows anywhere in the group: the coordinator has no gradient, not a zero one
                # (Adam would still move it with its momentum).
                for p in self.groups["coordinator"]:
                    p.grad = None
        stats = dict(zip(keys, values.tolist()))
        finite = all(math.isfinite(v) for v in stats.values())
        for params in self.groups.values():
            norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=True)
            finite = finite and math.isfinite(float(norm))
        if not finite:
            # A NaN/Inf would poison the weights and Adam's moments: drop this step entirely.
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.optimizer.step()
        return stats

    def _losses(self, mb: dict[str, torch.Tensor], hb: dict[str, torch.Tensor],
                rows: tuple[int, int]) -> dict[str, torch.Tensor]:
        """Backpropagates this learner's share of the minibatch loss (low PPO + high PPO +
        discriminator cross-entropies + novelty predictor error; every mean over the global
        minibatch) and returns its terms (nothing where it holds no rows)."""
        cfg, policy = self.cfg, self.policy
        hier = policy.hierarchy
        L, c = mb["reset"].shape[:2]
        out: dict[str, torch.Tensor] = {}
        loss = torch.zeros((), device=mb["reset"].device)
        if c:
            Z, z = (mb[SKILL_TEAM], mb[SKILL_AGENT]) if hier else (None, None)
            logp, ent, value = policy.low.evaluate(mb[STATE], mb[AGENT_OBS], Z, z, mb[ACTION],
                                                   mb["hid_actor"], mb["hid_critic"], mb["reset"])
            count = L * rows[0] * logp.shape[2]  # [L, chunks, agents] over the global minibatch
            pg_l, v_l, kl_l, cf_l = _ppo_terms(logp, mb[LOGP], mb["adv"], value, mb["old_v"],
                                               mb["target"], cfg.clip_coef, cfg.value_clip, count)
            ent_l = ent.sum() / count
            loss = loss + pg_l - self.lambda_l * ent_l + cfg.vf_coef * v_l
            out.update(low_pg_loss=pg_l, low_v_loss=v_l, low_entropy=ent_l, low_approx_kl=kl_l, low_clip_frac=cf_l)
            if hier:
                lq_team = policy.disc.log_q_team(mb["next_state"])
                lq_agent = policy.disc.log_q_agent(mb["next_obs"], Z)
                ce_team = -lq_team.gather(-1, Z.unsqueeze(-1)).sum() / (L * rows[0])
                ce_agent = -lq_agent.gather(-1, z.unsqueeze(-1)).sum() / count
                loss = loss + cfg.disc_coef * (ce_team + ce_agent)
                out.update(disc_team_loss=ce_team, disc_agent_loss=ce_agent)
            if policy.novelty is not None:
                # The predictor learns the views the agents reach, which makes them familiar.
                nov = policy.novelty.error(mb["next_obs"]).sum() / count
                loss = loss + nov
                out["novelty_loss"] = nov
        if hier and hb["Z"].shape[0]:
            hlogp, hent, hval = policy.coordinator.evaluate(hb["state"], hb["obs"], hb["Z"], hb["z"])
            width = hlogp.shape[1]  # [windows, team + agents]
            count = rows[1] * width
            pg_h, v_h, kl_h, cf_h = _ppo_terms(hlogp, hb["logp"], hb["adv"], hval, hb["old_v"],
                                               hb["target"], cfg.clip_coef, cfg.value_clip, count)
            ent_h = hent.sum() / count
            loss = loss + pg_h - self.lambda_h * ent_h + cfg.vf_coef * v_h
            out.update(high_pg_loss=pg_h, high_v_loss=v_h, high_entropy=ent_h,
                       high_entropy_team=hent[:, 0].sum() / rows[1],
                       high_entropy_agent=hent[:, 1:].sum() / (rows[1] * (width - 1)),
                       high_approx_kl=kl_h, high_clip_frac=cf_h)
        if out:
            loss.backward()
        return out


def _take(data: dict[str, torch.Tensor], idx: torch.Tensor | None, env_major: tuple[str, ...] = ()) -> dict:
    """Rows ``idx`` of a minibatch source: dim 1 of chunked ``[L, C, ...]`` columns, dim 0 of the
    others (window samples, chunk hiddens); everything when ``idx`` is None."""
    if idx is None:
        return data
    return {k: v.index_select(0 if (k in env_major or not env_major) else 1, idx) for k, v in data.items()}
