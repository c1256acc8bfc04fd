"""Multi-agent PPO's sampler (worker side): steps a multi-agent env batch with a policy copy and
fills one rollout's preallocated columns (:mod:`rl_system.algos.mappo.columns`). A
:class:`~rl_system.algos.protocols.Sampler`."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rl_system.algos.episodes import EpisodeTracker
from rl_system.algos.mappo import columns as col
from rl_system.algos.protocols import is_recurrent
from rl_system.envs.base import AGENT_ACTIVE, VecEnv, agent_rewards
from rl_system.rollout.contract import Columns, Episodes, Layout, layout, obs_column


class MultiAgentSampler:
    """Fills ``[T, N, ...]`` step columns and ``[T, N, n]`` per-agent ones.

    Rewards: an env's ``[N, n]`` rewards per agent, or its team reward ``[N]`` for every agent;
    with ``reward="team"`` every agent learns from the agents' sum. The episode return reported
    (for the return window, ``target_return`` and eval) is the agents' mean return, the figure
    BenchMARL and the MARL papers report; an agent that finished early counts its reward until then.

    A recurrent policy (``mappo.recurrent``) gets each env's state ``[N, n, S]`` (``hidden``), carried
    across rollouts and zeroed where the env's episode ends; the state a rollout began with ships
    as its :data:`~.columns.INIT_STATE` column."""

    def __init__(self, env: VecEnv, policy: nn.Module, rollout_len: int, device: torch.device, reward: str = "agent"):
        self.env, self.policy, self.device, self.team = env, policy, device, reward == "team"
        T, N, n = rollout_len, env.num_envs, env.action_spec.num_agents
        spec = env.observation_spec

        def alloc(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros((T, N, *shape), dtype=dtype, device=device)

        self.cols: Columns = {obs_column(k): alloc(*s.shape, dtype=s.dtype) for k, s in spec.items()}
        self.cols.update({col.ACTION: alloc(*env.action_spec.shape, dtype=env.action_spec.dtype),
                          col.LOGP: alloc(n), col.VALUE: alloc(n), col.REWARD: alloc(n), col.TRUNC_VALUE: alloc(n),
                          col.TERMINATED: alloc(dtype=torch.bool), col.TRUNCATED: alloc(dtype=torch.bool)})
        if AGENT_ACTIVE in spec:
            self.cols[col.AGENT_DONE] = alloc(n, dtype=torch.bool)
        self.cols[col.LAST_VALUE] = torch.zeros(N, n, device=device)
        self.hidden = policy.initial_state(N).to(device) if is_recurrent(policy) else None
        if self.hidden is not None:
            self.cols[col.INIT_STATE] = torch.zeros_like(self.hidden)
        self.rows = [{k: v[t] for k, v in self.cols.items() if layout(k) is Layout.STEP} for t in range(T)]
        self.episodes = EpisodeTracker(rollout_len, N, device, num_agents=n, stats=getattr(env, "episode_stats", ()))
        self.obs: dict[str, torch.Tensor] = {}

    @torch.inference_mode()
    def reset(self, seed: int | None = None) -> None:
        self.obs = self.env.reset(seed=seed)
        self.episodes.reset()
        if self.hidden is not None:
            self.hidden.zero_()

    @torch.inference_mode()
    def collect(self, deterministic: bool = False) -> tuple[Columns, Episodes]:
        env, policy, obs, state = self.env, self.policy, self.obs, self.hidden
        if state is not None:
            self.cols[col.INIT_STATE].copy_(state)
        for t, row in enumerate(self.rows):
            for k, v in obs.items():
                row[obs_column(k)].copy_(v)
            if state is None:
                action, logp, value = policy.act(obs, deterministic=deterministic)
            else:
                action, logp, value, state = policy.act(obs, state, deterministic=deterministic)
            row[col.ACTION].copy_(action)
            row[col.LOGP].copy_(logp)
            row[col.VALUE].copy_(value)
            step = env.step(action)
            per_agent = agent_rewards(step.reward, logp.shape[1])
            row[col.REWARD].copy_(per_agent.sum(1, keepdim=True).expand_as(per_agent) if self.team else per_agent)
            row[col.TERMINATED].copy_(step.terminated)
            row[col.TRUNCATED].copy_(step.truncated)
            done = step.terminated | step.truncated
            if col.AGENT_DONE in row:
                # An agent whose own episode ended while the env's goes on: its return ends here.
                # (The row holds this step's flags: the env may reuse the storage of the obs it gave.)
                was_active = row[obs_column(AGENT_ACTIVE)]
                row[col.AGENT_DONE].copy_(was_active & ~step.obs[AGENT_ACTIVE] & ~done.unsqueeze(1))
            self.episodes.record(t, per_agent.mean(1), done, step.info, per_agent)
            trunc = step.truncated & ~step.terminated
            row[col.TRUNC_VALUE].zero_()
            if bool(trunc.any()):  # V(final obs) bootstraps time-limit truncations, by the policy that acted
                row[col.TRUNC_VALUE].copy_(torch.where(trunc.unsqueeze(1), self._value(step.final_obs, state), 0.0))
            if state is not None:
                state = state.masked_fill(done.view(-1, 1, 1), 0.0)  # the next episode starts afresh
            obs = step.obs
        self.cols[col.LAST_VALUE].copy_(self._value(obs, state))
        norm = getattr(policy, "value_norm", None)  # a user's network may have none
        if norm is not None:
            self._to_return_units(norm)
        self.obs, self.hidden = obs, state
        return self.cols, self.episodes.completed()

    def _to_return_units(self, norm: torch.nn.Module) -> None:
        """Values leave the worker in return units, with the ValueNorm statistics of the version
        that sampled them (a learner whose statistics moved on since, ``max_policy_lag > 0``, must
        not reinterpret them with its own). Truncation bootstraps exist only where an episode was
        truncated; elsewhere the column stays 0."""
        cols = self.cols
        cols[col.VALUE].copy_(norm.denormalize(cols[col.VALUE]))
        cols[col.LAST_VALUE].copy_(norm.denormalize(cols[col.LAST_VALUE]))
        trunc = (cols[col.TRUNCATED] & ~cols[col.TERMINATED]).unsqueeze(-1)
        cols[col.TRUNC_VALUE].copy_(torch.where(trunc, norm.denormalize(cols[col.TRUNC_VALUE]), 0.0))

    def _value(self, obs: dict[str, torch.Tensor], state: torch.Tensor | None) -> torch.Tensor:
        """``[N, n]``: the values of ``obs`` (a recurrent policy's seen with the state that saw the episode)."""
        return self.policy.value(obs) if state is None else self.policy.value(obs, state)

    def state_dict(self) -> dict[str, Any]:
        state = {"obs": dict(self.obs), **self.episodes.state_dict()}
        if self.hidden is not None:
            state["recurrent_state"] = self.hidden.clone()
        return state

    @torch.inference_mode()
    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
        self.episodes.load_state_dict(state)
        if self.hidden is not None:
            if "recurrent_state" not in state:
                raise ValueError("the sampler state has no recurrent_state: it was saved by a feedforward policy")
            self.hidden = state["recurrent_state"].to(self.device).clone()
