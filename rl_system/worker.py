"""Rollout worker: an env batch, a policy copy and a preallocated buffer in one Ray actor.

``sample(weights, version)`` loads the weights only when ``version`` is newer than the copy it
holds, steps all N envs T times, and returns ``(meta, payload)``: a small dict the driver gates
on and the rollout encoded by :mod:`rl_system.codec` (columnar, LZ4, checksummed).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from envs import make_env
from rl_system import codec
from rl_system.buffer import RolloutBuffer
from rl_system.config import RunConfig
from rl_system.device import resolve_device
from rl_system.policy import ActorCritic


class RolloutWorker:
    def __init__(self, worker_id: int, cfg: dict[str, Any] | RunConfig):
        self.cfg = cfg if isinstance(cfg, RunConfig) else RunConfig.model_validate(cfg)
        wc = self.cfg.workers
        torch.set_num_threads(wc.torch_threads)
        self.worker_id = worker_id
        self.device = resolve_device(wc.device)
        seed = self.cfg.seed * 10_007 + worker_id
        torch.manual_seed(seed)
        self.env = make_env(self.cfg.env.name, wc.num_envs, self.device, seed=seed, **self.cfg.env.kwargs)
        self.policy = ActorCritic(self.env.observation_spec, self.env.action_spec, self.cfg.model).to(self.device)
        self.policy.eval()
        self.buffer = RolloutBuffer(wc.rollout_len, wc.num_envs, self.env.observation_spec,
                                    self.env.action_spec, self.device)
        self.version = -1
        # "auto" means: compress only across nodes; the driver calls set_learner_node once the
        # learner is placed. Until then (and when used in-process) nothing is compressed.
        self.compression = "none" if self.cfg.compression == "auto" else self.cfg.compression
        self.samples = 0  # since this process started: 0 after a restart by Ray
        self.ep_return = torch.zeros(wc.num_envs, device=self.device)
        self.ep_length = torch.zeros(wc.num_envs, dtype=torch.int32, device=self.device)
        self._reset_envs(seed)

    def _reset_envs(self, seed: int | None = None) -> None:
        self.obs = self.env.reset(seed=seed)
        self.ep_return.zero_()
        self.ep_length.zero_()

    def set_weights(self, weights: dict[str, torch.Tensor], version: int) -> None:
        if version > self.version:
            self.policy.load_state_dict(weights)
            self.version = version

    def sample(self, weights: dict[str, torch.Tensor], version: int) -> tuple[dict[str, Any], bytes]:
        """Collect one rollout with policy ``version``; returns ``(meta, payload)``."""
        t0 = time.perf_counter()
        self.set_weights(weights, version)
        try:
            self._collect()
        except Exception:
            # Leave the worker usable for the re-request: start every env afresh.
            self._reset_envs()
            raise
        returns, lengths = self.buffer.completed_episodes()
        columns = self.buffer.columns()
        columns.update(episode_return=returns, episode_length=lengths)
        sample_s = time.perf_counter() - t0
        meta = {
            "version": self.version,
            "worker_id": self.worker_id,
            "env_steps": self.buffer.rollout_len * self.buffer.num_envs,
            "num_episodes": int(returns.numel()),
            "sample_s": sample_s,
            "fresh_process": self.samples == 0,
        }
        self.samples += 1
        payload = codec.encode(columns, meta, compression=self.compression, level=self.cfg.compression_level)
        meta["raw_bytes"] = sum(t.numel() * t.element_size() for t in columns.values())
        meta["encode_s"] = time.perf_counter() - t0 - sample_s
        meta["payload_bytes"] = len(payload)
        meta["episode_returns"] = returns[-self.cfg.return_window:].tolist()
        meta["episode_lengths"] = lengths[-self.cfg.return_window:].tolist()
        return meta, payload

    @torch.no_grad()
    def _collect(self) -> None:
        buf, env, policy = self.buffer, self.env, self.policy
        obs = self.obs
        for t in range(buf.rollout_len):
            for k, v in obs.items():
                buf.obs[k][t].copy_(v)
            action, logp, value = policy.act(obs)
            buf.action[t].copy_(action)
            buf.logp[t].copy_(logp)
            buf.value[t].copy_(value)
            step = env.step(action)
            buf.reward[t].copy_(step.reward)
            buf.terminated[t].copy_(step.terminated)
            buf.truncated[t].copy_(step.truncated)
            done = step.terminated | step.truncated
            self.ep_return += step.reward
            self.ep_length += 1
            buf.episode_return[t].copy_(self.ep_return)
            buf.episode_length[t].copy_(self.ep_length)
            self.ep_return.masked_fill_(done, 0.0)
            self.ep_length.masked_fill_(done, 0)
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

    def set_learner_node(self, learner_node_id: str) -> dict[str, str]:
        """Resolve ``compression: auto`` against where the learner runs; returns the choice and
        this worker's node."""
        import ray

        here = ray.get_runtime_context().get_node_id()
        if self.cfg.compression == "auto":
            self.compression = "lz4" if here != learner_node_id else "none"
        return {"compression": self.compression, "node_id": here}

    def get_state(self) -> dict[str, Any] | None:
        """What a bit-exact resume needs of this worker (env, RNG, current obs, episode
        counters), or None when the env cannot capture its state."""
        try:
            env_state = self.env.state_dict()
        except NotImplementedError:
            return None
        return {"env": env_state, "torch_rng": torch.get_rng_state(), "obs": dict(self.obs),
                "ep_return": self.ep_return.clone(), "ep_length": self.ep_length.clone()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.load_state_dict(state["env"])
        torch.set_rng_state(state["torch_rng"])
        self.obs = {k: v.to(self.device) for k, v in state["obs"].items()}
        self.ep_return.copy_(state["ep_return"])
        self.ep_length.copy_(state["ep_length"])

    def ping(self) -> int:
        return self.worker_id

    def specs(self):
        """``(observation_spec, action_spec)`` of this worker's env, for building the learner."""
        return self.env.observation_spec, self.env.action_spec
