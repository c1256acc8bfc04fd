"""One episode of a checkpoint's policy as a picture: ``rl-system eval CHECKPOINT --render OUT.png``.

:func:`render_episode` builds the env named in the checkpoint's config with one copy (env index 0),
builds the policy with ``rl_system.algos.load_policy`` (the weights loaded) and runs one
episode, recording the env's state tensors after every step; then it draws the episode with
matplotlib (Agg backend: no display needed) and writes a PNG.

What is drawn comes from a small registry, env name -> :class:`Renderer` subclass
(:func:`register_renderer`); an env without one raises :class:`RenderError` (the CLI prints one line
and exits with 2). Built in:

* ``AirCombat``: the red and blue aircraft tracks (top view, km), missile tracks in the launching
  side's colour, launch points, hits and destroyed aircraft; the outcome, hits and missiles fired
  in the title.
* ``Navigation``: the robot's path (coloured by height), start and goal, static cylinders as
  circles (shaded by height), the moving obstacles' tracks, and the horizontal (0°) lidar beams
  from a few poses along the path and the last one, coloured by the measured range.

A renderer reads the env's state tensors (attributes such as ``env._pos``); the envs reset
finished episodes inside ``step`` (``SAME_STEP``), so to see the state an episode ended in, the
recorder wraps the env's ``_reset_envs(idx)`` and copies the state just before the reset. The
attributes each renderer relies on are listed in its docstring.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import torch

from envs import make_env
from envs.base import StepResult, VecEnv
from rl_system.algos import load_policy
from rl_system.config import RunConfig


class RenderError(RuntimeError):
    """A checkpoint that cannot be rendered (no renderer for its env, no matplotlib), one line."""


class Renderer:
    """Records one episode of env index 0 and draws it.

    ``start(env, obs)`` is called after the reset, ``capture(env)`` after every step where the
    episode goes on and just before the env resets it where it ended (the final state),
    ``on_step(out, action)`` after every step with the step's result; ``draw(fig, meta)`` draws
    on an empty figure; ``meta`` has ``env``, ``algo``, ``policy_version``, ``steps``,
    ``return``, ``deterministic`` and ``info`` (the last step's info entries of env 0, as Python
    scalars)."""

    figsize: tuple[float, float] = (9.0, 8.0)

    def start(self, env: VecEnv, obs: dict[str, torch.Tensor]) -> None:
        raise NotImplementedError

    def capture(self, env: VecEnv) -> None:
        raise NotImplementedError

    def on_step(self, out: StepResult, action: torch.Tensor) -> None:
        """Optional: look at the step's result (rewards, final observations...)."""

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        raise NotImplementedError


_RENDERERS: dict[str, Callable[[], Renderer]] = {}


def register_renderer(env_name: str, factory: Callable[[], Renderer]) -> None:
    """Make ``rl-system eval --render`` draw episodes of ``env_name`` with ``factory()``."""
    _RENDERERS[env_name] = factory


def renderer_names() -> list[str]:
    return sorted(_RENDERERS)


def _first(t: torch.Tensor) -> torch.Tensor:
    """Env 0's row, detached on the CPU (a copy: the env updates its tensors in place)."""
    return t[0].detach().to("cpu", copy=True)


# --------------------------------------------------------------------------- air combat


