"""``bench/bench_round.py`` runs (so its figures can be regenerated): every piece of a CartPole
round is timed in-process, and the round's real objects cross real Ray actors with and without
the weights."""

from __future__ import annotations

from bench import bench_round
from bench.bench_update import REPO
from rl_system.actors.learner import UpdateResult
from rl_system.actors.weights import PolicyWeights
from rl_system.config import load_config
from rl_system.rollout.contract import RolloutMeta


def test_the_round_is_timed_piece_by_piece_in_process_and_over_ray(ray_session):
    cfg = load_config(str(REPO / "launch" / "configs" / "cartpole_ppo.yaml"))
    rows, shipped = bench_round.in_process_rows(cfg, repeats=2)
    assert [piece for piece, _, _ in rows] == [
        "sampler step (64 envs)", "worker.sample, a new version's weights", "learner.update (decode, update, weights)",
        "  of which the trainer's update", "weights: pickle", "weights: unpickle"]
    assert all(value > 0 for _, value, _ in rows)
    assert isinstance(shipped["weights"], PolicyWeights) and isinstance(shipped["metrics"], UpdateResult)
    assert all(isinstance(m, RolloutMeta) for m in shipped["metas"]) and len(shipped["payloads"]) == 2
    assert shipped["payload_bytes"] == [len(p) for p in shipped["payloads"]]
    ray_rows = bench_round.ray_rows(cfg, shipped, rounds=3)
    assert [piece for piece, _, _ in ray_rows] == ["Ray: a round's traffic with the weights",
                                                   "Ray: the same without the weights"]
    assert all(ms > 0 for _, ms, _ in ray_rows)
    text = bench_round.markdown({"stamp": {"date_utc": "d", "commit": "c", "cpu": "cpu", "cores": 2, "torch": "t"},
                                 "command": "python -m bench.bench_round", "config": "cartpole_ppo",
                                 "rows": rows + ray_rows, "weights_bytes": shipped["weights_bytes"],
                                 "payload_bytes": shipped["payload_bytes"], "learner": shipped["learner"]})
    assert text.count("\n| ") == 1 + len(rows) + len(ray_rows)  # the header, one line a piece
    assert "`cartpole_ppo` (learner: 1 thread, fp32)" in text  # what the learner's rows were timed with
