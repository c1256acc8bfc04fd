"""The MinAtar peer (:mod:`bench.peers.sb3_minatar`) is the same learning problem as
``launch/configs/minatar_breakout_ppo.yaml``: the same network, parameter for parameter, and a
real SB3 training run that yields the row bench_minatar tabulates."""

from __future__ import annotations

import pytest

pytest.importorskip("minatar")
pytest.importorskip("stable_baselines3")

from bench.peers import sb3_minatar
from rl_system.algos import get_algorithm
from rl_system.config import load_config
from rl_system.envs import make_env

make_policy = get_algorithm("ppo").make_policy  # the factory over a run config
CONFIG = "launch/configs/minatar_breakout_ppo.yaml"


def _shapes(module) -> list[tuple[int, ...]]:
    return sorted(tuple(p.shape) for p in module.parameters())


@pytest.mark.parametrize("game", ["Breakout", "SpaceInvaders"])
def test_the_peer_has_rl_system_s_network_parameter_for_parameter(game):
    cfg = load_config(CONFIG, [f"env.name=gym:rl_system.envs.minatar_gym:MinAtar/{game}-v1"])
    env = make_env(cfg.env.name, 2, seed=0)
    try:
        ours = make_policy(env.observation_spec, env.action_spec, cfg)
    finally:
        env.close()
    peer = sb3_minatar.build(game, seed=0)
    try:
        assert _shapes(peer.policy) == _shapes(ours)
        assert peer.n_envs * peer.n_steps == cfg.workers.num_workers * cfg.workers.num_envs * cfg.workers.rollout_len
        assert peer.n_steps * peer.n_envs // peer.batch_size == cfg.ppo.num_minibatches
        assert (peer.n_epochs, peer.gamma, peer.gae_lambda, peer.ent_coef) == (
            cfg.ppo.num_epochs, cfg.ppo.gamma, cfg.ppo.gae_lambda, cfg.ppo.ent_coef)
        assert peer.lr_schedule(1.0) == pytest.approx(cfg.ppo.lr)
    finally:
        peer.get_env().close()


def test_a_short_peer_run_gives_a_curve_a_test_and_the_lr_of_a_longer_schedule():
    row = sb3_minatar.run("Breakout", 8192, seed=0, schedule_steps=16384, test_episodes=4)
    assert row["env_steps"] == 8192 and row["peer"] == "sb3_ppo"
    assert row["curve"] and row["curve"][-1][0] == 8192
    assert row["test"]["episodes"] == 4 and row["test"]["deterministic"]
    assert row["train_wall_s"] > 0 and row["train_cpu_s"] > 0


def test_the_learning_rate_follows_the_whole_budget_s_schedule():
    peer = sb3_minatar.build("Breakout", seed=0, lr_scale=0.2)  # a 1M run of a 5M schedule
    try:
        assert peer.lr_schedule(0.0) == pytest.approx(sb3_minatar.LR * 0.8)  # at its end: 1M of 5M
    finally:
        peer.get_env().close()


def _run(seed, final, peer="rl_system", overrides=(), threads=None):
    row = {"env": "Breakout", "seed": seed, "env_steps": 1000, "train_wall_s": 0.5, "final_return": final,
           "test": {"return_mean": final + 1}, "peer": peer,
           "overrides": ["env.name=x", "max_env_steps=1000", "checkpoint.every_rounds=0", *overrides]}
    if threads:
        row["threads"] = threads
    return row


def test_the_minatar_table_keeps_configs_and_systems_apart():
    from bench.bench_minatar import markdown

    stamp = {"date_utc": "d", "commit": "c", "cpu": "cpu", "cores": 2, "torch": "t", "ray": "r"}
    runs = [_run(1, 32.9), _run(0, 30.0), _run(0, 23.0, overrides=["learner.torch_threads=2"]),
            _run(0, 40.3, peer="sb3_ppo", threads=2)]
    rows = [line for line in markdown(stamp, runs, "cmd").splitlines() if line.startswith("| Breakout")]
    assert [r.split(" | ")[1:4] for r in rows] == [
        ["rl_system", "0 1", "1,000"], ["rl_system (learner.torch_threads=2)", "0", "1,000"],
        ["sb3_ppo (2 threads)", "0", "1,000"]]
    assert "30.0, 32.9" in rows[0] and "2,000, 2,000" in rows[0] and "DQN" in rows[0] and "DQN" not in rows[2]


def test_overrides_without_a_tag_are_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    import sys

    from bench import bench_minatar

    monkeypatch.setattr(sys, "argv", ["bench_minatar", "--set", "learner.torch_threads=2", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as err:
        bench_minatar.main()
    assert err.value.code == 2 and "--set needs --tag" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