class AirCombatRenderer(Renderer):
    """Reads ``env._x``, ``env._y``, ``env._alive`` ``[N, 2]`` (side 0 red, 1 blue) and
    ``env._m_active``, ``env._m_x``, ``env._m_y`` ``[N, 2, slots]``, ``env.dt``, and
    ``info["outcome"]`` (1 win, 2 loss, 3 draw, 4 timeout)."""

    figsize = (9.0, 8.5)

    def __init__(self) -> None:
        self.frames: list[tuple[torch.Tensor, ...]] = []

    def start(self, env: VecEnv, obs: dict[str, torch.Tensor]) -> None:
        self.dt = float(getattr(env, "dt", 0.0))
        self.capture(env)

    def capture(self, env: VecEnv) -> None:
        self.frames.append(tuple(_first(getattr(env, name)) for name in
                                 ("_x", "_y", "_alive", "_m_active", "_m_x", "_m_y")))

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        x, y, alive, m_active, m_x, m_y = (torch.stack(f) for f in zip(*self.frames))
        x, y, m_x, m_y = x / 1000.0, y / 1000.0, m_x / 1000.0, m_y / 1000.0  # km
        ax = fig.add_subplot(1, 1, 1)
        colours = ("tab:red", "tab:blue")
        names = ("red", "blue")
        fired, hits = [0, 0], [0, 0]
        n_frames, n_sides, n_slots = m_active.shape
        for side in range(n_sides):
            c = colours[side]
            ax.plot(x[:, side], y[:, side], color=c, lw=2.0, label=f"{names[side]} aircraft")
            ax.plot(x[0, side], y[0, side], "o", color=c, ms=8, mec="k")
            ax.annotate(f"{names[side]} start", (float(x[0, side]), float(y[0, side])),
                        textcoords="offset points", xytext=(6, 6), fontsize=8, color=c)
            if not bool(alive[-1, side]):
                ax.plot(x[-1, side], y[-1, side], "X", color=c, ms=16, mec="k", mew=1.5, zorder=4)
            else:
                ax.plot(x[-1, side], y[-1, side], ">", color=c, ms=8, mec="k")
            target = 1 - side
            for slot in range(n_slots):
                act = m_active[:, side, slot]
                t = 0
                while t < n_frames:  # each run of consecutive active frames is one missile
                    if not bool(act[t]):
                        t += 1
                        continue
                    t0 = t
                    while t < n_frames and bool(act[t]):
                        t += 1
                    fired[side] += 1
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
                        hits[side] += 1
                        ax.plot(m_x[t, side, slot], m_y[t, side, slot], "*", color="gold",
                                ms=18, mec="k", mew=1.0, zorder=5)
        outcome = {1: "red wins", 2: "blue wins", 3: "draw (both destroyed)", 4: "timeout"}.get(
            int(meta["info"].get("outcome", 0)), "episode cut")
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
        sim_s = meta["steps"] * self.dt
        ax.set_title(f"{meta['env']} ({meta['algo']} v{meta['policy_version']}): {outcome}\n"
                     f"hits red {hits[0]} / blue {hits[1]}, missiles fired red {fired[0]} / blue {fired[1]}, "
                     f"{meta['steps']} steps ({sim_s:.0f} s), return {meta['return']:.2f}", fontsize=10)


# --------------------------------------------------------------------------- navigation


