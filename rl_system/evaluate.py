"""Evaluation: run a checkpoint's policy without training and report episode statistics.

Runs in-process (no Ray needed): builds the env named in the checkpoint's config, steps
``num_envs`` copies until ``episodes`` episodes have finished, and reports mean ± std of the
return and length. Episodes are counted in the order they finish; with many envs the first
``episodes`` to finish are slightly biased to short ones, so by default each env contributes
at most ``ceil(episodes / num_envs)`` episodes.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from envs import make_env
from rl_system.config import RunConfig
from rl_system.policy import ActorCritic


@torch.no_grad()
def evaluate(state: dict[str, Any], episodes: int = 100, deterministic: bool = False, num_envs: int | None = None,
             seed: int = 12345, device: str = "cpu", max_steps: int = 1_000_000) -> dict[str, Any]:
    cfg = RunConfig.model_validate(state["config"])
    n = num_envs or min(episodes, 64)
    per_env = math.ceil(episodes / n)
    torch.manual_seed(seed)
    env = make_env(cfg.env.name, n, device, seed=seed, **cfg.env.kwargs)
    try:
        policy = ActorCritic(env.observation_spec, env.action_spec, cfg.model).to(device)
        policy.load_state_dict(state["learner"]["model"])
        policy.eval()
        ret = torch.zeros(n, dtype=torch.float64)
        length = torch.zeros(n, dtype=torch.int64)
        counts = torch.zeros(n, dtype=torch.int64)
        returns, lengths = [], []
        obs, steps, t0 = env.reset(seed=seed), 0, time.perf_counter()
        while len(returns) < episodes and steps < max_steps:
            action, _, _ = policy.act(obs, deterministic=deterministic)
            out = env.step(action)
            ret += out.reward.double().cpu()
            length += 1
            done = (out.terminated | out.truncated).cpu()
            take = done & (counts < per_env)
            returns += ret[take].tolist()
            lengths += length[take].tolist()
            counts += take.long()
            ret[done], length[done] = 0.0, 0
            obs, steps = out.obs, steps + n
    finally:
        env.close()
    returns, lengths = returns[:episodes], lengths[:episodes]
    r, l = torch.tensor(returns, dtype=torch.float64), torch.tensor(lengths, dtype=torch.float64)
    return {
        "env": cfg.env.name, "policy_version": int(state["learner"]["version"]),
        "episodes": len(returns), "deterministic": deterministic,
        "return_mean": float(r.mean()) if returns else None, "return_std": float(r.std(unbiased=False)) if returns else None,
        "length_mean": float(l.mean()) if lengths else None, "length_std": float(l.std(unbiased=False)) if lengths else None,
        "env_steps": steps, "wall_s": time.perf_counter() - t0,
    }
