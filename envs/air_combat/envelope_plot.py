"""Pictures of an :class:`rl_system.envs.air_combat.envelope.Envelope` (matplotlib, Agg: no display needed).

* :func:`draw_envelope`: one half-disc per manoeuvre, launch range outwards and target aspect
  round the rim (0° hot at the top, 180° cold at the bottom), coloured by hit probability, with
  the maximum range and the no-escape range drawn and named on every panel.
* :func:`draw_space_time`: per traced aspect, distance from the launch point against time: the
  missile's kinematic reach, each target's escape path from its launch range, the missile's own
  path, and an × where it hits. Where a target's path stays above the reach curve it escapes.
* :func:`draw_launch_map`: a policy's launches (range and aspect at launch; hit, miss, or still
  in flight when the episode ended) on the envelope against the scripted opponent.

matplotlib is imported when a picture is drawn (``pip install matplotlib, or pip install -e '.[render]' in a checkout``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from rl_system.envs.air_combat.envelope import Envelope

TITLES = {"straight": "non-manoeuvring target", "beam": "target turns to beam at launch",
          "cold": "target turns cold at launch", "scripted": "scripted opponent (training)"}
COLOURS = {"straight": "tab:blue", "beam": "tab:orange", "cold": "tab:red", "scripted": "tab:purple"}


class PlotError(RuntimeError):
    """No matplotlib; one line."""


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("drawing needs matplotlib: pip install matplotlib, or pip install -e '.[render]' in a checkout") from None
    return plt


def _subtitle(env: Envelope) -> str:
    s = env.spec
    return (f"{s.samples} shots per cell, shooter {s.shooter_speed[0]:.0f}-{s.shooter_speed[1]:.0f} m/s, target "
            f"{s.target_speed[0]:.0f}-{s.target_speed[1]:.0f} m/s, time step {env.dt:.3f} s "
            f"({env.substeps} sub-steps), seed {s.seed}")


def _half_disc(ax, r_max: float) -> None:
    ax.set_theta_zero_location("W")                         # 0° hot on the left, 180° cold on the right
    ax.set_theta_direction(-1)
    ax.set_thetamin(0)
    ax.set_thetamax(180)
    ax.set_ylim(0, r_max)
    ax.set_xticks([math.radians(a) for a in (0, 45, 90, 135, 180)])
    ax.set_xticklabels(["0° hot", "45°", "90° beam", "135°", "180° cold"])
    ax.set_rlabel_position(90)
    ax.tick_params(labelsize=8)


def _half_disc_grid(plt, rows: int, cols: int, radius_in: float, top_in: float, right_in: float):
    """A figure of ``rows x cols`` half-disc polar axes laid out by hand: matplotlib draws a half
    disc of diameter ``d`` in the middle band of a square ``d x d`` box, so in a subplot grid half
    of every cell stays empty. Here each box reaches ``d / 4`` below its disc's flat side and
    above its top, into the margins and the neighbours' empty bands. Returns the figure, the axes
    (row-major) and each panel's title anchor ``(x, y)`` in figure fractions."""
    col_w, row_h, bottom, left = 2 * radius_in + 1.0, radius_in + 1.15, 0.45, 0.65
    width, height = left + cols * col_w + right_in, bottom + rows * row_h + top_in
    fig = plt.figure(figsize=(width, height))
    axes, anchors = [], []
    for i in range(rows):
        base = bottom + (rows - 1 - i) * row_h                       # the disc's flat side, inches
        for j in range(cols):
            x0 = left + j * col_w
            axes.append(fig.add_axes([x0 / width, (base - radius_in / 2) / height, 2 * radius_in / width,
                                      2 * radius_in / height], projection="polar"))
            anchors.append(((x0 + radius_in) / width, (base + radius_in + 0.45) / height))
    return fig, axes, anchors


def _heat(ax, env: Envelope, manoeuvre: str):
    s = env.spec
    p = env.p_hit[s.manoeuvres.index(manoeuvre)].numpy()          # [aspect, range]
    theta = _cell_edges([math.radians(a) for a in s.aspects_deg], 0.0, math.pi)
    radius = _cell_edges(list(s.ranges_km), 0.0, None)
    return ax.pcolormesh(theta, radius, p.T, cmap="viridis", vmin=0.0, vmax=1.0, shading="flat")


