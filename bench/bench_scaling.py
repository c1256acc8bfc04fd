"""Scaling on this machine: sampling and end-to-end throughput vs workers x envs per worker, and
bytes shipped per env step with and without compression.

    python -m bench.bench_scaling [--steps 400000]

Sampling-only rows call ``sample`` on every worker concurrently (no learner), so they show what
the workers alone deliver. End-to-end rows are full synchronous PPO rounds with the throughput
config (4 epochs). Per-component costs printed at the end feed the projection in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import os
import time

import ray

from rl_system.config import load_config
from rl_system.driver import train
from rl_system.learner import Learner
from rl_system.worker import RolloutWorker

CONFIG = "launch/configs/cartpole_ppo_throughput.yaml"


def sampling_rate(cfg, seconds: float = 4.0) -> tuple[float, float]:
    """(env steps/s across all workers, payload bytes per env step), sampling only."""
    workers = [ray.remote(RolloutWorker).options(num_cpus=0).remote(i, cfg.model_dump())
               for i in range(cfg.workers.num_workers)]
    learner = Learner(cfg, *ray.get(workers[0].specs.remote()))
    weights = ray.put(learner.get_weights())
    ray.get([w.sample.options(num_returns=2).remote(weights, 0)[0] for w in workers])  # warm-up
    steps, nbytes, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        metas = ray.get([w.sample.options(num_returns=2).remote(weights, 0)[0] for w in workers])
        steps += sum(m["env_steps"] for m in metas)
        nbytes += sum(m["payload_bytes"] for m in metas)
    rate = steps / (time.perf_counter() - t0)
    for w in workers:
        ray.kill(w)
    return rate, nbytes / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400_000)
    args = ap.parse_args()
    ray.init(num_cpus=max(os.cpu_count() or 1, 5), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    rows = []
    for workers in (1, 2, 4):
        for envs in (64, 512):
            base = [f"workers.num_workers={workers}", f"workers.num_envs={envs}", "tensorboard=false",
                    "log_every_s=1000", "checkpoint.every_rounds=0", "target_return=null"]
            cfg = load_config(CONFIG, base + ["compression=none"])
            sample_sps, raw_bps = sampling_rate(cfg)
            _, lz4_bps = sampling_rate(load_config(CONFIG, base + ["compression=lz4"]), seconds=1.0)
            s = train(load_config(CONFIG, base + [f"max_env_steps={args.steps}"]), run_dir=f"/tmp/rl_scaling/{workers}x{envs}",
                      quiet=True)
            b = s["time_breakdown_s"]
            rows.append((workers, envs, sample_sps, s["steps_per_s"], raw_bps, lz4_bps,
                         1e6 * b["update"] / s["env_steps"], 1e3 * (b["rounds"] - b["update"]) / s["rounds"]))
    print(f"machine: {os.cpu_count()} CPUs; config {CONFIG} (4 epochs); end-to-end runs of {args.steps:,} steps")
    print(f"{'workers':>7} {'envs/w':>7} {'sample steps/s':>15} {'e2e steps/s':>12} {'B/step raw':>11} "
          f"{'B/step lz4':>11} {'learn us/step':>14} {'gather ms/rnd':>14}")
    for r in rows:
        print(f"{r[0]:>7} {r[1]:>7} {r[2]:>15,.0f} {r[3]:>12,.0f} {r[4]:>11.1f} {r[5]:>11.1f} {r[6]:>14.2f} {r[7]:>14.1f}")


if __name__ == "__main__":
    main()
