"""Env-only throughput (env steps per second) of VMAS scenarios through the adapter
(``rl_system.envs.vmas_adapter``), with the batched auto-reset against VMAS's ``reset_at`` loop.

Each scenario runs ``num_envs`` envs with uniform random discrete actions (pre-generated) and the
adapter's default ``max_steps=100``; ``reset`` is ``batched`` (finished envs reset in one
vectorized reset) or ``loop`` (``reset_at`` per finished env). One "env step" is one step of one
env (all its agents act). Each row is the best of ``--repeats`` runs of about ``--seconds``;
``wall`` is steps/s by the wall clock, ``cpu`` by this process's CPU time (steadier on a shared
machine); ``ms/step`` is the wall time of one batched ``step``; ``resets/step`` the mean number
of envs reset per step over all the calls.

    python -m bench.bench_vmas [--scenarios balance transport wheel] [--num-envs 1024]
                               [--repeats 2] [--seconds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import warnings

import torch

from bench.harness.markdown import md_table, num
from bench.harness.timing import best_rates
from rl_system.envs.vmas_adapter import VmasVecEnv

N_ACTION_BATCHES = 32


def bench(scenario: str, n: int, batched: bool, seconds: float, repeats: int) -> tuple[float, float, float, float]:
    """``(wall, cpu, ms, resets per step)`` for ``n`` envs of ``scenario``."""
    env = VmasVecEnv(scenario, n, seed=0, batched_reset=batched)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    shape = (n, *env.action_spec.shape)
    actions = [torch.randint(0, env.action_spec.n, shape, generator=gen) for _ in range(N_ACTION_BATCHES)]
    counts = [0, 0]  # steps, resets

    def one(i: int) -> None:
        done = env.step(actions[i % N_ACTION_BATCHES])
        counts[0] += 1
        counts[1] += int((done.terminated | done.truncated).sum())

    wall, cpu, ms = best_rates(one, n, seconds, repeats, warmup=5, probe_s=0.2, min_calls=5)
    return wall, cpu, ms, counts[1] / counts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=["balance", "transport", "wheel"])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="vmas")  # scenario-kwarg chatter
    import vmas

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, vmas {vmas.__version__}, num_envs={args.num_envs}, "
          f"threads={torch.get_num_threads()}, cores={os.cpu_count()}, load avg(1m)={load:.2f}\n")
    rows = []
    for scenario in args.scenarios:
        for batched in (True, False):
            wall, cpu, ms, resets = bench(scenario, args.num_envs, batched, args.seconds, args.repeats)
            rows.append([scenario, "batched" if batched else "loop", num(wall), num(cpu), num(ms, 2), num(resets, 1)])
    header = ["scenario", "reset", "wall steps/s", "cpu steps/s", "ms/step", "resets/step"]
    print("\n".join(md_table(header, rows)))


if __name__ == "__main__":
    main()
