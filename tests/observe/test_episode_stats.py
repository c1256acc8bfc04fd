"""An env's numeric episode stats (``VecEnv.episode_stats``, Overcooked's ``soups_served``): read on
each episode's last step, averaged over the return window beside the boolean outcomes' rates, in
TensorBoard, the run's summary and ``rl-system eval``."""

from __future__ import annotations

import json

import pytest
import torch

from rl_system.algos.episodes import EpisodeTracker
from rl_system.observe.metrics import ReturnWindow


def test_a_stat_is_read_on_the_step_its_episode_ends():
    tracker = EpisodeTracker(4, 3, torch.device("cpu"), stats=("soups_served",))
    done = [[False, True, False], [True, False, False], [False, False, False], [False, True, True]]
    for t in range(4):
        served = torch.tensor([10.0 * t, 10.0 * t + 1, 10.0 * t + 2])
        tracker.record(t, torch.ones(3), torch.tensor(done[t]), {"soups_served": served,
                                                                  "success": torch.tensor(done[t])})
    ended = tracker.completed()
    assert ended.outcomes["soups_served"].tolist() == [1.0, 10.0, 31.0, 32.0]  # in time order, env 1, 0, 1, 2
    assert ended.outcomes["soups_served"].dtype == torch.float32 and ended.outcomes["success"].dtype == torch.bool
    with pytest.raises(KeyError, match="episode_stats names 'soups_served'.*holds \\['success'\\]"):
        tracker.record(0, torch.ones(3), torch.zeros(3, dtype=torch.bool), {"success": torch.zeros(3, dtype=bool)})


def test_the_window_keeps_rates_and_means_apart():
    window = ReturnWindow(3)
    window.extend([1.0, 2.0], [5, 5], 2, {"success": [True, False], "soups_served": [2.0, 4.0]})
    window.extend([3.0, 4.0], [5, 5], 2, {"success": [True, True], "soups_served": [6.0, 8.0]})
    assert window.rates == {"success": pytest.approx(2 / 3)} and window.means == {"soups_served": 6.0}
    assert window.outcome_scalars == {"success_rate": pytest.approx(2 / 3), "soups_served_mean": 6.0}


def test_overcooked_soups_reach_tensorboard_the_summary_and_eval(ray_session, tmp_path, capsys):
    """Eight-step kitchens, so episodes end within a round. No soup fits in eight steps: the
    delivery-only return (+20 a soup) is 20 x the soups, 0 = 0 here; the reading is proved above."""
    from rl_system import train
    from rl_system.cli.main import main
    from rl_system.config import load_config
    from rl_system.observe.metrics import read_scalars

    cfg = load_config("launch/configs/overcooked_cramped_room_mappo.yaml", [
        "env.kwargs={layout: cramped_room, horizon: 8}", "workers.num_workers=1", "workers.num_envs=4",
        "workers.rollout_len=16", "hmasd.num_epochs=1", "hmasd.hidden=16", "max_env_steps=128",
        "learner.torch_threads=1", "checkpoint.every_rounds=1"])
    result = train(cfg, run_dir=tmp_path / "run")
    assert result.summary["final_soups_served_mean"] == 0.0 and result.final_mean_return == 0.0
    scalars = read_scalars(tmp_path / "run" / "tb")
    assert [v for _, v in scalars["rollout/soups_served_mean"]] == [0.0, 0.0]
    out = tmp_path / "eval.json"
    assert main(["eval", str(tmp_path / "run"), "--episodes", "8", "--json", str(out)]) == 0
    assert ", soups_served 0.00 ± 0.00 over 8 episodes" in capsys.readouterr().out
    got = json.loads(out.read_text())
    assert got["soups_served_mean"] == got["soups_served_std"] == 0.0 and "soups_served_rate" not in got
