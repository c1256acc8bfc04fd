"""The rollout worker and buffer, in-process: shapes, version handling, bootstrapping columns."""

import torch

from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.config import load_config
from rl_system.rollout import codec
from rl_system.rollout.contract import RolloutMeta


def _setup(*extra):
    cfg = load_config(None, ["workers.num_envs=8", "workers.rollout_len=12", "model.hidden_sizes=[16]",
                             "tensorboard=false", *extra])
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    return cfg, worker, learner


def test_sample_returns_tagged_columnar_rollout():
    _, worker, learner = _setup()
    meta, payload = worker.sample(learner.get_weights(), 0)
    cols, header = codec.decode(payload)
    assert header == meta.header() and set(header) == set(RolloutMeta.HEADER)
    assert meta.version == header["version"] == 0 and meta.worker_id == 0
    assert meta.env_steps == 12 * 8 and meta.payload_bytes == len(payload)
    assert cols["obs.obs"].shape == (12, 8, 4) and cols["obs.obs"].dtype == torch.float32
    for name in ("action", "logp", "value", "reward", "terminated", "truncated", "trunc_value"):
        assert cols[name].shape == (12, 8), name
    assert cols["action"].dtype == torch.int64 and cols["terminated"].dtype == torch.bool
    assert cols["last_value"].shape == (8,)
    # Episode statistics travel once, in the meta, never as payload columns.
    assert not any(k.startswith("episode_") for k in cols)
    assert len(meta.episode_returns) == meta.num_episodes == int(cols["terminated"].sum() + cols["truncated"].sum())
    # CartPole pays 1 per step, so a finished episode's return equals its length.
    assert meta.episode_returns == [float(n) for n in meta.episode_lengths]


def test_weights_are_loaded_only_for_a_newer_version():
    _, worker, learner = _setup()
    w0 = learner.get_weights()
    worker.sample(w0, 3)
    assert worker.version == 3
    zeros = {k: torch.zeros_like(v) for k, v in w0.items()}
    meta, _ = worker.sample(zeros, 2)  # older than what it holds: ignored
    assert meta.version == 3
    assert all(torch.equal(v, w0[k]) for k, v in worker.policy.state_dict().items())


def test_truncation_bootstrap_value_is_recorded_only_where_truncated():
    _, worker, learner = _setup("env.kwargs={max_episode_steps: 5}")
    _, payload = worker.sample(learner.get_weights(), 0)
    cols, _ = codec.decode(payload)
    trunc = cols["truncated"] & ~cols["terminated"]
    assert trunc.any()
    assert (cols["trunc_value"][~trunc] == 0).all()
    assert (cols["trunc_value"][trunc] != 0).all()
    # The obs after a truncation is a fresh episode: |x|, |theta| within the reset range.
    t, n = trunc.nonzero()[0].tolist()
    if t + 1 < 12:
        assert cols["obs.obs"][t + 1, n].abs().max() <= 0.05


def test_episodes_continue_across_rollouts():
    _, worker, learner = _setup()
    w = learner.get_weights()
    total_steps, lengths = 0, []
    for _ in range(6):
        meta, _ = worker.sample(w, 0)
        lengths += meta.episode_lengths
        total_steps += meta.env_steps
    # Episodes longer than one rollout (12 steps) exist: counters were carried over.
    assert max(lengths) > 12
    assert sum(lengths) <= total_steps


def test_weights_travel_as_arrays_and_arrive_as_writable_tensors():
    """The learner's weights pickle as NumPy arrays (fast over Ray) and unpickle as a state dict of
    the same tensors, each its own writable copy; dtypes NumPy lacks (bfloat16) keep their bits."""
    import pickle

    from rl_system.actors.weights import PolicyWeights

    _, worker, learner = _setup("model.normalize_obs=true")
    weights = learner.get_weights()
    assert isinstance(weights, PolicyWeights)
    weights["extra.bf16"] = torch.randn(3).bfloat16()
    blob = pickle.dumps(weights, protocol=5)
    assert b"_rebuild_tensor" not in blob  # arrays, not torch storages,
    assert b"_rebuild_tensor" in pickle.dumps(dict(weights), protocol=5)  # which a plain dict would ship
    back = pickle.loads(blob)
    assert isinstance(back, PolicyWeights) and back.keys() == weights.keys()
    for k, v in weights.items():
        assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
        assert back[k].data_ptr() != v.data_ptr()
    back["extra.bf16"].add_(1)  # writable, and not the learner's memory
    assert not torch.equal(back["extra.bf16"], weights["extra.bf16"])
    del back["extra.bf16"]
    worker.set_weights(back, 1)
    assert all(torch.equal(p, back[k]) for k, p in worker.policy.state_dict().items())
