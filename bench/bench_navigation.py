"""Env-only throughput (env steps per second) of the lidar navigation env (``envs.navigation``).

Steps ``NavigationVecEnv`` (default layout: 16 static cylinders, 5 moving obstacles, 20 m arena)
with pre-generated uniform random actions, so episodes end often (collisions) and the auto-reset
path is part of the timing. Each row is the best of ``--repeats`` runs of about ``--seconds``;
``wall`` is steps/s by the wall clock, ``cpu`` by this process's CPU time (steadier on a shared
machine). ``ms/step`` is the wall time of one batched ``step``.

    python bench/bench_navigation.py [--sizes 256 1024 4096] [--repeats 3] [--seconds 0.5] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.navigation import NavigationVecEnv  # noqa: E402

N_ACTION_BATCHES = 32


def bench(n: int, seconds: float, repeats: int) -> tuple[float, float, float]:
    env = NavigationVecEnv(n, seed=0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = [torch.rand((n, 3), generator=gen) * 2 - 1 for _ in range(N_ACTION_BATCHES)]
    for i in range(10):  # warm-up
        env.step(actions[i % N_ACTION_BATCHES])
    t0, calls = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.1:
        env.step(actions[calls % N_ACTION_BATCHES])
        calls += 1
    iters = max(5, int(seconds / ((time.perf_counter() - t0) / calls)))
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        for i in range(iters):
            env.step(actions[i % N_ACTION_BATCHES])
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return n * iters / best_wall, n * iters / max(best_cpu, 1e-9), 1e3 * best_wall / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, cores={os.cpu_count()}, "
          f"load avg(1m)={load:.2f}")
    print(f"{'num_envs':>8} {'wall steps/s':>14} {'cpu steps/s':>14} {'ms/step':>9}")
    for n in args.sizes:
        wall, cpu, ms = bench(n, args.seconds, args.repeats)
        print(f"{n:>8} {wall:>14,.0f} {cpu:>14,.0f} {ms:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
