"""Training runs as bench rows: train a shipped rl_system config to the end of its budget and
read back its summary and curve; read a finished run (a run folder, or a stored per-run JSON of
rl_system or a peer); Ray for the runs a suite starts in its own process.

A *curve* is a list of rows ``(env steps, elapsed wall s, mean return of the last 100 training
episodes[, CPU s])``: rl_system's from its TensorBoard files, a peer's from its own callback
(:mod:`bench.peers`). Every peer module returns rows of the same shape."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.harness.results import read_json
from bench.harness.stamp import where_it_ran

Curve = list[tuple]

#: what a suite's timing runs set besides the budget: no TensorBoard, no per-round console
#: lines, no checkpoints (none of them changes what is trained or timed).
QUIET_OVERRIDES = ["tensorboard=false", "log_every_s=1000", "checkpoint.every_rounds=0"]

#: rl_system peer -> the ``env.name`` prefix its runs use: Gymnasium's vector envs, or EnvPool's
#: reimplementation of the same tasks (envs/envpool_adapter.py), same config otherwise.
BACKENDS = {"rl_system": "gym:", "rl_system_envpool": "envpool:"}


def ensure_ray() -> None:
    """Embedded local Ray, sized as ``rl-system train`` sizes it (>= the 3 actors' CPUs)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=max(os.cpu_count() or 1, 3), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)


def shutdown_ray() -> None:
    """``ray.shutdown()`` where Ray was started, also of a session whose processes are gone."""
    if "ray" in sys.modules:
        import ray

        try:
            if ray.is_initialized():
                ray.shutdown()
        except Exception as err:  # noqa: BLE001 - a session whose processes are gone
            print(f"ray.shutdown: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def train_command(python: str | Path, config: str | Path, run_dir: Path, sets: Iterable[str] = ()) -> list[str]:
    """``rl-system train`` of ``config`` into ``run_dir`` as a process of its own (``python -m
    rl_system``, quiet), each of ``sets`` a ``--set`` override; its ``summary.json`` lands in
    ``run_dir`` (:func:`read_summary`)."""
    return [str(python), "-m", "rl_system", "train", str(config), "--run-dir", str(run_dir), "--quiet",
            *(a for kv in sets for a in ("--set", kv))]


def read_summary(run_dir: Path) -> dict[str, Any]:
    """A finished run's ``summary.json``."""
    return json.loads((Path(run_dir) / "summary.json").read_text())


def tb_curve(tb_dir: Path) -> Curve:
    """(env steps, elapsed s, mean return) per round, from a run's TensorBoard files: the return
    is ``rollout/return_mean``; elapsed is ``env steps / system/steps_per_s`` (the run's own
    clock, from the start of its first round)."""
    from rl_system.observe.metrics import RETURN_MEAN, ROLLOUT, STEPS_PER_S, SYSTEM, read_scalars

    scalars = read_scalars(tb_dir)
    rates = dict(scalars.get(SYSTEM + STEPS_PER_S, []))
    returns = scalars.get(ROLLOUT + RETURN_MEAN, [])
    return [(s, s / rates[s], r) for s, r in returns if rates.get(s) and not math.isnan(r)]


def read_ours(run_dir: Path) -> dict[str, Any]:
    """A finished rl_system run as a bench row: its config, summary.json and curve."""
    import yaml

    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    name = cfg["env"]["name"]
    peer = next((p for p, prefix in BACKENDS.items() if name.startswith(prefix)), "rl_system")
    return {"peer": peer, "env": name.removeprefix(BACKENDS.get(peer, "")), "seed": cfg["seed"],
            "env_steps": summary["env_steps"], "train_wall_s": summary["wall_time_s"],
            "final_return": summary["final_mean_return"], "curve": tb_curve(run_dir / "tb"), "run_dir": str(run_dir)}


def read_run(path: Path) -> dict[str, Any]:
    """A finished run from ``path``: an rl_system run folder (:func:`read_ours`) or a stored
    per-run row (``.json``, ``.json.xz``, ``.json.gz``), with ``source``: the path it came from."""
    path = Path(path)
    row = read_ours(path) if path.is_dir() else read_json(path)
    return {**row, "source": str(path)}


def with_test_env(state: dict, assignments: list[str]) -> dict:
    """``state`` (a checkpoint's) with ``KWARG=VALUE`` assignments applied to the env kwargs its
    policy is tested under (``env.eval_kwargs``, which win over ``env.kwargs``), as ``rl-system
    eval --env`` applies them; a copy, the checkpoint's own dict untouched. ConfigError on a
    malformed assignment."""
    import copy

    from rl_system.checkpoint import keys
    from rl_system.config import ConfigError, apply_override, build_config

    tree = copy.deepcopy(state[keys.CONFIG])
    for assignment in assignments:
        if "=" not in assignment or assignment.startswith("="):
            raise ConfigError(f"--test-env {assignment!r}: expected KWARG=VALUE, e.g. random_start=false")
        apply_override(tree, f"env.eval_kwargs.{assignment}")
    build_config(tree)
    return {**state, keys.CONFIG: tree}


def first_at(curve: list, level: float) -> tuple | None:
    """The first row of ``curve`` whose return reaches ``level``, or None."""
    return next((row for row in curve if row[2] >= level), None)


def train_row(config: str, overrides: list[str], seed: int, run_dir: Path, test_episodes: int = 0,
              test_envs: int = 100) -> dict[str, Any]:
    """Train ``config`` with ``overrides`` and ``seed`` into ``run_dir``; returns
    :func:`read_ours`'s row plus the summary's target, best-return and outcome rates, where it ran
    (``commit``, ``cpu_kernels``: runs merged from several sittings keep their own) and, with
    ``test_episodes``, a ``test`` dict (``rl-system eval --deterministic`` of the newest checkpoint)."""
    from rl_system.checkpoint.store import CheckpointStore
    from rl_system.config import load_config
    from rl_system.policy.evaluation import evaluate
    from rl_system.run.loop import train
    from rl_system.run.summary import rate_key

    cfg = load_config(config, [f"seed={seed}", "log_every_s=30", *overrides])
    summary = train(cfg, run_dir=run_dir, quiet=True)
    row = read_ours(run_dir)
    row.update(config=config, overrides=overrides, train_cpu_s=summary.cpu_s.total,
               steps_to_target=summary.steps_to_target,
               time_to_target_s=summary.time_to_target_s, best_return=summary.best_mean_return,
               outcome_rates={rate_key(k): v for k, v in summary.final_rates.items()},
               **where_it_ran())
    if test_episodes:
        state, _, _ = CheckpointStore(str(run_dir / "checkpoints")).load_latest_valid()
        row["test"] = evaluate(state, episodes=test_episodes, deterministic=True, num_envs=test_envs)
    return row
