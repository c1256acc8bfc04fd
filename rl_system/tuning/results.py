"""What a sweep leaves behind: one row per trial (``results.parquet``), the top-k on the console
and the best trial's whole config as YAML (``best_config.yaml``, for ``rl-system train``).

Trials are ranked by the metric's last reported value (what the trial ended with, as a rerun of
its config would be judged), then by fewer env steps (a trial that stopped at its target early
beats one that got there late), then by the best value it reported."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rl_system.tuning.space import trial_config
from rl_system.tuning.sweep import BEST_FILE, RESULTS_FILE, Sweep


def status_of(result: Any) -> str:
    """``done`` (the trial ended itself or its scheduler stopped it), ``error``, or ``unfinished``
    (a sweep interrupted before the trial ended: ``--resume`` continues it)."""
    if result.error:
        return "error"
    return "done" if (result.metrics or {}).get("done") else "unfinished"


def _cell(value: Any) -> Any:
    """Parquet wants one type per column: lists (``[64, 64]``) as their YAML text."""
    return value if isinstance(value, (int, float, str, bool)) or value is None else yaml.safe_dump(
        value, default_flow_style=True).strip()


def results_table(grid: Any, sweep: Sweep) -> pd.DataFrame:
    """One row per trial, best first: id, status, searched values, the metric (last and best
    reported), env steps, wall time, where its newest checkpoint and directory are."""
    metric, keys = sweep.metric, [s.key for s in sweep.specs]
    rows = []
    for result in grid:
        m, config = result.metrics or {}, result.config or {}  # None for a trial not started yet
        history = result.metrics_dataframe
        best = history[metric].max() if history is not None and metric in history else math.nan
        trial_id = m.get("trial_id") or Path(result.path).name
        rows.append({"trial_id": trial_id, "status": status_of(result), **{k: _cell(config.get(k)) for k in keys},
                     metric: float(m.get(metric, math.nan)), f"best_{metric}": float(best),
                     "env_steps": int(m.get("env_steps", 0)), "time_s": float(m.get("time_total_s", 0.0)),
                     "checkpoint": result.checkpoint.path if result.checkpoint else None, "path": result.path,
                     "error": str(result.error).strip().splitlines()[-1] if result.error else None})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values([metric, "env_steps", f"best_{metric}"], ascending=[False, True, False],
                             na_position="last").reset_index(drop=True)


def best_params(grid: Any, sweep: Sweep, table: pd.DataFrame) -> dict[str, Any] | None:
    """The searched values of the best trial that reported the metric (its last config: under
    PBT, the values it ended with)."""
    finite = table[table[sweep.metric].apply(lambda v: math.isfinite(v))]
    if finite.empty:
        return None
    best_id = finite.iloc[0]["trial_id"]
    for result in grid:
        if (result.metrics or {}).get("trial_id", Path(result.path).name) == best_id:
            return {s.key: result.config[s.key] for s in sweep.specs if s.key in result.config}
    return None


def write_outputs(grid: Any, sweep: Sweep, exp_dir: Path) -> tuple[pd.DataFrame, Path | None]:
    """``results.parquet`` and ``best_config.yaml`` (None when no trial reported the metric)."""
    table = results_table(grid, sweep)
    table.to_parquet(exp_dir / RESULTS_FILE, index=False)
    params = best_params(grid, sweep, table) if not table.empty else None
    if params is None:
        return table, None
    row = table.iloc[0]
    header = (f"# The best trial ({row['trial_id']}) of the sweep in {exp_dir}\n"
              f"# ({sweep.scheduler}, {sweep.metric} {row[sweep.metric]:.4g} after {row['env_steps']:,} env steps):\n"
              + "".join(f"#   {k} = {v!r}\n" for k, v in params.items())
              + f"# rl-system train {exp_dir / BEST_FILE}\n")
    cfg = trial_config(sweep.config, params)
    (exp_dir / BEST_FILE).write_text(header + yaml.safe_dump(cfg.model_dump(), sort_keys=False))
    return table, exp_dir / BEST_FILE


def print_top(table: pd.DataFrame, sweep: Sweep, k: int) -> None:
    from rich.console import Console
    from rich.table import Table

    keys, metric = [s.key for s in sweep.specs], sweep.metric
    out = Table(title=f"top {min(k, len(table))} of {len(table)} trials by {metric}")
    for col in ["trial", "status", *keys, metric, f"best {metric}", "env steps", "time s"]:
        out.add_column(col, justify="left" if col in ("trial", "status") else "right", no_wrap=True)
    for _, row in table.head(k).iterrows():
        out.add_row(str(row["trial_id"]), str(row["status"]), *(_fmt(row[key]) for key in keys),
                    _fmt(row[metric]), _fmt(row[f"best_{metric}"]), f"{row['env_steps']:,}", f"{row['time_s']:.0f}")
    # Wider than a pipe's default 80 columns: trial ids and searched values are not cut.
    Console(width=max(Console().width, 160)).print(out)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
