"""The policy-version gate, unit and end to end through real Ray actors."""

import ray
import torch

from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.config import load_config
from rl_system.rollout.gate import PolicyVersionGate


def test_gate_window():
    gate = PolicyVersionGate(max_policy_lag=1)
    assert gate.check(5, 5) and gate.check(4, 5)
    assert not gate.check(3, 5) and not gate.check(6, 5)  # too old, and from the future
    assert (gate.accepted, gate.dropped, gate.max_lag_used) == (2, 2, 1)
    assert gate.mean_lag == 0.5


def _cfg(lag=0):
    return load_config(None, ["workers.num_envs=16", "workers.rollout_len=8", "model.hidden_sizes=[16]",
                              f"max_policy_lag={lag}", "tensorboard=false"]).model_dump()


def test_stale_rollouts_are_never_trained_on(ray_session):
    cfg = _cfg()
    worker = ray.remote(RolloutWorker).remote(0, cfg)
    specs = ray.get(worker.specs.remote())
    learner_a, learner_b = (ray.remote(Learner).remote(cfg, *specs) for _ in range(2))
    w0 = ray.get(learner_a.get_weights.remote())

    first = worker.sample.options(num_returns=2).remote(w0, 0)[1]
    _, w1_a = ray.get(learner_a.update.remote(first))
    _, w1_b = ray.get(learner_b.update.remote(first))
    assert all(torch.equal(w1_a[k], w1_b[k]) for k in w1_a)

    # A rollout from version 0, arriving after the learners moved to version 1 (the same worker:
    # a worker samples with whatever version it is given, and one actor less starts).
    stale = worker.sample.options(num_returns=2).remote(w0, 0)[1]
    fresh = worker.sample.options(num_returns=2).remote(w1_a, 1)[1]

    metrics_a, w2_a = ray.get(learner_a.update.remote(stale, fresh))
    metrics_b, w2_b = ray.get(learner_b.update.remote(fresh))
    assert metrics_a.system["learner_dropped"] == 1 and metrics_b.system["learner_dropped"] == 0
    assert metrics_a.system["learner_env_steps"] == metrics_b.system["learner_env_steps"] == 2 * 16 * 8
    # Same weights as the learner that never saw the stale rollout: it contributed nothing.
    assert all(torch.equal(w2_a[k], w2_b[k]) for k in w2_a)

    # Only stale rollouts: the update is refused, the version does not move.
    err = None
    try:
        ray.get(learner_a.update.remote(stale))
    except ray.exceptions.RayTaskError as e:
        err = e
    assert err is not None and "outside the allowed policy lag" in str(err)
    for actor in (worker, learner_a, learner_b):
        ray.kill(actor)
