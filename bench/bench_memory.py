"""Memory benchmarks: recurrent PPO on partially observable tasks, beside sb3-contrib.

* **CartPole with the velocities hidden** (observation ``[x, theta]``): rl_system's
  ``launch/configs/cartpole_memory_ppo.yaml`` (GRU) and the same config with ``model.recurrent:
  none`` (an MLP, which cannot infer the velocities), against sb3-contrib's RecurrentPPO with the RL
  Zoo's ``CartPoleNoVel-v1`` settings (:mod:`bench.peers.sb3_recurrent_ppo`), seed by seed in one
  run: env steps and time until the 100-episode training mean first reaches 475 (budget 1M).
* **POPGym** (``popgym`` package, Easy level): the same recurrent config on
  ``PositionOnlyCartPoleEasy`` (the paper's StatelessCartPole) and ``RepeatPreviousEasy``: the
  final 100-episode mean return (POPGym's rewards are scaled so that a return lies in [-1, 1]).

    python -m bench.bench_memory                        # seeds 0 1 2, all parts
    python -m bench.bench_memory --parts cartpole --seeds 0
    python -m bench.bench_memory --from-runs bench/results/memory/*_s[0-9].json.xz

Writes one ``.json.xz`` per run (``<label>_s<seed>``: curve and figures) and ``memory.{json,md}``
(the stamp, the runs' files, the tables) to ``--out`` (default ``bench/results/memory``). Needs
``pip install 'rl-system[bench]'`` (sb3-contrib, popgym).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.harness.learning import read_run, train_row
from bench.harness.results import RESULTS, run_index, write_run, write_suite
from bench.harness.stamp import stamp

CONFIG = "launch/configs/cartpole_memory_ppo.yaml"
TARGET = 475.0
POPGYM = {"PositionOnlyCartPoleEasy": "gym:popgym:popgym-PositionOnlyCartPoleEasy-v0",
          "RepeatPreviousEasy": "gym:popgym:popgym-RepeatPreviousEasy-v0"}
POPGYM_STEPS = 2_000_000
POPGYM_MARK = 0.99
"""POPGym's returns lie in [-1, 1]: the curves are read at a mean of 0.99 (the paper's MMER is 1.0)."""


def run_ours(label: str, overrides: list[str], seed: int, steps: int, out: Path) -> dict[str, Any]:
    row = train_row(CONFIG, [f"max_env_steps={steps}", "checkpoint.every_rounds=0", *overrides], seed,
                    out / "runs" / f"{label.replace(':', '-')}-s{seed}")
    row.update(peer=label, env=label.split(":")[-1])
    if row["steps_to_target"] is not None:  # the run stopped at the target: its CPU time is the time to it
        row["cpu_to_target_s"] = row["train_cpu_s"]
    return row


def run_sb3(seed: int, steps: int) -> dict[str, Any]:
    from bench.peers.sb3_recurrent_ppo import run

    r = run(steps, seed, TARGET)
    hit = next((row for row in r["curve"] if row[2] >= TARGET), None)
    r.update(env="CartPoleNoVel", steps_to_target=hit[0] if hit else None, time_to_target_s=hit[1] if hit else None,
             cpu_to_target_s=hit[3] if hit else None, best_return=max((row[2] for row in r["curve"]), default=None))
    return r


def marks(curve: list, level: float) -> tuple[int | None, int | None]:
    """``(first, stays)``: the env steps of the first curve point whose mean return reaches
    ``level``, and of the first from which every later point does (None: never)."""
    first = next((row[0] for row in curve if row[2] >= level), None)
    stays = None
    for row in reversed(curve):
        if row[2] < level:
            break
        stays = row[0]
    return first, stays


def _steps(n: int | None) -> str:
    return "—" if n is None else f"{n / 1000:,.0f}k"


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for peer in sorted({r["peer"] for r in runs}):
        its = sorted((r for r in runs if r["peer"] == peer), key=lambda r: r["seed"])
        rows.append({"peer": peer, "env": its[0]["env"], "seeds": [r["seed"] for r in its],
                     "reached": f"{sum(r['steps_to_target'] is not None for r in its)}/{len(its)}",
                     "steps_to_target": _median([r["steps_to_target"] for r in its]),
                     "time_to_target_s": _median([r["time_to_target_s"] for r in its]),
                     "cpu_to_target_s": _median([r.get("cpu_to_target_s") for r in its]),
                     "final_returns": [round(r["final_return"], 3) for r in its],
                     "best_returns": [round(r["best_return"], 3) for r in its if r.get("best_return") is not None],
                     "env_steps": [r["env_steps"] for r in its],
                     "marks": [marks(r["curve"], POPGYM_MARK) for r in its] if its[0]["env"] in POPGYM else None})
    return rows


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]], argv: str) -> str:
    st = meta["stamp"]
    lines = [f"# Memory: recurrent PPO beside sb3-contrib ({st['date_utc']}, commit {st['commit']})", "",
             (f"`{argv}` on {st['cpu']} ({st['cores']} cores), Python {st['python']}, torch {st['torch']}, "
             f"Ray {st['ray']}, Gymnasium {st['gymnasium']}."), "",
             ("| peer | env | seeds | reached 475 | median env steps to 475 | median time to 475 | "
             "final 100-episode mean (per seed) | best |"), "|---|---|---|---|---:|---:|---|---|"]
    for r in rows:
        steps = f"{r['steps_to_target']:,.0f}" if r["steps_to_target"] is not None else "—"
        wall = f"{r['time_to_target_s']:.0f} s" if r["time_to_target_s"] is not None else "—"
        if r.get("cpu_to_target_s") is not None:
            wall += f" ({r['cpu_to_target_s']:.0f} CPU s)"
        lines.append(f"| {r['peer']} | {r['env']} | {' '.join(map(str, r['seeds']))} | {r['reached']} | {steps} | "
                     f"{wall} | {', '.join(f'{x:g}' for x in r['final_returns'])} | "
                     f"{', '.join(f'{x:g}' for x in r['best_returns'])} |")
    popgym = [r for r in rows if r["env"] in POPGYM]
    if popgym:
        lines += ["", (f"POPGym: the env steps at which the 100-episode mean first reaches {POPGYM_MARK} and from "
                      f"which it stays at or above it (per seed)."), "",
                  "| env | seeds | first reaches | stays from |", "|---|---|---|---|"]
        for r in popgym:
            lines.append(f"| {r['env']} | {' '.join(map(str, r['seeds']))} | "
                         f"{', '.join(_steps(m[0]) for m in r['marks'])} | {', '.join(_steps(m[1]) for m in r['marks'])} |")
    ours = next((r for r in rows if r["peer"] == "rl_system_gru"), None)
    peer = next((r for r in rows if r["peer"] == "sb3_contrib_recurrent_ppo"), None)
    if ours and peer and ours["time_to_target_s"] and peer["time_to_target_s"]:
        lines += ["", (f"Time to 475, sb3-contrib / rl_system, medians: wall time "
                      f"**{peer['time_to_target_s'] / ours['time_to_target_s']:.1f}×**")]
        if ours.get("cpu_to_target_s") and peer.get("cpu_to_target_s"):
            lines[-1] += (f", CPU time **{peer['cpu_to_target_s'] / ours['cpu_to_target_s']:.1f}×** (rl_system: its "
                          f"workers' and learner's processes; sb3-contrib: its one process), "
                          f"sb3-contrib's CPU time / rl_system's wall time "
                          f"**{peer['cpu_to_target_s'] / ours['time_to_target_s']:.1f}×**")
        lines[-1] += "."
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--parts", nargs="+", default=["cartpole", "mlp", "sb3", "popgym"],
                    choices=["cartpole", "mlp", "sb3", "popgym"])
    ap.add_argument("--popgym-steps", type=int, default=POPGYM_STEPS)
    ap.add_argument("--popgym-envs", nargs="+", default=list(POPGYM), choices=list(POPGYM))
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="JSON")
    ap.add_argument("--out", type=Path, default=RESULTS / "memory")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs if p.name != "memory.json"]
    else:
        for seed in args.seeds:
            jobs = []
            if "cartpole" in args.parts:
                jobs.append(("rl_system_gru", lambda s=seed: run_ours("rl_system_gru:CartPole-positions", [], s,
                                                                         args.steps, args.out)))
            if "mlp" in args.parts:
                jobs.append(("rl_system_mlp", lambda s=seed: run_ours(
                    "rl_system_mlp:CartPole-positions", ["model.recurrent=none", "target_return=null"], s,
                    args.steps, args.out)))
            if "sb3" in args.parts:
                jobs.append(("sb3_contrib_recurrent_ppo", lambda s=seed: run_sb3(s, args.steps)))
            if "popgym" in args.parts:
                for name in args.popgym_envs:
                    jobs.append((f"rl_system_gru_{name}", lambda s=seed, n=name: run_ours(
                        f"rl_system_gru:{n}", [f"env.name={POPGYM[n]}", "env.kwargs={}", "target_return=null"], s,
                        args.popgym_steps, args.out)))
            for label, job in jobs:
                print(f"seed {seed}: {label} ...", flush=True)
                r = job()
                r["peer"] = label
                r["source"] = str(write_run(args.out / f"{label}_s{seed}", r))
                runs.append(r)
    rows = summarise(runs)
    meta = {"stamp": stamp()}
    text = markdown(meta, rows, "python -m bench.bench_memory " + " ".join(sys.argv[1:]))
    write_suite(args.out, "memory", {"meta": meta, "runs": run_index(runs, args.out), "rows": rows}, text)
    print(text)


if __name__ == "__main__":
    main()
