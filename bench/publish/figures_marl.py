"""The multi-agent figures of :mod:`bench.publish.figures` (VMAS balance and transport, MPE
simple_spread: rl_system beside BenchMARL), from the per-run files of ``python -m bench.bench_marl``
under ``bench/results/marl/``.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.harness.plots import FOURTH, OTHER, OURS, PEER, THIRD, new_figure, provenance_note, save_png
from bench.harness.results import read_json
from bench.marl_table import final_test
from bench.publish.figures_results import Panel, Series, draw_curves, find_runs

MARL_BUDGET = "300k"
MARL = tuple(
    Panel(f"VMAS {task}, MAPPO", (
        Series("rl_system", f"marl/{MARL_BUDGET}/rl_system_{task}_s[0-9].json.xz", OURS, "train_curve"),
        Series("BenchMARL, fine-tuned settings", f"marl/{MARL_BUDGET}/benchmarl_mappo_{task}_s[0-9].json.xz",
               PEER, "train_curve")),
        ylabel="training mean return per agent")
    for task in ("balance", "transport"))


def _vmas_panels(task: str, budget: str, our_settings: bool, value_norm: bool = False) -> tuple[Panel, ...]:
    """A VMAS task's seeds (``bench/results/marl/<budget>/``) against env steps and wall time, optionally
    with BenchMARL on rl_system's hyperparameters and rl_system with ``mappo.value_norm``."""
    third = (Series("BenchMARL, rl_system's settings",
                    f"marl/{budget}/benchmarl_mappo_our_settings_{task}_s[0-9].json.xz", THIRD, "train_curve"),)
    # with value_norm: the shipped config runs it, and "rl_system" is the config before it did
    series = (Series("rl_system" + (", no value_norm" if value_norm else ""),
                     f"marl/{budget}/rl_system_{task}_s[0-9].json.xz", THIRD if value_norm else OURS, "train_curve"),
              *([Series("rl_system, value_norm", f"marl/{budget}/rl_system_value_norm_{task}_s[0-9].json.xz",
                        OURS, "train_curve")] if value_norm else []),
              *(third if our_settings else ()),
              # last: the README's glance draws the first and the last series of a panel
              Series("BenchMARL, fine-tuned settings", f"marl/{budget}/benchmarl_mappo_{task}_s[0-9].json.xz",
                     PEER, "train_curve"))
    return tuple(Panel(f"VMAS {task}, MAPPO{', against wall time' if x == 'wall s' else ''}", series,
                       ylabel="training mean return per agent", x=x) for x in ("env steps", "wall s"))


BALANCE_BUDGET = "balance_600k"
BALANCE = _vmas_panels("balance", BALANCE_BUDGET, our_settings=True)
TRANSPORT_BUDGET = "transport_1920k"  # 45 minutes of BenchMARL's MAPPO on one core
TRANSPORT = _vmas_panels("transport", TRANSPORT_BUDGET, our_settings=False, value_norm=True)
TRANSPORT_EVAL = "transport_1920k_eval2000"  # the same budget, every evaluation 2,000 episodes
TRANSPORT_EVALS = Panel("VMAS transport, evaluation", (
    Series("BenchMARL", f"marl/{TRANSPORT_EVAL}/benchmarl_mappo_transport_s[0-9].json.xz", PEER),
    Series("rl_system", f"marl/{TRANSPORT_EVAL}/rl_system_transport_s[0-9].json.xz", OURS),
    Series("rl_system, lr 1e-3", f"marl/{TRANSPORT_EVAL}/rl_system_lr1e-3_transport_s[0-9].json.xz", OTHER),
    Series("rl_system, 10 passes", f"marl/{TRANSPORT_EVAL}/rl_system_passes10_transport_s[0-9].json.xz", FOURTH)),
    ylabel="deterministic return per agent, 2,000 episodes")
"""BenchMARL's evaluation curve and every run's final evaluation (± its standard error), each of
2,000 episodes; rl_system evaluates its final policy only."""
MPE_BUDGET = "mpe_300k"
MPE_IPPO = "mpe_300k_ippo"  # IPPO on its own config (learning rate 1e-4): seeds 0–2 at 300k frames
MPE = Panel("MPE simple_spread (3 agents, 25 cycles)", (
    Series("rl_system MAPPO", f"marl/{MPE_BUDGET}/rl_system_simple_spread_s[0-9].json.xz", OURS, "train_curve"),
    Series("rl_system IPPO", f"marl/{MPE_IPPO}/rl_system_ippo_simple_spread_s[0-9].json.xz", OTHER, "train_curve"),
    Series("rl_system IPPO at MAPPO's lr", f"marl/{MPE_BUDGET}/rl_system_ippo_simple_spread_s[0-9].json.xz", THIRD,
           "train_curve"),
    Series("BenchMARL MAPPO, defaults", f"marl/{MPE_BUDGET}/benchmarl_mappo_simple_spread_s[0-9].json.xz", PEER,
           "train_curve")),
    ylabel="training mean return per agent")


