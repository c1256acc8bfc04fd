"""A PPO trainer and one round its own policy sampled, made without Ray: for the tests of what the
trainer derives from a batch (tests/algos/test_vtrace.py, tests/algos/test_decoupled_ppo.py; imported as
``sampled_batch``)."""

from __future__ import annotations

import torch

from rl_system.config import load_config


def sampled(config: str, overrides: list[str], num_envs: int = 8):
    """``(trainer, batch, cfg)``: ``config`` with ``overrides``, its policy seeded with 0, and one
    rollout of ``num_envs`` envs that policy sampled (``[T, N, ...]`` columns, cloned)."""
    from rl_system.algos import get_algorithm

    _PPO = get_algorithm("ppo")
    make_policy, make_sampler, make_trainer = _PPO.make_policy, _PPO.make_sampler, _PPO.make_trainer
    from rl_system.envs import make_env

    cfg = load_config(config, [f"workers.num_envs={num_envs}", *overrides])
    env = make_env(cfg.env.name, num_envs, "cpu", seed=0, **cfg.env.kwargs)
    torch.manual_seed(0)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(seed=0)
    cols, _ = sampler.collect()
    return make_trainer(policy, cfg), {k: v.clone() for k, v in cols.items()}, cfg
