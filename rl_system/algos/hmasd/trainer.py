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
   (+ the novelty predictor's error with ``novelty_coef``); gradients clipped per network;
   non-finite steps skipped.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.networks import HMASDPolicy
from rl_system.algos.hmasd.novelty import novelty_bonus, success_share
from rl_system.algos.advantages import compute_gae, explained_variance
from rl_system.algos.recurrent import episode_starts


@torch.no_grad()
def window_gae(reward: torch.Tensor, value: torch.Tensor, start: torch.Tensor, terminated: torch.Tensor,
               truncated: torch.Tensor, trunc_value: torch.Tensor, last_value: torch.Tensor,
               gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over skill windows (one high-level step per window), for all envs at once.

    reward ``[T, N]`` team reward per env step; value ``[T, N, K]`` ``V_h`` at window starts;
    start ``[T, N]`` bool, a window starts at step t; terminated/truncated ``[T, N]``;
    trunc_value ``[T, N, K]`` ``V_h(final obs)`` where truncated; last_value ``[N, K]`` ``V_h`` of
    the observation after step T-1. A window's reward is the sum of the team rewards of its steps.
    A window ends at step t if the episode ended at t (terminal: no bootstrap; truncated:
    bootstrap ``trunc_value[t]``), if the next step starts a window (bootstrap ``value[t+1]``, and
    the GAE recursion continues), or at t = T-1 (bootstrap ``last_value``, recursion stops).
    Returns ``(adv, ret)`` ``[T, N, K]``, zero except at window starts.
    """
    T = reward.shape[0]
    done = terminated | truncated
    adv = torch.zeros_like(value)
    acc = torch.zeros_like(reward[0])
    boot_v = torch.zeros_like(last_value)
    boot_a = torch.zeros_like(last_value)
    zero = torch.zeros_like(last_value)
    for t in range(T - 1, -1, -1):
        if t == T - 1:
            end = torch.ones_like(done[t])
            next_v, next_a = last_value, zero
        else:
            end = done[t] | start[t + 1]
            next_v, next_a = value[t + 1], adv[t + 1]
        bv = torch.where(terminated[t, :, None], 0.0, torch.where(truncated[t, :, None], trunc_value[t], next_v))
        ba = torch.where(done[t, :, None], 0.0, next_a)
        boot_v = torch.where(end[:, None], bv, boot_v)
        boot_a = torch.where(end[:, None], ba, boot_a)
        acc = torch.where(end, 0.0, acc) + reward[t]
        a = acc[:, None] + gamma * boot_v - value[t] + gamma * lam * boot_a
        adv[t] = torch.where(start[t, :, None], a, 0.0)
    ret = torch.where(start.unsqueeze(-1), adv + value, 0.0)
    return adv, ret


def next_inputs(now: torch.Tensor, last: torch.Tensor, final: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """The observation after each step ``[T, N, ...]``: ``now[t+1]``, ``last`` after step T-1, and
    the shipped final observation (rows env-major, in the order of ``done.T``) where done."""
    nxt = torch.cat([now[1:], last.unsqueeze(0)], dim=0)
    if final.shape[0] != int(done.sum()):
        raise ValueError(f"final_obs has {final.shape[0]} rows for {int(done.sum())} ended episodes")
    nxt.transpose(0, 1)[done.T] = final
    return nxt


def to_chunks(x: torch.Tensor, L: int) -> torch.Tensor:
    """``[T, N, ...]`` -> ``[L, (T // L) * N, ...]``: chunk ``c = k * N + e`` holds steps
    ``k*L .. k*L+L-1`` of env ``e``."""
    T, N = x.shape[:2]
    return x.reshape(T // L, L, N, *x.shape[2:]).transpose(0, 1).reshape(L, (T // L) * N, *x.shape[2:])


def chunk_len(T: int, want: int) -> int:
    """The largest divisor of ``T`` not above ``want``."""
    return max(d for d in range(1, min(want, T) + 1) if T % d == 0)


@torch.no_grad()
def low_level_reward(policy: HMASDPolicy, cfg: HMASDConfig, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The low level's reward per agent step ``[T, N, n]``, with the current networks: Eq.
    (low-level reward) ``lambda_e * r_t + lambda_D * log q_D(Z | s_{t+1}) + lambda_d * log q_d(z_i |
    o_{i,t+1}, Z)`` (with ``logq_floor`` each log-probability clamped from below at chance,
    ``log(1/n)``); the team reward ``r_t`` alone for flat MAPPO; plus ``novelty_coef`` times the
    novelty bonus of ``o_{i,t+1}`` where that is on (times ``1 - `` the round's success share with
    ``novelty_gate: success``; with ``novelty_norm: initial`` the first call records the bonus's
    scale in the policy). Also the pieces (next inputs, log-probs,
    discriminator hits, novelty errors) for the metrics and the losses."""
    done = batch["terminated"] | batch["truncated"]
    out: dict[str, torch.Tensor] = {}
    if policy.hierarchy or policy.novelty is not None:
        out["next_obs"] = next_inputs(batch["obs.obs"], batch["last_obs.obs"], batch["final_obs.obs"], done)
    if policy.hierarchy:
        Z, z = batch["skill_team"], batch["skill_agent"]
        ns = next_inputs(batch["obs.state"], batch["last_obs.state"], batch["final_obs.state"], done)
        lq_team = policy.disc.log_q_team(ns)  # [T, N, n_Z]
        lq_agent = policy.disc.log_q_agent(out["next_obs"], Z)  # [T, N, n, n_z]
        r_team = lq_team.gather(-1, Z.unsqueeze(-1)).squeeze(-1)  # log q_D(Z | s_{t+1})  [T, N]
        r_agent = lq_agent.gather(-1, z.unsqueeze(-1)).squeeze(-1)  # log q_d(z_i | o_{i,t+1}, Z)  [T, N, n]
        bonus_team, bonus_agent = r_team, r_agent
        if cfg.logq_floor:
            # Chance, log(1/n), is what a skill earns where nothing tells the skills apart; below it
            # only where a *sibling* owns the view, which would punish entering it (docs/hmasd.md).
            bonus_team = r_team.clamp(min=-math.log(lq_team.shape[-1]))
            bonus_agent = r_agent.clamp(min=-math.log(lq_agent.shape[-1]))
        terms = {"env": cfg.lambda_e * batch["reward"].unsqueeze(-1), "team": cfg.lambda_D * bonus_team.unsqueeze(-1),
                 "agent": cfg.lambda_d * bonus_agent}
        reward = terms["env"] + terms["team"] + terms["agent"]
        out.update(terms={k: float(v.mean()) for k, v in terms.items()})
        out.update(log_q_team=r_team, log_q_agent=r_agent, next_state=ns,
                   team_correct=lq_team.argmax(-1) == Z, agent_correct=lq_agent.argmax(-1) == z)
    else:
        reward = batch["reward"].unsqueeze(-1).expand(batch["value"].shape)  # flat MAPPO: lambda_e = 1
    if policy.novelty is not None:
        out["novelty_error"] = policy.novelty.error(out["next_obs"])  # [T, N, n]
        weight = torch.tensor(cfg.novelty_coef)
        if cfg.novelty_gate == "success":
            weight = weight * (1 - success_share(batch["reward"], batch["terminated"], batch["truncated"]))
        out["novelty_weight"] = weight
        bonus = weight * novelty_bonus(policy.novelty, out["novelty_error"], cfg.novelty_norm)
        reward = reward + bonus
        out.setdefault("terms", {})["novelty"] = float(bonus.mean())
    out["reward"] = reward
    return out


def _ppo_terms(new_logp, old_logp, adv, new_v, old_v, target, clip: float, vclip: float | None):
    ratio = (new_logp - old_logp).exp()
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    if vclip is None:
        vl = 0.5 * (new_v - target).square().mean()
    else:
        v_clipped = old_v + (new_v - old_v).clamp(-vclip, vclip)
        vl = 0.5 * torch.max((new_v - target).square(), (v_clipped - target).square()).mean()
    with torch.no_grad():
        log_ratio = new_logp - old_logp
        kl = ((ratio - 1) - log_ratio).mean()
        clip_frac = ((ratio - 1).abs() > clip).float().mean()
    return pg, vl, kl, clip_frac


def skill_usage(Z: torch.Tensor, z: torch.Tensor, n_Z: int, n_z: int) -> dict[str, float]:
    """What the coordinator planned in a round, over its windows (``Z [W]`` team skills,
    ``z [W, n]`` agent skills): the share of each team skill, and the entropy of the team- and
    agent-skill choices relative to uniform (1: every skill used equally, 0: one skill only)."""
    out: dict[str, float] = {}
    if Z.numel() == 0:
        return out
    team = torch.bincount(Z.reshape(-1), minlength=n_Z).double()
    agent = torch.bincount(z.reshape(-1), minlength=n_z).double()
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


class HMASDTrainer:
    def __init__(self, policy: HMASDPolicy, cfg: HMASDConfig):
        self.policy, self.cfg = policy, cfg
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=cfg.lr, eps=1e-5)
        self.groups = policy.param_groups()
        self.skipped_updates = 0

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)

    # -- preparation ---------------------------------------------------------------------------
    @torch.no_grad()
    def prepare(self, batch: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        cfg, policy = self.cfg, self.policy
        term, trunc = batch["terminated"], batch["truncated"]
        done = term | trunc
        trunc_only = trunc & ~term
        reward = batch["reward"]
        stats: dict[str, float] = {}
        data = {k: batch[k] for k in ("obs.state", "obs.obs", "action", "logp")}
        # Hidden zeroed before step t where an episode began at t (t=0: the shipped init hidden).
        data["reset"] = episode_starts(done)
        Zs, zs = (batch["skill_team"], batch["skill_agent"]) if policy.hierarchy else (None, None)
        # Hidden entering every step, with the weights that sampled (the chunks' initial states).
        data["hid_actor"], data["hid_critic"] = policy.low.hiddens(batch["obs.state"], batch["obs.obs"], Zs, zs,
                                                               batch["init_h_actor"], batch["init_h_critic"],
                                                               data["reset"])

        intr = low_level_reward(policy, cfg, batch)
        low_r = intr["reward"]
        if "next_obs" in intr:
            data["next_obs"] = intr["next_obs"]
        if policy.hierarchy:
            Z, z, r_team, r_agent = batch["skill_team"], batch["skill_agent"], intr["log_q_team"], intr["log_q_agent"]
            data.update(skill_team=Z, skill_agent=z, next_state=intr["next_state"])
            stats.update(intr_team_logq_mean=float(r_team.mean()), intr_agent_logq_mean=float(r_agent.mean()),
                         disc_team_acc=float(intr["team_correct"].float().mean()),
                         disc_agent_acc=float(intr["agent_correct"].float().mean()),
                         disc_team_chance=1.0 / cfg.n_team_skills, disc_agent_chance=1.0 / cfg.n_agent_skills)
        if policy.novelty is not None:
            error = intr["novelty_error"]
            stats.update(novelty_error_mean=float(error.mean()), novelty_error_max=float(error.max()),
                         novelty_weight=float(intr["novelty_weight"]))
        stats["low_reward_mean"] = float(low_r.mean())
        # The size of each term of the low-level reward (docs/hmasd.md, "Diagnosis"): which one
        # moves when a solved run collapses.
        stats.update({f"reward_term_{k}": v for k, v in intr.get("terms", {}).items()})

        # Low level: per-agent GAE; truncation adds gamma * V(final obs). Values arrive in return
        # units (the sampler denormalised them with its own version's ValueNorm statistics).
        norm = policy.low_norm
        value, tv, lv = batch["value"], batch["trunc_value"], batch["last_value"]
        low_r = low_r + cfg.gamma * torch.where(trunc_only.unsqueeze(-1), tv, 0.0)
        adv, ret = compute_gae(low_r, value, done.unsqueeze(-1).expand_as(value), lv, cfg.gamma, cfg.gae_lambda)
        stats["low_explained_variance"] = explained_variance(value, ret)
        data.update(self._targets(norm, adv, ret, value, prefix="low_"))

        if policy.hierarchy:
            start = batch["h_start"]
            norm = policy.high_norm
            hv = batch["h_value"]
            hadv, hret = window_gae(reward, hv, start, term, trunc, batch["h_trunc_value"],
                                    batch["last_h_value"], cfg.high_gamma, cfg.high_gae_lambda)
            # Window samples, flattened in (t, env) order.
            pos = start.nonzero()
            t_idx, e_idx = pos[:, 0], pos[:, 1]
            h = {"h_state": batch["obs.state"][t_idx, e_idx], "h_obs": batch["obs.obs"][t_idx, e_idx],
                 "h_Z": Z[t_idx, e_idx], "h_z": z[t_idx, e_idx], "h_logp": batch["h_logp"][t_idx, e_idx]}
            h.update(self._targets(norm, hadv[t_idx, e_idx], hret[t_idx, e_idx], hv[t_idx, e_idx], prefix="high_"))
            data.update(h)
            stats.update(high_windows=int(pos.shape[0]), high_return_mean=float(hret[t_idx, e_idx].mean()),
                         high_explained_variance=explained_variance(hv[t_idx, e_idx], hret[t_idx, e_idx]),
                         high_window_len_mean=reward.numel() / max(int(pos.shape[0]), 1))
            stats.update(skill_usage(h["h_Z"], h["h_z"], cfg.n_team_skills, cfg.n_agent_skills))
        if cfg.value_norm:
            stats.update(value_norm_stats(policy.low_norm, "low"))
            if policy.hierarchy:
                stats.update(value_norm_stats(policy.high_norm, "high"))
        return data, stats

    def _targets(self, norm, adv, ret, value, prefix: str) -> dict[str, torch.Tensor]:
        """Advantages (normalised if configured for the level); value targets and old values in
        the (updated) normaliser's units."""
        cfg = self.cfg
        norm_adv = cfg.norm_adv if prefix == "low_" else cfg.high_norm_adv
        if cfg.value_norm:
            norm.update(ret)
            target, old_v = norm.normalize(ret), norm.normalize(value)
        else:
            target, old_v = ret, value
        if norm_adv and adv.numel() > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return {f"{prefix}adv": adv, f"{prefix}target": target, f"{prefix}old_v": old_v}

    # -- update --------------------------------------------------------------------------------
    def update(self, batch: dict[str, torch.Tensor], progress: float) -> dict[str, float]:
        cfg = self.cfg
        lr = cfg.lr * max(1.0 - progress, 0.0) if cfg.anneal_lr else cfg.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        data, stats = self.prepare(batch)
        T = batch["reward"].shape[0]
        L = chunk_len(T, cfg.chunk_len)
        high = {k: data.pop(k) for k in list(data) if k.startswith(("h_", "high_"))}
        # Low-level and discriminator samples as chunks [L, C, ...]; each chunk starts from the
        # hidden entering its first step.
        low = {k: to_chunks(v, L) for k, v in data.items()}
        low["hid_actor"], low["hid_critic"] = low["hid_actor"][0], low["hid_critic"][0]
        C = low["reset"].shape[1]
        W = high["h_Z"].shape[0] if high else 0
        M = min(cfg.num_minibatches, C)
        device = low["reset"].device
        sums: dict[str, float] = {}
        n, skipped = 0, 0
        for _ in range(cfg.num_epochs):
            chunks = torch.randperm(C, device=device).chunk(M) if M > 1 else [None]
            windows = torch.randperm(W, device=device).tensor_split(M) if M > 1 else [None]
            for ci, wi in zip(chunks, windows):
                out = self._minibatch_step(_take(low, ci, env_major=("hid_actor", "hid_critic")), _take(high, wi))
                if out is None:
                    skipped += 1
                    continue
                for k, v in out.items():
                    sums[k] = sums.get(k, 0.0) + v
                n += 1
        self.skipped_updates += skipped
        metrics = {k: v / max(n, 1) for k, v in sums.items()}
        metrics.update(stats)
        metrics.update(lr=lr, minibatch_steps=n, skipped_minibatches=skipped, chunk_len=L)
        return metrics

    def _minibatch_step(self, mb: dict[str, torch.Tensor], hb: dict[str, torch.Tensor]) -> dict[str, float] | None:
        cfg, policy = self.cfg, self.policy
        hier = policy.hierarchy
        Z, z = (mb["skill_team"], mb["skill_agent"]) if hier else (None, None)
        logp, ent, value = policy.low.evaluate(mb["obs.state"], mb["obs.obs"], Z, z, mb["action"],
                                               mb["hid_actor"], mb["hid_critic"], mb["reset"])
        pg_l, v_l, kl_l, cf_l = _ppo_terms(logp, mb["logp"], mb["low_adv"], value, mb["low_old_v"],
                                           mb["low_target"], cfg.clip_coef, cfg.value_clip)
        ent_l = ent.mean()
        loss = pg_l - cfg.lambda_l * ent_l + cfg.vf_coef * v_l
        out = {"low_pg_loss": pg_l, "low_v_loss": v_l, "low_entropy": ent_l, "low_approx_kl": kl_l,
               "low_clip_frac": cf_l}
        if hier:
            if hb["h_Z"].numel():
                hlogp, hent, hval = policy.coordinator.evaluate(hb["h_state"], hb["h_obs"], hb["h_Z"], hb["h_z"])
                pg_h, v_h, kl_h, cf_h = _ppo_terms(hlogp, hb["h_logp"], hb["high_adv"], hval, hb["high_old_v"],
                                                   hb["high_target"], cfg.clip_coef, cfg.value_clip)
                ent_h = hent.mean()
                loss = loss + pg_h - cfg.lambda_h * ent_h + cfg.vf_coef * v_h
                out.update(high_pg_loss=pg_h, high_v_loss=v_h, high_entropy=ent_h,
                           high_entropy_team=hent[:, 0].mean(), high_entropy_agent=hent[:, 1:].mean(),
                           high_approx_kl=kl_h, high_clip_frac=cf_h)
            lq_team = policy.disc.log_q_team(mb["next_state"])
            lq_agent = policy.disc.log_q_agent(mb["next_obs"], Z)
            ce_team = -lq_team.gather(-1, Z.unsqueeze(-1)).mean()
            ce_agent = -lq_agent.gather(-1, z.unsqueeze(-1)).mean()
            loss = loss + cfg.disc_coef * (ce_team + ce_agent)
            out.update(disc_team_loss=ce_team, disc_agent_loss=ce_agent)
        if policy.novelty is not None:
            # The predictor learns the views the agents reach, which makes them familiar.
            nov = policy.novelty.error(mb["next_obs"]).mean()
            loss = loss + nov
            out["novelty_loss"] = nov

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        finite = bool(torch.isfinite(loss))
        for params in self.groups.values():
            norm = nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=True)
            finite = finite and math.isfinite(float(norm))
        if not finite:
            # A NaN/Inf would poison the weights and Adam's moments: drop this step entirely.
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.optimizer.step()
        return {k: float(v.detach()) for k, v in out.items()}


def _take(data: dict[str, torch.Tensor], idx: torch.Tensor | None, env_major: tuple[str, ...] = ()) -> dict:
    """Rows ``idx`` of a minibatch source: dim 1 of chunked ``[L, C, ...]`` columns, dim 0 of the
    others (window samples, chunk hiddens); everything when ``idx`` is None."""
    if idx is None:
        return data
    return {k: v.index_select(0 if (k in env_major or not env_major) else 1, idx) for k, v in data.items()}
