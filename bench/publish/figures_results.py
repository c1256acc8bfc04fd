"""The learning-curve and end-point figures of :mod:`bench.publish.figures`, from the per-run files under
``bench/results/``: which runs each panel draws is the ``pattern`` of its :class:`Series` (a glob
under the results folder), so a figure holds nothing but what those files hold.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.hmasd_output import run_rows
from bench.harness.plots import (
    OTHER,
    OURS,
    PEER,
    THIRD,
    FigureError,
    log_axis,
    new_figure,
    provenance_note,
    save_png,
    seconds_formatter,
    steps_formatter,
)
from bench.harness.results import read_json

# --------------------------------------------------------------------------- learning curves


@dataclass(frozen=True)
class Series:
    """One system's runs on one env: the per-run files matching ``pattern`` under the results."""
    label: str
    pattern: str | tuple[str, ...]
    color: str
    curve_key: str = "curve"  # the rows to draw ("train_curve" where "curve" is something else)


@dataclass(frozen=True)
class Panel:
    title: str
    series: tuple[Series, ...]
    ylabel: str = "training mean return (100 episodes)"
    x: str = "env steps"  # or "wall s": the curve rows' second column


X_COLUMN = {"env steps": 0, "wall s": 1}
"""The column of a curve row that each x axis reads (rows are env steps, wall s, return, ...)."""


def find_runs(results: Path, pattern: str | tuple[str, ...]) -> list[Path]:
    """The files matching ``pattern`` (one glob, or several whose files are one set of seeds)."""
    paths = []
    for one in (pattern,) if isinstance(pattern, str) else pattern:
        found = sorted(results.glob(one))
        if not found:
            raise FigureError(f"no runs match {results / one}")
        paths += found
    return paths


def load_curves(results: Path, series: Series, x: str = "env steps") -> list[np.ndarray]:
    """Each run's ``[rows, 2]`` (``x``: env steps or wall s, return) of ``series``."""
    curves = []
    for path in find_runs(results, series.pattern):
        rows = read_json(path).get(series.curve_key) or []
        if not rows:
            raise FigureError(f"{path}: no {series.curve_key!r} rows")
        curves.append(np.asarray([(r[X_COLUMN[x]], r[2]) for r in rows], dtype=float))
    return curves


def median_band(curves: list[np.ndarray], points: int = 200) -> tuple[np.ndarray, ...]:
    """Median, min and max over runs on a common env-step grid, over the steps every run covers
    (runs that stop at a target end at different steps; past the first end each is drawn alone)."""
    lo = max(c[0, 0] for c in curves)
    hi = min(c[-1, 0] for c in curves)
    grid = np.linspace(lo, hi, points) if hi > lo else np.array([lo])
    ys = np.stack([np.interp(grid, c[:, 0], c[:, 1]) for c in curves])
    return grid, np.median(ys, axis=0), ys.min(axis=0), ys.max(axis=0)


