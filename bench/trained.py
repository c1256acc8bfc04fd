"""One rl_system training run as a bench row: train a shipped config (with overrides) to the end
of its budget, read its summary and curve, and optionally test the final policy with
deterministic episodes. Shared by the benches that compare configs or peers on learning
(:mod:`bench.bench_memory`, :mod:`bench.bench_minatar`, :mod:`bench.bench_nav_scan`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from bench.bench_mujoco import read_ours


def train_row(config: str, overrides: list[str], seed: int, run_dir: Path, test_episodes: int = 0,
              test_envs: int = 100) -> dict[str, Any]:
    """Train ``config`` with ``overrides`` and ``seed`` into ``run_dir``; returns
    :func:`bench.bench_mujoco.read_ours`'s row plus the summary's target, best-return and
    outcome rates, where it ran (``commit``, ``cpu_kernels``: runs merged from several sittings
    keep their own) and, with ``test_episodes``, a ``test`` dict (``rl-system eval
    --deterministic`` of the newest checkpoint)."""
    from bench.report import where_it_ran
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.config import load_config
    from rl_system.policy.evaluation import evaluate
    from rl_system.run.loop import train

    cfg = load_config(config, [f"seed={seed}", "log_every_s=30", *overrides])
    summary = train(cfg, run_dir=run_dir, quiet=True)
    row = read_ours(run_dir)
    row.update(config=config, overrides=overrides, train_cpu_s=summary["cpu_s"]["total"],
               steps_to_target=summary.get("steps_to_target"),
               time_to_target_s=summary.get("time_to_target_s"), best_return=summary.get("best_mean_return"),
               outcome_rates={k: v for k, v in summary.items() if k.startswith("final_") and k.endswith("_rate")},
               **where_it_ran())
    if test_episodes:
        state, _, _ = CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()
        row["test"] = evaluate(state, episodes=test_episodes, deterministic=True, num_envs=test_envs)
    return row


def write_tables(out: Path, name: str, runs: list[dict[str, Any]],
                 markdown: Callable[[dict[str, Any], list[dict[str, Any]], str], str], command: str) -> None:
    """Write ``out/<name>.json`` (the stamp and the runs without their curves) and
    ``out/<name>.md`` (``markdown(stamp, runs, the command line)``), and print the table."""
    from bench.report import stamp

    st = stamp()
    (out / f"{name}.json").write_text(json.dumps({"meta": st, "runs": [
        {k: v for k, v in r.items() if k != "curve"} for r in runs]}, indent=1))
    text = markdown(st, runs, " ".join([command, *sys.argv[1:]]))
    (out / f"{name}.md").write_text(text)
    print(text)
