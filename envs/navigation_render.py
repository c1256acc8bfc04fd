"""Draws one :mod:`rl_system.envs.navigation` episode (``rl-system eval CHECKPOINT --render OUT.png``).

Top view in metres: the robot's path (coloured by height), start and goal, static cylinders as
circles (shaded by height), the moving obstacles' tracks, and the horizontal (0°) lidar beams
from a few poses along the path and the last one, coloured by the measured range; side panels
with the height over time and the last lidar scan. Reads only
:meth:`rl_system.envs.navigation.NavigationVecEnv.render_state`, ``env.arena``, the ``"lidar"``
observation ``[N, 1, beams, elevations]`` (``LIDAR_RANGE - distance``) and ``info["success"]`` /
``info["collision"]``; matplotlib is imported only when drawing.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rl_system.envs.base import Obs, StepResult, VecEnv
from rl_system.envs.navigation import ELEVATIONS_DEG, GOAL_TOLERANCE, LIDAR_RANGE
from rl_system.envs.render import Renderer

HEIGHT_RANGE = (0.0, 5.0)  # m, floor to ceiling: the colour scale of heights


def _env0(t: torch.Tensor) -> torch.Tensor:
    """Env 0's row of an observation, copied to the CPU (the env may reuse the storage)."""
    return t[0].detach().to("cpu", copy=True)