def _cell_edges(centres: list[float], lo: float, hi: float | None) -> list[float]:
    """Edges around grid centres (midpoints; the outer ones clipped to ``[lo, hi]``)."""
    if len(centres) == 1:
        half = 0.5 if hi is None else (hi - lo) / 2
        return [max(lo, centres[0] - half), centres[0] + half if hi is None else min(hi, centres[0] + half)]
    mids = [(a + b) / 2 for a, b in zip(centres, centres[1:])]
    first, last = 2 * centres[0] - mids[0], 2 * centres[-1] - mids[-1]
    return [max(lo, first), *mids, last if hi is None else min(hi, last)]


def _edge_curves(ax, env: Envelope) -> None:
    """R_max (white, dashed) and R_ne (black) with their names written beside the curves (R_max
    near the hot side, R_ne near the cold side, so the two names never overlap)."""
    theta = [math.radians(a) for a in env.spec.aspects_deg]
    for edge, name, style, at in ((env.r_max_km, "R_max", dict(color="white", ls="--"), 0.2),
                                  (env.r_no_escape_km, "R_ne", dict(color="black", ls="-"), 0.75)):
        if edge is None:
            continue
        ax.plot(theta, edge.numpy(), lw=2, **style)
        k = min(len(theta) - 1, int(at * len(theta)))
        if not math.isnan(float(edge[k])):
            ax.annotate(name, (theta[k], float(edge[k])), xytext=(6, 4), textcoords="offset points", fontsize=9,
                        color=style["color"], fontweight="bold",
                        bbox=dict(boxstyle="round,pad=0.15", fc="0.5", alpha=0.6, lw=0))


def draw_envelope(env: Envelope, path: Path) -> Path:
    """The hit-probability map, one panel per manoeuvre; writes a PNG at ``path``."""
    plt = _pyplot()
    s = env.spec
    r_lim = s.ranges_km[-1] + (s.ranges_km[-1] - s.ranges_km[-2] if len(s.ranges_km) > 1 else 1.0) / 2
    cols = min(2, len(s.manoeuvres))
    rows = math.ceil(len(s.manoeuvres) / cols)
    fig, axes, anchors = _half_disc_grid(plt, rows, cols, radius_in=2.8, top_in=0.9, right_in=1.0)
    mesh = None
    for ax, (x, y), m in zip(axes, anchors, s.manoeuvres):
        _half_disc(ax, r_lim)
        mesh = _heat(ax, env, m)
        _edge_curves(ax, env)
        fig.text(x, y, TITLES[m], ha="center", fontsize=11)
    width = fig.get_figwidth()
    fig.colorbar(mesh, cax=fig.add_axes([1.0 - 0.75 / width, 0.2, 0.18 / width, 0.55]), label="hit probability")
    fig.suptitle("AirCombat missile launch envelope: hit probability by launch range (km, from the centre "
                 "outwards) and target aspect (round the rim)\nR_max: far edge against a non-manoeuvring target; R_ne (no escape): "
                 "far edge against a target turning cold at launch\n" + _subtitle(env), fontsize=11, y=0.995)
    return _save(fig, path, plt)


