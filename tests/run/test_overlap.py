"""Collection overlapped with the update (``max_policy_lag: 1``) and a slow worker.

``workers.wait_for: all`` takes exactly one rollout per worker per round, so a lag-1 run is the same
run whatever the timing: a worker made slow (an env that sleeps every step) changes nothing in the
weights it ends with. ``any`` takes the first rollouts from whichever workers deliver, so a slow
worker does not hold the rounds back: the fast one delivers most of them. A mode the lag cannot
honour is one config-error line, before anything starts."""

from __future__ import annotations

import pytest
import torch

import rl_system
from rl_system.cli.main import main
from rl_system.config import ConfigError

BASE = ["env.name=Chaos", "workers.num_workers=2", "workers.num_envs=16", "workers.rollout_len=16",
        "model.hidden_sizes=[32]", "ppo.num_epochs=2", "max_env_steps=6144", "tensorboard=false",
        "checkpoint.every_rounds=0", "max_policy_lag=1"]


def _run(tmp_path, name: str, *overrides: str) -> dict:
    return rl_system.train({}, overrides=[*BASE, *overrides], run_dir=tmp_path / name).summary


def _weights(tmp_path, name: str) -> dict[str, torch.Tensor]:
    return rl_system.load_policy(tmp_path / name, pick="final").network.state_dict()


def test_a_lag_1_run_is_the_same_run_whichever_worker_is_slow(ray_session, tmp_path):
    """Worker 1 sleeps 3 ms per env step in one run, worker 0 in the other: each rollout of the slow
    worker takes ~50 ms, long enough for the fast one to deliver its next rollout first. Both runs
    train on the same rollouts at lag 1 and end with bit-identical weights."""
    slow = "env.kwargs={sleep_s: 0.003, slow_seeds: [%d]}"
    a = _run(tmp_path, "a", slow % 1)
    b = _run(tmp_path, "b", slow % 0)
    for s in (a, b):
        assert s["status"] == "completed" and s["dropped_rollouts"] == 0 and s["max_policy_lag_used"] == 1
        assert s["rollouts_per_worker"] == [s["rounds"], s["rounds"]]  # one from each, every round
    wa, wb = _weights(tmp_path, "a"), _weights(tmp_path, "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a["final_mean_return"] == b["final_mean_return"]


def test_with_wait_for_any_a_slow_worker_does_not_hold_the_rounds_back(ray_session, tmp_path):
    """Worker 1 sleeps 20 ms per env step (a rollout takes over 0.3 s); worker 0 delivers while
    it sleeps. The run takes the first two rollouts of each round from whoever has them: worker 0
    delivers most, and worker 1's late ones are dropped by the gate (lag 1) and re-requested."""
    s = _run(tmp_path, "any", "workers.wait_for=any", "env.kwargs={sleep_s: 0.02, slow_seeds: [1]}")
    fast, slow = s["rollouts_per_worker"]
    assert s["status"] == "completed" and s["env_steps"] >= 6144
    assert fast + slow == 2 * s["rounds"]
    assert fast >= 4 * max(slow, 1), s["rollouts_per_worker"]


def test_wait_for_any_without_lag_is_one_config_error_line(tmp_path, capsys):
    with pytest.raises(ConfigError, match="^workers.wait_for: any"):
        rl_system.as_config({}, ["workers.wait_for=any"])
    assert main(["train", "launch/configs/cartpole_ppo.yaml", "--run-dir", str(tmp_path / "r"),
                 "--set", "workers.wait_for=any"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "config error: workers.wait_for: any" in err and "max_policy_lag" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow  # two HMASD runs
def test_hmasd_at_lag_1_is_the_same_run_whichever_worker_is_slow(ray_session, tmp_path):
    """HMASD gets the same mode: its rollouts (skills chosen every k steps, both levels' log-
    probabilities) one version behind, the same rollouts in every round whatever the timing."""
    from bench.bench_hmasd import SMALL_MAP_SKILLS
    from rl_system.checkpoint import find_resume

    skills = [o for o in SMALL_MAP_SKILLS if not o.startswith("env.")]
    hmasd = ["env.name=Chaos", "env.eval_kwargs={}", "workers.num_envs=8", "workers.rollout_len=50",
             "hmasd.skill_interval=10", "hmasd.num_minibatches=3", "hmasd.num_epochs=2", "max_env_steps=6400",
             "tensorboard=false", "checkpoint.every_rounds=0", "max_policy_lag=1", "learner.torch_threads=1", *skills]
    inner = "{size: small, own_position: true, random_start: false}"
    runs = []
    for slow in (1, 0):
        env = f"env.kwargs={{env: AliceBob, env_kwargs: {inner}, sleep_s: 0.003, slow_seeds: [{slow}]}}"
        runs.append(rl_system.train("launch/configs/alice_bob_hmasd.yaml", [*hmasd, env], run_dir=tmp_path / f"s{slow}"))
    for r in runs:
        assert r.status == "completed" and r.summary["dropped_rollouts"] == 0
        assert r.summary["max_policy_lag_used"] == 1 and r.summary["rollouts_per_worker"] == [r.rounds] * 2
    a, b = (find_resume(str(r.final_checkpoint), rl_system.as_config({}), None).state["learner"]["model"] for r in runs)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
