"""Env-only throughput (env steps per second) of the vectorized envs.

Rows: our torch CartPole (``rl_system.envs.cartpole.CartPoleVecEnv``) at several batch sizes and physics
dtypes, the Gymnasium adapter (``rl_system.envs.gym_adapter.GymnasiumVecEnv``, CartPole-v1, sync) next to the
raw Gymnasium ``SyncVectorEnv`` it wraps and, as a peer, Gymnasium's own numpy-vectorized CartPole
(``gymnasium.make_vec("CartPole-v1", vectorization_mode="vector_entry_point")``).

Actions are pre-generated, so only ``step`` (with its auto-resets) is timed. Each row is the best
of ``--repeats`` timed runs. ``wall`` is steps/s by the wall clock; ``cpu`` is steps/s by this
process's CPU time, which is the more stable figure on a shared machine (compare the load
average printed in the header with the core count).

    python -m bench.bench_envs [--repeats 5] [--seconds 0.25] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
from typing import Callable

import gymnasium
import numpy as np
import torch

from bench.harness.timing import best_rates
from rl_system.envs.cartpole import CartPoleVecEnv
from rl_system.envs.gym_adapter import GymnasiumVecEnv

N_ACTION_BATCHES = 64


def measure(step: Callable[[int], object], num_envs: int, seconds: float, repeats: int) -> tuple[float, float]:
    """Best (wall, cpu) env-steps/s over ``repeats`` runs of about ``seconds`` each."""
    wall, cpu, _ = best_rates(step, num_envs, seconds, repeats)
    return wall, cpu


def bench_torch_cartpole(n: int, dtype: torch.dtype, seconds: float, repeats: int) -> tuple[float, float]:
    env = CartPoleVecEnv(n, seed=0, dtype=dtype)
    env.reset()
    actions = torch.randint(0, 2, (N_ACTION_BATCHES, n), generator=torch.Generator().manual_seed(0))
    return measure(lambda i: env.step(actions[i % N_ACTION_BATCHES]), n, seconds, repeats)


def bench_adapter(n: int, seconds: float, repeats: int) -> tuple[float, float]:
    env = GymnasiumVecEnv("CartPole-v1", n, seed=0, vectorization_mode="sync")
    env.reset()
    actions = torch.randint(0, 2, (N_ACTION_BATCHES, n), generator=torch.Generator().manual_seed(0))
    try:
        return measure(lambda i: env.step(actions[i % N_ACTION_BATCHES]), n, seconds, repeats)
    finally:
        env.close()


def bench_gym_numpy(n: int, seconds: float, repeats: int, **make_vec_kwargs) -> tuple[float, float]:
    """A plain Gymnasium vector CartPole, numpy in and out (``make_vec_kwargs`` pick the kind)."""
    env = gymnasium.make_vec("CartPole-v1", num_envs=n, **make_vec_kwargs)
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, (N_ACTION_BATCHES, n))
    try:
        return measure(lambda i: env.step(actions[i % N_ACTION_BATCHES]), n, seconds, repeats)
    finally:
        env.close()


# What the adapter wraps: Gymnasium's SyncVectorEnv in SAME_STEP mode.
SYNC_SAME_STEP = {"vectorization_mode": "sync",
                  "vector_kwargs": {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}}
# Gymnasium's own numpy-vectorised CartPole (NEXT_STEP autoreset, no final_obs).
NUMPY_VECTOR = {"vectorization_mode": "vector_entry_point"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.25, help="length of one timed run")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1 for fairness)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()

    rows: list[tuple[str, str, int, tuple[float, float]]] = []
    for n in (256, 1024, 4096, 16384):
        for dtype in (torch.float32, torch.float64):
            rows.append(("torch CartPoleVecEnv", str(dtype).removeprefix("torch."), n,
                         bench_torch_cartpole(n, dtype, args.seconds, args.repeats)))
    for n in (16, 64):
        rows.append(("GymnasiumVecEnv CartPole-v1 sync", "float64", n, bench_adapter(n, args.seconds, args.repeats)))
        rows.append(("  (raw gymnasium sync, numpy)", "float64", n, bench_gym_numpy(n, args.seconds, args.repeats, **SYNC_SAME_STEP)))
    for n in (16, 64, 256, 1024, 4096, 16384):
        rows.append(("gymnasium numpy vector CartPole*", "float64", n,
                     bench_gym_numpy(n, args.seconds, args.repeats, **NUMPY_VECTOR)))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, gymnasium {gymnasium.__version__}, numpy {np.__version__}; "
          f"{os.cpu_count()} CPUs, load average {load:.2f}; best of {args.repeats} x ~{args.seconds}s")
    header = f"| {'env':<33} | {'physics':<7} | {'N':>6} | {'threads':>7} | {'wall steps/s':>13} | {'cpu steps/s':>13} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for name, dt, n, (wall, cpu) in rows:
        print(f"| {name:<33} | {dt:<7} | {n:>6} | {threads:>7} | {wall:>13,.0f} | {cpu:>13,.0f} |")
    print("* vectorization_mode='vector_entry_point' (CartPoleVectorEnv): NEXT_STEP autoreset, no final_obs, "
          "numpy only; it does not take the torch thread setting.")


if __name__ == "__main__":
    main()
