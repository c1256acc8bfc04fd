"""Self-play: the snapshot pool's choices, a worker driving the opponent with a frozen snapshot,
and a real training run whose workers play earlier versions of the policy."""

import pytest
import ray
import torch

from rl_system.actors.worker import RolloutWorker
from rl_system.algos.selfplay import SnapshotOpponent, SnapshotPool
from rl_system.config import ConfigError, SelfPlayConfig, load_config
from rl_system.run.loop import train

AIR = ["env.name=AirCombat", "workers.num_workers=2", "workers.num_envs=32", "workers.rollout_len=16",
       "model.hidden_sizes=[32]", "tensorboard=false", "target_return=null", "checkpoint.every_rounds=0"]


def test_pool_keeps_newest_and_picks_by_probability():
    pool = SnapshotPool(SelfPlayConfig(enabled=True, pool_size=3, latest_prob=1.0, scripted_prob=0.0), seed=0)
    assert pool.pick() == SnapshotPool.SCRIPTED  # empty pool: the scripted opponent
    for v in range(1, 6):
        pool.add(v, f"ref{v}")
    assert [v for v, _ in pool.snapshots] == [3, 4, 5]
    assert {pool.pick()[0] for _ in range(50)} == {5}
    pool.cfg = SelfPlayConfig(enabled=True, pool_size=3, latest_prob=0.0, scripted_prob=0.5)
    picks = [pool.pick()[0] for _ in range(2000)]
    assert 0.4 < picks.count(-1) / len(picks) < 0.6  # scripted about half of the time
    assert set(picks) == {-1, 3, 4, 5}  # the rest uniform over the pool
    assert pool.due(10) and not pool.due(7) and not SnapshotPool(SelfPlayConfig(), 0).due(10)


def test_pool_state_round_trip(ray_session):
    cfg = SelfPlayConfig(enabled=True, pool_size=2)
    pool = SnapshotPool(cfg, seed=1)
    for v in (4, 8):
        pool.add(v, ray.put({"w": torch.full((2,), float(v))}))
    pool.pick()
    state = pool.state()
    other = SnapshotPool(cfg, seed=99)
    other.load_state(state)
    assert [v for v, _ in other.snapshots] == [4, 8]
    assert torch.equal(ray.get(other.snapshots[1][1])["w"], torch.full((2,), 8.0))
    assert [other.pick()[0] for _ in range(20)] == [pool.pick()[0] for _ in range(20)]  # same RNG stream


def test_worker_flies_the_opponent_with_a_snapshot():
    cfg = load_config(None, AIR)
    worker = RolloutWorker(0, cfg)
    weights = {k: v.clone() for k, v in worker.policy.state_dict().items()}
    worker.set_opponent(weights, 7)
    assert isinstance(worker.env.opponent, SnapshotOpponent) and worker.env.opponent.version == 7
    meta, _ = worker.sample(weights, 1)
    assert meta.opponent_version == 7
    worker.set_opponent(None, -1)
    assert worker.env.opponent == "scripted"
    meta, _ = worker.sample(weights, 1)
    assert meta.opponent_version == -1


@pytest.mark.slow
def test_training_with_selfplay_pool(ray_session, tmp_path):
    cfg = load_config(None, AIR + ["max_env_steps=12288", "selfplay.enabled=true", "selfplay.refresh_every=3",
                                   "selfplay.pool_size=2", "selfplay.scripted_prob=0.0"])
    summary = train(cfg, run_dir=tmp_path, quiet=True)
    assert summary.status == "completed" and summary.rounds == 12
    # refreshed after rounds 3, 6, 9 and 12; the pool keeps the newest two versions
    assert summary.selfplay_pool_versions == [9, 12]


def test_selfplay_on_an_env_without_opponent_is_one_clear_error(ray_session, tmp_path):
    import pytest

    cfg = load_config(None, ["env.name=CartPole", "selfplay.enabled=true", "max_env_steps=1000", "tensorboard=false"])
    with pytest.raises(ConfigError, match="no pluggable opponent"):
        train(cfg, run_dir=tmp_path, quiet=True)


# -- head-to-head evaluation: `rl-system eval RUN --opponent OTHER` --------------------------------

def _air_checkpoint(run_dir, passive: bool = False, overrides=()):
    """A checkpoint of a fresh AirCombat policy; ``passive``: its action head always picks
    "straight, full throttle, no fire" (so as blue it never shoots)."""
    from rl_system.algos import get_algorithm
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.envs import make_env
    from rl_system.envs.air_combat import ACTION_STRAIGHT_FULL

    cfg = load_config(None, [*AIR, "env.kwargs={time_scale: 16.0, max_time_s: 60.0}", *overrides])
    env = make_env(cfg.env.name, 1, "cpu", seed=0, **cfg.env.kwargs)
    torch.manual_seed(1)
    policy = get_algorithm(cfg.algo).make_policy(env.observation_spec, env.action_spec, cfg)
    if passive:
        head = [m for m in policy.modules() if isinstance(m, torch.nn.Linear) and m.out_features == 12][-1]
        with torch.no_grad():
            head.weight.zero_()
            head.bias.fill_(-50.0)
            head.bias[ACTION_STRAIGHT_FULL] = 50.0
    state = {"config": cfg.model_dump(), "learner": {"model": policy.state_dict(), "version": 7 if passive else 3}}
    CheckpointStore(str(run_dir / "checkpoints")).save(state, {"policy_version": state["learner"]["version"]})
    return state


def test_eval_against_another_checkpoint_flies_it_as_the_opponent(tmp_path, capsys):
    from rl_system.cli.main import main
    from rl_system.policy.evaluation import evaluate

    red = _air_checkpoint(tmp_path / "red")
    passive = _air_checkpoint(tmp_path / "passive", passive=True)
    scripted = evaluate(red, episodes=128, num_envs=64, seed=5)
    against = evaluate(red, episodes=128, num_envs=64, seed=5, opponent=passive)
    assert scripted["opponent_version"] is None and against["opponent_version"] == 7
    # Returns are the terminal +1 win / -1 loss / 0 otherwise (no shaping here). The scripted
    # blue shoots a random red down; a blue that never fires cannot win a single duel.
    assert scripted["win_rate"] < 0.2 and scripted["return_mean"] < -0.1
    assert against["return_mean"] >= 0.0
    assert main(["eval", str(tmp_path / "red"), "--opponent", str(tmp_path / "passive"), "--episodes", "16",
                 "--json", str(tmp_path / "h2h.json")]) == 0
    assert "against v7 of" in capsys.readouterr().out


def test_eval_against_an_unfit_opponent_is_one_line_and_exit_2(tmp_path, capsys):
    from rl_system.cli.main import main

    _air_checkpoint(tmp_path / "red")
    _air_checkpoint(tmp_path / "wide", overrides=["model.hidden_sizes=[16, 16]"])
    cart = load_config(None, ["env.name=CartPole", "tensorboard=false"])
    from rl_system.algos import get_algorithm
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.envs import make_env

    env = make_env("CartPole", 1, "cpu", seed=0)
    policy = get_algorithm("ppo").make_policy(env.observation_spec, env.action_spec, cart)
    CheckpointStore(str(tmp_path / "cart" / "checkpoints")).save(
        {"config": cart.model_dump(), "learner": {"model": policy.state_dict(), "version": 1}}, {"policy_version": 1})
    for red, opp, words in (("cart", "red", "no pluggable opponent"), ("red", "cart", "does not fit")):
        assert main(["eval", str(tmp_path / red), "--opponent", str(tmp_path / opp), "--episodes", "4"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.splitlines() == [err] and words in err
