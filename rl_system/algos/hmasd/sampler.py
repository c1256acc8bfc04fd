"""HMASD sampler: steps a multi-agent env batch with both levels of the policy and fills one
rollout's columns (layouts: :mod:`rl_system.rollout.contract`; ``docs/hmasd.md`` for
every column).

Per-env state is batched tensors, never per-env Python objects: GRU hiddens ``[N, n, H]`` (actor
and critic), team skill ``Z [N]``, individual skills ``z [N, n]``, skill timer ``[N]``; all are
reset per env index with masks.

Window rule (high level): the coordinator assigns new skills for an env on the first step of
every rollout, on the first step after that env's episode ended, and when its timer reaches
``k`` steps. A window ended by ``terminated`` is terminal for the high level; one ended by a
time-limit truncation bootstraps with ``V_h(final obs)`` (``h_trunc_value``); one cut by the
rollout end bootstraps with ``V_h`` of the rollout's last observation (``last_h_value``) -- exact,
because the next rollout starts a new window there. The coordinator runs only on the envs that
start a window at that step.
"""

from __future__ import annotations

from typing import Any

import torch

from rl_system.algos.episodes import EpisodeTracker
from rl_system.algos.hmasd import columns as col
from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.networks import HMASDPolicy
from rl_system.envs.base import VecEnv, agent_rewards
from rl_system.rollout.contract import Columns, Episodes

GREEDY_LEVELS = ("high", "low")


def greedy_levels(deterministic: bool | str) -> tuple[bool, bool]:
    """``(coordinator greedy, discoverer greedy)`` for :meth:`HMASDSampler.collect`'s argument."""
    if isinstance(deterministic, str):
        if deterministic not in GREEDY_LEVELS:
            raise ValueError(f"greedy level must be one of {GREEDY_LEVELS}, not {deterministic!r}")
        return deterministic == "high", deterministic == "low"
    return bool(deterministic), bool(deterministic)


