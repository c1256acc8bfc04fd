"""The docs' pictures, drawn from the committed results: ``python -m bench.publish.figures``.

    python -m bench.publish.figures                          # every figure into docs/img/
    python -m bench.publish.figures --only mujoco,minatar    # some of them
    python -m bench.publish.figures --list                   # their names and sources

Learning curves (return against env steps, the median over seeds with the min-max band, each seed
thin) come from the per-run ``.json.xz`` files under ``bench/results/`` (their ``curve`` rows: env
steps, wall s, 100-episode training mean return). Result sets that hold only end points (CartPole's
time to 475, HMASD's seeds) are drawn as one point per seed. The env pictures (:mod:`bench.publish.figures_envs`)
go through the renderers ``rl-system eval --render`` uses, and the AirCombat range map through
``rl-system air-combat range-map`` itself. Nothing is typed in: a figure whose source is missing
stops with one line naming the file and the command that writes it.

Every PNG is drawn with matplotlib's Agg canvas (no pyplot, no display) at about 800 px wide and
stored as a 256-colour palette PNG (:mod:`bench.harness.plots`), which keeps plots of lines and flat colours
sharp at a third of the bytes.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.harness.plots import OTHER, OURS, OUT, PEER, FigureError, compact_file, new_figure, provenance_note, save_png
from bench.harness.stamp import RESULTS
from bench.publish import figures_marl as marl
from bench.publish import figures_results as res


def fig_range_map(results: Path, out: Path) -> list[Path]:
    """AirCombat's launch envelope and space-time diagram, by ``rl-system air-combat range-map``
    itself (its default grid), then compacted."""
    from rl_system.cli.main import main as rl_system_main

    png = out / "air_combat_range_map.png"
    if rl_system_main(["air-combat", "range-map", "--out", str(png)]) != 0:
        raise FigureError("rl-system air-combat range-map failed (its line above says why)")
    return [compact_file(png), compact_file(out / "air_combat_range_map_space_time.png")]


OVERCOOKED_PAPER = "overcooked/paper"
"""The runs of ``python -m bench.bench_overcooked_train`` (its default ``--out``)."""


def _overcooked_series(results: Path, layout: str) -> tuple:
    """The methods with runs on ``layout``, as curve series."""
    series = []
    for label, method, color in (("HMASD", "hmasd", OURS), ("flat MAPPO", "mappo", OTHER)):
        pattern = f"{OVERCOOKED_PAPER}/{layout}_{method}_s[0-9].json.xz"
        if any(results.glob(pattern)):
            series.append(res.Series(label, pattern, color))
    return tuple(series)


def fig_overcooked_paper(results: Path, out: Path) -> list[Path]:
    """One panel per layout with runs: HMASD and flat MAPPO against env steps, and the paper's
    HMASD at 1e7 env steps (Table 4: mean and one std over 5 seeds) as a band."""
    from bench.bench_overcooked_train import LAYOUTS, PAPER

    panels = {layout: series for layout in LAYOUTS if (series := _overcooked_series(results, layout))}
    if not panels:
        raise FigureError(f"no runs under {results / OVERCOOKED_PAPER}")
    fig = new_figure(8.0, 3.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (layout, series) in zip(axes, panels.items()):
        res.draw_curves(ax, results, res.Panel(f"Overcooked {layout}, the paper's settings", series,
                                       ylabel="training episode reward (100 episodes)"), legend=False)
        mean, std = PAPER[layout]
        ax.axhspan(mean - std, mean + std, color=PEER, alpha=0.12, lw=0)
        ax.axhline(mean, color=PEER, lw=1.2, ls="--", label="HMASD in the paper at 1e7 (Table 4, ±1 std)")
        ax.set_ylim(bottom=min(0.0, mean - std) - 5)
        ax.set_xlim(0, 1e7)  # the paper's budget: a run still on its way shows as one
        ax.legend(fontsize=6.5, loc="center right", frameon=False)
    provenance_note(fig, f"bench/results/{OVERCOOKED_PAPER}: training mean of the last 100 episodes each round "
                    "(12,800 env steps); python -m bench.bench_overcooked_train")
    return [save_png(fig, out / "curves_overcooked_paper.png")]


def _env_pictures(results: Path, out: Path) -> list[Path]:
    from bench.publish.figures_envs import render_all  # torch and the envs only when asked for

    return render_all(results, out)


# name -> (draws it, what it is drawn from, what writes that)
def fig_glance(results: Path, out: Path) -> list[Path]:
    """The main panels in one picture, for the README: the first and last series of the MuJoCo,
    MinAtar, memory and VMAS balance panels, and CartPole's time to 475."""
    fig = new_figure(9.0, 5.4)
    axes = fig.subplots(2, 3)
    for ax, panel in zip(axes.flat, (res.MUJOCO[0], res.MUJOCO[1], res.MINATAR[0], res.MEMORY[0], marl.BALANCE[0])):
        short = res.Panel(panel.title, tuple(res.Series(s.label.split(",")[0], s.pattern, s.color, s.curve_key)
                                             for s in panel.series[:1] + panel.series[-1:]), ylabel="return")
        res.draw_curves(ax, results, short)
        ax.legend(fontsize=6, loc="best", frameon=False)
    rows, _ = res.ttt_rows(results)
    res.draw_ttt(axes[1, 2], rows, "train_wall_s", "training wall s to 475")
    axes[1, 2].set_title("CartPole: time to 475 (per seed)", fontsize=9)
    provenance_note(fig, "median over seeds, min-max band; bench/results, drawn by python -m bench.publish.figures")
    return [save_png(fig, out / "results_at_a_glance.png", width_px=900)]


