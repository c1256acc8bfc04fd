"""Env-only throughput (env steps per second) of ``rl_system.envs.air_combat.AirCombatVecEnv``.

Two loads, both against the scripted opponent, pre-generated actions, only ``step`` (with its
auto-resets) timed:

* ``light``: red never fires (random non-fire actions 0..5); only the scripted blue launches
  (at most one missile per 10 s, in range and on the nose), so few missiles are in flight.
* ``heavy``: random discrete actions, half of them fire, so both sides empty their racks and
  about 6 of the 12 missile slots of an env are in flight in the steady state. ``--warmup``
  untimed steps first reach that steady state (the first steps, with few missiles in flight,
  are not representative).

``in flight`` is the mean number of missiles in flight per env during the timed runs. The env
updates all 12 missile slots of every env densely, so the two loads should cost about the same.
Each configuration runs ``--repeats`` timed runs of about ``--seconds`` each, for every
``--threads`` value (``torch.set_num_threads``); ``best``/``median`` are over those runs, ``wall``
by the wall clock and ``cpu`` by this process's CPU time (the steadier figure on a shared
machine; with 2 threads it adds both threads' time). The load average is printed before and
after: on a shared machine read the figures against it.

    python -m bench.bench_air_combat [--sizes 4096 16384] [--threads 1 2] [--loads light heavy]
                                     [--time-scales 1] [--repeats 7] [--seconds 0.5] [--warmup 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from rl_system.envs.air_combat import N_DISCRETE_ACTIONS, AirCombatVecEnv


def bench(n: int, load: str, time_scale: float, repeats: int, seconds: float, warmup: int) -> dict[str, float]:
    env = AirCombatVecEnv(n, seed=0, time_scale=time_scale)
    env.reset()
    high = N_DISCRETE_ACTIONS if load == "heavy" else N_DISCRETE_ACTIONS // 2  # light: no fire actions
    actions = torch.randint(0, high, (64, n), generator=torch.Generator().manual_seed(0))
    for i in range(warmup):  # missiles in flight, resets going on
        env.step(actions[i % 64])
    wall_rates, cpu_rates, in_flight = [], [], []
    for _ in range(repeats):
        steps = 0
        w0, c0 = time.perf_counter(), time.process_time()
        while time.perf_counter() - w0 < seconds:
            env.step(actions[steps % 64])
            steps += 1
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        in_flight.append(float(env._m_active.sum()) / n)
        wall_rates.append(steps * n / wall)
        cpu_rates.append(steps * n / max(cpu, 1e-9))
    return {"wall_best": max(wall_rates), "wall_median": statistics.median(wall_rates),
            "cpu_best": max(cpu_rates), "cpu_median": statistics.median(cpu_rates),
            "in_flight": sum(in_flight) / len(in_flight)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--loads", nargs="+", choices=["light", "heavy"], default=["light", "heavy"])
    parser.add_argument("--time-scales", type=float, nargs="+", default=[1.0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--warmup", type=int, default=1000, help="untimed steps before timing")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, cores {os.cpu_count()}, load avg {os.getloadavg()[0]:.2f}; "
          f"best/median of {args.repeats} runs of {args.seconds:g} s, steps/s")
    print(f"{'threads':>7} {'load':>6} {'num_envs':>9} {'time_scale':>10} {'wall best':>12} {'wall median':>12} "
          f"{'cpu best':>12} {'cpu median':>12} {'in flight':>9}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for ts in args.time_scales:
            for load in args.loads:
                for n in args.sizes:
                    r = bench(n, load, ts, args.repeats, args.seconds, args.warmup)
                    rates = " ".join(f"{r[k]:>12,.0f}" for k in ("wall_best", "wall_median", "cpu_best", "cpu_median"))
                    print(f"{threads:>7} {load:>6} {n:>9} {ts:>10g} {rates} {r['in_flight']:>9.2f}", flush=True)
    print(f"load avg after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