class HMASDSampler:
    def __init__(self, env: VecEnv, policy: HMASDPolicy, cfg: HMASDConfig, rollout_len: int, device: torch.device):
        self.env, self.policy, self.cfg, self.device = env, policy, cfg, device
        self.hierarchy = cfg.hierarchy
        T, N, n, H = rollout_len, env.num_envs, env.num_agents, cfg.hidden
        self.T, self.N, self.n = T, N, n
        S = env.observation_spec["state"].shape[0]
        O = env.observation_spec["obs"].shape[-1]

        def alloc(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.buf = {
            col.STATE: alloc(T, N, S), col.AGENT_OBS: alloc(T, N, n, O),
            col.ACTION: alloc(T, N, n, dtype=torch.int64), col.LOGP: alloc(T, N, n), col.VALUE: alloc(T, N, n),
            col.REWARD: alloc(T, N), col.TERMINATED: alloc(T, N, dtype=torch.bool),
            col.TRUNCATED: alloc(T, N, dtype=torch.bool), col.TRUNC_VALUE: alloc(T, N, n),
            col.LAST_VALUE: alloc(N, n), col.INIT_H_ACTOR: alloc(N, n, H), col.INIT_H_CRITIC: alloc(N, n, H),
        }
        if self.hierarchy:
            self.buf.update({
                col.SKILL_TEAM: alloc(T, N, dtype=torch.int64), col.SKILL_AGENT: alloc(T, N, n, dtype=torch.int64),
                col.WINDOW_START: alloc(T, N, dtype=torch.bool), col.HIGH_LOGP: alloc(T, N, n + 1), col.HIGH_VALUE: alloc(T, N, n + 1),
                col.HIGH_TRUNC_VALUE: alloc(T, N, n + 1), col.LAST_HIGH_VALUE: alloc(N, n + 1),
            })
        # The observations after each step, for the discriminators and the novelty bonus.
        self.ships_next = self.hierarchy or cfg.novelty_coef > 0
        if self.ships_next:
            self.buf.update({col.LAST_STATE: alloc(N, S), col.LAST_AGENT_OBS: alloc(N, n, O)})
            # Observation each step ended on (== next obs unless the episode ended); only the rows
            # of ended episodes are shipped, as the compact ``final_obs.*`` columns.
            self._final_state, self._final_obs = alloc(T, N, S), alloc(T, N, n, O)
        self.episodes = EpisodeTracker(T, N, device, num_agents=n, stats=getattr(env, "episode_stats", ()))
        self.obs: dict[str, torch.Tensor] = {}
        self.h_actor, self.h_critic = alloc(N, n, H), alloc(N, n, H)
        self.team_skill = alloc(N, dtype=torch.int64)
        self.agent_skill = alloc(N, n, dtype=torch.int64)
        self.timer = alloc(N, dtype=torch.int64)

    @torch.inference_mode()  # as the PPO sampler, and for the same reason (PolicySampler.reset)
    def reset(self, seed: int | None = None) -> None:
        self.obs = self.env.reset(seed=seed)
        self.episodes.reset()
        for t in (self.h_actor, self.h_critic, self.team_skill, self.agent_skill, self.timer):
            t.zero_()

    def _assign(self, t: int, start: torch.Tensor, deterministic: bool) -> None:
        """The coordinator picks ``(Z, z)`` for the envs that start a window at step t."""
        buf, obs = self.buf, self.obs
        buf[col.WINDOW_START][t].copy_(start)
        buf[col.HIGH_LOGP][t].zero_()
        buf[col.HIGH_VALUE][t].zero_()
        idx = start.nonzero().squeeze(1)
        if idx.numel():
            Z, z, logp, value = self.policy.coordinator.act(obs["state"][idx], obs["obs"][idx], deterministic)
            self.team_skill[idx] = Z
            self.agent_skill[idx] = z
            self.timer[idx] = 0
            buf[col.HIGH_LOGP][t][idx] = logp
            buf[col.HIGH_VALUE][t][idx] = self._den_high(value)

    @torch.inference_mode()
    def collect(self, deterministic: bool | str = False) -> tuple[Columns, Episodes]:
        """``deterministic``: ``True`` takes the argmax at both levels, ``"high"`` only at the
        coordinator (skills), ``"low"`` only at the discoverer (actions); the other level samples."""
        greedy_high, greedy_low = greedy_levels(deterministic)
        buf, env, policy, cfg = self.buf, self.env, self.policy, self.cfg
        low, hier = policy.low, self.hierarchy
        buf[col.INIT_H_ACTOR].copy_(self.h_actor)
        buf[col.INIT_H_CRITIC].copy_(self.h_critic)
        h_actor, h_critic = self.h_actor, self.h_critic
        self._value_units()
        prev_done = torch.ones(self.N, dtype=torch.bool, device=self.device)  # every env starts a window at t=0
        for t in range(self.T):
            obs = self.obs
            buf[col.STATE][t].copy_(obs["state"])
            buf[col.AGENT_OBS][t].copy_(obs["obs"])
            if hier:
                self._assign(t, prev_done | (self.timer >= cfg.skill_interval), greedy_high)
                buf[col.SKILL_TEAM][t].copy_(self.team_skill)
                buf[col.SKILL_AGENT][t].copy_(self.agent_skill)
            action, logp, value, h_actor, h_critic = low.act(obs["state"], obs["obs"], self.team_skill,
                                                             self.agent_skill, h_actor, h_critic, greedy_low)
            buf[col.ACTION][t].copy_(action)
            buf[col.LOGP][t].copy_(logp)
            buf[col.VALUE][t].copy_(self._den_low(value))
            step = env.step(action)
            done = step.terminated | step.truncated
            # HMASD learns from a team reward [N]: an env's per-agent rewards [N, n] are summed.
            per_agent = agent_rewards(step.reward, self.n)
            reward = step.reward.sum(1) if step.reward.dim() == 2 else step.reward
            buf[col.REWARD][t].copy_(reward)
            buf[col.TERMINATED][t].copy_(step.terminated)
            buf[col.TRUNCATED][t].copy_(step.truncated)
            self.episodes.record(t, reward, done, step.info, per_agent)
            fin = step.final_obs
            # Time-limit truncation: both levels bootstrap from the final observation, valued here
            # by the same policy version (only on steps where some env was truncated).
            trunc = step.truncated & ~step.terminated
            if bool(trunc.any()):
                v = low.value(fin["state"], fin["obs"], self.team_skill, self.agent_skill, h_critic)
                buf[col.TRUNC_VALUE][t] = torch.where(trunc.unsqueeze(1), self._den_low(v), 0.0)
                if hier:
                    hv = policy.coordinator.values(fin["state"], fin["obs"])
                    buf[col.HIGH_TRUNC_VALUE][t] = torch.where(trunc.unsqueeze(1), self._den_high(hv), 0.0)
            else:
                buf[col.TRUNC_VALUE][t].zero_()
                if hier:
                    buf[col.HIGH_TRUNC_VALUE][t].zero_()
            if self.ships_next:
                self._final_state[t].copy_(fin["state"])
                self._final_obs[t].copy_(fin["obs"])
            # Recurrent state of finished episodes starts afresh (per env index, by mask).
            keep = (~done).to(h_actor.dtype).view(-1, 1, 1)
            h_actor = h_actor * keep
            h_critic = h_critic * keep
            self.timer += 1
            prev_done = done
            self.obs = step.obs
        self.h_actor, self.h_critic = h_actor, h_critic
        obs = self.obs
        buf[col.LAST_VALUE].copy_(self._den_low(low.value(obs["state"], obs["obs"], self.team_skill,
                                                        self.agent_skill, h_critic)))
        cols = dict(buf)
        if hier:
            buf[col.LAST_HIGH_VALUE].copy_(self._den_high(policy.coordinator.values(obs["state"], obs["obs"])))
        if self.ships_next:
            buf[col.LAST_STATE].copy_(obs["state"])
            buf[col.LAST_AGENT_OBS].copy_(obs["obs"])
            # Rows of ended episodes, env-major (env, then time): the order of done.T[mask].
            ended = (buf[col.TERMINATED] | buf[col.TRUNCATED]).T
            cols[col.FINAL_STATE] = self._final_state.transpose(0, 1)[ended]
            cols[col.FINAL_AGENT_OBS] = self._final_obs.transpose(0, 1)[ended]
        return cols, self.episodes.completed()

    def _value_units(self) -> None:
        """Values leave the worker in return units, denormalised with the ValueNorm statistics of
        the version that sampled them: a learner whose statistics have moved on since
        (``max_policy_lag > 0``) must not reinterpret them with its own. Read once per rollout
        (the weights do not change during one)."""
        def units(norm):
            if not self.cfg.value_norm:
                return lambda x: x
            mean, std = norm.mean_std()
            return lambda x: x * std + mean
        self._den_low = units(self.policy.low_norm)
        self._den_high = units(self.policy.high_norm) if self.hierarchy else (lambda x: x)

    def state_dict(self) -> dict[str, Any]:
        return {"obs": dict(self.obs), **self.episodes.state_dict(), "h_actor": self.h_actor.clone(),
                "h_critic": self.h_critic.clone(), "team_skill": self.team_skill.clone(),
                "agent_skill": self.agent_skill.clone(), "skill_timer": self.timer.clone()}

    @torch.inference_mode()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
        self.episodes.load_state_dict(state)
        self.h_actor = state["h_actor"].to(self.device).clone()
        self.h_critic = state["h_critic"].to(self.device).clone()
        self.team_skill.copy_(state["team_skill"])
        self.agent_skill.copy_(state["agent_skill"])
        self.timer.copy_(state["skill_timer"])
