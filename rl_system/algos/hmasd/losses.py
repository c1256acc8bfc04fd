"""One HMASD minibatch's loss: the skill discoverer's PPO terms, the coordinator's, the
discriminators' cross-entropies and the novelty predictor's error, each a mean over the global
minibatch (in a learner group every learner backpropagates its share)."""

from __future__ import annotations

import torch

from rl_system.algos.hmasd import columns as col
from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.networks import HMASDPolicy
from rl_system.algos.surrogate import ppo_sums


def _ppo_terms(new_logp, old_logp, adv, new_v, old_v, target, cfg: HMASDConfig, count: int):
    """PPO's policy and value losses, KL and clip fraction over these rows, each a sum divided by
    ``count``, the rows of the whole minibatch (over a learner group: its share of the mean)."""
    sums = ppo_sums(new_logp - old_logp, adv, new_v, old_v, target, cfg.clip_coef, cfg.value_clip,
                    huber_delta=cfg.huber_delta)
    return tuple(x / count for x in sums)


def stat_keys(policy: HMASDPolicy, with_high: bool) -> list[str]:
    """The minibatch statistics, in a fixed order (the group reduces them as one vector)."""
    keys = ["low_pg_loss", "low_v_loss", "low_entropy", "low_approx_kl", "low_clip_frac"]
    if policy.hierarchy:
        if with_high:
            keys += ["high_pg_loss", "high_v_loss", "high_entropy", "high_entropy_team", "high_entropy_agent",
                     "high_approx_kl", "high_clip_frac"]
        keys += ["disc_team_loss", "disc_agent_loss"]
    if policy.novelty is not None:
        keys.append("novelty_loss")
    return keys


def minibatch_losses(policy: HMASDPolicy, cfg: HMASDConfig, bonuses: tuple[float, float],
                     mb: dict[str, torch.Tensor], hb: dict[str, torch.Tensor],
                     rows: tuple[int, int]) -> dict[str, torch.Tensor]:
    """Backpropagates this learner's share of the minibatch loss (low PPO + high PPO +
    discriminator cross-entropies + novelty predictor error; every mean over the global
    minibatch) and returns its terms (nothing where it holds no rows). ``mb``: this learner's
    chunks ``[L, c, ...]`` (hiddens ``[c, ...]``); ``hb``: its windows; ``rows``: the global minibatch's
    (chunks, windows)."""
    lambda_l, lambda_h = bonuses  # the round's entropy bonuses (low, high)
    hier = policy.hierarchy
    L, c = mb["reset"].shape[:2]
    out: dict[str, torch.Tensor] = {}
    loss = torch.zeros((), device=mb["reset"].device)
    if c:
        Z, z = (mb[col.SKILL_TEAM], mb[col.SKILL_AGENT]) if hier else (None, None)
        logp, ent, value = policy.low.evaluate(mb[col.STATE], mb[col.AGENT_OBS], Z, z, mb[col.ACTION],
                                               mb["hid_actor"], mb["hid_critic"], mb["reset"])
        count = L * rows[0] * logp.shape[2]  # [L, chunks, agents] over the global minibatch
        pg_l, v_l, kl_l, cf_l = _ppo_terms(logp, mb[col.LOGP], mb[col.ADVANTAGE], value, mb[col.OLD_VALUE],
                                           mb[col.RETURN], cfg, count)
        ent_l = ent.sum() / count
        loss = loss + pg_l - lambda_l * ent_l + cfg.vf_coef * v_l
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
        pg_h, v_h, kl_h, cf_h = _ppo_terms(hlogp, hb["logp"], hb[col.ADVANTAGE], hval, hb[col.OLD_VALUE],
                                           hb[col.RETURN], cfg, count)
        ent_h = hent.sum() / count
        loss = loss + pg_h - lambda_h * ent_h + cfg.vf_coef * v_h
        out.update(high_pg_loss=pg_h, high_v_loss=v_h, high_entropy=ent_h,
                   high_entropy_team=hent[:, 0].sum() / rows[1],
                   high_entropy_agent=hent[:, 1:].sum() / (rows[1] * (width - 1)),
                   high_approx_kl=kl_h, high_clip_frac=cf_h)
    if out:
        loss.backward()
    return out
