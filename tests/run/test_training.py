"""End to end on real local Ray: workers, object store, gate, learner, logs and summary."""

import json
from pathlib import Path

import pytest
from conftest import start_ray

from rl_system.config import load_config
from rl_system.observe.metrics import read_scalars
from rl_system.rollout.contract import RolloutMeta
from rl_system.run.collect import in_worker_order
from rl_system.run.loop import train


def test_cartpole_learns_with_two_workers(ray_session, tmp_path):
    cfg = load_config("launch/configs/cartpole_ppo.yaml",
                      ["target_return=195", "max_env_steps=600000", "return_window=50", "log_every_s=5"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary.reached_target, summary
    assert summary.final_mean_return >= 195
    assert summary.dropped_rollouts == 0 and summary.policy_version == summary.rounds
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["env_steps"] == summary.env_steps and on_disk["status"] == "completed"
    tags = scalar_tags(tmp_path / "tb")
    assert {"rollout/return_mean", "train/pg_loss", "train/approx_kl", "system/steps_per_s",
            "system/dropped_rollouts", "system/update_s"} <= tags, sorted(tags)
    assert all(t.split("/")[0] in ("rollout", "train", "system") for t in tags), sorted(tags)
    assert (tmp_path / "config.yaml").is_file()


def scalar_tags(tb_dir: Path) -> set[str]:
    """Every scalar tag in a directory of TensorBoard event files."""
    return set(read_scalars(tb_dir))


@pytest.mark.slow  # two whole runs
def test_one_version_behind_a_seed_repeats_bit_for_bit(ray_session, tmp_path):
    """Sampling overlaps the update (each worker samples its next rollout with the weights it was
    just given while the learner trains on the round): every rollout after the first round is
    exactly one version behind, whichever worker finishes first, so two runs of a seed keep the
    same weights and optimiser state at every checkpoint (bench/compare_runs.py)."""
    from bench.compare_runs import compare

    cfg = load_config("launch/configs/cartpole_ppo.yaml", [
        "seed=5", "max_policy_lag=1", "workers.rollout_len=16", "max_env_steps=16384", "target_return=null",
        "tensorboard=false", "checkpoint.every_rounds=2", "checkpoint.keep_last=100"])
    runs = [train(cfg, run_dir=tmp_path / name, quiet=True) for name in ("a", "b")]
    assert all(r.max_policy_lag_used == 1 and r.dropped_rollouts == 0 for r in runs), runs
    rows = compare(tmp_path / "a", tmp_path / "b")
    # Every second round saves (v2..v8); a save still queued when a newer one comes is skipped
    # (newest wins), which a loaded machine can do to either run. The run's end is never skipped.
    assert all(r.checkpoints.saved + r.checkpoints.skipped == 4 for r in runs), [r.checkpoints for r in runs]
    versions = [v for v, *_ in rows]
    assert set(versions) <= {2, 4, 6, 8} and versions[-1] == 8, [r.checkpoints for r in runs]
    assert all(steps > 0 and dw == 0.0 and do == 0.0 for _, steps, dw, do in rows), rows


@pytest.fixture(scope="module")
def brief_run(tmp_path_factory):
    """One short CartPole run that four tests read (a run's start-up costs seconds): its target
    recorded without stopping, a rollout archive every 4 rounds, its line on the status board, and
    sampling one version behind (lag 1) weighed by V-trace and the proximal anchor.
    5 rounds of 2 workers × 64 envs × 32 steps."""
    start_ray()
    run_dir = tmp_path_factory.mktemp("training") / "status-run"
    cfg = load_config("launch/configs/cartpole_ppo.yaml",
                      ["target_return=15", "stop_at_target=false", "return_window=20", "max_env_steps=20480",
                       "archive_every=4", "max_policy_lag=1", "ppo.value_target=vtrace",
                       "ppo.ratio_anchor=proximal"])
    return run_dir, train(cfg, run_dir=run_dir, quiet=True)


def test_policy_lag_one_overlaps_and_vtrace_and_the_proximal_anchor_weigh_what_the_lag_changed(brief_run):
    run_dir, summary = brief_run
    assert summary.max_policy_lag_used == 1  # in-flight rollouts from the previous version were used
    assert summary.env_steps >= 16384
    # One version behind: the learner's policy has moved since it sampled, so not every weight is 1.
    scalars = read_scalars(run_dir / "tb")
    for tag in ("train/vtrace_rho_mean", "train/proximal_rho_mean"):
        rho = scalars[tag]
        assert len(rho) == summary.rounds and any(abs(r - 1.0) > 1e-4 for _, r in rho), (tag, rho)
    assert "train/proximal_rho_clipped" in scalars


def test_target_is_recorded_without_stopping_when_asked(brief_run):
    _, summary = brief_run
    assert summary.reached_target and summary.steps_to_target < summary.env_steps
    assert summary.env_steps >= 20480  # ran on to the budget


def test_rollout_archive_every_k_rounds_and_inspect(brief_run):
    import subprocess
    import sys

    import pyarrow.feather as feather

    run_dir, summary = brief_run
    files = sorted((run_dir / "rollouts").glob("rollouts-r*.arrow"))
    assert summary.rounds == 20480 // (2 * 64 * 32)
    assert [f.name for f in files] == ["rollouts-r000000.arrow", "rollouts-r000004.arrow"]
    assert summary.archives_written == 2
    table = feather.read_table(files[1])
    # Round 4's rollouts: sampled with version 3, one behind (lag 1), while the learner trained on round 3's.
    assert table.num_rows == 2 * 64 * 32 and set(table["policy_version"].to_pylist()) == {3}
    out = subprocess.run([sys.executable, "-m", "rl_system", "rollouts", "inspect", str(files[1])],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "obs.obs" in out.stdout and "compression" in out.stdout


def test_status_command_reads_the_run_from_another_process(brief_run):
    import subprocess
    import sys

    import ray

    _, summary = brief_run
    assert summary.compression == ["none"]  # one node: `auto` ships rollouts uncompressed
    address = ray.get_runtime_context().gcs_address
    out = subprocess.run([sys.executable, "-m", "rl_system", "status", "--address", address],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if l.startswith("status-run:"))
    assert "completed" in line and "20,480 steps" in line


def test_a_rounds_rollouts_and_their_episode_stats_keep_worker_order_whatever_arrives_first():
    # The return window is filled from the metas in this order: arrival order would make steps to
    # target and the best checkpoint depend on which worker happened to finish first.
    def meta(w: int) -> RolloutMeta:
        return RolloutMeta(version=0, worker_id=w, env_steps=1, num_episodes=1, sample_s=0.0, fresh_process=False,
                           episode_returns=[float(w)])

    arrived = [(2, "ref-2", meta(2)), (0, "ref-0", meta(0)), (1, "ref-1", meta(1))]
    refs, metas = in_worker_order(arrived)
    assert refs == ["ref-0", "ref-1", "ref-2"]
    assert [m.episode_returns for m in metas] == [[0.0], [1.0], [2.0]]
