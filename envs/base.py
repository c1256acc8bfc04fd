"""The vectorized environment API every env in this package implements.

A ``VecEnv`` steps ``num_envs`` independent environments at once. Everything crossing the API
is a torch tensor on ``env.device`` with a leading batch dimension ``N = num_envs``:

* observations are a ``dict[str, Tensor]``; key ``"obs"`` is used for single-array observations.
  Each entry has shape ``[N, *spec.shape]``. An optional ``"action_mask"`` entry (bool) marks the
  legal discrete actions: ``[N, n]`` for :class:`Discrete`, ``[N, sum(nvec)]`` for
  :class:`MultiDiscrete` (each sub-action's flags in turn); every row must leave each
  (sub-)action at least one legal choice.
* ``step(action)`` takes ``[N]`` (discrete, int64), ``[N, K]`` (multi-discrete, int64) or
  ``[N, *action_spec.shape]`` (continuous, float32) and **auto-resets** finished envs in the same step (Gymnasium's ``SAME_STEP`` mode):
  the returned ``obs`` is already the first observation of the next episode where
  ``terminated | truncated``, and ``final_obs`` holds the observation the episode ended on, which
  a learner needs to bootstrap the value of truncated episodes.

Multi-agent envs follow the same API with ``num_agents = n`` set and a per-agent action spec
(:data:`AgentActionSpec`: :class:`AgentDiscrete`, :class:`AgentMultiDiscrete` or :class:`AgentBox`):

* observations: :data:`STATE` ``[N, S]``, the global state (an env without one gives its agents'
  observations together), and :data:`AGENT_OBS` ``[N, n, O]``, each agent's observation (agents
  whose observations differ in width are zero-padded to the widest; a policy tells them apart by
  their agent index). Optional: :data:`ACTION_MASK` ``[N, n, width]`` bool, each agent's legal
  actions (agents with fewer discrete actions than the widest have the rest masked), and
  :data:`AGENT_ACTIVE` ``[N, n]`` bool, the agents still in their episode (an agent that finished
  before the others is inactive until the env's episode ends: its actions are ignored, its reward is
  0 and a learner leaves its steps out);
* actions: ``[N, n]`` (discrete), ``[N, n, K]`` (multi-discrete), ``[N, n, *shape]`` (continuous),
  or, where the agents' actions differ in kind or shape, :class:`AgentMixed` float32 ``[N, n, D]``;
  an env whose agents differ names each agent's own spaces (:class:`AgentSpace`) in its action
  spec's ``agents``, from which agent groups are made;
* ``reward``: ``[N]``, a team reward, or ``[N, n]``, each agent's own;
* ``terminated``/``truncated``: per env ``[N]`` (an env's episode ends for all its agents at once).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import torch

Obs = dict[str, torch.Tensor]


class EnvContractError(ValueError):
    """An env broke this API's contract while running (an agent that is not one of its agents, a
    tensor of the wrong shape): stepping it again cannot help, so a run ends on the first one, in
    one line, instead of retrying the worker."""


@dataclass(frozen=True)
class TensorSpec:
    """Shape (without the batch dimension), dtype and optional bounds of one observation entry."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Discrete:
    """A discrete action in ``[0, n)``; actions travel as int64 tensors of shape ``[N]``."""

    n: int
    shape: tuple[int, ...] = field(default=(), init=False)
    dtype: torch.dtype = field(default=torch.int64, init=False)

    def __str__(self) -> str:
        return f"Discrete({self.n})"


