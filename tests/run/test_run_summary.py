"""``summary.json`` as :class:`RunSummary`: the JSON shape people and tools read (its keys, the
nested objects, one ``final_<outcome>_rate`` key per outcome) and the way back from it."""

from __future__ import annotations

import json

import pytest

from rl_system.run.summary import CheckpointTally, CpuSeconds, RunPlacement, RunSummary, TimeBreakdown, rate_key

# summary.json's keys, in the order a run writes them (before the outcome rates, which follow "episodes").
KEYS = ["status", "error", "checkpoints", "env", "algo", "seed", "env_steps", "rounds", "policy_version",
        "wall_time_s", "startup_s", "steps_per_s", "target_return", "reached_target", "time_to_target_s",
        "steps_to_target", "final_mean_return", "best_mean_return", "episodes", "dropped_rollouts",
        "rollouts_per_worker", "max_policy_lag_used", "worker_failures", "worker_restarts", "learner_restarts",
        "checkpointer_restarts", "archiver_restarts", "reseeds", "rollbacks", "bytes_shipped", "compression_ratio",
        "compression", "placement", "num_learners", "selfplay_pool_versions", "archives_written", "archives_skipped",
        "time_breakdown_s", "phases_s", "run_dir", "cpu_s"]


def _summary(means: dict[str, float] | None = None, **rates: float) -> RunSummary:
    return RunSummary(
        status="completed", error=None, checkpoints=CheckpointTally(saved=3, last_path="/r/checkpoints/ckpt.rlck"),
        env="AliceBob", algo="ppo", seed=0, env_steps=4096, rounds=2, policy_version=2, wall_time_s=1.5,
        startup_s=0.5, steps_per_s=2730.7, target_return=None, reached_target=False, time_to_target_s=None,
        steps_to_target=None, final_mean_return=0.25, best_mean_return=0.5, episodes=40, final_rates=rates,
        final_means=means or {},
        dropped_rollouts=0, rollouts_per_worker=[2, 2], max_policy_lag_used=0, worker_failures=0, worker_restarts=0,
        learner_restarts=0, checkpointer_restarts=0, archiver_restarts=0,
        reseeds=[{"env_steps": 2048, "round": 1, "seed": 7}], rollbacks=[], bytes_shipped=1000,
        compression_ratio=1.0, compression=["none"], placement=RunPlacement("n0", ["n0"], ["n0", "n0"]),
        num_learners=1, selfplay_pool_versions=None, archives_written=0, archives_skipped=0,
        time_breakdown_s=TimeBreakdown(gather=0.5, update=0.75, rounds=1.25), phases_s={"train": 1.25},
        run_dir="/r", cpu_s=CpuSeconds(workers=1.0, learner=0.5, total=1.5))


def test_the_json_holds_every_key_in_order_with_the_outcome_rates_after_the_episodes():
    out = _summary({"soups_served": 2.5}, success=0.75, win=0.5).to_json()
    at = KEYS.index("episodes") + 1
    assert list(out) == [*KEYS[:at], "final_success_rate", "final_win_rate", "final_soups_served_mean", *KEYS[at:]]
    assert list(_summary().to_json()) == KEYS
    assert out["checkpoints"] == {"saved": 3, "skipped": 0, "failed": 0, "last_error": None,
                                  "last_path": "/r/checkpoints/ckpt.rlck"}
    assert out["placement"] == {"learner": "n0", "learners": ["n0"], "workers": ["n0", "n0"]}
    assert out["time_breakdown_s"] == {"gather": 0.5, "update": 0.75, "rounds": 1.25}
    assert out["cpu_s"] == {"workers": 1.0, "learner": 0.5, "total": 1.5}
    assert out["reseeds"] == [{"env_steps": 2048, "round": 1, "seed": 7}] and rate_key("win") == "final_win_rate"


@pytest.mark.parametrize("rates", [{}, {"success": 0.75, "win": 0.5}])
@pytest.mark.parametrize("means", [{}, {"soups_served": 2.5}])
def test_a_summary_comes_back_from_its_json(rates, means):
    summary = _summary(means, **rates)
    assert RunSummary.from_json(json.loads(json.dumps(summary.to_json(), sort_keys=True))) == summary


def test_reading_back_a_json_without_a_key_names_the_key():
    data = _summary().to_json()
    del data["rounds"]
    with pytest.raises(TypeError, match="rounds"):
        RunSummary.from_json(data)