def draw_space_time(env: Envelope, path: Path, every_km: float = 10.0,
                    manoeuvres: tuple[str, ...] = ("straight", "cold")) -> Path:
    """Distance from the launch point against time of flight, one panel per traced aspect; the
    escape paths of ``manoeuvres`` (those swept) from launch ranges about ``every_km`` apart."""
    plt = _pyplot()
    aspects = sorted({t["aspect_deg"] for t in env.traces})
    if not aspects:
        raise ValueError("no traced aspect is on the sweep's aspect grid")
    ranges = env.spec.ranges_km
    shown = sorted({min(ranges, key=lambda r: abs(r - k * every_km))
                    for k in range(1, max(1, int(ranges[-1] / every_km)) + 1)})
    drawn = [m for m in manoeuvres if m in env.spec.manoeuvres] or list(env.spec.manoeuvres[:1])
    time_s = torch.arange(env.reach_km.numel()) * env.dt
    fig, axes = plt.subplots(1, len(aspects), figsize=(5.6 * len(aspects), 6.2), sharey=True, squeeze=False)
    for ax, aspect in zip(axes[0], aspects):
        ax.plot(time_s, env.reach_km, color="black", lw=2.5, zorder=4)
        end = int((~torch.isnan(env.reach_km)).nonzero().max())
        ax.annotate("missile reach\n(straight flight)", (float(time_s[end]), float(env.reach_km[end])),
                    xytext=(-6, 6), textcoords="offset points", ha="right", fontsize=9)
        for t in env.traces:
            if t["aspect_deg"] != aspect or t["range_km"] not in shown or t["manoeuvre"] not in drawn:
                continue
            colour = COLOURS[t["manoeuvre"]]
            k = int((~torch.isnan(t["missile_km"])).nonzero().max())      # the missile's last step
            ax.plot(time_s[:k + 1], t["target_km"][:k + 1], color=colour, lw=1.4, ls="-" if t["hit"] else ":")
            ax.plot(time_s, t["missile_km"], color=colour, lw=0.6, alpha=0.5)
            if t["hit"]:
                ax.plot(float(time_s[k]), float(t["target_km"][k]), marker="x", color=colour, ms=8, mew=2)
        ax.set_title(f"target aspect {aspect:.0f}° ({_aspect_word(aspect)})", fontsize=11)
        ax.set_xlabel("time since launch (s)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("distance from the launch point (km)")
    handles = [plt.Line2D([], [], color=COLOURS[m], lw=1.6) for m in drawn]
    handles += [plt.Line2D([], [], color="0.3", ls=":"), plt.Line2D([], [], color="0.3", marker="x", ls="")]
    fig.legend(handles, [TITLES[m] for m in drawn] + ["target escapes", "hit"], loc="lower center",
               ncol=len(handles), fontsize=9, frameon=False)
    fig.suptitle("Space-time diagram: the missile's reach against each target's escape path until the missile "
                 f"hits or dies (thin: the missile's own path), launch ranges {', '.join(f'{r:g}' for r in shown)} km\n" + _subtitle(env), fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.92))
    return _save(fig, path, plt)


def _aspect_word(aspect: float) -> str:
    return "hot" if aspect < 45 else "beam" if aspect <= 135 else "cold"


OUTCOME_STYLE = {"hit": (("hit",), dict(marker="o", color="lime", label="hit")),
                 "miss": (("miss",), dict(marker="x", color="red", label="miss (self-destructed)")),
                 "cut": (("cut", "pending"), dict(marker="o", color="white", label="in flight when the episode ended"))}


def draw_launch_map(env: Envelope, launches: dict[str, Any], path: Path, title: str) -> Path:
    """A policy's launches (``launches``: ``range_km``, ``aspect_deg``, ``outcome`` lists) on the
    envelope against the scripted opponent (or the first manoeuvre swept)."""
    plt = _pyplot()
    s = env.spec
    backdrop = "scripted" if "scripted" in s.manoeuvres else s.manoeuvres[0]
    r_lim = max(s.ranges_km[-1], max(launches["range_km"], default=0.0) * 1.05)
    fig, (ax,), _ = _half_disc_grid(plt, 1, 1, radius_in=4.0, top_in=1.0, right_in=1.2)
    _half_disc(ax, r_lim)
    mesh = _heat(ax, env, backdrop)
    _edge_curves(ax, env)
    shots = launches.get("shot", [1] * len(launches["outcome"]))
    for first in (False, True):                                   # the first launch of an episode on top, larger
        for outcomes, style in OUTCOME_STYLE.values():
            pick = [i for i, o in enumerate(launches["outcome"]) if o in outcomes and (shots[i] == 1) == first]
            if not pick:
                continue
            which = "first launch" if first else "later launch"
            ax.scatter([math.radians(launches["aspect_deg"][i]) for i in pick],
                       [launches["range_km"][i] for i in pick], s=48 if first else 12, marker=style["marker"],
                       c=style["color"], edgecolors="black" if style["marker"] != "x" else None,
                       linewidths=0.6 if first else 0.2, label=f"{which}: {style['label']} ({len(pick)})",
                       zorder=4 if first else 3)
    fig.legend(loc="upper left", bbox_to_anchor=(0.01, 0.9), fontsize=9, framealpha=0.8)
    width = fig.get_figwidth()
    fig.colorbar(mesh, cax=fig.add_axes([1.0 - 0.9 / width, 0.15, 0.18 / width, 0.6]),
                 label=f"hit probability ({TITLES[backdrop]})")
    fig.suptitle(title + "\n" + _subtitle(env), fontsize=10, y=0.99)
    return _save(fig, path, plt)


def _save(fig, path: Path, plt) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
