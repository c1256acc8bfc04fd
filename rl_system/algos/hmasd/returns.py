"""HMASD's rewards and returns (learner side, no gradients): the low level's intrinsic reward
from the discriminators (and the optional novelty bonus), GAE over skill windows for the
coordinator, the observation after each step, and the chunking of rollouts for BPTT.
"""

from __future__ import annotations

import math

import torch

from rl_system import collective
from rl_system.algos.hmasd import columns as col
from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.networks import HMASDPolicy
from rl_system.algos.hmasd.novelty import novelty_bonus, success_share


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


@torch.no_grad()
def low_level_reward(policy: HMASDPolicy, cfg: HMASDConfig, batch: dict[str, torch.Tensor],
                     group: collective.Collective = collective.SOLO) -> dict[str, torch.Tensor]:
    """The low level's reward per agent step ``[T, N, n]``, with the current networks: Eq.
    (low-level reward) ``lambda_e * r_t + lambda_D * log q_D(Z | s_{t+1}) + lambda_d * log q_d(z_i |
    o_{i,t+1}, Z)`` (with ``logq_floor`` each log-probability clamped from below at chance,
    ``log(1/n)``); the team reward ``r_t`` alone for flat MAPPO; plus ``novelty_coef`` times the
    novelty bonus of ``o_{i,t+1}`` where that is on (times ``1 - `` the round's success share with
    ``novelty_gate: success``; with ``novelty_norm: initial`` the first call records the bonus's
    scale in the policy). Also the pieces (next inputs, log-probs,
    discriminator hits, novelty errors) for the metrics and the losses."""
    done = batch[col.TERMINATED] | batch[col.TRUNCATED]
    out: dict[str, torch.Tensor] = {}
    if policy.hierarchy or policy.novelty is not None:
        out["next_obs"] = next_inputs(batch[col.AGENT_OBS], batch[col.LAST_AGENT_OBS], batch[col.FINAL_AGENT_OBS], done)
    if policy.hierarchy:
        Z, z = batch[col.SKILL_TEAM], batch[col.SKILL_AGENT]
        ns = next_inputs(batch[col.STATE], batch[col.LAST_STATE], batch[col.FINAL_STATE], done)
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
        terms = {"env": cfg.lambda_e * batch[col.REWARD].unsqueeze(-1), "team": cfg.lambda_D * bonus_team.unsqueeze(-1),
                 "agent": cfg.lambda_d * bonus_agent}
        reward = terms["env"] + terms["team"] + terms["agent"]
        out.update(terms=terms)
        out.update(log_q_team=r_team, log_q_agent=r_agent, next_state=ns,
                   team_correct=lq_team.argmax(-1) == Z, agent_correct=lq_agent.argmax(-1) == z)
    else:
        reward = batch[col.REWARD].unsqueeze(-1).expand(batch[col.VALUE].shape)  # flat MAPPO: lambda_e = 1
    if policy.novelty is not None:
        out["novelty_error"] = policy.novelty.error(out["next_obs"])  # [T, N, n]
        weight = torch.tensor(cfg.novelty_coef)
        if cfg.novelty_gate == "success":
            weight = weight * (1 - success_share(batch[col.REWARD], batch[col.TERMINATED], batch[col.TRUNCATED],
                                                 group))
        out["novelty_weight"] = weight
        bonus = weight * novelty_bonus(policy.novelty, out["novelty_error"], cfg.novelty_norm, group)
        reward = reward + bonus
        out.setdefault("terms", {})["novelty"] = bonus
    out["reward"] = reward
    return out
