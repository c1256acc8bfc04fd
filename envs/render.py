"""Pictures of one episode of an env (index 0 of its batch): the renderers and their registry.

What is drawn comes from a small registry, env name -> :class:`Renderer` subclass
(:func:`register_renderer`); an env without one raises :class:`RenderError` (the CLI prints one line
and exits with 2). Each renderer sits beside its env and imports matplotlib only when it draws:

* ``AirCombat`` (:mod:`rl_system.envs.air_combat.render`): aircraft and missile tracks, launches, hits.
* ``Navigation`` (:mod:`rl_system.envs.navigation_render`): the robot's path, obstacles and lidar beams.
* ``CartPole`` (:mod:`rl_system.envs.cartpole_render`): the cart and pole, their traces over time.
* ``gym:<id>`` (:class:`GymFramesRenderer`) and ``vmas:<scenario>``
  (:mod:`rl_system.envs.vmas_render`): the env's own pictures (:class:`FramesRenderer`).

A renderer reads only public views: the env's ``render_state(env_index)`` (a dict of fresh CPU
tensors), its public attributes and the observations and step results. The envs reset finished
episodes inside ``step`` (``SAME_STEP``), so to see the state an episode ended in the recorder sets
the env's :attr:`~rl_system.envs.base.VecEnv.before_autoreset` observer, which those envs call just before
the reset.

:func:`play_episode` steps an env with any action function and feeds a renderer;
:func:`save_picture` draws what it recorded to a PNG. Running a checkpoint's policy is
:mod:`rl_system.policy.render`'s part (``rl-system eval CHECKPOINT --render OUT.png``): the envs
draw given states and actions and never import the training library.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from rl_system.envs import import_entry_point
from rl_system.envs.base import Obs, StepResult, VecEnv


class RenderError(RuntimeError):
    """A checkpoint that cannot be rendered (no renderer for its env, no matplotlib), one line."""


class Renderer:
    """Records one episode of env index 0 and draws it.

    ``start(env, obs)`` is called after the reset, ``capture(env)`` after every step where the
    episode goes on and just before the env resets it where it ended (the final state),
    ``on_step(out, action)`` after every step with the step's result; ``draw(fig, meta)`` draws
    on an empty figure; ``meta`` has ``env``, ``algo``, ``policy_version``, ``steps``,
    ``return``, ``deterministic``, ``terminated``, ``truncated`` and ``info`` (the last step's
    info entries of env 0, as Python scalars)."""

    figsize: tuple[float, float] = (9.0, 8.0)
    history: tuple[str, ...] = ()
    """The attributes holding one entry per captured frame (lists): :meth:`at` cuts them."""
    env_kwargs: dict[str, Any] = {}
    """Env constructor kwargs the recording needs (e.g. a Gymnasium ``render_mode``)."""

    def start(self, env: VecEnv, obs: Obs) -> None:
        raise NotImplementedError

    def capture(self, env: VecEnv) -> None:
        raise NotImplementedError

    def on_step(self, out: StepResult, action: torch.Tensor) -> None:
        """Optional: look at the step's result (rewards, final observations...)."""

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        raise NotImplementedError

    def at(self, t: int) -> Renderer:
        """A copy that has seen the episode up to frame ``t`` (0: the reset state) only."""
        view = copy.copy(self)
        for name in self.history:
            setattr(view, name, getattr(self, name)[:t + 1])
        return view

    def video_frames(self, meta: dict[str, Any], frames: Sequence[int], dpi: int = 80) -> Iterator[np.ndarray]:
        """RGB images ``[H, W, 3]`` uint8 of the episode at each frame index in ``frames``: the
        picture :meth:`draw` makes of the episode so far, its title counting steps and return up to
        that frame. Needs matplotlib."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        rewards = meta.get("rewards", [])
        for t in frames:
            so_far = {**meta, "steps": t, "return": float(sum(rewards[:t])), "in_progress": t < meta["steps"]}
            if so_far["in_progress"]:
                so_far.update(info={}, terminated=False, truncated=False)
            fig = Figure(figsize=self.figsize, dpi=dpi)
            canvas = FigureCanvasAgg(fig)
            self.at(t).draw(fig, so_far)
            canvas.draw()
            yield np.asarray(canvas.buffer_rgba())[..., :3].copy()


class FramesRenderer(Renderer):
    """An env's own pictures of env index 0, one per captured state (:meth:`picture`), shown as
    they are: a video's frames; :meth:`draw` shows the last. No matplotlib for a video."""

    history = ("frames",)

    def __init__(self) -> None:
        self.frames: list[np.ndarray] = []
        self._ended = False

    def picture(self, env: VecEnv) -> np.ndarray:
        """RGB ``[H, W, 3]`` uint8 of env index 0 as it is now."""
        raise NotImplementedError

    def start(self, env: VecEnv, obs: Obs) -> None:
        self.capture(env)

    def capture(self, env: VecEnv) -> None:
        if self._ended:  # the adapter has already reset this env (SAME_STEP): the end has no picture
            return
        self.frames.append(self.picture(env))

    def on_step(self, out: StepResult, action: torch.Tensor) -> None:
        self._ended = bool(out.terminated[0] | out.truncated[0])

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        fig.set_layout_engine("none")  # the picture fills the figure: nothing to lay out
        ax = fig.add_axes((0, 0, 1, 1))
        ax.imshow(self.frames[-1])
        ax.set_axis_off()

    def video_frames(self, meta: dict[str, Any], frames: Sequence[int], dpi: int = 80) -> Iterator[np.ndarray]:
        for t in frames:
            yield self.frames[min(t, len(self.frames) - 1)]


