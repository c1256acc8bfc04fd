"""MAPPO and IPPO on the EPyMARL paper's sparse-reward tasks, Level-Based Foraging and the Multi-Robot
Warehouse, beside the figures the paper publishes (Papoudakis et al., "Benchmarking Multi-Agent Deep
Reinforcement Learning Algorithms in Cooperative Tasks", NeurIPS 2021 Datasets and Benchmarks).

    python -m bench.bench_epymarl --tasks lbf-8x8-2p-2f-coop lbf-10x10-3p-3f rware-tiny-2ag rware-tiny-4ag \\
        --algos mappo ippo --seeds 0 1 2 --env-steps 2000000
    python -m bench.bench_epymarl --from-runs bench/results/epymarl/*_s[0-9]*.json.xz    # the table again

Each run trains the task's config (:data:`TASKS`: ``lbf_8x8_2p_3f_mappo.yaml`` or
``rware_tiny_2ag_mappo.yaml`` with the task's env; IPPO adds ``mappo.critic=local``; ``--set``
overrides every run) for ``--env-steps`` env steps in this process, tests its final policy with
greedy actions over 100 episodes (the paper's evaluation), and stores its curve (env steps, wall s,
the team's mean return of the last 100 training episodes) and figures as
``<task>_<algo>_s<seed>.json.xz`` in ``--out`` (default ``bench/results/epymarl``). The returns
are the paper's: the sum of the agents' rewards (the configs' ``reward: team``).

``epymarl.md`` gives per task and algorithm: the final greedy return (mean ± std over seeds), the
best point of the seed-mean training curve (the paper's maximum is the best point of its seed-mean
evaluation curve), the env step at which each seed's training curve first reached the paper's
maximum return, the paper's maximum and average returns with their tables (from
``bench/results/epymarl/paper.json``, which says which figures were checked), and the budget run
beside the paper's (on-policy: 20M env steps on LBF, 40M on RWARE).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.bench_a2c import thinned
from bench.harness.learning import first_at, read_run, train_row
from bench.harness.markdown import md_table, steps
from bench.harness.results import RESULTS, read_json, write_run, write_tables

PAPER_FILE = RESULTS / "epymarl" / "paper.json"
TEST_EPISODES = 100  # EPyMARL's test_nepisode
LBF_CONFIG, RWARE_CONFIG = "launch/configs/lbf_8x8_2p_3f_mappo.yaml", "launch/configs/rware_tiny_2ag_mappo.yaml"
LBF_BUDGET, RWARE_BUDGET = 20_000_000, 40_000_000
# Why these budgets: the paper trains on-policy algorithms for 20M env steps (its section 4.1, quoted in
# github.com/uoe-agents/epymarl/issues/15); its authors give 40M for RWARE (issues/24: "it should go
# to 4e7") and its plots show a tenth (one of the 10 parallel envs counted, issues/9 and /24).
LBF_NOTE = ("paper: lbforaging 1.0 `-v1`; here 2.0 `-v3`: player levels 1-2 in both, but v3 draws food levels "
            "up to the sum of the players' levels (v1 one short), so tasks without `-coop` need teamwork more often")
COOP_NOTE = "paper: lbforaging 1.0 `-v1`; here 2.0 `-v3`: the same task (food levels = the players' sum in both)"
RWARE_NOTE = "paper: rware `-v1` (gym); here rware 2.0 `-v2` (Gymnasium port): the same layout, queue and 500 steps"


@dataclass(frozen=True)
class Task:
    config: str
    gym_id: str  # in lbforaging 2.0 / rware 2.0
    paper_name: str  # as the paper and EPyMARL's README name it
    paper_budget: int
    note: str


TASKS = {
    "lbf-8x8-2p-2f-coop": Task(LBF_CONFIG, "Foraging-8x8-2p-2f-coop-v3", "8x8-2p-2f-coop", LBF_BUDGET, COOP_NOTE),
    "lbf-8x8-2p-2f-2s-coop": Task(LBF_CONFIG, "Foraging-2s-8x8-2p-2f-coop-v3", "8x8-2p-2f-2s-coop", LBF_BUDGET,
                                  COOP_NOTE),
    "lbf-10x10-3p-3f": Task(LBF_CONFIG, "Foraging-10x10-3p-3f-v3", "10x10-3p-3f", LBF_BUDGET, LBF_NOTE),
    "lbf-10x10-3p-3f-2s": Task(LBF_CONFIG, "Foraging-2s-10x10-3p-3f-v3", "10x10-3p-3f-2s", LBF_BUDGET, LBF_NOTE),
    "lbf-15x15-3p-5f": Task(LBF_CONFIG, "Foraging-15x15-3p-5f-v3", "15x15-3p-5f", LBF_BUDGET, LBF_NOTE),
    "lbf-15x15-4p-3f": Task(LBF_CONFIG, "Foraging-15x15-4p-3f-v3", "15x15-4p-3f", LBF_BUDGET, LBF_NOTE),
    "lbf-15x15-4p-5f": Task(LBF_CONFIG, "Foraging-15x15-4p-5f-v3", "15x15-4p-5f", LBF_BUDGET, LBF_NOTE),
    "rware-tiny-2ag": Task(RWARE_CONFIG, "rware-tiny-2ag-v2", "tiny 2p", RWARE_BUDGET, RWARE_NOTE),
    "rware-tiny-4ag": Task(RWARE_CONFIG, "rware-tiny-4ag-v2", "tiny 4p", RWARE_BUDGET, RWARE_NOTE),
    "rware-small-4ag": Task(RWARE_CONFIG, "rware-small-4ag-v2", "small 4p", RWARE_BUDGET, RWARE_NOTE),
}
"""The paper's LBF and RWARE tasks (EPyMARL's README lists them): our name -> how we run it."""
DEFAULT_TASKS = ["lbf-8x8-2p-2f-coop", "lbf-10x10-3p-3f", "rware-tiny-2ag", "rware-tiny-4ag"]
ALGOS = {"mappo": [], "ippo": ["mappo.critic=local"]}
"""Algorithm -> overrides on the task's MAPPO config (EPyMARL's ippo.yaml differs from its
mappo.yaml only in the critic)."""


# -- runs ------------------------------------------------------------------------------------------


def run(task: str, algo: str, seed: int, env_steps: int, sets: list[str]) -> dict[str, Any]:
    """One training run in a temporary folder (removed after), as a bench row with its greedy test."""
    spec = TASKS[task]
    overrides = [f"env.name=magym:{spec.gym_id}", f"max_env_steps={env_steps}", "checkpoint.every_rounds=0",
                 *ALGOS[algo], *sets]
    folder = Path(tempfile.mkdtemp(prefix="bench_epymarl_"))
    try:
        row = train_row(spec.config, overrides, seed, folder / f"{task}-{algo}-s{seed}", test_episodes=TEST_EPISODES,
                        test_envs=TEST_EPISODES)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {**row, "peer": "rl_system", "task": task, "algo": algo, "run_dir": None,
            "env_steps_per_s": row["env_steps"] / row["train_wall_s"]}


# -- the table -------------------------------------------------------------------------------------


def paper_figures() -> dict[str, Any]:
    return read_json(PAPER_FILE)


def seed_mean_curve(curves: list[list]) -> list[tuple[int, float]]:
    """(env steps, mean return over the seeds) at the rounds every seed's stored curve has (the seeds
    of one config store the same rounds)."""
    by_step = [{row[0]: row[2] for row in c} for c in curves]
    common = sorted(set.intersection(*(set(d) for d in by_step))) if by_step else []
    return [(s, statistics.mean(d[s] for d in by_step)) for s in common]


def mean_std(values: list[float]) -> str:
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {sd:.2f}"


def reached(runs: list[dict[str, Any]], level: float | None) -> str:
    """Per seed, the env step at which its training curve first reached ``level``."""
    if level is None:
        return "– (no paper figure recorded)"
    cells = []
    for r in sorted(runs, key=lambda r: r["seed"]):
        hit = first_at(r["curve"], level)
        cells.append(f"s{r['seed']}: {steps(hit[0])}" if hit else f"s{r['seed']}: not reached within {steps(r['env_steps'])}")
    return ", ".join(cells)


def paper_cell(fig: dict[str, Any], key: str) -> str:
    if fig.get(key) is None:
        return "not recorded"
    ci = fig.get(f"{key}_ci95")
    return f"{fig[key]:.2f}" + (f" ± {ci:.2f}" if ci is not None else "")


def table_rows(runs: list[dict[str, Any]], paper: dict[str, Any]) -> list[list[str]]:
    rows = []
    for task in [t for t in TASKS if any(r["task"] == t for r in runs)]:
        spec = TASKS[task]
        for algo in [a for a in ALGOS if any(r["task"] == task and r["algo"] == a for r in runs)]:
            group = [r for r in runs if r["task"] == task and r["algo"] == algo]
            fig = paper["figures"].get(task, {}).get(algo, {})
            curve = seed_mean_curve([r["curve"] for r in group])
            best = max(curve, key=lambda p: p[1]) if curve else None
            ran = min(r["env_steps"] for r in group)
            budget = f"{steps(ran)} of the paper's {steps(spec.paper_budget)}"
            if ran < spec.paper_budget:
                budget += " (short of it: the paper's budget is beyond this sitting)"
            rows.append([f"{spec.paper_name} (`{spec.gym_id}`)", algo, len(group), budget,
                         mean_std([r["test"]["return_mean"] for r in group]),
                         f"{best[1]:.2f} at {steps(best[0])}" if best else "–", reached(group, fig.get("max")),
                         paper_cell(fig, "max"), paper_cell(fig, "avg"),
                         f"{statistics.mean(r['env_steps_per_s'] for r in group):,.0f}"])
    return rows


def markdown(st: dict[str, Any], runs: list[dict[str, Any]], command: str) -> str:
    paper = paper_figures()
    header = ["task (paper; id here)", "algo", "seeds", "env steps run", "final greedy return (mean ± std)",
              "best of the seed-mean training curve", "env step the paper's max was first reached (training curve)",
              "paper: max return", "paper: average return", "env steps/s"]
    notes = sorted({TASKS[r["task"]].note for r in runs})
    checked = "checked against the paper" if paper.get("verified") else f"NOT checked yet: {paper['note']}"
    return "\n".join([
        f"# MAPPO and IPPO on the EPyMARL paper's LBF and RWARE tasks ({st['date_utc']}, commit {st['commit']})", "",
        f"`{command}` on {st['cpu']} ({st['cores']} cores), torch {st['torch']}, Ray {st['ray']}.", "",
        *md_table(header, table_rows(runs, paper)), "",
        f"Paper: {paper['paper']}. Its figures here ({PAPER_FILE.name}) are {checked}",
        f"* max return: {paper['tables']['max']}. Definition: {paper['definitions']['max']}.",
        f"* average return: {paper['tables']['avg']}; {paper['definitions']['avg']}.",
        f"* its evaluation: {paper['definitions']['evaluation']}; its return: {paper['definitions']['return']}.",
        ("* ours: the final test is greedy over 100 episodes; the training curve is the mean return of the last "
         "100 training episodes (sampled actions) after each round, so it lags and undershoots a greedy evaluation."),
        *(f"* {n}." for n in notes)]) + "\n"


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_epymarl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", choices=list(TASKS), default=DEFAULT_TASKS)
    ap.add_argument("--algos", nargs="+", choices=list(ALGOS), default=list(ALGOS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--env-steps", type=int, default=2_000_000, help="per run (the paper's: 20M LBF, 40M RWARE)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="an override on every run's config, e.g. workers.num_workers=1")
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="JSON",
                    help="the table again from stored runs (<task>_<algo>_s<seed>.json.xz)")
    ap.add_argument("--out", type=Path, default=RESULTS / "epymarl")
    args = ap.parse_args(argv)
    if args.env_steps <= 0:
        ap.error("--env-steps must be positive")
    runs = [read_run(p) for p in args.from_runs or ()]
    for task in [] if args.from_runs else args.tasks:
        for algo in args.algos:
            for seed in args.seeds:
                print(f"{task} {algo} seed {seed} ...", flush=True)
                r = run(task, algo, seed, args.env_steps, args.sets)
                r["curve"] = thinned(r["curve"])  # the table reads what is stored
                r["source"] = str(write_run(args.out / f"{task}_{algo}_s{seed}", r))
                runs.append(r)
    if not runs:
        ap.error("no runs: name --tasks to train, or --from-runs files")
    text = write_tables(args.out, "epymarl", runs, markdown, "python -m bench.bench_epymarl", argv)
    print(text)
    return text


if __name__ == "__main__":
    main()
