"""Gymnasium envs whose spaces are Tuples over agents (Level-Based Foraging, the Multi-Robot
Warehouse: the envs EPyMARL's ``gymma`` wrapper steps) as a batched multi-agent
:class:`rl_system.envs.base.VecEnv`.

``env.name: "magym:Foraging-8x8-2p-3f-v3"`` builds ``num_envs`` copies with
``gymnasium.make(id, **env.kwargs)`` and steps them one after another in this process as one batch,
with numpy buffers allocated once and seen by torch without a copy (on CPU). The id's package is
imported first where it is one of :data:`PACKAGES` (``lbforaging``, ``rware``: they register their
ids on import); ``"magym:<module>:<id>"`` imports ``<module>`` first for any other. How the
envs' API maps onto the multi-agent contract of :mod:`rl_system.envs.base`:

Agents
    Agent ``j`` is entry ``j`` of the env's Tuples, row ``j`` of every per-agent tensor;
    ``agent_names`` is ``("agent_0", ...)``. Every agent acts on every step (no ``agent_active``).
Observations
    ``obs`` float32 ``[N, n, O]``: each agent's ``Box`` observation flattened (LBF's vector or grid,
    RWARE's flattened or image one), zero-padded to the widest agent's ``O``. ``state`` float32
    ``[N, S]``: the agents' observations side by side, unpadded: these envs have no global state,
    and EPyMARL's ``get_state`` gives the same (where no agent is padded, a view of ``obs``).
Actions
    All agents ``Discrete`` -> ``AgentDiscrete(max n, n)`` (an ``action_mask`` ``[N, n, max n]``
    marks each agent's own actions where the counts differ); all one 1-D ``MultiDiscrete`` (RWARE
    with ``msg_bits``) -> ``AgentMultiDiscrete``. LBF turns an action that is not valid where the
    agent stands into NONE itself; as in EPyMARL, no mask says which those are.
Rewards
    ``reward="agent"`` (default): float32 ``[N, n]``, the env's list. ``reward="team"``: float32
    ``[N]``, the **sum** over the agents: EPyMARL trains on that sum (``common_reward``,
    ``reward_scalarisation: sum``) and its paper reports it, so with a team reward a run's
    ``rollout/return_mean`` (the agents' mean return, which for a team reward is that reward's) is
    the paper's figure: 1.0 is all of LBF's food collected, RWARE's counts the team's deliveries.
    (The PettingZoo adapter's ``"team"`` is the mean, BenchMARL's convention for MPE.)
Episode end and auto-reset
    Both envs flag every end ``terminated`` (their ``truncated`` is always False), time limits
    included. An end is a truncation (bootstrap from ``final_obs``) where it was a cut: LBF's when
    food is left (its ``max_episode_steps``, 50, ran out), RWARE's always (it has no terminal state:
    its ``max_steps``, 500, or ``max_inactivity_steps``); the ``truncated`` flag of a Gymnasium
    ``TimeLimit`` counts too. Otherwise ``terminated``; never both. The copy is reset in the same
    step: ``obs`` is its next episode's first observation, ``final_obs`` the last one.
Seeding
    The constructor's ``seed`` is used by the first ``reset()``; ``reset(seed)`` seeds copy ``i``
    with ``seed + i``; ``reset()`` without one and the auto-resets continue each copy's own stream.
Returned tensors
    On CPU, views of this batch's buffers (allocated once), valid until the next ``step``; where
    nothing ended ``final_obs`` is ``obs`` itself.
Errors
    An id Gymnasium does not know, or a missing package: :class:`rl_system.envs.EntryPointError`
    (a ``ValueError``), one line (``pip install -e '.[epymarl]'`` installs both envs); spaces that
    are not Tuples of the kinds above: one-line ``TypeError``/``ValueError``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_OBS,
    STATE,
    AgentDiscrete,
    AgentMultiDiscrete,
    Obs,
    StepResult,
    TensorSpec,
    VecEnv,
    check_action,
)
from rl_system.envs.entry_points import EntryPointError

PREFIX = "magym:"
PACKAGES = {"Foraging": "lbforaging", "rware": "rware"}
"""Id prefix -> the package that registers such ids (imported before ``gymnasium.make``)."""
INSTALL = "pip install lbforaging rware, or pip install -e '.[epymarl]' in a checkout"
REWARD_MODES = ("agent", "team")
_CPU = torch.device("cpu")

_ENDS_BY_CUT: dict[str, Callable[[Any], bool]] = {
    "lbforaging": lambda env: bool(env.field.any()),  # food left: the step limit ended it
    "rware": lambda env: True,  # no terminal state: every end is max_steps or max_inactivity_steps
}
"""Top-level package of the unwrapped env -> whether its episode that just ended was cut short
(these envs flag every end ``terminated``)."""


# ---------------------------------------------------------------------------------------------- building


def _make_copies(target: str, num_envs: int, env_kwargs: dict[str, Any]) -> list[Any]:
    """``num_envs`` envs of ``"[module:]<gym id>"``; :class:`EntryPointError` (one line) where the
    id's package is missing or Gymnasium does not know the id."""
    import gymnasium

    name = PREFIX + target
    module, _, env_id = target.rpartition(":")
    module = module or next((m for p, m in PACKAGES.items() if env_id.startswith(p)), "")
    if not env_id:
        raise EntryPointError(f"env {name!r}: expected 'magym:<gym id>' or 'magym:<module>:<gym id>'")
    if module in PACKAGES.values() and importlib.util.find_spec(module) is None:
        raise EntryPointError(f"env {name!r}: {module} is not installed: {INSTALL}")
    if module:
        try:
            importlib.import_module(module)  # registers its ids with Gymnasium
        except Exception as err:  # noqa: BLE001 - a user's module can fail to import in any way
            first = str(err).splitlines()[0] if str(err) else ""
            what = f"module {module!r} does not import ({type(err).__name__}: {first})"
            raise EntryPointError(f"env {name!r}: {what}") from None
    try:
        return [gymnasium.make(env_id, disable_env_checker=True, **env_kwargs) for _ in range(num_envs)]
    except gymnasium.error.Error as err:  # unknown id or version: Gymnasium's own first line says which
        raise EntryPointError(f"env {name!r}: {str(err).splitlines()[0]}") from None


