"""Draws one :mod:`rl_system.envs.air_combat` episode (``rl-system eval CHECKPOINT --render OUT.png``).

Top view in km: the red and blue aircraft tracks, missile tracks in the launching side's colour,
launch points, hits and destroyed aircraft; the outcome, hits and missiles fired in the title.
Reads only :meth:`rl_system.envs.air_combat.AirCombatVecEnv.render_state`, ``env.dt`` and
``info["outcome"]``; matplotlib is needed only by the figure :func:`rl_system.envs.render.save_picture`
(or a video frame) hands to :meth:`AirCombatRenderer.draw`.
"""

from __future__ import annotations

from typing import Any

import torch

from rl_system.envs.air_combat.spec import BLUE, OUTCOME_DRAW, OUTCOME_LOSS, OUTCOME_TIMEOUT, OUTCOME_WIN, RED
from rl_system.envs.base import Obs, VecEnv
from rl_system.envs.render import Renderer

# Per frame, the render_state entries in this order (env index 0).
FRAME_KEYS = ("x", "y", "alive", "m_active", "m_x", "m_y")
COLOURS = {RED: "tab:red", BLUE: "tab:blue"}
NAMES = {RED: "red", BLUE: "blue"}
OUTCOME_TEXT = {OUTCOME_WIN: "red wins", OUTCOME_LOSS: "blue wins", OUTCOME_DRAW: "draw (both destroyed)",
                OUTCOME_TIMEOUT: "timeout"}


def missile_flights(active: torch.Tensor) -> list[tuple[int, int]]:
    """The flights of one missile slot: each run of consecutive ``True`` in ``active`` (bool
    ``[T]``, in flight per frame) as ``(first frame, frame after the last)``."""
    flights, t, n = [], 0, active.shape[0]
    while t < n:
        if not bool(active[t]):
            t += 1
            continue
        t0 = t
        while t < n and bool(active[t]):
            t += 1
        flights.append((t0, t))
    return flights


class AirCombatRenderer(Renderer):
    """Records ``env.render_state(0)`` every frame (``frames``: tuples in :data:`FRAME_KEYS`
    order: ``x``, ``y`` ``[2]`` m, ``alive`` ``[2]``, ``m_active``, ``m_x``, ``m_y`` ``[2, 6]``)
    and draws the duel."""

    figsize = (9.0, 8.5)
    history = ("frames",)

    def __init__(self) -> None:
        self.frames: list[tuple[torch.Tensor, ...]] = []

    def start(self, env: VecEnv, obs: Obs) -> None:
        self.dt = float(getattr(env, "dt", 0.0))
        self.capture(env)

    def capture(self, env: VecEnv) -> None:
        state = env.render_state(0)
        self.frames.append(tuple(state[key] for key in FRAME_KEYS))

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        x, y, alive, m_active, m_x, m_y = (torch.stack(f) for f in zip(*self.frames))  # [T, 2], [T, 2, 6]
        km = (x / 1000.0, y / 1000.0, alive, m_active, m_x / 1000.0, m_y / 1000.0)
        ax = fig.add_subplot(1, 1, 1)
        fired, hits = [0, 0], [0, 0]
        for side in (RED, BLUE):
            _draw_aircraft(ax, side, *km[:3])
            fired[side], hits[side] = _draw_missiles(ax, side, *km)
        _draw_legend(ax)
        outcome = "in flight" if meta.get("in_progress") else \
            OUTCOME_TEXT.get(int(meta["info"].get("outcome", 0)), "episode cut")
        sim_s = meta["steps"] * self.dt
        ax.set_title(f"{meta['env']} ({meta['algo']} v{meta['policy_version']}): {outcome}\n"
                     f"hits red {hits[0]} / blue {hits[1]}, missiles fired red {fired[0]} / blue {fired[1]}, "
                     f"{meta['steps']} steps ({sim_s:.0f} s), return {meta['return']:.2f}", fontsize=10)


def _draw_aircraft(ax: Any, side: int, x: torch.Tensor, y: torch.Tensor, alive: torch.Tensor) -> None:
    """``side``'s track (``x``, ``y`` km ``[T, 2]``), its start, and an X where it was destroyed
    (``alive`` bool ``[T, 2]``) or an arrow where it flew on."""
    c, name = COLOURS[side], NAMES[side]
    ax.plot(x[:, side], y[:, side], color=c, lw=2.0, label=f"{name} aircraft")
    ax.plot(x[0, side], y[0, side], "o", color=c, ms=8, mec="k")
    ax.annotate(f"{name} start", (float(x[0, side]), float(y[0, side])),
                textcoords="offset points", xytext=(6, 6), fontsize=8, color=c)
    if not bool(alive[-1, side]):
        ax.plot(x[-1, side], y[-1, side], "X", color=c, ms=16, mec="k", mew=1.5, zorder=4)
    else:
        ax.plot(x[-1, side], y[-1, side], ">", color=c, ms=8, mec="k")


def _draw_missiles(ax: Any, side: int, x: torch.Tensor, y: torch.Tensor, alive: torch.Tensor,
                   m_active: torch.Tensor, m_x: torch.Tensor, m_y: torch.Tensor) -> tuple[int, int]:
    """The tracks of every missile ``side`` fired (aircraft ``[T, 2]``, missiles ``[T, 2, 6]``,
    km); returns ``(missiles fired, hits)``."""
    c, target = COLOURS[side], 1 - side
    n_frames = m_active.shape[0]
    fired = hits = 0
    for slot in range(m_active.shape[2]):
        for t0, t in missile_flights(m_active[:, side, slot]):
            fired += 1
            # Launched at the launcher's position before the step that shows it in flight.
            lx = x[max(t0 - 1, 0), side]
            ly = y[max(t0 - 1, 0), side]
            end = min(t + 1, n_frames)  # the frame it left flight holds its last position
            xs = torch.cat([lx.view(1), m_x[t0:end, side, slot]])
            ys = torch.cat([ly.view(1), m_y[t0:end, side, slot]])
            ax.plot(xs, ys, "--", color=c, lw=1.1, alpha=0.85, zorder=3)
            ax.plot(xs[-1], ys[-1], "o", mfc="white", mec=c, ms=5, zorder=3)  # where it ended
            ax.plot(lx, ly, "^", color=c, ms=8, mec="k", mew=0.8)
            # A hit: the missile leaves flight on the frame its target dies.
            if t < n_frames and bool(alive[t - 1, target]) and not bool(alive[t, target]):
                hits += 1
                ax.plot(m_x[t, side, slot], m_y[t, side, slot], "*", color="gold",
                        ms=18, mec="k", mew=1.0, zorder=5)
    return fired, hits


def _draw_legend(ax: Any) -> None:
    """Legend entries for the markers, axes in km, grid."""
    ax.plot([], [], "^", color="grey", mec="k", label="missile launch")
    ax.plot([], [], "--", color="grey", label="missile track")
    ax.plot([], [], "o", mfc="white", mec="grey", ms=5, label="missile end (or in flight)")
    ax.plot([], [], "*", color="gold", mec="k", ms=12, label="hit")
    ax.plot([], [], "X", color="grey", mec="k", ms=10, label="destroyed")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (km)")
    ax.set_ylabel("y (km)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
