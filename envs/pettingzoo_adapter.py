"""Any PettingZoo ``ParallelEnv`` as a batched multi-agent :class:`rl_system.envs.base.VecEnv`.

``env.name: "pettingzoo:mpe2.simple_spread_v3:parallel_env"`` builds ``num_envs`` copies with
``mpe2.simple_spread_v3.parallel_env(**env.kwargs)`` (``env.kwargs``: ``N``, ``max_cycles``,
``continuous_actions``, ...) and steps them one after another in this process as one batch, with
numpy buffers allocated once and seen by torch without a copy (on CPU). The multi-agent contract is
the one of :mod:`rl_system.envs.base`; how PettingZoo's maps onto it:

Agents
    ``env.possible_agents`` in their order: agent ``j`` is row ``j`` of every per-agent tensor
    (``agent_names`` keeps the names). An agent that leaves before the others (terminated or
    truncated while others go on, absent from the step's dicts or dropped from ``env.agents``) is
    *inactive* until the copy's episode ends: ``agent_active`` False, its observation row zeros,
    its reward 0, its action not sent to the env (actions go to the agents in ``env.agents``). Its
    last observation is not kept, so an agent truncated before the others is not bootstrapped on
    its own; its truncation makes the episode's end a truncation.
Observations
    ``obs`` float32 ``[N, n, O]``: each agent's ``Box`` (or ``MultiBinary``) observation flattened,
    zero-padded to the widest agent's ``O``; a ``Dict`` observation ``{"observation", "action_mask"}``
    (PettingZoo's convention for legal actions) contributes its ``"observation"``.
    ``state`` float32 ``[N, S]``: with ``state="env"`` the env's own ``env.state()`` (flattened);
    with ``state="obs"`` the agents' observations concatenated (unpadded, zeros for inactive
    agents); ``"auto"`` (default) picks ``"env"`` where the env has a ``state_space``. (MPE's
    ``state()`` is its agents' observations side by side: ``state="obs"`` gives the same values
    without the env computing them again, about a tenth of a step; ``bench/bench_pettingzoo.py``.)
    ``agent_active`` bool ``[N, n]``, always present.
Actions
    All agents ``Discrete`` -> ``AgentDiscrete(max n, n)``; where the agents' counts differ, or the
    env gives ``action_mask`` entries, an ``action_mask`` bool ``[N, n, max n]`` marks each agent's
    own actions (and the env's mask; an inactive agent's row is its own actions, so every row
    keeps a legal choice). All ``Box`` of one shape and bounds -> ``AgentBox`` (actions clipped to
    the bounds); all the same 1-D ``MultiDiscrete`` (or ``MultiBinary``) -> ``AgentMultiDiscrete``.
    Agents of different kinds, shapes, bounds or nvec -> ``AgentMixed`` (each agent's action in its
    own row of floats, decoded to its space: Box actions clipped to its bounds). Where the agents
    differ at all (observation width or action), the spec's ``agents`` names each one's own spaces,
    from which MAPPO makes agent groups. Other spaces (a MultiDiscrete with a ``start``, 2-D
    MultiDiscrete) are a one-line ``ValueError``.
Rewards
    ``reward="agent"`` (default): float32 ``[N, n]``, each agent's own. ``reward="team"``: float32
    ``[N]``, the mean over the ``n`` agents (inactive agents count as 0), so a team episode return
    is the mean of the agents' episode returns, the per-agent figure BenchMARL reports. (MPE
    simple_spread gives every agent the shared coverage reward plus its own collision penalty.)
Episode end and auto-reset
    A copy's episode ends on the step where no agent is left active (or ``env.agents`` is empty).
    Then ``terminated`` if every agent's own end was a termination (an agent that vanished without
    a flag counts as terminated), else ``truncated`` (some agent was cut by a time limit, e.g. MPE's
    ``max_cycles``: bootstrap from ``final_obs``); never both. The copy is reset in the same step:
    ``obs`` is its next episode's first observation, ``final_obs`` the last one (with
    ``agent_active`` marking the agents observed on that step). Per-agent infos are not forwarded.
Seeding
    The constructor's ``seed`` is used by the first ``reset()``; ``reset(seed)`` seeds copy ``i``
    with ``seed + i``; ``reset()`` without one and the auto-resets continue each copy's own stream,
    so a seeded batch is reproducible.
Returned tensors
    On CPU they are views of this batch's buffers (allocated once): those of one step stay valid
    through the next step (two sets of buffers in turn) and are written over by the one after.
    Where nothing ended, ``final_obs`` is ``obs`` itself.

Errors
    A name that does not resolve, a factory that builds an AEC env (the parallel API is named
    instead) and a missing ``pettingzoo`` or ``mpe2`` raise :class:`rl_system.envs.EntryPointError`
    (a ``ValueError``), one line naming the env and what was expected; unsupported spaces one-line
    ``ValueError``/``TypeError``. Extras: ``pip install -e '.[pettingzoo]'``, and ``'.[mpe]'`` for
    the MPE envs (the ``mpe2`` package).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_ACTIVE,
    AGENT_OBS,
    STATE,
    AgentActionSpec,
    AgentBox,
    AgentDiscrete,
    AgentMixed,
    AgentMultiDiscrete,
    AgentSpace,
    EnvContractError,
    Obs,
    StepResult,
    TensorSpec,
    VecEnv,
    check_action,
    joint_action_spec,
)
from rl_system.envs.entry_points import EntryPointError, import_entry_point

PREFIX = "pettingzoo:"
EXPECTED = ("expected 'pettingzoo:<module>:<env_fn>', a function that builds a PettingZoo ParallelEnv "
            "(e.g. 'pettingzoo:mpe2.simple_spread_v3:parallel_env')")
NOT_INSTALLED = {
    "pettingzoo": ("pettingzoo is not installed: pip install pettingzoo, or pip install -e '.[pettingzoo]' "
                   "in a checkout"),
    "mpe2": "mpe2 is not installed: pip install mpe2, or pip install -e '.[mpe]' in a checkout",
}
REWARD_MODES = ("agent", "team")
STATE_MODES = ("auto", "env", "obs")
_CPU = torch.device("cpu")


# ---------------------------------------------------------------------------------------------- building


def _pettingzoo() -> Any:
    try:
        import pettingzoo
    except ImportError:
        raise EntryPointError(NOT_INSTALLED["pettingzoo"]) from None
    return pettingzoo


def _env_fn(target: str) -> Callable[..., Any]:
    """The factory ``"module:env_fn"`` names; :class:`EntryPointError` (one line naming the env
    and what was expected) where it cannot be found."""
    name = PREFIX + target
    module_name, sep, fn_name = target.partition(":")
    if not sep or not module_name or not fn_name or ":" in fn_name:
        raise EntryPointError(f"env {name!r}: {EXPECTED}")
    if module_name == "pettingzoo.mpe" or module_name.startswith("pettingzoo.mpe."):
        raise EntryPointError(f"env {name!r}: the MPE envs moved out of PettingZoo into the mpe2 package: name them "
                              "'pettingzoo:mpe2.<env>:parallel_env' (pip install -e '.[mpe]' in a checkout)")
    missing = _not_installed(module_name)
    if missing:
        raise EntryPointError(missing)
    try:
        fn = import_entry_point(target, f"env {name!r}")
    except EntryPointError as err:
        raise EntryPointError(f"{err}; {EXPECTED}") from None
    if not callable(fn):
        raise EntryPointError(f"env {name!r}: {fn_name!r} is a {type(fn).__name__}, not callable; {EXPECTED}")
    return fn


def _not_installed(module_name: str) -> str | None:
    """The install line of the package (pettingzoo, mpe2) ``module_name`` is part of, where that
    package is missing."""
    top = module_name.partition(".")[0]
    if top not in NOT_INSTALLED:
        return None
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else NOT_INSTALLED[top]


def _check_parallel(env: Any, name: str, pettingzoo: Any) -> None:
    if isinstance(env, pettingzoo.AECEnv):
        module_name = name[len(PREFIX):].partition(":")[0]
        has_parallel = hasattr(importlib.import_module(module_name), "parallel_env")
        use = f"'{PREFIX}{module_name}:parallel_env'" if has_parallel else "'pettingzoo:<module>:parallel_env'"
        raise EntryPointError(f"env {name!r}: built an AEC env ({type(env).__name__}); this adapter steps the parallel "
                              f"API: name the module's parallel_env ({use})")
    missing = [m for m in ("possible_agents", "reset", "step", "observation_space", "action_space")
               if not hasattr(env, m)]
    if not isinstance(env, pettingzoo.ParallelEnv) and missing:
        raise EntryPointError(f"env {name!r}: built a {type(env).__name__}, not a PettingZoo ParallelEnv "
                              f"(no {', '.join(missing)}); {EXPECTED}")


def _uniform(values: list[np.ndarray]) -> float | None:
    """The bound shared by every dimension of every array, else ``None``."""
    flat = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in values])
    return float(flat[0]) if flat.size and np.all(flat == flat[0]) else None


# ---------------------------------------------------------------------------------------------- spaces


@dataclass(frozen=True)
class _ObsLayout:
    """How each agent's observation lands in its row: ``widths[j]`` values, taken from the
    ``"observation"`` entry where ``dict_obs[j]``; ``env_mask[j]`` where the env gives its legal
    actions under ``"action_mask"``."""

    widths: tuple[int, ...]
    dict_obs: tuple[bool, ...]
    env_mask: tuple[bool, ...]
    spec: TensorSpec


def _obs_layout(spaces: list[Any], agents: list[str]) -> _ObsLayout:
    from gymnasium import spaces as gs

    widths, dict_obs, env_mask, lows, highs = [], [], [], [], []
    for agent, space in zip(agents, spaces):
        is_dict = isinstance(space, gs.Dict)
        inner = space.spaces.get("observation") if is_dict else space
        if not isinstance(inner, (gs.Box, gs.MultiBinary)):
            raise TypeError(f"agent {agent!r}: unsupported observation space {space!r}; supported are Box, "
                            "MultiBinary and a Dict {'observation': Box, 'action_mask': ...}")
        widths.append(int(np.prod(inner.shape)))
        dict_obs.append(is_dict)
        env_mask.append(is_dict and ACTION_MASK in space.spaces)
        box = isinstance(inner, gs.Box)
        lows.append(inner.low if box else np.zeros(inner.shape))
        highs.append(inner.high if box else np.ones(inner.shape))
    low, high = _uniform(lows), _uniform(highs)
    # Padding and inactive agents are zeros: declared bounds must hold them.
    if low is None or high is None or not low <= 0.0 <= high:
        low = high = None
    spec = TensorSpec((len(agents), max(widths)), torch.float32, low, high)
    return _ObsLayout(tuple(widths), tuple(dict_obs), tuple(env_mask), spec)


@dataclass(frozen=True)
class _ActionLayout:
    """The batch's action spec and what turns its actions into each agent's: ``counts`` ``[n]``
    of ``Discrete`` agents' actions, ``start`` ``[n]``
    offsets of ``Discrete(n, start)`` (``None`` where all 0), ``low``/``high`` clip bounds and the
    numpy dtype of Box actions, ``own_mask`` ``[n, max n]`` (``None`` where every agent has every
    action of the spec), ``decode`` per agent where their kinds differ (``AgentMixed``: a row of
    ``D`` floats to the agent's own action)."""

    spec: AgentActionSpec
    counts: tuple[int, ...] = ()
    start: np.ndarray | None = None
    low: torch.Tensor | None = None
    high: torch.Tensor | None = None
    dtype: Any = None
    own_mask: np.ndarray | None = None
    decode: tuple[Callable[[np.ndarray], Any], ...] | None = None


def _own_action(space: Any) -> AgentActionSpec | None:
    """One agent's action as this package's spec (``None`` where unsupported)."""
    from gymnasium import spaces as gs

    if isinstance(space, gs.Discrete):
        return AgentDiscrete(int(space.n), 1)
    if isinstance(space, gs.Box):
        return AgentBox(tuple(space.shape), tuple(float(v) for v in space.low.reshape(-1)),
                        tuple(float(v) for v in space.high.reshape(-1)), 1)
    if isinstance(space, gs.MultiBinary) and len(space.shape) == 1:
        return AgentMultiDiscrete((2,) * int(space.shape[0]), 1)
    if isinstance(space, gs.MultiDiscrete) and len(space.shape) == 1 and not np.any(space.start):
        return AgentMultiDiscrete(tuple(int(v) for v in space.nvec), 1)
    return None


def _decoder(space: Any, own: AgentActionSpec) -> Callable[[np.ndarray], Any]:
    """An ``AgentMixed`` row (float ``[D]``) to the agent's action in its space's terms."""
    if isinstance(own, AgentDiscrete):
        start = int(space.start)
        return lambda row: int(row[0]) + start
    if isinstance(own, AgentMultiDiscrete):
        k, dtype = len(own.nvec), space.dtype
        return lambda row: row[:k].astype(dtype)
    d, shape, dtype = int(np.prod(space.shape)), space.shape, space.dtype
    return lambda row: np.clip(row[:d].reshape(shape), space.low, space.high).astype(dtype)


def _action_layout(spaces: list[Any], agents: list[str], widths: tuple[int, ...]) -> _ActionLayout:
    own = [_own_action(s) for s in spaces]
    if any(o is None for o in own):
        got = ", ".join(f"{a}: {s}" for a, s in zip(agents, spaces))
        raise ValueError(f"unsupported action spaces ({got}); supported: Discrete, Box, 1-D MultiDiscrete (starting "
                         "at 0) and 1-D MultiBinary, per agent")
    spec = joint_action_spec(tuple(AgentSpace(a, w, o) for a, w, o in zip(agents, widths, own)))
    if isinstance(spec, AgentDiscrete):
        counts = [o.n for o in own]
        own_mask = np.arange(spec.n)[None, :] < np.asarray(counts)[:, None]
        start = np.asarray([int(s.start) for s in spaces], dtype=np.int64)
        return _ActionLayout(spec, tuple(counts), start=start if start.any() else None,
                             own_mask=None if own_mask.all() else own_mask)
    if isinstance(spec, AgentBox):
        return _ActionLayout(spec, low=torch.as_tensor(spaces[0].low, dtype=torch.float32),
                             high=torch.as_tensor(spaces[0].high, dtype=torch.float32), dtype=spaces[0].dtype)
    if isinstance(spec, AgentMixed):  # kinds, shapes or bounds differ: each agent's action in its own row of floats
        return _ActionLayout(spec, decode=tuple(_decoder(s, o) for s, o in zip(spaces, own)))
    return _ActionLayout(spec)


# ---------------------------------------------------------------------------------------------- the batch


class _Slot:
    """One set of output buffers: numpy arrays the copies are written into and the torch tensors
    that share their memory (made once)."""

    def __init__(self, specs: dict[str, TensorSpec], num_envs: int, num_agents: int, state_is_obs: bool) -> None:
        def obs_set() -> dict[str, np.ndarray]:
            out = {k: np.zeros((num_envs, *s.shape), np.bool_ if s.dtype == torch.bool else np.float32)
                   for k, s in specs.items()}
            if state_is_obs:  # unpadded rows side by side are the rows themselves: a view, never copied
                out[STATE] = out[AGENT_OBS].reshape(num_envs, -1)
            return out

        self.obs, self.final = obs_set(), obs_set()
        self.reward = np.zeros((num_envs, num_agents), np.float32)
        self.team = np.zeros(num_envs, np.float32)
        self.terminated, self.truncated = np.zeros(num_envs, np.bool_), np.zeros(num_envs, np.bool_)
        self.obs_t = {k: torch.from_numpy(v) for k, v in self.obs.items()}
        self.final_t = {k: torch.from_numpy(v) for k, v in self.final.items()}
        self.reward_t, self.team_t = torch.from_numpy(self.reward), torch.from_numpy(self.team)
        self.terminated_t, self.truncated_t = torch.from_numpy(self.terminated), torch.from_numpy(self.truncated)


class PettingZooVecEnv(VecEnv):
    """``num_envs`` copies of the ParallelEnv ``module:env_fn(**env_kwargs)`` behind the multi-agent
    ``VecEnv`` API (see the module docstring). ``reward``: ``"agent"`` ``[N, n]`` or ``"team"``
    ``[N]``; ``state``: ``"auto"``, ``"env"`` or ``"obs"``."""

    def __init__(self, target: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 reward: str = "agent", state: str = "auto", **env_kwargs: Any) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if state not in STATE_MODES:
            raise ValueError(f"state must be one of {STATE_MODES}, got {state!r}")
        pettingzoo = _pettingzoo()
        self.name = PREFIX + target
        fn = _env_fn(target)
        self.num_envs, self.device = int(num_envs), torch.device(device)
        self.envs: list[Any] = []
        try:
            for _ in range(self.num_envs):
                self.envs.append(fn(**env_kwargs))
                _check_parallel(self.envs[-1], self.name, pettingzoo)
            self._init_layout(reward, state)
        except BaseException:
            self.close()
            raise
        self._seed, self._seed_pending, self._needs_reset = seed, True, True

    def _init_layout(self, reward: str, state: str) -> None:
        env = self.envs[0]
        agents = list(env.possible_agents)
        if not agents:
            raise ValueError(f"env {self.name!r} has no possible_agents")
        self.agent_names = tuple(agents)
        self.num_agents = n = len(agents)
        self._index = {a: j for j, a in enumerate(agents)}
        obs = _obs_layout([env.observation_space(a) for a in agents], agents)
        self._act = _action_layout([env.action_space(a) for a in agents], agents, obs.widths)
        self.action_spec = self._act.spec
        self._team = reward == "team"
        if any(obs.env_mask) and not isinstance(self.action_spec, AgentDiscrete):
            raise ValueError(f"env {self.name!r} gives action masks for {self.action_spec} actions; "
                             "masks are supported for Discrete actions")
        # Per agent name: its row, width, and whether it comes in a Dict with the env's mask.
        counts = self._act.counts or (0,) * n
        self._rows = {a: (j, obs.widths[j], obs.dict_obs[j], obs.env_mask[j], counts[j]) for j, a in enumerate(agents)}
        state_space = getattr(env, "state_space", None)
        if state == "env" and state_space is None:
            raise ValueError(f"env {self.name!r} has no state_space: use state='obs' (the agents' observations)")
        self._env_state = state_space is not None and state != "obs"
        O = obs.spec.shape[1]
        self._state_cols = np.concatenate([j * O + np.arange(w) for j, w in enumerate(obs.widths)])
        width = int(np.prod(state_space.shape)) if self._env_state else len(self._state_cols)
        self._own_mask = None
        if isinstance(self.action_spec, AgentDiscrete) and (self._act.own_mask is not None or any(obs.env_mask)):
            own = self._act.own_mask
            self._own_mask = own if own is not None else np.ones((n, self.action_spec.n), dtype=bool)
        self.observation_spec = {STATE: TensorSpec((width,), torch.float32), AGENT_OBS: obs.spec,
                                 AGENT_ACTIVE: TensorSpec((n,), torch.bool)}
        if self._own_mask is not None:
            self.observation_spec[ACTION_MASK] = TensorSpec((n, self.action_spec.n), torch.bool)
        # Two sets used in turn, so one step's results outlive the next step.
        self._state_is_obs = not self._env_state and width == n * O
        self._slots = [_Slot(self.observation_spec, self.num_envs, n, self._state_is_obs) for _ in range(2)]
        if self._own_mask is not None:  # agents without the env's masks keep their own actions' row
            for slot in self._slots:
                slot.obs[ACTION_MASK][:] = slot.final[ACTION_MASK][:] = self._own_mask
        self._cut = np.zeros(self.num_envs, np.bool_)  # per copy: some agent's end this episode was a truncation
        self._slot = 0  # the set holding the latest observations

    # ------------------------------------------------------------------------------------------ API

    def reset(self, seed: int | None = None) -> Obs:
        if seed is None and self._seed_pending:
            seed = self._seed
        self._seed_pending = self._needs_reset = False
        self._slot = 1 - self._slot
        slot = self._slots[self._slot]
        for i, env in enumerate(self.envs):
            self._reset_copy(i, env, slot.obs, None if seed is None else seed + i)
        self._state_from_obs(slot.obs)
        return self._out_obs(slot.obs_t)

    def step(self, action: torch.Tensor) -> StepResult:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = self._actions(action)
        prev_active = self._slots[self._slot].obs[AGENT_ACTIVE]
        self._slot = 1 - self._slot
        slot = self._slots[self._slot]
        buf, final, reward = slot.obs, slot.final, slot.reward
        ended = []
        for i, env in enumerate(self.envs):
            if self._step_copy(i, env, actions[i], prev_active[i], buf, reward[i]):
                ended.append(i)
                for key, arr in final.items():
                    arr[i] = buf[key][i]
                slot.terminated[i], slot.truncated[i] = not self._cut[i], self._cut[i]
                self._reset_copy(i, env, buf, None)
            else:
                slot.terminated[i] = slot.truncated[i] = False
        self._state_from_obs(buf)
        if ended:
            self._fill_final(buf, final, ended)
        if self._team:
            np.sum(reward, axis=1, out=slot.team)
            slot.team *= 1.0 / self.num_agents
        obs = self._out_obs(slot.obs_t)
        return StepResult(obs, self._out(slot.team_t if self._team else slot.reward_t), self._out(slot.terminated_t),
                          self._out(slot.truncated_t), self._out_obs(slot.final_t) if ended else obs, {})

    def close(self) -> None:
        for env in getattr(self, "envs", ()):
            env.close()

    def __repr__(self) -> str:
        return f"PettingZooVecEnv({self.name!r}, num_envs={self.num_envs}, device={str(self.device)!r})"

    # ------------------------------------------------------------------------------------------ one copy

    def _step_copy(self, i: int, env: Any, act: np.ndarray, prev: np.ndarray, buf: dict[str, np.ndarray],
                   reward: np.ndarray) -> bool:
        """Step copy ``i`` with its agents' actions ``act`` (row ``[n, ...]``) and write its row of
        ``buf`` and ``reward`` (``[n]``); ``prev`` ``[n]``: who was active before. Returns whether
        its episode ended (``buf`` then holds the episode's last observation)."""
        index = self._index
        decode = self._act.decode
        if decode is None:
            obs, rew, term, trunc, _ = env.step({a: act[index[a]] for a in env.agents})
        else:
            obs, rew, term, trunc, _ = env.step({a: decode[index[a]](act[index[a]]) for a in env.agents})
        reward.fill(0.0)
        for agent, r in rew.items():
            if prev[index[agent]]:
                reward[index[agent]] = r
        if any(flag and not term.get(a) and prev[index[a]] for a, flag in trunc.items()):
            self._cut[i] = True
        seen = self._write_obs(i, obs, buf, prev)
        active, live = buf[AGENT_ACTIVE][i], set(env.agents)
        # Done on this step: flagged, or dropped from env.agents (no action goes to it any more).
        done = [index[a] for a in obs if active[index[a]] and (term.get(a) or trunc.get(a) or a not in live)]
        ended = not live or len(done) == seen
        if not ended:
            for j in done:  # left before the others: inactive from now on
                self._clear(buf, i, j)
        if self._env_state:
            buf[STATE][i] = np.asarray(env.state(), dtype=np.float32).reshape(-1)
        return ended

    def _reset_copy(self, i: int, env: Any, buf: dict[str, np.ndarray], seed: int | None) -> None:
        obs, _ = env.reset(seed=seed)
        self._cut[i] = False
        self._write_obs(i, obs, buf, None)
        if self._env_state:
            buf[STATE][i] = np.asarray(env.state(), dtype=np.float32).reshape(-1)

    def _write_obs(self, i: int, obs: dict[str, Any], buf: dict[str, np.ndarray], prev: np.ndarray | None) -> int:
        """Copy ``i``'s observations into its rows of ``buf`` (agents active before, where ``prev``
        is given): ``obs`` / ``agent_active`` / ``action_mask``, zeros and own-action masks for the
        others. Returns how many agents were written."""
        rows, active = buf[AGENT_OBS][i], buf[AGENT_ACTIVE][i]
        active.fill(False)
        seen = 0
        for agent, value in obs.items():
            if agent not in self._rows:
                raise EnvContractError(f"env {self.name!r}: agent {agent!r} appeared, which is not one of possible_agents "
                                 f"({', '.join(self.agent_names)}); the adapter takes a fixed set of agents, of which "
                                 "some may leave before the episode ends")
            j, width, in_dict, env_mask, count = self._rows[agent]
            if prev is not None and not prev[j]:
                continue
            if in_dict:
                if env_mask:
                    buf[ACTION_MASK][i, j, :count] = np.asarray(value[ACTION_MASK]).reshape(-1)
                value = value["observation"]
            rows[j, :width] = np.reshape(value, -1)
            active[j] = True
            seen += 1
        if seen < self.num_agents:
            for j in np.flatnonzero(~active):
                self._clear(buf, i, j)
        return seen

    def _clear(self, buf: dict[str, np.ndarray], i: int, j: int) -> None:
        """Agent ``j`` of copy ``i`` out of its episode: zero observation, inactive, own-action mask."""
        buf[AGENT_OBS][i, j] = 0.0
        buf[AGENT_ACTIVE][i, j] = False
        if self._own_mask is not None:
            buf[ACTION_MASK][i, j] = self._own_mask[j]

    # ------------------------------------------------------------------------------------------ batch

    def _fill_final(self, buf: dict[str, np.ndarray], final: dict[str, np.ndarray], ended: list[int]) -> None:
        """``final`` holds the ended copies' last observations; the others' are their ``obs``."""
        going = np.ones(self.num_envs, dtype=np.bool_)
        going[ended] = False
        for key, arr in final.items():
            if key != STATE or self._env_state:
                arr[going] = buf[key][going]
        self._state_from_obs(final)

    def _state_from_obs(self, buf: dict[str, np.ndarray]) -> None:
        """``state`` ``[N, S]`` where it is the agents' observation rows without their padding, side
        by side (nothing to do where it is a view of the rows)."""
        if not (self._env_state or self._state_is_obs):
            np.take(buf[AGENT_OBS].reshape(self.num_envs, -1), self._state_cols, axis=1, out=buf[STATE])

    def _actions(self, action: torch.Tensor) -> np.ndarray:
        """The batch's actions as numpy ``[N, n, ...]`` in each agent's own terms (``Discrete``
        starts added, Box actions clipped and cast to the space's dtype)."""
        a = check_action(action.detach(), self.action_spec, self.num_envs, _CPU)
        layout = self._act
        if layout.decode is not None:  # AgentMixed rows: each agent decodes its own in _step_copy
            return a.numpy()
        if layout.low is not None:
            return torch.clamp(a, layout.low, layout.high).numpy().astype(layout.dtype, copy=False)
        a = a.numpy()
        return a + layout.start if layout.start is not None else a

    def _out(self, t: torch.Tensor) -> torch.Tensor:
        # On CPU the views themselves: ``to`` costs microseconds even where it has nothing to do.
        return t if self.device == _CPU else t.to(self.device)

    def _out_obs(self, obs: dict[str, torch.Tensor]) -> Obs:
        return {key: self._out(t) for key, t in obs.items()}
