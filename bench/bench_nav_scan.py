"""Navigation: the lidar scan through the circular 1-D conv encoder (``navigation_scan_ppo.yaml``)
beside today's MLP on the flattened observation (``navigation_ppo.yaml``), seed by seed in one
run: the success rate of 500 deterministic test episodes of the final policy and the end-to-end
env steps/s (training, workers and learner together).

    python -m bench.bench_nav_scan                       # seeds 0 1 2, both configs, 3M env steps
    python -m bench.bench_nav_scan --seeds 0 --steps 1000000

    python -m bench.bench_nav_scan --from-runs bench/results/navigation_scan/*_s[0-9].json.xz   # the table again

Writes one ``.json.xz`` per run (``<encoder>_s<seed>``) and ``nav_scan.{json,md}`` (the stamp, the
runs' files, the table) to ``--out`` (default ``bench/results/navigation_scan``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.harness.learning import read_run, train_row
from bench.harness.results import RESULTS, write_run, write_tables

CONFIGS = {"mlp": "launch/configs/navigation_ppo.yaml", "scan_conv": "launch/configs/navigation_scan_ppo.yaml"}
TEST_EPISODES = 500


def markdown(st: dict[str, Any], runs: list[dict[str, Any]], argv: str) -> str:
    lines = [f"# Navigation: lidar scan conv beside the MLP ({st['date_utc']}, commit {st['commit']})", "",
             f"`{argv}` on {st['cpu']} ({st['cores']} cores), torch {st['torch']}, Ray {st['ray']}.", "",
             "| encoder | seeds | env steps | test success (500 deterministic episodes, per seed) | mean | "
             "collision | end-to-end env steps/s |", "|---|---|---:|---|---:|---:|---:|"]
    for label in CONFIGS:
        its = sorted((r for r in runs if r["peer"] == label), key=lambda r: r["seed"])
        if not its:
            continue
        success = [r["test"].get("success_rate", float("nan")) for r in its]
        collision = [r["test"].get("collision_rate", float("nan")) for r in its]
        lines.append(f"| {label} | {' '.join(str(r['seed']) for r in its)} | {its[0]['env_steps']:,} | "
                     f"{', '.join(f'{s:.3f}' for s in success)} | {statistics.fmean(success):.3f} | "
                     f"{statistics.fmean(collision):.3f} | "
                     f"{statistics.fmean(r['env_steps'] / r['train_wall_s'] for r in its):,.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=3_000_000)
    ap.add_argument("--encoders", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--from-runs", nargs="+", type=Path, default=None, metavar="JSON")
    ap.add_argument("--out", type=Path, default=RESULTS / "navigation_scan")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    if args.from_runs:
        runs = [read_run(p) for p in args.from_runs if p.name != "nav_scan.json"]
    else:
        for seed in args.seeds:
            for label in args.encoders:
                print(f"seed {seed}: {label} ...", flush=True)
                r = train_row(CONFIGS[label], [f"max_env_steps={args.steps}", "checkpoint.every_rounds=0"], seed,
                              args.out / "runs" / f"{label}-s{seed}", test_episodes=TEST_EPISODES)
                r["peer"] = label
                r["source"] = str(write_run(args.out / f"{label}_s{seed}", r))
                runs.append(r)
    print(write_tables(args.out, "nav_scan", runs, markdown, "python -m bench.bench_nav_scan"))


if __name__ == "__main__":
    main()