def draw_curves(ax: Any, results: Path, panel: Panel, legend: bool = True) -> None:
    for s in panel.series:
        curves = load_curves(results, s, panel.x)
        for c in curves:
            ax.plot(c[:, 0], c[:, 1], color=s.color, lw=0.5, alpha=0.35)
        grid, med, lo, hi = median_band(curves)
        n = len(curves)
        ax.fill_between(grid, lo, hi, color=s.color, alpha=0.18, lw=0)
        ax.plot(grid, med, color=s.color, lw=1.8, label=f"{s.label} ({n} seed{'s' * (n > 1)})")
    ax.set_title(panel.title, fontsize=9)
    ax.set_xlabel(panel.x, fontsize=8)
    ax.set_ylabel(panel.ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    if panel.x == "env steps":
        ax.xaxis.set_major_formatter(steps_formatter())
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend(fontsize=7, loc="best", frameon=False)



def curves_figure(results: Path, out: Path, name: str, panels: Sequence[Panel], note: str,
                  height_in: float = 3.6) -> Path:
    fig = new_figure(8.0, height_in)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        draw_curves(ax, results, panel)
    provenance_note(fig, note)
    return save_png(fig, out / f"{name}.png")


MUJOCO = (
    Panel("HalfCheetah-v5", (
        Series("rl_system", "mujoco/rl_system_HalfCheetah-v5_s[0-9].json.xz", OURS),
        Series("SB3 PPO, RL Zoo settings", "mujoco/sb3_HalfCheetah-v5_s[0-9].json.xz", PEER))),
    Panel("Hopper-v5", (
        Series("rl_system", "mujoco/rl_system_Hopper-v5_s[0-9].json.xz", OURS),
        Series("rl_system on EnvPool", "mujoco/rl_system_envpool_Hopper-v5_s[0-9].json.xz", OTHER),
        Series("SB3 PPO, RL Zoo settings", "mujoco/sb3_Hopper-v5_s[0-9].json.xz", PEER))),
)
MINATAR = (
    Panel("MinAtar Breakout", (
        Series("rl_system, shipped config (2 threads, bf16)",
               ("minatar/2026-12-02_bf16/Breakout_threads2_bf16_nocache_s[0-9].json.xz",
                "minatar/2026-12-02_config_bf16/Breakout_s[0-9].json.xz"), OURS),
        Series("rl_system, one fp32 thread", "minatar/Breakout_s[0-9].json.xz", OTHER),
        Series("SB3 PPO, same network and settings", "minatar/Breakout_sb3_ppo_s[0-9].json.xz", PEER))),
    Panel("MinAtar SpaceInvaders", (
        Series("rl_system, shipped config (2 threads, bf16)",
               "minatar/2026-12-02_bf16/SpaceInvaders_threads2_bf16_nocache_s[0-9].json.xz", OURS),
        Series("rl_system, one fp32 thread", "minatar/SpaceInvaders_s[0-9].json.xz", OTHER),
        Series("SB3 PPO, same network and settings", "minatar/SpaceInvaders_sb3_ppo_s[0-9].json.xz", PEER))),
)
MEMORY = (
    Panel("CartPole, positions only (stops at 475)", (
        Series("rl_system, GRU", "memory/rl_system_gru_s[0-9].json.xz", OURS),
        Series("rl_system, MLP (no memory)", "memory/rl_system_mlp_s[0-9].json.xz", THIRD),
        Series("sb3-contrib RecurrentPPO, Zoo settings", "memory/sb3_contrib_recurrent_ppo_s[0-9].json.xz", PEER))),
    Panel("POPGym, rl_system GRU", (
        Series("RepeatPreviousEasy", "memory/rl_system_gru_RepeatPreviousEasy_s[0-9].json.xz", OURS),
        Series("PositionOnlyCartPoleEasy",
               "memory/popgym_2m/rl_system_gru_PositionOnlyCartPoleEasy_s[0-9].json.xz", OTHER)),
        ylabel="training mean return (normalised)"),
)


def fig_mujoco(results: Path, out: Path) -> list[Path]:
    return [curves_figure(results, out, "curves_mujoco", MUJOCO,
                          "bench/results/mujoco: 1M env steps per run; wall times: docs/results.md")]


def fig_minatar(results: Path, out: Path) -> list[Path]:
    return [curves_figure(results, out, "curves_minatar", MINATAR,
                          "bench/results/minatar: 5M env steps per run; wall times: docs/results.md")]


def fig_memory(results: Path, out: Path) -> list[Path]:
    return [curves_figure(results, out, "curves_memory", MEMORY,
                          "bench/results/memory: runs stop at the target; median where all seeds run")]


# --------------------------------------------------------------------------- end points


def ttt_rows(results: Path) -> tuple[list[dict], str]:
    """CartPole time-to-475 rows, ours and the peers', from the report, and its stamp line."""
    path = results / "report" / "report.json"
    if not path.exists():
        raise FigureError(f"{path}: no such file (python -m bench.publish.report --peers writes it)")
    report = read_json(path)
    ttt = report.get("sections", {}).get("ttt")
    if not ttt or not ttt.get("rows"):
        raise FigureError(f"{path}: no 'ttt' section (python -m bench.publish.report --peers --only ttt)")
    st = report.get("stamp", {})
    return ttt["rows"] + ttt.get("peer_rows", []), f"{st.get('date_utc', '?')}, {st.get('commit', '?')}"


def draw_ttt(ax: Any, rows: list[dict], field: str, xlabel: str, fmt: Any = None) -> None:
    """One point per seed, one line per system; a seed that never reached 475 as an open marker."""
    peers = list(dict.fromkeys(r["peer"] for r in rows))
    for y, peer in enumerate(peers):
        mine = [r for r in rows if r["peer"] == peer]
        color = OURS if peer == "rl_system" else PEER if "rllib" in peer else OTHER
        hit = [r[field] for r in mine if r.get("reached")]
        ax.scatter(hit, [y] * len(hit), color=color, s=28, zorder=3)
        if hit:
            ax.plot([statistics.median(hit)] * 2, [y - 0.3, y + 0.3], color=color, lw=2)
        missed = [r[field] for r in mine if not r.get("reached")]
        ax.scatter(missed, [y] * len(missed), facecolor="none", edgecolor=color, s=28, zorder=3)
    ax.set_yticks(range(len(peers)), peers, fontsize=7)
    ax.set_ylim(-0.6, len(peers) - 0.4)
    log_axis(ax, fmt or seconds_formatter())
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, axis="x", alpha=0.3)


