"""Env-only throughput (env steps per second) of the batched Overcooked env beside overcooked-ai 1.1.0's own stepping.

Rows:

* ``rl_system N=...``: ``OvercookedVecEnv`` stepping ``N`` kitchens at once with pre-generated random joint
  actions (half of them interacts, so objects move and pots fill), observations (the lossless encoding of both
  cooks) included; episodes end at the 400-step horizon and restart in the same step.
* ``overcooked-ai``: one kitchen stepped by the reference's ``OvercookedGridworld.get_state_transition`` with the
  same kind of actions, without (``transition``) and with (``+ lossless obs``) its ``lossless_state_encoding``
  of both cooks, the observation the batched env returns. Skipped where overcooked-ai is not installed.

One "env step" is one step of one kitchen (both cooks act). Each row is the best of ``--repeats`` runs of about
``--seconds``; ``cpu`` counts this process's CPU time (steadier on a shared machine). Prints a Markdown table.

    python -m bench.bench_overcooked [--layouts cramped_room ...] [--sizes 1024] [--threads 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys

import torch

from bench.harness.timing import best_rates
from rl_system.envs.overcooked import OvercookedVecEnv

N_ACTION_BATCHES = 32


def random_actions(n: int, gen: torch.Generator) -> torch.Tensor:
    """Joint actions ``[n, 2]``: interact half the time, else a uniform move or stay."""
    moves = torch.randint(0, 5, (n, 2), generator=gen)
    return torch.where(torch.rand((n, 2), generator=gen) < 0.5, 5, moves)


def bench_batched(layout: str, n: int, seconds: float, repeats: int, device: str) -> tuple[float, float, float]:
    env = OvercookedVecEnv(n, device=device, layout=layout, reward_shaping=1.0)
    env.reset()
    gen = torch.Generator().manual_seed(0)
    actions = [random_actions(n, gen).to(device) for _ in range(N_ACTION_BATCHES)]
    sync = torch.cuda.synchronize if env.device.type == "cuda" else None
    return best_rates(lambda i: env.step(actions[i % N_ACTION_BATCHES]), n, seconds, repeats, warmup=10, sync=sync)


def bench_reference(layout: str, seconds: float, repeats: int, obs: bool) -> tuple[float, float, float] | None:
    try:
        from tests.support.overcooked_oracle import import_mdp  # `python -m bench...` runs from the repository root

        om = import_mdp()
    except BaseException:  # noqa: BLE001 - pytest's skip is not an Exception: overcooked-ai is not installed
        return None
    from overcooked_ai_py.mdp.actions import Action

    mdp = om.OvercookedGridworld.from_layout_name(layout)
    rng = random.Random(0)
    joint = [tuple(Action.INDEX_TO_ACTION[5 if rng.random() < 0.5 else rng.randrange(5)] for _ in range(2))
             for _ in range(997)]
    box = {"state": mdp.get_standard_start_state()}

    def one(i: int) -> None:
        state, _ = mdp.get_state_transition(box["state"], joint[i % len(joint)])
        if obs:
            mdp.lossless_state_encoding(state, horizon=400)
        box["state"] = mdp.get_standard_start_state() if state.timestep >= 400 else state

    return best_rates(one, 1, seconds, repeats, warmup=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", nargs="+", default=["cramped_room", "counter_circuit_o_1order"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the batched env runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"`python -m bench.bench_overcooked {' '.join(sys.argv[1:])}`".replace(" `", "`"))
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch thread(s), load avg (1 min) {load:.2f} at the start.\n")
    print("| layout | stepper | wall env steps/s | cpu env steps/s | ms per call |")
    print("|---|---|---:|---:|---:|")
    for layout in args.layouts:
        for n in args.sizes:
            wall, cpu, ms = bench_batched(layout, n, args.seconds, args.repeats, args.device)
            where = "" if args.device == "cpu" else f" on {args.device}"
            print(f"| {layout} | rl_system N={n:,}{where} | {wall:,.0f} | {cpu:,.0f} | {ms:.2f} |", flush=True)
        for obs in (False, True):
            got = bench_reference(layout, args.seconds, args.repeats, obs)
            what = "overcooked-ai 1.1.0, transition" + (" + lossless obs" if obs else "")
            if got is None:
                print(f"| {layout} | {what} | not installed | | |")
                continue
            wall, cpu, ms = got
            print(f"| {layout} | {what} | {wall:,.0f} | {cpu:,.0f} | {ms:.3f} |", flush=True)


if __name__ == "__main__":
    main()
