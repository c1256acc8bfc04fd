"""The PPO sampler (worker side): steps an env batch with a policy copy and fills one rollout's
columns (:class:`~.buffer.RolloutBuffer`). A :class:`~rl_system.algos.protocols.Sampler`, used
by :class:`rl_system.actors.worker.RolloutWorker` and :func:`rl_system.policy.evaluation.evaluate`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rl_system.algos.episodes import EpisodeTracker
from rl_system.algos.ppo.buffer import RolloutBuffer
from rl_system.algos.protocols import is_recurrent
from rl_system.envs.base import VecEnv
from rl_system.rollout.contract import Columns, Episodes


class PolicySampler:
    """Single-agent sampler for PPO policies (:class:`~rl_system.algos.protocols.ActorCriticNetwork`): fills a
    :class:`RolloutBuffer` and computes the truncation bootstrap ``V(final_obs)`` with the same
    policy version that acted.

    A recurrent policy (:class:`~rl_system.algos.protocols.RecurrentActorCriticNetwork`) gets each
    env's recurrent state (``hidden``, ``[N, S]``), carried across rollouts and zeroed where an
    episode ends; the state a rollout began with ships as its ``init_state`` column."""

    def __init__(self, env: VecEnv, policy: nn.Module, rollout_len: int, device: torch.device,
                 return_gamma: float | None = None):
        self.env, self.policy, self.device = env, policy, device
        self.recurrent = is_recurrent(policy)
        self.buffer = RolloutBuffer(rollout_len, env.num_envs, env.observation_spec, env.action_spec, device,
                                    disc_return=return_gamma is not None,
                                    state_size=policy.state_size if self.recurrent else 0)
        self.rows = self.buffer.rows()  # step t's views of the columns, made once
        self.hidden = policy.initial_state(env.num_envs).to(device) if self.recurrent else None
        self.episodes = EpisodeTracker(rollout_len, env.num_envs, device, stats=getattr(env, "episode_stats", ()))
        self.obs: dict[str, torch.Tensor] = {}
        # return_gamma: also ship the running discounted return per env (``disc_return``), from
        # which the learner scales rewards (ppo.normalize_reward).
        self.return_gamma = return_gamma
        self.disc_ret = torch.zeros(env.num_envs, device=device)

    # The sampler runs in inference mode, not just without gradients: each of a step's ~100 small
    # ops then skips autograd's bookkeeping (version counters, view metadata), which takes a
    # CartPole rollout from 5.9 to 5.0 ms. Tensors made there are inference tensors, and one that
    # is changed in place later must be changed in inference mode too: hence reset and
    # load_state_dict as well (envs reassign their state in step, then reset it in place).
    @torch.inference_mode()
    def reset(self, seed: int | None = None) -> None:
        self.obs = self.env.reset(seed=seed)
        self.episodes.reset()
        self.disc_ret.zero_()
        if self.hidden is not None:
            self.hidden.zero_()

    @torch.inference_mode()
    def collect(self, deterministic: bool = False) -> tuple[Columns, Episodes]:
        buf, env, policy = self.buffer, self.env, self.policy
        obs, state = self.obs, self.hidden
        if state is not None:
            buf.init_state.copy_(state)
        buf.trunc_value.zero_()
        for t, row in enumerate(self.rows):
            for k, v in obs.items():
                row.obs[k].copy_(v)
            if state is None:
                action, logp, value = policy.act(obs, deterministic=deterministic)
            else:
                action, logp, value, state = policy.act(obs, state, deterministic=deterministic)
            row.action.copy_(action)
            row.logp.copy_(logp)
            row.value.copy_(value)
            step = env.step(action)
            row.reward.copy_(step.reward)
            row.terminated.copy_(step.terminated)
            row.truncated.copy_(step.truncated)
            done = step.terminated | step.truncated
            self.episodes.record(t, step.reward, done, step.info)
            if self.return_gamma is not None:
                self.disc_ret.mul_(self.return_gamma).add_(step.reward)
                row.disc_return.copy_(self.disc_ret)
                self.disc_ret.masked_fill_(done, 0.0)
            # Time-limit truncation: the learner bootstraps with V(final_obs), computed here by the
            # same policy version (a recurrent one with the state that saw the episode). Only
            # evaluated on steps where some env was truncated (rare: one test per step else).
            if bool(step.truncated.any()):
                trunc = step.truncated & ~step.terminated
                if bool(trunc.any()):
                    final_value = policy.value(step.final_obs) if state is None else policy.value(step.final_obs, state)
                    row.trunc_value.copy_(torch.where(trunc, final_value, 0.0))
            if state is not None:
                state = state.masked_fill(done.unsqueeze(1), 0.0)  # the next episode starts afresh
            obs = step.obs
        buf.last_value.copy_(policy.value(obs) if state is None else policy.value(obs, state))
        self.obs, self.hidden = obs, state
        return buf.columns(), self.episodes.completed()

    def state_dict(self) -> dict[str, Any]:
        state = {"obs": dict(self.obs), "disc_return": self.disc_ret.clone(), **self.episodes.state_dict()}
        if self.hidden is not None:
            state["recurrent_state"] = self.hidden.clone()
        return state

    @torch.inference_mode()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
        self.episodes.load_state_dict(state)
        if "disc_return" in state:
            self.disc_ret.copy_(state["disc_return"])
        if self.hidden is not None:
            if "recurrent_state" not in state:
                raise ValueError("the sampler state has no recurrent_state: it was saved by a feedforward policy")
            self.hidden = state["recurrent_state"].to(self.device).clone()
