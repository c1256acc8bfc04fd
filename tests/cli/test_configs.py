"""Every shipped config under ``launch/configs/`` builds and trains two rounds.

A smoke test, not a learning test: each config runs as written except for its size (a few envs
per worker, two rounds, at most two MAPPO epochs a round), through the run's own parts in this
process: the config as the actors receive it (``model_dump`` and back), every rollout worker, the
learner, the payloads between them. A config whose keys, env, network or algorithm settings no
longer fit the code fails here in seconds. The same parts as Ray actors, with the run loop, gate,
logs and summary around them, are proved end to end by ``tests/run/test_training.py`` and the tests of
each algorithm; whether the configs *learn* to the end of their budgets is measured in
docs/results.md ("Shipped configs end healthy"), not here: that takes minutes per config.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.config import load_config

CONFIG_DIR = Path(__file__).resolve().parents[2] / "launch" / "configs"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
ROUNDS = 2
NUM_ENVS = 4
MAX_ROLLOUT_LEN = 100  # whole-episode rounds (Overcooked's 400 steps) shortened: a multiple of every shipped k
# MAPPO passes over a round capped: BenchMARL's mappings take 45 (675 minibatch steps of a [256, 256]
# network a round, seconds per config); a second pass runs the same code as the 45th.
MAX_MAPPO_EPOCHS = 2


def test_config_dir_is_not_empty():
    assert len(CONFIGS) >= 8, CONFIGS


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_trains_briefly(path):
    full = load_config(path)
    # Eager updates: learner.compile's compile costs seconds per config (tests/algos/test_compile.py proves it).
    # One learner thread: workers and learner share this process, and two threads on a core another
    # process holds wait on each other at every parallel op (an update measured 174 s against 3.7 s).
    cfg = load_config(path, [f"workers.num_envs={NUM_ENVS}", "tensorboard=false", "learner.compile=false",
                             f"workers.rollout_len={min(full.workers.rollout_len, MAX_ROLLOUT_LEN)}",
                             f"mappo.num_epochs={min(full.mappo.num_epochs, MAX_MAPPO_EPOCHS)}",
                             "learner.torch_threads=1"])
    # Only the size changed: the algorithm, model and learning settings are the shipped ones.
    assert cfg.algo == full.algo and cfg.env.name == full.env.name
    assert cfg.model == full.model and cfg.ppo == full.ppo and cfg.hmasd == full.hmasd
    assert cfg.mappo == full.mappo.model_copy(update={"num_epochs": cfg.mappo.num_epochs})

    shipped = cfg.model_dump()  # what the actors are built from
    workers = [RolloutWorker(i, shipped) for i in range(cfg.workers.num_workers)]
    learner = Learner(shipped, *workers[0].specs())
    weights = learner.get_weights()
    for version in range(ROUNDS):
        metas, payloads = zip(*(w.sample(weights, version) for w in workers))
        assert all(m.env_steps == NUM_ENVS * cfg.workers.rollout_len for m in metas)
        metrics, weights = learner.update(*payloads)
        assert metrics.version == version + 1
        train = metrics.train
        losses = {k: v for k, v in train.items() if k.endswith("loss")}
        assert losses and all(math.isfinite(v) for v in losses.values()), losses
        assert train["skipped_minibatches"] == 0 and train["minibatch_steps"] > 0
        assert metrics.system["learner_dropped"] == 0
    assert all(math.isfinite(float(v.float().abs().max())) for v in weights.values() if v.numel())
    for w in workers:
        w.env.close()