class NavigationRenderer(Renderer):
    """Records the robot's ``pos`` ``[3]`` and the moving obstacles' ``dyn_pos`` ``[M, 3]`` every
    frame and the lidar observation ``[1, beams, elevations]`` every step (lists ``pos``,
    ``dyn_pos``, ``lidar``); the layout (``goal``, ``yaw``, ``cyl``, ``dyn_size``, ``arena``) once
    at the start."""

    figsize = (13.0, 7.5)
    lidar_poses = 4  # beams are drawn from this many poses (evenly spaced, the last one included)
    history = ("pos", "dyn_pos", "lidar")

    def __init__(self) -> None:
        self.pos: list[torch.Tensor] = []
        self.dyn_pos: list[torch.Tensor] = []
        self.lidar: list[torch.Tensor] = []
        self.lidar_range = LIDAR_RANGE
        self.elevations = [float(e) for e in ELEVATIONS_DEG]
        self.level = min(range(len(self.elevations)), key=lambda i: abs(self.elevations[i]))  # the 0° beams
        self.goal_tolerance = GOAL_TOLERANCE

    def start(self, env: VecEnv, obs: Obs) -> None:
        state = env.render_state(0)
        self.arena = float(env.arena)
        self.goal, self.yaw = state["goal"], float(state["yaw"])
        self.cyl, self.dyn_size = state["cyl"], state["dyn_size"]
        self.lidar.append(_env0(obs["lidar"]))
        self.capture(env)

    def capture(self, env: VecEnv) -> None:
        state = env.render_state(0)
        self.pos.append(state["pos"])
        self.dyn_pos.append(state["dyn_pos"])

    def on_step(self, out: StepResult, action: torch.Tensor) -> None:
        # final_obs is the observation at the state the step reached (before any reset).
        self.lidar.append(_env0(out.final_obs["lidar"]))

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        from matplotlib import colormaps, colors

        pos = torch.stack(self.pos)  # [T+1, 3]
        grid = fig.add_gridspec(2, 2, width_ratios=(3, 2), height_ratios=(3, 1))
        ax = fig.add_subplot(grid[:, 0])
        a = self.arena
        ax.plot([0, a, a, 0, 0], [0, 0, a, a, 0], color="k", lw=1.0)
        heights = colors.Normalize(*HEIGHT_RANGE)
        rng_norm = colors.Normalize(0.0, self.lidar_range)
        cmap = colormaps["plasma"]
        self._draw_obstacles(ax, heights)
        self._draw_lidar(ax, pos, rng_norm, cmap)
        self._draw_path(fig, ax, pos, heights, rng_norm, cmap)
        ax.set_title(self._title(meta, pos), fontsize=10)
        self._draw_panels(fig, grid, pos, rng_norm, cmap)

    def _draw_obstacles(self, ax: Any, heights: Any) -> None:
        """Static cylinders shaded by height (``heights``: a Normalize); the moving obstacles'
        tracks and their size where the episode ended."""
        from matplotlib import colormaps
        from matplotlib.patches import Circle

        a = self.arena
        for xc, yc, r, h in self.cyl.tolist():
            if -a <= xc <= 2 * a and -a <= yc <= 2 * a:  # removed cylinders are parked far outside
                ax.add_patch(Circle((xc, yc), r, facecolor=colormaps["Greys"](0.3 + 0.6 * heights(h)),
                                    edgecolor="k", lw=0.6, alpha=0.85))
        dyn = torch.stack(self.dyn_pos)  # [T+1, M, 3]
        for j in range(dyn.shape[1]):
            ax.plot(dyn[:, j, 0], dyn[:, j, 1], ":", color="tab:orange", lw=1.2)
            ax.add_patch(Circle((float(dyn[-1, j, 0]), float(dyn[-1, j, 1])), float(self.dyn_size[j, 0]),
                                facecolor="tab:orange", edgecolor="k", alpha=0.6, lw=0.6))
            ax.plot(dyn[0, j, 0], dyn[0, j, 1], ".", color="tab:orange", ms=5)

    def _draw_lidar(self, ax: Any, pos: torch.Tensor, rng_norm: Any, cmap: Any) -> None:
        """The 0° lidar beams from a few poses of ``pos`` ``[T+1, 3]``, coloured by range."""
        from matplotlib.collections import LineCollection

        t_last = len(self.lidar) - 1
        k = max(1, min(self.lidar_poses, t_last + 1))
        poses = sorted({round(i * t_last / max(k - 1, 1)) for i in range(k)} | {t_last})
        for t in poses:
            scan = self.lidar[t][0, :, self.level]  # [beams] = LIDAR_RANGE - distance
            dist = (self.lidar_range - scan).clamp(0.0, self.lidar_range)
            n_beams = dist.shape[0]
            az = self.yaw + torch.arange(n_beams) * (2 * math.pi / n_beams)
            px, py = float(pos[t, 0]), float(pos[t, 1])
            ends = torch.stack([px + dist * torch.cos(az), py + dist * torch.sin(az)], 1)
            segs = [[(px, py), (float(e[0]), float(e[1]))] for e in ends]
            hit = scan > 0
            # Beams that hit something within range in the range colour, the others faint grey.
            lc = LineCollection(segs, colors=[cmap(rng_norm(float(d))) if h else (0.6, 0.6, 0.6, 0.5)
                                              for d, h in zip(dist.tolist(), hit.tolist())],
                                linewidths=[1.2 if h else 0.4 for h in hit.tolist()],
                                alpha=0.9 if t == t_last else 0.55)
            ax.add_collection(lc)
            ax.scatter(ends[hit, 0], ends[hit, 1], s=6, color=[cmap(rng_norm(float(d))) for d in dist[hit]], zorder=3)

    def _draw_path(self, fig: Any, ax: Any, pos: torch.Tensor, heights: Any, rng_norm: Any, cmap: Any) -> None:
        """The path ``pos`` ``[T+1, 3]`` coloured by height, start, goal and last pose; legend,
        colour bars and the axes of the top view."""
        from matplotlib import cm, colormaps
        from matplotlib.collections import LineCollection
        from matplotlib.patches import Circle

        pts = pos[:, :2].numpy()
        if len(pts) > 1:
            path = LineCollection([[tuple(pts[i]), tuple(pts[i + 1])] for i in range(len(pts) - 1)],
                                  cmap=colormaps["viridis"], norm=heights, linewidths=2.5, zorder=4)
            path.set_array(pos[1:, 2].numpy())
            ax.add_collection(path)
            fig.colorbar(path, ax=ax, fraction=0.04, pad=0.01, label="robot height (m)")
        ax.plot(pos[0, 0], pos[0, 1], "o", color="tab:green", ms=9, mec="k", zorder=5, label="start")
        ax.add_patch(Circle((float(self.goal[0]), float(self.goal[1])), self.goal_tolerance,
                            fill=False, edgecolor="tab:green", lw=1.2, ls="--"))
        ax.plot(self.goal[0], self.goal[1], "*", color="tab:green", ms=16, mec="k", zorder=5, label="goal")
        ax.plot(pos[-1, 0], pos[-1, 1], "o", color="white", ms=7, mec="k", zorder=5, label="last pose")
        ax.plot([], [], ":", color="tab:orange", label="moving obstacle track")
        ax.plot([], [], "o", color="grey", mec="k", label="static cylinder")
        fig.colorbar(cm.ScalarMappable(norm=rng_norm, cmap=cmap), ax=ax, fraction=0.04, pad=0.08,
                     label="lidar range (m), 0° beams")
        a = self.arena
        ax.set_xlim(-0.05 * a, 1.05 * a)
        ax.set_ylim(-0.05 * a, 1.05 * a)
        ax.set_aspect("equal")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.legend(loc="upper left", fontsize=7, framealpha=0.8)

    def _title(self, meta: dict[str, Any], pos: torch.Tensor) -> str:
        info = meta["info"]
        outcome = ("en route" if meta.get("in_progress") else "reached the goal" if info.get("success") else "collision" if info.get("collision")
                   else "timeout" if meta.get("truncated") else "episode cut")
        dist_left = float(torch.linalg.vector_norm(self.goal - pos[-1]))
        return (f"{meta['env']} ({meta['algo']} v{meta['policy_version']}): {outcome}\n"
                f"{meta['steps']} steps, return {meta['return']:.2f}, {dist_left:.1f} m from the goal")

    def _draw_panels(self, fig: Any, grid: Any, pos: torch.Tensor, rng_norm: Any, cmap: Any) -> None:
        """Side panels: the height over time (with the goal height), and the last lidar scan."""
        hz = fig.add_subplot(grid[0, 1])
        hz.plot(pos[:, 2], color="tab:blue", label="robot")
        hz.axhline(float(self.goal[2]), color="tab:green", ls="--", label="goal")
        hz.set_xlabel("step")
        hz.set_ylabel("height (m)")
        hz.grid(True, alpha=0.3)
        hz.legend(fontsize=7)
        scan = fig.add_subplot(grid[1, 1])
        last = (self.lidar_range - self.lidar[-1][0]).clamp(0.0, self.lidar_range)  # [beams, elev]
        im = scan.imshow(last.T.numpy(), aspect="auto", cmap=cmap, norm=rng_norm, origin="lower")
        scan.set_xlabel("beam (10° steps, goal frame)")
        if len(self.elevations) == last.shape[1]:
            scan.set_yticks(range(len(self.elevations)), [f"{e:g}°" for e in self.elevations])
        scan.set_ylabel("elevation")
        scan.set_title("last lidar scan (range, m)", fontsize=8)
        fig.colorbar(im, ax=scan, fraction=0.05)