class GymFramesRenderer(FramesRenderer):
    """A Gymnasium env's own pictures (``render_mode="rgb_array"``) of env index 0, one per step;
    the env is built with that render mode."""

    env_kwargs = {"render_mode": "rgb_array"}

    def __init__(self) -> None:
        # Gymnasium draws through pygame, whose init opens a display and a sound card: a headless
        # worker has neither, and needs neither for rgb_array.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
        super().__init__()

    def picture(self, env: VecEnv) -> np.ndarray:
        picture = env.gym_env.render()
        picture = picture[0] if isinstance(picture, (tuple, list)) else picture
        if picture is None:
            raise RenderError(f"{env!r} rendered nothing: its render_mode 'rgb_array' is not supported")
        return np.asarray(picture, dtype=np.uint8)


# env name -> "module:Class" (imported on first use, so that this module does not import the
# renderer modules, which import it) or a factory.
_RENDERERS: dict[str, str | Callable[[], Renderer]] = {
    "AirCombat": "rl_system.envs.air_combat.render:AirCombatRenderer",
    "Navigation": "rl_system.envs.navigation_render:NavigationRenderer",
    "CartPole": "rl_system.envs.cartpole_render:CartPoleRenderer",
}
# env name prefix -> the same, for the adapters whose envs draw themselves
_PREFIX_RENDERERS: dict[str, str | Callable[[], Renderer]] = {
    "gym:": GymFramesRenderer,
    "vmas:": "rl_system.envs.vmas_render:VmasRenderer",
}


def register_renderer(env_name: str, factory: str | Callable[[], Renderer]) -> None:
    """Make ``rl-system eval --render`` draw episodes of ``env_name`` with ``factory()``
    (a callable, or ``"module:Class"`` imported on first use)."""
    _RENDERERS[env_name] = factory


def renderer_names() -> list[str]:
    return sorted(_RENDERERS)


def require_matplotlib() -> None:
    """:class:`RenderError` (one line, with the install hint) where matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise RenderError("matplotlib is not installed; pip install matplotlib, or pip install -e '.[render]' "
                          "in a checkout") from None


def make_renderer(env_name: str) -> Renderer:
    """The renderer of env ``env_name`` (a ``gym:<id>`` or ``vmas:<scenario>`` env: its own
    pictures); :class:`RenderError` for an env without one."""
    factory = _RENDERERS.get(env_name)
    if factory is None:
        factory = next((f for prefix, f in _PREFIX_RENDERERS.items() if env_name.startswith(prefix)), None)
    if factory is None:
        raise RenderError(f"no renderer for env {env_name!r} (renderers: {', '.join(renderer_names())}, "
                          f"gym:<id> envs that render rgb_array and vmas:<scenario>)")
    if isinstance(factory, str):  # resolved as env entry points are, old module names included
        factory = import_entry_point(factory, f"renderer of env {env_name!r}")
    return factory()


# --------------------------------------------------------------------------- recording and drawing an episode


def play_episode(env: VecEnv, obs: Obs, act: Callable[[Obs], torch.Tensor], renderer: Renderer,
                 max_steps: int) -> tuple[list[float], StepResult | None]:
    """Step env index 0 from ``obs`` with ``act(obs) -> action`` until its episode ends (or
    ``max_steps``), feeding ``renderer`` every step and the state the episode ended in.
    Returns ``(reward of every step, last StepResult)``; a multi-agent env's rewards per agent
    count as their mean, the agents' mean return of MAPPO's reports."""
    ended = False

    def capture_before_reset(idx: torch.Tensor) -> None:  # idx: int64 [k]
        nonlocal ended
        if bool((idx == 0).any()):
            renderer.capture(env)
            ended = True

    env.before_autoreset = capture_before_reset
    rewards: list[float] = []
    out = None
    try:
        while len(rewards) < max_steps:
            action = act(obs)
            ended = False
            out = env.step(action)
            rewards.append(float(out.reward[0].mean()))
            renderer.on_step(out, action)
            if not ended:  # no reset happened (or the env has no observer): the state is current
                renderer.capture(env)
            if bool(out.terminated[0] | out.truncated[0]):
                break
            obs = out.obs
    finally:
        env.before_autoreset = None
    return rewards, out


def save_picture(renderer: Renderer, meta: dict[str, Any], out_path: str | Path, dpi: int = 110) -> Path:
    """Draw the episode ``renderer`` recorded (``meta``: see :class:`Renderer`) and write it to
    ``out_path`` as a PNG; needs matplotlib (:func:`require_matplotlib`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A Figure on an Agg canvas, without pyplot: no display, no global backend switch.
    fig = Figure(figsize=renderer.figsize, layout="constrained")
    FigureCanvasAgg(fig)
    renderer.draw(fig, meta)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, format="png", dpi=dpi)
    return out_path
