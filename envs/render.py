"""One episode of a checkpoint's policy as a picture: ``rl-system eval CHECKPOINT --render OUT.png``.

:func:`render_episode` builds the env named in the checkpoint's config with one copy (env index 0),
builds the policy with ``rl_system.algos.load_policy`` (the weights loaded) and runs one
episode, recording the env's state after every step; then it draws the episode with
matplotlib (Agg backend: no display needed) and writes a PNG.

What is drawn comes from a small registry, env name -> :class:`Renderer` subclass
(:func:`register_renderer`); an env without one raises :class:`RenderError` (the CLI prints one line
and exits with 2). Each renderer sits beside its env and imports matplotlib only when it draws:

* ``AirCombat`` (:mod:`envs.air_combat_render`): aircraft and missile tracks, launches, hits.
* ``Navigation`` (:mod:`envs.navigation_render`): the robot's path, obstacles and lidar beams.

A renderer reads only public views: the env's ``render_state(env_index)`` (a dict of fresh CPU
tensors), its public attributes and the observations and step results. The envs reset finished
episodes inside ``step`` (``SAME_STEP``), so to see the state an episode ended in the recorder sets
the env's :attr:`~envs.base.VecEnv.before_autoreset` observer, which those envs call just before
the reset.

The checkpoint entry points (:func:`record_episode`, :func:`render_episode`) read the run config
and build the policy through ``rl_system``; it is imported when they are called, so importing
``envs`` never imports the training library. :func:`play_episode` is the part that needs only an
env and an action function.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

import torch

from envs import make_env
from envs.base import Obs, StepResult, VecEnv


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

    def start(self, env: VecEnv, obs: Obs) -> None:
        raise NotImplementedError

    def capture(self, env: VecEnv) -> None:
        raise NotImplementedError

    def on_step(self, out: StepResult, action: torch.Tensor) -> None:
        """Optional: look at the step's result (rewards, final observations...)."""

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        raise NotImplementedError


# env name -> "module:Class" (imported on first use, so that this module does not import the
# renderer modules, which import it) or a factory.
_RENDERERS: dict[str, str | Callable[[], Renderer]] = {
    "AirCombat": "envs.air_combat_render:AirCombatRenderer",
    "Navigation": "envs.navigation_render:NavigationRenderer",
}


def register_renderer(env_name: str, factory: str | Callable[[], Renderer]) -> None:
    """Make ``rl-system eval --render`` draw episodes of ``env_name`` with ``factory()``
    (a callable, or ``"module:Class"`` imported on first use)."""
    _RENDERERS[env_name] = factory


def renderer_names() -> list[str]:
    return sorted(_RENDERERS)


def _make_renderer(env_name: str) -> Renderer:
    factory = _RENDERERS.get(env_name)
    if factory is None:
        raise RenderError(f"no renderer for env {env_name!r} (renderers: {', '.join(renderer_names())})")
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory()


# --------------------------------------------------------------------------- driving an episode


def _scalar(v: torch.Tensor) -> Any:
    v = v.detach().cpu()
    return v.item() if v.numel() == 1 else v.tolist()


def play_episode(env: VecEnv, obs: Obs, act: Callable[[Obs], torch.Tensor], renderer: Renderer,
                 max_steps: int) -> tuple[int, float, StepResult | None]:
    """Step env index 0 from ``obs`` with ``act(obs) -> action`` until its episode ends (or
    ``max_steps``), feeding ``renderer`` every step and the state the episode ended in.
    Returns ``(steps, return, last StepResult)``."""
    ended = False

    def capture_before_reset(idx: torch.Tensor) -> None:  # idx: int64 [k]
        nonlocal ended
        if bool((idx == 0).any()):
            renderer.capture(env)
            ended = True

    env.before_autoreset = capture_before_reset
    steps, ret, out = 0, 0.0, None
    try:
        while steps < max_steps:
            action = act(obs)
            ended = False
            out = env.step(action)
            steps += 1
            ret += float(out.reward[0])
            renderer.on_step(out, action)
            if not ended:  # no reset happened (or the env has no observer): the state is current
                renderer.capture(env)
            if bool(out.terminated[0] | out.truncated[0]):
                break
            obs = out.obs
    finally:
        env.before_autoreset = None
    return steps, ret, out


@torch.no_grad()
def record_episode(state: dict[str, Any], renderer: Renderer, deterministic: bool = True, seed: int = 12345,
                   max_steps: int = 1_000_000, device: str = "cpu") -> dict[str, Any]:
    """Run one episode of env index 0 with the checkpoint's policy, feeding ``renderer``.
    Returns the ``meta`` dict :meth:`Renderer.draw` gets."""
    from rl_system.algos import load_policy
    from rl_system.algos.protocols import is_recurrent
    from rl_system.config import RunConfig

    cfg = RunConfig.model_validate(state["config"])
    torch.manual_seed(seed)
    env = make_env(cfg.env.name, 1, device, seed=seed, **cfg.env.test_kwargs())
    try:
        policy = load_policy(state, env, device)
        # A recurrent policy carries its state through the one episode recorded.
        memory = [policy.initial_state(1)] if is_recurrent(policy) else None

        def act(obs: Obs) -> torch.Tensor:
            if memory is not None:
                action, *_, memory[0] = policy.act(obs, memory[0], deterministic=deterministic)
                return action
            acted = policy.act(obs, deterministic=deterministic)
            return acted[0] if isinstance(acted, tuple) else acted

        obs = env.reset(seed=seed)
        renderer.start(env, obs)
        steps, ret, out = play_episode(env, obs, act, renderer, max_steps)
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
    from rl_system.config import RunConfig

    renderer = _make_renderer(RunConfig.model_validate(state["config"]).env.name)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RenderError("matplotlib is not installed; pip install matplotlib, or pip install -e '.[render]' in a checkout") from None

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