class NavigationRenderer(Renderer):
    """Reads ``env._pos``, ``env._goal`` ``[N, 3]``, ``env._yaw`` ``[N]``, ``env._cyl``
    ``[N, S, 4]`` (x, y, radius, height), ``env._dyn_pos`` ``[N, M, 3]``, ``env._dyn_size``
    ``[N, M, 3]`` (radius, half-height, is_sphere), ``env.arena``, the ``"lidar"`` observation
    ``[N, 1, beams, elevations]`` (``LIDAR_RANGE - distance``, beam ``k`` at azimuth
    ``yaw + 2 pi k / beams``) with the module constants ``LIDAR_RANGE`` and ``ELEVATIONS_DEG``,
    and ``info["success"]`` / ``info["collision"]``."""

    figsize = (13.0, 7.5)
    lidar_poses = 4  # beams are drawn from this many poses (evenly spaced, the last one included)

    def __init__(self) -> None:
        self.pos: list[torch.Tensor] = []
        self.dyn_pos: list[torch.Tensor] = []
        self.lidar: list[torch.Tensor] = []

    def start(self, env: VecEnv, obs: dict[str, torch.Tensor]) -> None:
        from envs import navigation

        self.lidar_range = float(getattr(navigation, "LIDAR_RANGE", 4.0))
        elevations = list(getattr(navigation, "ELEVATIONS_DEG", (0.0,)))
        self.elevations = [float(e) for e in elevations]
        self.level = min(range(len(elevations)), key=lambda i: abs(elevations[i]))  # the 0° beams
        self.robot_radius = float(getattr(navigation, "ROBOT_RADIUS", 0.2))
        self.goal_tolerance = float(getattr(navigation, "GOAL_TOLERANCE", 0.5))
        self.arena = float(env.arena)
        self.goal = _first(env._goal)
        self.yaw = float(env._yaw[0])
        self.cyl = _first(env._cyl)
        self.dyn_size = _first(env._dyn_size)
        self.lidar.append(_first(obs["lidar"]))
        self.capture(env)

    def capture(self, env: VecEnv) -> None:
        self.pos.append(_first(env._pos))
        self.dyn_pos.append(_first(env._dyn_pos))

    def on_step(self, out: StepResult, action: torch.Tensor) -> None:
        # final_obs is the observation at the state the step reached (before any reset).
        self.lidar.append(_first(out.final_obs["lidar"]))

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        from matplotlib import cm, colormaps, colors
        from matplotlib.collections import LineCollection
        from matplotlib.patches import Circle

        pos = torch.stack(self.pos)  # [T+1, 3]
        dyn = torch.stack(self.dyn_pos)  # [T+1, M, 3]
        grid = fig.add_gridspec(2, 2, width_ratios=(3, 2), height_ratios=(3, 1))
        ax = fig.add_subplot(grid[:, 0])
        a = self.arena
        ax.plot([0, a, a, 0, 0], [0, 0, a, a, 0], color="k", lw=1.0)

        # Static cylinders, shaded by height (removed ones are parked far outside the arena).
        heights = colors.Normalize(0.0, 5.0)
        for xc, yc, r, h in self.cyl.tolist():
            if -a <= xc <= 2 * a and -a <= yc <= 2 * a:
                ax.add_patch(Circle((xc, yc), r, facecolor=colormaps["Greys"](0.3 + 0.6 * heights(h)),
                                    edgecolor="k", lw=0.6, alpha=0.85))
        # Moving obstacles: their tracks, and their size where the episode ended.
        for j in range(dyn.shape[1]):
            ax.plot(dyn[:, j, 0], dyn[:, j, 1], ":", color="tab:orange", lw=1.2)
            ax.add_patch(Circle((float(dyn[-1, j, 0]), float(dyn[-1, j, 1])), float(self.dyn_size[j, 0]),
                                facecolor="tab:orange", edgecolor="k", alpha=0.6, lw=0.6))
            ax.plot(dyn[0, j, 0], dyn[0, j, 1], ".", color="tab:orange", ms=5)

        # Lidar beams (horizontal ones) from a few poses, coloured by the measured range.
        t_last = len(self.lidar) - 1
        k = max(1, min(self.lidar_poses, t_last + 1))
        poses = sorted({round(i * t_last / max(k - 1, 1)) for i in range(k)} | {t_last})
        rng_norm = colors.Normalize(0.0, self.lidar_range)
        cmap = colormaps["plasma"]
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

        # Path coloured by height, start and goal.
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
        ax.set_xlim(-0.05 * a, 1.05 * a)
        ax.set_ylim(-0.05 * a, 1.05 * a)
        ax.set_aspect("equal")
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.legend(loc="upper left", fontsize=7, framealpha=0.8)

        info = meta["info"]
        outcome = ("reached the goal" if info.get("success") else "collision" if info.get("collision")
                   else "timeout" if meta.get("truncated") else "episode cut")
        dist_left = float(torch.linalg.vector_norm(self.goal - pos[-1]))
        ax.set_title(f"{meta['env']} ({meta['algo']} v{meta['policy_version']}): {outcome}\n"
                     f"{meta['steps']} steps, return {meta['return']:.2f}, {dist_left:.1f} m from the goal",
                     fontsize=10)

        # Side panels: height over time (with the goal height), and the last lidar scan.
        hz = fig.add_subplot(grid[0, 1])
        hz.plot(pos[:, 2], color="tab:blue", label="robot")
        hz.axhline(float(self.goal[2]), color="tab:green", ls="--", label="goal")
        hz.set_xlabel("step")
        hz.set_ylabel("height (m)")
        hz.grid(True, alpha=0.3)
        hz.legend(fontsize=7)
        scan = fig.add_subplot(grid[1, 1])
        last = (self.lidar_range - self.lidar[t_last][0]).clamp(0.0, self.lidar_range)  # [beams, elev]
        im = scan.imshow(last.T.numpy(), aspect="auto", cmap=cmap, norm=rng_norm, origin="lower")
        scan.set_xlabel("beam (10° steps, goal frame)")
        if len(self.elevations) == last.shape[1]:
            scan.set_yticks(range(len(self.elevations)), [f"{e:g}°" for e in self.elevations])
        scan.set_ylabel("elevation")
        scan.set_title("last lidar scan (range, m)", fontsize=8)
        fig.colorbar(im, ax=scan, fraction=0.05)