def fig_cartpole_ttt(results: Path, out: Path) -> list[Path]:
    rows, when = ttt_rows(results)
    fig = new_figure(8.0, 2.6)
    left, right = fig.subplots(1, 2, sharey=True)
    draw_ttt(left, rows, "train_wall_s", "training wall s to a 100-episode mean of 475")
    draw_ttt(right, rows, "env_steps", "env steps to 475", steps_formatter())
    left.set_title("CartPole: time to 475, one point per seed (bar: median)", fontsize=9, loc="left")
    provenance_note(fig, f"bench/results/report/report.json ({when}): end points only, no curves recorded")
    return [save_png(fig, out / "cartpole_ttt.png")]


HMASD_SOURCES = (("HMASD, the preset in float32", "hmasd/shrink/s[0-9]*.txt*", OURS),
                 ("flat MAPPO, its preset", "hmasd/mappo_preset/s[0-9]*.txt*", PEER))
def _count(cell: str) -> float | None:
    return None if cell in ("-", "not reached", "") else float(cell.replace(",", ""))


def hmasd_seeds(results: Path) -> list[tuple[str, str, list[tuple[int, float | None, float]]]]:
    """Per source: (label, colour, [(seed, steps to target or None, test success)])."""
    out = []
    for label, pattern, color in HMASD_SOURCES:
        seeds = []
        for path in find_runs(results, pattern):
            rows = run_rows(path)
            if not rows:
                raise FigureError(f"{path}: no run rows (not a bench_hmasd output)")
            seeds += [(int(r["seed"]), _count(r["steps to target"]), float(r["test success"])) for r in rows]
        out.append((label, color, sorted(seeds)))
    return out


def draw_hmasd(ax: Any, sources: list, budget: float = 3e6) -> None:
    """Steps to 0.8 training success per seed; a seed that never reached it sits at the budget,
    open; the text gives how many final policies test >= 0.8."""
    for y, (label, color, seeds) in enumerate(sources):
        hit = [s for _, s, _ in seeds if s is not None]
        missed = sum(s is None for _, s, _ in seeds)
        jitter = np.linspace(-0.12, 0.12, max(len(hit), 1))[:len(hit)]
        ax.scatter(hit, y + jitter, color=color, s=22, zorder=3)
        ax.scatter([budget] * missed, y + np.linspace(-0.12, 0.12, max(missed, 1))[:missed], facecolor="none",
                   edgecolor=color, s=22, zorder=3)
        passed = sum(t >= 0.8 for *_, t in seeds)
        ax.text(budget * 1.03, y, f"{passed}/{len(seeds)} test ≥ 0.8", va="center", fontsize=7)
    ax.axvline(budget, color="0.5", ls=":", lw=1)
    ax.set_yticks(range(len(sources)), [label for label, *_ in sources], fontsize=7)
    ax.set_ylim(-0.6, len(sources) - 0.4)
    ax.set_xlim(0, budget * 1.35)
    ax.set_xlabel("env steps to 0.8 training success (open: not reached in the 3M budget)", fontsize=8)
    ax.xaxis.set_major_formatter(steps_formatter())
    ax.tick_params(labelsize=7)
    ax.grid(True, axis="x", alpha=0.3)


def fig_hmasd(results: Path, out: Path) -> list[Path]:
    fig = new_figure(8.0, 2.4)
    ax = fig.subplots()
    draw_hmasd(ax, hmasd_seeds(results))
    ax.set_title("Alice_and_Bob default map: one point per seed", fontsize=9, loc="left")
    provenance_note(fig, "bench/results/hmasd/shrink, mappo_preset: end points only, no curves recorded")
    return [save_png(fig, out / "hmasd_seeds.png")]
