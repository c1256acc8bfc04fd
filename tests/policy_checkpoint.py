"""A checkpoint as a run writes it (the learner's state and the config), made without a run: for
the tests of what reads a policy back (tests/test_export.py, tests/test_python_api.py; imported as
``policy_checkpoint``)."""

from __future__ import annotations

from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


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