FIGURES: dict[str, tuple[Callable[[Path, Path], list[Path]], str, str]] = {
    "mujoco": (res.fig_mujoco, "bench/results/mujoco/*_s<seed>.json.xz", "python -m bench.bench_mujoco"),
    "minatar": (res.fig_minatar, "bench/results/minatar/ (the shipped config's runs in 2026-12-02_bf16/)",
                "python -m bench.bench_minatar"),
    "memory": (res.fig_memory, "bench/results/memory/", "python -m bench.bench_memory"),
    "marl": (marl.fig_marl, f"bench/results/marl/{marl.MARL_BUDGET}/", "python -m bench.bench_marl"),
    "marl_balance": (marl.fig_marl_balance, f"bench/results/marl/{marl.BALANCE_BUDGET}/",
                     "python -m bench.bench_marl --tasks balance --seeds 0 1 2 --frames 600000"),
    "marl_transport": (marl.fig_marl_transport, f"bench/results/marl/{marl.TRANSPORT_BUDGET}/, {marl.TRANSPORT_EVAL}/",
                       "python -m bench.bench_marl --tasks transport --seeds 0 1 2 --frames 1920000"),
    "marl_mpe": (marl.fig_marl_mpe, f"bench/results/marl/{marl.MPE_BUDGET}/, {marl.MPE_IPPO}/",
                 "python -m bench.bench_marl --tasks simple_spread"),
    "overcooked_paper": (fig_overcooked_paper, f"bench/results/{OVERCOOKED_PAPER}/",
                         "python -m bench.bench_overcooked_train"),
    "cartpole_ttt": (res.fig_cartpole_ttt, "bench/results/report/report.json (section ttt)",
                     "python -m bench.publish.report --peers"),
    "hmasd_seeds": (res.fig_hmasd, "bench/results/hmasd/shrink/, mappo_preset/", "python -m bench.bench_hmasd"),
    "glance": (fig_glance, "the panels above, for the README", "the suites above"),
    "envs": (_env_pictures, "the envs, through their renderers (bench/figures_envs.py)", "-"),
    "range_map": (fig_range_map, "rl-system air-combat range-map (a 9,360-shot sweep; minutes on a busy machine)",
                  "-"),
}


def build(names: Sequence[str], results: Path = RESULTS, out: Path = OUT) -> list[Path]:
    """Draw the named figures; returns the files written. :class:`FigureError` on a bad name or a
    missing source."""
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise FigureError(f"no figure {', '.join(unknown)} (figures: {', '.join(FIGURES)})")
    written = []
    for name in names:
        t0 = time.perf_counter()
        try:
            paths = FIGURES[name][0](Path(results), Path(out))
        except FigureError as err:
            writer = FIGURES[name][2]
            raise FigureError(f"{name}: {err}" + (f" (written by {writer})" if writer != "-" else "")) from None
        written += paths
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e3:.0f} kB" for p in paths)
        print(f"{name}: {sizes} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.publish.figures", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, metavar="NAME,...", help=f"some figures ({', '.join(FIGURES)})")
    ap.add_argument("--out", type=Path, default=OUT, help="where the PNGs go (default docs/img)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the results to draw (default bench/results)")
    ap.add_argument("--list", action="store_true", help="list the figures and their sources")
    args = ap.parse_args(argv)
    if args.list:
        for name, (_, source, _writer) in FIGURES.items():
            print(f"{name:13} {source}")
        return 0
    names = [n.strip() for n in re.split(r"[,\s]+", args.only) if n.strip()] if args.only else list(FIGURES)
    try:
        build(names, args.results, args.out)
    except FigureError as err:
        print(f"bench.publish.figures: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
