"""Env-only throughput of the PettingZoo adapter (``rl_system.envs.pettingzoo_adapter``) on MPE
simple_spread_v3, against the floor: the same raw ``ParallelEnv`` copies stepped in a plain Python
loop (an action dict per copy, a reset when its ``agents`` list empties), with nothing converted.

Rows: ``num_envs`` (``--sizes``); columns: env steps/s (one env step = one step of one copy, all
agents acting) of the raw loop, of the adapter (state from ``env.state()``, its default for MPE) and
of the adapter with ``state="obs"`` (the same values for MPE, from the observations it already has:
what the adapter itself costs), then each one's share of the floor. Random uniform actions,
pre-generated. The three take turns in short chunks (``--rounds`` of each) and each figure is the
median chunk by this process's CPU time (``--clock wall`` for the wall clock): on a shared machine
the load then drifts under all three alike.

It then plays ``--episodes`` episodes of random actions and prints the mean episode return per
agent (the team return of ``reward="team"``: the mean over the agents of their episode returns), the
random-play baseline of the task.

    python -m bench.bench_pettingzoo [--sizes 1 16 64] [--agents 3] [--cycles 25] [--rounds 15]
                                     [--chunk 0.2] [--episodes 200] [--clock cpu]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from bench.harness.random_play import random_play
from bench.harness.stamp import load1, stamp, stamp_line
from rl_system.envs.pettingzoo_adapter import PREFIX, PettingZooVecEnv

TARGET = "mpe2.simple_spread_v3:parallel_env"
N_ACTION_BATCHES = 32


def raw_stepper(n: int, kwargs: dict, actions: np.ndarray) -> Callable[[int], None]:
    """One batch step of ``n`` raw copies stepped one after another; ``actions`` ``[B, n, agents]``."""
    module = importlib.import_module(TARGET.split(":")[0])
    envs = [module.parallel_env(**kwargs) for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    agents = envs[0].possible_agents

    def one(t: int) -> None:
        for env, row in zip(envs, actions[t % len(actions)]):
            env.step({a: row[j] for j, a in enumerate(agents) if a in env.agents})
            if not env.agents:
                env.reset()

    return one


def adapter_stepper(n: int, kwargs: dict, actions: np.ndarray, state: str) -> Callable[[int], None]:
    env = PettingZooVecEnv(TARGET, num_envs=n, seed=0, state=state, **kwargs)
    env.reset()
    batches = [torch.from_numpy(a) for a in actions]
    return lambda t: env.step(batches[t % len(batches)])


def interleaved_rates(steppers: dict[str, Callable[[int], None]], items: int, chunk_s: float, rounds: int,
                      clock: Callable[[], float]) -> dict[str, float]:
    """Items/s of each stepper: the median over ``rounds`` chunks of about ``chunk_s``, the
    steppers taking turns chunk by chunk."""
    calls = {}
    for name, one in steppers.items():  # warm up, then size a chunk
        for t in range(3):
            one(t)
        t0, k = time.perf_counter(), 0
        while time.perf_counter() - t0 < chunk_s / 2:
            one(k)
            k += 1
        calls[name] = max(2, int(2 * k))
    rates: dict[str, list[float]] = {name: [] for name in steppers}
    for _ in range(rounds):
        for name, one in steppers.items():
            c0 = clock()
            for t in range(calls[name]):
                one(t)
            rates[name].append(items * calls[name] / max(clock() - c0, 1e-9))
    return {name: statistics.median(r) for name, r in rates.items()}


def random_return(kwargs: dict, episodes: int, num_envs: int = 8, seed: int = 0) -> tuple[float, float]:
    """Mean and standard error of the per-agent mean episode return of uniform random actions over
    ``episodes`` episodes (``num_envs`` copies, seeded): :func:`bench.harness.random_play.random_play`, the
    random-play row of the MPE table beside BenchMARL."""
    return random_play(PREFIX + TARGET, {**kwargs, "reward": "team"}, episodes, num_envs, seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--chunk", type=float, default=0.2, help="seconds per chunk")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    kwargs = {"N": args.agents, "max_cycles": args.cycles, "continuous_actions": False}
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    st = stamp("pettingzoo", "mpe2")
    print(f"simple_spread_v3 N={args.agents} max_cycles={args.cycles}, random actions, torch on 1 thread; env steps/s "
          f"by {args.clock} time, median of {args.rounds} interleaved chunks\n")
    print('| num_envs | raw ParallelEnv loop | adapter | adapter, state="obs" | adapter / raw | state="obs" / raw |')
    print("|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        actions = np.random.default_rng(0).integers(0, 5, (N_ACTION_BATCHES, n, args.agents), dtype=np.int64)
        steppers = {"raw": raw_stepper(n, kwargs, actions), "env": adapter_stepper(n, kwargs, actions, "auto"),
                    "obs": adapter_stepper(n, kwargs, actions, "obs")}
        r = interleaved_rates(steppers, n, args.chunk, args.rounds, clock)
        print(f"| {n} | {r['raw']:,.0f} | {r['env']:,.0f} | {r['obs']:,.0f} | {r['env'] / r['raw']:.2f} "
              f"| {r['obs'] / r['raw']:.2f} |", flush=True)
    if args.episodes:
        mean, se = random_return(kwargs, args.episodes)
        print(f"\nrandom play: mean episode return per agent {mean:.2f} +- {se:.2f} (standard error) over "
              f"{args.episodes} episodes")
    st["load_1m_after"] = load1()
    print(f"\n{stamp_line(st)} pettingzoo {st['pettingzoo']}, mpe2 {st['mpe2']}.")


if __name__ == "__main__":
    main()
