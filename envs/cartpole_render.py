"""Draws one :mod:`rl_system.envs.cartpole` episode: the cart and pole where the episode stands (or
ended), and the cart position and pole angle over time, with the limits that end an episode.
``rl-system eval CHECKPOINT --render OUT.png`` draws the end; ``--video OUT.mp4`` every frame.
Reads only the env's public ``state`` (``[N, 4]``: x, x_dot, theta, theta_dot)."""

from __future__ import annotations

import math
from typing import Any

import torch

from rl_system.envs.base import Obs, VecEnv
from rl_system.envs.cartpole import LENGTH, TAU, THETA_THRESHOLD_RADIANS, X_THRESHOLD
from rl_system.envs.render import Renderer


class CartPoleRenderer(Renderer):
    """Records env 0's ``(x, theta)`` every frame (list ``states`` of ``[2]`` tensors)."""

    figsize = (8.0, 6.0)
    history = ("states",)

    def __init__(self) -> None:
        self.states: list[torch.Tensor] = []

    def start(self, env: VecEnv, obs: Obs) -> None:
        self.capture(env)

    def capture(self, env: VecEnv) -> None:
        self.states.append(env.state[0, 0::2].to("cpu", torch.float64))

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        from matplotlib.patches import Rectangle

        xs, thetas = torch.stack(self.states).T  # [T+1] each
        scene, trace = fig.subplots(2, 1, height_ratios=(3, 2))
        x, theta = float(xs[-1]), float(thetas[-1])
        scene.axhline(0.0, color="k", lw=1.0)
        for edge in (-X_THRESHOLD, X_THRESHOLD):
            scene.axvline(edge, color="tab:red", ls=":", lw=1.0)
        scene.add_patch(Rectangle((x - 0.25, -0.15), 0.5, 0.3, facecolor="tab:blue", edgecolor="k"))
        pole = 2 * LENGTH
        scene.plot([x, x + pole * math.sin(theta)], [0.0, pole * math.cos(theta)], color="tab:brown", lw=6,
                   solid_capstyle="round")
        scene.set_xlim(-X_THRESHOLD - 0.4, X_THRESHOLD + 0.4)
        scene.set_ylim(-0.4, 1.3)
        scene.set_aspect("equal")
        scene.set_yticks([])
        scene.set_xlabel("cart position (m)")
        scene.set_title(self._title(meta), fontsize=10)
        t = torch.arange(len(xs)) * TAU
        trace.plot(t, xs / X_THRESHOLD, color="tab:blue", label="cart position / 2.4 m")
        trace.plot(t, thetas / THETA_THRESHOLD_RADIANS, color="tab:brown", label="pole angle / 12°")
        for edge in (-1.0, 1.0):
            trace.axhline(edge, color="tab:red", ls=":", lw=1.0)
        trace.set_ylim(-1.2, 1.2)
        trace.set_xlim(0.0, max(float(t[-1]), 1.0))
        trace.set_xlabel("time (s)")
        trace.legend(loc="lower left", fontsize=7)
        trace.grid(True, alpha=0.3)

    @staticmethod
    def _title(meta: dict[str, Any]) -> str:
        outcome = ("balancing" if meta.get("in_progress") else "time limit" if meta.get("truncated")
                   else "fell" if meta.get("terminated") else "episode cut")
        return (f"{meta['env']} ({meta['algo']} v{meta['policy_version']}): {outcome}, "
                f"{meta['steps']} steps, return {meta['return']:.0f}")