@dataclass(frozen=True)
class Box:
    """A continuous action of ``shape`` in ``[low, high]`` (per-dimension tuples), float32."""

    shape: tuple[int, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    dtype: torch.dtype = field(default=torch.float32, init=False)

    def __str__(self) -> str:
        return f"Box(shape={self.shape})"


@dataclass(frozen=True)
class AgentDiscrete:
    """One discrete action in ``[0, n)`` per agent of a multi-agent env: int64 ``[N, num_agents]``."""

    n: int
    num_agents: int
    agents: tuple["AgentSpace", ...] = ()
    """Each agent's own spaces where the agents differ (see :class:`AgentSpace`); empty where
    every agent observes ``O`` values and takes this action."""
    shape: tuple[int, ...] = field(default=(), init=False)
    dtype: torch.dtype = field(default=torch.int64, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", (self.num_agents,))

    def __str__(self) -> str:
        return f"AgentDiscrete({self.n}, num_agents={self.num_agents})"


def _checked_nvec(nvec: tuple[int, ...], kind: str) -> tuple[int, ...]:
    """A multi-discrete spec's ``nvec`` as ints; ``ValueError`` (one line) unless non-empty and positive."""
    checked = tuple(int(n) for n in nvec)
    if not checked or any(n < 1 for n in checked):
        raise ValueError(f"{kind} needs a non-empty nvec of positive ints, got {nvec!r}")
    return checked


@dataclass(frozen=True)
class AgentMultiDiscrete:
    """``K = len(nvec)`` discrete sub-actions per agent of a multi-agent env: int64 ``[N, num_agents, K]``."""

    nvec: tuple[int, ...]
    num_agents: int
    agents: tuple["AgentSpace", ...] = ()
    """As :attr:`AgentDiscrete.agents`."""
    shape: tuple[int, ...] = field(default=(), init=False)
    dtype: torch.dtype = field(default=torch.int64, init=False)

    def __post_init__(self) -> None:
        nvec = _checked_nvec(self.nvec, "AgentMultiDiscrete")
        object.__setattr__(self, "nvec", nvec)
        object.__setattr__(self, "shape", (self.num_agents, len(nvec)))

    def __str__(self) -> str:
        return f"AgentMultiDiscrete({self.nvec}, num_agents={self.num_agents})"


@dataclass(frozen=True)
class AgentBox:
    """A continuous action of ``agent_shape`` per agent in ``[low, high]`` (per-dimension tuples,
    the same for every agent): float32 ``[N, num_agents, *agent_shape]``."""

    agent_shape: tuple[int, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    num_agents: int
    agents: tuple["AgentSpace", ...] = ()
    """As :attr:`AgentDiscrete.agents`."""
    shape: tuple[int, ...] = field(default=(), init=False)
    dtype: torch.dtype = field(default=torch.float32, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", (self.num_agents, *self.agent_shape))

    def __str__(self) -> str:
        return f"AgentBox(shape={self.agent_shape}, num_agents={self.num_agents})"


@dataclass(frozen=True)
class MultiDiscrete:
    """``K = len(nvec)`` discrete sub-actions taken together, sub-action ``k`` in ``[0, nvec[k])``
    (Gymnasium's ``MultiDiscrete``): int64 ``[N, K]``. The policy factorises over sub-actions."""

    nvec: tuple[int, ...]
    shape: tuple[int, ...] = field(default=(), init=False)
    dtype: torch.dtype = field(default=torch.int64, init=False)

    def __post_init__(self) -> None:
        nvec = _checked_nvec(self.nvec, "MultiDiscrete")
        object.__setattr__(self, "nvec", nvec)
        object.__setattr__(self, "shape", (len(nvec),))

    def __str__(self) -> str:
        return f"MultiDiscrete({self.nvec})"


@dataclass(frozen=True)
class AgentSpace:
    """One agent of a multi-agent env as itself: its ``name``, its observation's width (the first
    ``obs_width`` values of its row of :data:`AGENT_OBS`, the rest padding) and its own ``action``
    (an :class:`AgentDiscrete`, :class:`AgentMultiDiscrete` or :class:`AgentBox` of one agent).
    Agents of the same spaces form a group (``mappo.groups``)."""

    name: str
    obs_width: int
    action: "AgentDiscrete | AgentMultiDiscrete | AgentBox"

    def __str__(self) -> str:
        return f"obs width {self.obs_width}, {agent_action_str(self.action)}"


def agent_action_str(spec: "AgentDiscrete | AgentMultiDiscrete | AgentBox") -> str:
    """One agent's action, without the agent count: ``Discrete(5)``, ``Box(shape=(2,))``..."""
    if isinstance(spec, AgentDiscrete):
        return f"Discrete({spec.n})"
    if isinstance(spec, AgentMultiDiscrete):
        return f"MultiDiscrete({spec.nvec})"
    if len(set(spec.low)) == 1 and len(set(spec.high)) == 1:  # one bound for every value: say it once
        return f"Box(shape={spec.agent_shape}, low={spec.low[0]}, high={spec.high[0]})"
    return f"Box(shape={spec.agent_shape}, low={spec.low}, high={spec.high})"


def action_columns(spec: "AgentDiscrete | AgentMultiDiscrete | AgentBox") -> int:
    """The values one agent's action takes in an :class:`AgentMixed` row: 1 (discrete), ``K``
    (multi-discrete) or ``prod(agent_shape)`` (continuous)."""
    if isinstance(spec, AgentDiscrete):
        return 1
    if isinstance(spec, AgentMultiDiscrete):
        return len(spec.nvec)
    return math.prod(spec.agent_shape)


@dataclass(frozen=True)
class AgentMixed:
    """Agents whose actions differ in kind or shape (a speaker's discrete word beside a mover's
    continuous force), each agent's own in ``agents``: float32 ``[N, num_agents, D]``, ``D`` the
    widest agent's :func:`action_columns`. Agent ``j``'s action fills the first values of its row
    (a discrete action its index, a multi-discrete one its ``K`` indices, a continuous one its
    values, flattened) and zeros the rest. Float32 holds every index below 2**24 exactly."""

    agents: tuple[AgentSpace, ...]
    num_agents: int = field(default=0, init=False)
    shape: tuple[int, ...] = field(default=(), init=False)
    dtype: torch.dtype = field(default=torch.float32, init=False)

    def __post_init__(self) -> None:
        agents = tuple(self.agents)
        if not agents:
            raise ValueError("AgentMixed needs at least one agent")
        for agent in agents:
            own = isinstance(agent.action, (AgentDiscrete, AgentMultiDiscrete, AgentBox))
            if not own or agent.action.num_agents != 1:
                raise ValueError(f"AgentMixed: agent {agent.name!r}'s action must be an AgentDiscrete, "
                                 f"AgentMultiDiscrete or AgentBox of one agent, got {agent.action}")
        object.__setattr__(self, "agents", agents)
        object.__setattr__(self, "num_agents", len(agents))
        object.__setattr__(self, "shape", (len(agents), max(action_columns(a.action) for a in agents)))

    def __str__(self) -> str:
        return f"AgentMixed({', '.join(agent_action_str(a.action) for a in self.agents)})"


def from_mixed_row(values: torch.Tensor, spec: AgentDiscrete | AgentMultiDiscrete | AgentBox) -> torch.Tensor:
    """Agents' own actions out of their :class:`AgentMixed` rows ``[..., D]`` (one agent's kind,
    ``spec``): int64 ``[...]`` (discrete), int64 ``[..., K]`` (multi-discrete) or the values
    ``[..., d]`` (continuous)."""
    values = values[..., :action_columns(spec)]
    if isinstance(spec, AgentDiscrete):
        return values.squeeze(-1).long()
    return values.long() if isinstance(spec, AgentMultiDiscrete) else values


def joint_action_spec(agents: tuple[AgentSpace, ...]) -> AgentDiscrete | AgentMultiDiscrete | AgentBox | AgentMixed:
    """The batch's action spec for agents of these own spaces: every agent discrete ->
    :class:`AgentDiscrete` of the most actions (the env masks each agent's own); all of one action
    -> that action for every agent; else :class:`AgentMixed`. Each agent's own spaces ride along
    (``agents``) where the agents differ at all, in observation width or action."""
    own = [a.action for a in agents]
    each = () if len({(a.obs_width, a.action) for a in agents}) == 1 else tuple(agents)
    if all(isinstance(o, AgentDiscrete) for o in own):
        return AgentDiscrete(max(o.n for o in own), len(agents), each)
    if len(set(own)) > 1:
        return AgentMixed(tuple(agents))
    return dataclasses.replace(own[0], num_agents=len(agents), agents=each)


AgentActionSpec = AgentDiscrete | AgentMultiDiscrete | AgentBox | AgentMixed
"""The action specs of multi-agent envs (one action per agent)."""
ActionSpec = Discrete | Box | MultiDiscrete | AgentDiscrete | AgentMultiDiscrete | AgentBox | AgentMixed
ACTION_MASK = "action_mask"
"""The observation key of the legal-action flags."""
STATE, AGENT_OBS, AGENT_ACTIVE = "state", "obs", "agent_active"
"""A multi-agent env's observation keys: the global state ``[S]``, the agents' observations
``[n, O]``, and (optional) which agents are still in their episode ``[n]`` bool."""


def is_multi_agent(spec: ActionSpec) -> bool:
    """Whether ``spec`` is a multi-agent env's (one action per agent)."""
    return isinstance(spec, (AgentDiscrete, AgentMultiDiscrete, AgentBox, AgentMixed))


def agent_spaces(observation_spec: dict[str, TensorSpec], action_spec: "AgentActionSpec") -> tuple[AgentSpace, ...]:
    """Each agent's own spaces: those ``action_spec`` declares (``agents``), else every agent
    alike, named ``agent_<j>``, observing the whole row and taking ``action_spec``'s action."""
    if action_spec.agents:
        return action_spec.agents
    one = dataclasses.replace(action_spec, num_agents=1)
    width = observation_spec[AGENT_OBS].shape[1]
    return tuple(AgentSpace(f"agent_{j}", width, one) for j in range(action_spec.num_agents))


def agent_rewards(reward: torch.Tensor, num_agents: int) -> torch.Tensor:
    """``[N, n]``: each agent's reward from a step's ``reward``, its own where the env gives one per
    agent ``[N, n]``, else the team reward ``[N]`` for every agent (a view, no copy)."""
    return reward if reward.dim() == 2 else reward.unsqueeze(1).expand(-1, num_agents)


def mask_width(spec: ActionSpec) -> int | None:
    """The width an ``action_mask`` must have for ``spec`` (``None``: masks do not apply)."""
    if isinstance(spec, Discrete):
        return spec.n
    if isinstance(spec, (MultiDiscrete, AgentMultiDiscrete)):
        return sum(spec.nvec)
    if isinstance(spec, AgentDiscrete):
        return spec.n
    return None


def validate_specs(observation_spec: dict[str, TensorSpec], action_spec: ActionSpec) -> None:
    """Check that an env's declared specs are well formed and agree with each other; raises
    ``TypeError``/``ValueError`` with one line naming what is wrong and what was expected."""
    if not isinstance(action_spec, (Discrete, Box, MultiDiscrete, AgentDiscrete, AgentMultiDiscrete, AgentBox,
                                    AgentMixed)):
        raise TypeError(f"action_spec must be Discrete, MultiDiscrete, Box, AgentDiscrete, AgentMultiDiscrete, "
                        f"AgentBox or AgentMixed from rl_system.envs.base, got {type(action_spec).__name__}")
    if not isinstance(observation_spec, dict) or not observation_spec:
        raise TypeError(f"observation_spec must be a non-empty dict of TensorSpec, got {observation_spec!r}")
    for key, spec in observation_spec.items():
        if not isinstance(key, str) or not isinstance(spec, TensorSpec):
            raise TypeError(f"observation_spec[{key!r}] must be a TensorSpec under a str key, got {spec!r}")
    if is_multi_agent(action_spec):
        _validate_agents(observation_spec, action_spec.num_agents)
        _validate_agent_spaces(observation_spec, action_spec)
    mask = observation_spec.get(ACTION_MASK)
    if mask is None:
        return
    width = mask_width(action_spec)
    if width is None:
        raise ValueError(f"observation {ACTION_MASK!r} is reserved for legal-action flags; a {type(action_spec).__name__} "
                         "action has none (rename the observation)")
    expected = (action_spec.num_agents, width) if is_multi_agent(action_spec) else (width,)
    if mask.dtype != torch.bool or tuple(mask.shape) != expected:
        what = (f"sum(nvec) = {width} flags" if isinstance(action_spec, (MultiDiscrete, AgentMultiDiscrete))
                else f"{width} flags")
        raise ValueError(f"observation {ACTION_MASK!r} must be bool of shape {expected} ({what} for "
                         f"{action_spec}), got {mask.dtype} {tuple(mask.shape)}")


def _validate_agents(observation_spec: dict[str, TensorSpec], n: int) -> None:
    """A multi-agent env's observation keys (module docstring): ``state [S]``, ``obs [n, O]``,
    ``agent_active [n]`` bool."""
    state, obs, active = (observation_spec.get(k) for k in (STATE, AGENT_OBS, AGENT_ACTIVE))
    if state is None or len(state.shape) != 1:
        raise ValueError(f"a multi-agent env's observation {STATE!r} must be the global state [S], "
                         f"got {None if state is None else state.shape}")
    if obs is None or len(obs.shape) != 2 or obs.shape[0] != n:
        raise ValueError(f"a multi-agent env's observation {AGENT_OBS!r} must be [num_agents={n}, O], "
                         f"got {None if obs is None else obs.shape}")
    if active is not None and (active.dtype != torch.bool or tuple(active.shape) != (n,)):
        raise ValueError(f"observation {AGENT_ACTIVE!r} must be bool of shape ({n},), got {active.dtype} "
                         f"{tuple(active.shape)}")


def _validate_agent_spaces(observation_spec: dict[str, TensorSpec], action_spec: AgentActionSpec) -> None:
    """The agents' own spaces (``agents``), where declared: one per agent, each observation within
    the row's width, each action a one-agent spec."""
    agents, n, width = action_spec.agents, action_spec.num_agents, observation_spec[AGENT_OBS].shape[1]
    if not agents:
        return
    if len(agents) != n:
        raise ValueError(f"the action spec names {len(agents)} agents' spaces (agents) for {n} agents")
    for agent in agents:
        if not 0 < agent.obs_width <= width:
            raise ValueError(f"agent {agent.name!r}: obs_width {agent.obs_width} must be within the rows' {width}")
        if agent.action.num_agents != 1:
            raise ValueError(f"agent {agent.name!r}: its own action must be of one agent, got {agent.action}")


class StepResult(NamedTuple):
    """What ``VecEnv.step`` returns; every tensor has leading dimension ``N``.

    obs:        next observations, already reset where the episode ended.
    reward:     ``[N]`` float32.
    terminated: ``[N]`` bool, the MDP reached a terminal state (no bootstrap).
    truncated:  ``[N]`` bool, cut by a time limit (bootstrap from ``final_obs``). Both may be
                True on one step (Gymnasium's TimeLimit does this); terminated wins.
    final_obs:  the observation each env ended on; only meaningful where done.
    info:       extra per-env tensors (e.g. ``"success"``), ``[N, ...]``; may be empty.

    The caller may keep the returned tensors until the next ``step``; an env may reuse their
    storage after that (``obs`` and ``final_obs`` may be the same tensors where nothing ended).
    """

    obs: Obs
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: Obs
    info: dict[str, torch.Tensor]


def check_action(action: torch.Tensor, spec: ActionSpec, num_envs: int, device: torch.device) -> torch.Tensor:
    """``action`` checked against ``spec`` for a batch of ``num_envs`` envs, on ``device`` in
    ``spec.dtype``: the prologue every ``step`` shares.

    The shape must be ``[num_envs, *spec.shape]``: ``[N]`` for :class:`Discrete`,
    ``[N, num_agents]`` for :class:`AgentDiscrete`, ``[N, *shape]`` for :class:`Box`. Discrete
    actions may be any integer (or bool) tensor and come back int64; a float or complex one raises
    rather than being truncated to an index. Box actions come back float32. Values are not
    checked: bounds are each env's business (clipping, or an error where that is free).
    Returns ``action`` itself where nothing needs converting.

    Raises ``ValueError`` (shape) or ``TypeError`` (dtype), one line naming expected and got.
    """
    expected = (num_envs, *spec.shape)
    if action.shape != expected:
        raise ValueError(f"action must have shape {expected}, got {tuple(action.shape)}")
    # Compared first because ``to`` costs microseconds even where it has nothing to do, and a
    # small batch steps in tens of them.
    if action.dtype == spec.dtype and action.device == device:
        return action
    if isinstance(spec, (Discrete, AgentDiscrete, MultiDiscrete, AgentMultiDiscrete)) and (
            action.is_floating_point() or action.is_complex()):
        raise TypeError(f"actions are discrete: expected an integer tensor (int64), got {action.dtype}")
    return action.to(device=device, dtype=spec.dtype)


def _weights(mask: torch.Tensor) -> torch.Tensor:
    """Sampling weights from mask rows ``[R, n]``; a row with no legal choice (a violation the
    ``action_mask`` check reports) samples uniformly so the other checks can go on."""
    weights = mask.float()
    weights[weights.sum(dim=1) == 0] = 1.0
    return weights


def sample_actions(spec: ActionSpec, n: int, mask: torch.Tensor | None = None,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """``[n, *spec.shape]`` legal random actions on CPU, uniform within the bounds (a Gaussian
    draw where a bound is infinite), ``mask`` respected where given; ``generator``: torch's default
    where None."""
    if isinstance(spec, AgentMixed):  # each agent's of its own kind, in the first values of its row
        action = torch.zeros((n, *spec.shape))
        for j, agent in enumerate(spec.agents):
            own = sample_actions(agent.action, n, None, generator).reshape(n, -1).float()
            action[:, j, :own.shape[1]] = own
        return action
    if isinstance(spec, (Box, AgentBox)):
        per = spec.agent_shape if isinstance(spec, AgentBox) else spec.shape  # bounds per (agent's) action
        low = torch.tensor(spec.low).reshape(per).expand(spec.shape)
        high = torch.tensor(spec.high).reshape(per).expand(spec.shape)
        u = torch.rand((n, *spec.shape), generator=generator)
        finite = torch.isfinite(low) & torch.isfinite(high)
        normal = torch.randn((n, *spec.shape), generator=generator)
        action = torch.where(finite, low + u * (high - low), normal)
    elif isinstance(spec, (MultiDiscrete, AgentMultiDiscrete)):
        rows = n * (spec.num_agents if is_multi_agent(spec) else 1)  # one row per (env, agent)
        flat = mask.reshape(rows, -1) if mask is not None else None
        parts, start = [], 0
        for width in spec.nvec:
            weights = _weights(flat[:, start:start + width]) if flat is not None else torch.ones(rows, width)
            parts.append(torch.multinomial(weights, 1, generator=generator))
            start += width
        action = torch.cat(parts, dim=1).reshape(n, *spec.shape)
    else:
        width = spec.n
        if mask is not None:
            weights = _weights(mask.reshape(-1, width))
        else:
            weights = torch.ones(n * (spec.num_agents if is_multi_agent(spec) else 1), width)
        action = torch.multinomial(weights, 1, generator=generator).reshape(n, *spec.shape)
    return action


def make_generator(device: torch.device, seed: int | None) -> torch.Generator:
    """The env batch's random generator on ``device``: seeded when ``seed`` is given, else from
    OS entropy."""
    generator = torch.Generator(device=device)
    if seed is not None:
        generator.manual_seed(seed)
    else:
        generator.seed()
    return generator


class VecEnv:
    """Base class: N environments stepped together as tensors on one device."""

    num_envs: int
    num_agents: int = 1
    device: torch.device
    observation_spec: dict[str, TensorSpec]
    action_spec: ActionSpec
    _needs_reset: bool = False  # envs that must be reset before their first step set it in __init__

    episode_stats: tuple[str, ...] = ()
    """Numeric ``info`` entries ``[N]`` whose value on an episode's last step describes the episode
    (Overcooked's ``soups_served``): each is averaged over the return window and logged as
    ``rollout/<key>_mean``, and ``rl-system eval`` reports its mean and std. Boolean ``[N]`` entries
    need no naming: they are episode outcomes (``success``), reported as rates."""

    before_autoreset: Callable[[torch.Tensor], None] | None = None
    """Optional observer of auto-resets. Where set, envs that support it (``Navigation``,
    ``AirCombat``) call it inside ``step`` with the int64 indices ``[k]`` of the envs about to be
    reset, while their state is still the one the episode ended in (a renderer records the final
    state with it). Others ignore it."""

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs; ``seed`` makes the whole batch reproducible."""
        raise NotImplementedError

    def step(self, action: torch.Tensor) -> StepResult:
        raise NotImplementedError

    def _step_action(self, action: torch.Tensor) -> torch.Tensor:
        """The start of ``step``: refuse to step before the first reset, then
        :func:`check_action` against ``action_spec``; returns the action on ``device``."""
        if self._needs_reset:
            also = " (or set_state())" if hasattr(self, "set_state") else ""
            raise RuntimeError(f"call reset(){also} before step()")
        return check_action(action, self.action_spec, self.num_envs, self.device)

    def _notify_autoreset(self, idx: torch.Tensor) -> None:
        """Call :attr:`before_autoreset` (if set) with the envs ``idx`` (int64 ``[k]``) about to
        be auto-reset."""
        if self.before_autoreset is not None:
            self.before_autoreset(idx)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Everything needed to continue the batch exactly (physics, step counters, RNG), for
        bit-exact resume from a checkpoint. Envs that cannot capture it raise NotImplementedError;
        a resumed run then starts their episodes afresh."""
        raise NotImplementedError(f"{type(self).__name__} does not support state capture")

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support state capture")

    def close(self) -> None:
        """Release resources (processes, files); the default has none."""

    def __enter__(self) -> "VecEnv":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