def _tuple_spaces(space: Any, what: str, name: str) -> list[Any]:
    from gymnasium import spaces

    if not isinstance(space, spaces.Tuple) or not space.spaces:
        raise TypeError(f"env {name!r}: its {what} space must be a Tuple over agents, got {space!r}")
    return list(space.spaces)


def _obs_spec(spaces_: list[Any], name: str) -> tuple[list[int], TensorSpec]:
    """The agents' flat widths and the ``obs`` spec ``[n, max width]`` (bounds where all agree and
    hold the padding's zeros)."""
    from gymnasium import spaces

    if not all(isinstance(s, spaces.Box) for s in spaces_):
        raise TypeError(f"env {name!r}: agents' observations must be Box spaces, got {spaces_!r}")
    widths = [int(np.prod(s.shape)) for s in spaces_]
    lows = np.concatenate([np.ravel(s.low) for s in spaces_])
    highs = np.concatenate([np.ravel(s.high) for s in spaces_])
    low, high = float(lows.min()), float(highs.max())
    bounded = np.isfinite(low) and np.isfinite(high) and low <= 0.0 <= high
    return widths, TensorSpec((len(spaces_), max(widths)), torch.float32, low if bounded else None,
                              high if bounded else None)


def _action_spec(spaces_: list[Any], name: str) -> tuple[AgentDiscrete | AgentMultiDiscrete, np.ndarray | None]:
    """The batch's action spec and, where the agents' Discrete counts differ, each agent's own
    actions ``[n, max n]`` bool."""
    from gymnasium import spaces

    n = len(spaces_)
    if all(isinstance(s, spaces.Discrete) and int(s.start) == 0 for s in spaces_):
        counts = np.array([int(s.n) for s in spaces_])
        own = np.arange(counts.max())[None, :] < counts[:, None]
        return AgentDiscrete(int(counts.max()), n), None if own.all() else own
    nvecs = {tuple(int(v) for v in s.nvec) for s in spaces_ if isinstance(s, spaces.MultiDiscrete) and s.nvec.ndim == 1}
    if len(nvecs) == 1 and all(isinstance(s, spaces.MultiDiscrete) and not np.any(s.start) for s in spaces_):
        return AgentMultiDiscrete(nvecs.pop(), n), None
    raise ValueError(f"env {name!r}: unsupported action spaces {spaces_!r}; supported: all Discrete (from 0), "
                     "or all one 1-D MultiDiscrete")


