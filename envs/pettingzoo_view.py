"""A PettingZoo ``ParallelEnv`` view of a cooperative multi-agent :class:`~rl_system.envs.base.VecEnv`.

The batched multi-agent envs of this package (``num_agents > 1``, :class:`~rl_system.envs.base.AgentDiscrete`
actions, observations ``{"state": [N, S], "obs": [N, num_agents, O]}``, team reward ``[N]``) are
built for throughput; this view wraps one built with ``num_envs=1`` so that PettingZoo tooling
(``pettingzoo.test.parallel_api_test``, wrappers, other libraries' runners) can drive it:

* agents are named by the env's ``agent_names`` when it has them (``("alice", "bob")`` for
  Alice_and_Bob), else ``agent_0``, ``agent_1``, ...;
* ``observation_space(agent)`` is a ``gymnasium.spaces.Box`` of shape ``(O,)`` (bounds from the
  env's ``"obs"`` spec, infinite where it has none), ``action_space(agent)`` a ``Discrete(n)``;
  ``state_space`` / ``state()`` expose the global state; the same space objects every call;
* ``reset(seed, options)`` returns ``(observations, infos)`` (``seed`` reseeds the env's
  generator, ``options`` is accepted and ignored); ``step(actions)`` takes one action
  per live agent and returns ``(observations, rewards, terminations, truncations, infos)`` with
  numpy float32 observations; the team reward goes to every agent;
* when the episode ends every agent is terminated/truncated together, the returned observations
  are the episode's last ones (the wrapped env's ``final_obs``; it has already auto-reset
  internally), and ``agents`` becomes empty until the next ``reset``;
* each agent's info dict holds the env's ``info`` entries for the step as Python scalars.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
import torch
from pettingzoo import ParallelEnv

from rl_system.envs.base import AgentDiscrete, TensorSpec, VecEnv


def _box(spec: TensorSpec, shape: tuple[int, ...]) -> gymnasium.spaces.Box:
    low = -np.inf if spec.low is None else spec.low
    high = np.inf if spec.high is None else spec.high
    return gymnasium.spaces.Box(low=low, high=high, shape=shape, dtype=np.float32)


class PettingZooParallelView(ParallelEnv):
    """``pettingzoo.ParallelEnv`` over a single-env (``num_envs == 1``) multi-agent ``VecEnv``."""

    metadata = {"name": "rl_system_vecenv_view", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(self, env: VecEnv, agent_names: Sequence[str] | None = None,
                 render_mode: str | None = None) -> None:
        if env.num_envs != 1:
            raise ValueError(f"the PettingZoo view needs an env built with num_envs=1, got {env.num_envs}")
        if not isinstance(env.action_spec, AgentDiscrete):
            raise TypeError(f"the PettingZoo view needs AgentDiscrete actions, got {type(env.action_spec).__name__}")
        if set(env.observation_spec) < {"state", "obs"}:
            raise TypeError("the PettingZoo view needs 'state' and 'obs' observation entries")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}")
        k = env.num_agents
        names = agent_names or getattr(env, "agent_names", None) or [f"agent_{i}" for i in range(k)]
        if len(names) != k or len(set(names)) != k:
            raise ValueError(f"need {k} distinct agent names, got {list(names)}")
        self.env = env
        self.render_mode = render_mode
        self.possible_agents = list(names)
        self.agents: list[str] = []
        obs_spec = env.observation_spec["obs"]
        self.observation_spaces = {a: _box(obs_spec, tuple(obs_spec.shape[1:])) for a in names}
        self.action_spaces = {a: gymnasium.spaces.Discrete(env.action_spec.n) for a in names}
        self.state_space = _box(env.observation_spec["state"], tuple(env.observation_spec["state"].shape))
        self._last: dict[str, torch.Tensor] | None = None
        self._action = torch.zeros((1, k), dtype=torch.int64, device=env.device)

    def observation_space(self, agent: str) -> gymnasium.spaces.Box:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Discrete:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        self._last = self.env.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._per_agent(self._last["obs"]), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the episode is over (or never started): call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"missing actions for agents {missing}")
        for i, agent in enumerate(self.possible_agents):
            self._action[0, i] = int(actions[agent])
        res = self.env.step(self._action)
        terminated, truncated = bool(res.terminated[0]), bool(res.truncated[0])
        done = terminated or truncated
        self._last = res.final_obs if done else res.obs
        agents = self.agents
        obs = self._per_agent(self._last["obs"])
        reward = float(res.reward[0])
        info = {key: value[0].item() for key, value in res.info.items()}
        out = (obs, dict.fromkeys(agents, reward), dict.fromkeys(agents, terminated),
               dict.fromkeys(agents, truncated), {a: dict(info) for a in agents})
        if done:
            self.agents = []
        return out

    def state(self) -> np.ndarray:
        if self._last is None:
            raise RuntimeError("call reset() first")
        return self._last["state"][0].detach().cpu().numpy().astype(np.float32, copy=True)

    def render(self) -> str | None:
        if self.render_mode == "ansi" and hasattr(self.env, "ascii"):
            return self.env.ascii(0)
        return None

    def close(self) -> None:
        self.env.close()

    def _per_agent(self, obs: torch.Tensor) -> dict[str, np.ndarray]:
        rows = obs[0].detach().cpu().numpy()
        return {a: rows[i].astype(np.float32, copy=True) for i, a in enumerate(self.possible_agents)}


def parallel_env(name: str = "AliceBob", seed: int | None = None, device: str | torch.device = "cpu",
                 render_mode: str | None = None, **params: Any) -> PettingZooParallelView:
    """Build env ``name`` from the registry with ``num_envs=1`` and wrap it in the PettingZoo view."""
    from rl_system.envs import make_env

    return PettingZooParallelView(make_env(name, 1, device=device, seed=seed, **params), render_mode=render_mode)
