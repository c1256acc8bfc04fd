"""Failures survived, on real local Ray: dead and raising workers, a dead learner, NaN losses,
resume (bit-exact for one worker on CPU), corrupt checkpoints, and eval of a checkpoint."""

import shutil
import threading
import time
from pathlib import Path

import pytest
import ray
import torch
from conftest import start_ray

from rl_system.checkpoint import load_checkpoint
from rl_system.checkpoint.resume import find_resume
from rl_system.checkpoint.store import CheckpointStore
from rl_system.config import load_config
from rl_system.policy.evaluation import evaluate
from rl_system.run.loop import RunLoop, TrainingError, train

FAST = ["tensorboard=false", "log_every_s=30"]


def _killer(name: str, times: int, every_s: float, stop: threading.Event, started: "Path"):
    """Kill the named actor `times` times (Ray restarts it), like a node OOM-killing a process.
    Starts once `started` exists, i.e. training is under way."""
    def run():
        while not stop.is_set() and not started.exists():
            time.sleep(0.1)
        for _ in range(times):
            if stop.is_set():
                return
            try:
                ray.kill(ray.get_actor(name), no_restart=False)
            except ValueError:
                pass  # restarting right now
            stop.wait(every_s)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.slow
def test_killed_workers_are_restarted_and_training_reaches_threshold(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
        "target_return=195", "return_window=50", "max_env_steps=1500000", "workers.max_restarts=-1",
        "checkpoint.every_rounds=2"])
    stop = threading.Event()
    killer = _killer("rollout-worker-1", times=3, every_s=1.5, stop=stop, started=tmp_path / "checkpoints" / "latest.json")
    try:
        summary = train(cfg, run_dir=tmp_path, quiet=True)
    finally:
        stop.set()
        killer.join()
    assert summary.reached_target, summary
    assert summary.worker_restarts >= 1
    assert summary.dropped_rollouts == 0 and summary.policy_version == summary.rounds


@pytest.fixture(scope="module")
def troubled_run(tmp_path_factory):
    """One run that two tests read (a run's start-up costs seconds): its env raises once, and a
    regular file stands where its checkpoint directory should be."""
    start_ray()
    root = tmp_path_factory.mktemp("troubled")
    blocker = root / "not-a-dir"
    blocker.write_text("a regular file where the checkpoint directory should be")
    cfg = load_config(None, FAST + ["env.name=Chaos", "env.kwargs={env: CartPole, raise_at_step: 20}",
                                    "workers.num_workers=1", "workers.num_envs=16", "max_env_steps=4096",
                                    "checkpoint.every_rounds=2", f"checkpoint.dir={blocker / 'checkpoints'}"])
    return train(cfg, run_dir=root / "run", quiet=True)


def test_env_raising_is_reported_and_rollout_re_requested(troubled_run):
    summary = troubled_run
    assert summary.status == "completed"
    assert summary.worker_failures == 1  # the worker's env raised once; its rollout was asked again
    assert summary.env_steps >= 4096 and summary.policy_version == summary.rounds


def test_nan_losses_stop_the_run_with_a_checkpoint(ray_session, tmp_path):
    cfg = load_config(None, FAST + ["env.name=Chaos", "env.kwargs={env: CartPole, nan_reward_at_step: 40}",
                                    "workers.num_workers=1", "workers.num_envs=16", "checkpoint.max_nonfinite_rounds=2"])
    with pytest.raises(TrainingError, match="non-finite loss or gradients in 2 rounds"):
        train(cfg, run_dir=tmp_path, quiet=True)
    state, manifest = load_checkpoint(str(sorted((tmp_path / "checkpoints").glob("*.rlck"))[-1]))
    assert all(torch.isfinite(v).all() for v in state["learner"]["model"].values())
    # Rounds 1 and 2 were clean (40 steps at T=16 is inside round 3), rounds 3 and 4 skipped every step.
    assert manifest["policy_version"] == 4 and state["learner"]["skipped_updates"] == 2 * 4 * 4


def _final_weights(run_dir):
    state, _, _ = CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()
    return state


RESUME = FAST + ["workers.num_workers=1", "workers.num_envs=32", "workers.rollout_len=16", "target_return=null",
                 "max_env_steps=3584", "checkpoint.every_rounds=6", "checkpoint.keep_last=10"]  # 7 rounds of 32 × 16


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """A 7-round run with checkpoints at versions 6 and 7, read by the resume and corrupt-file tests."""
    start_ray()
    run_dir = tmp_path_factory.mktemp("resilience") / "a"
    train(load_config("launch/configs/cartpole_ppo.yaml", RESUME), run_dir=run_dir, quiet=True)
    return run_dir


