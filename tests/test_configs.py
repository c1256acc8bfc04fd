"""Every shipped config under ``launch/configs/`` loads and trains briefly on real Ray.

A smoke test, not a learning test: each config runs as written except for its size (a few envs
per worker, two rounds, no time limit, no target, no periodic checkpoints), so a config whose
keys, env, network or algorithm settings no longer fit the code fails here in seconds. Whether
the configs *learn* to the end of their budgets is measured in docs/results.md ("Shipped configs
end healthy"), not here: that takes minutes per config.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rl_system.config import load_config
from rl_system.driver import train
from rl_system.metrics import read_scalars

CONFIG_DIR = Path(__file__).resolve().parent.parent / "launch" / "configs"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
ROUNDS = 2
NUM_ENVS = 4


def test_config_dir_is_not_empty():
    assert len(CONFIGS) >= 8, CONFIGS


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_trains_briefly(ray_session, tmp_path, path):
    full = load_config(path)
    round_steps = full.workers.num_workers * NUM_ENVS * full.workers.rollout_len
    budget = ROUNDS * round_steps
    cfg = load_config(path, [
        f"workers.num_envs={NUM_ENVS}",
        f"max_env_steps={budget}",
        "max_wall_s=null",
        "target_return=null",
        "checkpoint.every_rounds=0",
        "checkpoint.max_nonfinite_rounds=1",  # one round with a non-finite loss fails the run
        "tensorboard=true",                   # read back below: the losses every round logged
        "log_every_s=60",
    ])
    # Only the size changed: the algorithm, model and learning settings are the shipped ones.
    assert cfg.algo == full.algo and cfg.env.name == full.env.name
    assert cfg.model == full.model and cfg.ppo == full.ppo and cfg.hmasd == full.hmasd

    summary = train(cfg, run_dir=tmp_path, quiet=True)

    assert summary["status"] == "completed", summary.get("error")
    assert summary["env_steps"] >= budget and summary["rounds"] >= ROUNDS, summary
    assert summary["policy_version"] == summary["rounds"]
    assert summary["worker_failures"] == 0 and summary["dropped_rollouts"] == 0
    assert summary["cpu_s"]["workers"] > 0 and summary["cpu_s"]["learner"] > 0
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["status"] == "completed" and on_disk["env_steps"] == summary["env_steps"]

    train_scalars = _scalars(tmp_path / "tb", prefix="train/")
    losses = {tag: vals for tag, vals in train_scalars.items() if tag.endswith("loss")}
    assert losses, sorted(train_scalars)
    for tag, vals in losses.items():
        assert len(vals) >= ROUNDS and all(math.isfinite(v) for v in vals), (tag, vals)
    skipped = train_scalars.get("train/skipped_minibatches", [])
    assert all(v == 0 for v in skipped), skipped


def _scalars(tb_dir: Path, prefix: str) -> dict[str, list[float]]:
    """Every scalar under ``prefix`` in the run's TensorBoard files, in the order written."""
    return {tag: [v for _, v in points] for tag, points in read_scalars(tb_dir, prefix).items()}
