"""What random play finds on Overcooked under each set of rules: how often uniform random cooks serve a
soup, and how often one that an order pays for, with overcooked-ai 1.1.0's rules (an interact starts a
pot with any number of ingredients) and with ``old_dynamics`` (a pot starts by itself once full).

The sparse reward (+20 a soup an order wants) is all a policy starts from on the paper's task: the
share of episodes with a reward in them is how often the first update sees one.

    python -m bench.bench_overcooked_random [--layouts cramped_room coordination_ring] [--envs 1024] \
        [--out bench/results/overcooked/random_play]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from bench.harness.markdown import md_table
from bench.harness.results import command_line, write_suite
from bench.harness.stamp import load1, stamp, stamp_line
from rl_system.envs.overcooked import OvercookedVecEnv
from rl_system.envs.overcooked.env import N_ACTIONS

LAYOUTS = ["cramped_room", "asymmetric_advantages", "coordination_ring", "forced_coordination",
           "counter_circuit_o_1order"]
SOUP_VALUE = 20.0  # the classic layouts' one order, three onions


def random_episodes(layout: str, old_dynamics: bool, envs: int, seed: int = 0) -> dict[str, Any]:
    """One 400-step episode in each of ``envs`` kitchens, both cooks uniform over the six actions."""
    env = OvercookedVecEnv(envs, layout=layout, seed=seed, old_dynamics=old_dynamics)
    env.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed)
    sparse = torch.zeros(envs)
    for _ in range(env.horizon):
        out = env.step(torch.randint(0, N_ACTIONS, (envs, 2), generator=gen))
        sparse += out.info["sparse_reward"].sum(1)
    served = out.info["soups_served"].float()
    paid = sparse / SOUP_VALUE
    return {"layout": layout, "rules": "old_dynamics" if old_dynamics else "overcooked-ai 1.1.0",
            "episodes": envs, "soups_served": float(served.mean()), "soups_paid": float(paid.mean()),
            "episodes_with_reward": float((sparse > 0).float().mean()), "sparse_reward": float(sparse.mean())}


def markdown(st: dict[str, Any], rows: list[dict[str, Any]], command: str) -> str:
    header = ["layout", "rules", "episodes", "soups served per episode", "of which paid (3 onions)",
              "episodes with a reward", "sparse reward per episode"]
    body = [[r["layout"], r["rules"], f"{r['episodes']:,}", f"{r['soups_served']:.3f}", f"{r['soups_paid']:.3f}",
             f"{r['episodes_with_reward']:.1%}", f"{r['sparse_reward']:.2f}"] for r in rows]
    return "\n".join([f"# Overcooked: random play under each set of rules ({st['date_utc']})", "",
                      f"`{command}`", "", stamp_line(st), "", *md_table(header, body), ""])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layouts", nargs="+", default=LAYOUTS)
    ap.add_argument("--envs", type=int, default=1024, help="kitchens, one episode each, per layout and rules")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    st = stamp()
    rows = [random_episodes(layout, old, args.envs) for layout in args.layouts for old in (False, True)]
    st["load_1m_after"] = load1()
    text = markdown(st, rows, command_line("python -m bench.bench_overcooked_random", argv))
    print(text)
    if args.out is not None:
        write_suite(args.out, "random_play", {"meta": st, "rows": rows}, text)


if __name__ == "__main__":
    main(sys.argv[1:])