def fig_marl(results: Path, out: Path) -> list[Path]:
    fig = new_figure(8.0, 3.4)
    axes = fig.subplots(1, len(MARL))
    for ax, panel in zip(axes, MARL):
        draw_curves(ax, results, panel, legend=False)
        _final_evals(ax, results, panel)
        ax.legend(fontsize=7, loc="lower right", frameon=False)
    provenance_note(fig, f"bench/results/marl/{MARL_BUDGET}: one seed each, training mean every 60k frames; "
                    "x: final deterministic evaluation")
    return [save_png(fig, out / "curves_marl.png")]


def _fig_marl_vmas(results: Path, out: Path, task: str, budget: str, panels: tuple[Panel, ...]) -> Path:
    fig = new_figure(8.0, 3.4)
    axes = fig.subplots(1, len(panels))
    for ax, panel in zip(axes, panels):
        draw_curves(ax, results, panel, legend=False)
        _random_play(ax, results, f"marl/{budget}/random_{task}_s[0-9].json.xz")
    _final_evals(axes[0], results, panels[0])
    axes[0].legend(fontsize=6.5, loc="upper left", frameon=False)
    provenance_note(fig, f"bench/results/marl/{budget}: three seeds, median and range, training mean every "
                    "60k frames; x: final deterministic evaluation")
    return save_png(fig, out / f"curves_marl_{task}.png")


def fig_marl_balance(results: Path, out: Path) -> list[Path]:
    return [_fig_marl_vmas(results, out, "balance", BALANCE_BUDGET, BALANCE)]


def fig_marl_transport(results: Path, out: Path) -> list[Path]:
    fig = new_figure(9.0, 3.4)
    axes = fig.subplots(1, 3)
    for ax, panel in zip(axes, TRANSPORT):
        draw_curves(ax, results, panel, legend=False)
        _random_play(ax, results, f"marl/{TRANSPORT_BUDGET}/random_transport_s[0-9].json.xz")
    axes[0].legend(fontsize=6, loc="upper left", frameon=False)
    draw_curves(axes[2], results, Panel(TRANSPORT_EVALS.title, TRANSPORT_EVALS.series[:1], TRANSPORT_EVALS.ylabel),
                legend=False)
    for i, s in enumerate(TRANSPORT_EVALS.series):
        for path in find_runs(results, s.pattern):
            run = read_json(path)
            # side by side at the last step, so that the error bars of the systems do not overlap
            x = run["env_steps"] * (1 + 0.025 * (i - 1.5))
            axes[2].errorbar([x], [run["final_return"]], yerr=[final_test(run)[1] or 0.0],
                             fmt="x", color=s.color, ms=6, mew=1.8, capsize=2,
                             label=s.label if i and path.name.endswith("_s0.json.xz") else None)
    axes[2].legend(fontsize=6, loc="upper left", frameon=False)
    provenance_note(fig, f"bench/results/marl/{TRANSPORT_BUDGET} (training), {TRANSPORT_EVAL} (evaluations): "
                    "three seeds, median and range; x: final evaluation ± standard error")
    return [save_png(fig, out / "curves_marl_transport.png")]


def fig_marl_mpe(results: Path, out: Path) -> list[Path]:
    fig = new_figure(6.0, 3.6)
    ax = fig.subplots(1, 1)
    draw_curves(ax, results, MPE, legend=False)
    _final_evals(ax, results, MPE)
    _random_play(ax, results, f"marl/{MPE_BUDGET}/random_simple_spread_s[0-9].json.xz")
    ax.legend(fontsize=7, loc="lower right", frameon=False)
    provenance_note(fig, f"bench/results/marl/{MPE_BUDGET}, {MPE_IPPO}: training mean every 6k frames; "
                    "x: final deterministic evaluation")
    return [save_png(fig, out / "curves_marl_mpe.png")]


def _random_play(ax: Any, results: Path, pattern: str) -> None:
    """The mean return of the random-play runs matching ``pattern``, as a dashed line."""
    randoms = [read_json(p)["final_return"] for p in find_runs(results, pattern)]
    ax.axhline(statistics.mean(randoms), color="0.4", lw=1, ls="--", label="random play")


def _final_evals(ax: Any, results: Path, panel: Panel) -> None:
    """Each run's final evaluation return (``final_return``) as a cross at its last env step."""
    for s in panel.series:
        for path in find_runs(results, s.pattern):
            run = read_json(path)
            ax.plot([run["env_steps"]], [run["final_return"]], "x", color=s.color, ms=7, mew=2)
