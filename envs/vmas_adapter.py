"""A VMAS scenario (vectorized multi-agent simulator, ``pip install vmas``) as a multi-agent
:class:`rl_system.envs.base.VecEnv`.

``env.name: "vmas:balance"`` builds ``vmas.make_env("balance", num_envs=N, device=..., seed=...,
continuous_actions=..., max_steps=..., dict_spaces=False, terminated_truncated=True,
clamp_actions=True, **scenario_kwargs)`` and steps VMAS's own torch batch: the tensors VMAS
returns are stacked once into the multi-agent layout of :mod:`rl_system.envs.base`, with no
numpy round trip and no per-env copies.

Observations
    ``obs`` float32 ``[N, n, O]``: agent ``i``'s observation in row ``i``; agents whose
    observations differ in width are zero-padded to the widest. ``state`` float32 ``[N, S]``: VMAS
    has no global state, so it is the agents' (unpadded) observations concatenated,
    ``S = sum of the widths``. Scenarios with dict observations are refused (``ValueError``).
Actions
    * ``continuous_actions=False`` (default): ``AgentDiscrete(n_actions, n)``, int64 ``[N, n]``,
      VMAS's flattened discrete action per agent. Where agents have different numbers of actions
      they are padded to the widest and ``action_mask`` (bool ``[N, n, width]``) marks each
      agent's own.
    * ``multidiscrete_actions=True``: ``AgentMultiDiscrete(nvec, n)``, int64 ``[N, n, K]``; agents
      must share ``nvec``.
    * ``continuous_actions=True``: ``AgentBox((d,), low, high, n)``, float32 ``[N, n, d]``,
      clipped to the bounds by VMAS (``clamp_actions``).
    * Agents whose actions differ in kind, size or bounds (``kinematic_bicycle``'s bicycle and
      holonomic robot, ``simple_speaker_listener`` with continuous actions): ``AgentMixed``,
      float32 ``[N, n, D]``, each agent's own action in the first values of its row.
    Where the agents differ at all (observation width or action), the spec's ``agents`` names
    each one's own spaces, from which MAPPO makes agent groups. Other spaces raise a one-line
    ``ValueError`` when the env is built.
Rewards
    ``reward="agent"`` (default): float32 ``[N, n]``, each agent's own. ``reward="team"``: float32
    ``[N]``, the **mean** over agents. Many VMAS scenarios (balance, transport, wheel, ...) give
    every agent the same shared reward, and the mean is then exactly that reward, where a sum
    would scale it by ``n``; where rewards are individual it is the average agent's. (Telling
    shared rewards apart by comparing values would be fragile: they can coincide by chance.)
Episode ends
    ``terminated``: the scenario's own ``done()``. ``truncated``: VMAS's step counter of the env
    reached ``max_steps`` (``None``: never). VMAS counts the steps (its ``env.steps``, zeroed where
    an env resets), so it can tell the two apart (``terminated_truncated``).
Auto-reset
    ``SAME_STEP`` (:mod:`rl_system.envs.base`): envs that ended restart within the same ``step``;
    ``final_obs`` holds the observations they ended on. VMAS resets single envs only
    (``reset_at(i)``; the scenarios' resets index one env and draw ``(1, ...)`` samples, so a
    tensor of indices would give every reset env the same draw), and a Python loop over the
    finished envs costs more than the step itself at large ``N``. So the finished envs are reset
    together: every per-env tensor of the scenario (entity states, actions, the scenario's own
    bookkeeping such as reward-shaping baselines: everything reachable from the scenario whose
    leading dimension is ``N``, :func:`batch_tensors`) is copied aside, VMAS's own vectorized reset
    (``env_reset_world_at(None)``) runs on the whole batch, and the copies are put back for the envs
    that did not finish (:func:`blended_reset`). The finished envs thus get exactly the state
    VMAS's ``reset()`` gives them from the same generator state (it draws for all ``N`` envs, so
    the stream differs from ``reset_at``'s), and the running envs are left bit-identical. This is
    used for the scenarios where that is verified (:data:`BATCHED_RESET_SCENARIOS`; ``balance``,
    ``transport`` and ``wheel`` in the default tests); the others use VMAS's ``reset_at`` loop
    (with one warning), as does a scenario whose batched reset raises (one warning, then the loop
    for good). ``batched_reset`` overrides the choice.
Randomness
    VMAS draws from torch's, numpy's and Python's global generators, swapping in one state shared
    by all its envs in the process. This adapter gives each env its own copy of that state, seeded
    from ``seed`` (OS entropy where ``None``), so envs in one process do not perturb each other:
    equal seeds and actions give equal trajectories. ``reset(seed)`` reseeds. On CUDA, VMAS's
    draws come from torch's global CUDA generator, which is not isolated.
``info``
    The entries of VMAS's per-agent info that are scalar per env and reported by every agent, as
    ``[N]`` tensors: float entries averaged over agents (the reward's rule), bool ones OR-ed.
State capture
    ``state_dict`` is not supported (a resumed run starts its episodes afresh).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import random
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_OBS,
    STATE,
    AgentActionSpec,
    AgentBox,
    AgentDiscrete,
    AgentMixed,
    AgentMultiDiscrete,
    AgentSpace,
    Obs,
    StepResult,
    TensorSpec,
    VecEnv,
    from_mixed_row,
    joint_action_spec,
)

REWARD_MODES = ("agent", "team")

BATCHED_RESET_SCENARIOS = frozenset({
    "balance", "ball_trajectory", "buzz_wire", "circle_trajectory", "diff_drive", "dispersion",
    "drone", "dropout", "flocking", "give_way", "goal", "joint_passage", "joint_passage_size", "kinematic_bicycle",
    "line_trajectory", "multi_give_way", "navigation", "passage", "pollock", "reverse_transport", "simple",
    "simple_crypto", "simple_push", "simple_speaker_listener", "simple_spread", "simple_tag", "simple_world_comm",
    "transport", "vel_control", "waterfall", "wheel",
})
"""Scenarios (vmas 1.5.2) whose batched reset is verified: the reset envs get the state of VMAS's
own vectorized reset, and the running envs continue bit-identically to envs that never reset
(``tests/envs/test_vmas_adapter.py``). The others failed that check and use VMAS's ``reset_at`` loop
unless ``batched_reset=True`` is asked for: their resets re-draw Python values shared by the
whole batch (agent order in asym_joint, passage order in ball_passage, masses in het_mass, the
goal entity in simple_adversary and simple_reference), keep state in objects the walk does not
enter (sampling's distributions), or their steps draw random numbers (discovery's respawns,
football's noise), so any reset changes the running envs' futures (the loop's too); road_traffic
is unchecked."""
_LOOP_WARNED: set[str] = set()  # scenarios warned about using the reset_at loop, once per process


def _vmas() -> Any:
    try:
        import vmas
    except ImportError:
        raise ValueError("vmas is not installed: pip install vmas, or pip install -e '.[vmas]' in a checkout") from None
    return vmas


def scenario_names() -> list[str]:
    """The scenario names ``vmas.make_env`` accepts: the file names under ``vmas/scenarios``
    (``mpe`` and ``debug`` included), without ``.py``."""
    root = Path(_vmas().__file__).parent / "scenarios"
    return sorted({Path(f).stem for _, _, files in os.walk(root) for f in files
                   if f.endswith(".py") and f != "__init__.py"})


def _check_scenario(name: str) -> None:
    known = scenario_names()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
        raise ValueError(f"unknown VMAS scenario {name!r}; {hint}")


def _seeded_rng(seed: int) -> list[Any]:
    """The (torch CPU, numpy, Python) generator states VMAS's own seeding leaves for ``seed``,
    made without touching the global generators."""
    import numpy as np

    return [torch.Generator().manual_seed(seed).get_state(), np.random.RandomState(seed).get_state(),
            random.Random(seed).getstate()]


# ---------------------------------------------------------------------------------------- batched reset

def _walked(obj: Any, scenario_module: str) -> bool:
    """Whether the per-env state walk looks inside ``obj``: VMAS's own objects (world, entities,
    their states, actions, dynamics, sensors) and those of the scenario's module."""
    if not hasattr(obj, "__dict__") or isinstance(obj, type):
        return False
    module = type(obj).__module__ or ""
    ours = module == scenario_module or module.startswith("vmas.")
    return ours and not module.startswith("vmas.simulator.rendering")


def batch_tensors(scenario: Any, num_envs: int) -> dict[str, tuple[Any, Any, torch.Tensor]]:
    """Every tensor reachable from ``scenario`` whose leading dimension is ``num_envs``, as
    ``{path: (holder, key, tensor)}`` (``path`` like ``"_world._agents.0._state._pos"``; ``holder``
    is an object, ``key`` its attribute, or a list or dict and the index or key). These are the
    scenario's per-env state: VMAS batches everything along that dimension."""
    found: dict[str, tuple[Any, Any, torch.Tensor]] = {}
    seen: set[int] = set()
    module = type(scenario).__module__ or ""
    stack: list[tuple[str, Any]] = [("", scenario)]
    while stack:
        path, holder = stack.pop()
        if id(holder) in seen:
            continue
        seen.add(id(holder))
        if isinstance(holder, dict):
            items: Any = holder.items()
        elif isinstance(holder, (list, tuple)):
            items = enumerate(holder)
        else:
            items = vars(holder).items()
        for key, value in items:
            where = f"{path}.{getattr(key, 'name', key)}" if path else str(key)  # dicts keyed by entities
            if isinstance(value, torch.Tensor):
                if value.dim() and value.shape[0] == num_envs and not isinstance(holder, tuple):
                    found[where] = (holder, key, value)
            elif isinstance(value, (list, tuple, dict)) or _walked(value, module):
                stack.append((where, value))
    return found


def _put(holder: Any, key: Any, value: torch.Tensor) -> None:
    if isinstance(holder, (list, dict)):
        holder[key] = value
    else:
        vars(holder)[key] = value  # the raw attribute (``_pos``), as VMAS's own setters store it


def _by_holder(scenario: Any, num_envs: int) -> dict[tuple[int, Any], tuple[str, Any, Any, torch.Tensor]]:
    """:func:`batch_tensors` keyed by (holder identity, key): a reset may re-point a reference
    (a new goal entity), and a path would then name another holder."""
    return {(id(h), k): (path, h, k, t) for path, (h, k, t) in batch_tensors(scenario, num_envs).items()}


def blended_reset(env: Any, done: torch.Tensor) -> None:
    """Reset the envs where ``done`` (bool ``[N]``) of VMAS environment ``env`` in one vectorized
    reset, leaving the others as they were (module docstring). The caller provides VMAS's RNG
    context. Raises where the scenario's reset does, or ``ValueError`` where a per-env tensor
    changes shape or dtype; the state is then put back as it was."""
    scenario, n = env.scenario, env.num_envs
    if bool(done.all()):
        scenario.env_reset_world_at(None)
        env.steps.zero_()
        return
    saved = {loc: (path, h, k, t.clone()) for loc, (path, h, k, t) in _by_holder(scenario, n).items()}
    try:
        scenario.env_reset_world_at(None)
        after = _by_holder(scenario, n)
        for loc, (path, _, _, new) in after.items():
            old = saved[loc][3] if loc in saved else None
            if old is not None and (old.shape != new.shape or old.dtype != new.dtype):
                raise ValueError(f"per-env tensor {path} changed from {tuple(old.shape)} {old.dtype} to "
                                 f"{tuple(new.shape)} {new.dtype} in a reset")
    except Exception:
        for _, holder, key, t in saved.values():
            _put(holder, key, t)
        raise
    blended: dict[int, torch.Tensor] = {}  # one result per tensor: a tensor held in two places stays shared
    for loc, (_, holder, key, new) in after.items():
        if loc not in saved:
            continue  # made by the reset itself: nothing of the running envs to keep
        if id(new) not in blended:
            fresh = done.view(n, *([1] * (new.dim() - 1)))
            blended[id(new)] = torch.where(fresh, new, saved[loc][3])
        _put(holder, key, blended[id(new)])
    env.steps.masked_fill_(done, 0)


# ---------------------------------------------------------------------------------------- the env

def _own_action(space: Any, name: str) -> AgentActionSpec:
    """One agent's action (VMAS's gym space) as this package's spec."""
    kind = type(space).__name__
    if kind == "Discrete":
        return AgentDiscrete(int(space.n), 1)
    if kind == "MultiDiscrete":
        return AgentMultiDiscrete(tuple(int(k) for k in space.nvec), 1)
    if kind == "Box" and len(space.shape) == 1:
        return AgentBox(tuple(space.shape), tuple(float(v) for v in space.low), tuple(float(v) for v in space.high), 1)
    raise ValueError(f"VMAS scenario {name!r}: unsupported action space {space!r}")


def _action_spec(spaces: list[Any], name: str, names: tuple[str, ...], widths: list[int]
                 ) -> tuple[AgentActionSpec, list[int] | None]:
    """The per-agent action spec of VMAS's per-agent gym spaces (:func:`joint_action_spec`), and each
    agent's number of discrete actions where they differ (``None`` otherwise)."""
    own = [_own_action(s, name) for s in spaces]
    spec = joint_action_spec(tuple(AgentSpace(a, w, o) for a, w, o in zip(names, widths, own)))
    counts = [o.n for o in own] if isinstance(spec, AgentDiscrete) else []
    return spec, (counts if len(set(counts)) > 1 else None)


class VmasVecEnv(VecEnv):
    """``num_envs`` copies of VMAS scenario ``scenario`` as one multi-agent batch (module docstring).

    Parameters
        scenario: a VMAS scenario name (``balance``, ``transport``, ``simple_spread``, ...).
        num_envs, device, seed: batch size ``N``, VMAS's device, the seed (``None``: OS entropy).
        continuous_actions: ``AgentBox`` actions instead of ``AgentDiscrete``.
        multidiscrete_actions: with discrete actions, VMAS's ``AgentMultiDiscrete`` form.
        max_steps: the time limit (truncation), ``None`` for none.
        reward: ``"agent"`` (``[N, n]``) or ``"team"`` (``[N]``, the mean over agents).
        batched_reset: reset finished envs in one vectorized reset (``False``: VMAS's ``reset_at``
            loop; ``None``: batched for :data:`BATCHED_RESET_SCENARIOS`, the loop for the others).
        scenario_kwargs: the scenario's own settings (``n_agents=4``, ...).
    """

    def __init__(self, scenario: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 continuous_actions: bool = False, multidiscrete_actions: bool = False, max_steps: int | None = 100,
                 reward: str = "agent", batched_reset: bool | None = None, **scenario_kwargs: Any) -> None:
        vmas = _vmas()
        _check_scenario(scenario)
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {max_steps!r}")
        from vmas.simulator.environment.environment import Environment, local_seed

        self.scenario = scenario
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.max_steps = max_steps
        self.reward_mode = reward
        if batched_reset is None:
            batched_reset = scenario in BATCHED_RESET_SCENARIOS
            if not batched_reset and scenario not in _LOOP_WARNED:
                _LOOP_WARNED.add(scenario)
                warnings.warn(f"VMAS scenario {scenario!r}: auto-reset by VMAS's reset_at loop (slower at large "
                              "num_envs); its batched reset is not verified (batched_reset=True forces it)",
                              stacklevel=2)
        self.batched_reset = bool(batched_reset)
        self._shared_rng, self._local_seed = Environment.vmas_random_state, local_seed
        seed = int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little")  # VMAS would take 0
        self._rng = _seeded_rng(seed)
        with self._own_rng():
            self.env = vmas.make_env(scenario, num_envs=self.num_envs, device=self.device,
                                     continuous_actions=continuous_actions, multidiscrete_actions=multidiscrete_actions,
                                     max_steps=max_steps, seed=seed, dict_spaces=False,
                                     terminated_truncated=True, clamp_actions=True, **scenario_kwargs)
        self.num_agents = self.env.n_agents
        self.agent_names = tuple(a.name for a in self.env.agents)
        self._init_specs(list(self.env.observation_space), list(self.env.action_space))

    def _init_specs(self, obs_spaces: list[Any], act_spaces: list[Any]) -> None:
        """Observation and action specs (and the padding mask) from VMAS's per-agent gym spaces."""
        n = self.num_agents
        for space in obs_spaces:
            if type(space).__name__ != "Box" or len(space.shape) != 1:
                raise ValueError(f"VMAS scenario {self.scenario!r}: observations must be flat tensors per agent, "
                                 f"got {space!r}; unsupported")
        self._obs_widths = [int(s.shape[0]) for s in obs_spaces]
        width = max(self._obs_widths)
        self._padded = len(set(self._obs_widths)) > 1
        self.action_spec, counts = _action_spec(act_spaces, self.scenario, self.agent_names, self._obs_widths)
        self.observation_spec = {
            STATE: TensorSpec((sum(self._obs_widths),), torch.float32),
            AGENT_OBS: TensorSpec((n, width), torch.float32),
        }
        self._mask = None
        if counts is not None:
            own = torch.tensor(counts, device=self.device)[:, None]
            self._mask = torch.arange(self.action_spec.n, device=self.device) < own  # [n, width]
            self.observation_spec[ACTION_MASK] = TensorSpec((n, self.action_spec.n), torch.bool)

    @contextlib.contextmanager
    def _own_rng(self) -> Iterator[None]:
        """VMAS's shared generator state swapped for this env's own while VMAS runs."""
        shared = self._shared_rng
        others = shared[:]
        shared[:] = self._rng
        try:
            yield
        finally:
            self._rng = shared[:]
            shared[:] = others

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs (VMAS's vectorized reset); ``seed`` reseeds this env's generators."""
        with self._own_rng():
            return self._observe(self.env.reset(seed=seed))

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)
        with self._own_rng():
            per_agent = [action[:, i] for i in range(self.num_agents)]
            if isinstance(self.action_spec, AgentMixed):  # each agent's own values out of its row
                per_agent = [from_mixed_row(a, s.action) for a, s in zip(per_agent, self.action_spec.agents)]
            obs_list, rewards, terminated, truncated, infos = self.env.step(per_agent)
        final_obs = self._observe(obs_list)
        terminated = terminated if terminated.dtype == torch.bool else terminated.bool()
        done = terminated | truncated
        obs = final_obs
        idx = done.nonzero().squeeze(1)
        if idx.numel():
            self._notify_autoreset(idx)
            fresh = self.reset_envs(done)
            # The running envs' rows stay final_obs: an observation need not be a pure function of
            # the state (a scenario may add noise), and theirs was already given.
            obs = {key: torch.where(done.view(-1, *([1] * (t.dim() - 1))), t, final_obs[key])
                   for key, t in fresh.items()}
        reward = torch.stack(rewards, dim=1).view(self.num_envs, self.num_agents)  # some give [N, 1] per agent
        if self.reward_mode == "team":
            reward = reward.mean(dim=1)
        return StepResult(obs, reward, terminated, truncated, final_obs, self._info(infos))

    def reset_envs(self, done: torch.Tensor) -> Obs:
        """Reset the envs where ``done`` (bool ``[N]``) as the auto-reset does (the others keep
        their state); returns every env's observations."""
        with self._own_rng():
            self._reset_vmas(done)
            return self._observe(self.env.get_from_scenario(get_observations=True, get_rewards=False,
                                                            get_infos=False, get_dones=False)[0])

    def close(self) -> None:
        """VMAS holds no processes or files; a viewer, if one was opened, is closed."""
        viewer = getattr(self.env, "viewer", None)
        if viewer is not None:
            viewer.close()

    def __repr__(self) -> str:
        return f"VmasVecEnv({self.scenario!r}, num_envs={self.num_envs}, device={str(self.device)!r})"

    # ------------------------------------------------------------------ helpers

    def _reset_vmas(self, done: torch.Tensor) -> None:
        """Reset VMAS's envs where ``done`` (bool ``[N]``): batched, or by the ``reset_at`` loop."""
        if self.batched_reset:
            try:
                with self._local_seed(self._shared_rng):
                    blended_reset(self.env, done)
                return
            except Exception as err:  # noqa: BLE001 - whatever the scenario's reset raised, the loop remains
                warnings.warn(f"VMAS scenario {self.scenario!r}: batched reset failed ({type(err).__name__}: {err}); "
                              "resetting finished envs one by one from now on", stacklevel=4)
                self.batched_reset = False
        for i in done.nonzero().squeeze(1).tolist():
            self.env.reset_at(i, return_observations=False)

    def _observe(self, obs_list: list[torch.Tensor]) -> Obs:
        """``{"state": [N, S], "obs": [N, n, O]}`` (and ``action_mask``) from VMAS's per-agent ``[N, O_i]``."""
        if not self._padded:
            obs = torch.stack(obs_list, dim=1)
            state = obs.view(self.num_envs, -1)
        else:
            obs = torch.zeros((self.num_envs, *self.observation_spec[AGENT_OBS].shape), device=self.device)
            for i, (o, w) in enumerate(zip(obs_list, self._obs_widths)):
                obs[:, i, :w] = o
            state = torch.cat(obs_list, dim=1)
        out = {STATE: state, AGENT_OBS: obs}
        if self._mask is not None:
            out[ACTION_MASK] = self._mask.expand(self.num_envs, -1, -1).clone()
        return out

    def _info(self, infos: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Per-env ``[N]`` entries of VMAS's per-agent info (module docstring)."""
        out: dict[str, torch.Tensor] = {}
        for key in infos[0] if infos else ():
            values = [info.get(key) for info in infos]
            if not all(isinstance(v, torch.Tensor) and v.numel() == self.num_envs for v in values):
                continue
            stacked = torch.stack([v.reshape(self.num_envs) for v in values], dim=1)
            out[key] = stacked.any(dim=1) if stacked.dtype == torch.bool else stacked.float().mean(dim=1)
        return out
