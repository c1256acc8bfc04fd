"""Throughput of the HMASD sampler and trainer on Alice_and_Bob, in-process (no Ray).

Prints env steps per second of ``collect()`` (one worker's share of a round) and the time of one
``update()`` on a round's batch (``--workers`` rollouts concatenated, as the learner does), by the
wall clock and by this process's CPU time (steadier on a shared machine). One env step = one step
of one env (both agents act).

    python -m bench.experiments.hmasd_throughput [--envs 64] [--rollout-len 100] [--workers 2]
                                                 [--size default] [--flat] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from rl_system.algos import get_algorithm
from rl_system.config import RunConfig
from rl_system.envs.alice_bob import AliceBobVecEnv
from rl_system.rollout.contract import concat

_HMASD = get_algorithm("hmasd")  # the factories over a run config
make_policy, make_sampler, make_trainer = _HMASD.make_policy, _HMASD.make_sampler, _HMASD.make_trainer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--rollout-len", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2, help="rollouts per round (the trainer's batch)")
    ap.add_argument("--size", default="default")
    ap.add_argument("--flat", action="store_true", help="hierarchy: false (flat MAPPO)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = RunConfig.model_validate({"algo": "hmasd",
                                    "workers": {"num_envs": args.envs, "rollout_len": args.rollout_len},
                                    "hmasd": {"hierarchy": not args.flat}})
    env = AliceBobVecEnv(args.envs, size=args.size, seed=0)
    policy = make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(0)
    sampler.collect()
    steps = args.envs * args.rollout_len
    best_wall = best_cpu = float("inf")
    rollouts = []
    for _ in range(max(args.repeats, args.workers)):
        w, c = time.perf_counter(), time.process_time()
        cols, _ = sampler.collect()
        best_wall, best_cpu = min(best_wall, time.perf_counter() - w), min(best_cpu, time.process_time() - c)
        rollouts.append({k: v.clone() for k, v in cols.items()})
    load = os.getloadavg()[0]
    mode = "flat MAPPO" if args.flat else "HMASD"
    print(f"{mode} sampler, {args.envs} envs x {args.rollout_len} steps ({args.size} map): "
          f"{steps / best_wall:,.0f} env steps/s wall, {steps / best_cpu:,.0f} per CPU-second "
          f"(best of {max(args.repeats, args.workers)}; load average {load:.1f} on {os.cpu_count()} CPUs)")
    trainer = make_trainer(policy, cfg)
    batch = concat(rollouts[-args.workers:])
    trainer.update({k: v.clone() for k, v in batch.items()}, 0.0)  # warm-up
    best_wall = best_cpu = float("inf")
    for _ in range(args.repeats):
        b = {k: v.clone() for k, v in batch.items()}
        w, c = time.perf_counter(), time.process_time()
        metrics = trainer.update(b, 0.0)
        best_wall, best_cpu = min(best_wall, time.perf_counter() - w), min(best_cpu, time.process_time() - c)
    h = cfg.hmasd
    print(f"{mode} update on {args.workers} x {steps:,} = {args.workers * steps:,} env steps ({h.num_epochs} epochs, "
          f"{h.num_minibatches} minibatch(es), chunks of {metrics['chunk_len']}): {best_wall:.2f} s wall, "
          f"{best_cpu:.2f} CPU-s -> {args.workers * steps / best_wall:,.0f} env steps/s wall, "
          f"{args.workers * steps / best_cpu:,.0f} per CPU-second (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