register_renderer("AirCombat", AirCombatRenderer)
register_renderer("Navigation", NavigationRenderer)


# --------------------------------------------------------------------------- driving an episode


def _scalar(v: torch.Tensor) -> Any:
    v = v.detach().cpu()
    return v.item() if v.numel() == 1 else v.tolist()


@torch.no_grad()
def record_episode(state: dict[str, Any], renderer: Renderer, deterministic: bool = True, seed: int = 12345,
                   max_steps: int = 1_000_000, device: str = "cpu") -> dict[str, Any]:
    """Run one episode of env index 0 with the checkpoint's policy, feeding ``renderer``.
    Returns the ``meta`` dict :meth:`Renderer.draw` gets."""
    cfg = RunConfig.model_validate(state["config"])
    torch.manual_seed(seed)
    env = make_env(cfg.env.name, 1, device, seed=seed, **cfg.env.test_kwargs())
    try:
        policy = load_policy(state, env, device)
        obs = env.reset(seed=seed)
        renderer.start(env, obs)
        # See the state an episode ended in: the env resets finished envs inside step().
        ended = [False]
        original_reset = getattr(env, "_reset_envs", None)
        if original_reset is not None:
            def reset_hook(idx: torch.Tensor) -> None:
                if bool((idx == 0).any()):
                    renderer.capture(env)
                    ended[0] = True
                original_reset(idx)

            env._reset_envs = reset_hook  # type: ignore[attr-defined]
        steps, ret, out = 0, 0.0, None
        while steps < max_steps:
            acted = policy.act(obs, deterministic=deterministic)
            action = acted[0] if isinstance(acted, tuple) else acted
            ended[0] = False
            out = env.step(action)
            steps += 1
            ret += float(out.reward[0])
            renderer.on_step(out, action)
            done = bool(out.terminated[0] | out.truncated[0])
            if not ended[0]:  # no reset happened (or the env has no hook): the state is current
                renderer.capture(env)
            if done:
                break
            obs = out.obs
    finally:
        env.close()
    info = {k: _scalar(v[0]) for k, v in out.info.items()} if out is not None else {}
    return {"env": cfg.env.name, "algo": cfg.algo, "policy_version": int(state["learner"].get("version", 0)),
            "steps": steps, "return": ret, "deterministic": deterministic, "info": info,
            "terminated": bool(out.terminated[0]) if out is not None else False,
            "truncated": bool(out.truncated[0]) if out is not None else False}


def render_episode(state: dict[str, Any], out_path: str | Path, deterministic: bool = True, seed: int = 12345,
                   max_steps: int = 1_000_000, dpi: int = 110) -> dict[str, Any]:
    """Run one episode of the checkpoint's policy and write its picture to ``out_path`` (PNG).
    Returns the episode's summary (``meta`` plus ``"path"``); raises :class:`RenderError`."""
    env_name = RunConfig.model_validate(state["config"]).env.name
    factory = _RENDERERS.get(env_name)
    if factory is None:
        raise RenderError(f"no renderer for env {env_name!r} (renderers: {', '.join(renderer_names())})")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RenderError("matplotlib is not installed; pip install 'rl-system[render]'") from None

    renderer = factory()
    meta = record_episode(state, renderer, deterministic=deterministic, seed=seed, max_steps=max_steps)
    # A Figure on an Agg canvas, without pyplot: no display, no global backend switch.
    fig = Figure(figsize=renderer.figsize, layout="constrained")
    FigureCanvasAgg(fig)
    renderer.draw(fig, meta)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, format="png", dpi=dpi)
    meta["path"] = str(out_path)
    return meta
