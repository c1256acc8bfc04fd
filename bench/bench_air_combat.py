"""Env-only throughput (env steps per second) of ``envs.air_combat.AirCombatVecEnv``.

Random discrete actions (pre-generated; half of them fire, so both sides empty their racks and
about 5 of the 12 missile slots of an env are in flight in the steady state, a heavy load)
against the scripted opponent, ``time_scale=1`` (one physics sub-step per step) and, for
reference, ``4`` (two sub-steps). ``--warmup`` untimed steps first reach that steady state
(the first steps, with few missiles in flight, run faster); ``in flight`` is the mean number of
missiles in flight per env during the timed runs. Only ``step`` (with its auto-resets) is timed, with ``torch.set_num_threads(1)``.
Each row is the best of ``--repeats`` runs of about ``--seconds`` each; ``wall`` is steps/s by the
wall clock, ``cpu`` by this process's CPU time (the steadier figure on a shared machine).

    python bench/bench_air_combat.py [--sizes 1024 4096 16384] [--repeats 3] [--seconds 0.5] [--warmup 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.air_combat import N_DISCRETE_ACTIONS, AirCombatVecEnv  # noqa: E402


def bench(n: int, time_scale: float, repeats: int, seconds: float, warmup: int) -> tuple[float, float, float]:
    env = AirCombatVecEnv(n, seed=0, time_scale=time_scale)
    env.reset()
    actions = torch.randint(0, N_DISCRETE_ACTIONS, (64, n), generator=torch.Generator().manual_seed(0))
    for i in range(warmup):  # missiles in flight, resets going on
        env.step(actions[i % 64])
    best_wall = best_cpu = 0.0
    in_flight = []
    for _ in range(repeats):
        steps = 0
        w0, c0 = time.perf_counter(), time.process_time()
        while time.perf_counter() - w0 < seconds:
            env.step(actions[steps % 64])
            steps += 1
        in_flight.append(env._m_active.sum().item() / n)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        best_wall = max(best_wall, steps * n / wall)
        best_cpu = max(best_cpu, steps * n / max(cpu, 1e-9))
    return best_wall, best_cpu, sum(in_flight) / len(in_flight)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--time-scales", type=float, nargs="+", default=[1.0, 4.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=1000, help="untimed steps before timing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads 1, cores {os.cpu_count()}, load avg {os.getloadavg()[0]:.2f}")
    print(f"{'num_envs':>9} {'time_scale':>10} {'wall steps/s':>14} {'cpu steps/s':>14} {'in flight':>9}")
    for ts in args.time_scales:
        for n in args.sizes:
            wall, cpu, flying = bench(n, ts, args.repeats, args.seconds, args.warmup)
            print(f"{n:>9} {ts:>10g} {wall:>14,.0f} {cpu:>14,.0f} {flying:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
