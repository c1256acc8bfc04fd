"""MinAtar (Young & Tian 2019) with PPO and the small CNN: ``launch/configs/minatar_breakout_ppo.yaml``
on Breakout and SpaceInvaders, seed by seed: the final 100-episode training mean return, a
deterministic test of the final policy, and the end-to-end env steps/s.

Published figures for the same budget (5M frames, sticky actions 0.1, the games' full action
sets; 30 seeds, read off the learning curves of the MinAtar paper, Young & Tian 2019, Fig. 2,
``img/learning_curves.gif`` in the ``kenjyoung/MinAtar`` repository; approximate):

=============  =====  ==========  =====
game           DQN    AC(lambda)  AC(0)
=============  =====  ==========  =====
Breakout       ~10    ~17-18      ~15
SpaceInvaders  ~43    ~185        ~145
=============  =====  ==========  =====

gymnax's PPO (``gymnax`` README, MinAtar without sticky actions, 10M steps): Breakout 28,
SpaceInvaders 131.

    python -m bench.bench_minatar                         # both games, seeds 0 1 2, 5M env steps
    python -m bench.bench_minatar --games Breakout --seeds 0 --steps 2000000

Writes ``bench/results/minatar/minatar.{json,md}`` and one JSON per run. Needs
``pip install 'rl-system[minatar]'``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.trained import train_row, write_tables

CONFIG = "launch/configs/minatar_breakout_ppo.yaml"
GAMES = {"Breakout": "gym:envs.minatar_gym:MinAtar/Breakout-v1",
         "SpaceInvaders": "gym:envs.minatar_gym:MinAtar/SpaceInvaders-v1"}
PUBLISHED = {"Breakout": {"DQN (MinAtar paper, 5M)": 10, "AC(lambda) (MinAtar paper, 5M)": 17.5},
             "SpaceInvaders": {"DQN (MinAtar paper, 5M)": 43, "AC(lambda) (MinAtar paper, 5M)": 185}}
TEST_EPISODES = 100


def _joined(values) -> str:
    return ", ".join(f"{v:.1f}" for v in values)


def _rates(runs) -> str:
    """End-to-end env steps/s per seed (runs from different sittings are not averaged)."""
    return ", ".join(f"{r['env_steps'] / r['train_wall_s']:,.0f}" for r in runs)


def markdown(st: dict[str, Any], runs: list[dict[str, Any]], argv: str) -> str:
    lines = [f"# MinAtar: PPO with the small CNN ({st['date_utc']}, commit {st['commit']})", "",
             f"`{argv}` on {st['cpu']} ({st['cores']} cores), torch {st['torch']}, Ray {st['ray']}.", "",
             "| game | seeds | env steps | final 100-episode mean (per seed) | deterministic test (per seed) | "
             "env steps/s (per seed) | published (same budget) |", "|---|---|---:|---|---|---:|---|"]
    for game in GAMES:
        its = sorted((r for r in runs if r["env"] == game), key=lambda r: r["seed"])
        if not its:
            continue
        pub = ", ".join(f"{k}: ~{v}" for k, v in PUBLISHED[game].items())
        lines.append(f"| {game} | {' '.join(str(r['seed']) for r in its)} | {its[0]['env_steps']:,} | "
                     f"{_joined(r['final_return'] for r in its)} | {_joined(r['test']['return_mean'] for r in its)} | "
                     f"{_rates(its)} | {pub} |")
    where = [f"{r['env']} seed {r['seed']}: {r['commit']}, {r['cpu_kernels']} kernels" for r in runs if "commit" in r]
    if where:
        lines += ["", "Where each run ran (runs without this trained before it was recorded): " + "; ".join(where) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", nargs="+", default=list(GAMES), choices=list(GAMES))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=5_000_000)
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="JSON")
    ap.add_argument("--out", type=Path, default=Path("bench/results/minatar"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    if args.from_runs:
        runs = [json.loads(p.read_text()) for p in args.from_runs if p.name != "minatar.json"]
    else:
        for game in args.games:
            for seed in args.seeds:
                print(f"{game} seed {seed} ...", flush=True)
                r = train_row(CONFIG, [f"env.name={GAMES[game]}", f"max_env_steps={args.steps}",
                                       "checkpoint.every_rounds=0"], seed, args.out / "runs" / f"{game}-s{seed}",
                              test_episodes=TEST_EPISODES, test_envs=32)
                r.update(peer="rl_system", env=game)
                (args.out / f"{game}_s{seed}.json").write_text(json.dumps(r))
                runs.append(r)
    write_tables(args.out, "minatar", runs, markdown, "python -m bench.bench_minatar")


if __name__ == "__main__":
    main()
