"""A checkpoint as a run writes it (the learner's state and the config), made without a run: for
the tests of what reads a policy back (tests/policy/, tests/cli/test_python_api.py,
tests/envs/test_air_combat_envelope.py; imported as ``policy_checkpoint``)."""

from __future__ import annotations

from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]

NAV = ["env.name=Navigation", "env.kwargs={num_static: 10, num_dynamic: 3, max_steps: 80}"]
"""A small Navigation (overrides of the default config)."""
AIR = ["env.name=AirCombat", "env.kwargs={time_scale: 8.0, max_time_s: 40.0}"]
"""A short AirCombat episode (overrides of the default config)."""


def env_checkpoint(run_dir: Path, overrides: list[str], version: int = 3) -> dict:
    """A checkpoint (at ``version``) of a freshly initialised policy for the env that ``overrides``
    configure, under ``run_dir/checkpoints``; returns its state."""
    from rl_system.algos import get_algorithm
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.config import load_config
    from rl_system.envs import make_env

    cfg = load_config(None, overrides)
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.kwargs)
    torch.manual_seed(0)
    policy = get_algorithm(cfg.algo).make_policy(env.observation_spec, env.action_spec, cfg)
    env.close()
    state = {"config": cfg.model_dump(), "learner": {"model": policy.state_dict(), "version": version}}
    CheckpointStore(str(run_dir / "checkpoints")).save(state, {"policy_version": version})
    return state


def write_policy_checkpoint(run_dir: Path, config: str, overrides: list[str] = (), observed: bool = False,
                            perturb: float = 0.0) -> Path:
    """``run_dir`` holding one checkpoint (version 0) of the learner that ``launch/configs/<config>``
    builds, its initial weights; ``observed``: its observation normaliser has seen data first;
    ``perturb``: that much Gaussian noise added to every weight (seeded)."""
    from rl_system.actors.learner import Learner
    from rl_system.checkpoint import CheckpointStore
    from rl_system.config import load_config
    from rl_system.envs import make_env

    cfg = load_config(str(REPO / "launch/configs" / config), list(overrides))
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.kwargs)
    spec, action_spec = env.observation_spec, env.action_spec
    env.close()
    learner = Learner(cfg, spec, action_spec)
    if observed:
        learner.policy.observe({k: 3 + 2 * torch.randn(64, *s.shape) for k, s in spec.items()})
    if perturb:
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in learner.policy.parameters():
                p.add_(perturb * torch.randn(p.shape, generator=g))
    CheckpointStore(str(run_dir / "checkpoints")).save({"learner": learner.state(), "config": cfg.model_dump()},
                                                       {"policy_version": 0, "env_steps": 0})
    return run_dir
