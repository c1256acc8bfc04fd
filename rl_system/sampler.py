"""Samplers: the worker-side half of an algorithm. One steps an env batch with a policy copy
and returns the columns of one rollout.

Every sampler offers the same small interface, used by :class:`rl_system.worker.RolloutWorker`
and by :func:`rl_system.evaluate.evaluate`:

* ``reset(seed)`` resets every env and the sampler's per-env state;
* ``collect(deterministic=False) -> dict[str, Tensor]`` runs ``T`` steps of all ``N`` envs and
  returns the rollout's columns (see :mod:`rl_system.algos` for the column convention) plus the
  completed-episode statistics ``episode_return``, ``episode_length``, ``episode_env`` (which env
  index finished it) and ``episode_<key>`` for every boolean ``info`` entry of the env (e.g.
  ``episode_success``, ``episode_win``), all ``[E]`` in the order the episodes ended;
* ``state_dict()`` / ``load_state_dict()``: what a bit-exact resume needs besides the env and
  the RNG (current observations, episode counters, recurrent state...).
"""

from __future__ import annotations

from typing import Any

import torch

from envs.base import VecEnv
from rl_system.buffer import RolloutBuffer
from rl_system.policy import ActorCritic


class EpisodeTracker:
    """Running return/length per env and the per-step record from which a rollout's completed
    episodes are read. ``[T, N]`` storage, allocated once (info keys on first sight)."""

    def __init__(self, rollout_len: int, num_envs: int, device: torch.device):
        self.T, self.N, self.device = rollout_len, num_envs, device
        self.ret = torch.zeros(num_envs, device=device)
        self.length = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self.ret_at = torch.zeros(rollout_len, num_envs, device=device)
        self.length_at = torch.zeros(rollout_len, num_envs, dtype=torch.int32, device=device)
        self.done_at = torch.zeros(rollout_len, num_envs, dtype=torch.bool, device=device)
        self.info_at: dict[str, torch.Tensor] = {}

    def reset(self) -> None:
        self.ret.zero_()
        self.length.zero_()

    def record(self, t: int, reward: torch.Tensor, done: torch.Tensor, info: dict[str, torch.Tensor]) -> None:
        self.ret += reward
        self.length += 1
        self.ret_at[t].copy_(self.ret)
        self.length_at[t].copy_(self.length)
        self.done_at[t].copy_(done)
        for key, value in info.items():
            if value.dtype == torch.bool and value.shape == (self.N,):
                if key not in self.info_at:
                    self.info_at[key] = torch.zeros(self.T, self.N, dtype=torch.bool, device=self.device)
                self.info_at[key][t].copy_(value)
        self.ret.masked_fill_(done, 0.0)
        self.length.masked_fill_(done, 0)

    def completed(self) -> dict[str, torch.Tensor]:
        """``episode_*`` columns ``[E]`` of the episodes that ended in this rollout, in time order."""
        done = self.done_at
        env_index = torch.arange(self.N, device=self.device).expand(self.T, self.N)
        out = {"episode_return": self.ret_at[done], "episode_length": self.length_at[done],
               "episode_env": env_index[done]}
        out.update({f"episode_{k}": v[done] for k, v in self.info_at.items()})
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"ep_return": self.ret.clone(), "ep_length": self.length.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.ret.copy_(state["ep_return"])
        self.length.copy_(state["ep_length"])


class PolicySampler:
    """Single-agent sampler for :class:`ActorCritic` policies (PPO): fills a
    :class:`RolloutBuffer` and computes the truncation bootstrap ``V(final_obs)`` with the same
    policy version that acted."""

    def __init__(self, env: VecEnv, policy: ActorCritic, rollout_len: int, device: torch.device):
        self.env, self.policy, self.device = env, policy, device
        self.buffer = RolloutBuffer(rollout_len, env.num_envs, env.observation_spec, env.action_spec, device)
        self.episodes = EpisodeTracker(rollout_len, env.num_envs, device)
        self.obs: dict[str, torch.Tensor] = {}

    def reset(self, seed: int | None = None) -> None:
        self.obs = self.env.reset(seed=seed)
        self.episodes.reset()

    @torch.no_grad()
    def collect(self, deterministic: bool = False) -> dict[str, torch.Tensor]:
        buf, env, policy = self.buffer, self.env, self.policy
        obs = self.obs
        for t in range(buf.rollout_len):
            for k, v in obs.items():
                buf.obs[k][t].copy_(v)
            action, logp, value = policy.act(obs, deterministic=deterministic)
            buf.action[t].copy_(action)
            buf.logp[t].copy_(logp)
            buf.value[t].copy_(value)
            step = env.step(action)
            buf.reward[t].copy_(step.reward)
            buf.terminated[t].copy_(step.terminated)
            buf.truncated[t].copy_(step.truncated)
            self.episodes.record(t, step.reward, step.terminated | step.truncated, step.info)
            # Time-limit truncation: the learner bootstraps with V(final_obs), computed here by the
            # same policy version. Only evaluated on steps where some env was truncated.
            trunc = step.truncated & ~step.terminated
            if bool(trunc.any()):
                buf.trunc_value[t] = torch.where(trunc, policy.value(step.final_obs), 0.0)
            else:
                buf.trunc_value[t].zero_()
            obs = step.obs
        buf.last_value.copy_(policy.value(obs))
        self.obs = obs
        return {**buf.columns(), **self.episodes.completed()}

    def state_dict(self) -> dict[str, Any]:
        return {"obs": dict(self.obs), **self.episodes.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
        self.episodes.load_state_dict(state)
