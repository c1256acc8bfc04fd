"""End to end on real local Ray: workers, object store, gate, learner, logs and summary."""

import json

from rl_system.config import load_config
from rl_system.driver import train


def test_cartpole_learns_with_two_workers(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml",
                      ["target_return=195", "max_env_steps=600000", "return_window=50", "log_every_s=5"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary["reached_target"], summary
    assert summary["final_mean_return"] >= 195
    assert summary["dropped_rollouts"] == 0 and summary["policy_version"] == summary["rounds"]
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["env_steps"] == summary["env_steps"] and on_disk["status"] == "completed"
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir())
    assert (tmp_path / "config.yaml").is_file()


def test_policy_lag_one_overlaps_and_reports_lag(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml",
                      ["max_policy_lag=1", "max_env_steps=100000", "target_return=null", "tensorboard=false"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary["max_policy_lag_used"] == 1  # in-flight rollouts from the previous version were used
    assert summary["env_steps"] >= 100000