def test_resume_after_round_k_matches_uninterrupted_run(uninterrupted, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", RESUME)
    full = _final_weights(uninterrupted)
    assert full["learner"]["version"] == 7

    round_6 = find_resume(str(uninterrupted / "checkpoints" / "ckpt-v00000006.rlck"), cfg, None)
    assert round_6.state["workers"] is not None  # env + RNG state captured: exact resume
    RunLoop(cfg, tmp_path / "b", log_level="warning", resume_state=round_6.state).run()
    resumed = _final_weights(tmp_path / "b")
    assert resumed["learner"]["version"] == 7
    for key, value in full["learner"]["model"].items():
        assert torch.equal(value, resumed["learner"]["model"][key]), key
    assert resumed["driver"]["env_steps"] == full["driver"]["env_steps"]


def test_resume_latest_skips_a_corrupt_newest_checkpoint(uninterrupted, tmp_path):
    shutil.copytree(uninterrupted / "checkpoints", tmp_path / "checkpoints")  # the shared run stays whole
    files = sorted((tmp_path / "checkpoints").glob("*.rlck"))
    assert [f.name for f in files] == ["ckpt-v00000006.rlck", "ckpt-v00000007.rlck"]
    newest = files[-1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    found = find_resume("latest", load_config("launch/configs/cartpole_ppo.yaml", RESUME), tmp_path)
    assert found.path.endswith(files[-2].name)
    assert found.skipped and newest.name in found.skipped[0][0]


def test_dead_learner_past_its_restarts_ends_run_clearly_and_resume_latest_continues(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
        "target_return=null", "max_env_steps=3000000", "checkpoint.every_rounds=2", "workers.num_workers=1",
        "workers.num_envs=64", "workers.rollout_len=16", "learner.max_restarts=0"])
    stop = threading.Event()

    def kill_learner():
        # Wait until a checkpoint exists, then kill the learner process outright.
        while not stop.is_set() and not list((tmp_path / "checkpoints").glob("*.rlck")):
            time.sleep(0.2)
        ray.kill(ray.get_actor("learner"), no_restart=True)

    t = threading.Thread(target=kill_learner, daemon=True)
    t.start()
    with pytest.raises(TrainingError, match=r"the learner died .*learner.max_restarts \(0\) used up"):
        train(cfg, run_dir=tmp_path, quiet=True)
    stop.set()
    t.join()
    found = find_resume("latest", cfg, tmp_path)
    version = found.state["learner"]["version"]
    assert version >= 2
    cfg2 = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
        "target_return=null", f"max_env_steps={found.state['driver']['env_steps'] + 2 * 64 * 16}",
        "workers.num_workers=1", "workers.num_envs=64", "workers.rollout_len=16"])
    summary = RunLoop(cfg2, tmp_path, log_level="warning", resume_state=found.state).run()
    assert summary.status == "completed" and summary.policy_version == version + 2


@pytest.mark.slow
def test_eval_on_a_checkpoint(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + ["target_return=150", "return_window=20"])
    train(cfg, run_dir=tmp_path, quiet=True)
    state = _final_weights(tmp_path)
    result = evaluate(state, episodes=20, deterministic=True, num_envs=8)
    assert result["episodes"] == 20 and result["return_mean"] >= 150
    assert result["length_mean"] == result["return_mean"]  # CartPole: reward 1 per step


def test_unwritable_checkpoint_dir_is_reported_and_training_goes_on(troubled_run):
    summary = troubled_run
    assert summary.status == "completed" and summary.env_steps >= 4096
    assert summary.checkpoints.saved == 0 and summary.checkpoints.failed >= 1
    assert summary.checkpoints.last_error
    assert "\n" not in summary.checkpoints.last_error


def test_sigterm_flushes_checkpoints_and_exits_cleanly(tmp_path):
    import json
    import signal
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rl_system", "train", "launch/configs/cartpole_ppo.yaml", "--quiet",
         "--run-dir", str(run_dir), "--set", "target_return=null", "--set", "max_env_steps=100000000",
         "--set", "checkpoint.every_rounds=5", "--set", "tensorboard=false", "--set", "workers.num_workers=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "checkpoints" / "latest.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "rl-system: interrupted"
    assert "Traceback" not in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert summary["checkpoints"]["saved"] >= 1 and summary["checkpoints"]["failed"] == 0
    found = find_resume(str(run_dir), load_config("launch/configs/cartpole_ppo.yaml"), None)
    assert found.state["learner"]["version"] >= 5


def test_a_checkpointer_slow_to_start_loses_no_checkpoint_of_a_fast_run(ray_session, tmp_path, monkeypatch):
    """Saves sent to a checkpointer still starting would queue and run in any order on its thread
    pool, and one that runs after a newer one is skipped: the run waits for it before round 1."""
    import slow_start
    from ray import cloudpickle

    import rl_system.run.storage

    cloudpickle.register_pickle_by_value(slow_start)  # tests/ is not on the actor's path
    monkeypatch.setattr(rl_system.run.storage, "Checkpointer", slow_start.SlowCheckpointer)
    cfg = load_config("launch/configs/cartpole_ppo.yaml", FAST + [
        "workers.num_workers=1", "workers.num_envs=16", "workers.rollout_len=16", "max_env_steps=2048",
        "target_return=null", "checkpoint.every_rounds=2", "checkpoint.keep_last=100"])  # 8 rounds of 256 steps
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("*.rlck"))
    assert names == [f"ckpt-v{v:08d}.rlck" for v in (2, 4, 6, 8)], (names, summary.checkpoints)
    assert summary.checkpoints.skipped == 0
