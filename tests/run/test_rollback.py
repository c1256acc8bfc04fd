"""Rollback on collapse (``RollbackConfig``): a run whose return falls far below its best goes
back to its best checkpoint with a smaller learning rate; a run where it never fires is the run
without it. Its bad settings are in tests/cli/test_config.py with every other key's."""

import json

import pytest
import torch

from rl_system.checkpoint import CheckpointStore
from rl_system.cli.main import main

EXAMPLE = "examples/grid_reach/config.yaml"
# One worker of 128 envs x 32 steps: the example's 4,096 env steps a round, one actor start less a run.
COMMON = ["--set", "tensorboard=false", "--set", "log_every_s=30", "--set", "checkpoint.every_rounds=1",
          "--set", "stop_at_target=false", "--set", "return_window=50", "--set", "workers.num_workers=1",
          "--set", "workers.num_envs=128"]


def _train(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["train", EXAMPLE, *COMMON, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _weights(run, name: str) -> dict[str, torch.Tensor]:
    state, _ = CheckpointStore(str(run / "checkpoints"), clean=False).load(name)
    return state["learner"]["model"]


def test_a_collapsed_run_goes_back_to_its_best_checkpoint_with_a_smaller_step(ray_session, capsys, tmp_path):
    # GridReach learns for 10 rounds; then the same run resumes with its episodes cut to one step,
    # so every return collapses (a goal is rarely one step away) whatever the policy does.
    run = tmp_path / "run"
    code, _, err = _train(capsys, "--run-dir", str(run), "--set", "max_env_steps=40960")
    assert code == 0, err
    best = json.loads((run / "checkpoints" / "best.json").read_text())
    assert best["manifest"]["mean_return"] > 0.8, best  # what the collapse falls from
    code, out, err = _train(capsys, "--resume", str(run), "--set", "max_env_steps=61440",
                            "--set", "env.kwargs.max_steps=1", "--set", "rollback.drop=0.3",
                            "--set", "rollback.max_rollbacks=2")
    assert code == 0, err
    summary = json.loads((run / "summary.json").read_text())
    backs = summary["rollbacks"]
    assert len(backs) == 2 and out.count("rollback on collapse: mean return") == 2, out
    assert [b["lr_scale"] for b in backs] == [0.5, 0.25]
    # The round after the first rollback settles (its episodes began under the collapsed policy
    # and stay out of the window); the next full window collapses again.
    assert backs[1]["round"] - backs[0]["round"] == 2
    assert all(b["to_env_steps"] == best["manifest"]["env_steps"] for b in backs)
    assert all(b["mean_return"] < b["best_return"] - 0.3 for b in backs)
    assert "rolled back on collapse at" in out
    assert summary["env_steps"] == 61440 and summary["status"] == "completed"
    assert summary["policy_version"] == summary["rounds"] + 2  # each rollback is one more version
    # The newest checkpoint carries both: the run resumes with the smaller step and its rollbacks.
    state, _ = CheckpointStore(str(run / "checkpoints"), clean=False).load_latest_valid()[:2]
    assert state["learner"]["lr_scale"] == 0.25 and len(state["driver"]["rollbacks"]) == 2


@pytest.mark.slow  # two runs compared bit for bit
def test_a_guard_that_never_fires_leaves_the_run_as_it_was(ray_session, capsys, tmp_path):
    argv = ["--set", "max_env_steps=12288", "--set", "seed=3"]
    code, _, err = _train(capsys, "--run-dir", str(tmp_path / "plain"), *argv)
    assert code == 0, err
    code, _, err = _train(capsys, "--run-dir", str(tmp_path / "guarded"), *argv, "--set", "rollback.drop=100")
    assert code == 0, err
    name = "ckpt-v00000003.rlck"
    plain, guarded = _weights(tmp_path / "plain", name), _weights(tmp_path / "guarded", name)
    assert plain.keys() == guarded.keys() and all(torch.equal(plain[k], guarded[k]) for k in plain)
    assert json.loads((tmp_path / "guarded" / "summary.json").read_text())["rollbacks"] == []
