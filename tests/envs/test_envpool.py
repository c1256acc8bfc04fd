"""``envpool:<id>``: EnvPool's synchronous pool behind the VecEnv API, its NEXT_STEP auto-reset
turned into the SAME_STEP one this system's samplers expect, checked step by step against a raw
pool; the conformance checker; bad ids; a PPO run through the whole system."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rl_system.cli.main import main
from rl_system.envs import make_env
from rl_system.envs.checker import check_env

envpool = pytest.importorskip("envpool")


def test_a_finished_env_starts_its_next_episode_in_the_same_step_as_a_raw_pool_does_one_step_later():
    n, seed = 6, 3
    env = make_env("envpool:CartPole-v1", n, seed=seed)
    raw = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=n, batch_size=n, num_threads=1, seed=seed)
    obs = env.reset()
    raw_obs, _ = raw.reset()
    assert torch.equal(obs["obs"], torch.as_tensor(raw_obs, dtype=torch.float32))
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(300):
        action = rng.integers(0, 2, n)
        out = env.step(torch.as_tensor(action))
        raw_obs, raw_reward, raw_term, raw_trunc, _ = raw.step(action)
        done = raw_term | raw_trunc
        # The step's result is the raw pool's: final observations, rewards and flags.
        assert torch.equal(out.final_obs["obs"], torch.as_tensor(raw_obs, dtype=torch.float32))
        assert torch.equal(out.reward, torch.as_tensor(raw_reward, dtype=torch.float32))
        assert torch.equal(out.terminated, torch.as_tensor(raw_term)) and torch.equal(out.truncated, torch.as_tensor(raw_trunc))
        expected = raw_obs.copy()
        if done.any():
            ended += int(done.sum())
            # The raw pool resets finished envs on its next step (their actions ignored): step only those.
            first, reward, term, trunc, info = raw.step(np.zeros(int(done.sum()), np.int32), env_id=np.flatnonzero(done))
            assert not (term | trunc).any() and not reward.any()
            expected[info["env_id"]] = first
            assert not torch.equal(out.obs["obs"][done], out.final_obs["obs"][done])
        assert torch.equal(out.obs["obs"], torch.as_tensor(expected, dtype=torch.float32))
    assert ended >= 10
    env.close()
    raw.close()


def test_truncation_gives_the_final_observation_and_a_reseeded_reset_repeats_the_episode():
    env = make_env("envpool:HalfCheetah-v5", 3, seed=0, max_episode_steps=5)
    first = env.reset(seed=7)["obs"].clone()
    action = torch.zeros(3, 6)
    for t in range(5):
        out = env.step(action)
    assert out.truncated.all() and not out.terminated.any()
    assert not torch.equal(out.obs["obs"], out.final_obs["obs"])
    assert torch.equal(env.reset(seed=7)["obs"], first)  # the pool is rebuilt with that seed
    assert not torch.equal(env.reset(seed=8)["obs"], first)
    env.close()


@pytest.mark.parametrize("name,kwargs", [("envpool:CartPole-v1", {}), ("envpool:Hopper-v5", {"max_episode_steps": 30})])
def test_envpool_tasks_conform(name, kwargs):
    findings = check_env(name, num_envs=4, kwargs=kwargs, steps=120)
    assert not [f.line() for f in findings if f.failed]
    autoreset = next(f for f in findings if f.check == "autoreset")
    assert autoreset.status == "PASS", autoreset.line()


@pytest.mark.parametrize("setting,expected", [
    ("env.name=envpool:Hoper-v5", "unknown EnvPool task 'Hoper-v5'; did you mean Hopper-v5"),
    ("env.kwargs={batch_size: 2}", "batch_size is not a setting here"),
])
def test_a_bad_envpool_setting_is_one_config_error_line_and_exit_2(capsys, tmp_path, setting, expected):
    code = main(["train", "launch/configs/hopper_ppo.yaml", "--set", "env.name=envpool:Hopper-v5", "--set", setting,
                 "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_ppo_learns_cartpole_on_envpool_workers(ray_session, capsys, tmp_path):
    run = tmp_path / "run"
    code = main(["train", "launch/configs/cartpole_ppo.yaml", "--run-dir", str(run), "--quiet",
                 "--set", "env.name=envpool:CartPole-v1", "--set", "max_env_steps=150000",
                 "--set", "target_return=150", "--set", "tensorboard=false"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["dropped_rollouts"] == 0 and summary["reached_target"], summary
