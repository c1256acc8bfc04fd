"""The Python API (docs/python_api.md): the page's examples run as written, in order (the slow
set: they train CartPole to 475), and the same mechanisms on a small budget in the default set."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from policy_checkpoint import write_policy_checkpoint

import rl_system
from rl_system.config import ConfigError

REPO = Path(__file__).resolve().parents[2]
CARTPOLE = str(REPO / "launch/configs/cartpole_ppo.yaml")


def test_import_is_light_and_lists_the_api():
    import subprocess
    import sys

    code = "import sys, rl_system; print(sorted(set(sys.modules) & {'torch', 'ray'})); print(dir(rl_system))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "[]"
    assert {"train", "load_policy", "evaluate", "make_env", "as_config"} <= set(eval(out.splitlines()[1]))


def test_a_run_from_python_stops_on_its_callback_and_its_policy_acts_on_numpy_and_torch(ray_session, tmp_path):
    rounds = []
    # One worker: the API's run is the CLI's whatever its number of workers (one actor start less).
    result = rl_system.train(CARTPOLE, overrides=["tensorboard=false", "target_return=null", "workers.num_workers=1"],
                             run_dir=tmp_path, callbacks=[lambda info: rounds.append(info) or info.round >= 3])
    assert result.status == "stopped" and result.rounds == 3 and len(rounds) == 3
    assert [r.round for r in rounds] == [1, 2, 3]
    assert rounds[-1].env_steps == result.env_steps == 3 * 2048  # 64 envs × 32 steps
    assert "approx_kl" in rounds[-1].train and rounds[-1].policy_version == 3
    assert result.final_checkpoint is not None and result.final_checkpoint.is_file()
    assert result.summary["status"] == "stopped" and result.run_dir == tmp_path

    policy = rl_system.load_policy(tmp_path, pick="final")
    assert policy.version == 3 and not policy.recurrent
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    action, state = policy.act(obs, deterministic=True)
    assert isinstance(action, np.ndarray) and action.shape == (5,) and state is None
    torch_action, _ = policy.act(torch.as_tensor(obs), deterministic=True)
    assert torch.equal(torch_action, torch.as_tensor(action))  # the same greedy actions either way
    assert policy.act({"obs": obs}, deterministic=True)[0].tolist() == action.tolist()
    scores = rl_system.evaluate(tmp_path, episodes=8, pick="final", num_envs=8)
    assert scores["episodes"] == 8 and scores["checkpoint"].endswith(result.final_checkpoint.name)


def test_a_recurrent_policy_takes_and_returns_its_state(tmp_path):
    # A checkpoint as a run writes it, without a run: the policy side is what is tested here.
    write_policy_checkpoint(tmp_path, "cartpole_memory_ppo.yaml")
    policy = rl_system.load_policy(tmp_path, pick="final")
    assert policy.recurrent and policy.version == 0
    obs = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)  # positions only (velocities: false)
    a1, s1 = policy.act(obs)
    a2, s2 = policy.act(obs, state=s1)
    assert a1.shape == (3,) and s1.shape == s2.shape == (3, policy.network.state_size)
    assert not np.array_equal(s1, s2)  # the state moved on: a second step from it, not a first


@pytest.mark.parametrize("config,overrides,needle", [
    (CARTPOLE, ["workers.num_envs=-1"], "workers.num_envs"),
    ({"algo": "nope"}, [], "algo"),
    (42, [], "config: expected a YAML path, a dict or a RunConfig"),
])
def test_a_bad_config_is_one_config_error_before_anything_starts(config, overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        rl_system.train(config, overrides=overrides)


def test_load_policy_refuses_what_is_not_a_policy_in_one_line(tmp_path):
    junk = tmp_path / "ckpt-v00000001.rlck"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot load a policy from"):
        rl_system.load_policy(junk)
    with pytest.raises(ValueError, match="pick must be"):
        rl_system.load_policy(tmp_path, pick="worst")


def test_a_resume_target_without_a_checkpoint_fails_in_one_line_before_ray(tmp_path, capsys):
    """The CLI is the API's run with exit codes: the same ResumeError, exit 1 and one line."""
    import ray

    from rl_system.cli.main import main
    from rl_system.errors import ResumeError

    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    started = ray.is_initialized()
    with pytest.raises(ResumeError, match="^cannot resume: "):
        rl_system.train(CARTPOLE, resume=tmp_path / "empty")
    assert main(["train", CARTPOLE, "--resume", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("rl-system: cannot resume: ")
    assert ray.is_initialized() == started  # nothing was started for it


@pytest.mark.slow  # trains CartPole to 475 twice, evaluates and resumes
def test_the_pages_examples_run_as_written(ray_session, tmp_path, monkeypatch):
    page = (REPO / "docs" / "python_api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) >= 5
    (tmp_path / "launch").symlink_to(REPO / "launch")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/python_api.md", "exec"), namespace)  # noqa: S102 - our own page
    assert namespace["result"].reached_target and namespace["scores"]["return_mean"] > 100


@pytest.mark.slow  # trains CartPole to 475 and evaluates it
def test_the_readme_example_runs_as_written(ray_session, tmp_path, monkeypatch):
    (block,) = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)
    (tmp_path / "launch").symlink_to(REPO / "launch")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own page
    assert namespace["result"].reached_target and namespace["report"]["return_mean"] > 100
    assert namespace["policy"] is not None
