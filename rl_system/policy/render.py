"""One episode of a checkpoint's policy as a picture: ``rl-system eval CHECKPOINT --render OUT.png``.

:func:`record_episode` builds the env named in the checkpoint's config with one copy (env index 0),
builds the policy with :func:`rl_system.algos.load_policy` (the weights loaded) and plays one
episode through :func:`rl_system.envs.render.play_episode`, which feeds the env's renderer every
step; :func:`render_episode` then draws it to a PNG. The renderers themselves
(:mod:`rl_system.envs.render`) only see states and actions: the policy is driven from here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rl_system.algos import load_policy
from rl_system.algos.protocols import is_recurrent
from rl_system.checkpoint import keys
from rl_system.config import RunConfig
from rl_system.envs import make_env
from rl_system.envs.base import Obs
from rl_system.envs.render import Renderer, make_renderer, play_episode, require_matplotlib, save_picture


def _scalar(v: torch.Tensor) -> Any:
    v = v.detach().cpu()
    return v.item() if v.numel() == 1 else v.tolist()


def _actor(policy: Any, deterministic: bool) -> Any:
    """``act(obs) -> action`` of ``policy`` for one env; a recurrent policy carries its state
    through the episode."""
    if not is_recurrent(policy):
        def act(obs: Obs) -> torch.Tensor:
            acted = policy.act(obs, deterministic=deterministic)
            return acted[0] if isinstance(acted, tuple) else acted

        return act
    memory = [policy.initial_state(1)]

    def act_recurrent(obs: Obs) -> torch.Tensor:
        action, *_, memory[0] = policy.act(obs, memory[0], deterministic=deterministic)
        return action

    return act_recurrent


@torch.no_grad()
def record_acting(env_name: str, env_kwargs: dict[str, Any], make_act: Callable[[Any], Callable[[Obs], torch.Tensor]],
                  renderer: Renderer, seed: int = 12345, max_steps: int = 1_000_000, device: str = "cpu",
                  **meta: Any) -> dict[str, Any]:
    """Run one episode of env index 0 of ``env_name``, acting with ``make_act(env)`` (an
    ``act(obs) -> action``), feeding ``renderer``. Returns the ``meta`` dict :meth:`Renderer.draw`
    gets: ``meta``'s fields (``algo``, ``policy_version``, ``deterministic``) and the episode's."""
    torch.manual_seed(seed)
    env = make_env(env_name, 1, device, seed=seed, **{**env_kwargs, **renderer.env_kwargs})
    try:
        act = make_act(env)
        obs = env.reset(seed=seed)
        renderer.start(env, obs)
        rewards, out = play_episode(env, obs, act, renderer, max_steps)
    finally:
        env.close()
    info = {k: _scalar(v[0]) for k, v in out.info.items()} if out is not None else {}
    return {"env": env_name, **meta, "steps": len(rewards), "return": sum(rewards), "rewards": rewards,
            "info": info,
            "terminated": bool(out.terminated[0]) if out is not None else False,
            "truncated": bool(out.truncated[0]) if out is not None else False}


def record_episode(state: dict[str, Any], renderer: Renderer, deterministic: bool = True, seed: int = 12345,
                   max_steps: int = 1_000_000, device: str = "cpu") -> dict[str, Any]:
    """Run one episode of env index 0 with the checkpoint's policy, feeding ``renderer``.
    Returns the ``meta`` dict :meth:`Renderer.draw` gets."""
    cfg = RunConfig.model_validate(state[keys.CONFIG])
    return record_acting(cfg.env.name, cfg.env.test_kwargs(),
                         lambda env: _actor(load_policy(state, env, device), deterministic), renderer, seed,
                         max_steps, device, algo=cfg.algo,
                         policy_version=int(state[keys.LEARNER].get(keys.VERSION, 0)), deterministic=deterministic)


def render_episode(state: dict[str, Any], out_path: str | Path, deterministic: bool = True, seed: int = 12345,
                   max_steps: int = 1_000_000, dpi: int = 110) -> dict[str, Any]:
    """Run one episode of the checkpoint's policy and write its picture to ``out_path`` (PNG).
    Returns the episode's summary (``meta`` plus ``"path"``); raises
    :class:`~rl_system.envs.render.RenderError`."""
    renderer = make_renderer(RunConfig.model_validate(state[keys.CONFIG]).env.name)
    require_matplotlib()
    meta = record_episode(state, renderer, deterministic=deterministic, seed=seed, max_steps=max_steps)
    meta["path"] = str(save_picture(renderer, meta, out_path, dpi=dpi))
    return meta
