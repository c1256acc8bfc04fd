"""The GPU path: host staging of CUDA rollouts, GPU workers and learners, bf16 autocast.

Tests marked ``cuda`` skip where there is no CUDA device; ``bench/gpu_check.py`` runs them on a
GPU machine. The CPU halves (what must cost nothing on the CPU path) run everywhere.
"""

import pytest
import ray
import torch

from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.config import load_config
from rl_system.rollout import codec
from rl_system.rollout.staging import HostStaging
from rl_system.run.loop import train

cuda = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def needs_cuda(test):
    for mark in cuda:
        test = mark(test)
    return test


def test_host_columns_pass_through_staging_untouched():
    cols = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.ones(4, dtype=torch.bool)}
    out = HostStaging().to_host(cols)
    assert all(out[k] is cols[k] for k in cols)  # no copy on the CPU path


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_learner_update_keeps_float32_weights_under_either_precision(precision):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", ["tensorboard=false", f"learner.precision={precision}",
                                                           "workers.num_envs=16"])
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    metrics, weights = learner.update(worker.sample(learner.get_weights(), 0)[1])
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for k, v in weights.items()
               if v.is_floating_point() and "norm" not in k)
    assert metrics.train["minibatch_steps"] > 0


@needs_cuda
def test_staging_copies_device_columns_to_reused_pinned_host_buffers():
    staging = HostStaging()
    for rows in (5, 3, 7):  # a varying row count (final_* columns) reuses or grows the buffer
        cols = {"x": torch.randn(rows, 4, device="cuda"), "m": torch.rand(rows, device="cuda") > 0.5}
        out = staging.to_host(cols)
        for k, v in cols.items():
            assert not out[k].is_cuda and out[k].is_pinned() and torch.equal(out[k], v.cpu())


@needs_cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_cuda_worker_and_learner_sample_and_update(precision):
    cfg = load_config("launch/configs/cartpole_ppo.yaml", ["tensorboard=false", "workers.device=cuda",
                                                           "learner.device=cuda", f"learner.precision={precision}"])
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    meta, payload = worker.sample(learner.get_weights(), 0)
    cols, _ = codec.decode(payload)
    assert cols["obs.obs"].shape == (cfg.workers.rollout_len, cfg.workers.num_envs, 4)
    metrics, weights = learner.update(payload)
    assert all(not v.is_cuda for v in weights.values())  # the weights travel from host memory
    assert metrics.version == 1 and metrics.train["skipped_minibatches"] == 0


@needs_cuda
@pytest.mark.parametrize("learners", [1, 2])
def test_gpu_workers_and_learners_train_cartpole(tmp_path, learners):
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        cfg = load_config("launch/configs/cartpole_ppo.yaml", [
            "tensorboard=false", "target_return=195", "return_window=50", "workers.device=cuda",
            "workers.num_gpus=0.25", "learner.device=cuda", f"learner.num_gpus={0.25 / learners}",
            f"learner.num_learners={learners}", "checkpoint.every_rounds=0"])  # GPU shares: gloo
        summary = train(cfg, run_dir=tmp_path, quiet=True)
    finally:
        ray.shutdown()
    assert summary.reached_target, summary


def test_the_gpu_check_script_measures_and_renders_on_any_device():
    """``bench/gpu_check.py`` runs unattended on a GPU machine; its parts run here at toy sizes
    so that it cannot rot unseen (the whole script: ``--device cpu --quick``)."""
    from bench import gpu_check

    rows = [{"env": name, "envs": 8, "steps_per_s": gpu_check.env_rate(name, 8, "cpu", 0.05)} for name in gpu_check.ENVS]
    assert all(r["steps_per_s"] > 0 for r in rows)
    text = gpu_check.render({
        "meta": {"date_utc": "2026-01-01 00:00 UTC", "commit": "abc", "cpu": "cpu", "cores": 2, "torch": "2", "ray": "2"},
        "device": "cpu", "gpu": None, "cuda_tests": {"rc": 0, "tail": ["3 passed"]}, "env_only": rows,
        "end_to_end": [{"env": "CartPole", "envs_per_worker": 8, "env_steps": 100, "steps_per_s": 1.0}],
        "cartpole_475": {"reached": True, "time_to_target_s": 2.0, "steps_to_target": 1000},
        "learners": [{"learners": 2, "samples_per_s": 10.0, "ms_per_update": 1.0}]})
    assert "| Navigation | 8 |" in text and "CartPole to a mean return of 475: 2.0 s" in text
    from bench.bench_update import build

    trainer, batch = build(load_config("launch/configs/cartpole_ppo.yaml", ["workers.num_envs=4", "workers.rollout_len=16"]),
                           device="cpu")
    update = [{"config": "cartpole_ppo", "mode": "bf16", **gpu_check.time_update(trainer, batch, "cpu", True, 1)},
              {"config": "alice_bob_hmasd", "mode": "compiled", "skipped": "learner.compile: compiles PPO's loss"}]
    assert update[0]["samples"] == 2 * 4 * 16 and update[0]["update_s"] > 0
    text = gpu_check.render({"meta": {"date_utc": "d", "commit": "c", "cpu": "cpu", "cores": 2, "torch": "2", "ray": "2"},
                             "device": "cpu", "gpu": None, "update": update})
    assert "| cartpole_ppo | bf16 | 128 |" in text and "| alice_bob_hmasd | compiled | – |" in text
