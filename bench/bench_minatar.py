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

The peer run beside it (``--systems sb3_ppo``) is Stable-Baselines3's PPO with the same network,
hyperparameters and envs (:mod:`bench.peers.sb3_minatar`): the same learning problem in a
single-process trainer, so its row shows what rl_system's distribution costs or gains in
env steps/s and whether its learning matches at the same budget.

    python -m bench.bench_minatar                         # both games, seeds 0 1 2, both systems, 5M env steps
    python -m bench.bench_minatar --games Breakout --seeds 0 --steps 2000000
    python -m bench.bench_minatar --games Breakout --seeds 0 --systems sb3_ppo
    python -m bench.bench_minatar --games Breakout --seeds 0 --systems rl_system \\
        --set learner.torch_threads=2 --tag threads2       # -> Breakout_threads2_s0.json.xz
    python -m bench.bench_minatar --from-runs bench/results/minatar/*_s[0-9].json.xz   # the table again

Writes one ``.json.xz`` per run (rl_system's ``<Game>_s<seed>``, the peer's
``<Game>_sb3_ppo_s<seed>``: curve, figures, test) and ``minatar.{json,md}`` (the stamp, the runs'
files, the table) to ``--out`` (default ``bench/results/minatar``). Needs
``pip install 'rl-system[bench]'``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.harness.learning import read_run, train_row
from bench.harness.results import RESULTS, write_run, write_tables
from bench.harness.stamp import where_it_ran

CONFIG = "launch/configs/minatar_breakout_ppo.yaml"
GAMES = {"Breakout": "gym:rl_system.envs.minatar_gym:MinAtar/Breakout-v1",
         "SpaceInvaders": "gym:rl_system.envs.minatar_gym:MinAtar/SpaceInvaders-v1"}
PUBLISHED = {"Breakout": {"DQN (MinAtar paper, 5M)": 10, "AC(lambda) (MinAtar paper, 5M)": 17.5},
             "SpaceInvaders": {"DQN (MinAtar paper, 5M)": 43, "AC(lambda) (MinAtar paper, 5M)": 185}}
TEST_EPISODES = 100
SYSTEMS = ("rl_system", "sb3_ppo")


def _joined(values) -> str:
    return ", ".join(f"{v:.1f}" for v in values)


def _rates(runs) -> str:
    """End-to-end env steps/s per seed (runs from different sittings are not averaged)."""
    return ", ".join(f"{r['env_steps'] / r['train_wall_s']:,.0f}" for r in runs)


def _system(run: dict[str, Any]) -> str:
    """The table's name for what trained ``run``: ``sb3_ppo (2 threads)``, or ``rl_system`` with
    the ``--set`` overrides it was trained with beyond the game and budget."""
    if run.get("peer") == "sb3_ppo":
        return f"sb3_ppo ({run['threads']} thread{'s' if run['threads'] > 1 else ''})"
    own = ("env.name=", "max_env_steps=", "checkpoint.every_rounds=")
    extra = [o for o in run.get("overrides", []) if not o.startswith(own)]
    return "rl_system" + (f" ({', '.join(extra)})" if extra else "")


def markdown(st: dict[str, Any], runs: list[dict[str, Any]], argv: str) -> str:
    lines = [f"# MinAtar: PPO with the small CNN ({st['date_utc']}, commit {st['commit']})", "",
             f"`{argv}` on {st['cpu']} ({st['cores']} cores), torch {st['torch']}, Ray {st['ray']}.", "",
             ("| game | system | seeds | env steps | final 100-episode mean (per seed) | deterministic test (per seed) | "
              "env steps/s (per seed) | published (same budget) |"), "|---|---|---|---:|---|---|---:|---|"]
    for game in GAMES:
        for system in sorted({_system(r) for r in runs if r["env"] == game}, key=lambda s: (s.startswith("sb3"), s)):
            its = sorted((r for r in runs if r["env"] == game and _system(r) == system), key=lambda r: r["seed"])
            pub = ", ".join(f"{k}: ~{v}" for k, v in PUBLISHED[game].items()) if system == "rl_system" else ""
            tests = [r["test"]["return_mean"] for r in its if "test" in r]
            lines.append(f"| {game} | {system} | {' '.join(str(r['seed']) for r in its)} | {its[0]['env_steps']:,} | "
                         f"{_joined(r['final_return'] for r in its)} | {_joined(tests) if tests else '—'} | "
                         f"{_rates(its)} | {pub} |")
    where = [f"{r['env']} {_system(r)} seed {r['seed']}: {r['commit']}, {r['cpu_kernels']} kernels"
             for r in runs if "commit" in r]
    if where:
        lines += ["", "Where each run ran (runs without this trained before it was recorded): " + "; ".join(where) + "."]
    return "\n".join(lines) + "\n"


def run_peer(game: str, seed: int, steps: int, schedule_steps: int, threads: int) -> dict[str, Any]:
    """:mod:`bench.peers.sb3_minatar` on ``game``, with where it ran."""
    from bench.peers.sb3_minatar import run

    r = run(game, steps, seed, schedule_steps=schedule_steps, threads=threads, test_episodes=TEST_EPISODES)
    return {**r, **where_it_ran()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", nargs="+", default=list(GAMES), choices=list(GAMES))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=5_000_000)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--peer-steps", type=int, default=None,
                    help="the peer's budget (default: --steps); its learning-rate schedule still spans --steps")
    ap.add_argument("--peer-threads", type=int, default=2,
                    help="the peer's torch threads (2 ran it 1.6x faster than 1 on 2 cores)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of rl_system's config (repeatable; recorded in the run's JSON)")
    ap.add_argument("--tag", default=None,
                    help="names runs trained with --set: <Game>_<tag>_s<seed>.json.xz (required with --set)")
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="JSON")
    ap.add_argument("--out", type=Path, default=RESULTS / "minatar")
    args = ap.parse_args()
    if args.set and not args.tag:
        ap.error("--set needs --tag: runs with overrides must not replace the shipped config's files")
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"_{args.tag}" if args.tag else ""
    runs: list[dict[str, Any]] = []
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs if p.name != "minatar.json"]
    else:
        for game in args.games:
            for seed in args.seeds:
                if "sb3_ppo" in args.systems:
                    print(f"{game} seed {seed}: sb3_ppo ...", flush=True)
                    r = run_peer(game, seed, args.peer_steps or args.steps, args.steps, args.peer_threads)
                    r["source"] = str(write_run(args.out / f"{game}_sb3_ppo_s{seed}", r))
                    runs.append(r)
                if "rl_system" not in args.systems:
                    continue
                print(f"{game} seed {seed}: rl_system ...", flush=True)
                r = train_row(CONFIG, [f"env.name={GAMES[game]}", f"max_env_steps={args.steps}",
                                       "checkpoint.every_rounds=0", *args.set], seed,
                              args.out / "runs" / f"{game}{name}-s{seed}", test_episodes=TEST_EPISODES, test_envs=32)
                r.update(peer="rl_system", env=game)
                r["source"] = str(write_run(args.out / f"{game}{name}_s{seed}", r))
                runs.append(r)
    print(write_tables(args.out, "minatar", runs, markdown, "python -m bench.bench_minatar"))


if __name__ == "__main__":
    main()
