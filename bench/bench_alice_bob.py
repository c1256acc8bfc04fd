"""Env-only throughput (env steps per second) of the batched Alice_and_Bob env (``rl_system.envs.alice_bob``).

Steps ``AliceBobVecEnv`` (``--size``, default map and 5 x 5 views unless told otherwise) with two
action sources:

* ``random``: pre-generated uniform random actions (episodes end by the time limit, all envs
  together, so most steps have no reset);
* ``oracle``: the scripted solver (``oracle_actions``), computed every step and included in the
  timing; every episode succeeds, so the success/auto-reset path runs regularly.

One "env step" is one step of one env (both agents act). Each row is the best of ``--repeats``
runs of about ``--seconds``; ``wall`` is steps/s by the wall clock, ``cpu`` by this process's CPU
time (steadier on a shared machine). ``ms/step`` is the wall time of one batched ``step``.

    python -m bench.bench_alice_bob [--sizes 256 1024 4096] [--size default] [--repeats 3]
                                    [--seconds 0.5] [--threads 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import os

import torch

from bench.harness.timing import best_rates
from rl_system.envs.alice_bob import N_ACTIONS, AliceBobVecEnv

N_ACTION_BATCHES = 32


def bench(n: int, policy: str, size: str, device: str, seconds: float, repeats: int
          ) -> tuple[float, float, float]:
    env = AliceBobVecEnv(n, device=device, seed=0, size=size)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, N_ACTIONS, (n, 2), generator=gen).to(device) for _ in range(N_ACTION_BATCHES)]
    if policy == "oracle":
        def one(i: int) -> None:
            env.step(env.oracle_actions())
    else:
        def one(i: int) -> None:
            env.step(actions[i % N_ACTION_BATCHES])
    sync = torch.cuda.synchronize if env.device.type == "cuda" else None
    return best_rates(one, n, seconds, repeats, warmup=10, probe_s=0.1, min_calls=5, sync=sync)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--size", default="default", help="map: small, default or large")
    parser.add_argument("--policies", nargs="+", default=["random", "oracle"], choices=["random", "oracle"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, device={args.device}, map={args.size}, threads={torch.get_num_threads()}, "
          f"cores={os.cpu_count()}, load avg(1m)={load:.2f}")
    print(f"{'num_envs':>8} {'policy':>7} {'wall steps/s':>14} {'cpu steps/s':>14} {'ms/step':>9}")
    for n in args.sizes:
        for policy in args.policies:
            wall, cpu, ms = bench(n, policy, args.size, args.device, args.seconds, args.repeats)
            print(f"{n:>8} {policy:>7} {wall:>14,.0f} {cpu:>14,.0f} {ms:>9.2f}", flush=True)


if __name__ == "__main__":
    main()
