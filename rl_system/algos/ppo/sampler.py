"""The PPO sampler (worker side): steps an env batch with a policy copy and fills one rollout's
columns (:class:`~.buffer.RolloutBuffer`). A :class:`~rl_system.algos.protocols.Sampler`, used
by :class:`rl_system.worker.RolloutWorker` and :func:`rl_system.evaluate.evaluate`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from envs.base import VecEnv
from rl_system.algos.episodes import EpisodeTracker
from rl_system.algos.ppo.buffer import RolloutBuffer
from rl_system.rollout import Columns, Episodes


class PolicySampler:
    """Single-agent sampler for PPO policies (:class:`~rl_system.algos.protocols.ActorCriticNetwork`): fills a
    :class:`RolloutBuffer` and computes the truncation bootstrap ``V(final_obs)`` with the same
    policy version that acted."""

    def __init__(self, env: VecEnv, policy: nn.Module, rollout_len: int, device: torch.device,
                 return_gamma: float | None = None):
        self.env, self.policy, self.device = env, policy, device
        self.buffer = RolloutBuffer(rollout_len, env.num_envs, env.observation_spec, env.action_spec, device,
                                    disc_return=return_gamma is not None)
        self.episodes = EpisodeTracker(rollout_len, env.num_envs, device)
        self.obs: dict[str, torch.Tensor] = {}
        # return_gamma: also ship the running discounted return per env (``disc_return``), from
        # which the learner scales rewards (ppo.normalize_reward).
        self.return_gamma = return_gamma
        self.disc_ret = torch.zeros(env.num_envs, device=device)

    def reset(self, seed: int | None = None) -> None:
        self.obs = self.env.reset(seed=seed)
        self.episodes.reset()
        self.disc_ret.zero_()

    @torch.no_grad()
    def collect(self, deterministic: bool = False) -> tuple[Columns, Episodes]:
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
            done = step.terminated | step.truncated
            self.episodes.record(t, step.reward, done, step.info)
            if self.return_gamma is not None:
                self.disc_ret.mul_(self.return_gamma).add_(step.reward)
                buf.disc_return[t].copy_(self.disc_ret)
                self.disc_ret.masked_fill_(done, 0.0)
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
        return buf.columns(), self.episodes.completed()

    def state_dict(self) -> dict[str, Any]:
        return {"obs": dict(self.obs), "disc_return": self.disc_ret.clone(), **self.episodes.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
        self.episodes.load_state_dict(state)
        if "disc_return" in state:
            self.disc_ret.copy_(state["disc_return"])