# ---------------------------------------------------------------------------------------------- the batch


class MAGymVecEnv(VecEnv):
    """``num_envs`` copies of a Tuple-spaced Gymnasium env behind the multi-agent ``VecEnv`` API
    (see the module docstring). ``reward``: ``"agent"`` ``[N, n]`` or ``"team"`` ``[N]`` (the sum)."""

    def __init__(self, target: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 reward: str = "agent", **env_kwargs: Any) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        self.name = PREFIX + target
        self.num_envs, self.device, self._team = int(num_envs), torch.device(device), reward == "team"
        self.envs = _make_copies(target, self.num_envs, env_kwargs)
        try:
            self._init_layout()
        except BaseException:
            self.close()
            raise
        self._seed, self._seed_pending, self._needs_reset = seed, True, True

    def _init_layout(self) -> None:
        env = self.envs[0]
        obs_spaces = _tuple_spaces(env.observation_space, "observation", self.name)
        act_spaces = _tuple_spaces(env.action_space, "action", self.name)
        if len(obs_spaces) != len(act_spaces):
            raise ValueError(f"env {self.name!r}: {len(obs_spaces)} observation spaces but {len(act_spaces)} action spaces")
        self.num_agents = n = len(obs_spaces)
        self.agent_names = tuple(f"agent_{j}" for j in range(n))
        self._widths, obs_spec = _obs_spec(obs_spaces, self.name)
        self.action_spec, own_mask = _action_spec(act_spaces, self.name)
        O = obs_spec.shape[1]
        # The state's columns in the padded [n * O] row: every agent's own width, side by side.
        self._state_cols = np.concatenate([j * O + np.arange(w) for j, w in enumerate(self._widths)])
        self.observation_spec = {STATE: TensorSpec((len(self._state_cols),), torch.float32), AGENT_OBS: obs_spec}
        if own_mask is not None:
            self.observation_spec[ACTION_MASK] = TensorSpec(tuple(own_mask.shape), torch.bool)
        self._ends_by_cut = _ENDS_BY_CUT.get(type(env.unwrapped).__module__.partition(".")[0])
        self._alloc(own_mask)

    def _alloc(self, own_mask: np.ndarray | None) -> None:
        """The numpy buffers (written in place every step) and the torch tensors sharing them."""
        N, n = self.num_envs, self.num_agents
        O = self.observation_spec[AGENT_OBS].shape[1]
        # Unpadded rows side by side are the rows themselves: then the state is a view, never copied.
        self._state_is_view = len(self._state_cols) == n * O

        def obs_set() -> dict[str, np.ndarray]:
            rows = np.zeros((N, n, O), np.float32)
            state = rows.reshape(N, -1) if self._state_is_view else np.zeros((N, len(self._state_cols)), np.float32)
            out = {STATE: state, AGENT_OBS: rows}
            if own_mask is not None:  # constant: each agent's own actions
                out[ACTION_MASK] = np.broadcast_to(own_mask, (N, *own_mask.shape)).copy()
            return out

        self._obs, self._final = obs_set(), obs_set()
        self._reward = np.zeros((N, n), np.float32)
        self._team_reward = np.zeros(N, np.float32)
        self._terminated, self._truncated = np.zeros(N, np.bool_), np.zeros(N, np.bool_)
        self._obs_t = {k: torch.from_numpy(v) for k, v in self._obs.items()}
        self._final_t = {k: torch.from_numpy(v) for k, v in self._final.items()}
        self._reward_t = torch.from_numpy(self._team_reward if self._team else self._reward)
        self._terminated_t, self._truncated_t = torch.from_numpy(self._terminated), torch.from_numpy(self._truncated)

    # ------------------------------------------------------------------------------------------ API

    def reset(self, seed: int | None = None) -> Obs:
        if seed is None and self._seed_pending:
            seed = self._seed
        self._seed_pending = self._needs_reset = False
        for i, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if seed is None else seed + i)
            self._write_obs(self._obs, i, obs)
        self._fill_state(self._obs)
        return self._out_obs(self._obs_t)

    def step(self, action: torch.Tensor) -> StepResult:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = check_action(action.detach(), self.action_spec, self.num_envs, _CPU).numpy().tolist()
        ended = []
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, _ = env.step(actions[i])
            self._reward[i] = reward  # a list per agent (a scalar is every agent's)
            self._write_obs(self._obs, i, obs)
            done = bool(np.all(terminated)) or bool(np.all(truncated))
            cut = done and (bool(np.all(truncated)) or (self._ends_by_cut is not None and self._ends_by_cut(env.unwrapped)))
            self._terminated[i], self._truncated[i] = done and not cut, cut
            if done:
                ended.append(i)
                self._final[AGENT_OBS][i] = self._obs[AGENT_OBS][i]
                self._write_obs(self._obs, i, env.reset()[0])
        self._fill_state(self._obs)
        if self._team:
            np.sum(self._reward, axis=1, out=self._team_reward)
        obs = self._out_obs(self._obs_t)
        final = obs
        if ended:
            self._fill_final(ended)
            final = self._out_obs(self._final_t)
        return StepResult(obs, self._out(self._reward_t), self._out(self._terminated_t), self._out(self._truncated_t),
                          final, {})

    def close(self) -> None:
        for env in getattr(self, "envs", ()):
            env.close()

    def __repr__(self) -> str:
        return f"MAGymVecEnv({self.name!r}, num_envs={self.num_envs}, device={str(self.device)!r})"

    # ------------------------------------------------------------------------------------------ buffers

    def _write_obs(self, buf: dict[str, np.ndarray], i: int, obs: Any) -> None:
        """Copy ``i``'s agents' observations (a tuple of arrays) into its rows, flattened (padding stays 0)."""
        rows = buf[AGENT_OBS][i]
        for j, (value, width) in enumerate(zip(obs, self._widths)):
            rows[j, :width] = np.ravel(value)

    def _fill_final(self, ended: list[int]) -> None:
        """``final`` holds the ended copies' last observations (written in ``step``); the others' are their ``obs``."""
        going = np.ones(self.num_envs, np.bool_)
        going[ended] = False
        self._final[AGENT_OBS][going] = self._obs[AGENT_OBS][going]
        self._fill_state(self._final)

    def _fill_state(self, buf: dict[str, np.ndarray]) -> None:
        """``state`` ``[N, S]``: the unpadded rows side by side (nothing to do where it is a view of them)."""
        if not self._state_is_view:
            np.take(buf[AGENT_OBS].reshape(self.num_envs, -1), self._state_cols, axis=1, out=buf[STATE])

    def _out(self, t: torch.Tensor) -> torch.Tensor:
        # On CPU the views themselves: ``to`` costs microseconds even where it has nothing to do.
        return t if self.device == _CPU else t.to(self.device)

    def _out_obs(self, obs: dict[str, torch.Tensor]) -> Obs:
        return {key: self._out(t) for key, t in obs.items()}
